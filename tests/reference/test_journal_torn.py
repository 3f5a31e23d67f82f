"""Recovery from damaged files: a torn tail at every byte of the last record, garbage after the
last record (truncated and reported), and damage in the middle (JournalCorrupted naming file and offset)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from cck.reference.journal import Journal, JournalCorrupted, RecordInfo, Recovery
from cck.reference.journal._format import FILE_HEADER_SIZE, RECORD_OVERHEAD, parse_file_name

LAST_PAYLOAD = b"the last record, 30 bytes long"
assert len(LAST_PAYLOAD) == 30

#: The last operation appended, and the size of its record.
LAST_OPERATIONS: dict[str, tuple[Callable[[Journal], None], int]] = {
    "add": (lambda j: j.add(9, 4, LAST_PAYLOAD), RECORD_OVERHEAD + len(LAST_PAYLOAD)),
    "update": (lambda j: j.update(1, 4, LAST_PAYLOAD), RECORD_OVERHEAD + len(LAST_PAYLOAD)),
    "commit": (lambda j: j.commit(7), RECORD_OVERHEAD),
    "prepare": (lambda j: j.prepare(7, b"xid"), RECORD_OVERHEAD + 3),
}
CUTS = [(name, cut) for name, (_, size) in LAST_OPERATIONS.items() for cut in range(size)]


def reopen(directory: Path) -> Recovery:
    journal = Journal(directory)
    try:
        return journal.open()
    finally:
        journal.close()


def only_file(directory: Path) -> Path:
    (path,) = (p for p in directory.iterdir() if parse_file_name(p.name) is not None)
    return path


def small_journal(directory: Path) -> Journal:
    j = Journal(directory)
    j.open()
    j.add(1, 1, b"first")
    j.add(2, 1, b"second")
    j.add_tx(7, 3, 2, b"in transaction 7")
    j.delete_tx(7, 2)
    j.sync()
    return j


@pytest.mark.parametrize(("last", "cut"), CUTS, ids=[f"{name}-{cut}" for name, cut in CUTS])
def test_torn_tail_at_every_byte_of_the_last_record(tmp_path: Path, last: str, cut: int) -> None:
    before_dir, torn_dir = tmp_path / "before", tmp_path / "torn"
    small_journal(before_dir).close()
    expected = reopen(before_dir)  # the state without the last record

    j = small_journal(torn_dir)
    size_before = only_file(torn_dir).stat().st_size
    operation, record_size = LAST_OPERATIONS[last]
    operation(j)
    j.close()
    path = only_file(torn_dir)
    assert path.stat().st_size == size_before + record_size
    path.write_bytes(path.read_bytes()[: size_before + cut])

    recovery = reopen(torn_dir)
    assert recovery.torn_bytes == cut
    assert recovery.records == expected.records
    assert recovery.prepared == expected.prepared
    assert recovery.discarded_transactions == expected.discarded_transactions == 1
    assert path.stat().st_size == size_before + RECORD_OVERHEAD  # truncated, then the discard's ROLLBACK

    # the journal goes on from there, and the tear is not reported again
    j = Journal(torn_dir)
    j.open()
    j.add(10, 0, b"after the tear")
    j.close()
    again = reopen(torn_dir)
    assert again.torn_bytes == 0
    assert again.records == (*expected.records, RecordInfo(10, 0, b"after the tear"))


ADD_SIZE = RECORD_OVERHEAD + len(LAST_PAYLOAD)


@pytest.mark.parametrize("offset", range(ADD_SIZE))
def test_a_flipped_byte_anywhere_in_the_last_record_is_a_torn_tail(tmp_path: Path, offset: int) -> None:
    j = small_journal(tmp_path)
    j.add(8, 0, b"")  # nothing after this one is valid
    j.sync()
    size_before = only_file(tmp_path).stat().st_size
    j.add(9, 4, LAST_PAYLOAD)
    j.close()
    path = only_file(tmp_path)
    data = bytearray(path.read_bytes())
    data[size_before + offset] ^= 0x55
    path.write_bytes(bytes(data))
    recovery = reopen(tmp_path)
    assert recovery.torn_bytes == ADD_SIZE
    assert [r.record_id for r in recovery.records] == [1, 2, 8]


GARBAGE = [
    ("random-1", random.Random(1).randbytes(1)),
    ("random-29", random.Random(2).randbytes(29)),
    ("random-30", random.Random(3).randbytes(30)),
    ("random-4096", random.Random(4).randbytes(4096)),
    ("zeros-512", bytes(512)),  # a file system's zero-filled tail after a power loss
    ("record-magic-then-random", b"JR\x01\x01" + random.Random(5).randbytes(200)),
    ("huge-length", b"JR\x01\x01\xff\xff\xff\xff" + bytes(40)),
]


@pytest.mark.parametrize("garbage", [g for _, g in GARBAGE], ids=[name for name, _ in GARBAGE])
def test_garbage_after_the_last_record_is_cut_and_counted(tmp_path: Path, garbage: bytes) -> None:
    small_journal(tmp_path).close()
    expected = reopen(tmp_path)
    path = only_file(tmp_path)
    good_size = path.stat().st_size
    with path.open("ab") as f:
        f.write(garbage)
    recovery = reopen(tmp_path)
    assert recovery.torn_bytes == len(garbage)
    assert recovery.records == expected.records
    assert path.stat().st_size == good_size


def test_a_damaged_record_followed_by_valid_ones_is_corruption(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.open()
    payloads = [b"a" * 10, b"b" * 20, b"c" * 5, b"d", b"e" * 7]
    for record_id, payload in enumerate(payloads):
        j.add(record_id, 0, payload)
    j.close()
    path = only_file(tmp_path)
    second = FILE_HEADER_SIZE + RECORD_OVERHEAD + len(payloads[0])
    data = bytearray(path.read_bytes())
    data[second + 30] ^= 0x01  # a payload byte of record 1
    path.write_bytes(bytes(data))
    third = second + RECORD_OVERHEAD + len(payloads[1])

    with pytest.raises(JournalCorrupted) as info:
        reopen(tmp_path)
    error = info.value
    assert (error.file, error.offset) == (path, second)
    assert "record CRC mismatch" in error.reason
    assert f"a valid record follows at offset {third}" in error.reason
    assert str(error).startswith(f"journal corrupted: {path} at offset {second}: record CRC mismatch")
    assert path.read_bytes() == bytes(data), "a corrupted journal is never modified"


def test_a_damaged_length_field_in_the_middle_is_corruption(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.open()
    for record_id in range(5):
        j.add(record_id, 0, b"payload")
    j.close()
    path = only_file(tmp_path)
    data = bytearray(path.read_bytes())
    data[FILE_HEADER_SIZE + 4 : FILE_HEADER_SIZE + 8] = b"\x7f\xff\xff\xff"
    path.write_bytes(bytes(data))
    with pytest.raises(JournalCorrupted, match="cut short") as info:
        reopen(tmp_path)
    assert info.value.offset == FILE_HEADER_SIZE


def rotated_journal(directory: Path) -> list[Path]:
    j = Journal(directory, file_size=200)
    j.open()
    for record_id in range(12):
        j.add(record_id, 0, bytes(50))
    j.close()
    return sorted(p for p in directory.iterdir() if parse_file_name(p.name) is not None)


def test_a_torn_end_of_a_file_that_is_not_the_last_is_corruption(tmp_path: Path) -> None:
    files = rotated_journal(tmp_path)
    assert len(files) >= 3
    size = files[1].stat().st_size
    files[1].write_bytes(files[1].read_bytes()[:-10])
    with pytest.raises(JournalCorrupted, match="later journal files follow") as info:
        reopen(tmp_path)
    assert (info.value.file, info.value.offset) == (files[1], size - RECORD_OVERHEAD - 50)


def test_a_damaged_file_header_is_corruption(tmp_path: Path) -> None:
    files = rotated_journal(tmp_path)
    data = bytearray(files[-1].read_bytes())
    data[9] ^= 0xFF  # generation
    files[-1].write_bytes(bytes(data))
    with pytest.raises(JournalCorrupted, match="file header: CRC mismatch") as info:
        reopen(tmp_path)
    assert (info.value.file, info.value.offset) == (files[-1], 0)


def test_files_swapped_are_corruption(tmp_path: Path) -> None:
    files = rotated_journal(tmp_path)
    first, second = files[0].read_bytes(), files[1].read_bytes()
    files[0].write_bytes(second)
    files[1].write_bytes(first)
    with pytest.raises(JournalCorrupted, match="the name says otherwise"):
        reopen(tmp_path)
