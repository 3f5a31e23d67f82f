"""Messages as the histories know them: each carries a ``key`` (the history's value) and a ``seq`` (its place in
its producer's order); names of their own for what a case creates on a broker that other cases share."""

from __future__ import annotations

import uuid

from cck.codec import CoreMessage, TypedProperties
from cck.reference.client import Delivery

__all__ = ["key_of", "message", "queue_for", "seq_of", "unique"]


def message(key: str, seq: int, *, durable: bool = True, body: bytes | None = None) -> CoreMessage:
    """A message keyed ``key``, number ``seq`` of its producer; its body is the key unless ``body`` is given."""
    return CoreMessage(key.encode() if body is None else body, durable=durable,
                       properties=TypedProperties.of(key=key, seq=seq))


def _message_of(item: CoreMessage | Delivery) -> CoreMessage:
    return item.message if isinstance(item, Delivery) else item


def key_of(item: CoreMessage | Delivery) -> str:
    """The ``key`` property of a message (or of a delivery's message), as the history recorded it."""
    value = _message_of(item).properties.get("key")
    return value.decode() if isinstance(value, bytes) else str(value)


def seq_of(item: CoreMessage | Delivery) -> int:
    """The ``seq`` property of a message (or of a delivery's message)."""
    return int(str(_message_of(item).properties.get("seq")))


def unique(prefix: str) -> str:
    """A name of its own for one use (cases share a running broker and may leave what they created)."""
    return f"{prefix}.{uuid.uuid4().hex[:8]}"


def queue_for(case_id: str) -> str:
    """A queue of its own for one run of a case."""
    return unique(f"cck.{case_id}")
