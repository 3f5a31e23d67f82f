"""Sending and receiving messages, large messages in chunks (notes §5.2
"Messages", §6).

The message buffer has no length of its own: it runs from the body's start to
the fixed-size fields at the end of the frame, whose size depends on the
protocol version (SESS_SEND: 1 byte at 129, 9 at 130..133 and at 0, 13 from
134; SESS_RECEIVE_MSG: always 12).  Below version 129 (1.x clients) the message
buffer itself has the legacy "_1X" layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from io import BytesIO
from typing import Any

from construct import Construct, If, Struct, this

from .._constants import ADDRESSING_CHANGE_VERSION, ARTEMIS_2_7_0_VERSION, ARTEMIS_2_28_0_VERSION, PacketType
from .._format import Since
from .._primitives import I32, I64, Bool, Bytes, FieldError, remaining
from .._structures import BODY_OFFSET, MESSAGE, MESSAGE_HEADERS_ONLY, CoreMessage
from ._base import Packet

#: The legacy layout's extra int and its body offset are 4 bytes further on.
_LEGACY_SHIFT = 4


def is_legacy(version: int) -> bool:
    """Versions 1..128 use the 1.x message layout (``isVersionBeforeAddressChange``)."""
    return 0 < version < ADDRESSING_CHANGE_VERSION


def send_trailer_size(version: int) -> int:
    """Bytes of fixed fields after the message buffer in SESS_SEND at ``version``."""
    if 0 < version < ARTEMIS_2_7_0_VERSION:
        return 1
    if version < ARTEMIS_2_28_0_VERSION:
        return 9
    return 13


class _LegacyMessage(Construct):  # type: ignore[misc]
    """The 1.x message buffer: ``i32 E+4``, body, ``i32`` (ignored by readers), headers."""

    def _parse(self, stream: BytesIO, context: Any, path: str) -> CoreMessage:
        at = stream.tell()
        end = I32._parse(stream, context, path)
        body_len = end - BODY_OFFSET - _LEGACY_SHIFT
        if body_len < 0 or body_len + 4 > remaining(stream):
            raise FieldError(
                "bad end-of-body position",
                path=path,
                offset=at,
                expected=f"17..{17 + remaining(stream) - 4}",
                found=str(end),
            )
        body = stream.read(body_len)
        I32._parse(stream, context, path)
        m = MESSAGE_HEADERS_ONLY._parsereport(stream, context, path)
        return CoreMessage(body, *(getattr(m, n) for n in _HEADER_NAMES))

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        headers = BytesIO()
        MESSAGE_HEADERS_ONLY._build(obj, headers, context, path)
        head = headers.getvalue()
        I32._build(len(obj.body) + BODY_OFFSET + _LEGACY_SHIFT, stream, context, path)
        stream.write(obj.body)
        # Artemis writes the length of the modern buffer (4 + body + headers) plus 17 here.
        I32._build(4 + len(obj.body) + len(head) + BODY_OFFSET + _LEGACY_SHIFT, stream, context, path)
        stream.write(head)
        return obj


_HEADER_NAMES = (
    "message_id", "address", "user_id", "type", "durable",
    "expiration", "timestamp", "priority", "properties",
)  # fmt: skip


class _MessageBuffer(Construct):  # type: ignore[misc]
    """A message buffer that ends ``trailer(version)`` bytes before the frame does."""

    def __init__(self, trailer: Any) -> None:
        super().__init__()
        self.trailer = trailer

    def _parse(self, stream: BytesIO, context: Any, path: str) -> CoreMessage:
        version = int(context._params.version)
        size = remaining(stream) - self.trailer(version)
        start = stream.tell()
        if size < 4:
            raise FieldError(
                "frame too short for a message",
                path=path,
                offset=start,
                expected=f"at least {4 + self.trailer(version)} bytes",
                found=str(remaining(stream)),
            )
        inner = BytesIO(stream.read(size))
        fmt = _LEGACY if is_legacy(version) else MESSAGE
        try:
            message: CoreMessage = fmt._parsereport(inner, context, path)
        except FieldError as exc:
            exc.offset = None if exc.offset is None else exc.offset + start
            raise
        if remaining(inner):
            raise FieldError(
                "message headers end before the trailer",
                path=path,
                offset=start + inner.tell(),
                expected=f"{size} bytes of message",
                found=f"{inner.tell()}",
            )
        return message

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        fmt = _LEGACY if is_legacy(int(context._params.version)) else MESSAGE
        return fmt._build(obj, stream, context, path)


_LEGACY = _LegacyMessage()


@dataclass(frozen=True, slots=True)
class SessionSendMessage(Packet):
    """SESS_SEND.  ``correlation_id`` travels from version 130 (and at 0),
    ``sender_id`` (the producer ID) from 134; below those they are ``None``."""

    TYPE = PacketType.SESS_SEND
    FORMAT = Struct(
        "message" / _MessageBuffer(send_trailer_size),
        "requires_response" / Bool,
        "correlation_id" / Since(ARTEMIS_2_7_0_VERSION, I64),
        "sender_id" / Since(ARTEMIS_2_28_0_VERSION, I32, zero_is_new=False),
    )

    message: CoreMessage
    requires_response: bool = False
    correlation_id: int | None = 0
    sender_id: int | None = 0


@dataclass(frozen=True, slots=True)
class SessionReceiveMessage(Packet):
    """SESS_RECEIVE_MSG: a delivery; ``delivery_count`` starts at 1."""

    TYPE = PacketType.SESS_RECEIVE_MSG
    FORMAT = Struct(
        "message" / _MessageBuffer(lambda version: 12),
        "consumer_id" / I64,
        "delivery_count" / I32,
    )

    message: CoreMessage
    consumer_id: int = 0
    delivery_count: int = 1


@dataclass(frozen=True, slots=True)
class SessionSendLargeMessage(Packet):
    """SESS_SEND_LARGE: headers and properties of a large message (body follows in
    SESS_SEND_CONTINUATION chunks); ``message.body`` is empty."""

    TYPE = PacketType.SESS_SEND_LARGE
    FORMAT = Struct("message" / MESSAGE_HEADERS_ONLY)

    message: CoreMessage


@dataclass(frozen=True, slots=True)
class SessionSendContinuationMessage(Packet):
    """SESS_SEND_CONTINUATION: one chunk of a large message body; the last one
    (``continues`` false) carries the total body size."""

    TYPE = PacketType.SESS_SEND_CONTINUATION
    FORMAT = Struct(
        "body" / Bytes,
        "continues" / Bool,
        "message_body_size" / If(~this.continues, I64),
        "requires_response" / Bool,
        "correlation_id" / Since(ARTEMIS_2_7_0_VERSION, I64),
        "sender_id" / Since(ARTEMIS_2_28_0_VERSION, I32, zero_is_new=False),
    )

    body: bytes
    continues: bool
    message_body_size: int | None = None
    requires_response: bool = False
    correlation_id: int | None = 0
    sender_id: int | None = 0


@dataclass(frozen=True, slots=True)
class SessionReceiveLargeMessage(Packet):
    """SESS_RECEIVE_LARGE_MSG: headers of a large delivery; chunks follow."""

    TYPE = PacketType.SESS_RECEIVE_LARGE_MSG
    FORMAT = Struct(
        "consumer_id" / I64,
        "delivery_count" / I32,
        "large_message_size" / I64,
        "message" / MESSAGE_HEADERS_ONLY,
    )

    consumer_id: int
    delivery_count: int
    large_message_size: int
    message: CoreMessage


@dataclass(frozen=True, slots=True)
class SessionReceiveContinuationMessage(Packet):
    """SESS_RECEIVE_CONTINUATION: one chunk of a large delivery."""

    TYPE = PacketType.SESS_RECEIVE_CONTINUATION
    FORMAT = Struct("body" / Bytes, "continues" / Bool, "consumer_id" / I64)

    body: bytes
    continues: bool
    consumer_id: int
