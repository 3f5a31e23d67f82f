"""The reference broker's durable storage: an append-only journal of records.

A generic record store (it knows nothing about messages): records have a 64-bit
``record_id``, a small ``user_type`` tag and ``payload`` bytes; changes are
appended as records with a CRC each (buffered, written with one ``os.write``
per group), made durable in groups by :meth:`Journal.sync` (one ``fsync``; or
:meth:`Journal.begin_sync` and a :class:`PendingSync` to fsync in a worker
thread), recovered with a torn tail tolerated, and
compacted into a fresh file set with an atomic switch.  Transactions (local and
XA-style prepare/commit/rollback) are supported.  Byte layouts:
:mod:`reference.journal._format`.

    journal = Journal(Path("data/journal"))
    recovery = journal.open()
    journal.add(1, 30, b"message bytes")
    journal.sync()   # acknowledged from here on
"""

from __future__ import annotations

from ._errors import JournalCorrupted, JournalError, JournalLocked, JournalStateError
from ._journal import Journal, PendingSync, PreparedTransaction, RecordInfo, Recovery

__all__ = [
    "Journal",
    "PendingSync",
    "RecordInfo",
    "PreparedTransaction",
    "Recovery",
    "JournalError",
    "JournalCorrupted",
    "JournalStateError",
    "JournalLocked",
]
