"""What the broker asks of its storage, and the in-memory (non-persistent) kind.

The broker core calls these as it changes durable state; a journal-backed
storage writes records, and the transport makes them durable (one fsync per
batch) before it sends the replies that depend on them.
"""

from __future__ import annotations

from typing import Protocol

from cck.codec import CoreMessage, Xid

from ._model import Address, MessageRef, Queue

__all__ = ["MemoryStorage", "Storage"]


class Storage(Protocol):
    def address_added(self, address: Address) -> None: ...
    def queue_added(self, queue: Queue) -> None: ...
    def queue_removed(self, queue: Queue) -> None: ...
    def message_routed(self, message: CoreMessage, queues: list[Queue], tx_id: int | None) -> None: ...
    def ref_acked(self, ref: MessageRef, tx_id: int | None) -> None: ...
    def delivery_counted(self, ref: MessageRef) -> None: ...
    def delivery_starting(self, ref: MessageRef) -> None: ...
    def tx_prepare(self, tx_id: int, xid: Xid) -> None: ...
    def tx_commit(self, tx_id: int) -> None: ...
    def tx_rollback(self, tx_id: int) -> None: ...
    def take_ref_ids(self, message_id: int) -> list[int]: ...
    def duplicate_id_added(self, dup_id: bytes) -> int: ...
    def send_duplicate_id_added(self, address: str, dup_id: bytes, tx_id: int | None) -> int: ...
    def duplicate_id_removed(self, record: int) -> None: ...
    def sync(self) -> None: ...


class MemoryStorage:
    """No persistence (``persistence-enabled`` false): every call is a no-op."""

    def address_added(self, address: Address) -> None:
        return None

    def queue_added(self, queue: Queue) -> None:
        return None

    def queue_removed(self, queue: Queue) -> None:
        return None

    def message_routed(self, message: CoreMessage, queues: list[Queue], tx_id: int | None) -> None:
        return None

    def ref_acked(self, ref: MessageRef, tx_id: int | None) -> None:
        return None

    def delivery_counted(self, ref: MessageRef) -> None:
        return None

    def delivery_starting(self, ref: MessageRef) -> None:
        return None

    def tx_prepare(self, tx_id: int, xid: Xid) -> None:
        return None

    def tx_commit(self, tx_id: int) -> None:
        return None

    def tx_rollback(self, tx_id: int) -> None:
        return None

    def take_ref_ids(self, message_id: int) -> list[int]:
        return []

    def duplicate_id_added(self, dup_id: bytes) -> int:
        return 0

    def send_duplicate_id_added(self, address: str, dup_id: bytes, tx_id: int | None) -> int:
        return 0

    def duplicate_id_removed(self, record: int) -> None:
        return None

    def sync(self) -> None:
        return None
