"""What one case records while it runs; the plugin writes it out (JSON Lines) when the case ends."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["CaseEvidence", "ShouldMiss"]


class _ToJson(Protocol):
    def to_json(self) -> dict[str, Any]: ...


class _ToDict(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


def _rows(records: Iterable[_ToJson], label: str) -> list[dict[str, Any]]:
    rows = [record.to_json() for record in records]
    return [{"label": label, **row} for row in rows] if label else rows


@dataclass(frozen=True)
class ShouldMiss:
    """A SHOULD the broker missed (the case still passes, as PASS_LENIENT, unless the run is ``--strict``)."""

    message: str


@dataclass
class CaseEvidence:
    """Per-case evidence.  Cases call these as they go; nothing here judges anything.

    * :meth:`wire` — decoded frames from a fault proxy (``proxy.wire_log``), with monotonic timestamps.
    * :meth:`attempts` — connection attempts the proxy saw (``proxy.attempts``).
    * :meth:`ends` — how those connections ended (``proxy.ends``).
    * :meth:`history` — a Jepsen-style history and, if checked, its :class:`~conformance.oracles.HistoryResult`.
    * :meth:`timing` — a judged schedule (:class:`~conformance.oracles.TimingResult`) under a name.
    * :meth:`note` — anything else worth keeping (a measured figure, a broker version string).
    * :meth:`should` — a SHOULD check: a miss is recorded, not raised.
    """

    case_id: str
    wire_records: list[dict[str, Any]] = field(default_factory=list)
    attempt_records: list[dict[str, Any]] = field(default_factory=list)
    end_records: list[dict[str, Any]] = field(default_factory=list)
    history_ops: list[dict[str, Any]] = field(default_factory=list)
    history_results: list[dict[str, Any]] = field(default_factory=list)
    timings: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    should_misses: list[ShouldMiss] = field(default_factory=list)

    def wire(self, records: Iterable[_ToJson], *, label: str = "") -> None:
        self.wire_records.extend(_rows(records, label))

    def attempts(self, records: Iterable[_ToJson], *, label: str = "") -> None:
        self.attempt_records.extend(_rows(records, label))

    def ends(self, records: Iterable[_ToJson], *, label: str = "") -> None:
        self.end_records.extend(_rows(records, label))

    def history(self, ops: Iterable[_ToDict], result: _ToDict | None = None, *, label: str = "") -> None:
        for op in ops:
            row = op.to_dict()
            if label:
                row = {"label": label, **row}
            self.history_ops.append(row)
        if result is not None:
            self.history_results.append({"label": label, **result.to_dict()})

    def timing(self, name: str, result: _ToDict) -> None:
        self.timings.append({"name": name, **result.to_dict()})

    def note(self, key: str, value: Any) -> None:
        self.notes[key] = value

    def should(self, condition: bool, message: str) -> bool:
        """Check a SHOULD: returns ``condition``; a miss makes the verdict PASS_LENIENT (FAIL with --strict)."""
        if not condition:
            self.should_misses.append(ShouldMiss(message))
        return condition
