"""The static site: jinja2 templates over plain Python data (no Spark here, so rendering tests need none).

Every link is relative and nothing is fetched: the pages open from disk (``file://``) as they open from
any static web server.  Layout of ``OUT/``::

    index.html                     heat maps of groups x columns, the diff pairs, the trends across runs, then
                                   the broker matrix and the client matrix, the runs, the quarantine count
    groups/<subject>/<column>/<group>.html   a heat map cell's cases      (reports._glance)
    diff/<subject>/<left>_vs_<right>.html    two columns case by case     (reports._glance)
    timing.html audit.html coverage.html
    explore.html                   the explorations below the evidence, their findings, their runs' histories
                                   audited                                          (reports._explore_page)
    explorations/<exploration>/sequence.svg      a finding's minimal run's diagram, copied from the evidence
    allure.html                    allure's statuses per run and their cross-check against the verdicts
    allure/index.html              the allure HTML report (one self-contained file), when built
    cases/broker/<target>@<version>/<case>.html  one page per broker matrix cell (latest run's evidence)
    cases/client/<client>/<case>.html            one page per client matrix cell
    cases/.../<case>.wire.jsonl                  that case's whole wire log
                                   (a case page tells its story first, reports._story: the clause, the verdict
                                   and why, the wire log around the fault as a sequence diagram, the history
                                   findings, the timing plots; then the raw rows)
    quarantine.jsonl               refused evidence rows (file, line, reason)
    data/<kind>/run_id=.../target=.../*.parquet
"""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from ._columns import MatrixColumn, case_group, case_page_path, cell_key, natural_key
from ._explore_page import DIAGRAM_DIR, EXPLORE_PAGE, duration, exploration_views
from ._glance import front_page, heat_class, heat_legend
from ._story import ClauseText, case_story
from ._svg import Attempt, schedule_plot
from ._verdicts import SUBJECTS, VERDICTS

#: allure's statuses, in the order the allure page shows them (kept here: this module imports no pyspark).
ALLURE_STATUSES = ("passed", "failed", "broken", "skipped", "unknown")

__all__ = ["ALLURE_DIR", "ALLURE_STATUSES", "AllureSection", "CasePage", "MatrixColumn", "MatrixSection", "TimingPlot",
           "SiteData", "cell_key", "case_page_path", "matrix_sections", "natural_key", "render_site", "verdict_totals"]

TEMPLATES = Path(__file__).resolve().parent / "templates"
#: Where the allure HTML report goes below the site root.
ALLURE_DIR = "allure"

#: Verdict -> CSS class (colours are in the base template).
VERDICT_CLASS = {"PASS": "pass", "PASS_LENIENT": "lenient", "UNSUPPORTED": "unsupported",
                 "INDETERMINATE": "indeterminate", "KIT_ERROR": "kit-error", "FAIL": "fail"}
#: Verdict -> the letter a verdict sequence shows it as (the trends' flaky cases; the full name is its tooltip).
VERDICT_LETTER = {"PASS": "P", "PASS_LENIENT": "L", "UNSUPPORTED": "U", "INDETERMINATE": "I", "KIT_ERROR": "K",
                  "FAIL": "F"}
_BROKER, _CLIENT = SUBJECTS
#: Subject -> the heading of its matrix and what its columns and rows are.
MATRIX_TITLES = {_BROKER: ("Broker matrix", "targets \N{MULTIPLICATION SIGN} broker cases"),
                 _CLIENT: ("Client matrix", "clients \N{MULTIPLICATION SIGN} client cases")}


@dataclass(frozen=True)
class CasePage:
    """One matrix cell: its summary row, its verdict in each run, and the latest run's evidence rows."""

    column: MatrixColumn
    case_id: str
    summary: Mapping[str, Any]
    runs: Sequence[Mapping[str, Any]]
    record: Mapping[str, Any] | None
    #: kind -> rows of the latest run for this case (wire rows capped at ``wire_shown``).
    evidence: Mapping[str, Sequence[Mapping[str, Any]]]
    wire_log: Sequence[Mapping[str, Any]] = ()
    wire_shown: int = 200
    #: The clause the case cites, from the clause table (None: not in the table).
    clause: ClauseText | None = None
    #: The latest run's history rows of the case in its diagram's window (drawn, not listed).
    history: Sequence[Mapping[str, Any]] = ()

    @property
    def path(self) -> str:
        return case_page_path(self.column, self.case_id)


@dataclass(frozen=True)
class TimingPlot:
    target: str
    case_id: str
    name: str
    attempts: Sequence[Attempt]


@dataclass(frozen=True)
class AllureSection:
    """The allure page: status counts per run, the verdict cross-check, and the HTML report's link or why not."""

    counts: Sequence[Mapping[str, Any]] = ()
    checked: int = 0
    problems: Sequence[Mapping[str, Any]] = ()
    problems_total: int = 0
    #: The report's index relative to the site root, when it was built.
    report: str | None = None
    #: Why there is no report (shown instead of the link).
    note: str | None = None


@dataclass(frozen=True)
class SiteData:
    """Everything the pages show, collected from the jobs' outputs."""

    evidence: str
    runs: Sequence[Mapping[str, Any]]
    matrix: Sequence[Mapping[str, Any]]
    timing_summary: Sequence[Mapping[str, Any]] = ()
    timing_plots: Sequence[TimingPlot] = ()
    timing_outliers: Sequence[Mapping[str, Any]] = ()
    audit: Sequence[Mapping[str, Any]] = ()
    findings: Sequence[Mapping[str, Any]] = ()
    findings_total: int = 0
    coverage: Sequence[Mapping[str, Any]] = ()
    quarantine_count: int = 0
    quarantine_sample: Sequence[Mapping[str, Any]] = ()
    case_pages: Sequence[CasePage] = field(default_factory=tuple)
    allure: AllureSection = field(default_factory=AllureSection)
    #: The front page's jobs (``group_summary``, ``column_diff``, ``case_sequences``, ``column_trends`` rows).
    groups: Sequence[Mapping[str, Any]] = ()
    diff: Sequence[Mapping[str, Any]] = ()
    sequences: Sequence[Mapping[str, Any]] = ()
    trends: Sequence[Mapping[str, Any]] = ()
    #: The explorations (``exploration_summary`` rows, each with its ``audit`` row and ``diagram_source``:
    #: reports._explore_page).
    explorations: Sequence[Mapping[str, Any]] = ()


def _clip(value: Any, limit: int = 400) -> str:
    """A cell's text, cut at ``limit`` characters (a decoded packet's repr can be 10 kB; the JSONL has it all)."""
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["verdict_class"] = lambda verdict: VERDICT_CLASS.get(verdict or "", "other")
    env.filters["pct"] = lambda value: "" if value is None else f"{100 * value:.0f}%"
    env.filters["ms"] = lambda value: "" if value is None else f"{value:.1f}"
    env.filters["clip"] = _clip
    env.filters["tojson_compact"] = lambda value: json.dumps(value, default=str, ensure_ascii=False)
    # a share shown rounded down: 199 of 200 is 99%, not the 100% of a cell where every case conforms
    env.filters["share"] = lambda value: "" if value is None else f"{math.floor(100 * value)}%"
    env.filters["heat_class"] = heat_class
    env.filters["verdict_letter"] = lambda verdict: VERDICT_LETTER.get(verdict or "", "?")
    env.filters["duration"] = duration
    env.globals["case_page_path"] = case_page_path
    env.globals["heat_legend"] = heat_legend()
    env.globals["verdicts"] = VERDICTS
    return env


@dataclass(frozen=True)
class MatrixSection:
    """One subject's matrix: its columns, a row per case (``cells``: column -> matrix row) and its summary."""

    subject: str
    columns: Sequence[MatrixColumn]
    rows: Sequence[Mapping[str, Any]]
    #: (verdict, cells whose latest verdict it is): every known verdict, worst first, then any other.
    totals: Sequence[tuple[str, int]]

    @property
    def title(self) -> str:
        return MATRIX_TITLES.get(self.subject, (f"{self.subject} matrix", ""))[0]

    @property
    def caption(self) -> str:
        return MATRIX_TITLES.get(self.subject, ("", f"{self.subject} cases"))[1]

    @property
    def groups(self) -> list[tuple[str, list[Mapping[str, Any]]]]:
        """The rows by group (each its ``<tbody>``, the heat map's row headings link to it), in row order."""
        groups: dict[str, list[Mapping[str, Any]]] = {}
        for row in self.rows:
            groups.setdefault(case_group(row["case_id"]), []).append(row)
        return list(groups.items())


def verdict_totals(cells: Sequence[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """How many cells have each latest verdict: every known verdict (zeros too) worst first, then others."""
    counts = Counter(cell["latest_verdict"] for cell in cells)
    others = sorted((verdict, count) for verdict, count in counts.items() if verdict not in VERDICTS)
    return [(verdict, counts[verdict]) for verdict in VERDICTS] + others


def _matrix_rows(cells: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for cell in cells:
        row = rows.setdefault(cell["case_id"], {"case_id": cell["case_id"], "group": cell["group"],
                                                "clause_id": cell["clause_id"], "cells": {}})
        row["cells"][MatrixColumn.of(cell)] = cell
    return [rows[key] for key in sorted(rows, key=natural_key)]


def _section(subject: str, cells: Sequence[Mapping[str, Any]]) -> MatrixSection:
    columns = sorted({MatrixColumn.of(cell) for cell in cells}, key=MatrixColumn.sort_key)
    return MatrixSection(subject, columns, _matrix_rows(cells), verdict_totals(cells))


def matrix_sections(matrix: Sequence[Mapping[str, Any]]) -> list[MatrixSection]:
    """The broker matrix and the client matrix (each even when empty), then one per any other subject."""
    subjects = [*SUBJECTS, *sorted({cell["subject"] for cell in matrix} - set(SUBJECTS))]
    return [_section(subject, [cell for cell in matrix if cell["subject"] == subject]) for subject in subjects]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def render_site(data: SiteData, out: Path) -> Path:
    """Write the pages of ``data`` under ``out``; the path of ``index.html``."""
    env = _environment()
    common = {"evidence": data.evidence, "quarantine_count": data.quarantine_count, "allure_report": data.allure.report}
    glance = front_page(groups=data.groups, diff=data.diff, sequences=data.sequences, runs=data.trends,
                        matrix=data.matrix)
    _write(out / "index.html", env.get_template("index.html.j2").render(
        root="", glance=glance, sections=matrix_sections(data.matrix), runs=data.runs,
        quarantine_sample=data.quarantine_sample, **common))
    group_template = env.get_template("group.html.j2")
    for group_page in glance.group_pages:
        _write(out / group_page.path, group_template.render(root="../../../", page=group_page, **common))
    diff_template = env.get_template("diff.html.j2")
    for diff_page in glance.diff_pages:
        _write(out / diff_page.path, diff_template.render(root="../../", page=diff_page, **common))
    plots = [(plot, Markup(schedule_plot(plot.attempts, title=f"{plot.case_id} {plot.name}")))  # noqa: S704
             for plot in sorted(data.timing_plots, key=lambda p: (p.target, natural_key(p.case_id), p.name))]
    _write(out / "timing.html", env.get_template("timing.html.j2").render(
        root="", summary=data.timing_summary, plots=plots, outliers=data.timing_outliers, **common))
    _write(out / "audit.html", env.get_template("audit.html.j2").render(
        root="", audit=data.audit, findings=data.findings, findings_total=data.findings_total, **common))
    _write(out / "allure.html", env.get_template("allure.html.j2").render(
        root="", allure=data.allure, statuses=ALLURE_STATUSES, **common))
    _write(out / "coverage.html", env.get_template("coverage.html.j2").render(
        root="", coverage=data.coverage, **common))
    explorations = exploration_views(data.explorations)
    shutil.rmtree(out / DIAGRAM_DIR, ignore_errors=True)  # an earlier report's
    for view in explorations:
        if view.diagram is not None:
            target = out / DIAGRAM_DIR / view.id / "sequence.svg"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(view.row["diagram_source"], target)
    _write(out / EXPLORE_PAGE, env.get_template("explore.html.j2").render(
        root="", explorations=explorations, **common))
    case_template = env.get_template("case.html.j2")
    for page in data.case_pages:
        target = out / page.path
        wire_file = None
        if page.wire_log:
            wire_path = target.with_suffix(".wire.jsonl")
            wire_file = wire_path.name
            _write(wire_path, "".join(json.dumps(row, default=str, ensure_ascii=False) + "\n"
                                      for row in page.wire_log))
        story = case_story(page.case_id, summary=page.summary, record=page.record, clause=page.clause,
                           wire=page.wire_log, attempts=page.evidence.get("attempt", ()),
                           ends=page.evidence.get("end", ()), history=page.history,
                           history_results=page.evidence.get("history_result", ()),
                           timing=page.evidence.get("timing", ()), wire_file=wire_file,
                           title=f"{page.column.label}, run {page.summary.get('latest_run_id')}")
        figures = {"diagram": Markup(story.diagram_svg or ""),  # noqa: S704 (SVG the renderer escaped)
                   "timing": [Markup(figure.svg) for figure in story.timing]}  # noqa: S704
        _write(target, case_template.render(root="../../../", page=page, wire_file=wire_file, story=story,
                                            figures=figures, **common))
    return out / "index.html"
