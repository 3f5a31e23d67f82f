"""Vectors written by Artemis 2.44.0's own classes (fixtures/vectors, regenerated
by ``cck artemis vectors``): the codec decodes each to the
recorded fields and encodes those fields back to the same bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cck.codec import PACKET_CLASSES, MalformedFrame, decode_discovery, decode_frame, encode_discovery, encode_packet
from cck.codec import _primitives as p
from cck.codec._format import build_format, parse_format
from cck.codec._structures import MESSAGE, TRANSPORT_CONFIGURATION, TYPED_PROPERTIES, XID

from .jsonform import normalise, to_json

VECTORS = Path(__file__).resolve().parents[2] / "fixtures" / "vectors"


def _load(name: str) -> list[dict[str, Any]]:
    with (VECTORS / name).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


PACKETS = _load("packets.jsonl")
CROSS_VERSION = _load("packets_cross_version.jsonl")
PRIMITIVES = _load("primitives.jsonl")
TYPED_PROPS = _load("typed_properties.jsonl")
STRUCTURES = _load("structures.jsonl")
MANIFEST = json.loads((VECTORS / "manifest.json").read_text(encoding="utf-8"))

ENCODINGS = {
    "string": p.Str,
    "nullable_string": p.N1(p.Str),
    "simple_string": p.SimpleStr,
    "nullable_simple_string": p.N1(p.SimpleStr),
    "bool": p.Bool,
    "nullable_int": p.N1(p.I32),
    "nullable_long": p.N1(p.I64),
    "nullable_boolean": p.N1(p.Bool),
    "helper_nullable_int": p.NB(p.I32),
    "helper_nullable_long": p.NB(p.I64),
    "helper_nullable_boolean": p.NB(p.Bool),
    "helper_nullable_double": p.NB(p.F64),
    "bytes": p.Bytes,
}
STRUCTURE_FORMATS = {"xid": XID, "transport_configuration": TRANSPORT_CONFIGURATION, "message": MESSAGE}


def _ids(records: list[dict[str, Any]]) -> list[str]:
    return [r["id"] for r in records]


@pytest.mark.parametrize("vector", PACKETS, ids=_ids(PACKETS))
def test_packet_vector(vector: dict[str, Any]) -> None:
    data = bytes.fromhex(vector["hex"])
    frame = decode_frame(data, version=vector["version"])
    assert int(frame.packet.TYPE) == vector["type"]
    assert frame.packet.type_name() == vector["name"]
    assert frame.channel_id == vector["channel"]
    assert normalise(to_json(frame.packet)) == normalise(vector["fields"])
    assert encode_packet(frame.packet, frame.channel_id, version=vector["version"]) == data


# Artemis's V2 decoders fill in a default for a trailing field that is not on
# the wire; the codec reports it as absent (None) instead, so that re-encoding
# reproduces the bytes.  These are the only fields where the two may differ.
ABSENT_DEFAULTS = {"correlation_id": (0, -1), "priority": (0,), "sender_id": (0,)}


# Artemis's decoders ignore bytes after the last field they know; the codec
# refuses them (a peer that sends them is talking another version).  Vectors
# that rely on Artemis ignoring a newer layout's tail are therefore rejected,
# with an error that says so.
STRICTER_THAN_ARTEMIS = {"SESS_SEND_CONTINUATION/v2-read-by-v1@129"}


@pytest.mark.parametrize("vector", CROSS_VERSION, ids=_ids(CROSS_VERSION))
def test_cross_version_vector(vector: dict[str, Any]) -> None:
    data = bytes.fromhex(vector["hex"])
    if vector["id"] in STRICTER_THAN_ARTEMIS:
        with pytest.raises(MalformedFrame, match="unexpected bytes after the last field"):
            decode_frame(data, version=vector["version"])
        return
    packet = decode_frame(data, version=vector["version"]).packet
    ours = to_json(packet)
    for key, theirs in vector["fields"].items():
        if ours[key] is None and theirs is not None:
            assert theirs in ABSENT_DEFAULTS.get(key, ()), f"{key}: codec None, Artemis {theirs!r}"
        else:
            assert normalise(ours[key]) == normalise(theirs), key
    assert encode_packet(packet, vector["channel"], version=vector["written_at_version"]) == data


@pytest.mark.parametrize("vector", PRIMITIVES, ids=_ids(PRIMITIVES))
def test_primitive_vector(vector: dict[str, Any]) -> None:
    fmt = ENCODINGS[vector["encoding"]]
    data = bytes.fromhex(vector["hex"])
    value = parse_format(fmt, data, what=vector["encoding"], version=136)
    assert to_json(value) == vector["value"]
    assert build_format(fmt, value, what=vector["encoding"], version=136) == data


@pytest.mark.parametrize("vector", TYPED_PROPS, ids=_ids(TYPED_PROPS))
def test_typed_properties_vector(vector: dict[str, Any]) -> None:
    data = bytes.fromhex(vector["hex"])
    value = parse_format(TYPED_PROPERTIES, data, what="TypedProperties", version=136)
    assert to_json(value) == vector["value"]
    assert build_format(TYPED_PROPERTIES, value, what="TypedProperties", version=136) == data


@pytest.mark.parametrize("vector", STRUCTURES, ids=_ids(STRUCTURES))
def test_structure_vector(vector: dict[str, Any]) -> None:
    data = bytes.fromhex(vector["hex"])
    if vector["kind"] == "discovery":
        datagram = decode_discovery(data)
        assert to_json(datagram) == vector["value"]
        assert encode_discovery(datagram) == data
        return
    fmt = STRUCTURE_FORMATS[vector["kind"]]
    value = parse_format(fmt, data, what=vector["kind"], version=136)
    assert normalise(to_json(value)) == normalise(vector["value"])
    assert build_format(fmt, value, what=vector["kind"], version=136) == data


def test_every_packet_type_and_encoding_branch_has_an_artemis_vector() -> None:
    covered = {v["name"] for v in PACKETS}
    missing = sorted(t.name for t in PACKET_CLASSES if t.name not in covered)
    print(f"\npacket types proven against Artemis {MANIFEST['artemis_version']} vectors: "
          f"{len(covered & {t.name for t in PACKET_CLASSES})} of {len(PACKET_CLASSES)}")
    assert not missing, f"no Artemis vector for {missing}"
    lengths = {len(v["value"]) for v in PRIMITIVES if v["encoding"] == "string" and v["value"] is not None}
    assert {8, 9, 4094, 4095} <= lengths  # all three writeString forms and both boundaries
    tags = {entry[1] for v in TYPED_PROPS for entry in v["value"]}
    assert tags == {0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
