"""FEDERATION_DOWNSTREAM_CONNECT beyond its Artemis vectors (test_artemis_vectors): the builder's defaults are
what Artemis writes for a default connection configuration, and the federation policies and transformer
configurations the codec does not model are refused where their count is, not misread."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from cck.codec import (
    EncodeError,
    FederationCredentials,
    FederationDownstreamConnectMessage,
    MalformedFrame,
    TransportConfiguration,
    TransportParam,
    TransportParamType,
    decode_frame,
    encode_packet,
)
from cck.codec._packets.federation import FEDERATION_CREDENTIALS
from cck.codec._primitives import NB, Str

VECTORS = Path(__file__).resolve().parents[2] / "fixtures" / "vectors" / "packets.jsonl"
HEADER = 13


def _artemis(vector_id: str) -> bytes:
    with VECTORS.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record["id"] == vector_id:
                return bytes.fromhex(record["hex"])
    raise LookupError(vector_id)


NO_CREDENTIALS = _artemis("FEDERATION_DOWNSTREAM_CONNECT/no-credentials@136")
NULL_PASSWORD = _artemis("FEDERATION_DOWNSTREAM_CONNECT/credentials-null-password@136")


def test_the_builder_defaults_are_what_artemis_writes_for_a_default_connection_configuration() -> None:
    upstream = TransportConfiguration("netty", params=(TransportParam("host", TransportParamType.STRING, "localhost"),
                                                       TransportParam("port", TransportParamType.INT, 61616)))
    packet = FederationDownstreamConnectMessage(name="fed-1", stream_name="down-1", upstream=upstream)
    assert encode_packet(packet, 4) == NO_CREDENTIALS


def _policy_count_offset(frame: bytes) -> int:
    packet = decode_frame(frame).packet
    assert isinstance(packet, FederationDownstreamConnectMessage)
    return HEADER + len(Str.build(packet.name)) + len(NB(FEDERATION_CREDENTIALS).build(packet.credentials))


@pytest.mark.parametrize("frame", [NO_CREDENTIALS, NULL_PASSWORD], ids=["no-credentials", "credentials"])
@pytest.mark.parametrize(("field", "after", "items"), [("policies", 0, "federation policies"),
                                                       ("transformers", 4, "transformer configurations")])
def test_a_frame_with_policies_or_transformers_is_refused_at_their_count(
    frame: bytes, field: str, after: int, items: str
) -> None:
    at = _policy_count_offset(frame) + after
    assert frame[at:at + 4] == bytes(4)
    # One policy: its class name and encoding would follow; the frame is otherwise Artemis's own.
    patched = frame[:at] + struct.pack(">i", 1) + frame[at + 4:]
    with pytest.raises(MalformedFrame) as caught:
        decode_frame(patched)
    error = caught.value
    assert (error.offset, error.field_path, error.expected, error.found) == (at, field, "0", "1")
    assert error.packet_type == "FEDERATION_DOWNSTREAM_CONNECT"
    assert f"the codec does not decode {items}" in str(error)


def test_a_negative_count_is_refused_too() -> None:
    at = _policy_count_offset(NO_CREDENTIALS)
    with pytest.raises(MalformedFrame, match=f"at offset {at} \\(policies\\).*found -1"):
        decode_frame(NO_CREDENTIALS[:at] + struct.pack(">i", -1) + NO_CREDENTIALS[at + 4:])


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
