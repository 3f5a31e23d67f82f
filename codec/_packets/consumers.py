"""Consumers, acknowledgements and consumer flow control (notes §5.2, §8)."""

from __future__ import annotations

from dataclasses import dataclass

from construct import Struct

from .._constants import ARTEMIS_2_7_0_VERSION, PacketType
from .._format import TailSince
from .._primitives import I32, I64, N1, Bool, SimpleStr
from ._base import Packet


@dataclass(frozen=True, slots=True)
class SessionCreateConsumerMessage(Packet):
    """SESS_CREATECONSUMER.  ``priority`` is written only from version 130 on (an
    Artemis 1.x or HornetQ server would leave the 4 bytes unread); a decoder reads
    it when bytes remain."""

    TYPE = PacketType.SESS_CREATECONSUMER
    FORMAT = Struct(
        "consumer_id" / I64,
        "queue_name" / SimpleStr,
        "filter_string" / N1(SimpleStr),
        "browse_only" / Bool,
        "requires_response" / Bool,
        "priority" / TailSince(ARTEMIS_2_7_0_VERSION, I32),
    )

    consumer_id: int
    queue_name: str
    filter_string: str | None = None
    browse_only: bool = False
    requires_response: bool = True
    priority: int | None = 0


@dataclass(frozen=True, slots=True)
class SessionConsumerFlowCreditMessage(Packet):
    """SESS_FLOWTOKEN: grant a consumer ``credits`` bytes (-1 = unbounded)."""

    TYPE = PacketType.SESS_FLOWTOKEN
    FORMAT = Struct("consumer_id" / I64, "credits" / I32)

    consumer_id: int
    credits: int


@dataclass(frozen=True, slots=True)
class SessionAcknowledgeMessage(Packet):
    """SESS_ACKNOWLEDGE: cumulative, up to and including ``message_id``."""

    TYPE = PacketType.SESS_ACKNOWLEDGE
    FORMAT = Struct("consumer_id" / I64, "message_id" / I64, "requires_response" / Bool)

    consumer_id: int
    message_id: int
    requires_response: bool = False


@dataclass(frozen=True, slots=True)
class SessionIndividualAcknowledgeMessage(Packet):
    """SESS_INDIVIDUAL_ACKNOWLEDGE: exactly one message."""

    TYPE = PacketType.SESS_INDIVIDUAL_ACKNOWLEDGE
    FORMAT = Struct("consumer_id" / I64, "message_id" / I64, "requires_response" / Bool)

    consumer_id: int
    message_id: int
    requires_response: bool = False


@dataclass(frozen=True, slots=True)
class SessionExpireMessage(Packet):
    """SESS_EXPIRED: the client found a delivered message expired."""

    TYPE = PacketType.SESS_EXPIRED
    FORMAT = Struct("consumer_id" / I64, "message_id" / I64)

    consumer_id: int
    message_id: int


@dataclass(frozen=True, slots=True)
class SessionConsumerCloseMessage(Packet):
    """SESS_CONSUMER_CLOSE."""

    TYPE = PacketType.SESS_CONSUMER_CLOSE
    FORMAT = Struct("consumer_id" / I64)

    consumer_id: int


@dataclass(frozen=True, slots=True)
class SessionForceConsumerDelivery(Packet):
    """SESS_FORCE_CONSUMER_DELIVERY: prompt delivery, then a marker message."""

    TYPE = PacketType.SESS_FORCE_CONSUMER_DELIVERY
    FORMAT = Struct("consumer_id" / I64, "sequence" / I64)

    consumer_id: int
    sequence: int


@dataclass(frozen=True, slots=True)
class DisconnectConsumerMessage(Packet):
    """DISCONNECT_CONSUMER: the server closed one consumer."""

    TYPE = PacketType.DISCONNECT_CONSUMER
    FORMAT = Struct("consumer_id" / I64)

    consumer_id: int


@dataclass(frozen=True, slots=True)
class DisconnectConsumerWithKillMessage(Packet):
    """DISCONNECT_CONSUMER_KILL (sent on channel 1)."""

    TYPE = PacketType.DISCONNECT_CONSUMER_KILL
    FORMAT = Struct("node_id" / N1(SimpleStr))

    node_id: str | None = None
