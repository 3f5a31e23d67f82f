"""Exploration evidence through the real ingest: a small hand-written ``explore-*`` directory (as ``cck explore
--evidence-dir`` writes it) read into its tables with explicit schemas, its bad lines and unreadable summaries
quarantined, its run directories not taken for suite runs; and the report of it end to end."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from lxml import html
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from cck.reports import build_report, extract, load, read_tables
from cck.reports._ingest import QUARANTINE_STRUCT
from cck.reports._schema import EvidenceSchema

from .conftest import EVIDENCE

ID = "nested/explore-20250101-120000-seed7"
FINDING = "finding: 1 duplicated after a confirmed acknowledgement: k2 (to drain, delivery count 1)"
EXAMPLE = "send(q0 x2 durable async) | cut after 1 confirmable s2c"
REPLAY = f"cck explore --target artemis --artemis-version 2.44.0 --replay /ev/{ID}/minimal/example.json --tries 20"
SVG = '<svg xmlns="http://www.w3.org/2000/svg"><text>k2 DUPLICATED</text></svg>\n'
SUMMARY = {"seed": 7, "target": ["--target", "artemis", "--artemis-version", "2.44.0"], "budget_s": 600.0,
           "max_examples": 1000, "runs": 4, "kinds": {"clean": 2, "finding": 2}, "found": True, "confirmed": True,
           "most_exposed": {"unconfirmed": 12, "durable_sends": 3, "recent_durable_sends": 2},
           "finished": "2025-01-31T12:01:00.000000Z",
           "finding": FINDING, "example": EXAMPLE, "replay": REPLAY, "diagram": f"/ev/{ID}/minimal/sequence.svg",
           "regression_case": f"/ev/{ID}/minimal/test_explore_51d0856b.py"}
CHECKED = {"ok": True, "final_drain_complete": True, "duplicates_allowed": True}


def _run(run: int, phase: str, kind: str, unconfirmed: int, durable: int, ops: int, checker: Any) -> dict[str, Any]:
    return {"run": run, "phase": phase, "at_s": 1.5 * run, "kind": kind, "elapsed_s": 0.4, "summary": f"{kind}: ...",
            "example": {"workload": {}, "schedule": {}}, "exposure": {"unconfirmed": unconfirmed,
                                                                      "durable_sends": durable},
            "ops": ops, "checker": checker}


EXAMPLES = [
    _run(1, "explore", "clean", 0, 0, 3, CHECKED),
    _run(2, "explore", "finding", 12, 3, 6, {**CHECKED, "ok": False}),
    _run(3, "shrink", "indeterminate", 0, 0, 2, None),
    _run(4, "confirm", "finding", 1, 1, 6, {**CHECKED, "ok": False}),
]


def _ops(run: int, *ops: tuple[str, str, str, str | None]) -> list[dict[str, Any]]:
    return [{"run": run, "index": index, "process": process, "type": kind, "f": f, "value": value,
             "time_ns": 1000 * run + index} for index, (process, kind, f, value) in enumerate(ops)]


HISTORIES = [
    *_ops(1, ("plain", "invoke", "send", "k1"), ("plain", "ok", "send", None), ("drain", "ok", "receive", "k1")),
    # k2 delivered again after its acknowledgement was confirmed: the finding
    *_ops(2, ("plain", "invoke", "send", "k2"), ("plain", "ok", "send", None), ("drain", "ok", "receive", "k2"),
          ("drain", "invoke", "ack", "k2"), ("drain", "ok", "ack", None), ("drain", "ok", "receive", "k2")),
    *_ops(3, ("plain", "invoke", "send", "k3"), ("plain", "info", "send", None)),
]


def _jsonl(path: Path, rows: list[Any], tail: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows) + tail, encoding="utf-8")


def _write_evidence(root: Path) -> Path:
    """An exploration with bad lines, three it cannot read, and a ``--replay`` run's directory."""
    directory = root / ID
    _jsonl(directory / "examples.jsonl", [*EXAMPLES, {"run": 5, "phase": "confirm"}, {"run": 6, "kind": "clean",
                                                                                       "exposure": 3}])
    _jsonl(directory / "histories.jsonl", HISTORIES, tail='{"run": 4, "index": 0, "proc')  # a killed writer's
    (directory / "summary.json").write_text(json.dumps(SUMMARY, indent=2), encoding="utf-8")
    for run in ("minimal", "confirmation"):  # exploration's own run files: not suite runs
        _jsonl(directory / run / "history.jsonl", [{"process": "plain", "type": "invoke", "f": "send", "value": "k2",
                                                    "time_ns": 1}])
        _jsonl(directory / run / "wire.jsonl", [{"conn": 1, "type": "SESS_SEND"}])
        (directory / run / "example.json").write_text("{}", encoding="utf-8")
        (directory / run / "findings.json").write_text("{}", encoding="utf-8")
    (directory / "minimal" / "sequence.svg").write_text(SVG, encoding="utf-8")
    _jsonl(root / "broken" / "explore-x" / "examples.jsonl", EXAMPLES[:1])
    (root / "broken" / "explore-x" / "summary.json").write_text("{not json", encoding="utf-8")
    _jsonl(root / "explore-badsummary" / "examples.jsonl", EXAMPLES[:1])
    (root / "explore-badsummary" / "summary.json").write_text(json.dumps({
        "seed": "7", "target": ["reference"], "budget_s": 60, "runs": 1, "found": False, "confirmed": False}))
    _jsonl(root / "explore-unfinished" / "examples.jsonl", EXAMPLES[:1])
    _jsonl(root / "replay" / "history.jsonl", [{"process": "plain", "type": "invoke", "f": "send", "value": "k",
                                               "time_ns": 1}])
    for name in ("example.json", "findings.json"):
        (root / "replay" / name).write_text("{}", encoding="utf-8")
    return directory


QUARANTINED = [
    ("broken/explore-x/summary.json", 0, "broken/explore-x", "exploration",
     "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1) (the whole exploration is "
     "skipped)"),
    ("explore-badsummary/summary.json", 0, "explore-badsummary", "exploration",
     "field 'target': ['reference'] names no --target; field 'seed': '7' is not a long (the whole exploration is "
     "skipped)"),
    ("explore-unfinished/summary.json", 0, "explore-unfinished", "exploration",
     "no summary.json (the exploration did not finish writing its evidence?) (the whole exploration is skipped)"),
    (f"{ID}/examples.jsonl", 5, ID, "explore_example", "field 'kind' is missing"),
    (f"{ID}/examples.jsonl", 6, ID, "explore_example", "field 'exposure': 3 is not an object"),
    (f"{ID}/histories.jsonl", len(HISTORIES) + 1, ID, "explore_history",
     "not JSON (truncated?): Unterminated string starting at: line 1 column 24 (char 23)"),
]


def test_an_exploration_is_read_into_its_tables_and_its_bad_lines_quarantined(
        spark: SparkSession, schema: EvidenceSchema, tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    _write_evidence(evidence)
    extracted = extract(spark, evidence, schema)  # no suite run: no "no evidence runs found"
    assertDataFrameEqual(extracted.quarantine, spark.createDataFrame(QUARANTINED, QUARANTINE_STRUCT))
    assert extracted.run_count == 0
    assert extracted.exploration_count == 1
    assert extracted.exploration_dirs == {ID: evidence / ID}
    assert extracted.tables["history"].count() == extracted.tables["wire"].count() == 0  # minimal/, replay/: not runs
    assert extracted.explorations is not None
    [summary] = [row.asDict() for row in extracted.explorations.drop("finished").collect()]
    assert extracted.explorations.selectExpr("string(finished)").first()[0] == "2025-01-31 12:01:00"
    assert summary == {
        "exploration_id": ID, "target_version": "2.44.0", "target_args": "--target artemis --artemis-version 2.44.0",
        "seed": 7, "budget_s": 600.0, "max_examples": 1000, "runs": 4, "kinds": '{"clean":2,"finding":2}',
        "found": True, "confirmed": True, "most_unconfirmed": 12, "most_durable_sends": 3,
        "most_recent_durable_sends": 2, "finding": FINDING,
        "example": EXAMPLE, "replay": REPLAY, "diagram": SUMMARY["diagram"],
        "regression_case": SUMMARY["regression_case"], "target": "artemis"}
    runs = extracted.tables["explore_example"].select(
        "exploration_id", "run", "phase", "kind", "unconfirmed", "durable_sends", "ops", "checker_ok",
        "final_drain_complete", "duplicates_allowed", "target")
    assertDataFrameEqual(runs, spark.createDataFrame([
        (ID, 1, "explore", "clean", 0, 0, 3, True, True, True, "artemis"),
        (ID, 2, "explore", "finding", 12, 3, 6, False, True, True, "artemis"),
        (ID, 3, "shrink", "indeterminate", 0, 0, 2, None, None, None, "artemis"),
        (ID, 4, "confirm", "finding", 1, 1, 6, False, True, True, "artemis"),
    ], "exploration_id string, run int, phase string, kind string, unconfirmed int, durable_sends int, ops int, "
       "checker_ok boolean, final_drain_complete boolean, duplicates_allowed boolean, target string"))
    histories = extracted.tables["explore_history"]
    assert sorted((r["run"], r["index"], r["f"], r["value"]) for r in histories.collect()) == sorted(
        (op["run"], op["index"], op["f"], op["value"]) for op in HISTORIES)

    load(extracted, tmp_path / "data")
    assert (tmp_path / "data" / "explore_history" / "target=artemis").is_dir()
    stored = read_tables(spark, tmp_path / "data", schema)
    for kind in ("explore_example", "explore_history"):
        assertDataFrameEqual(stored[kind], extracted.tables[kind])
    assertDataFrameEqual(stored["exploration"], extracted.explorations)


def test_explorations_beside_suite_runs_are_read_apart_from_them(spark: SparkSession, schema: EvidenceSchema,
                                                                tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    shutil.copytree(EVIDENCE, evidence)
    _write_evidence(evidence)
    extracted = extract(spark, evidence, schema)
    assert extracted.run_count == 2
    assert extracted.exploration_count == 1
    assert {r["kind"] for r in extracted.quarantine.collect()} == {"exploration", "explore_example", "explore_history"}


def test_the_report_of_an_exploration_shows_it_on_the_exploration_page(spark: SparkSession, tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    _write_evidence(evidence)
    out = tmp_path / "site"
    result = build_report(spark, evidence, out, allure="off")
    assert result.runs == 0
    assert result.quarantined == len(QUARANTINED)
    assert result.rows["explore_history"] == len(HISTORIES)
    assert not (out / "results.md").exists()  # no case to write of
    page = html.parse(str(out / "explore.html")).getroot()
    [row] = page.xpath('//table[@id="explorations"]/tbody/tr')
    cells = [" ".join(td.text_content().split()) for td in row.xpath("td")]
    assert cells[:9] == [ID, "artemis 2.44.0", "7", "10 min", "4", "clean 1 finding 2 indeterminate 1",
                         "explore 2, shrink 1, retry 0, confirm 1", "FOUND, confirmed", "run 2, after 3.0 s"]
    assert cells[9:] == ["12 / 3 / 2", "1 (1 with durable sends)", "6.0 s", "40"]
    [finding] = page.xpath('//section[@class="finding"]')
    assert finding.xpath('string(.//dd[@class="finding-summary"])') == FINDING
    assert finding.xpath('string(.//code[@class="replay"])') == REPLAY
    [link] = finding.xpath('.//a[@class="diagram-link"]/@href')
    assert (out / link).read_text(encoding="utf-8") == SVG
    # run 2's history: k2 received again after its ack was confirmed (the audit fails it, as the checker did); run
    # 4's history was the truncated line
    [audit] = page.xpath('//table[@id="exploration-audit"]/tbody/tr')
    assert [" ".join(td.text_content().split()) for td in audit.xpath("td")] == [
        ID, "3", "11", "0", "0", "1", "1", "0", "0", "0", "1 (runs 2)", "1", "0"]
    index = html.parse(str(out / "index.html")).getroot()
    assert index.xpath('//nav/a[text()="Exploration"]/@href') == ["explore.html"]
