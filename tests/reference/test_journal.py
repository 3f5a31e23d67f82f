"""The journal: round trips across reopen, transactions, rotation, misuse, compaction and crashes during it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reference.journal import (
    Journal,
    JournalCorrupted,
    JournalLocked,
    JournalStateError,
    PreparedTransaction,
    RecordInfo,
    Recovery,
)
from reference.journal._format import FILE_HEADER_SIZE, MANIFEST_NAME, parse_file_name


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
