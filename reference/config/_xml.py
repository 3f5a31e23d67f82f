"""Reading an lxml tree the way the parser needs: namespace-blind names, ``${...}`` substitution,
typed values checked as Artemis checks them, and a record of every child and attribute read so
that whatever was not read is reported (never silently ignored)."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from typing import TypeVar

from lxml import etree

from ._errors import ConfigError, ConfigWarning

__all__ = ["Context", "Node", "parse_text_bytes", "substitute"]

E = TypeVar("E", bound=enum.Enum)

_XSI = "http://www.w3.org/2001/XMLSchema-instance"
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
# ByteUtil.convertTextBytes: a number, an optional K/M/G (optionally "i"), an optional "b"
_BYTES = re.compile(r"\s*(\d+)\s*(?:([kmg])i?)?b?\s*", re.IGNORECASE)
_BYTE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)

# Artemis's Validators, by the name the parser uses for each.
_CHECKS: dict[str, tuple[Callable[[float], bool], str]] = {
    "any": (lambda v: True, ""),
    "gt0": (lambda v: v > 0, "must be > 0"),
    "ge0": (lambda v: v >= 0, "must be >= 0"),
    "-1|gt0": (lambda v: v == -1 or v > 0, "must be -1 or > 0"),
    "-1|ge0": (lambda v: v >= -1, "must be -1 or >= 0"),
    "percent": (lambda v: 0 <= v <= 100, "must be a percentage 0..100"),
    "port": (lambda v: 0 <= v <= 65535, "must be a port 0..65535"),
    "-1|port": (lambda v: v == -1 or 0 < v <= 65535, "must be -1 or a port 1..65535"),
}


def substitute(text: str, properties: Mapping[str, str], missing: Callable[[str], None]) -> str:
    """Replace ``${name}`` and ``${name:default}`` as Artemis's XMLUtil does.

    A name the mapping lacks takes its default, or the empty string when there is none (Artemis
    does the same); ``missing`` is told about the latter.  Like Artemis, every occurrence of the
    same ``${...}`` is replaced at once and the result is scanned again.
    """
    for _ in range(1000):
        start = text.find("${")
        if start < 0:
            return text
        end = text.find("}", start)
        if end < 0:
            return text
        token = text[start : end + 1]
        name = token[2:-1].strip()
        default: str | None = None
        if ":" in name:
            name, default = (part.strip() for part in name.split(":", 1))
        value = properties.get(name)
        if value is None:
            if default is None:
                missing(name)
            value = default if default is not None else ""
        text = text.replace(token, value)
    raise ValueError("property substitution does not terminate (a value refers to itself)")


def parse_text_bytes(text: str) -> int | None:
    """ByteUtil.convertTextBytes: ``"10M"``, ``"10MiB"``, ``"512kb"``, ``"-1"``; ``None`` if malformed."""
    m = _BYTES.fullmatch(text)
    if m:
        return int(m.group(1)) * _BYTE_UNITS[(m.group(2) or "").lower()]
    if _INT.fullmatch(text.strip()):
        return int(text.strip())
    return None


class Context:
    """What one parse shares: the file name, the properties, the warnings found so far."""

    def __init__(self, file: str, properties: Mapping[str, str]) -> None:
        self.file = file
        self.properties = properties
        self.warnings: list[ConfigWarning] = []

    def warn(self, path: str, element: str, message: str, line: int | None = None) -> None:
        self.warnings.append(ConfigWarning(path, element, message, self.file, line))


def local_name(el: etree._Element) -> str:
    return etree.QName(el).localname


class Node:
    """An element being read.  Children and attributes read through it are remembered;
    :meth:`finish` reports the others as unsupported."""

    def __init__(self, el: etree._Element, path: str, ctx: Context) -> None:
        self.el = el
        self.ctx = ctx
        self.name = local_name(el)
        self.path = path
        line: object = getattr(el, "sourceline", None)  # lxml-stubs type it oddly
        self.line: int | None = line if isinstance(line, int) else None
        self._used: set[int] = set()
        self._used_attrs: set[str] = set()
        self._finished = False

    # ----------------------------------------------------------------- structure

    def elements(self) -> list[tuple[int, etree._Element]]:
        """Child elements with their position (lxml proxies are not stable, positions are)."""
        return [(i, c) for i, c in enumerate(self.el) if isinstance(c.tag, str)]

    def _wrap(self, el: etree._Element) -> Node:
        name = local_name(el)
        label = el.get("name") if el.get("name") is not None else el.get("match")
        path = f"{self.path}/{name}" + (f"[{label}]" if label is not None else "")
        return Node(el, path, self.ctx)

    def children(self, name: str) -> list[Node]:
        out = []
        for i, c in self.elements():
            if local_name(c) == name:
                self._used.add(i)
                out.append(self._wrap(c))
        return out

    def child(self, name: str) -> Node | None:
        found = self.children(name)
        if len(found) > 1:
            message = f"element '{name}' appears {len(found)} times; only the first is used (as Artemis)"
            self.ctx.warn(found[1].path, name, message, found[1].line)
        return found[0] if found else None

    def all_children(self) -> list[Node]:
        els = self.elements()
        self._used.update(i for i, _ in els)
        return [self._wrap(c) for _, c in els]

    # ----------------------------------------------------------------- text and attributes

    def _subst(self, text: str) -> str:
        def missing(prop: str) -> None:
            self.ctx.warn(
                self.path, self.name,
                f"property '${{{prop}}}' is not set and has no default; replaced by '' (as Artemis)", self.line,
            )

        try:
            return substitute(text, self.ctx.properties, missing)
        except ValueError as exc:
            raise self.error(str(exc), text) from None

    def text(self) -> str:
        return self._subst("".join(str(t) for t in self.el.itertext())).strip()

    def attr(self, name: str, *, required: bool = False) -> str | None:
        self._used_attrs.add(name)
        value = self.el.get(name)
        if value is None:
            if required:
                raise self.error(f"attribute '{name}' is required")
            return None
        return self._subst(value)

    def required_attr(self, name: str) -> str:
        value = self.attr(name, required=True)
        assert value is not None
        return value

    # ----------------------------------------------------------------- errors and leftovers

    def error(self, reason: str, found: str | None = None) -> ConfigError:
        return ConfigError(reason, file=self.ctx.file, line=self.line, element=self.name, path=self.path, found=found)

    def warn(self, message: str, element: str | None = None) -> None:
        self.ctx.warn(self.path, element or self.name, message, self.line)

    def finish(self, why: Callable[[str], str] | None = None) -> None:
        """Report every child element and attribute not read as unsupported."""
        if self._finished:
            return
        self._finished = True
        for i, c in self.elements():
            if i not in self._used:
                n = self._wrap(c)
                message = why(n.name) if why else f"unsupported element '{n.name}': ignored by the reference broker"
                self.ctx.warn(n.path, n.name, message, n.line)
        for key in self.el.attrib:
            q = etree.QName(key)
            if q.namespace == _XSI or q.localname in self._used_attrs:
                continue
            self.ctx.warn(
                self.path, "@" + q.localname,
                f"unsupported attribute '{q.localname}' of '{self.name}': ignored by the reference broker", self.line,
            )

    # ----------------------------------------------------------------- typed values of child elements

    def _number(self, text: str, kind: str, check: str) -> int:
        if not _INT.fullmatch(text):
            raise self.error(f"must be an integer ({kind})", text)
        value = int(text)
        lo, hi = _INT32 if kind == "int" else _INT64
        if not lo <= value <= hi:
            raise self.error(f"out of range for a Java {kind}", text)
        ok, what = _CHECKS[check]
        if not ok(value):
            raise self.error(what, text)
        return value

    def as_int(self, check: str = "any") -> int:
        return self._number(self.text(), "int", check)

    def as_long(self, check: str = "any") -> int:
        return self._number(self.text(), "long", check)

    def as_bool(self) -> bool:
        text = self.text()
        if text.lower() not in ("true", "false"):
            # Artemis reads anything but "true" as false; a typo should not flip a setting silently
            raise self.error("must be true or false", text)
        return text.lower() == "true"

    def as_float(self, check: str = "any") -> float:
        text = self.text()
        if not _FLOAT.fullmatch(text):
            raise self.error("must be a number", text)
        value = float(text)
        ok, what = _CHECKS[check]
        if not ok(value):
            raise self.error(what, text)
        return value

    def as_bytes(self, check: str = "any", kind: str = "int") -> int:
        text = self.text()
        value = parse_text_bytes(text)
        if value is None:
            raise self.error("must be a byte size such as 10485760, 10M, 10MiB or 512K", text)
        lo, hi = _INT32 if kind == "int" else _INT64
        if not lo <= value <= hi:
            raise self.error(f"out of range for a Java {kind}", text)
        ok, what = _CHECKS[check]
        if not ok(value):
            raise self.error(what, text)
        return value

    def as_enum(self, enum_type: type[E]) -> E:
        text = self.text()
        for member in enum_type:
            if member.value == text:
                return member
        allowed = ", ".join(str(m.value) for m in enum_type)
        raise self.error(f"must be one of {allowed}", text)

    # child shortcuts: value of child `name`, or `default` when absent

    def int_of(self, name: str, default: int, check: str = "any") -> int:
        c = self.child(name)
        return default if c is None else c.as_int(check)

    def long_of(self, name: str, default: int, check: str = "any") -> int:
        c = self.child(name)
        return default if c is None else c.as_long(check)

    def bool_of(self, name: str, default: bool) -> bool:
        c = self.child(name)
        return default if c is None else c.as_bool()

    def float_of(self, name: str, default: float, check: str = "any") -> float:
        c = self.child(name)
        return default if c is None else c.as_float(check)

    def bytes_of(self, name: str, default: int, check: str = "any", kind: str = "int") -> int:
        c = self.child(name)
        return default if c is None else c.as_bytes(check, kind)

    def str_of(self, name: str, default: str, *, non_empty: bool = False) -> str:
        c = self.child(name)
        if c is None:
            return default
        value = c.text()
        if non_empty and not value:
            raise c.error("must not be empty")
        return value

    def opt_str_of(self, name: str) -> str | None:
        c = self.child(name)
        return None if c is None else c.text()
