"""Artemis decodes the bytes this codec makes: random packets of every type
(hypothesis, derandomised) are encoded in Python and decoded by Artemis 2.44.0's
own decoders through the Java tool, which reports the fields it read."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from cck.codec import PACKET_CLASSES, Packet, PacketType, decode_frame, encode_packet
from cck.conformance.artemis.distribution import ensure_distribution
from cck.conformance.artemis.java_tools import build_tools, run_tool

from ..codec.jsonform import normalise, to_json
from ..codec.strategies import packets_of
from ..codec.test_artemis_vectors import ABSENT_DEFAULTS

pytestmark = pytest.mark.artemis
EXAMPLES_PER_TYPE = 6
# Message packets change layout with the version: 1.x (< 129), 2.0, 2.7, 2.28+.
VERSIONS = {
    PacketType.SESS_SEND: (121, 128, 129, 131, 134, 136),
    PacketType.SESS_RECEIVE_MSG: (121, 128, 129, 136),
    PacketType.SESS_SEND_CONTINUATION: (129, 131, 136),
}


def artemis_decode(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Decode frames with Artemis's classes (one JVM for the whole batch)."""
    dist = ensure_distribution()
    classes = build_tools(dist)
    feed = io.BytesIO("".join(json.dumps(r) + "\n" for r in records).encode())
    result = run_tool(dist, classes, ["decode"], stdin=feed, timeout_s=300)
    return [json.loads(line) for line in result.stdout.decode().splitlines() if line.strip()]


# Lists that are Java HashMaps or HashSets on the Artemis side: TransportConfiguration params; a federation stream's
# policy refs, its policy and transformer maps, a policy's matchers and a policy set's refs.
_UNORDERED = ("params", "extra_props", "policy_refs", "policies", "transformers", "includes", "excludes")


def _sorted_params(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _sorted_params(v) for k, v in value.items()}
        for key in _UNORDERED:
            if key in out and isinstance(out[key], list):
                out[key] = sorted(out[key], key=lambda item: json.dumps(item, sort_keys=True))
        return out
    if isinstance(value, list):
        return [_sorted_params(v) for v in value]
    return value


@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
def test_artemis_decodes_codec_frames_of_every_type() -> None:
    # One batch for one JVM: draw the examples up front (a failure message
    # prints the packet, so a failing example is reproducible by hand).
    sent: dict[str, Packet] = {}
    records = []
    for packet_type, cls in PACKET_CLASSES.items():
        strategy = packets_of(cls)
        for i in range(EXAMPLES_PER_TYPE):
            for version in VERSIONS.get(packet_type, (136,)):
                frame = encode_packet(strategy.example(), 10, version=version)
                # What the frame says at this version (fields a version lacks drop out).
                packet = decode_frame(frame, version=version).packet
                ident = f"{packet_type.name}/{i}@{version}"
                sent[ident] = packet
                records.append({"id": ident, "kind": "packet", "version": version, "hex": frame.hex()})
    answers = {a["id"]: a for a in artemis_decode(records)}
    failures = []
    for ident, packet in sent.items():
        answer = answers[ident]
        if "error" in answer:
            failures.append(f"{ident}: Artemis could not decode: {answer['error']}")
            continue
        expected = _sorted_params(normalise(to_json(packet)))
        theirs = _sorted_params(normalise(answer["fields"]))
        for key, default in ABSENT_DEFAULTS.items():
            # A trailing field left off the wire: Artemis's decoder fills in a default.
            if key in expected and expected[key] is None and theirs.get(key) in default:
                theirs[key] = None
        if answer["name"] != packet.type_name() or theirs != expected:
            failures.append(f"{ident}: Artemis read {answer['fields']!r}, codec wrote {expected!r}")
    print(f"\nArtemis decoded {len(sent) - len(failures)} of {len(sent)} codec-made frames "
          f"({len(PACKET_CLASSES)} packet types) to the same fields")
    assert not failures, "\n".join(failures[:20])
