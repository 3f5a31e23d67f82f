"""Producers and producer flow control (notes §5.2, §8)."""

from __future__ import annotations

from dataclasses import dataclass

from construct import Struct

from .._constants import PacketType
from .._primitives import I32, N1, SimpleStr
from ._base import Packet


@dataclass(frozen=True, slots=True)
class SessionRequestProducerCreditsMessage(Packet):
    """SESS_PRODUCER_REQUEST_CREDITS: a producer asks for ``credits`` bytes."""

    TYPE = PacketType.SESS_PRODUCER_REQUEST_CREDITS
    FORMAT = Struct("credits" / I32, "address" / SimpleStr)

    credits: int
    address: str


@dataclass(frozen=True, slots=True)
class SessionProducerCreditsMessage(Packet):
    """SESS_PRODUCER_CREDITS: the grant (a Java producer blocks without it)."""

    TYPE = PacketType.SESS_PRODUCER_CREDITS
    FORMAT = Struct("credits" / I32, "address" / SimpleStr)

    credits: int
    address: str


@dataclass(frozen=True, slots=True)
class SessionProducerCreditsFailMessage(Packet):
    """SESS_PRODUCER_FAIL_CREDITS: the address is full under the FAIL policy."""

    TYPE = PacketType.SESS_PRODUCER_FAIL_CREDITS
    FORMAT = Struct("credits" / I32, "address" / SimpleStr)

    credits: int
    address: str


@dataclass(frozen=True, slots=True)
class CreateProducerMessage(Packet):
    """CREATE_PRODUCER (version >= 134, no reply)."""

    TYPE = PacketType.CREATE_PRODUCER
    FORMAT = Struct("producer_id" / I32, "address" / N1(SimpleStr))

    producer_id: int
    address: str | None = None


@dataclass(frozen=True, slots=True)
class RemoveProducerMessage(Packet):
    """REMOVE_PRODUCER (no reply)."""

    TYPE = PacketType.REMOVE_PRODUCER
    FORMAT = Struct("producer_id" / I32)

    producer_id: int
