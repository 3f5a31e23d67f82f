"""The JSON form of codec values that the Artemis vector tool writes and reads.

The Java tool (fixtures/java) dumps Artemis's own objects in this form, so a
Python value and an Artemis value are compared by comparing their JSON forms:
bytes as lowercase hex, enums as ints, tuples as lists, TypedProperties and
transport parameters as ``[key, type, value]`` triples in wire order, a
federation policy as its fields after the Java ``class_name`` written before it.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from typing import Any

from cck.codec import (
    CoreMessage,
    DiscoveryDatagram,
    FederationAddressPolicy,
    FederationCredentials,
    FederationPolicySet,
    FederationQueueMatcher,
    FederationQueuePolicy,
    FederationTransformer,
    Packet,
    PropertyType,
    ServerConnectVote,
    TransportConfiguration,
    TypedProperties,
    Xid,
)

__all__ = ["normalise", "to_json"]


def _float32(value: float) -> float:
    return float(struct.unpack(">f", struct.pack(">f", value))[0])


def to_json(value: Any) -> Any:
    """The JSON form of a codec value."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.IntEnum):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, TypedProperties):
        return [[e.key, int(e.type), to_json(e.value)] for e in value.entries]
    if isinstance(value, TransportConfiguration):
        return {
            "name": value.name,
            "factory_class_name": value.factory_class_name,
            "params": [[p.key, int(p.type), p.value] for p in value.params],
            "extra_props": [[p.key, int(p.type), p.value] for p in value.extra_props],
        }
    if isinstance(value, Xid):
        return {
            "format_id": value.format_id,
            "branch_qualifier": value.branch_qualifier.hex(),
            "global_transaction_id": value.global_transaction_id.hex(),
        }
    if isinstance(value, (FederationQueuePolicy, FederationAddressPolicy, FederationPolicySet)):
        fields = {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"class_name": value.JAVA_CLASS, **fields}
    if isinstance(
        value,
        (Packet, CoreMessage, DiscoveryDatagram, FederationCredentials, FederationQueueMatcher, FederationTransformer,
         ServerConnectVote),
    ):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}  # type: ignore[arg-type]
    if isinstance(value, (tuple, list)):
        return [to_json(v) for v in value]
    raise TypeError(f"no JSON form for {type(value).__name__}")


def normalise(value: Any) -> Any:
    """Make two JSON forms comparable: FLOAT property values compared as float32,
    and the order of property entries ignored (Java HashMap order), a message's
    ``[key, type, value]`` entries as a federation transformer's ``[key, value]`` ones."""
    if isinstance(value, dict):
        out = {k: normalise(v) for k, v in value.items()}
        props = out.get("properties")
        if isinstance(props, list) and any(len(entry) == 2 for entry in props):
            out["properties"] = sorted(props, key=repr)
        elif isinstance(props, list):
            out["properties"] = sorted(
                ([k, t, _float32(v) if t == PropertyType.FLOAT and v is not None else v] for k, t, v in props),
                key=repr,
            )
        return out
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value
