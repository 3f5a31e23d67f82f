"""Loading the clause table from ``conformance/clauses/*.toml`` (one file per case group).

Standard library only: ``reports`` imports this package (the one part of ``conformance`` besides the evidence
schema it may import; ``tests/test_boundaries.py`` holds it to that).  The kit's own table is package data,
read through :mod:`importlib.resources`, so an installed wheel reads it the same way as a checkout."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any, Literal

__all__ = ["Clause", "ClauseError", "Level", "LEVELS", "CLAUSE_DIR", "load_clauses", "is_url"]

Level = Literal["MUST", "SHOULD", "MAY"]
LEVELS: tuple[Level, ...] = ("MUST", "SHOULD", "MAY")

#: The kit's own clause table: every ``*.toml`` of this package's data.
CLAUSE_DIR: Traversable = files(__package__ or "cck.conformance.clauses")

_REQUIRED = ("id", "level", "source", "text")
_OPTIONAL = ("implementation", "implementation_source")


class ClauseError(ValueError):
    """A clause file that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Clause:
    id: str
    level: Level
    #: Where the text comes from: a spec file and paragraph, an Artemis manual section, or a URL.
    source: str
    #: The clause, quoted.
    text: str
    #: What Artemis actually does where that disagrees with ``text`` (None: no disagreement is recorded).
    implementation: str | None = None
    implementation_source: str | None = None
    #: The file the clause came from, for messages.
    file: Traversable | None = None

    @property
    def disagreement(self) -> bool:
        """Whether the implementation and the documents disagree on this clause (cases then say which they check)."""
        return self.implementation is not None

    @property
    def group(self) -> str:
        """The case group: the name of the file the clause came from, without ``.toml`` ("" when unknown)."""
        return self.file.name.removesuffix(".toml") if self.file is not None else ""

    @property
    def lenient(self) -> bool:
        """A failed check of a SHOULD or MAY clause is PASS_LENIENT, not FAIL (unless the run is --strict)."""
        return self.level != "MUST"


def is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def _clause(path: Traversable, index: int, entry: Any) -> Clause:
    where = f"{path.name}: clause #{index + 1}"
    if not isinstance(entry, dict):
        raise ClauseError(f"{where}: a [[clause]] table is expected, got {type(entry).__name__}")
    if isinstance(entry.get("id"), str):
        where = f"{where} ({entry['id']})"
    unknown = sorted(set(entry) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise ClauseError(f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(_REQUIRED + _OPTIONAL)})")
    for name in _REQUIRED:
        value = entry.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ClauseError(f"{where}: field {name!r} is required and must be non-empty text")
    for name in _OPTIONAL:
        if name in entry and (not isinstance(entry[name], str) or not entry[name].strip()):
            raise ClauseError(f"{where}: field {name!r}, when present, must be non-empty text")
    if entry["level"] not in LEVELS:
        raise ClauseError(f"{where}: level {entry['level']!r} is not one of {', '.join(LEVELS)}")
    if "implementation_source" in entry and "implementation" not in entry:
        raise ClauseError(f"{where}: implementation_source without implementation")
    return Clause(id=entry["id"], level=entry["level"], source=entry["source"], text=entry["text"].strip(),
                  implementation=entry.get("implementation"),
                  implementation_source=entry.get("implementation_source"), file=path)


def load_clauses(directory: Traversable | None = None) -> Mapping[str, Clause]:
    """Every clause of every ``*.toml`` in ``directory`` (a :class:`~pathlib.Path`; default: the kit's table), by ID.

    Raises :class:`ClauseError` for unreadable TOML, a missing or empty field, a bad level, an unknown
    field, or an ID defined twice (naming both files)."""
    directory = CLAUSE_DIR if directory is None else directory
    if not directory.is_dir():
        raise ClauseError(f"clause table {directory}: not a directory")
    table: dict[str, Clause] = {}
    for path in sorted((p for p in directory.iterdir() if p.name.endswith(".toml")), key=lambda p: p.name):
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ClauseError(f"{path.name}: not readable TOML: {exc}") from None
        unknown = sorted(set(data) - {"clause"})
        if unknown:
            raise ClauseError(f"{path.name}: unknown top-level key(s) {', '.join(unknown)} (only [[clause]] tables)")
        entries = data.get("clause", [])
        if not isinstance(entries, list):
            raise ClauseError(f"{path.name}: 'clause' must be an array of tables ([[clause]])")
        for index, entry in enumerate(entries):
            clause = _clause(path, index, entry)
            if clause.id in table:
                first = table[clause.id].file
                raise ClauseError(f"{path.name}: clause {clause.id!r} is already defined in "
                                  f"{first.name if first else '?'}")
            table[clause.id] = clause
    return table
