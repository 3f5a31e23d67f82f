"""The report job end to end: extract -> load (Parquet) -> transforms -> load (site).

The transforms are the pure functions of ``_matrix``, ``_groups``, ``_diff``, ``_trends``, ``_timing``, ``_audit``,
``_coverage`` and ``_explore``; this module only wires them to storage and collects their (small) outputs for the
pages.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Protocol

from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

from ._allure import allure_agreement, allure_status_counts
from ._allure_html import allure_bin, build_allure_report
from ._audit import audit_findings, delivery_audit
from ._coverage import CLAUSE_DIR, CLAUSE_STRUCT, clause_coverage, read_clause_table
from ._diff import column_diff
from ._errors import ReportError
from ._explore import exploration_audit, exploration_summary
from ._groups import group_summary
from ._ingest import extract, load, read_tables, write_quarantine
from ._matrix import case_verdicts, conformance_matrix
from ._results_doc import latest_results, results_markdown, splice
from ._schema import load_schema
from ._site import ALLURE_DIR, AllureSection, CasePage, MatrixColumn, SiteData, TimingPlot, natural_key, render_site
from ._story import clause_texts, diagram_window
from ._svg import Attempt
from ._timing import timing_attempts, timing_outliers, timing_summary
from ._trends import case_sequences, column_trends

__all__ = ["ALLURE_MODES", "Progress", "QuietProgress", "ReportResult", "build_report", "collect_site_data"]

#: Evidence kinds shown on a case page, in this order (history rows are not listed: they can be many; those in
#: the span of the case's sequence diagram are read for it, at most HISTORY_DRAWN per case).
CASE_PAGE_KINDS = ("timing", "history_result", "attempt", "end", "note", "wire")
HISTORY_DRAWN = 2000
#: Columns every row has that a case page need not repeat.
_PAGE_HIDDEN = {"kind", "schema_version", "run_id", "case_id", "target"}
FINDINGS_SHOWN = 500
ALLURE_PROBLEMS_SHOWN = 500
#: ``auto``: build the allure HTML report when the pinned allure is installed, else say why not on the site;
#: ``require``: not being able to build it is an error; ``off``: do not build it.
ALLURE_MODES = ("auto", "require", "off")
PLOT_POINTS = 2000
#: The current results as markdown, beside index.html (docs/conformance-results.md is spliced from it).
RESULTS_FILE = "results.md"


class Progress(Protocol):
    """What the pipeline tells its caller: a step starts (and ends, as a context), or a fact to print."""

    def step(self, name: str) -> AbstractContextManager[None]: ...

    def note(self, text: str) -> None: ...


class QuietProgress:
    """Progress that says nothing (the default for library callers and tests)."""

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        yield

    def note(self, text: str) -> None:
        pass


@dataclass(frozen=True)
class ReportResult:
    index: Path
    #: The allure HTML report's index, when one was built.
    allure_index: Path | None
    runs: int
    rows: Mapping[str, int]
    quarantined: int
    seconds: float


def _dicts(rows: Sequence[Row]) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in rows]


def _page_row(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in _PAGE_HIDDEN}


def _windowed_history(history: DataFrame, spark: SparkSession,
                      evidence: Mapping[tuple[str, str], Mapping[str, Sequence[Mapping[str, Any]]]]
                      ) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per (run, case) with wire rows: its history rows in the time span its sequence diagram draws (the first
    ``HISTORY_DRAWN``), read by a range join against the small table of spans instead of collecting histories
    whole (a case's history can hold millions of operations; its diagram shows a few dozen frames)."""
    spans = []
    for (run_id, case_id), rows in evidence.items():
        window = diagram_window(rows.get("wire", ()), rows.get("history_result", ()))
        if window is not None:
            spans.append((run_id, case_id, window.from_ns, window.to_ns))
    if not spans:
        return {}
    frame = spark.createDataFrame(spans, "run_id string, case_id string, from_ns long, to_ns long")
    inside = history.join(F.broadcast(frame), ["run_id", "case_id"]).where(
        (F.col("from_ns").isNull() | (F.col("time_ns") >= F.col("from_ns")))
        & (F.col("to_ns").isNull() | (F.col("time_ns") <= F.col("to_ns"))))
    first = Window.partitionBy("run_id", "case_id").orderBy("time_ns", "label", "index")
    capped = inside.withColumn("_n", F.row_number().over(first)).where(F.col("_n") <= HISTORY_DRAWN)
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in capped.drop("_n", "from_ns", "to_ns").orderBy("run_id", "case_id", "time_ns", "index") \
            .toLocalIterator():
        record = row.asDict(recursive=True)
        out.setdefault((record["run_id"], record["case_id"]), []).append(record)
    return out


def _case_pages(matrix: Sequence[Mapping[str, Any]], tables: Mapping[str, DataFrame],
                runs: DataFrame, spark: SparkSession, wire_shown: int, clauses: Traversable) -> list[CasePage]:
    latest = spark.createDataFrame(
        [(m["latest_run_id"], m["case_id"]) for m in matrix], "run_id string, case_id string")
    evidence: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for kind in ("case", *CASE_PAGE_KINDS):
        table = tables[kind].join(F.broadcast(latest), ["run_id", "case_id"])
        order = {"wire": ["ts_ns", "seq"], "timing": ["name", "run", "index"], "attempt": ["ts_ns"]}.get(kind, [])
        for row in table.orderBy("run_id", "case_id", *order).toLocalIterator():
            record = row.asDict(recursive=True)
            evidence.setdefault((record["run_id"], record["case_id"]), {}).setdefault(kind, []).append(record)
    history = _windowed_history(tables["history"], spark, evidence)
    texts = clause_texts(clauses)
    verdicts: dict[tuple[MatrixColumn, str], list[dict[str, Any]]] = {}
    per_run = case_verdicts(tables["case"], runs).orderBy(F.col("run_started").desc(), F.col("run_id").desc())
    for row in per_run.toLocalIterator():
        record = row.asDict()
        verdicts.setdefault((MatrixColumn.of(record), record["case_id"]), []).append(record)
    pages = []
    for cell in matrix:
        rows = evidence.get((cell["latest_run_id"], cell["case_id"]), {})
        records = rows.get("case", [])
        wire = rows.get("wire", [])
        column = MatrixColumn.of(cell)
        pages.append(CasePage(
            column=column, case_id=cell["case_id"], summary=cell, runs=verdicts.get((column, cell["case_id"]), []),
            record=records[-1] if records else None,
            evidence={kind: [_page_row(r) for r in rows.get(kind, [])][: wire_shown if kind == "wire" else None]
                      for kind in CASE_PAGE_KINDS},
            wire_log=wire, wire_shown=wire_shown, clause=texts.get(cell["clause_id"] or ""),
            history=history.get((cell["latest_run_id"], cell["case_id"]), [])))
    return pages


def _explorations(tables: Mapping[str, DataFrame], directories: Mapping[str, Path]) -> list[dict[str, Any]]:
    """Every exploration's summary row, with its ``audit`` row (None without history rows) and ``diagram_source``:
    its minimal run's ``sequence.svg`` in the evidence, when there is one (the site copies it)."""
    audits = {row["exploration_id"]: row for row in _dicts(
        exploration_audit(tables["explore_history"], tables["explore_example"]).collect())}
    rows = []
    for row in _dicts(exploration_summary(tables["exploration"], tables["explore_example"]).collect()):
        directory = directories.get(row["exploration_id"])
        diagram = directory / "minimal" / "sequence.svg" if directory is not None and row["found"] else None
        rows.append({**row, "audit": audits.get(row["exploration_id"]),
                     "diagram_source": str(diagram) if diagram is not None and diagram.is_file() else None})
    return rows


def collect_site_data(spark: SparkSession, tables: Mapping[str, DataFrame], clauses: Traversable, *, evidence: str,
                      quarantine: Path, quarantine_count: int, progress: Progress,
                      wire_shown: int = 200, allure_report: str | None = None,
                      allure_note: str | None = None,
                      exploration_dirs: Mapping[str, Path] | None = None) -> SiteData:
    """Run every transform on the stored tables and collect what the pages show (``exploration_dirs``: each
    exploration's directory by its ID, where its minimal run's diagram is)."""
    with progress.step("conformance matrix"):
        matrix_frame = conformance_matrix(tables["case"], tables["run"]).cache()
        matrix = _dicts(matrix_frame.collect())
        matrix.sort(key=lambda m: (natural_key(m["case_id"]), m["subject"], MatrixColumn.of(m).sort_key()))
    with progress.step("groups, version diff, runs over time"):
        groups = _dicts(group_summary(matrix_frame).collect())
        diff = _dicts(column_diff(matrix_frame).collect())
        matrix_frame.unpersist()
        verdicts = case_verdicts(tables["case"], tables["run"]).cache()
        sequences = _dicts(case_sequences(verdicts).collect())
        trends = _dicts(column_trends(verdicts).collect())
        verdicts.unpersist()
    with progress.step("timing compliance"):
        attempts = timing_attempts(tables["timing"]).cache()
        summary = sorted(_dicts(timing_summary(attempts).collect()),
                         key=lambda s: (s["target"], natural_key(s["case_id"]), s["name"]))
        outliers = _dicts(timing_outliers(attempts).orderBy("target", "case_id", "run_id", "run", "index").collect())
        plots: dict[tuple[str, str, str], list[Attempt]] = {}
        for row in attempts.orderBy("target", "case_id", "name", "run_id", "run", "index").limit(
                PLOT_POINTS * max(1, len(summary))).toLocalIterator():
            points = plots.setdefault((row["target"], row["case_id"], row["name"]), [])
            if len(points) < PLOT_POINTS:
                points.append(Attempt(row["index"], row["expected_ms"], row["observed_ms"], row["allowed_ms"],
                                      bool(row["outside_tolerance"])))
        attempts.unpersist()
    with progress.step("delivery audit"):
        audit = sorted(_dicts(delivery_audit(tables["history"], tables["history_result"]).collect()),
                       key=lambda a: (a["run_id"], natural_key(a["case_id"]), a["label"]))
        findings_df = audit_findings(tables["history"], tables["history_result"])
        findings_total = findings_df.count()
        findings = _dicts(findings_df.orderBy("run_id", "case_id", "label", "index").limit(FINDINGS_SHOWN).collect())
    with progress.step("clause coverage"):
        clause_rows = spark.createDataFrame(read_clause_table(clauses), CLAUSE_STRUCT)
        coverage = sorted(_dicts(clause_coverage(clause_rows, tables["case"]).collect()),
                          key=lambda c: (c["group"] or "~", natural_key(c["clause_id"])))
    with progress.step("allure cross-check"):
        counts = sorted(_dicts(allure_status_counts(tables["allure"]).collect()),
                        key=lambda r: (r["run_id"], r["target"]))
        agreement = allure_agreement(tables["allure"], tables["case"]).cache()
        checked = agreement.count()
        problems_df = agreement.where(~F.col("agrees"))
        problems_total = problems_df.count()
        problems = _dicts(problems_df.orderBy("run_id", "case_id").limit(ALLURE_PROBLEMS_SHOWN).collect())
        agreement.unpersist()
    with progress.step("case pages"):
        pages = _case_pages(matrix, tables, tables["run"], spark, wire_shown, clauses)
    with progress.step("explorations"):
        explorations = _explorations(tables, exploration_dirs or {})
    runs = sorted(_dicts(tables["run"].collect()), key=lambda r: (r["started"], r["run_id"]))
    sample = []
    if quarantine.is_file():
        with quarantine.open(encoding="utf-8") as lines:
            for _, line in zip(range(20), lines, strict=False):
                sample.append(json.loads(line))
    return SiteData(
        evidence=evidence, runs=runs, matrix=matrix, timing_summary=summary,
        timing_plots=[TimingPlot(t, c, n, points) for (t, c, n), points in plots.items()],
        timing_outliers=outliers, audit=audit, findings=findings, findings_total=findings_total,
        coverage=coverage, quarantine_count=quarantine_count, quarantine_sample=sample, case_pages=pages,
        allure=AllureSection(counts=counts, checked=checked, problems=problems, problems_total=problems_total,
                             report=allure_report, note=allure_note),
        groups=groups, diff=diff, sequences=sequences, trends=trends, explorations=explorations)


def _allure_html(dirs: Sequence[Path], out: Path, mode: str, progress: Progress) -> tuple[Path | None, str | None]:
    """Build the allure HTML report under ``out/allure`` as ``mode`` says: (its index, or why there is none)."""
    if mode == "off":
        return None, "not built (--allure off)"
    if not dirs:
        if mode == "require":
            raise ReportError("--allure require: no run below --evidence has allure-results")
        return None, "not built: no run has allure-results"
    cli = allure_bin()
    if cli is None:
        why = "the pinned allure is not installed (cck install-allure)"
        if mode == "require":
            raise ReportError(f"--allure require: {why}")
        progress.note(f"allure HTML report not built: {why}")
        return None, f"not built: {why}"
    with progress.step(f"allure HTML report ({len(dirs)} allure-results)"):
        try:
            return build_allure_report(dirs, out / ALLURE_DIR, cli=cli, name=f"Core Conformance Kit: {out.name}"), None
        except ReportError as exc:
            if mode == "require":
                raise
            # auto: the rest of the report stands; the failure is printed and shown where the link would be
            progress.note(f"allure HTML report failed: {exc}")
            return None, f"failed: {exc}"


def build_report(spark: SparkSession, evidence: Path, out: Path, *, clauses: Traversable = CLAUSE_DIR,
                 progress: Progress | None = None,
                 allure: str = "auto", results_doc: Path | None = None) -> ReportResult:
    """Evidence under ``evidence`` -> Parquet under ``out/data``, the site under ``out`` and, as ``allure``
    (one of :data:`ALLURE_MODES`) says, the allure HTML report under ``out/allure``; the current results as
    markdown in ``out/results.md``, and spliced between the markers of ``results_doc`` when one is given."""
    if allure not in ALLURE_MODES:
        raise ReportError(f"allure mode {allure!r}: expected one of {', '.join(ALLURE_MODES)}")
    progress = progress or QuietProgress()
    started = time.monotonic()
    schema = load_schema()
    with progress.step(f"ingest {evidence}"):
        extracted = extract(spark, evidence, schema)
        progress.note(f"{extracted.run_count} run(s) and {extracted.exploration_count} exploration(s) read, "
                      f"{len(extracted.runs_quarantined)} refused")
        load(extracted, out / "data")
        quarantine_path = out / "quarantine.jsonl"
        quarantined = write_quarantine(extracted.quarantine, quarantine_path)
        for frame in extracted.persisted:
            frame.unpersist()
    allure_index, allure_note = _allure_html(extracted.allure_dirs, out, allure, progress)
    tables = read_tables(spark, out / "data", schema)
    rows = {kind: frame.count() for kind, frame in tables.items()}
    progress.note("rows: " + ", ".join(f"{kind} {count}" for kind, count in rows.items())
                  + f"; quarantined {quarantined}" + (f" (see {quarantine_path})" if quarantined else ""))
    data = collect_site_data(spark, tables, clauses, evidence=evidence.name or str(evidence),
                             quarantine=quarantine_path, quarantine_count=quarantined, progress=progress,
                             allure_report=f"{ALLURE_DIR}/index.html" if allure_index else None,
                             allure_note=allure_note, exploration_dirs=extracted.exploration_dirs)
    with progress.step("site"):
        index = render_site(data, out)
    with progress.step("results"):
        latest = _dicts(latest_results(tables["case"], tables["run"]).collect())
        if latest or results_doc is not None:  # no case to write of (explorations only) is an error only when asked
            results = results_markdown(latest, evidence=evidence.name or str(evidence))
            (out / RESULTS_FILE).write_text(results, encoding="utf-8")
            if results_doc is not None:
                results_doc.write_text(splice(results_doc.read_text(encoding="utf-8"), results,
                                              name=str(results_doc)), encoding="utf-8")
        else:
            (out / RESULTS_FILE).unlink(missing_ok=True)  # an earlier report's
            progress.note(f"no case verdicts in the evidence (explorations only): {RESULTS_FILE} not written")
    return ReportResult(index=index, allure_index=allure_index, runs=rows["run"], rows=rows, quarantined=quarantined,
                        seconds=time.monotonic() - started)
