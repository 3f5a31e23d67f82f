"""The reference broker's sans-IO core (no sockets, no clock): feed it bytes and
time, take the bytes it wants written."""

from __future__ import annotations

from ._core import BrokerCore, BrokerSettings
from ._errors import BrokerError
from ._model import Address, MessageRef, PostOffice, Queue
from ._session import Consumer, Session, Transaction
from ._storage import MemoryStorage, Storage

__all__ = [
    "Address",
    "BrokerCore",
    "BrokerError",
    "BrokerSettings",
    "Consumer",
    "MemoryStorage",
    "MessageRef",
    "PostOffice",
    "Queue",
    "Session",
    "Storage",
    "Transaction",
]
