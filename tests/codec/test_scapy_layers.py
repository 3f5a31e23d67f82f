"""The scapy layers of codec.scapy: dissection and building go through the codec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("scapy")

from scapy.compat import raw
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.sendrecv import sniff
from scapy.sessions import TCPSession
from scapy.utils import rdpcap, wrpcap

from cck.codec import (
    PREAMBLE,
    CodecError,
    CoreMessage,
    CreateSessionMessage_V2,
    DiscoveryDatagram,
    Ping,
    SessionReceiveMessage,
    SessionSendMessage,
    SessionStart,
    TransportConfiguration,
    TransportParam,
    TransportParamType,
    TypedProperties,
    decode_body,
    decode_discovery,
    decode_frame,
    encode_discovery,
    encode_packet,
)
from cck.codec.scapy import (
    BODY_LAYERS,
    ArtemisCore,
    ArtemisDiscovery,
    ArtemisIncomplete,
    ArtemisMalformedBody,
    ArtemisMalformedFrame,
    ArtemisPreamble,
    bind_ports,
    frames,
)

MESSAGE = CoreMessage(
    body=b"\x00\x00\x00\x05hello",
    message_id=42,
    address="cck.queue",
    durable=True,
    timestamp=1_700_000_000_000,
    properties=TypedProperties.of(count=3, note="x"),
)
PACKETS: list[tuple[int, Any]] = [
    (0, Ping(connection_ttl=60000)),
    (
        1,
        CreateSessionMessage_V2(name="s1", session_channel_id=10, username="admin", password="admin", client_id="cid"),
    ),
    (10, SessionStart()),
    (10, SessionSendMessage(message=MESSAGE, requires_response=True, correlation_id=7)),
    (10, SessionReceiveMessage(message=MESSAGE, consumer_id=0, delivery_count=1)),
]
FRAMES = [encode_packet(packet, channel) for channel, packet in PACKETS]
#: A SESS_SEND whose message body claims far more bytes than the frame holds.
BAD_BODY = bytearray(FRAMES[3])
BAD_BODY[13:17] = b"\x7f\xff\xff\xf0"
BAD_FRAME = bytes(BAD_BODY)


def _segment(payload: bytes, *, sport: int = 50000, dport: int = 61616, seq: int = 1000) -> Any:
    """An Ether/IP/TCP packet carrying ``payload``, as read from a capture."""
    built = Ether() / IP(src="127.0.0.1", dst="127.0.0.1") / TCP(sport=sport, dport=dport, seq=seq, flags="PA")
    return Ether(raw(built / Raw(payload)))


def _expected_error(frame: bytes) -> str:
    with pytest.raises(CodecError) as info:
        decode_frame(frame)
    return str(info.value)


# ---------------------------------------------------------------------------- core frames


def test_several_frames_with_preamble_malformed_body_and_partial_tail() -> None:
    tail = FRAMES[4][:20]
    payload = PREAMBLE + b"".join(FRAMES) + BAD_FRAME + tail
    pkt = _segment(payload)

    assert pkt.haslayer(ArtemisPreamble)
    assert pkt[ArtemisPreamble].magic == PREAMBLE
    found = frames(pkt)
    assert len(found) == len(FRAMES) + 1
    for layer, (channel, packet), frame in zip(found, PACKETS, FRAMES, strict=False):
        assert layer.channel == channel
        assert layer.type == int(packet.TYPE)
        assert layer.length == len(frame) - 4
        assert layer.decoded == packet
        assert layer.error is None
        assert isinstance(layer.body, BODY_LAYERS[type(packet)])

    bad = found[-1]
    assert bad.decoded is None
    assert isinstance(bad.body, ArtemisMalformedBody)
    assert bad.error == bad.body.error == _expected_error(BAD_FRAME)
    assert bad.body.load == BAD_FRAME[13:]

    incomplete = pkt[ArtemisIncomplete]
    assert incomplete.load == tail
    assert incomplete.expected == len(FRAMES[4])
    # Nothing was lost or changed: the layers give back the segment's bytes.
    assert raw(pkt[TCP].payload) == payload
    assert raw(pkt) == raw(_segment(payload))


def test_frames_on_the_source_port_dissect_too() -> None:
    pkt = _segment(b"".join(FRAMES[:2]), sport=61616, dport=50001)
    assert [f.decoded for f in frames(pkt)] == [PACKETS[0][1], PACKETS[1][1]]


def test_partial_header_and_partial_preamble_are_incomplete() -> None:
    assert isinstance(_segment(FRAMES[0] + FRAMES[1][:3])[ArtemisCore].payload, ArtemisIncomplete)
    assert _segment(FRAMES[0] + FRAMES[1][:3])[ArtemisIncomplete].expected is None
    short = _segment(PREAMBLE[:4])
    assert short.haslayer(ArtemisIncomplete)
    assert not short.haslayer(ArtemisCore)
    only_preamble = _segment(PREAMBLE)
    assert only_preamble.haslayer(ArtemisPreamble)
    assert not only_preamble.haslayer(ArtemisCore)


def test_nonsense_length_prefix_is_a_malformed_frame() -> None:
    garbage = b"\x00\x00\x00\x02\xff\xff\xff"
    pkt = _segment(FRAMES[0] + garbage + FRAMES[0])
    assert len(frames(pkt)) == 1
    bad = pkt[ArtemisMalformedFrame]
    assert bad.load == garbage + FRAMES[0]
    assert "length prefix 2" in bad.error


def test_unknown_packet_type_keeps_bytes_and_codec_error() -> None:
    frame = b"\x00\x00\x00\x0d\x7f" + b"\x00" * 8 + b"\x01\x02\x03\x04"
    layer = _segment(frame)[ArtemisCore]
    assert layer.type == 0x7F
    assert layer.body.load == b"\x01\x02\x03\x04"
    assert layer.error == _expected_error(frame)
    assert raw(layer) == frame


def test_empty_body_and_truncated_body() -> None:
    start = _segment(FRAMES[2])[ArtemisCore]
    assert start.length == 9
    assert start.decoded == SessionStart()
    ping_without_body = encode_packet(SessionStart(), 0)[:4] + b"\x0a" + b"\x00" * 8
    layer = ArtemisCore(ping_without_body)
    assert layer.decoded is None
    assert layer.error == _expected_error(ping_without_body)


def test_show_prints_every_dataclass_field() -> None:
    pkt = _segment(PREAMBLE + b"".join(FRAMES) + BAD_FRAME + FRAMES[0][:5])
    text = pkt.show(dump=True)
    for name in ("length", "type", "channel", "body", "magic", "expected", "error", "load"):
        assert name in text
    for _, packet in PACKETS:
        assert packet.TYPE.name in text
        for field in type(packet).__dataclass_fields__:
            assert field in text, field
    # nested structures: one line per field of the message and its properties
    for line in ("message_id=42", "address='cck.queue'", "'count': 3 (INT)", "'note': 'x' (STRING)"):
        assert line in text
    assert "malformed SESS_SEND" in text


@pytest.mark.parametrize(("channel", "packet"), PACKETS)
def test_from_packet_builds_the_codec_bytes(channel: int, packet: Any) -> None:
    layer = ArtemisCore.from_packet(packet, channel_id=channel)
    assert raw(layer) == encode_packet(packet, channel)
    assert raw(Ether() / IP() / TCP() / layer)[-len(raw(layer)) :] == raw(layer)


def test_built_layers_fill_length_and_type_and_reencode_edits() -> None:
    body = BODY_LAYERS[Ping](connection_ttl=1234)
    assert raw(ArtemisCore(channel=5, body=body)) == encode_packet(Ping(connection_ttl=1234), 5)

    layer = _segment(FRAMES[3])[ArtemisCore]
    layer.body.correlation_id = 99  # an edit re-encodes the body through the codec
    layer.length = None
    edited = SessionSendMessage(message=MESSAGE, requires_response=True, correlation_id=99)
    assert raw(layer) == encode_packet(edited, 10)
    assert decode_body(int(edited.TYPE), raw(layer.body)) == edited


def test_tcp_layer_binding_and_other_ports() -> None:
    frame = ArtemisCore.from_packet(Ping(connection_ttl=1))
    assert (TCP() / frame).dport == 61616
    assert not _segment(FRAMES[0], sport=40000, dport=40001).haslayer(ArtemisCore)
    bind_ports(tcp=40001, udp=[40002])
    assert _segment(FRAMES[0], sport=40000, dport=40001)[ArtemisCore].decoded == PACKETS[0][1]
    datagram = Ether(raw(Ether() / IP() / UDP(sport=3000, dport=40002) / Raw(encode_discovery(DATAGRAM))))
    assert datagram[ArtemisDiscovery].datagram == DATAGRAM


def test_pcap_round_trip_dissects_the_same(tmp_path: Path) -> None:
    packets = [
        _segment(PREAMBLE + FRAMES[0], seq=1000),
        _segment(b"".join(FRAMES[1:]) + BAD_FRAME + FRAMES[4][:30], seq=1000 + len(PREAMBLE) + len(FRAMES[0])),
        _segment(FRAMES[4], sport=61616, dport=50000, seq=5000),
    ]
    path = tmp_path / "artemis.pcap"
    wrpcap(str(path), packets)
    read = rdpcap(str(path))
    assert len(read) == len(packets)
    for before, after in zip(packets, read, strict=True):
        assert after.summary() == before.summary()
        assert after.show(dump=True) == before.show(dump=True)
        assert [f.decoded for f in frames(after)] == [f.decoded for f in frames(before)]
        assert [f.error for f in frames(after)] == [f.error for f in frames(before)]


def test_tcp_session_reassembles_frames_across_segments(tmp_path: Path) -> None:
    stream = PREAMBLE + b"".join(FRAMES)
    cut1, cut2 = 40, len(stream) - 100  # both cuts fall inside frames
    parts = [stream[:cut1], stream[cut1:cut2], stream[cut2:]]
    seq = 1000
    packets = []
    for part in parts:
        packets.append(_segment(part, seq=seq))
        seq += len(part)
    # per segment, the cut frames are incomplete
    assert packets[0].haslayer(ArtemisIncomplete)
    path = tmp_path / "split.pcap"
    wrpcap(str(path), packets)
    reassembled = sniff(offline=str(path), session=TCPSession)
    decoded = [f.decoded for p in reassembled for f in frames(p)]
    assert decoded == [packet for _, packet in PACKETS]
    assert not any(p.haslayer(ArtemisIncomplete) for p in reassembled)


# ---------------------------------------------------------------------------- discovery

DATAGRAM = DiscoveryDatagram(
    node_id="62ddd10f-e5a3-11f1-9f41-02fc00000001",
    unique_id="62e8f4a0-e5a3-11f1-9f41-02fc00000001",
    connectors=(
        TransportConfiguration(
            name="artemis",
            params=(
                TransportParam("port", TransportParamType.STRING, "61616"),
                TransportParam("host", TransportParamType.STRING, "127.0.0.1"),
            ),
        ),
    ),
)


def _datagram(payload: bytes, dport: int = 9876) -> Any:
    built = Ether() / IP(src="127.0.0.1", dst="231.7.7.7") / UDP(sport=3218, dport=dport) / Raw(payload)
    return Ether(raw(built))


def test_discovery_round_trip() -> None:
    data = encode_discovery(DATAGRAM)
    layer = ArtemisDiscovery.from_datagram(DATAGRAM)
    assert raw(layer) == data
    assert (UDP() / layer).dport == 9876

    pkt = _datagram(data)
    disc = pkt[ArtemisDiscovery]
    assert disc.datagram == DATAGRAM == decode_discovery(data)
    assert disc.node_id == DATAGRAM.node_id
    assert disc.connectors == DATAGRAM.connectors
    assert disc.error is None
    assert raw(disc) == data
    text = pkt.show(dump=True)
    for name in ("node_id", "unique_id", "connectors", "factory_class_name", "key='host'", "'61616'"):
        assert name in text

    disc.unique_id = "other"
    assert decode_discovery(raw(disc)).unique_id == "other"


def test_discovery_trailing_bytes_are_kept() -> None:
    data = encode_discovery(DATAGRAM) + b"\x00" * 16
    disc = _datagram(data)[ArtemisDiscovery]
    assert disc.datagram == DATAGRAM
    assert raw(disc) == data


def test_malformed_discovery_keeps_bytes_and_error() -> None:
    data = encode_discovery(DATAGRAM)[:30]
    with pytest.raises(CodecError) as info:
        decode_discovery(data)
    disc = _datagram(data)[ArtemisDiscovery]
    assert disc.datagram is None
    assert disc.error == str(info.value)
    assert disc.load == data
    assert raw(disc) == data
    assert "discovery datagram" in disc.show(dump=True)
