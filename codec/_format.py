"""Glue between construct formats, frozen dataclasses and :class:`CodecError`.

Decoding runs a format's *compiled* parser first (fast); only when that fails is
the same bytes parsed again with the interpreted parser, whose bounds-checked
primitives report the exact offset and field path of the failure.  Errors are
the slow path, so they get the careful treatment.
"""

from __future__ import annotations

import dataclasses
from io import BytesIO
from typing import Any, TypeVar

from construct import Adapter, Construct, ConstructError, Subconstruct

from ._errors import CodecError, EncodeError, MalformedFrame
from ._primitives import FieldError, remaining

__all__ = [
    "DataclassAdapter",
    "Since",
    "Tail",
    "TailSince",
    "Trailing",
    "build_format",
    "field_values",
    "from_container",
    "parse_format",
]

T = TypeVar("T")


def _clean_path(path: str) -> str:
    for prefix in ("(parsing)", "(building)", "(???)"):
        if path.startswith(prefix):
            path = path[len(prefix) :]
    return path.lstrip(" ->").strip()


def from_container(cls: type[T], names: Any, container: Any) -> T:
    """An instance of dataclass ``cls`` from a parsed container; lists become tuples
    so the result stays hashable."""
    values = {}
    for name in names:
        value = container[name]
        values[name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)


def field_values(obj: Any) -> dict[str, Any]:
    """The dataclass's fields as a dict (shallow: nested dataclasses stay objects)."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


class DataclassAdapter(Adapter):  # type: ignore[misc]
    """Turns a ``Struct``'s container into a frozen dataclass and back.

    The struct's field names must be the dataclass's field names; lists become
    tuples so the dataclasses stay hashable.
    """

    def __init__(self, cls: type[Any], subcon: Construct) -> None:
        super().__init__(subcon)
        self.cls = cls
        self.names = tuple(f.name for f in dataclasses.fields(cls))

    def _decode(self, obj: Any, context: Any, path: str) -> Any:
        return from_container(self.cls, self.names, obj)

    def _encode(self, obj: Any, context: Any, path: str) -> dict[str, Any]:
        if not isinstance(obj, self.cls):
            raise FieldError(
                f"expected {self.cls.__name__}, got {type(obj).__name__}", path=path, offset=None
            )
        return {n: getattr(obj, n) for n in self.names}


class Trailing(Subconstruct):  # type: ignore[misc]
    """A field that is on the wire only sometimes, always last: read when bytes
    remain (else ``None``), written only when not ``None``."""

    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        if remaining(stream) == 0:
            return None
        return self.subcon._parsereport(stream, context, path)

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if obj is None:
            return None
        return self.subcon._build(obj, stream, context, path)


class Tail(Subconstruct):  # type: ignore[misc]
    """A field that older peers may leave off: read only while bytes remain (else
    ``None``), but always written (a nullable field writes its null flag)."""

    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        if remaining(stream) == 0:
            return None
        return self.subcon._parsereport(stream, context, path)

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        return self.subcon._build(obj, stream, context, path)


class Since(Subconstruct):  # type: ignore[misc]
    """A field present only from protocol ``version`` on (``None`` below it).

    Version 0 (nothing negotiated yet) counts as new, as Artemis's
    ``isBeforeAsyncResponseChange`` style predicates treat it, unless
    ``zero_is_new`` is false.
    """

    def __init__(self, version: int, subcon: Construct, default: Any = 0, zero_is_new: bool = True):
        super().__init__(subcon)
        self.version = version
        self.default = default
        self.zero_is_new = zero_is_new

    def _applies(self, context: Any) -> bool:
        v = int(context._params.version)
        return (v == 0 and self.zero_is_new) or v >= self.version

    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        if not self._applies(context):
            return None
        return self.subcon._parsereport(stream, context, path)

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if not self._applies(context):
            return None
        return self.subcon._build(self.default if obj is None else obj, stream, context, path)


class TailSince(Subconstruct):  # type: ignore[misc]
    """A trailing field an encoder writes only from protocol ``version`` on, and a
    decoder reads whenever bytes remain (else ``None``).

    Artemis gates such a field on the *writer's* connection version with a
    ``isVersionSupportX`` check (``v >= version``, so 0 counts as old) while its
    decoder only looks for leftover bytes; so an old peer never sees it and a new
    reader copes with its absence.  ``None`` is never written.
    """

    def __init__(self, version: int, subcon: Construct) -> None:
        super().__init__(subcon)
        self.version = version

    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        if remaining(stream) == 0:
            return None
        return self.subcon._parsereport(stream, context, path)

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if obj is None or int(context._params.version) < self.version:
            return None
        return self.subcon._build(obj, stream, context, path)


def _to_codec_error(exc: Exception, stream: BytesIO, *, base_offset: int, what: str) -> CodecError:
    if isinstance(exc, FieldError):
        return MalformedFrame(
            exc.reason,
            offset=None if exc.offset is None else exc.offset + base_offset,
            field_path=_clean_path(str(exc.path or "")),
            packet_type=what,
            expected=exc.expected,
            found=exc.found,
        )
    if isinstance(exc, ConstructError):
        return MalformedFrame(
            str(exc).split("\n")[-1],
            offset=stream.tell() + base_offset,
            field_path=_clean_path(str(getattr(exc, "path", "") or "")),
            packet_type=what,
        )
    if isinstance(exc, CodecError):
        return exc.located(base_offset=base_offset, packet_type=what)
    return MalformedFrame(
        f"{type(exc).__name__}: {exc}", offset=stream.tell() + base_offset, packet_type=what
    )


def parse_format(
    fmt: Construct,
    data: bytes,
    *,
    what: str,
    version: int,
    base_offset: int = 0,
    compiled: Construct | None = None,
    allow_trailing: bool = False,
) -> Any:
    """Parse all of ``data`` with ``fmt``; raise :class:`MalformedFrame` on any failure.

    ``compiled`` (the same format, compiled) is tried first when given.
    ``base_offset`` is added to offsets in errors (13 for a frame body).
    """
    if compiled is not None:
        stream = BytesIO(data)
        try:
            obj = compiled.parse_stream(stream, version=version)
            if allow_trailing or remaining(stream) == 0:
                return obj
        except Exception:  # noqa: BLE001, S110 - any failure falls back to the careful parser
            pass
    stream = BytesIO(data)
    try:
        obj = fmt.parse_stream(stream, version=version)
    except CodecError as exc:
        raise exc.located(base_offset=base_offset, packet_type=what) from None
    except Exception as exc:  # noqa: BLE001 - every failure becomes a CodecError
        raise _to_codec_error(exc, stream, base_offset=base_offset, what=what) from None
    left = remaining(stream)
    if left and not allow_trailing:
        raise MalformedFrame(
            "unexpected bytes after the last field",
            offset=stream.tell() + base_offset,
            packet_type=what,
            expected="end of body",
            found=f"{left} more bytes",
        )
    return obj


def build_format(fmt: Construct, obj: Any, *, what: str, version: int) -> bytes:
    """Build ``obj`` with ``fmt``; raise :class:`EncodeError` when a value does not fit."""
    stream = BytesIO()
    try:
        fmt.build_stream(obj, stream, version=version)
    except FieldError as exc:
        raise EncodeError(
            exc.reason,
            field_path=_clean_path(str(exc.path or "")),
            packet_type=what,
            expected=exc.expected,
            found=exc.found,
        ) from None
    except CodecError:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure becomes a CodecError
        raise EncodeError(
            f"{type(exc).__name__}: {exc}".split("\n")[-1],
            field_path=_clean_path(str(getattr(exc, "path", "") or "")),
            packet_type=what,
        ) from None
    return stream.getvalue()
