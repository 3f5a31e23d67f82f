"""On-disk layout of the journal: file names, file header, manifest and records.

All integers are big-endian (network order, as in the core protocol).  CRCs are
``zlib.crc32`` (CRC-32/ISO-HDLC) over every byte before the CRC field.

Directory::

    journal.manifest                      the live generation (replaced atomically by compaction)
    journal.lock                          flock()ed by the one process that has the journal open
    journal-GGGGGGGG-SSSSSSSSSSSS.cckj    data files: generation G, sequence S (zero-padded: names sort)

File header (24 bytes, at offset 0 of every data file)::

    offset  size  field
    ------  ----  -----------------------------------------------
         0     4  magic  b"CCKJ"
         4     1  format version (1)
         5     3  reserved, zero
         8     4  generation (u32)  -- must match the file name
        12     8  sequence (u64)    -- must match the file name
        20     4  CRC-32 of bytes 0..19

Manifest (24 bytes, the whole of ``journal.manifest``)::

    offset  size  field
    ------  ----  -----------------------------------------------
         0     4  magic  b"CCKM"
         4     1  format version (1)
         5     3  reserved, zero
         8     4  live generation (u32)
        12     8  sequence of the generation's first data file (u64)
        20     4  CRC-32 of bytes 0..19

Record (30 bytes + payload; records follow the file header back to back)::

    offset  size  field
    ------  ----  -----------------------------------------------
         0     2  magic  b"JR"
         2     1  format version (1)
         3     1  kind: 1 ADD, 2 UPDATE, 3 DELETE, 4 ADD_TX, 5 UPDATE_TX,
                        6 DELETE_TX, 7 PREPARE, 8 COMMIT, 9 ROLLBACK
         4     4  length of the whole record, these 30 bytes and the payload included (u32)
         8     8  transaction id (u64; 0 for non-transactional kinds)
        16     8  record id (u64; 0 for PREPARE, COMMIT, ROLLBACK)
        24     2  user type (u16; 0 where it does not apply)
        26     n  payload (n = length - 30): the record's bytes; the prepare data
                  (e.g. an encoded Xid) for PREPARE; empty for the other kinds
      26+n     4  CRC-32 of bytes 0..26+n-1
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "CRC_SIZE",
    "FILE_HEADER_SIZE",
    "FORMAT_VERSION",
    "MANIFEST_NAME",
    "MAX_U64",
    "MAX_USER_TYPE",
    "RECORD_HEAD_SIZE",
    "RECORD_OVERHEAD",
    "BadBytes",
    "Kind",
    "RawRecord",
    "decode_file_header",
    "decode_manifest",
    "decode_record",
    "encode_file_header",
    "encode_manifest",
    "encode_record",
    "file_name",
    "find_next_record",
    "parse_file_name",
]

FORMAT_VERSION = 1
MAX_U64 = 2**64 - 1
MAX_USER_TYPE = 0xFFFF

MANIFEST_NAME = "journal.manifest"
_FILE_MAGIC = b"CCKJ"
_MANIFEST_MAGIC = b"CCKM"
_RECORD_MAGIC = b"JR"

_HEADER = struct.Struct(">4sB3xIQ")  # magic, version, generation, sequence
_CRC = struct.Struct(">I")
CRC_SIZE = _CRC.size
FILE_HEADER_SIZE = _HEADER.size + CRC_SIZE  # 24

_RECORD_HEAD = struct.Struct(">2sBBIQQH")  # magic, version, kind, length, tx id, record id, user type
RECORD_HEAD_SIZE = _RECORD_HEAD.size  # 26
RECORD_OVERHEAD = RECORD_HEAD_SIZE + CRC_SIZE  # 30
_RECORD_START = _RECORD_MAGIC + bytes([FORMAT_VERSION])

_FILE_NAME = re.compile(r"journal-(\d{8})-(\d{12})\.cckj")


class Kind(IntEnum):
    """What a record does (byte 3 of a record)."""

    ADD = 1
    UPDATE = 2
    DELETE = 3
    ADD_TX = 4
    UPDATE_TX = 5
    DELETE_TX = 6
    PREPARE = 7
    COMMIT = 8
    ROLLBACK = 9


_KINDS = frozenset(int(k) for k in Kind)


class BadBytes(Exception):
    """Internal: the bytes at some offset are not what the layout says (``reason`` tells why)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One decoded record, as it is on disk."""

    kind: Kind
    tx_id: int
    record_id: int
    user_type: int
    payload: bytes
    size: int


def file_name(generation: int, sequence: int) -> str:
    return f"journal-{generation:08d}-{sequence:012d}.cckj"


def parse_file_name(name: str) -> tuple[int, int] | None:
    """``(generation, sequence)`` of a data file name; ``None`` for any other name."""
    match = _FILE_NAME.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def _encode_header(magic: bytes, generation: int, sequence: int) -> bytes:
    head = _HEADER.pack(magic, FORMAT_VERSION, generation, sequence)
    return head + _CRC.pack(zlib.crc32(head))


def _decode_header(magic: bytes, what: str, data: bytes) -> tuple[int, int]:
    if len(data) < FILE_HEADER_SIZE:
        raise BadBytes(f"{what} is {len(data)} bytes long, expected {FILE_HEADER_SIZE}")
    found_magic, version, generation, sequence = _HEADER.unpack_from(data, 0)
    if found_magic != magic:
        raise BadBytes(f"{what}: expected magic {magic!r}, found {found_magic!r}")
    (stored,) = _CRC.unpack_from(data, _HEADER.size)
    computed = zlib.crc32(data[: _HEADER.size])
    if stored != computed:
        raise BadBytes(f"{what}: CRC mismatch (stored {stored:#010x}, computed {computed:#010x})")
    if version != FORMAT_VERSION:
        raise BadBytes(f"{what}: unsupported format version {version} (this code reads {FORMAT_VERSION})")
    return generation, sequence


def encode_file_header(generation: int, sequence: int) -> bytes:
    return _encode_header(_FILE_MAGIC, generation, sequence)


def decode_file_header(data: bytes) -> tuple[int, int]:
    """``(generation, sequence)`` from the first bytes of a data file; raises :class:`BadBytes`."""
    return _decode_header(_FILE_MAGIC, "file header", data)


def encode_manifest(generation: int, first_sequence: int) -> bytes:
    return _encode_header(_MANIFEST_MAGIC, generation, first_sequence)


def decode_manifest(data: bytes) -> tuple[int, int]:
    """``(generation, first sequence)`` from the manifest's bytes; raises :class:`BadBytes`."""
    if len(data) != FILE_HEADER_SIZE:
        raise BadBytes(f"manifest is {len(data)} bytes long, expected {FILE_HEADER_SIZE}")
    return _decode_header(_MANIFEST_MAGIC, "manifest", data)


def encode_record(kind: Kind, tx_id: int, record_id: int, user_type: int, payload: bytes) -> bytes:
    head = _RECORD_HEAD.pack(
        _RECORD_MAGIC, FORMAT_VERSION, kind, RECORD_OVERHEAD + len(payload), tx_id, record_id, user_type
    )
    return b"".join((head, payload, _CRC.pack(zlib.crc32(payload, zlib.crc32(head)))))


def decode_record(data: bytes, offset: int) -> RawRecord:
    """The record starting at ``offset`` of ``data``; raises :class:`BadBytes` saying what is wrong."""
    available = len(data) - offset
    if available < RECORD_HEAD_SIZE:
        raise BadBytes(f"record header cut short: {available} of {RECORD_HEAD_SIZE} bytes present")
    magic, version, kind, length, tx_id, record_id, user_type = _RECORD_HEAD.unpack_from(data, offset)
    if magic != _RECORD_MAGIC:
        raise BadBytes(f"expected record magic {_RECORD_MAGIC!r}, found {magic!r}")
    if version != FORMAT_VERSION:
        raise BadBytes(f"unsupported record version {version} (this code reads {FORMAT_VERSION})")
    if kind not in _KINDS:
        raise BadBytes(f"unknown record kind {kind}")
    if length < RECORD_OVERHEAD:
        raise BadBytes(f"record length {length} is below the minimum {RECORD_OVERHEAD}")
    if length > available:
        raise BadBytes(f"record of {length} bytes cut short: {available} bytes present")
    end = offset + length - CRC_SIZE
    (stored,) = _CRC.unpack_from(data, end)
    view = memoryview(data)
    computed = zlib.crc32(view[offset:end])
    if stored != computed:
        raise BadBytes(f"record CRC mismatch (stored {stored:#010x}, computed {computed:#010x})")
    payload = bytes(view[offset + RECORD_HEAD_SIZE : end])
    return RawRecord(Kind(kind), tx_id, record_id, user_type, payload, length)


def find_next_record(data: bytes, start: int) -> int | None:
    """Offset of the first valid record at or after ``start`` (any byte position), or ``None``.

    Used after a bad record to tell a torn tail (nothing valid follows) from
    corruption in the middle (valid records follow).
    """
    position = data.find(_RECORD_START, start)
    while position != -1:
        try:
            decode_record(data, position)
        except BadBytes:
            position = data.find(_RECORD_START, position + 1)
        else:
            return position
    return None
