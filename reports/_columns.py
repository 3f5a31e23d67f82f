"""A matrix's columns and the paths of the pages about them (no pyspark, no jinja2: the site's modules share it).

A column is a broker target and version (broker cases) or a client under test (client cases).  Every path is
relative to the site root and made of safe characters, so that the pages open from disk.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._verdicts import SUBJECTS

__all__ = ["MatrixColumn", "case_group", "case_page_path", "cell_key", "natural_key", "safe_name"]

_CLIENT = SUBJECTS[1]


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that puts ``x.9`` before ``x.10``."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text))


def safe_name(text: str) -> str:
    """``text`` as a file name: anything but letters, digits and ``._@-`` becomes ``_``."""
    return re.sub(r"[^A-Za-z0-9._@-]", "_", text)


def cell_key(target: str, version: str | None) -> str:
    """A matrix column's name in paths and labels: ``target@version`` (``@?`` without a version)."""
    return f"{target}@{version if version is not None else '?'}"


@dataclass(frozen=True)
class MatrixColumn:
    """A column of a matrix: a target and its version (broker cases), or a client under test (client cases)."""

    subject: str
    #: The target (broker cases) or the client (``kit``, ``artemis@2.44.0``; ``?`` when the evidence lacks it).
    name: str
    #: The target's version (broker cases only).
    version: str | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> MatrixColumn:
        """The column of a matrix row (or of a ``case_verdicts`` row)."""
        if row["subject"] == _CLIENT:
            return cls(_CLIENT, row["client"] or "?")
        return cls(row["subject"], row["target"], row["target_version"])

    @property
    def key(self) -> str:
        """The column's name in paths: ``target@version`` or the client."""
        return self.name if self.subject == _CLIENT else cell_key(self.name, self.version)

    @property
    def label(self) -> str:
        """The column's heading: ``target version`` or the client."""
        return self.name if self.subject == _CLIENT else f"{self.name} {self.version or ''}".rstrip()

    def sort_key(self) -> tuple[tuple[tuple[int, int | str], ...], ...]:
        return natural_key(self.name), natural_key(self.version or "")


def case_page_path(column: MatrixColumn, case_id: str) -> str:
    """Where a cell's page is, relative to the site root: below its subject, so that the broker column of the
    target ``artemis`` 2.44.0 and the client column ``artemis@2.44.0`` never share a page."""
    return f"cases/{safe_name(column.subject)}/{safe_name(column.key)}/{safe_name(case_id)}.html"


def case_group(case_id: str) -> str:
    """A case's group: its ID's first component (``reattach.cut.9`` -> ``reattach``)."""
    return case_id.split(".", 1)[0]
