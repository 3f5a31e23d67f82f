"""Errors and warnings of the configuration reader.

A :class:`ConfigError` stops the broker from starting: the file is not well-formed XML, a value
cannot be read (``<port>abc</port>``), or a reference points at nothing.  It names the file, the
line, the element and the path, in one message shape::

    bad config broker.xml:42 <acceptor> (core/acceptors/acceptor[a]): port must be an integer 0..65535; found 'abc'

A :class:`ConfigWarning` is returned with the configuration for every element, attribute or
option the reference broker reads but does not implement, so nothing is silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConfigError", "ConfigWarning"]


class ConfigError(Exception):
    """A configuration the reference broker cannot start with.

    Attributes:
        file: the file being read (as given, or ``"<string>"``).
        line: 1-based line of the offending element, ``None`` when unknown.
        element: local name of the offending element (or option / property key).
        path: where the element sits, outermost first, ``"core/acceptors/acceptor[artemis]"``.
        reason: what is wrong.
        found: the offending text, ``None`` when it does not apply.
    """

    def __init__(
        self,
        reason: str,
        *,
        file: str = "<string>",
        line: int | None = None,
        element: str = "",
        path: str = "",
        found: str | None = None,
    ) -> None:
        self.reason = reason
        self.file = file
        self.line = line
        self.element = element
        self.path = path
        self.found = found
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        subject = f"bad config {where}"
        if self.element:
            subject += f" <{self.element}>"
        if self.path:
            subject += f" ({self.path})"
        detail = self.reason
        if self.found is not None:
            detail += f"; found {self.found!r}"
        return f"{subject}: {detail}"


@dataclass(frozen=True)
class ConfigWarning:
    """Something in the configuration the reference broker does not implement (it is ignored).

    Attributes:
        path: where it sits, outermost first (``"core/federations"``).
        element: its name: an element's local name, ``"@attribute"`` for an attribute, or a key.
        message: what is not supported and what the broker does instead.
        file: the file it was read from.
        line: 1-based line, ``None`` when unknown.
    """

    path: str
    element: str
    message: str
    file: str = ""
    line: int | None = None

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.path}: {self.message}" if where else f"{self.path}: {self.message}"
