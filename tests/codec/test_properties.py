"""hypothesis: every packet type round-trips; arbitrary and mutated input only
ever raises CodecError."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cck.codec import (
    KIT_PACKET_CLASSES,
    PACKET_CLASSES,
    CodecError,
    FrameDecoder,
    Packet,
    PacketType,
    decode_body,
    decode_discovery,
    decode_frame,
    encode_packet,
)
from cck.codec._constants import COMPATIBLE_VERSIONS

from .strategies import packets_of

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
VERSIONS = [0, *COMPATIBLE_VERSIONS]


@pytest.mark.parametrize("packet_type", list(PACKET_CLASSES | KIT_PACKET_CLASSES), ids=lambda t: t.name)
@SETTINGS
@given(data=st.data())
def test_every_packet_type_round_trips(packet_type: PacketType, data: st.DataObject) -> None:
    cls = (PACKET_CLASSES | KIT_PACKET_CLASSES)[packet_type]
    packet = data.draw(packets_of(cls))
    frame = encode_packet(packet, 10)
    decoded = decode_frame(frame)
    assert decoded.packet == packet
    assert decoded.size == len(frame)
    assert encode_packet(decoded.packet, 10) == frame


@pytest.mark.parametrize("packet_type", [PacketType.SESS_SEND, PacketType.SESS_RECEIVE_MSG,
                                         PacketType.SESS_SEND_CONTINUATION])
@SETTINGS
@given(data=st.data(), version=st.sampled_from(VERSIONS))
def test_message_packets_round_trip_at_every_version(
    packet_type: PacketType, data: st.DataObject, version: int
) -> None:
    packet = data.draw(packets_of(PACKET_CLASSES[packet_type]))
    frame = encode_packet(packet, 10, version=version)
    again = decode_frame(frame, version=version).packet
    assert encode_packet(again, 10, version=version) == frame


@settings(max_examples=400, deadline=None)
@given(type_code=st.integers(-128, 127), body=st.binary(max_size=200), version=st.sampled_from(VERSIONS))
def test_arbitrary_bodies_raise_only_codec_error(type_code: int, body: bytes, version: int) -> None:
    with contextlib.suppress(CodecError):
        decode_body(type_code, body, version=version)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data())
def test_mutated_frames_raise_only_codec_error(data: st.DataObject) -> None:
    packet: Packet = data.draw(st.one_of([packets_of(c) for c in PACKET_CLASSES.values()]))
    frame = bytearray(encode_packet(packet, 10))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(frame) - 1))
        frame[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(frame)))
    decoder = FrameDecoder(max_frame_size=1 << 20)
    decoder.feed(bytes(frame[:cut]))
    with contextlib.suppress(CodecError):
        list(decoder)


@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=300))
def test_arbitrary_datagrams_raise_only_codec_error(blob: bytes) -> None:
    with contextlib.suppress(CodecError):
        decode_discovery(blob)


def test_huge_length_prefix_is_refused_before_buffering() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    decoder.feed(b"\x7f\xff\xff\xff\x0a")
    with pytest.raises(CodecError, match="exceeds max_frame_size"):
        decoder.next_frame()
    assert decoder.buffered == 5
