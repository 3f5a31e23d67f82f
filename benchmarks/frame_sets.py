"""The frames the codec benchmark measures (deterministic: same bytes every run).

Four sets, all at protocol version 136:

``SESS_SEND``          a durable 1 KiB message to an address with a 16-byte user
                       ID and 5 properties of mixed types (STRING, INT, LONG,
                       BOOLEAN, DOUBLE), requires_response, correlation and
                       producer IDs;
``SESS_RECEIVE_MSG``   the same message as delivered: server-assigned message ID,
                       consumer 0, delivery count 1;
``PACKETS_CONFIRMED``  confirmation of a command ID;
``mixed``              a seeded shuffle of about 45% SESS_SEND, 45% SESS_RECEIVE_MSG,
                       7% PACKETS_CONFIRMED and a few SESS_ACKNOWLEDGE,
                       SESS_FLOWTOKEN and NULL_RESPONSE (decoded by the codec's
                       construct formats, not its fast paths).

Each set has ``size`` distinct frames (IDs, timestamps and property values vary),
built with :func:`codec.encode_packet` (the test checks the baseline agrees).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from cck.codec import (
    CoreMessage,
    MessageType,
    NullResponseMessage,
    Packet,
    PacketsConfirmedMessage,
    SessionAcknowledgeMessage,
    SessionConsumerFlowCreditMessage,
    SessionReceiveMessage,
    SessionSendMessage,
    TypedProperties,
    encode_packet,
)

__all__ = ["SET_NAMES", "VERSION", "FrameSet", "build_sets"]

VERSION = 136
SESSION_CHANNEL = 11
BODY_SIZE = 1024
SET_NAMES = ("SESS_SEND", "SESS_RECEIVE_MSG", "PACKETS_CONFIRMED", "mixed")
#: (weight in %, kind) of the mixed stream.
MIX = (
    (45, "send"),
    (45, "receive"),
    (7, "confirmed"),
    (1, "ack"),
    (1, "flow"),
    (1, "null_response"),
)


@dataclass(frozen=True)
class FrameSet:
    """Packets, their channel, and the frames the codec encodes them to."""

    name: str
    packets: tuple[Packet, ...]
    channels: tuple[int, ...]
    frames: tuple[bytes, ...]

    @property
    def stream(self) -> bytes:
        """All frames back to back, as they would arrive on a connection."""
        return b"".join(self.frames)


def _message(rng: random.Random, i: int, message_id: int) -> CoreMessage:
    body = bytes(rng.getrandbits(8) for _ in range(BODY_SIZE))
    properties = TypedProperties.of(
        {
            "trace_id": f"trace-{rng.getrandbits(48):012x}",
            "order_count": rng.randrange(1, 1_000_000),
            "created_at": 1_700_000_000_000 + i,
            "priority_customer": bool(i & 1),
            "amount": round(rng.uniform(0, 10_000), 2),
        }
    )
    return CoreMessage(
        body=body,
        message_id=message_id,
        address="orders.incoming",
        user_id=rng.getrandbits(128).to_bytes(16, "big"),
        type=int(MessageType.BYTES),  # decoded messages carry the plain int
        durable=True,
        expiration=0,
        timestamp=1_700_000_000_000 + i,
        priority=4,
        properties=properties,
    )


def _send(rng: random.Random, i: int) -> Packet:
    return SessionSendMessage(_message(rng, i, 0), requires_response=True, correlation_id=i, sender_id=0)


def _receive(rng: random.Random, i: int) -> Packet:
    return SessionReceiveMessage(_message(rng, i, 4_000_000 + i), consumer_id=0, delivery_count=1)


def _confirmed(rng: random.Random, i: int) -> Packet:
    return PacketsConfirmedMessage(command_id=1_000 + i)


def _ack(rng: random.Random, i: int) -> Packet:
    return SessionAcknowledgeMessage(0, 4_000_000 + i, False)


def _flow(rng: random.Random, i: int) -> Packet:
    return SessionConsumerFlowCreditMessage(0, 1024 * 1024)


def _null_response(rng: random.Random, i: int) -> Packet:
    return NullResponseMessage(correlation_id=i)


_MAKERS: dict[str, Callable[[random.Random, int], Packet]] = {
    "send": _send,
    "receive": _receive,
    "confirmed": _confirmed,
    "ack": _ack,
    "flow": _flow,
    "null_response": _null_response,
}


def _make(name: str, packets: list[Packet]) -> FrameSet:
    # Everything here travels on one session channel (PACKETS_CONFIRMED included).
    channels = tuple(SESSION_CHANNEL for _ in packets)
    frames = tuple(encode_packet(p, c, version=VERSION) for p, c in zip(packets, channels, strict=True))
    return FrameSet(name, tuple(packets), channels, frames)


def build_sets(size: int = 200, seed: int = 20240601) -> dict[str, FrameSet]:
    """The four frame sets, ``size`` frames each, reproducible from ``seed``."""
    rng = random.Random(seed)
    sets = {
        "SESS_SEND": _make("SESS_SEND", [_send(rng, i) for i in range(size)]),
        "SESS_RECEIVE_MSG": _make("SESS_RECEIVE_MSG", [_receive(rng, i) for i in range(size)]),
        "PACKETS_CONFIRMED": _make("PACKETS_CONFIRMED", [_confirmed(rng, i) for i in range(size)]),
    }
    # The mixed stream has the weights (rounded, at least one of each minor kind; SESS_SEND and
    # SESS_RECEIVE_MSG share the rest), in a seeded order.
    kinds: list[str] = []
    for weight, kind in MIX[2:]:
        kinds += [kind] * max(1, round(size * weight / 100))
    rest = max(0, size - len(kinds))
    kinds += ["send"] * ((rest + 1) // 2) + ["receive"] * (rest // 2)
    rng.shuffle(kinds)
    sets["mixed"] = _make("mixed", [_MAKERS[kind](rng, i) for i, kind in enumerate(kinds)])
    return sets
