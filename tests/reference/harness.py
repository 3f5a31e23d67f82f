"""An in-memory client for driving the broker core packet by packet (no sockets, no sleeps)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cck.codec import (
    PREAMBLE,
    CreateSessionMessage_V2,
    FrameDecoder,
    Packet,
    SubscribeClusterTopologyUpdatesMessageV2,
    encode_packet,
)
from cck.codec import Frame as CodecFrame
from cck.reference.broker import BrokerCore, BrokerSettings


@dataclass
class Wire:
    """One client connection to a core, with the frames the broker sent back."""

    core: BrokerCore
    conn_id: int
    decoder: FrameDecoder = field(default_factory=lambda: FrameDecoder(version=136))
    received: list[CodecFrame] = field(default_factory=list)
    now_ms: int = 0

    def raw(self, data: bytes) -> list[CodecFrame]:
        self.core.receive(self.conn_id, data, self.now_ms)
        return self.collect()

    def send(self, packet: Packet, channel: int = 10) -> list[CodecFrame]:
        return self.raw(encode_packet(packet, channel))

    def collect(self) -> list[CodecFrame]:
        out = self.core.take_output().get(self.conn_id, b"")
        self.decoder.feed(out)
        frames = list(self.decoder)
        self.received.extend(frames)
        return frames

    @property
    def closed_by_broker(self) -> bool:
        return self.conn_id in self.core.take_closing()


def new_core(**settings: object) -> BrokerCore:
    return BrokerCore(BrokerSettings(node_id="node-1", **settings))  # type: ignore[arg-type]


def connect(core: BrokerCore, conn_id: int = 1, *, handshake: bool = True) -> Wire:
    core.connection_made(conn_id, 0)
    wire = Wire(core, conn_id)
    if handshake:
        wire.raw(PREAMBLE + encode_packet(SubscribeClusterTopologyUpdatesMessageV2(False, 136), 0))
    return wire


def open_session(wire: Wire, name: str = "s1", *, channel: int = 10, window: int = -1, **kw: object) -> None:
    frames = wire.send(CreateSessionMessage_V2(name, channel, 136, confirmation_window_size=window, **kw), 1)
    assert frames[-1].packet.type_name() == "CREATESESSION_RESP", frames
