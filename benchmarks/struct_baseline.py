"""A hand-written ``struct`` baseline for the codec benchmark.

This is what a competent engineer would write by hand for exactly the packet
types the benchmark uses, at protocol version 136 only: straight-line
``struct.unpack_from`` / ``pack`` code that produces the *same* frozen
dataclasses as :mod:`codec` (``Frame``, ``SessionSendMessage``, ``CoreMessage``,
``TypedProperties`` ...).  It validates nothing beyond what is needed to find
the fields (no version handling, no error reporting with offsets, no fallback):
it is the speed a specialised decoder could reach in pure Python, the yardstick
for ``codec.decode_frame`` / ``codec.encode_packet``.

Decoders work on ``(buffer, start, end)`` so a stream is decoded in place,
without copying a frame out of the buffer first.

Supported packets: SESS_SEND, SESS_RECEIVE_MSG, PACKETS_CONFIRMED,
SESS_ACKNOWLEDGE, SESS_FLOWTOKEN, NULL_RESPONSE (V2, with correlation ID).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

from cck.codec import (
    EMPTY_PROPERTIES,
    CoreMessage,
    Frame,
    NullResponseMessage,
    Packet,
    PacketsConfirmedMessage,
    Property,
    PropertyType,
    SessionAcknowledgeMessage,
    SessionConsumerFlowCreditMessage,
    SessionReceiveMessage,
    SessionSendMessage,
    TypedProperties,
)

__all__ = ["SUPPORTED", "decode_frame", "encode_packet", "iter_frames"]

_header = struct.Struct(">ibq")  # length, type, channel ID
_header_pack = _header.pack
_header_unpack = _header.unpack_from
_i32 = struct.Struct(">i").unpack_from
_i64 = struct.Struct(">q").unpack_from
_i32_pack = struct.Struct(">i").pack
_i64_pack = struct.Struct(">q").pack
_msg_tail = struct.Struct(">bbqqb")  # type, durable, expiration, timestamp, priority
_msg_tail_unpack = _msg_tail.unpack_from
_msg_tail_pack = _msg_tail.pack
_send_trailer = struct.Struct(">?qi")  # requires_response, correlation ID, sender ID (v134+)
_send_trailer_unpack = _send_trailer.unpack_from
_qi_pack = struct.Struct(">qi").pack  # after the boolean, which Artemis writes as 0xff
_recv_trailer = struct.Struct(">qi")  # consumer ID, delivery count
_recv_trailer_unpack = _recv_trailer.unpack_from
_ack = struct.Struct(">qq?")
_qq_pack = struct.Struct(">qq").pack
_flow = struct.Struct(">qi")

_PT = PropertyType
_TAGS = {int(t): t for t in PropertyType}
_FIXED: dict[int, tuple[Callable[..., tuple[Any, ...]], int]] = {
    3: (struct.Struct(">b").unpack_from, 1),
    5: (struct.Struct(">h").unpack_from, 2),
    6: (_i32, 4),
    7: (_i64, 8),
    8: (struct.Struct(">f").unpack_from, 4),
    9: (struct.Struct(">d").unpack_from, 8),
}
_PACKERS: dict[int, Callable[..., bytes]] = {
    3: struct.Struct(">b").pack,
    5: struct.Struct(">h").pack,
    6: _i32_pack,
    7: _i64_pack,
    8: struct.Struct(">f").pack,
    9: struct.Struct(">d").pack,
}

SESS_SEND = 71
SESS_RECEIVE_MSG = 75
PACKETS_CONFIRMED = 22
SESS_ACKNOWLEDGE = 41
SESS_FLOWTOKEN = 70
NULL_RESPONSE = 21


# ---------------------------------------------------------------------- decoding


def _message(buf: bytes, pos: int) -> tuple[CoreMessage, int]:
    """The message buffer starting at ``pos``; returns it and the position after it."""
    (e,) = _i32(buf, pos)
    pos += 4
    body_end = pos + e - 13
    body = buf[pos:body_end]
    (message_id,) = _i64(buf, body_end)
    pos = body_end + 8
    if buf[pos]:
        (n,) = _i32(buf, pos + 1)
        pos += 5
        address = buf[pos : pos + n].decode("utf-16-le")
        pos += n
    else:
        address = None
        pos += 1
    if buf[pos]:
        user_id = buf[pos + 1 : pos + 17]
        pos += 17
    else:
        user_id = None
        pos += 1
    mtype, durable, expiration, timestamp, priority = _msg_tail_unpack(buf, pos)
    pos += 19
    if buf[pos]:
        (count,) = _i32(buf, pos + 1)
        pos += 5
        entries = []
        for _ in range(count):
            (n,) = _i32(buf, pos)
            pos += 4
            key = buf[pos : pos + n].decode("utf-16-le")
            pos += n
            tag = buf[pos]
            pos += 1
            if tag == 10:  # STRING
                (n,) = _i32(buf, pos)
                pos += 4
                value: Any = buf[pos : pos + n].decode("utf-16-le")
                pos += n
            elif tag == 2:  # BOOLEAN
                value = buf[pos] != 0
                pos += 1
            elif tag == 4:  # BYTES
                (n,) = _i32(buf, pos)
                pos += 4
                value = buf[pos : pos + n]
                pos += n
            elif tag == 0:  # NULL
                value = None
            elif tag == 11:  # CHAR
                value = chr((buf[pos] << 8) | buf[pos + 1])
                pos += 2
            else:  # BYTE, SHORT, INT, LONG, FLOAT, DOUBLE
                unpack, size = _FIXED[tag]
                (value,) = unpack(buf, pos)
                pos += size
            entries.append(Property(key, _TAGS[tag], value))
        properties = TypedProperties(tuple(entries))
    else:
        properties = EMPTY_PROPERTIES
        pos += 1
    message = CoreMessage(
        body, message_id, address, user_id, mtype, durable != 0, expiration, timestamp, priority, properties
    )
    return message, pos


def _decode(type_code: int, buf: bytes, pos: int, end: int) -> Packet:
    """The packet whose body is ``buf[pos:end]``."""
    if type_code == SESS_SEND:
        message, _ = _message(buf, pos)
        return SessionSendMessage(message, *_send_trailer_unpack(buf, end - 13))
    if type_code == SESS_RECEIVE_MSG:
        message, _ = _message(buf, pos)
        return SessionReceiveMessage(message, *_recv_trailer_unpack(buf, end - 12))
    if type_code == PACKETS_CONFIRMED:
        return PacketsConfirmedMessage(_i32(buf, pos)[0])
    if type_code == SESS_ACKNOWLEDGE:
        return SessionAcknowledgeMessage(*_ack.unpack_from(buf, pos))
    if type_code == SESS_FLOWTOKEN:
        return SessionConsumerFlowCreditMessage(*_flow.unpack_from(buf, pos))
    if type_code == NULL_RESPONSE:
        return NullResponseMessage(_i64(buf, pos)[0] if end - pos >= 8 else None)
    raise ValueError(f"struct baseline: unsupported packet type {type_code}")


def decode_frame(data: bytes) -> Frame:
    """Decode one whole frame (version 136)."""
    length, type_code, channel = _header_unpack(data)
    return Frame(channel, _decode(type_code, data, 13, length + 4), length + 4)


def iter_frames(buf: bytes) -> Iterator[Frame]:
    """Decode every whole frame in ``buf`` in place (a trailing partial frame is ignored)."""
    pos = 0
    size = len(buf)
    while pos + 4 <= size:
        length, type_code, channel = _header_unpack(buf, pos)
        end = pos + length + 4
        if end > size:
            return
        yield Frame(channel, _decode(type_code, buf, pos + 13, end), length + 4)
        pos = end


# ---------------------------------------------------------------------- encoding


def _ss(text: str) -> bytes:
    data = text.encode("utf-16-le")
    return _i32_pack(len(data)) + data


def _encode_message(m: CoreMessage) -> list[bytes]:
    parts = [_i32_pack(len(m.body) + 13), m.body, _i64_pack(m.message_id)]
    parts.append(b"\x00" if m.address is None else b"\x01" + _ss(m.address))
    parts.append(b"\x00" if m.user_id is None else b"\x01" + m.user_id)
    parts.append(_msg_tail_pack(m.type, m.durable, m.expiration, m.timestamp, m.priority))
    entries = m.properties.entries
    if not entries:
        parts.append(b"\x00")
        return parts
    parts.append(b"\x01" + _i32_pack(len(entries)))
    for e in entries:
        tag = e.type
        value = e.value
        parts.append(_ss(e.key))
        if tag == 10:
            parts.append(b"\x0a" + _ss(value))  # type: ignore[arg-type]
        elif tag == 2:
            parts.append(b"\x02\x01" if value else b"\x02\x00")
        elif tag == 4:
            parts.append(b"\x04" + _i32_pack(len(value)) + value)  # type: ignore[arg-type, operator]
        elif tag == 0:
            parts.append(b"\x00")
        elif tag == 11:
            parts.append(b"\x0b" + ord(value).to_bytes(2, "big"))  # type: ignore[arg-type]
        else:
            parts.append(bytes((tag,)) + _PACKERS[tag](value))
    return parts


def _body(packet: Packet) -> bytes:
    cls = type(packet)
    if cls is SessionSendMessage:
        p: Any = packet
        parts = _encode_message(p.message)
        parts.append(b"\xff" if p.requires_response else b"\x00")
        parts.append(_qi_pack(p.correlation_id, p.sender_id))
        return b"".join(parts)
    if cls is SessionReceiveMessage:
        p = packet
        parts = _encode_message(p.message)
        parts.append(_recv_trailer.pack(p.consumer_id, p.delivery_count))
        return b"".join(parts)
    if cls is PacketsConfirmedMessage:
        return _i32_pack(packet.command_id)  # type: ignore[attr-defined]
    if cls is SessionAcknowledgeMessage:
        p = packet
        return _qq_pack(p.consumer_id, p.message_id) + (b"\xff" if p.requires_response else b"\x00")
    if cls is SessionConsumerFlowCreditMessage:
        p = packet
        return _flow.pack(p.consumer_id, p.credits)
    if cls is NullResponseMessage:
        c = packet.correlation_id  # type: ignore[attr-defined]
        return b"" if c is None else _i64_pack(c)
    raise ValueError(f"struct baseline: unsupported packet {cls.__name__}")


def encode_packet(packet: Packet, channel_id: int = 0) -> bytes:
    """One whole frame for ``packet`` on ``channel_id`` (version 136)."""
    body = _body(packet)
    return _header_pack(len(body) + 9, packet.TYPE, channel_id) + body


SUPPORTED: frozenset[type[Packet]] = frozenset(
    {
        SessionSendMessage,
        SessionReceiveMessage,
        PacketsConfirmedMessage,
        SessionAcknowledgeMessage,
        SessionConsumerFlowCreditMessage,
        NullResponseMessage,
    }
)
