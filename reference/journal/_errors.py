"""The journal's errors: one base class, structured attributes, one message shape.

::

    journal corrupted: /data/journal-00000001-000000000003.cckj at offset 4096: record CRC mismatch (...)
    journal misuse: /data: update of record 7, which is not live
    journal locked: /data: another process has this journal open
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["JournalCorrupted", "JournalError", "JournalLocked", "JournalStateError"]


class JournalError(Exception):
    """Base class of every error the journal raises itself (``OSError`` from the disk passes through)."""

    kind = "journal error"

    def __init__(self, file: Path, reason: str, offset: int | None = None) -> None:
        self.file = file
        self.offset = offset
        self.reason = reason
        where = str(file) if offset is None else f"{file} at offset {offset}"
        super().__init__(f"{self.kind}: {where}: {reason}")


class JournalCorrupted(JournalError):
    """The bytes on disk are not a journal this code can recover without losing data.

    ``file`` is the data file (or the manifest) and ``offset`` the byte offset in it
    where the bad bytes start.  A torn tail (a bad or cut record at the very end of
    the last file, with nothing valid after it) is *not* corruption: recovery
    truncates it and reports ``Recovery.torn_bytes``.
    """

    kind = "journal corrupted"

    def __init__(self, file: Path, offset: int, reason: str) -> None:
        super().__init__(file, reason, offset)


class JournalStateError(JournalError):
    """A call that the journal's state does not allow (``file`` is the journal directory).

    Examples: appending before :meth:`Journal.open`, updating a record that is
    not live, adding an id that is live, an operation on an unknown or already
    prepared transaction, any call after an I/O error (the journal must then be
    closed and opened again).
    """

    kind = "journal misuse"


class JournalLocked(JournalError):
    """Another :class:`Journal` (in this or another process) has the directory open."""

    kind = "journal locked"
