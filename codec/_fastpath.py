"""Hand-written fast paths for the hottest frames: SESS_SEND, SESS_RECEIVE_MSG
and PACKETS_CONFIRMED, and the small ones each message brings along on a
broker (NULL_RESPONSE for a durable send, acknowledgements, consumer and
producer credits).

The construct formats stay the definition; these functions compute the same
thing with ``struct`` directly.  A decoder returns ``None`` for anything it does
not accept (short input, bad lengths, legacy versions), and the caller then runs
the construct format, which either decodes it or raises the precise
:class:`~codec.CodecError`.  An encoder returns ``None`` when a value does not
fit, for the same reason.  Tests check that both paths agree on random and
mutated input.
"""

from __future__ import annotations

import struct
from codecs import utf_16_le_decode, utf_16_le_encode
from typing import Any

from ._constants import ADDRESSING_CHANGE_VERSION, ARTEMIS_2_7_0_VERSION, ARTEMIS_2_28_0_VERSION, PropertyType
from ._frame import _FAST_DECODERS, _FAST_ENCODERS
from ._packets.consumers import (
    SessionAcknowledgeMessage,
    SessionConsumerFlowCreditMessage,
    SessionIndividualAcknowledgeMessage,
)
from ._packets.control import NullResponseMessage, PacketsConfirmedMessage
from ._packets.messages import SessionReceiveMessage, SessionSendMessage, send_trailer_size
from ._packets.producers import SessionProducerCreditsMessage, SessionRequestProducerCreditsMessage
from ._structures import EMPTY_PROPERTIES, CoreMessage, Property, TypedProperties
from ._structures import encode_message as _encode_message_format

__all__ = ["encode_message", "install"]

_i8 = struct.Struct(">b")
_i16 = struct.Struct(">h")
_u16 = struct.Struct(">H")
_i32 = struct.Struct(">i")
_i64 = struct.Struct(">q")
_f32 = struct.Struct(">f")
_f64 = struct.Struct(">d")
# message_id, then after address/userID: type, durable, expiration, timestamp, priority
_head_tail = struct.Struct(">bbqqb")
_PT = PropertyType
_TYPES = {t.value: t for t in PropertyType}
# Bound methods and plain-int tags: in the per-property loop, an attribute lookup on a Struct or
# on the PropertyType class (slow in 3.11) costs as much as the unpacking itself.
_i32u = _i32.unpack_from
_i64u = _i64.unpack_from
_i8u = _i8.unpack_from
_i16u = _i16.unpack_from
_u16u = _u16.unpack_from
_f32u = _f32.unpack_from
_f64u = _f64.unpack_from
_i32p = _i32.pack
_i64p = _i64.pack


class _Reject(Exception):
    """Input the fast path leaves to the careful parser."""


def _ss(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    (n,) = _i32u(buf, pos)
    pos += 4
    if n < 0 or n & 1 or pos + n > end:
        raise _Reject
    # codecs.utf_16_le_decode directly: str.decode("utf-16-le") has no C fast path for this
    # name and goes through the codec registry and a Python wrapper (~3x slower).
    return utf_16_le_decode(buf[pos : pos + n], "surrogatepass", True)[0], pos + n


def _properties(buf: bytes, pos: int, end: int) -> tuple[TypedProperties, int]:
    if pos >= end:
        raise _Reject
    if buf[pos] == 0:
        return EMPTY_PROPERTIES, pos + 1
    (count,) = _i32u(buf, pos + 1)
    pos += 5
    if count < 0 or count * 5 > end - pos:
        raise _Reject
    entries: list[Property] = []
    append = entries.append
    for _ in range(count):
        (n,) = _i32u(buf, pos)  # the key, inlined _ss
        pos += 4
        if n < 0 or n & 1 or pos + n > end:
            raise _Reject
        key = utf_16_le_decode(buf[pos : pos + n], "surrogatepass", True)[0]
        pos += n
        if pos >= end:
            raise _Reject
        tag = buf[pos]
        pos += 1
        value: Any
        if tag == 6:  # INT
            (value,) = _i32u(buf, pos)
            pos += 4
        elif tag == 10:  # STRING
            (n,) = _i32u(buf, pos)
            pos += 4
            if n < 0 or n & 1 or pos + n > end:
                raise _Reject
            value = utf_16_le_decode(buf[pos : pos + n], "surrogatepass", True)[0]
            pos += n
        elif tag == 7:  # LONG
            (value,) = _i64u(buf, pos)
            pos += 8
        elif tag == 2:  # BOOLEAN
            value = buf[pos] != 0
            pos += 1
        elif tag == 9:  # DOUBLE
            (value,) = _f64u(buf, pos)
            pos += 8
        elif tag == 4:  # BYTES
            (n,) = _i32u(buf, pos)
            pos += 4
            if n < 0 or pos + n > end:
                raise _Reject
            value = buf[pos : pos + n]
            pos += n
        elif tag == 3:  # BYTE
            (value,) = _i8u(buf, pos)
            pos += 1
        elif tag == 5:  # SHORT
            (value,) = _i16u(buf, pos)
            pos += 2
        elif tag == 8:  # FLOAT
            (value,) = _f32u(buf, pos)
            pos += 4
        elif tag == 11:  # CHAR
            value = chr(_u16u(buf, pos)[0])
            pos += 2
        elif tag == 0:  # NULL
            value = None
        else:
            raise _Reject
        if pos > end:
            raise _Reject
        append(Property(key, _TYPES[tag], value))
    return TypedProperties(tuple(entries)), pos


def _message(buf: bytes, end: int) -> CoreMessage:
    """The message buffer occupying ``buf[0:end]`` exactly."""
    (e,) = _i32u(buf, 0)
    body_end = 4 + e - 13
    if e < 13 or body_end + 9 > end:
        raise _Reject
    body = buf[4:body_end]
    (message_id,) = _i64u(buf, body_end)
    pos = body_end + 8
    address = None
    if buf[pos]:
        address, pos = _ss(buf, pos + 1, end)
    else:
        pos += 1
    user_id = None
    if pos >= end:
        raise _Reject
    if buf[pos]:
        if pos + 17 > end:
            raise _Reject
        user_id = buf[pos + 1 : pos + 17]
        pos += 17
    else:
        pos += 1
    if pos + _head_tail.size > end:
        raise _Reject
    mtype, durable, expiration, timestamp, priority = _head_tail.unpack_from(buf, pos)
    properties, pos = _properties(buf, pos + _head_tail.size, end)
    if pos != end:
        raise _Reject
    return CoreMessage(
        body, message_id, address, user_id, mtype, durable != 0, expiration, timestamp, priority, properties
    )


def decode_send(body: bytes, version: int) -> SessionSendMessage | None:
    if 0 < version < ADDRESSING_CHANGE_VERSION:
        return None
    try:
        # The trailer's size per version is the format's own rule (1 / 9 / 13 bytes).
        trailer = send_trailer_size(version)
        end = len(body) - trailer
        message = _message(body, end)
        correlation_id = _i64.unpack_from(body, end + 1)[0] if trailer >= 9 else None
        sender_id = _i32.unpack_from(body, end + 9)[0] if trailer == 13 else None
        return SessionSendMessage(message, body[end] != 0, correlation_id, sender_id)
    except (_Reject, struct.error, IndexError, UnicodeDecodeError, ValueError):
        return None


def decode_receive(body: bytes, version: int) -> SessionReceiveMessage | None:
    if 0 < version < ADDRESSING_CHANGE_VERSION:
        return None
    try:
        end = len(body) - 12
        message = _message(body, end)
        (consumer_id,) = _i64.unpack_from(body, end)
        (delivery_count,) = _i32.unpack_from(body, end + 8)
        return SessionReceiveMessage(message, consumer_id, delivery_count)
    except (_Reject, struct.error, IndexError, UnicodeDecodeError, ValueError):
        return None


def decode_confirmed(body: bytes, version: int) -> PacketsConfirmedMessage | None:
    if len(body) != 4:
        return None
    return PacketsConfirmedMessage(_i32.unpack(body)[0])


_ack = struct.Struct(">qqB")
_flow = struct.Struct(">qi")


def decode_acknowledge(body: bytes, version: int) -> SessionAcknowledgeMessage | None:
    if len(body) != 17:
        return None
    consumer_id, message_id, requires_response = _ack.unpack(body)
    return SessionAcknowledgeMessage(consumer_id, message_id, requires_response != 0)


def decode_individual_acknowledge(body: bytes, version: int) -> SessionIndividualAcknowledgeMessage | None:
    if len(body) != 17:
        return None
    consumer_id, message_id, requires_response = _ack.unpack(body)
    return SessionIndividualAcknowledgeMessage(consumer_id, message_id, requires_response != 0)


def decode_flow_credit(body: bytes, version: int) -> SessionConsumerFlowCreditMessage | None:
    if len(body) != 12:
        return None
    consumer_id, credits = _flow.unpack(body)
    return SessionConsumerFlowCreditMessage(consumer_id, credits)


def _credits_and_address(body: bytes) -> tuple[int, str] | None:
    """The layout both producer-credit packets share: credits (i32), then the address (SimpleString)."""
    try:
        (credits,) = _i32u(body, 0)
        address, pos = _ss(body, 4, len(body))
    except (_Reject, struct.error, UnicodeDecodeError):
        return None
    return (credits, address) if pos == len(body) else None


def decode_request_credits(body: bytes, version: int) -> SessionRequestProducerCreditsMessage | None:
    fields = _credits_and_address(body)
    return None if fields is None else SessionRequestProducerCreditsMessage(*fields)


def decode_null_response(body: bytes, version: int) -> NullResponseMessage | None:
    if not body:
        return NullResponseMessage(None)
    if len(body) != 8:
        return None
    return NullResponseMessage(_i64.unpack(body)[0])


def decode_producer_credits(body: bytes, version: int) -> SessionProducerCreditsMessage | None:
    fields = _credits_and_address(body)
    return None if fields is None else SessionProducerCreditsMessage(*fields)


# --------------------------------------------------------------------- encoders

_VALUE_PACKERS = {
    _PT.BYTE: _i8.pack,
    _PT.SHORT: _i16.pack,
    _PT.INT: _i32.pack,
    _PT.LONG: _i64.pack,
    _PT.FLOAT: _f32.pack,
    _PT.DOUBLE: _f64.pack,
}
#: The tag byte of each type, and which types hold a float (keys: PropertyType, also found by int).
_TAG_BYTES = {t: bytes([t.value]) for t in PropertyType}
_REAL = {_PT.FLOAT: True, _PT.DOUBLE: True}
_STRING, _BOOLEAN, _BYTES, _NULL = _PT.STRING, _PT.BOOLEAN, _PT.BYTES, _PT.NULL


def _encode_ss(text: str) -> bytes:
    data = utf_16_le_encode(text, "surrogatepass")[0]
    return _i32p(len(data)) + data


def _encode_message(m: CoreMessage) -> bytes:
    parts = [_i32.pack(len(m.body) + 13), m.body, _i64.pack(m.message_id)]
    parts.append(b"\x00" if m.address is None else b"\x01" + _encode_ss(m.address))
    if m.user_id is None:
        parts.append(b"\x00")
    else:
        if len(m.user_id) != 16:
            raise _Reject
        parts.append(b"\x01" + m.user_id)
    parts.append(_head_tail.pack(m.type, 1 if m.durable else 0, m.expiration, m.timestamp, m.priority))
    props = m.properties
    if not props:
        parts.append(b"\x00")
    else:
        if not isinstance(props, TypedProperties):
            raise _Reject
        parts.append(b"\x01" + _i32p(len(props.entries)))
        for e in props.entries:
            parts.append(_encode_ss(e.key))
            tag = e.type
            tag_byte = _TAG_BYTES.get(tag)
            if tag_byte is None:
                raise _Reject
            parts.append(tag_byte)
            value = e.value
            packer = _VALUE_PACKERS.get(tag)
            if packer is not None:
                is_real = tag in _REAL
                if isinstance(value, bool) or not isinstance(value, float if is_real else int):
                    raise _Reject
                parts.append(packer(value))
            elif tag == _STRING and isinstance(value, str):
                parts.append(_encode_ss(value))
            elif tag == _BOOLEAN:
                parts.append(b"\x01" if value else b"\x00")
            elif tag == _BYTES and isinstance(value, (bytes, bytearray)):
                parts.append(_i32p(len(value)) + bytes(value))
            elif tag == _NULL:
                pass
            else:
                raise _Reject
    return b"".join(parts)


def encode_message(message: CoreMessage) -> bytes:
    """A message's buffer exactly as it travels inside SESS_SEND (for storing it): the fast
    path, or the construct format where only it can say (and raise the precise error)."""
    try:
        return _encode_message(message)
    except (_Reject, struct.error, TypeError, AttributeError, UnicodeEncodeError, OverflowError):
        return _encode_message_format(message)


def encode_send(packet: Any, version: int) -> bytes | None:
    if 0 < version < ADDRESSING_CHANGE_VERSION:
        return None
    try:
        parts = [_encode_message(packet.message), b"\xff" if packet.requires_response else b"\x00"]
        if version == 0 or version >= ARTEMIS_2_7_0_VERSION:
            c = packet.correlation_id
            parts.append(_i64.pack(0 if c is None else c))
        if version >= ARTEMIS_2_28_0_VERSION:
            s = packet.sender_id
            parts.append(_i32.pack(0 if s is None else s))
        return b"".join(parts)
    except (_Reject, struct.error, TypeError, AttributeError, UnicodeEncodeError, OverflowError):
        return None


def encode_receive(packet: Any, version: int) -> bytes | None:
    if 0 < version < ADDRESSING_CHANGE_VERSION:
        return None
    try:
        return _encode_message(packet.message) + _i64.pack(packet.consumer_id) + _i32.pack(packet.delivery_count)
    except (_Reject, struct.error, TypeError, AttributeError, UnicodeEncodeError, OverflowError):
        return None


def encode_confirmed(packet: Any, version: int) -> bytes | None:
    try:
        return _i32.pack(packet.command_id)
    except (struct.error, TypeError, OverflowError):
        return None


def encode_null_response(packet: Any, version: int) -> bytes | None:
    if packet.correlation_id is None:  # a pre-V2 peer: the correlation ID is left off
        return b""
    try:
        return _i64.pack(packet.correlation_id)
    except (struct.error, TypeError):
        return None


def encode_producer_credits(packet: Any, version: int) -> bytes | None:
    try:
        return _i32.pack(packet.credits) + _encode_ss(packet.address)
    except (struct.error, TypeError, AttributeError, UnicodeEncodeError):
        return None


def _encode_ack(packet: Any, version: int) -> bytes | None:
    try:
        return _ack.pack(packet.consumer_id, packet.message_id, 0xFF if packet.requires_response else 0)
    except (struct.error, TypeError, AttributeError):
        return None


encode_acknowledge = encode_individual_acknowledge = _encode_ack


def encode_flow_credit(packet: Any, version: int) -> bytes | None:
    try:
        return _flow.pack(packet.consumer_id, packet.credits)
    except (struct.error, TypeError, AttributeError):
        return None


encode_request_credits = encode_producer_credits


def install() -> None:
    """Register the fast paths with the frame codec."""
    _FAST_DECODERS.update(
        {
            int(SessionSendMessage.TYPE): decode_send,
            int(SessionReceiveMessage.TYPE): decode_receive,
            int(PacketsConfirmedMessage.TYPE): decode_confirmed,
            int(SessionAcknowledgeMessage.TYPE): decode_acknowledge,
            int(SessionIndividualAcknowledgeMessage.TYPE): decode_individual_acknowledge,
            int(SessionConsumerFlowCreditMessage.TYPE): decode_flow_credit,
            int(SessionRequestProducerCreditsMessage.TYPE): decode_request_credits,
            int(NullResponseMessage.TYPE): decode_null_response,
            int(SessionProducerCreditsMessage.TYPE): decode_producer_credits,
        }
    )
    _FAST_ENCODERS.update(
        {
            SessionSendMessage: encode_send,
            SessionReceiveMessage: encode_receive,
            PacketsConfirmedMessage: encode_confirmed,
            NullResponseMessage: encode_null_response,
            SessionProducerCreditsMessage: encode_producer_credits,
            SessionAcknowledgeMessage: encode_acknowledge,
            SessionIndividualAcknowledgeMessage: encode_individual_acknowledge,
            SessionConsumerFlowCreditMessage: encode_flow_credit,
            SessionRequestProducerCreditsMessage: encode_request_credits,
        }
    )
