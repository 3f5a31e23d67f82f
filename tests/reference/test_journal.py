"""The journal: round trips across reopen, transactions, rotation, misuse, compaction and crashes during it."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cck.reference.journal import (
    Journal,
    JournalCorrupted,
    JournalLocked,
    JournalStateError,
    PreparedTransaction,
    RecordInfo,
    Recovery,
)
from cck.reference.journal._format import FILE_HEADER_SIZE, MANIFEST_NAME, RECORD_OVERHEAD, parse_file_name


def reopen(directory: Path, **kwargs: Any) -> Recovery:
    journal = Journal(directory, **kwargs)
    try:
        return journal.open()
    finally:
        journal.close()


def data_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if parse_file_name(p.name) is not None)


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    j = Journal(tmp_path / "j")
    recovery = j.open()
    assert recovery == Recovery((), (), 0, 0, 1)
    yield j
    j.close()


def test_every_non_transactional_operation_survives_reopen(journal: Journal, tmp_path: Path) -> None:
    journal.add(1, 30, b"one")
    journal.add(2, 31, b"two")
    journal.add(3, 30, b"")
    journal.update(1, 32, b"one, updated")
    journal.delete(2)
    journal.add(2, 33, b"two again")
    assert journal.pending == 6
    journal.sync()
    assert journal.pending == 0
    journal.close()
    recovery = reopen(tmp_path / "j")
    # first-add order; the update kept record 1 in place, the re-added 2 went to the end
    assert recovery.records == (
        RecordInfo(1, 32, b"one, updated"),
        RecordInfo(3, 30, b""),
        RecordInfo(2, 33, b"two again"),
    )
    assert (recovery.prepared, recovery.discarded_transactions, recovery.torn_bytes) == ((), 0, 0)


def test_large_ids_and_payloads_round_trip(journal: Journal, tmp_path: Path) -> None:
    payload = bytes(range(256)) * 300
    journal.add(2**64 - 1, 65535, payload)
    journal.add_tx(2**64 - 1, 0, 0, b"\x00")
    journal.commit(2**64 - 1)
    journal.close()
    assert reopen(tmp_path / "j").records == (RecordInfo(2**64 - 1, 65535, payload), RecordInfo(0, 0, b"\x00"))


def test_committed_transaction_applies_all_its_effects(journal: Journal, tmp_path: Path) -> None:
    journal.add(1, 1, b"a")
    journal.add(2, 1, b"b")
    journal.add_tx(7, 10, 2, b"new")
    journal.update_tx(7, 10, 2, b"new, updated in tx")
    journal.update_tx(7, 1, 1, b"a, updated in tx")
    journal.delete_tx(7, 2)
    journal.commit(7)
    journal.close()
    recovery = reopen(tmp_path / "j")
    assert recovery.records == (RecordInfo(1, 1, b"a, updated in tx"), RecordInfo(10, 2, b"new, updated in tx"))
    assert recovery.discarded_transactions == 0


def test_rolled_back_transaction_leaves_no_trace(journal: Journal, tmp_path: Path) -> None:
    journal.add(1, 1, b"a")
    journal.add_tx(7, 2, 1, b"b")
    journal.delete_tx(7, 1)
    journal.rollback(7)
    journal.close()
    recovery = reopen(tmp_path / "j")
    assert recovery.records == (RecordInfo(1, 1, b"a"),)
    assert (recovery.prepared, recovery.discarded_transactions) == ((), 0)


def test_prepared_transaction_comes_back_unapplied_and_can_be_committed(journal: Journal, tmp_path: Path) -> None:
    journal.add(1, 1, b"acked by the tx")
    journal.add(2, 1, b"updated by the tx")
    journal.add_tx(9, 3, 2, b"sent in the tx")
    journal.update_tx(9, 2, 1, b"new value")
    journal.delete_tx(9, 1)
    journal.add_tx(9, 4, 2, b"added then deleted in the tx")
    journal.delete_tx(9, 4)
    journal.prepare(9, b"xid-bytes")
    journal.close()

    j = Journal(tmp_path / "j")
    recovery = j.open()
    assert recovery.records == (RecordInfo(1, 1, b"acked by the tx"), RecordInfo(2, 1, b"updated by the tx"))
    assert recovery.prepared == (
        PreparedTransaction(
            9, b"xid-bytes", (RecordInfo(3, 2, b"sent in the tx"), RecordInfo(2, 1, b"new value")), (1,)
        ),
    )
    with pytest.raises(JournalStateError, match="prepared"):
        j.add_tx(9, 5, 0, b"")
    j.commit(9)  # after the restart
    j.close()
    recovery = reopen(tmp_path / "j")
    assert recovery.records == (RecordInfo(2, 1, b"new value"), RecordInfo(3, 2, b"sent in the tx"))
    assert recovery.prepared == ()


def test_prepared_transaction_rolled_back_after_restart(journal: Journal, tmp_path: Path) -> None:
    journal.add(1, 1, b"a")
    journal.delete_tx(4, 1)
    journal.prepare(4, b"xid")
    journal.close()
    j = Journal(tmp_path / "j")
    assert j.open().prepared == (PreparedTransaction(4, b"xid", (), (1,)),)
    j.rollback(4)
    j.close()
    recovery = reopen(tmp_path / "j")
    assert (recovery.records, recovery.prepared) == ((RecordInfo(1, 1, b"a"),), ())


def test_prepare_without_records_is_kept(journal: Journal, tmp_path: Path) -> None:
    journal.prepare(5, b"empty xa branch")
    journal.close()
    assert reopen(tmp_path / "j").prepared == (PreparedTransaction(5, b"empty xa branch", (), ()),)


def test_unfinished_transactions_are_discarded_once(journal: Journal, tmp_path: Path) -> None:
    journal.add(1, 1, b"a")
    journal.add_tx(1, 2, 1, b"never committed")
    journal.delete_tx(2, 1)
    journal.close()
    recovery = reopen(tmp_path / "j")
    assert recovery.records == (RecordInfo(1, 1, b"a"),)
    assert recovery.discarded_transactions == 2
    # the discard was journalled: a reused transaction id starts clean and nothing is counted again
    j = Journal(tmp_path / "j")
    assert j.open().discarded_transactions == 0
    j.add_tx(1, 3, 1, b"reused tx id")
    j.commit(1)
    j.close()
    assert reopen(tmp_path / "j").records == (RecordInfo(1, 1, b"a"), RecordInfo(3, 1, b"reused tx id"))


def test_transaction_id_can_be_reused_after_commit(journal: Journal, tmp_path: Path) -> None:
    journal.add_tx(1, 1, 0, b"first")
    journal.commit(1)
    journal.add_tx(1, 2, 0, b"second")
    journal.rollback(1)
    journal.add_tx(1, 3, 0, b"third")
    journal.commit(1)
    journal.close()
    assert [r.record_id for r in reopen(tmp_path / "j").records] == [1, 3]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda j: j.add(1, 0, b""), "already live"),
        (lambda j: j.update(2, 0, b""), "not live"),
        (lambda j: j.delete(2), "not live"),
        (lambda j: j.add_tx(1, 1, 0, b""), "already live"),
        (lambda j: j.update_tx(1, 2, 0, b""), "not live"),
        (lambda j: j.delete_tx(1, 2), "not live"),
        (lambda j: j.commit(99), "appended nothing"),
        (lambda j: j.rollback(99), "appended nothing"),
    ],
)
def test_misuse_is_refused_before_anything_is_written(
    journal: Journal, tmp_path: Path, call: Callable[[Journal], None], message: str
) -> None:
    journal.add(1, 0, b"x")
    journal.sync()
    size = sum(p.stat().st_size for p in data_files(tmp_path / "j"))
    with pytest.raises(JournalStateError, match=message) as info:
        call(journal)
    assert info.value.file == tmp_path / "j"
    assert sum(p.stat().st_size for p in data_files(tmp_path / "j")) == size
    assert journal.pending == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda j: j.add(-1, 0, b""),
        lambda j: j.add(2**64, 0, b""),
        lambda j: j.add(1, 65536, b""),
        lambda j: j.add(1, -1, b""),
        lambda j: j.add_tx(-1, 1, 0, b""),
        lambda j: j.add(1, 0, bytes(2000)),  # does not fit in a 1 KiB file
    ],
)
def test_out_of_range_arguments_are_value_errors(tmp_path: Path, call: Callable[[Journal], None]) -> None:
    j = Journal(tmp_path, file_size=1024)
    j.open()
    with pytest.raises(ValueError, match=r"must be in|does not fit"):
        call(j)
    j.close()


def test_calls_before_open_and_after_close_are_refused(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    with pytest.raises(JournalStateError, match="open"):
        j.add(1, 0, b"")
    j.open()
    with pytest.raises(JournalStateError, match="open"):
        j.open()
    j.close()
    j.close()  # idempotent
    with pytest.raises(JournalStateError, match="closed"):
        j.sync()


def test_second_journal_on_the_same_directory_is_locked_out(journal: Journal, tmp_path: Path) -> None:
    with pytest.raises(JournalLocked, match="another Journal"):
        Journal(tmp_path / "j").open()


def test_sync_false_still_writes(tmp_path: Path) -> None:
    j = Journal(tmp_path, sync=False)
    j.open()
    j.add(1, 0, b"x")
    j.sync()
    assert j.pending == 0
    j.close()
    assert reopen(tmp_path).records == (RecordInfo(1, 0, b"x"),)


def test_one_fsync_per_sync_for_a_group(journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = os.fsync

    def counting_fsync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    for record_id in range(100):
        journal.add(record_id, 0, b"m")
    assert calls == []
    assert journal.pending == 100
    journal.sync()
    assert len(calls) == 1
    journal.sync()  # nothing pending: no fsync
    assert len(calls) == 1


def test_files_rotate_and_recover_in_order(tmp_path: Path) -> None:
    j = Journal(tmp_path, file_size=256)
    j.open()
    for record_id in range(50):
        j.add(record_id, 1, record_id.to_bytes(4, "big") * 5)
        if record_id % 3 == 0:
            j.delete(record_id)
    j.close()
    files = data_files(tmp_path)
    assert len(files) > 10
    assert all(p.stat().st_size <= 256 for p in files)
    assert [parse_file_name(p.name) for p in files] == [(1, seq) for seq in range(1, len(files) + 1)]
    recovery = reopen(tmp_path, file_size=256)
    assert recovery.files == len(files)
    assert [r.record_id for r in recovery.records] == [i for i in range(50) if i % 3]
    assert all(r.payload == r.record_id.to_bytes(4, "big") * 5 for r in recovery.records)


def test_a_missing_middle_file_is_corruption(tmp_path: Path) -> None:
    j = Journal(tmp_path, file_size=128)
    j.open()
    for record_id in range(20):
        j.add(record_id, 1, bytes(40))
    j.close()
    files = data_files(tmp_path)
    files[2].unlink()
    with pytest.raises(JournalCorrupted, match="is missing before this one") as info:
        reopen(tmp_path, file_size=128)
    assert info.value.file == files[3]
    assert info.value.offset == 0


def test_data_files_without_manifest_are_refused(journal: Journal, tmp_path: Path) -> None:
    journal.add(1, 0, b"x")
    journal.close()
    (tmp_path / "j" / MANIFEST_NAME).unlink()
    with pytest.raises(JournalCorrupted, match="missing, yet the directory holds 1 journal file"):
        reopen(tmp_path / "j")


def test_a_damaged_manifest_is_corruption(journal: Journal, tmp_path: Path) -> None:
    journal.close()
    manifest = tmp_path / "j" / MANIFEST_NAME
    manifest.write_bytes(manifest.read_bytes()[:-1] + b"\x00")
    with pytest.raises(JournalCorrupted, match="manifest: CRC mismatch") as info:
        reopen(tmp_path / "j")
    assert (info.value.file, info.value.offset) == (manifest, 0)


def test_an_empty_last_file_from_a_crash_during_creation_is_torn(tmp_path: Path) -> None:
    j = Journal(tmp_path, file_size=128)
    j.open()
    for record_id in range(6):
        j.add(record_id, 1, bytes(40))
    j.close()
    last = data_files(tmp_path)[-1]
    last.write_bytes(last.read_bytes()[: FILE_HEADER_SIZE - 5])  # header cut short, no records
    recovery = reopen(tmp_path, file_size=128)
    assert recovery.torn_bytes == FILE_HEADER_SIZE - 5
    assert len(recovery.records) < 6
    assert last.stat().st_size == FILE_HEADER_SIZE


# -- compaction ----------------------------------------------------------------------------------------------


def build_busy_journal(directory: Path, file_size: int = 512) -> Journal:
    """A journal with updates, deletes, a committed, a prepared and an open transaction, over many files."""
    j = Journal(directory, file_size=file_size)
    j.open()
    for record_id in range(40):
        j.add(record_id, record_id % 3, bytes([record_id]) * (record_id % 17))
    for record_id in range(0, 40, 4):
        j.delete(record_id)
    for record_id in range(2, 40, 4):
        j.update(record_id, 9, b"updated")
    j.add_tx(100, 100, 1, b"committed add")
    j.delete_tx(100, 1)
    j.commit(100)
    j.add_tx(200, 200, 1, b"prepared add")
    j.update_tx(200, 2, 1, b"prepared update")
    j.delete_tx(200, 3)
    j.prepare(200, b"xid-200")
    j.add_tx(300, 300, 1, b"open add")
    j.delete_tx(300, 5)
    j.sync()
    return j


def test_compaction_then_reopen_equals_before(tmp_path: Path) -> None:
    j = build_busy_journal(tmp_path)
    j.close()
    before = reopen(tmp_path, file_size=512)
    files_before = data_files(tmp_path)

    j = Journal(tmp_path, file_size=512)
    j.open()
    j.compact()
    j.close()
    after = reopen(tmp_path, file_size=512)
    assert after.records == before.records
    assert after.prepared == before.prepared
    assert after.files < len(files_before)
    assert all(parse_file_name(p.name)[0] == 2 for p in data_files(tmp_path))  # type: ignore[index]


def test_open_transaction_survives_compaction_and_commits_later(tmp_path: Path) -> None:
    j = build_busy_journal(tmp_path)
    j.compact()
    j.add_tx(300, 301, 1, b"appended after compaction")
    j.commit(300)
    j.commit(200)
    j.add(500, 0, b"after")
    j.compact()
    j.add(501, 0, b"after the second compaction")
    j.close()
    recovery = reopen(tmp_path, file_size=512)
    ids = [r.record_id for r in recovery.records]
    assert {100, 200, 300, 301, 500, 501} <= set(ids)
    assert 3 not in ids
    assert 5 not in ids
    assert RecordInfo(2, 1, b"prepared update") in recovery.records
    assert (recovery.prepared, recovery.discarded_transactions) == ((), 0)


def test_compaction_of_an_empty_journal(journal: Journal, tmp_path: Path) -> None:
    journal.compact()
    journal.add(1, 0, b"x")
    journal.close()
    assert reopen(tmp_path / "j") == Recovery((RecordInfo(1, 0, b"x"),), (), 0, 0, 1)


class Crash(OSError):
    """The injected failure (an I/O error, as a dying disk gives): the 'process' stops at this call."""


class Injector:
    """Counts the compaction's file-system calls and raises :class:`Crash` at call number ``fail_at``."""

    NAMES = ("write", "fsync", "replace", "unlink", "close", "ftruncate")

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_at: int | None) -> None:
        self.calls: list[str] = []
        self.fail_at = fail_at
        for name in self.NAMES:
            monkeypatch.setattr(os, name, self._wrap(name, getattr(os, name)))

    def _step(self, name: str) -> None:
        if self.fail_at is not None and len(self.calls) == self.fail_at:
            self.calls.append(name)
            raise Crash(f"injected at call {self.fail_at} ({name})")
        self.calls.append(name)

    def _wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self._step(name)
            return real(*args, **kwargs)

        return wrapper


def count_compaction_calls(directory: Path) -> int:
    with pytest.MonkeyPatch.context() as mp:
        j = build_busy_journal(directory)
        injector = Injector(mp, None)
        j.compact()
        count = len(injector.calls)
    j.close()
    return count


def test_compaction_makes_a_known_number_of_calls(tmp_path: Path) -> None:
    count = count_compaction_calls(tmp_path)
    assert 10 < count < len(CRASH_POINTS) + 1, "widen CRASH_POINTS to cover every call"


CRASH_POINTS = range(80)


@pytest.mark.parametrize("fail_at", CRASH_POINTS)
def test_crash_at_any_step_of_compaction_recovers_old_or_new_state(tmp_path: Path, fail_at: int) -> None:
    reference = tmp_path / "reference"
    build_busy_journal(reference).close()
    expected = reopen(reference, file_size=512)

    directory = tmp_path / "j"
    j = build_busy_journal(directory)
    with pytest.MonkeyPatch.context() as mp:
        injector = Injector(mp, fail_at)
        try:
            j.compact()
        except Crash:
            crashed_at = f"crash at call {fail_at} ({injector.calls[-1]})"
        else:  # past the last call: the compaction completed
            crashed_at = ""
    if crashed_at:
        with pytest.raises(JournalStateError, match="failed earlier"):
            j.add(1000, 0, b"")
    j.close()
    recovery = reopen(directory, file_size=512)
    assert recovery.records == expected.records, crashed_at
    assert recovery.prepared == expected.prepared
    generations = {parse_file_name(p.name)[0] for p in data_files(directory)}  # type: ignore[index]
    assert len(generations) == 1, "old and new files must never be mixed after recovery"
    assert not (directory / (MANIFEST_NAME + ".tmp")).exists()
    # and the recovered journal works
    j = Journal(directory, file_size=512)
    j.open()
    j.add(1000, 0, b"after the crash")
    j.compact()
    j.close()
    assert reopen(directory, file_size=512).records == (*expected.records, RecordInfo(1000, 0, b"after the crash"))


# -- write coalescing and the split sync -------------------------------------------------------------------


def file_sizes(directory: Path) -> int:
    return sum(p.stat().st_size for p in data_files(directory))


def test_appends_are_buffered_and_written_with_one_write_at_sync(
    journal: Journal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "j"
    writes: list[int] = []
    real = os.write

    def counting_write(fd: int, data: bytes) -> int:
        writes.append(len(data))
        return real(fd, data)

    monkeypatch.setattr(os, "write", counting_write)
    before = file_sizes(directory)
    for record_id in range(50):
        journal.add(record_id, 0, b"payload %d" % record_id)
    assert writes == []
    assert file_sizes(directory) == before  # nothing promised before sync(), so nothing written yet
    journal.sync()
    assert len(writes) == 1
    assert file_sizes(directory) == before + writes[0]
    journal.close()
    assert [r.record_id for r in reopen(directory).records] == list(range(50))


def test_a_full_buffer_is_written_before_sync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cck.reference.journal import _journal

    monkeypatch.setattr(_journal, "_WRITE_AT", 300)
    j = Journal(tmp_path)
    j.open()
    size = file_sizes(tmp_path)
    for record_id in range(20):
        j.add(record_id, 0, bytes(40))
    written = file_sizes(tmp_path) - size
    assert 0 < written < 20 * (RECORD_OVERHEAD + 40)
    assert j.pending == 20  # written is not durable
    j.close()
    assert len(reopen(tmp_path).records) == 20


def test_rotation_writes_and_fsyncs_the_buffered_records_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    j = Journal(tmp_path, file_size=256)
    j.open()
    calls.clear()
    for record_id in range(3):
        j.add(record_id, 1, bytes(40))  # three fit in the first file
    assert len(data_files(tmp_path)) == 1
    assert calls == []
    assert j.pending == 3
    j.add(3, 1, bytes(40))  # does not fit: the file is written, fsynced and a new one started
    files = data_files(tmp_path)
    assert len(files) == 2
    assert "fsync" in calls
    assert files[0].stat().st_size == FILE_HEADER_SIZE + 3 * (RECORD_OVERHEAD + 40)
    assert j.pending == 1  # the rotation made the first three durable
    j.close()
    assert [r.record_id for r in reopen(tmp_path, file_size=256).records] == [0, 1, 2, 3]


def test_begin_sync_lets_appends_go_on_while_the_fsync_runs_in_a_thread(journal: Journal, tmp_path: Path) -> None:
    journal.add(1, 0, b"covered")
    pending = journal.begin_sync()
    assert pending is not None
    journal.add(2, 0, b"made while the fsync runs")
    assert journal.pending == 2
    worker = threading.Thread(target=pending.wait)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive()
    pending.done()
    assert journal.pending == 1  # record 2 waits for the next sync
    with pytest.raises(RuntimeError, match="twice"):
        pending.done()
    assert journal.begin_sync() is not None


def test_begin_sync_with_nothing_pending_is_none(journal: Journal) -> None:
    assert journal.begin_sync() is None
    journal.add(1, 0, b"x")
    journal.sync()
    assert journal.begin_sync() is None


def test_rotation_during_a_sync_keeps_the_old_file_open_until_it_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[int] = []
    real_close = os.close
    monkeypatch.setattr(os, "close", lambda fd: (closed.append(fd), real_close(fd))[1])
    j = Journal(tmp_path, file_size=256)
    j.open()
    j.add(0, 1, bytes(50))
    pending = j.begin_sync()
    assert pending is not None
    old_fd = pending._fd
    closed.clear()  # from here on, a close of that number can only be of the old file
    for record_id in range(1, 8):
        j.add(record_id, 1, bytes(50))  # rotates at least once
    assert len(data_files(tmp_path)) >= 2
    assert old_fd not in closed
    pending.wait()  # an fsync of the old file: its fd is still valid
    pending.done()
    assert old_fd in closed
    j.close()
    assert [r.record_id for r in reopen(tmp_path, file_size=256).records] == list(range(8))


def test_close_during_a_sync_closes_the_file_when_it_is_done(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.open()
    j.add(1, 0, b"x")
    pending = j.begin_sync()
    assert pending is not None
    j.add(2, 0, b"y")
    j.close()  # syncs record 2 itself; record 1's fsync is still under way
    pending.wait()
    pending.done()
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(pending._fd)
    assert [r.record_id for r in reopen(tmp_path).records] == [1, 2]


def test_a_failed_fsync_puts_the_journal_in_its_failed_state(journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    journal.add(1, 0, b"x")
    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        journal.sync()
    assert journal.pending == 1
    with pytest.raises(JournalStateError, match="failed earlier"):
        journal.add(2, 0, b"y")
    with pytest.raises(JournalStateError, match="failed earlier"):
        journal.sync()


def test_a_failed_fsync_in_a_worker_thread_fails_the_journal_at_done(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    journal.add(1, 0, b"x")
    pending = journal.begin_sync()
    assert pending is not None
    journal.add(2, 0, b"y")  # still allowed: the failure is not known yet
    monkeypatch.setattr(os, "fsync", failing_fsync)
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            pending.wait()
        except OSError as error:
            errors.append(error)

    worker = threading.Thread(target=wait)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert len(errors) == 1
    pending.done(errors[0])
    assert journal.pending == 2
    with pytest.raises(JournalStateError, match=r"failed earlier.*Input/output error"):
        journal.add(3, 0, b"z")


def test_unsynced_appends_recover_as_a_consistent_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a kill leaves (the files as they are, the buffer lost): everything synced, then some prefix of
    the appends made after, whole records and whole transactions only."""
    from cck.reference.journal import _journal

    monkeypatch.setattr(_journal, "_WRITE_AT", 200)  # part of the unsynced appends reaches the file
    directory = tmp_path / "live"
    j = Journal(directory)
    j.open()
    for record_id in range(10):
        j.add(record_id, 0, b"synced %d" % record_id)
    j.sync()
    for n in range(10):  # transaction n replaces record n with record 1000 + n
        j.add_tx(n, 1000 + n, 0, bytes(30))
        j.delete_tx(n, n)
        j.commit(n)
    crashed = tmp_path / "crashed"
    shutil.copytree(directory, crashed)  # the files at the kill
    j.close()

    recovery = reopen(crashed)
    ids = [r.record_id for r in recovery.records]
    assert recovery.torn_bytes == 0
    assert recovery.discarded_transactions <= 1  # at most one transaction cut by a buffer boundary
    committed = sum(1000 + n in ids for n in range(10))
    assert 0 < committed < 10  # some reached the file, the last one was still in the buffer
    assert ids == [*range(committed, 10), *range(1000, 1000 + committed)]  # a prefix, every transaction whole


def test_a_group_written_by_one_sync_and_cut_in_the_middle_is_a_torn_tail(journal: Journal, tmp_path: Path) -> None:
    directory = tmp_path / "j"
    journal.add(1, 0, b"first group")
    journal.sync()
    size = file_sizes(directory)
    for record_id in range(2, 6):
        journal.add(record_id, 0, bytes(20))
    journal.sync()
    journal.close()
    (path,) = data_files(directory)
    record = (path.stat().st_size - size) // 4
    path.write_bytes(path.read_bytes()[: size + 2 * record + 7])
    recovery = reopen(directory)
    assert [r.record_id for r in recovery.records] == [1, 2, 3]
    assert recovery.torn_bytes == 7


def test_compaction_is_due_by_artemis_rule_files_over_minimum_and_live_under_percentage(tmp_path: Path) -> None:
    j = Journal(tmp_path, file_size=256)
    j.open()
    for record_id in range(60):
        j.add(record_id, 1, bytes(20))
    assert j.data_files > 4
    assert j.live_bytes() == 60 * (RECORD_OVERHEAD + 20)
    assert not j.compaction_due(4, 30)  # nearly everything is live
    for record_id in range(55):
        j.delete(record_id)
    assert j.live_bytes() == 5 * (RECORD_OVERHEAD + 20)
    assert j.compaction_due(4, 30)
    assert not j.compaction_due(j.data_files, 30)  # not more files than the minimum
    assert not j.compaction_due(4, 0)  # 0 % turns compaction off, as in Artemis
    j.close()


def test_storage_compacts_online_when_a_new_file_makes_it_due_and_nothing_is_lost(tmp_path: Path) -> None:
    from cck.reference.broker._journal_storage import JournalStorage

    j = Journal(tmp_path, file_size=512)
    j.open()
    storage = JournalStorage(j, compact_min_files=3, compact_percentage=30)
    most_files = 0
    for record_id in range(400):
        j.add(record_id, 1, bytes(16))
        if record_id >= 3:
            j.delete(record_id - 3)  # three records live at any time: the rest is garbage
        pending = storage.begin_sync()
        if pending is not None:
            pending.wait()
            pending.done()
        most_files = max(most_files, j.data_files)
    assert storage.compactions > 0
    assert most_files <= 4  # compacted whenever a fourth file appeared with ~nothing live
    j.close()
    recovery = reopen(tmp_path, file_size=512)
    assert [r.record_id for r in recovery.records] == [397, 398, 399]
