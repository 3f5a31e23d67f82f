"""The struct baseline of benchmarks/codec_bench.py does exactly the codec's work.

The benchmark compares frames/s; that is only honest when the hand-written
baseline decodes the benchmark frames to the very objects ``codec.decode_frame``
gives (same classes, same field types: ``PropertyType`` not ``int``, ``bool``
not ``int``) and encodes the packets to the very bytes ``codec.encode_packet``
writes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from benchmarks import codec_bench
from benchmarks import struct_baseline as baseline
from benchmarks.frame_sets import SET_NAMES, VERSION, FrameSet, build_sets
from cck import codec
from cck.codec import (
    CoreMessage,
    NullResponseMessage,
    PacketsConfirmedMessage,
    PropertyType,
    SessionAcknowledgeMessage,
    SessionConsumerFlowCreditMessage,
    SessionReceiveMessage,
    SessionSendMessage,
    TypedProperties,
)
from cck.codec._packets._base import Packet

SETS = build_sets(size=60)


def _same(a: Any, b: Any) -> None:
    """Equal, and equal in repr: catches 6 vs PropertyType.INT, 1 vs True, bytearray vs bytes."""
    assert a == b
    assert repr(a) == repr(b)


@pytest.fixture(params=SET_NAMES)
def frame_set(request: pytest.FixtureRequest) -> FrameSet:
    return SETS[request.param]


def test_decodes_like_the_codec(frame_set: FrameSet) -> None:
    for frame, packet in zip(frame_set.frames, frame_set.packets, strict=True):
        expected = codec.decode_frame(frame, version=VERSION)
        _same(baseline.decode_frame(frame), expected)
        _same(expected.packet, packet)


def test_encodes_like_the_codec(frame_set: FrameSet) -> None:
    for frame, packet, channel in zip(frame_set.frames, frame_set.packets, frame_set.channels, strict=True):
        assert codec.encode_packet(packet, channel, version=VERSION) == frame
        assert baseline.encode_packet(packet, channel) == frame


def test_stream_decodes_like_the_frame_decoder(frame_set: FrameSet) -> None:
    decoder = codec.FrameDecoder(version=VERSION)
    decoder.feed(frame_set.stream)
    _same(list(baseline.iter_frames(frame_set.stream)), list(decoder))


def test_stream_ignores_a_partial_trailing_frame() -> None:
    stream = SETS["mixed"].stream
    frames = list(baseline.iter_frames(stream[:-1]))
    assert len(frames) == len(SETS["mixed"].frames) - 1


def test_sets_are_deterministic_and_as_described() -> None:
    again = build_sets(size=60)
    assert {n: s.frames for n, s in again.items()} == {n: s.frames for n, s in SETS.items()}
    send = SETS["SESS_SEND"].packets[0]
    assert isinstance(send, SessionSendMessage)
    assert len(send.message.body) == 1024
    assert send.message.durable
    assert send.message.address
    assert len(send.message.properties) == 5
    assert len({send.message.properties.type_of(k) for k in send.message.properties}) == 5
    receive = SETS["SESS_RECEIVE_MSG"].packets[0]
    assert isinstance(receive, SessionReceiveMessage)
    assert receive.message.message_id != 0
    assert (receive.consumer_id, receive.delivery_count) == (0, 1)
    mixed = {type(p) for p in SETS["mixed"].packets}
    assert mixed == baseline.SUPPORTED


_ALL_TYPES = TypedProperties.typed(
    ("null", PropertyType.NULL, None),
    ("flag", PropertyType.BOOLEAN, False),
    ("b", PropertyType.BYTE, -7),
    ("raw", PropertyType.BYTES, b"\x00\xff"),
    ("s", PropertyType.SHORT, -300),
    ("i", PropertyType.INT, 2**31 - 1),
    ("l", PropertyType.LONG, -(2**63)),
    ("f", PropertyType.FLOAT, 1.5),
    ("d", PropertyType.DOUBLE, -0.25),
    ("text", PropertyType.STRING, "h\u00e9llo \U0001f600"),
    ("c", PropertyType.CHAR, "\u20ac"),
)

_FULL = CoreMessage(b"x" * 3, 2**62, "q", bytes(16), durable=True, properties=_ALL_TYPES)
EDGE_CASES: list[Packet] = [
    SessionSendMessage(CoreMessage(properties=_ALL_TYPES), False, correlation_id=-1, sender_id=7),
    SessionSendMessage(CoreMessage(b"", 0, None, None), True, correlation_id=0, sender_id=0),
    SessionReceiveMessage(_FULL, 5, 9),
    PacketsConfirmedMessage(-1),
    SessionAcknowledgeMessage(3, 4, True),
    SessionConsumerFlowCreditMessage(3, -1),
    NullResponseMessage(-1),
]


@pytest.mark.parametrize("packet", EDGE_CASES, ids=lambda p: type(p).__name__)
def test_edge_cases_agree(packet: Packet) -> None:
    frame = codec.encode_packet(packet, 5, version=VERSION)
    assert baseline.encode_packet(packet, 5) == frame
    _same(baseline.decode_frame(frame), codec.decode_frame(frame, version=VERSION))


def test_bench_smoke_run_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    argv = [
        "--seconds",
        "0.004",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--size",
        "4",
        "--no-java",
        "--json",
        str(out),
    ]
    assert codec_bench.main(argv) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["machine"]["cpu_count"]
    assert report["command"].startswith("python benchmarks/codec_bench.py")
    assert set(report["results"]) == set(SET_NAMES)
    assert set(report["results"]["mixed"]) == {"decode", "encode", "decode-stream"}
    assert report["results"]["SESS_SEND"]["decode"]["codec"]["median_fps"] > 0
    assert report["java"] == {
        "available": False, "reason": "skipped (--no-java)", "command": None, "elapsed_s": None, "raw": None,
    }  # fmt: skip


def test_java_failure_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 2, "", "error: no JVM here\n")

    monkeypatch.setattr(subprocess, "run", failing_run)
    result = codec_bench.run_java(build_sets(size=2), seconds=0.1, timeout=5)
    assert not result.available
    assert result.reason is not None
    assert "no JVM here" in result.reason


def test_java_output_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    printed = {"SESS_SEND": {"decode_fps": 1e6, "encode_fps": 2e6, "frames": 2}, "mixed": {"decode_fps": 3e6}}

    def fake_run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        frames = Path(argv[argv.index("--frames") + 1])
        names = {json.loads(line)["name"] for line in frames.read_text(encoding="utf-8").splitlines()}
        assert names == set(SET_NAMES)
        return subprocess.CompletedProcess(argv, 0, "log line\n" + json.dumps(printed) + "\n", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    result = codec_bench.run_java(build_sets(size=2), seconds=0.1, timeout=5)
    assert result.available
    assert result.fps == {"SESS_SEND": {"decode": 1e6, "encode": 2e6}, "mixed": {"decode": 3e6}}
