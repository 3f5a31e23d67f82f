"""The append-only journal: appends, group commit, recovery, compaction.

Byte layouts are in :mod:`reference.journal._format`.  The journal keeps the
live state in memory (committed records, open and prepared transactions) and
every change is one appended record.

State kept in memory
    ``_live``: record id -> :class:`RecordInfo`, in the order records were first
    added (an update keeps a record's place; a record added by a transaction
    takes its place at the commit).  ``_txs``: transaction id -> :class:`_Tx`
    for every transaction that has appended something and is not yet committed
    or rolled back.

Durability
    Appends are kept in a memory buffer and written to the current file (opened
    ``O_APPEND``) with one ``os.write`` when the journal syncs, when the buffer
    reaches 1 MiB (``_WRITE_AT``), before a file rotation, a compaction or a
    close.  An append is durable only once :meth:`Journal.sync` returns: it
    writes the buffer and issues one ``fsync`` for all appends made since the
    previous one (group commit); until then a process kill or a power loss may
    lose it.  :meth:`Journal.begin_sync` splits the same work in three for an
    owner that fsyncs in another thread: the owner's part writes the buffer and
    returns a :class:`PendingSync`, whose :meth:`~PendingSync.wait` only calls
    ``fsync`` (any thread) and whose :meth:`~PendingSync.done` (the owner's
    thread again) marks those appends durable.  Creating, renaming and deleting
    files is followed by an ``fsync`` of the directory.  When a file is full
    the journal writes and fsyncs it before starting the next one, so only the
    last file can have a torn tail.  With ``sync=False`` no ``fsync`` is issued
    anywhere (written data survives a process kill, not a power loss).

Recovery
    One pass over the files in order (O(n) in their size), reading one file at a
    time: memory is the live state plus one file.  A bad record is a torn tail
    when it is in the last file and no valid record follows it there (it is cut
    off and counted); anywhere else it is :class:`JournalCorrupted`, and the
    files are left untouched.

Replication
    A primary streams its journal to a backup as records: :meth:`Journal.snapshot`
    gives the live state (what a compaction would write) and, from that moment,
    the observer set with :meth:`Journal.observe_appends` is given every record
    appended; the backup's own journal takes both with :meth:`Journal.replay` and
    ends up with the same state (its files need not be byte-identical: each side
    compacts on its own).

Errors
    An ``OSError`` while writing or syncing (also one that :meth:`PendingSync.wait`
    raised in another thread, passed to :meth:`PendingSync.done`) leaves the
    journal refusing further work (:class:`JournalStateError`): after a failed
    ``fsync`` the page cache can no longer be trusted, so the only safe
    continuation is :meth:`close` and a new :class:`Journal` that recovers from
    what is on disk.  Appends still in the buffer then are dropped: none of them
    was ever reported durable.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ._errors import JournalCorrupted, JournalLocked, JournalStateError
from ._format import (
    FILE_HEADER_SIZE,
    MANIFEST_NAME,
    MAX_U64,
    MAX_USER_TYPE,
    RECORD_OVERHEAD,
    BadBytes,
    Kind,
    decode_file_header,
    decode_manifest,
    decode_record,
    encode_file_header,
    encode_manifest,
    encode_record,
    file_name,
    find_next_record,
    parse_file_name,
)

__all__ = ["Journal", "PendingSync", "PreparedTransaction", "RecordInfo", "Recovery"]

_LOCK_NAME = "journal.lock"
_MANIFEST_TMP = MANIFEST_NAME + ".tmp"
_NEW, _OPEN, _FAILED, _CLOSED = "new", "open", "failed", "closed"
# Buffered appends are written once they reach this size: one syscall per batch of records, while the memory held
# (and the data a process kill loses before the next sync) stays bounded.
_WRITE_AT = 1024 * 1024


@dataclass(frozen=True, slots=True)
class RecordInfo:
    """One record: the caller's id, a small type tag (0..65535) and the bytes."""

    record_id: int
    user_type: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class PreparedTransaction:
    """A transaction that was prepared and neither committed nor rolled back.

    ``records``: the records it adds or updates, one per record id with its last
    value, in the order the transaction first wrote each id.  ``deletes``: the ids
    of committed records it deletes, in order.  (A record the transaction both
    added and deleted appears in neither.)  None of this is applied to
    ``Recovery.records``: the journal applies it on :meth:`Journal.commit` and
    drops it on :meth:`Journal.rollback`.
    """

    tx_id: int
    data: bytes
    records: tuple[RecordInfo, ...]
    deletes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Recovery:
    """What :meth:`Journal.open` found.

    ``records``: the live, committed records, in the order they were first added
    (an update keeps a record's place; a transactional add takes its place when
    the transaction committed); compaction keeps this order.  Records added or
    updated by a prepared transaction are *not* here, and records a prepared
    transaction deletes *are* still here: the broker re-applies ``prepared``.
    ``prepared``: prepared, unfinished transactions, in the order they first
    appeared.  ``discarded_transactions``: transactions with neither prepare nor
    commit, dropped (a ROLLBACK record is appended for each, so a reused id
    starts clean).  ``torn_bytes``: bytes cut from the end of the last file
    (a partly written or failing record, or garbage after the last good record).
    ``files``: data files in the journal after recovery.
    """

    records: tuple[RecordInfo, ...]
    prepared: tuple[PreparedTransaction, ...]
    discarded_transactions: int
    torn_bytes: int
    files: int


@dataclass(slots=True)
class _Tx:
    writes: dict[int, RecordInfo] = field(default_factory=dict)  # adds and updates, last value per id
    added: set[int] = field(default_factory=set)  # ids in ``writes`` that this transaction added
    deletes: dict[int, None] = field(default_factory=dict)  # ordered set of deleted committed ids
    prepared: bool = False
    data: bytes = b""


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _check_u64(name: str, value: int) -> None:
    if not 0 <= value <= MAX_U64:
        raise ValueError(f"{name} must be in 0..2**64-1, got {value}")


class PendingSync:
    """One group commit under way: appends written, their ``fsync`` not yet done.

    Made by :meth:`Journal.begin_sync`.  Call :meth:`wait` (in any thread: it only
    calls ``fsync`` on a file descriptor the journal keeps open until :meth:`done`),
    then :meth:`done` once, in the journal owner's thread, with what ``wait`` raised.
    """

    __slots__ = ("_fd", "_finished", "_journal", "_upto")

    def __init__(self, journal: Journal, fd: int, upto: int) -> None:
        self._journal = journal
        self._fd = fd  # -1: fsync disabled, nothing to wait for
        self._upto = upto  # the appends made before it began are durable once it is done
        self._finished = False

    def wait(self) -> None:
        """Block until the appends are on disk (touches no journal state: safe in a worker thread)."""
        if self._fd >= 0:
            os.fsync(self._fd)

    def done(self, error: BaseException | None = None) -> None:
        """Back in the owner's thread: mark the appends durable, or fail the journal with ``wait``'s error."""
        if self._finished:
            raise RuntimeError("PendingSync.done() called twice")
        self._finished = True
        self._journal._end_sync(self._fd, self._upto, error)

    def complete(self) -> None:
        """:meth:`wait` then :meth:`done` in this thread (a sync the caller waits for where it stands)."""
        try:
            self.wait()
        except BaseException as error:
            self.done(error)
            raise
        self.done()


class Journal:
    """An append-only record store with transactions, group commit and compaction.

    Not thread-safe: one owner calls it (the broker's event loop).
    """

    def __init__(self, directory: Path, *, file_size: int = 10 * 1024 * 1024, sync: bool = True) -> None:
        if file_size < FILE_HEADER_SIZE + RECORD_OVERHEAD:
            raise ValueError(f"file_size must be at least {FILE_HEADER_SIZE + RECORD_OVERHEAD}, got {file_size}")
        self._dir = Path(directory)
        self._file_size = file_size
        self._fsync_enabled = sync
        self._state = _NEW
        self._failure = ""
        self._live: dict[int, RecordInfo] = {}
        self._txs: dict[int, _Tx] = {}
        self._generation = 0
        self._first_sequence = 0
        self._sequence = 0  # sequence of the current (last) file
        self._fd = -1
        self._file_bytes = 0  # the current file's size once the buffer is written
        self._buffer: list[bytes] = []  # encoded records not yet written
        self._buffered = 0  # their bytes
        self._appended = 0  # appends since open
        self._durable = 0  # how many of them are durable: pending = appended - durable
        self._busy: dict[int, int] = {}  # fd -> PendingSyncs that still have to fsync it
        self._retired: set[int] = set()  # fds no longer written, closed once no PendingSync needs them
        self._lock_fd = -1
        self._observer: Callable[[bytes], object] | None = None  # given every appended record (replication)

    # -- lifecycle ------------------------------------------------------------------------------------------

    def open(self) -> Recovery:
        """Create the journal in ``directory`` or recover the one there; must be called first, once."""
        if self._state != _NEW:
            raise JournalStateError(self._dir, f"open() on a journal that is {self._state}")
        self._dir.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            recovery = self._recover()
        except BaseException:
            self._release()
            self._state = _CLOSED
            raise
        self._state = _OPEN
        return recovery

    def close(self) -> None:
        """Sync what is pending (unless the journal failed) and release the directory; idempotent."""
        try:
            if self._state == _OPEN and self.pending:
                self.sync()
        finally:
            self._buffer.clear()  # only left when the journal failed: none of it was reported durable
            self._buffered = 0
            self._release()
            self._state = _CLOSED

    def _lock(self) -> None:
        fd = os.open(self._dir / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise JournalLocked(self._dir, "another Journal has this directory open") from None
        self._lock_fd = fd

    def _release(self) -> None:
        fd, self._fd = self._fd, -1
        self._retire(fd)
        fd, self._lock_fd = self._lock_fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _retire(self, fd: int) -> None:
        """Close a data file's fd now, or when the last :class:`PendingSync` fsyncing it is done.

        A worker thread may be in ``fsync(fd)``: closing it under that thread would make
        the fsync fail, or (the number reused) fsync another file.
        """
        if fd < 0:
            return
        if self._busy.get(fd):
            self._retired.add(fd)
            return
        with contextlib.suppress(OSError):
            os.close(fd)

    def _check_open(self) -> None:
        if self._state == _OPEN:
            return
        if self._state == _FAILED:
            raise JournalStateError(self._dir, f"the journal failed earlier ({self._failure}); close and reopen it")
        raise JournalStateError(self._dir, f"the journal is {self._state}; call open() first")

    def _fail(self, error: BaseException) -> None:
        self._state = _FAILED
        self._failure = f"{type(error).__name__}: {error}"

    # -- non-transactional ----------------------------------------------------------------------------------

    def add(self, record_id: int, user_type: int, payload: bytes) -> None:
        """Add a record; its id must not be live."""
        self._check_open()
        self._check_record(record_id, user_type, payload)
        if record_id in self._live:
            raise JournalStateError(self._dir, f"add of record {record_id}, which is already live")
        self._append(Kind.ADD, 0, record_id, user_type, payload)

    def update(self, record_id: int, user_type: int, payload: bytes) -> None:
        """Replace a live record's user type and payload (it keeps its place in the order)."""
        self._check_open()
        self._check_record(record_id, user_type, payload)
        if record_id not in self._live:
            raise JournalStateError(self._dir, f"update of record {record_id}, which is not live")
        self._append(Kind.UPDATE, 0, record_id, user_type, payload)

    def is_live(self, record_id: int) -> bool:
        """A committed record not deleted (what :meth:`update` and :meth:`delete` accept)."""
        return record_id in self._live

    def delete(self, record_id: int) -> None:
        """Delete a live record."""
        self._check_open()
        _check_u64("record_id", record_id)
        if record_id not in self._live:
            raise JournalStateError(self._dir, f"delete of record {record_id}, which is not live")
        self._append(Kind.DELETE, 0, record_id, 0, b"")

    # -- transactional --------------------------------------------------------------------------------------

    def add_tx(self, tx_id: int, record_id: int, user_type: int, payload: bytes) -> None:
        """Add a record when ``tx_id`` commits; the id must not be live as the transaction sees it."""
        tx = self._writable_tx(tx_id)
        self._check_record(record_id, user_type, payload)
        if self._visible(tx, record_id):
            raise JournalStateError(self._dir, f"add_tx of record {record_id} in transaction {tx_id}: already live")
        self._append(Kind.ADD_TX, tx_id, record_id, user_type, payload)

    def update_tx(self, tx_id: int, record_id: int, user_type: int, payload: bytes) -> None:
        """Update a record (committed, or added by this transaction) when ``tx_id`` commits."""
        tx = self._writable_tx(tx_id)
        self._check_record(record_id, user_type, payload)
        if not self._visible(tx, record_id):
            raise JournalStateError(self._dir, f"update_tx of record {record_id} in transaction {tx_id}: not live")
        self._append(Kind.UPDATE_TX, tx_id, record_id, user_type, payload)

    def delete_tx(self, tx_id: int, record_id: int) -> None:
        """Delete a record (committed, or added by this transaction) when ``tx_id`` commits."""
        tx = self._writable_tx(tx_id)
        _check_u64("record_id", record_id)
        if not self._visible(tx, record_id):
            raise JournalStateError(self._dir, f"delete_tx of record {record_id} in transaction {tx_id}: not live")
        self._append(Kind.DELETE_TX, tx_id, record_id, 0, b"")

    def prepare(self, tx_id: int, data: bytes) -> None:
        """Prepare ``tx_id`` (it may have no records yet); ``data`` comes back in ``Recovery.prepared``."""
        self._writable_tx(tx_id)
        self._append(Kind.PREPARE, tx_id, 0, 0, bytes(data))

    def commit(self, tx_id: int) -> None:
        """Apply the transaction's adds, updates and deletes (one-phase, or after prepare)."""
        self._known_tx(tx_id, "commit")
        self._append(Kind.COMMIT, tx_id, 0, 0, b"")

    def rollback(self, tx_id: int) -> None:
        """Drop the transaction and everything it appended."""
        self._known_tx(tx_id, "rollback")
        self._append(Kind.ROLLBACK, tx_id, 0, 0, b"")

    def _writable_tx(self, tx_id: int) -> _Tx:
        self._check_open()
        _check_u64("tx_id", tx_id)
        tx = self._txs.get(tx_id)
        if tx is None:
            return _Tx()
        if tx.prepared:
            raise JournalStateError(self._dir, f"transaction {tx_id} is prepared: only commit or rollback")
        return tx

    def _known_tx(self, tx_id: int, what: str) -> None:
        self._check_open()
        _check_u64("tx_id", tx_id)
        if tx_id not in self._txs:
            raise JournalStateError(self._dir, f"{what} of transaction {tx_id}, which has appended nothing")

    def _visible(self, tx: _Tx, record_id: int) -> bool:
        if record_id in tx.writes:
            return True
        return record_id in self._live and record_id not in tx.deletes

    def _check_record(self, record_id: int, user_type: int, payload: bytes) -> None:
        _check_u64("record_id", record_id)
        if not 0 <= user_type <= MAX_USER_TYPE:
            raise ValueError(f"user_type must be in 0..{MAX_USER_TYPE}, got {user_type}")

    # -- appending and syncing ------------------------------------------------------------------------------

    def _append(self, kind: Kind, tx_id: int, record_id: int, user_type: int, payload: bytes) -> None:
        payload = bytes(payload)
        record = encode_record(kind, tx_id, record_id, user_type, payload)
        if len(record) > self._file_size - FILE_HEADER_SIZE:
            raise ValueError(
                f"a record of {len(record)} bytes does not fit in a journal file of {self._file_size} bytes"
            )
        try:
            if self._file_bytes + len(record) > self._file_size:
                self._rotate()
            elif self._buffered + len(record) > _WRITE_AT:
                self._write_buffer()
        except OSError as error:
            self._fail(error)
            raise
        self._buffer.append(record)
        self._buffered += len(record)
        self._file_bytes += len(record)
        self._appended += 1
        self._apply(kind, tx_id, record_id, user_type, payload)
        if self._observer is not None:
            self._observer(record)

    def _write_buffer(self) -> None:
        """Write the buffered records to the current file with one ``os.write``."""
        if not self._buffer:
            return
        data = self._buffer[0] if len(self._buffer) == 1 else b"".join(self._buffer)
        _write_all(self._fd, data)
        self._buffer.clear()
        self._buffered = 0

    def _rotate(self) -> None:
        # Synchronous fsync (also while a PendingSync fsyncs the same file): every append made so far is in this
        # file, so once it is durable they all are, and only the last file can ever have a torn tail.
        self._write_buffer()
        if self._fsync_enabled:
            os.fsync(self._fd)
        self._durable = self._appended
        fd, self._fd = self._fd, -1
        self._retire(fd)
        self._sequence += 1
        self._fd = self._create_file(self._generation, self._sequence)
        self._file_bytes = FILE_HEADER_SIZE

    def _create_file(self, generation: int, sequence: int) -> int:
        """A new data file with its header written (and, when syncing, durable with its directory entry)."""
        fd = os.open(self._dir / file_name(generation, sequence), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND)
        try:
            _write_all(fd, encode_file_header(generation, sequence))
            if self._fsync_enabled:
                os.fsync(fd)
                _fsync_dir(self._dir)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def sync(self) -> None:
        """Make every append so far durable with one write and one ``fsync`` (a no-op when nothing is pending)."""
        pending = self.begin_sync()
        if pending is not None:
            pending.complete()

    def begin_sync(self) -> PendingSync | None:
        """Start a group commit of every append so far: write them, return the ``fsync`` still to do.

        ``None`` when nothing is pending.  Otherwise the caller runs
        :meth:`PendingSync.wait` (possibly in a worker thread, while this journal
        goes on appending here) and then :meth:`PendingSync.done`: only then are
        these appends durable.  Several may be under way; each covers the appends
        made before it began.
        """
        self._check_open()
        if not self.pending:
            return None
        try:
            self._write_buffer()
        except OSError as error:
            self._fail(error)
            raise
        if not self._fsync_enabled:
            return PendingSync(self, -1, self._appended)
        self._busy[self._fd] = self._busy.get(self._fd, 0) + 1
        return PendingSync(self, self._fd, self._appended)

    def _end_sync(self, fd: int, upto: int, error: BaseException | None) -> None:
        if fd >= 0:
            left = self._busy.pop(fd) - 1
            if left:
                self._busy[fd] = left
            elif fd in self._retired:
                self._retired.discard(fd)
                self._retire(fd)
        if error is None:
            self._durable = max(self._durable, upto)
        elif isinstance(error, Exception) and self._state == _OPEN:
            self._fail(error)  # an interrupted wait (KeyboardInterrupt, ...) leaves the appends pending instead

    @property
    def pending(self) -> int:
        """Appends not yet durable: made since the last completed sync (or open, rotation, compaction).

        Appends covered by a :class:`PendingSync` still count until it is done.
        """
        return self._appended - self._durable

    # -- applying records to the in-memory state ------------------------------------------------------------

    def _apply(self, kind: Kind, tx_id: int, record_id: int, user_type: int, payload: bytes) -> None:
        """Apply one record to the in-memory state.

        At run time the public methods have already checked the call; at recovery
        this is lenient on purpose (an update of an unknown id stores it, a
        delete of an unknown id or a commit of an unknown transaction is a no-op).
        """
        if kind in (Kind.ADD, Kind.UPDATE):
            self._live[record_id] = RecordInfo(record_id, user_type, payload)
        elif kind == Kind.DELETE:
            self._live.pop(record_id, None)
        elif kind == Kind.COMMIT:
            tx = self._txs.pop(tx_id, None)
            if tx is not None:
                for info in tx.writes.values():
                    self._live[info.record_id] = info
                for deleted in tx.deletes:
                    self._live.pop(deleted, None)
        elif kind == Kind.ROLLBACK:
            self._txs.pop(tx_id, None)
        else:
            tx = self._txs.setdefault(tx_id, _Tx())
            if kind == Kind.PREPARE:
                tx.prepared = True
                tx.data = payload
            elif kind == Kind.DELETE_TX:
                tx.writes.pop(record_id, None)
                if record_id in tx.added:
                    tx.added.discard(record_id)
                else:
                    tx.deletes[record_id] = None
            else:  # ADD_TX, UPDATE_TX
                if kind == Kind.ADD_TX and record_id not in tx.deletes and record_id not in tx.writes:
                    tx.added.add(record_id)
                tx.deletes.pop(record_id, None)
                tx.writes[record_id] = RecordInfo(record_id, user_type, payload)

    # -- recovery -------------------------------------------------------------------------------------------

    def _read_manifest(self) -> tuple[int, int] | None:
        path = self._dir / MANIFEST_NAME
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return decode_manifest(data)
        except BadBytes as bad:
            raise JournalCorrupted(path, 0, bad.reason) from None

    def _write_manifest(self, generation: int, first_sequence: int) -> None:
        """Replace the manifest atomically: write a temporary file, fsync it, rename it, fsync the directory."""
        tmp = self._dir / _MANIFEST_TMP
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, encode_manifest(generation, first_sequence))
            if self._fsync_enabled:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self._dir / MANIFEST_NAME)
        if self._fsync_enabled:
            _fsync_dir(self._dir)

    def _recover(self) -> Recovery:
        with contextlib.suppress(FileNotFoundError):
            (self._dir / _MANIFEST_TMP).unlink()  # a compaction that stopped before its switch
        data_files: dict[tuple[int, int], Path] = {}
        for entry in self._dir.iterdir():
            parsed = parse_file_name(entry.name)
            if parsed is not None:
                data_files[parsed] = entry
        manifest = self._read_manifest()
        if manifest is None:
            if data_files:
                raise JournalCorrupted(
                    self._dir / MANIFEST_NAME, 0, f"missing, yet the directory holds {len(data_files)} journal file(s)"
                )
            self._generation, self._first_sequence = 1, 1
            self._write_manifest(1, 1)
            data_files = {}
        else:
            self._generation, self._first_sequence = manifest

        live = sorted((seq, path) for (gen, seq), path in data_files.items() if gen == self._generation)
        stale = [path for (gen, _), path in data_files.items() if gen != self._generation]
        for path in stale:  # the old set after a compaction's switch, or a new set that never got switched to
            path.unlink()
        if stale and self._fsync_enabled:
            _fsync_dir(self._dir)
        for index, (seq, path) in enumerate(live):
            if seq != self._first_sequence + index:
                expected = file_name(self._generation, self._first_sequence + index)
                raise JournalCorrupted(path, 0, f"journal file {expected} is missing before this one")

        torn = 0
        for index, (seq, path) in enumerate(live):
            torn += self._replay_file(path, seq, last=index == len(live) - 1)

        if live:
            self._sequence = live[-1][0]
            self._fd = os.open(live[-1][1], os.O_WRONLY | os.O_APPEND)
            self._file_bytes = os.fstat(self._fd).st_size
        else:  # a journal whose first file was never created (a crash right after the manifest)
            self._sequence = self._first_sequence
            self._fd = self._create_file(self._generation, self._sequence)
            self._file_bytes = FILE_HEADER_SIZE

        prepared = tuple(
            PreparedTransaction(tx_id, tx.data, tuple(tx.writes.values()), tuple(tx.deletes))
            for tx_id, tx in self._txs.items()
            if tx.prepared
        )
        discarded = [tx_id for tx_id, tx in self._txs.items() if not tx.prepared]
        self._state = _OPEN  # the ROLLBACK appends below need it
        try:
            for tx_id in discarded:
                self._append(Kind.ROLLBACK, tx_id, 0, 0, b"")
            self.sync()
        except BaseException:
            self._state = _NEW
            raise
        return Recovery(
            records=tuple(self._live.values()),
            prepared=prepared,
            discarded_transactions=len(discarded),
            torn_bytes=torn,
            files=self._sequence - self._first_sequence + 1,
        )

    def _replay_file(self, path: Path, sequence: int, *, last: bool) -> int:
        """Apply one file's records; return the torn bytes cut from its end (only ever from the last file)."""
        data = path.read_bytes()
        try:
            header = decode_file_header(data)
        except BadBytes as bad:
            if last and len(data) < FILE_HEADER_SIZE:  # created, header not yet written in full: nothing lost
                self._rewrite_header(path, sequence)
                return len(data)
            raise JournalCorrupted(path, 0, bad.reason) from None
        if header != (self._generation, sequence):
            raise JournalCorrupted(
                path, 0, f"header says generation {header[0]} sequence {header[1]}, the name says otherwise"
            )
        offset = FILE_HEADER_SIZE
        while offset < len(data):
            try:
                record = decode_record(data, offset)
            except BadBytes as bad:
                following = find_next_record(data, offset + 1)
                if not last:
                    raise JournalCorrupted(path, offset, f"{bad.reason}; later journal files follow") from None
                if following is not None:
                    raise JournalCorrupted(
                        path, offset, f"{bad.reason}; a valid record follows at offset {following}"
                    ) from None
                self._truncate(path, offset)
                return len(data) - offset
            self._apply(record.kind, record.tx_id, record.record_id, record.user_type, record.payload)
            offset += record.size
        return 0

    def _truncate(self, path: Path, size: int) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
            if self._fsync_enabled:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _rewrite_header(self, path: Path, sequence: int) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            _write_all(fd, encode_file_header(self._generation, sequence))
            if self._fsync_enabled:
                os.fsync(fd)
        finally:
            os.close(fd)

    # -- replication ----------------------------------------------------------------------------------------

    def snapshot(self) -> list[bytes]:
        """The live state as encoded records (committed records, then the unfinished transactions): replayed into an
        empty journal they give this journal's state.  Taken at one moment of the owner's thread: together with
        :meth:`observe_appends` set in the same turn, a backup misses nothing and gets nothing twice."""
        self._check_open()
        return list(self._live_records())

    def observe_appends(self, observer: Callable[[bytes], object] | None) -> None:
        """Give ``observer`` every record appended from now on (encoded, as written); ``None`` stops it."""
        self._observer = observer

    def replay(self, records: bytes) -> int:
        """Append records another journal encoded (a snapshot or its appends, concatenated), as they are: the
        sender checked each call, so only the bytes are checked here.  Returns how many were appended; a batch
        that does not decode raises :class:`JournalCorrupted` at the offset of its first bad record, having
        appended none of it."""
        self._check_open()
        decoded = []
        offset = 0
        while offset < len(records):
            try:
                record = decode_record(records, offset)
            except BadBytes as bad:
                raise JournalCorrupted(self._dir / "<replicated batch>", offset, bad.reason) from None
            decoded.append(record)
            offset += record.size
        for record in decoded:
            self._append(record.kind, record.tx_id, record.record_id, record.user_type, record.payload)
        return len(decoded)

    # -- compaction -----------------------------------------------------------------------------------------

    def compact(self) -> None:
        """Rewrite the live state into a new generation of files and switch to it atomically.

        Written: every committed record (as ADD, in order), then every unfinished
        transaction (its adds/updates, deletes and, if prepared, its PREPARE), so
        that a transaction still open can go on appending and commit later.
        Steps: write and fsync the new files, fsync the directory, replace the
        manifest (temporary file, fsync, rename, fsync directory) -- the switch --
        then delete the old files.  A crash before the rename recovers the old
        set (the new files are deleted at open); after it, the new set (the old
        files are deleted at open).  On an ``OSError`` the journal is failed:
        close it and open a new :class:`Journal`.  All pending appends are
        durable afterwards.
        """
        self._check_open()
        try:
            self._write_buffer()  # a crash before the switch recovers the old set: with every append made so far
            self._compact()
        except OSError as error:
            self._fail(error)
            raise

    def _compact(self) -> None:
        generation = self._generation + 1
        first = sequence = self._sequence + 1
        fd = self._create_file(generation, sequence)
        size = FILE_HEADER_SIZE
        try:
            for record in self._live_records():
                if size + len(record) > self._file_size:
                    if self._fsync_enabled:
                        os.fsync(fd)
                    os.close(fd)
                    fd = -1
                    sequence += 1
                    fd = self._create_file(generation, sequence)
                    size = FILE_HEADER_SIZE
                _write_all(fd, record)
                size += len(record)
            if self._fsync_enabled:
                os.fsync(fd)
                _fsync_dir(self._dir)
            self._write_manifest(generation, first)  # the switch
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        old = [self._dir / file_name(self._generation, seq) for seq in range(self._first_sequence, self._sequence + 1)]
        old_fd, self._fd = self._fd, fd
        self._generation, self._first_sequence, self._sequence = generation, first, sequence
        self._file_bytes = size
        self._durable = self._appended
        self._retire(old_fd)
        for path in old:
            path.unlink()
        if self._fsync_enabled:
            _fsync_dir(self._dir)

    @property
    def data_files(self) -> int:
        """Data files of the live generation."""
        return self._sequence - self._first_sequence + 1

    def live_bytes(self) -> int:
        """What a compaction would write: the committed records and the unfinished transactions (O(live))."""
        size = sum(RECORD_OVERHEAD + len(info.payload) for info in self._live.values())
        for tx in self._txs.values():
            size += sum(RECORD_OVERHEAD + len(info.payload) for info in tx.writes.values())
            size += RECORD_OVERHEAD * len(tx.deletes) + (RECORD_OVERHEAD + len(tx.data) if tx.prepared else 0)
        return size

    def compaction_due(self, min_files: int, percentage: int) -> bool:
        """Artemis's rule (``journal-compact-min-files``, ``journal-compact-percentage``): more data files than
        ``min_files`` and live data under ``percentage`` % of their capacity.  A percentage of 0 never compacts."""
        if percentage <= 0 or self.data_files <= min_files:
            return False
        return self.live_bytes() * 100 < self.data_files * self._file_size * percentage

    def _live_records(self) -> Iterator[bytes]:
        """The records of a compacted journal, one at a time (memory stays at the live set)."""
        for info in self._live.values():
            yield encode_record(Kind.ADD, 0, info.record_id, info.user_type, info.payload)
        for tx_id, tx in self._txs.items():
            for info in tx.writes.values():
                kind = Kind.ADD_TX if info.record_id in tx.added else Kind.UPDATE_TX
                yield encode_record(kind, tx_id, info.record_id, info.user_type, info.payload)
            for deleted in tx.deletes:
                yield encode_record(Kind.DELETE_TX, tx_id, deleted, 0, b"")
            if tx.prepared:
                yield encode_record(Kind.PREPARE, tx_id, 0, 0, tx.data)
