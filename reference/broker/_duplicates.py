"""Duplicate detection of sends: the ``_AMQ_DUPL_ID`` a producer puts on a message (the documented way to exactly
once across failover: a send whose outcome is unknown is sent again with the same ID).

Per address, the last ``id-cache-size`` IDs routed there (oldest evicted first); a send whose ID is in its
address's cache is not routed again (its reply still says done, as Artemis answers a dropped duplicate).  With
``persist-id-cache`` each ID is stored with its message, in one journal transaction, so a backup or a restarted
server that loaded the journal still knows it; an evicted ID's record is deleted.  Artemis keeps the same cache
(DuplicateIDCacheImpl, one per address)."""

from __future__ import annotations

import logging
from collections import OrderedDict

from cck.codec import CoreMessage

from ._storage import Storage

__all__ = ["DUPLICATE_ID_KEY", "DuplicateIds", "duplicate_id_of"]

LOG = logging.getLogger("cck.reference.broker")

#: The message property that carries a send's duplicate ID (Artemis's Message.HDR_DUPLICATE_DETECTION_ID).
DUPLICATE_ID_KEY = "_AMQ_DUPL_ID"


def duplicate_id_of(message: CoreMessage) -> bytes | None:
    """The message's duplicate ID as bytes (a string property is its UTF-8), or None when it has none."""
    value = message.properties.get(DUPLICATE_ID_KEY) if message.properties else None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return None


class DuplicateIds:
    """The per-address caches; ``storage`` keeps the IDs when ``persist``."""

    def __init__(self, storage: Storage, cache_size: int, *, persist: bool = True) -> None:
        self._storage = storage
        self._size = cache_size
        self._persist = persist
        self._by_address: dict[str, OrderedDict[bytes, int]] = {}

    def seen(self, address: str, dup: bytes) -> bool:
        return dup in self._by_address.get(address, ())

    def remember(self, address: str, dup: bytes, tx_id: int | None) -> bool:
        """Add ``dup`` to the address's cache, stored within the journal transaction ``tx_id`` (the one that stores
        its message, so the two survive a crash together) or on its own; whether anything was stored."""
        if self._size <= 0:
            return False
        record = self._storage.send_duplicate_id_added(address, dup, tx_id) if self._persist else 0
        self._add(address, dup, record)
        return self._persist

    def restore(self, entries: list[tuple[int, str, bytes]]) -> None:
        """The IDs the journal kept, ``(record, address, dup)`` oldest first, back in their caches."""
        for record, address, dup in entries:
            self._add(address, dup, record)

    def _add(self, address: str, dup: bytes, record: int) -> None:
        cache = self._by_address.setdefault(address, OrderedDict())
        cache[dup] = record
        cache.move_to_end(dup)
        while len(cache) > self._size:
            _, evicted = cache.popitem(last=False)
            if evicted:
                self._storage.duplicate_id_removed(evicted)
