"""Framing: ``i32`` length (of what follows), ``i8`` type, ``i64`` channel, body.

:func:`encode_packet` and :func:`decode_frame` work on one whole frame;
:class:`FrameDecoder` is the streaming, sans-IO decoder: feed it bytes as they
arrive, take frames out until it answers :data:`NEED_DATA`.  It checks the
length prefix against ``max_frame_size`` *before* buffering a body, so a lying
length costs nothing.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any, Final

from construct import Construct

from ._constants import CURRENT_VERSION
from ._errors import CodecError, FrameTooLarge, MalformedFrame, UnknownPacketType
from ._format import build_format, field_values, parse_format
from ._packets._base import Packet
from ._registry import packet_class

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "HEADER_SIZE",
    "NEED_DATA",
    "HORNETQ_PREAMBLE",
    "PREAMBLE",
    "Frame",
    "FrameDecoder",
    "NeedData",
    "decode_frame",
    "encode_packet",
]

#: The 7 ASCII bytes a core client sends before its first frame.
PREAMBLE: Final = b"ARTEMIS"
#: What HornetQ's client (NettyConnector, up to 2.4.x, protocol <= 124) sends instead: a HornetQ 2.4 server
#: skips only these 7 bytes (CoreProtocolManager.handshake) and reads anything else as the first frame, so
#: ``ARTEMIS`` there becomes a 1095914565-byte length.
HORNETQ_PREAMBLE: Final = b"HORNETQ"
#: length (4) + type (1) + channel ID (8).
HEADER_SIZE: Final = 13
#: Artemis itself accepts frames up to 2^31-1 bytes; we default to a sane bound.
DEFAULT_MAX_FRAME_SIZE: Final = 100 * 1024 * 1024

_HEADER = struct.Struct(">ibq")
_LENGTH = struct.Struct(">i")


class NeedData(enum.Enum):
    """The streaming decoder's answer when no whole frame is buffered yet."""

    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = NeedData.NEED_DATA


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame: the channel it travelled on, the packet, and its size in
    bytes including the 4-byte length (the unit of flow control and confirmation)."""

    channel_id: int
    packet: Packet
    size: int


_compiled: dict[type[Packet], Construct | None] = {}


def _compiled_format(cls: type[Packet]) -> Construct | None:
    # Compile lazily (construct's compiler is slow to start); formats it cannot
    # compile simply run interpreted.
    if cls not in _compiled:
        try:
            _compiled[cls] = cls.FORMAT.compile()
        except Exception:  # noqa: BLE001 - any compiler limitation means "interpreted"
            _compiled[cls] = None
    return _compiled[cls]


def encode_body(packet: Packet, *, version: int = CURRENT_VERSION) -> bytes:
    """The body bytes of ``packet`` (no header), as a peer at ``version`` writes them."""
    return build_format(packet.FORMAT, field_values(packet), what=packet.type_name(), version=version)


def encode_packet(packet: Packet, channel_id: int = 0, *, version: int = CURRENT_VERSION) -> bytes:
    """One whole frame for ``packet`` on ``channel_id``."""
    fast = _FAST_ENCODERS.get(type(packet))
    body = fast(packet, version) if fast is not None else None
    if body is None:
        body = encode_body(packet, version=version)
    return _HEADER.pack(len(body) + 9, int(packet.TYPE), channel_id) + body


def decode_body(type_code: int, body: bytes, *, version: int = CURRENT_VERSION) -> Packet:
    """Decode a frame body of the given type; offsets in errors count from the frame start."""
    fast = _FAST_DECODERS.get(type_code)
    if fast is not None:
        packet: Packet | None = fast(body, version)
        if packet is not None:
            return packet
    cls = packet_class(type_code)
    if cls is None:
        raise UnknownPacketType(
            offset=4, packet_type="frame", expected="a known packet type", found=str(type_code)
        )
    fields = parse_format(
        cls.FORMAT,
        body,
        what=cls.type_name(),
        version=version,
        base_offset=HEADER_SIZE,
        compiled=_compiled_format(cls),
    )
    return cls.from_fields(fields)


def decode_frame(data: bytes, *, version: int = CURRENT_VERSION) -> Frame:
    """Decode exactly one whole frame."""
    if len(data) < HEADER_SIZE:
        raise MalformedFrame(
            "frame shorter than its header",
            offset=0,
            packet_type="frame",
            expected=f"at least {HEADER_SIZE} bytes",
            found=str(len(data)),
        )
    length, type_code, channel = _HEADER.unpack_from(data)
    if length + 4 != len(data):
        raise MalformedFrame(
            "length prefix disagrees with the frame",
            offset=0,
            packet_type="frame",
            expected=str(len(data) - 4),
            found=str(length),
        )
    packet = decode_body(type_code, bytes(data[HEADER_SIZE:]), version=version)
    return Frame(channel, packet, len(data))


class FrameDecoder:
    """Streaming frame decoder (sans-IO).

    ``version`` is the connection's protocol version and may be changed between
    frames (a server learns it from SUBSCRIBE_TOPOLOGY_V2 or CREATESESSION).
    With ``expect_preamble`` the decoder first waits for 8 bytes and skips the
    ``ARTEMIS`` preamble when present, as an Artemis acceptor does, or the
    ``HORNETQ`` one a client of a HornetQ server sends (without either, frames
    are read from the first byte).

    A frame whose body is malformed is consumed before its error is raised, so a
    caller may go on decoding; an oversized or nonsensical length prefix leaves
    the decoder failed, since the frame boundary is lost.
    """

    def __init__(
        self,
        *,
        version: int = CURRENT_VERSION,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        expect_preamble: bool = False,
    ) -> None:
        self.version = version
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._pos = 0
        self._consumed = 0
        self._await_preamble = expect_preamble
        self._failure: CodecError | None = None
        self.saw_preamble = False

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buffer) - self._pos

    @property
    def consumed(self) -> int:
        """Bytes of the stream decoded so far (for error offsets in the stream)."""
        return self._consumed

    def feed(self, data: bytes) -> None:
        """Add received bytes."""
        if self._pos and self._pos > len(self._buffer) // 2:
            del self._buffer[: self._pos]
            self._pos = 0
        self._buffer += data

    def next_frame(self) -> Frame | NeedData:
        """The next whole frame, or :data:`NEED_DATA`."""
        if self._failure is not None:
            raise self._failure
        if self._await_preamble:
            if self.buffered < len(PREAMBLE) + 1:
                return NEED_DATA
            self._await_preamble = False
            if bytes(self._buffer[self._pos : self._pos + len(PREAMBLE)]) in (PREAMBLE, HORNETQ_PREAMBLE):
                self._pos += len(PREAMBLE)
                self._consumed += len(PREAMBLE)
                self.saw_preamble = True
        if self.buffered < 4:
            return NEED_DATA
        (length,) = _LENGTH.unpack_from(self._buffer, self._pos)
        total = length + 4
        if length < 9:
            self._failure = MalformedFrame(
                "length prefix smaller than a frame header",
                offset=self._consumed,
                packet_type="frame",
                expected=">= 9",
                found=str(length),
            )
            raise self._failure
        if total > self.max_frame_size:
            self._failure = FrameTooLarge(
                "frame exceeds max_frame_size",
                offset=self._consumed,
                packet_type="frame",
                expected=f"<= {self.max_frame_size} bytes",
                found=f"{total} bytes",
            )
            raise self._failure
        if self.buffered < total:
            return NEED_DATA
        start = self._pos
        self._pos += total
        self._consumed += total
        _, type_code, channel = _HEADER.unpack_from(self._buffer, start)
        body = bytes(self._buffer[start + HEADER_SIZE : start + total])
        packet = decode_body(type_code, body, version=self.version)
        return Frame(channel, packet, total)

    def __iter__(self) -> FrameDecoder:
        return self

    def __next__(self) -> Frame:
        frame = self.next_frame()
        if frame is NEED_DATA:
            raise StopIteration
        assert isinstance(frame, Frame)
        return frame


# Hand-written encoders/decoders for the hottest packets, installed by
# codec._fastpath; each must agree exactly with the packet's FORMAT (tested).
_FAST_DECODERS: dict[int, Any] = {}  # by type code: tried before the registry lookup
_FAST_ENCODERS: dict[type[Packet], Any] = {}


