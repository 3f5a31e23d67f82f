"""Artemis field encodings as construct building blocks.

Each class here is one encoding from the notes' §3, written as a small
``Construct`` whose ``_parse`` checks lengths before it reads, so that a short or
lying input becomes a :class:`FieldError` carrying the byte offset, what was
expected and what was found.  The packet formats are assembled from these with
construct's ``Struct``; :mod:`codec._format` turns the errors into
:class:`~codec.CodecError`.

Encodings (all integers big-endian):

==============  ===================================================================
``I8..I64``     signed integers; ``U16`` unsigned short
``Bool``        one byte written ``0xFF``/``0x00`` by the Artemis buffer; any
                non-zero byte reads as true
``RawBool``     one byte written ``0x01``/``0x00`` (message header, TypedProperties)
``SimpleStr``   ``i32`` byte length, then UTF-16 little-endian code units
``Str``         ``writeString``: ``i32`` UTF-16 unit count *n*, then UTF-16BE units
                when n < 9, ``u16`` byte count + modified UTF-8 when n < 4095, else
                a whole SimpleString
``Bytes``       ``i32`` length + raw bytes
``N1(x)``       ``ActiveMQBuffer`` nullable: ``0x00`` null, ``0x01`` then x
``NB(x)``       ``BufferHelper`` nullable: ``0x00`` null, ``0xFF`` then x
==============  ===================================================================
"""

from __future__ import annotations

import struct
from io import BytesIO
from typing import Any

from construct import Construct, ConstructError, FormatField, SizeofError, Subconstruct

__all__ = [
    "I8",
    "I16",
    "I32",
    "I64",
    "F32",
    "F64",
    "Char",
    "Counted",
    "Uuid",
    "U16",
    "Bool",
    "Bytes",
    "FieldError",
    "N1",
    "NB",
    "NullableByte",
    "RawBool",
    "SimpleStr",
    "Str",
    "Rest",
    "decode_modified_utf8",
    "encode_modified_utf8",
    "java_length",
    "remaining",
]

#: Strings shorter than this many UTF-16 units are written as raw UTF-16BE shorts.
STRING_SHORTS_LIMIT = 9
#: Strings shorter than this many units use the ``u16`` + modified UTF-8 form.
STRING_UTF8_LIMIT = 0xFFF


class FieldError(ConstructError):  # type: ignore[misc]
    """A field could not be decoded or encoded; carries the offset and expectation."""

    def __init__(
        self,
        reason: str,
        *,
        path: str,
        offset: int | None,
        expected: str | None = None,
        found: str | None = None,
    ) -> None:
        super().__init__(reason, path)
        self.reason = reason
        self.offset = offset
        self.expected = expected
        self.found = found


def remaining(stream: BytesIO) -> int:
    """Bytes left to read in ``stream``."""
    return len(stream.getbuffer()) - stream.tell()


def _read(stream: BytesIO, n: int, path: str, what: str) -> bytes:
    left = remaining(stream)
    if n > left:
        raise FieldError(
            f"{what} runs past the end of the input",
            path=path,
            offset=stream.tell(),
            expected=f"{n} bytes",
            found=f"{left}",
        )
    data: bytes = stream.read(n)
    return data


def java_length(text: str) -> int:
    """Length of ``text`` as Java counts it: UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-be", "surrogatepass")) // 2


def _split_surrogates(text: str) -> str:
    # Modified UTF-8 encodes each UTF-16 unit on its own, so a character outside
    # the BMP must first become its two surrogate code points.
    out = []
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            out.append(chr(0xD800 + (cp >> 10)))
            out.append(chr(0xDC00 + (cp & 0x3FF)))
        else:
            out.append(ch)
    return "".join(out)


def _join_surrogates(text: str) -> str:
    # Round-trip through UTF-16 so that a high+low surrogate pair becomes one character.
    return text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")


def encode_modified_utf8(text: str) -> bytes:
    """Artemis's per-UTF-16-unit UTF-8 (``UTF8Util``): NUL is one ``0x00`` byte,
    surrogates are three bytes each."""
    if text.isascii():
        return text.encode("ascii")
    return _split_surrogates(text).encode("utf-8", "surrogatepass")


def decode_modified_utf8(data: bytes) -> str:
    """Inverse of :func:`encode_modified_utf8`; raises ``UnicodeDecodeError`` on bad bytes."""
    if data.isascii():
        return data.decode("ascii")
    return _join_surrogates(data.decode("utf-8", "surrogatepass"))


class _Fixed(FormatField):  # type: ignore[misc]
    """A big-endian fixed-size number with a bounds-checked parse.

    Compiled parsers use construct's own emitted code for ``FormatField``; this
    ``_parse`` is what the interpreted (error-reporting) parse runs.
    """

    def __init__(self, fmt: str, label: str) -> None:
        super().__init__(">", fmt)
        self._codec = struct.Struct(">" + fmt)
        self._label = label

    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        data = _read(stream, self.length, path, self._label)
        return self._codec.unpack(data)[0]

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        try:
            stream.write(self._codec.pack(obj))
        except (struct.error, TypeError, OverflowError) as exc:
            raise FieldError(
                f"{obj!r} does not fit an {self._label}", path=path, offset=None
            ) from exc
        return obj


I8 = _Fixed("b", "i8")
I16 = _Fixed("h", "i16")
U16 = _Fixed("H", "u16")
I32 = _Fixed("l", "i32")
I64 = _Fixed("q", "i64")
F32 = _Fixed("f", "float")
F64 = _Fixed("d", "double")


class _Bool(Construct):  # type: ignore[misc]
    def __init__(self, true_byte: int) -> None:
        super().__init__()
        self._true = bytes([true_byte])

    def _parse(self, stream: BytesIO, context: Any, path: str) -> bool:
        return _read(stream, 1, path, "boolean") != b"\x00"

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> bool:
        stream.write(self._true if obj else b"\x00")
        return bool(obj)

    def _sizeof(self, context: Any, path: str) -> int:
        return 1


#: Boolean as the Artemis buffer writes it (0xFF / 0x00).
Bool = _Bool(0xFF)
#: Boolean as raw Netty writes it (0x01 / 0x00): message ``durable`` and TypedProperties.
RawBool = _Bool(0x01)


class _SimpleStr(Construct):  # type: ignore[misc]
    def _parse(self, stream: BytesIO, context: Any, path: str) -> str:
        start = stream.tell()
        size = I32._parse(stream, context, path)
        if size < 0 or size % 2:
            raise FieldError(
                "bad SimpleString length",
                path=path,
                offset=start,
                expected="a non-negative even byte count",
                found=str(size),
            )
        data = _read(stream, size, path, "SimpleString")
        return data.decode("utf-16-le", "surrogatepass")

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> str:
        if not isinstance(obj, str):
            raise FieldError(f"expected a str, got {type(obj).__name__}", path=path, offset=None)
        data = obj.encode("utf-16-le", "surrogatepass")
        stream.write(struct.pack(">i", len(data)))
        stream.write(data)
        return obj


#: SimpleString: ``i32`` byte count + UTF-16LE.
SimpleStr = _SimpleStr()


class _Str(Construct):  # type: ignore[misc]
    def _parse(self, stream: BytesIO, context: Any, path: str) -> str:
        start = stream.tell()
        n = I32._parse(stream, context, path)
        if n < 0:
            raise FieldError(
                "bad string length", path=path, offset=start, expected="n >= 0", found=str(n)
            )
        if n < STRING_SHORTS_LIMIT:
            data = _read(stream, 2 * n, path, "string")
            return _join_surrogates(data.decode("utf-16-be", "surrogatepass"))
        if n < STRING_UTF8_LIMIT:
            count_at = stream.tell()
            count = U16._parse(stream, context, path)
            data = _read(stream, count, path, "string")
            try:
                text = decode_modified_utf8(data)
            except UnicodeDecodeError as exc:
                raise FieldError(
                    "invalid modified UTF-8",
                    path=path,
                    offset=count_at + 2 + exc.start,
                    expected="UTF-8 sequence",
                    found=data[exc.start : exc.start + 3].hex(),
                ) from None
            if java_length(text) != n:
                raise FieldError(
                    "string length disagrees with its UTF-8 bytes",
                    path=path,
                    offset=start,
                    expected=f"{n} UTF-16 units",
                    found=str(java_length(text)),
                )
            return text
        inner_at = stream.tell()
        text = SimpleStr._parse(stream, context, path)
        if java_length(text) != n:
            raise FieldError(
                "string length disagrees with its SimpleString",
                path=path,
                offset=inner_at,
                expected=f"{2 * n} bytes",
                found=str(2 * java_length(text)),
            )
        return text

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> str:
        if not isinstance(obj, str):
            raise FieldError(f"expected a str, got {type(obj).__name__}", path=path, offset=None)
        units = obj.encode("utf-16-be", "surrogatepass")
        n = len(units) // 2
        stream.write(struct.pack(">i", n))
        if n < STRING_SHORTS_LIMIT:
            stream.write(units)
        elif n < STRING_UTF8_LIMIT:
            data = encode_modified_utf8(obj)
            stream.write(struct.pack(">H", len(data)))
            stream.write(data)
        else:
            stream.write(struct.pack(">i", 2 * n))
            stream.write(obj.encode("utf-16-le", "surrogatepass"))
        return obj


#: ``writeString``/``readString`` with its three length-dependent forms.
Str = _Str()


class _Bytes(Construct):  # type: ignore[misc]
    def _parse(self, stream: BytesIO, context: Any, path: str) -> bytes:
        start = stream.tell()
        n = I32._parse(stream, context, path)
        if n < 0:
            raise FieldError(
                "bad byte array length",
                path=path,
                offset=start,
                expected="length >= 0",
                found=str(n),
            )
        return _read(stream, n, path, "byte array")

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> bytes:
        data = bytes(obj)
        stream.write(struct.pack(">i", len(data)))
        stream.write(data)
        return data


#: ``i32`` length + bytes (Xid parts, TypedProperties BYTES, chunks).
Bytes = _Bytes()


class _Nullable(Subconstruct):  # type: ignore[misc]
    def __init__(self, subcon: Construct, present: int) -> None:
        super().__init__(subcon)
        self._present = bytes([present])

    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        if _read(stream, 1, path, "null flag") == b"\x00":
            return None
        return self.subcon._parsereport(stream, context, path)

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if obj is None:
            stream.write(b"\x00")
            return None
        stream.write(self._present)
        return self.subcon._build(obj, stream, context, path)

    def _sizeof(self, context: Any, path: str) -> int:
        raise SizeofError("nullable fields have no fixed size", path=path)


def N1(subcon: Construct) -> Construct:  # noqa: N802 - named after the notes' notation
    """ActiveMQBuffer-style nullable: flag 0x00 null / 0x01 present (reads any non-zero)."""
    return _Nullable(subcon, 0x01)


def NB(subcon: Construct) -> Construct:  # noqa: N802 - named after the notes' notation
    """BufferHelper-style nullable: flag 0x00 null / 0xFF present (reads any non-zero)."""
    return _Nullable(subcon, 0xFF)


class _NullableByte(Construct):  # type: ignore[misc]
    """A byte enum where -1 means null (RoutingType, DisconnectReason)."""

    def _parse(self, stream: BytesIO, context: Any, path: str) -> int | None:
        value = I8._parse(stream, context, path)
        return None if value == -1 else value

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        I8._build(-1 if obj is None else int(obj), stream, context, path)
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        return 1


NullableByte = _NullableByte()


class _Rest(Construct):  # type: ignore[misc]
    """All bytes up to the end of the input minus a fixed-size trailer."""

    def __init__(self, trailer: int = 0) -> None:
        super().__init__()
        self.trailer = trailer

    def _parse(self, stream: BytesIO, context: Any, path: str) -> bytes:
        n = remaining(stream) - self.trailer
        if n < 0:
            raise FieldError(
                "frame too short for its trailer",
                path=path,
                offset=stream.tell(),
                expected=f"at least {self.trailer} bytes",
                found=str(remaining(stream)),
            )
        data: bytes = stream.read(n)
        return data

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> bytes:
        stream.write(obj)
        return bytes(obj)


def Rest(trailer: int = 0) -> Construct:  # noqa: N802 - construct naming style
    """Every byte left, less ``trailer`` bytes kept for the fields that follow."""
    return _Rest(trailer)


class _Char(Construct):  # type: ignore[misc]
    """A Java ``char``: one UTF-16 unit as a big-endian u16; a one-character str in Python."""

    def _parse(self, stream: BytesIO, context: Any, path: str) -> str:
        return chr(U16._parse(stream, context, path))

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> str:
        if not isinstance(obj, str) or len(obj) != 1 or ord(obj) > 0xFFFF:
            raise FieldError(
                f"a char must be one UTF-16 unit, got {obj!r}", path=path, offset=None
            )
        U16._build(ord(obj), stream, context, path)
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        return 2


Char = _Char()


class _Uuid(Construct):  # type: ignore[misc]
    """16 raw bytes (the message userID)."""

    def _parse(self, stream: BytesIO, context: Any, path: str) -> bytes:
        return _read(stream, 16, path, "user ID")

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> bytes:
        data = bytes(obj)
        if len(data) != 16:
            raise FieldError(
                "a user ID is 16 bytes", path=path, offset=None, expected="16", found=str(len(data))
            )
        stream.write(data)
        return data

    def _sizeof(self, context: Any, path: str) -> int:
        return 16


Uuid = _Uuid()


class _Counted(Subconstruct):  # type: ignore[misc]
    """``i32`` count then that many items; a count the remaining bytes cannot hold
    (each item takes at least ``min_size`` bytes) is rejected before looping."""

    def __init__(self, subcon: Construct, min_size: int) -> None:
        super().__init__(subcon)
        self.min_size = min_size

    def _parse(self, stream: BytesIO, context: Any, path: str) -> list[Any]:
        at = stream.tell()
        count = I32._parse(stream, context, path)
        limit = remaining(stream) // self.min_size
        if count < 0 or count > limit:
            raise FieldError(
                "bad element count", path=path, offset=at, expected=f"0..{limit}", found=str(count)
            )
        return [self.subcon._parsereport(stream, context, f"{path} -> [{i}]") for i in range(count)]

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        items = list(obj)
        I32._build(len(items), stream, context, path)
        for i, item in enumerate(items):
            self.subcon._build(item, stream, context, f"{path} -> [{i}]")
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        raise SizeofError("counted arrays have no fixed size", path=path)


def Counted(subcon: Construct, min_size: int = 1) -> Construct:  # noqa: N802 - construct style
    """An ``i32``-counted array of ``subcon`` (each at least ``min_size`` bytes)."""
    return _Counted(subcon, min_size)

