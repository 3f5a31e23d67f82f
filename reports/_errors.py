"""The report pipeline's errors: one small hierarchy, one message shape ("<where>: <what is wrong>")."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ReportError", "EvidenceError", "SchemaVersionError"]


class ReportError(Exception):
    """Anything that stops a report from being built; the message says what and where."""


class EvidenceError(ReportError):
    """The evidence directory cannot be read as a set of runs (missing, empty, not a directory)."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class SchemaVersionError(ReportError):
    """A schema version this pipeline cannot read: of a run (its ``run.json``) or of the schema module itself."""

    def __init__(self, path: Path, found: object, readable: int) -> None:
        super().__init__(f"{path}: evidence schema version {found!r}, this pipeline reads version {readable} "
                         "(build the report with the kit version that wrote this run)")
        self.path = path
        self.found = found
        self.readable = readable
