"""The Exploration page (``explore.html``) shaped from the pipeline's rows: no Spark here, so it renders without.

Its rows are :func:`reports._explore.exploration_summary`'s, each with ``audit`` (the exploration's
:func:`reports._explore.exploration_audit` row, or None when it has no history rows) and ``diagram_source`` (the
path of its minimal run's ``sequence.svg`` in the evidence, or None), which the site copies to
``explorations/<exploration>/sequence.svg`` and links.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ._columns import natural_key

__all__ = ["DIAGRAM_DIR", "EXPLORE_PAGE", "OUTCOMES", "PHASES", "ExplorationView", "duration", "exploration_views"]

#: A run's outcomes (``examples.jsonl``'s ``kind``), in the order the page lists them (``kit-error`` is counted as
#: ``kit_error_runs``).
OUTCOMES = ("clean", "finding", "indeterminate", "kit-error")
#: The loop's phases: a generated run, a shrinking candidate, its reruns, a replay of the minimal example.
PHASES = ("explore", "shrink", "retry", "confirm")

EXPLORE_PAGE = "explore.html"
#: Where the minimal runs' diagrams are copied below the site root.
DIAGRAM_DIR = "explorations"
#: A run outcome -> the CSS class of the verdict it is nearest to.
OUTCOME_CLASS = {"clean": "pass", "finding": "fail", "indeterminate": "indeterminate", "kit-error": "kit-error"}


def duration(seconds: float | None) -> str:
    """``9.4 s``, ``1 min 4 s``, ``10 min``; empty for None."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min" + (f" {rest} s" if rest else "")


@dataclass(frozen=True)
class ExplorationView:
    """One exploration as the page shows it."""

    row: Mapping[str, Any]
    audit: Mapping[str, Any] | None
    #: The minimal run's diagram, relative to the site root (None: the evidence has none).
    diagram: str | None
    #: Its finding's anchor on the page (``finding-<n>``).
    anchor: str

    @property
    def id(self) -> str:
        return str(self.row["exploration_id"])

    @property
    def target(self) -> str:
        version = self.row.get("target_version")
        return f"{self.row['target']} {version}" if version else str(self.row["target"])

    @property
    def result(self) -> tuple[str, str]:
        """(text, CSS class): what the exploration came to."""
        if self.row["found"]:
            if self.row["confirmed"]:
                return "FOUND, confirmed", "fail"
            return "found, not confirmed on replay", "indeterminate"
        kit_errors = self.row.get("kit_error_runs") or 0
        if kit_errors:
            return f"nothing found ({kit_errors} kit error{'s' if kit_errors > 1 else ''})", "kit-error"
        return "nothing found", "pass"

    @property
    def outcomes(self) -> list[tuple[str, int, str]]:
        """(outcome, runs, CSS class) of every outcome with runs, in :data:`OUTCOMES` order, then any other."""
        counts = [(name, int(self.row.get(f"{name.replace('-', '_')}_runs") or 0), OUTCOME_CLASS[name])
                  for name in OUTCOMES]
        other = int(self.row.get("other_runs") or 0)
        return [c for c in counts if c[1]] + ([("other", other, "other")] if other else [])

    @property
    def first_finding(self) -> str:
        run = self.row.get("first_finding_run")
        if run is None:
            return ""
        return f"run {run}, after {duration(self.row.get('first_finding_at_s'))}"

    @property
    def exposure(self) -> str:
        unconfirmed, durable = self.row.get("most_unconfirmed"), self.row.get("most_durable_sends")
        recent = self.row.get("most_recent_durable_sends")
        if unconfirmed is None and durable is None:
            return ""
        # evidence older than the third count has none: it shows the two it has
        return f"{unconfirmed or 0} / {durable or 0}" + ("" if recent is None else f" / {recent}")


def exploration_views(rows: Sequence[Mapping[str, Any]]) -> list[ExplorationView]:
    """The page's explorations in ID order (an ID begins with ``explore-<time>``: in time order within a folder)."""
    views = []
    for number, row in enumerate(sorted(rows, key=lambda r: natural_key(str(r["exploration_id"]))), start=1):
        diagram = None
        if row.get("diagram_source"):
            diagram = quote(f"{DIAGRAM_DIR}/{row['exploration_id']}/sequence.svg")
        views.append(ExplorationView(row, row.get("audit"), diagram, f"finding-{number}"))
    return views
