"""The report at a glance: the jobs' rows shaped for the front page, the drill-down pages and the diff pages.

No pyspark and no jinja2 here: :func:`front_page` takes the rows the pipeline collected (``group_summary``,
``column_diff``, ``case_sequences``, ``column_trends``, ``conformance_matrix``) and returns plain frozen data.
Paths below the site root::

    groups/<subject>/<column>/<group>.html    a heat map cell: the group's cases in that column
    diff/<subject>/<left>_vs_<right>.html     two columns of one subject side by side, case by case
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._columns import MatrixColumn, case_group, case_page_path, natural_key, safe_name
from ._verdicts import DIFF_STATUSES, SUBJECTS, VERDICTS

__all__ = ["ColumnTrend", "DiffPage", "FlakyCase", "FrontPage", "GroupPage", "HeatCell", "HeatMap", "PairTable",
           "Trends", "diff_page_path", "front_page", "group_page_path", "heat_class", "heat_legend"]

#: A heat map cell's colour class by its conforming share: the first step whose floor the share reaches.  All
#: conforming is the PASS cells' green and under half the FAIL cells' red (the colours: base.html.j2).
HEAT_STEPS = ((1.0, "heat-100"), (0.9, "heat-90"), (0.75, "heat-75"), (0.5, "heat-50"), (0.0, "heat-0"))
#: What a heat map cell counts (``group_summary``'s columns), summed for a column's total.
_COUNTS = ("cases", "conforming", "pass", "unsupported", "pass_lenient", "indeterminate", "kit_error", "fail",
           "fail_known", "other")
_DIFFERS, _ONLY_LEFT, _ONLY_RIGHT, _SAME = DIFF_STATUSES


def heat_legend() -> list[tuple[str, str]]:
    """(class, what share it stands for) per step: ``all``, ``≥ 90%`` ..., ``under 50%``."""
    legend = []
    for (floor, css), above in zip(HEAT_STEPS, (None, *HEAT_STEPS), strict=False):
        if floor == 1:
            legend.append((css, "all"))
        elif floor == 0 and above is not None:
            legend.append((css, f"under {above[0]:.0%}"))
        else:
            legend.append((css, f"\N{GREATER-THAN OR EQUAL TO} {floor:.0%}"))
    return legend


def heat_class(share: float | None) -> str:
    if share is None:
        return "heat-none"
    return next((css for floor, css in HEAT_STEPS if share >= floor), "heat-0")


def group_page_path(column: MatrixColumn, group: str) -> str:
    """A heat map cell's drill-down page, relative to the site root."""
    return f"groups/{safe_name(column.subject)}/{safe_name(column.key)}/{safe_name(group)}.html"


def diff_page_path(subject: str, left: MatrixColumn, right: MatrixColumn) -> str:
    """The diff page of two columns, relative to the site root."""
    return f"diff/{safe_name(subject)}/{safe_name(left.key)}_vs_{safe_name(right.key)}.html"


def _subjects(present: Iterable[str]) -> list[str]:
    """The broker and the client subject (always, so each gets its "none" line), then any other present."""
    return [*SUBJECTS, *sorted(set(present) - set(SUBJECTS))]


@dataclass(frozen=True)
class HeatCell:
    """One group in one column (``group`` None: the column's total over its groups)."""

    column: MatrixColumn
    group: str | None
    counts: Mapping[str, int]

    @property
    def share(self) -> float | None:
        cases = self.counts["cases"]
        return self.counts["conforming"] / cases if cases else None

    @property
    def css(self) -> str:
        # a group the column could not run at all (a stock client's cluster cases) is no finding: grey, not the
        # red of its 0% share
        if self.counts["cases"] and self.counts["unsupported"] == self.counts["cases"]:
            return "heat-none"
        return heat_class(self.share)

    @property
    def fail_unknown(self) -> int:
        """FAILs no known deviation explains: the findings."""
        return self.counts["fail"] - self.counts["fail_known"]

    @property
    def path(self) -> str | None:
        return None if self.group is None else group_page_path(self.column, self.group)

    @property
    def title(self) -> str:
        c = self.counts
        parts = [f"{verdict} {c[verdict.lower()]}" for verdict in VERDICTS if c[verdict.lower()]]
        if c["fail_known"]:
            parts.append(f"{c['fail_known']} of the FAILs known deviations")
        if c["other"]:
            parts.append(f"other {c['other']}")
        return f"{c['conforming']} of {c['cases']} cases conform: " + ", ".join(parts)


@dataclass(frozen=True)
class HeatMap:
    """One subject's groups x columns."""

    subject: str
    columns: Sequence[MatrixColumn]
    groups: Sequence[str]
    cells: Mapping[tuple[str, MatrixColumn], HeatCell]

    def cell(self, group: str, column: MatrixColumn) -> HeatCell | None:
        return self.cells.get((group, column))

    def total(self, column: MatrixColumn) -> HeatCell:
        cells = [cell for (_, of), cell in self.cells.items() if of == column]
        return HeatCell(column, None, {name: sum(cell.counts[name] for cell in cells) for name in _COUNTS})


def heat_maps(groups: Sequence[Mapping[str, Any]]) -> list[HeatMap]:
    """``group_summary`` rows -> one heat map per subject (the broker's and the client's even when empty)."""
    maps = []
    for subject in _subjects(row["subject"] for row in groups):
        cells = {(row["group"], MatrixColumn.of(row)): HeatCell(MatrixColumn.of(row), row["group"],
                                                                {name: row[name] for name in _COUNTS})
                 for row in groups if row["subject"] == subject}
        maps.append(HeatMap(subject, sorted({column for _, column in cells}, key=MatrixColumn.sort_key),
                            sorted({group for group, _ in cells}, key=natural_key), cells))
    return maps


@dataclass(frozen=True)
class GroupPage:
    """A heat map cell's drill-down: the matrix rows of its group in its column."""

    cell: HeatCell
    rows: Sequence[Mapping[str, Any]]

    @property
    def path(self) -> str:
        return group_page_path(self.cell.column, self.cell.group or "")


def group_pages(maps: Sequence[HeatMap], matrix: Sequence[Mapping[str, Any]]) -> list[GroupPage]:
    rows: dict[tuple[str, MatrixColumn], list[Mapping[str, Any]]] = {}
    for row in matrix:
        rows.setdefault((case_group(row["case_id"]), MatrixColumn.of(row)), []).append(row)
    # the worst first: a reader opens a red cell to see its FAILs
    rank = {verdict: n for n, verdict in enumerate(VERDICTS)}
    return [GroupPage(cell, sorted(rows.get(key, []), key=lambda r: (rank.get(r["latest_verdict"], len(rank)),
                                                                      natural_key(r["case_id"]))))
            for heat in maps for key, cell in heat.cells.items()]


@dataclass(frozen=True)
class DiffPage:
    """Two columns of one subject, case by case: the rows whose verdicts differ first, then the cases only one
    column ran, then the rest; each row ``status``, ``case_id`` and the sides' ``verdict``, ``known_deviation`` and
    ``reason`` as ``left_...`` and ``right_...``."""

    subject: str
    left: MatrixColumn
    right: MatrixColumn
    rows: Sequence[Mapping[str, Any]]

    @property
    def path(self) -> str:
        return diff_page_path(self.subject, self.left, self.right)

    @property
    def counts(self) -> list[tuple[str, int]]:
        """(status, rows) for every status, in :data:`DIFF_STATUSES` order."""
        counts = Counter(row["status"] for row in self.rows)
        return [(status, counts[status]) for status in DIFF_STATUSES]

    @property
    def differing(self) -> int:
        return sum(row["status"] == _DIFFERS for row in self.rows)


_SWAPPED_STATUS = {_ONLY_LEFT: _ONLY_RIGHT, _ONLY_RIGHT: _ONLY_LEFT}


def _swapped(row: Mapping[str, Any]) -> dict[str, Any]:
    """A diff row seen from the other side."""
    swapped = {}
    for name, value in row.items():
        side, _, field = name.partition("_")
        other = {"left": "right", "right": "left"}.get(side)
        swapped[f"{other}_{field}" if other else name] = value
    swapped["status"] = _SWAPPED_STATUS.get(row["status"], row["status"])
    return swapped


def diff_pages(diff: Sequence[Mapping[str, Any]]) -> list[DiffPage]:
    """``column_diff`` rows -> one page per pair, its left column the one that sorts first naturally (the job pairs
    them in text order, where ``2.9`` comes after ``2.10``)."""
    pairs: dict[tuple[str, MatrixColumn, MatrixColumn], list[Mapping[str, Any]]] = {}
    for row in diff:
        subject = row["subject"]
        left = MatrixColumn(subject, row["left_name"], row["left_version"])
        right = MatrixColumn(subject, row["right_name"], row["right_version"])
        if right.sort_key() < left.sort_key():
            left, right, row = right, left, _swapped(row)
        pairs.setdefault((subject, left, right), []).append(row)
    order = {status: rank for rank, status in enumerate(DIFF_STATUSES)}
    return [DiffPage(subject, left, right,
                     sorted(rows, key=lambda r: (order.get(r["status"], len(order)), natural_key(r["case_id"]))))
            for (subject, left, right), rows in sorted(pairs.items(), key=lambda item: (
                item[0][0], item[0][1].sort_key(), item[0][2].sort_key()))]


@dataclass(frozen=True)
class PairTable:
    """One subject's columns against each other: each pair's diff page above the diagonal."""

    subject: str
    columns: Sequence[MatrixColumn]
    pages: Mapping[tuple[MatrixColumn, MatrixColumn], DiffPage]

    def page(self, left: MatrixColumn, right: MatrixColumn) -> DiffPage | None:
        return self.pages.get((left, right))


def pair_tables(matrix: Sequence[Mapping[str, Any]], pages: Sequence[DiffPage]) -> list[PairTable]:
    """One table per subject (the broker's and the client's even when empty) over the matrix's columns."""
    tables = []
    for subject in _subjects(row["subject"] for row in matrix):
        columns = sorted({MatrixColumn.of(row) for row in matrix if row["subject"] == subject},
                         key=MatrixColumn.sort_key)
        tables.append(PairTable(subject, columns,
                                {(page.left, page.right): page for page in pages if page.subject == subject}))
    return tables


@dataclass(frozen=True)
class ColumnTrend:
    """A column recorded by two or more runs: each run's ``column_trends`` row, in the order they started."""

    column: MatrixColumn
    runs: Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class FlakyCase:
    """A case whose verdict changed between runs of one column."""

    column: MatrixColumn
    case_id: str
    #: Its verdict in each run, in run order.
    verdicts: Sequence[str]
    flake_rate: float

    @property
    def counts(self) -> list[tuple[str, int]]:
        """(verdict, runs) for each verdict it had, worst first."""
        counts = Counter(self.verdicts)
        rank = {verdict: n for n, verdict in enumerate(VERDICTS)}
        return sorted(counts.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0]))

    @property
    def path(self) -> str:
        return case_page_path(self.column, self.case_id)


@dataclass(frozen=True)
class Trends:
    """Verdicts across runs of a column; empty when no column has two runs."""

    columns: Sequence[ColumnTrend]
    flaky: Sequence[FlakyCase]
    #: Cases recorded by two or more runs of their column.
    repeated_cases: int


def trends(runs: Sequence[Mapping[str, Any]], sequences: Sequence[Mapping[str, Any]]) -> Trends:
    """``column_trends`` and ``case_sequences`` rows -> the trends section."""
    per_column: dict[MatrixColumn, list[Mapping[str, Any]]] = {}
    for row in runs:
        per_column.setdefault(MatrixColumn.of(row), []).append(row)
    columns = [ColumnTrend(column, sorted(rows, key=lambda r: (r["run_started"], r["run_id"])))
               for column, rows in sorted(per_column.items(), key=lambda item: (item[0].subject, item[0].sort_key()))
               if len(rows) > 1]
    flaky = [FlakyCase(MatrixColumn.of(row), row["case_id"], tuple(row["verdicts"]), row["flake_rate"])
             for row in sequences if row["flaky"]]
    flaky.sort(key=lambda f: (-f.flake_rate, f.column.subject, f.column.sort_key(), natural_key(f.case_id)))
    return Trends(columns, flaky, len(sequences))


@dataclass(frozen=True)
class FrontPage:
    heat_maps: Sequence[HeatMap]
    group_pages: Sequence[GroupPage]
    pairs: Sequence[PairTable]
    diff_pages: Sequence[DiffPage]
    trends: Trends


def front_page(*, groups: Sequence[Mapping[str, Any]], diff: Sequence[Mapping[str, Any]],
               sequences: Sequence[Mapping[str, Any]], runs: Sequence[Mapping[str, Any]],
               matrix: Sequence[Mapping[str, Any]]) -> FrontPage:
    """The jobs' collected rows -> the front page's sections and the pages they link."""
    maps = heat_maps(groups)
    pages = diff_pages(diff)
    return FrontPage(maps, group_pages(maps, matrix), pair_tables(matrix, pages), pages, trends(runs, sequences))
