"""FEDERATION_DOWNSTREAM_CONNECT beyond the generic vector test (test_artemis_vectors): the builder's defaults are
what Artemis writes for a default connection configuration; federation policies and transformers built in Python
are the bytes Artemis wrote (compared as sets where Artemis keeps a HashSet or HashMap); a policy class the codec
does not know is refused at its class name's offset."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import pytest

from cck.codec import (
    EncodeError,
    FederationAddressPolicy,
    FederationCredentials,
    FederationDownstreamConnectMessage,
    FederationPolicySet,
    FederationQueueMatcher,
    FederationQueuePolicy,
    FederationTransformer,
    MalformedFrame,
    TransportConfiguration,
    TransportParam,
    TransportParamType,
    decode_frame,
    encode_packet,
)
from cck.codec._packets.federation import FEDERATION_CREDENTIALS, FEDERATION_POLICY_FORMATS
from cck.codec._primitives import NB, Str

from .vectors import artemis_bytes

HEADER = 13
CONFIG = "org.apache.activemq.artemis.core.config.federation."
NO_CREDENTIALS = artemis_bytes("FEDERATION_DOWNSTREAM_CONNECT/no-credentials@136")
NULL_PASSWORD = artemis_bytes("FEDERATION_DOWNSTREAM_CONNECT/credentials-null-password@136")
QUEUE_POLICY = artemis_bytes("FEDERATION_DOWNSTREAM_CONNECT/queue-policy@136")
ADDRESS_POLICY = artemis_bytes("FEDERATION_DOWNSTREAM_CONNECT/address-policy@136")
ALL = artemis_bytes("FEDERATION_DOWNSTREAM_CONNECT/policies-set-transformer@136")
UPSTREAM = TransportConfiguration(
    "upstream",
    params=(TransportParam("host", TransportParamType.STRING, "broker-a.example"),
            TransportParam("port", TransportParamType.STRING, "61617")),
)


def test_the_builder_defaults_are_what_artemis_writes_for_a_default_connection_configuration() -> None:
    upstream = TransportConfiguration("netty", params=(TransportParam("host", TransportParamType.STRING, "localhost"),
                                                       TransportParam("port", TransportParamType.INT, 61616)))
    packet = FederationDownstreamConnectMessage(name="fed-1", stream_name="down-1", upstream=upstream)
    assert encode_packet(packet, 4) == NO_CREDENTIALS


def test_the_policy_table_names_artemis_classes() -> None:
    assert set(FEDERATION_POLICY_FORMATS) == {CONFIG + "FederationQueuePolicyConfiguration",
                                              CONFIG + "FederationAddressPolicyConfiguration",
                                              CONFIG + "FederationPolicySet"}
    for name, fmt in FEDERATION_POLICY_FORMATS.items():
        assert name == fmt.cls.JAVA_CLASS


def test_a_queue_policy_built_in_python_is_what_artemis_wrote() -> None:
    policy = FederationQueuePolicy(name="queue-federation", include_federated=True, priority_adjustment=1,
                                   includes=(FederationQueueMatcher("orders.#", "#"),),
                                   excludes=(FederationQueueMatcher("#", "#.local"),))
    packet = FederationDownstreamConnectMessage(name="federation-a", policies=(policy,),
                                                stream_name="downstream-queues", policy_refs=("queue-federation",),
                                                upstream=UPSTREAM)
    assert encode_packet(packet, 4) == QUEUE_POLICY
    assert decode_frame(QUEUE_POLICY).packet == packet


def test_an_address_policy_built_in_python_is_what_artemis_wrote() -> None:
    # Artemis's includes are a HashSet: the vector has them in its iteration order, which the codec keeps.
    decoded = decode_frame(ADDRESS_POLICY).packet
    assert isinstance(decoded, FederationDownstreamConnectMessage)
    (policy,) = decoded.policies
    assert isinstance(policy, FederationAddressPolicy)
    assert set(policy.includes) == {"news.#", "events.*"}
    expected = FederationAddressPolicy(name="news-federation", auto_delete=True, auto_delete_delay=300000,
                                       auto_delete_message_count=-1, max_hops=1, includes=policy.includes,
                                       excludes=("news.internal.#",), enable_divert_bindings=True)
    assert policy == expected
    packet = FederationDownstreamConnectMessage(name="federation-a", policies=(expected,),
                                                stream_name="downstream-addresses", policy_refs=("news-federation",),
                                                upstream=UPSTREAM)
    assert encode_packet(packet, 4) == ADDRESS_POLICY


def _unordered(value: Any) -> Any:
    """``value`` with every tuple a frozenset, recursively: what survives Artemis's HashSets and HashMaps."""
    if isinstance(value, tuple):
        return frozenset(_unordered(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value), tuple((f.name, _unordered(getattr(value, f.name))) for f in dataclasses.fields(value)))
    return value


def test_policies_a_set_and_a_transformer_decode_to_what_was_configured_in_any_order() -> None:
    packet = decode_frame(ALL).packet
    assert isinstance(packet, FederationDownstreamConnectMessage)
    configured = FederationDownstreamConnectMessage(
        name="federation-a",
        credentials=FederationCredentials("fed-user", "fed-pass"),
        policies=(
            FederationPolicySet(name="policy-set", policy_refs=("address-policy", "queue-policy")),
            FederationAddressPolicy(name="address-policy", transformer_ref="strip-headers", includes=("#",)),
            FederationQueuePolicy(name="queue-policy", transformer_ref="strip-headers",
                                  includes=(FederationQueueMatcher(None, "invoices.#"),
                                            FederationQueueMatcher("orders", "orders"))),
        ),
        transformers=(FederationTransformer(name="strip-headers", class_name="org.example.StripHeadersTransformer",
                                            properties=(("header", "x-internal"), ("mode", "drop"))),),
        stream_name="downstream-all",
        policy_refs=("policy-set",),
        upstream=UPSTREAM,
    )
    assert packet != configured  # the catalogue's order is not Artemis's HashMap order ...
    assert _unordered(packet) == _unordered(configured)  # ... but nothing else differs
    assert encode_packet(packet, 4) == ALL


def _policy_count_offset(frame: bytes) -> int:
    packet = decode_frame(frame).packet
    assert isinstance(packet, FederationDownstreamConnectMessage)
    return HEADER + len(Str.build(packet.name)) + len(NB(FEDERATION_CREDENTIALS).build(packet.credentials))


def _with_class_name(frame: bytes, old: str, new: str) -> bytes:
    """``frame`` with the first written class name ``old`` replaced by ``new`` (and the length prefix fixed)."""
    at = frame.index(Str.build(old))
    body = frame[4:at] + Str.build(new) + frame[at + len(Str.build(old)):]
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize("index", [0, 1, 2])
def test_an_unknown_policy_class_is_refused_at_its_class_name(index: int) -> None:
    packet = decode_frame(ALL).packet
    assert isinstance(packet, FederationDownstreamConnectMessage)
    victim = packet.policies[index]
    # Where the victim's class name starts: after the count and the policies before it (each of another class).
    at = _policy_count_offset(ALL) + 4 + sum(
        len(Str.build(type(p).JAVA_CLASS)) + len(FEDERATION_POLICY_FORMATS[type(p).JAVA_CLASS].build(p))
        for p in packet.policies[:index]
    )
    patched = _with_class_name(ALL, type(victim).JAVA_CLASS, "com.example.CustomFederationPolicy")
    assert patched[at:at + 4] == struct.pack(">i", len("com.example.CustomFederationPolicy"))
    with pytest.raises(MalformedFrame) as caught:
        decode_frame(patched)
    error = caught.value
    assert (error.offset, error.field_path, error.found) == (at, f"policies -> [{index}]",
                                                             "com.example.CustomFederationPolicy")
    assert error.packet_type == "FEDERATION_DOWNSTREAM_CONNECT"
    assert "unknown federation policy class" in str(error)
    assert error.expected == ("FederationQueuePolicyConfiguration or FederationAddressPolicyConfiguration or "
                              "FederationPolicySet")


@pytest.mark.parametrize("frame", [NO_CREDENTIALS, NULL_PASSWORD], ids=["no-credentials", "credentials"])
@pytest.mark.parametrize(("field", "after"), [("policies", 0), ("transformers", 4)])
def test_a_count_the_frame_cannot_hold_is_refused_at_the_count(frame: bytes, field: str, after: int) -> None:
    at = _policy_count_offset(frame) + after
    assert frame[at:at + 4] == bytes(4)
    patched = frame[:at] + struct.pack(">i", 1_000_000) + frame[at + 4:]
    with pytest.raises(MalformedFrame) as caught:
        decode_frame(patched)
    error = caught.value
    assert (error.offset, error.field_path, error.found) == (at, field, "1000000")
    assert error.packet_type == "FEDERATION_DOWNSTREAM_CONNECT"


def test_a_negative_count_is_refused_too() -> None:
    at = _policy_count_offset(NO_CREDENTIALS)
    with pytest.raises(MalformedFrame, match=f"at offset {at} \\(policies\\).*found -1"):
        decode_frame(NO_CREDENTIALS[:at] + struct.pack(">i", -1) + NO_CREDENTIALS[at + 4:])


def test_only_policies_are_encoded_as_policies() -> None:
    transformer = FederationTransformer(name="t", class_name="T")
    packet = FederationDownstreamConnectMessage(name="f", policies=(transformer,),  # type: ignore[arg-type]
                                                stream_name="s", upstream=TransportConfiguration.netty("localhost", 1))
    with pytest.raises(EncodeError, match=r"policies -> \[0\].*expected a federation policy"):
        encode_packet(packet, 4)


def test_transformer_properties_are_key_value_pairs() -> None:
    transformer = FederationTransformer(name="t", class_name="T", properties=(("k", "v", "x"),))  # type: ignore[arg-type]
    packet = FederationDownstreamConnectMessage(name="f", transformers=(transformer,), stream_name="s",
                                                upstream=TransportConfiguration.netty("localhost", 1))
    with pytest.raises(EncodeError, match="key, value"):
        encode_packet(packet, 4)


def test_credentials_present_with_both_parts_null_differ_from_no_credentials() -> None:
    upstream = TransportConfiguration.netty("localhost", 61616)
    none = FederationDownstreamConnectMessage(name="f", stream_name="s", upstream=upstream)
    empty = FederationDownstreamConnectMessage(name="f", credentials=FederationCredentials(), stream_name="s",
                                               upstream=upstream)
    assert len(encode_packet(empty, 4)) == len(encode_packet(none, 4)) + 2
    assert decode_frame(encode_packet(empty, 4)).packet == empty
    assert decode_frame(encode_packet(none, 4)).packet == none


def test_policy_refs_must_be_strings() -> None:
    packet = FederationDownstreamConnectMessage(name="f", stream_name="s", policy_refs=(1,),  # type: ignore[arg-type]
                                                upstream=TransportConfiguration.netty("localhost", 61616))
    with pytest.raises(EncodeError, match="policy_refs"):
        encode_packet(packet, 4)
