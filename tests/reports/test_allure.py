"""Allure results: parsing, the quarantine of bad result files, the status counts and the cross-check against
the verdicts, on tiny frames; the analytics tag the allure HTML builder removes."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from cck.reports import extract
from cck.reports._allure import ALLURE_STRUCT, allure_agreement, allure_status_counts, parse_allure_result
from cck.reports._allure_html import strip_analytics
from cck.reports._schema import EvidenceSchema

from .conftest import EVIDENCE, Table

RESULT: dict[str, Any] = {
    "uuid": "u1", "name": "test_x[window.mode.1]", "fullName": "conformance.suite.test_window#test_x",
    "status": "failed", "start": 1_700_000_000_000, "stop": 1_700_000_000_250,
    "statusDetails": {"message": "AssertionError: lost 1"},
    "labels": [{"name": "case_id", "value": "window.mode.1"}, {"name": "verdict", "value": "FAIL"},
               {"name": "suite", "value": "window"}],
}


def _parse(record: object) -> tuple[Any, ...] | str:
    return parse_allure_result(json.dumps(record).encode(), run_id="r1", file="r1/allure-results/u1-result.json",
                               target="reference")


def test_a_result_becomes_a_typed_row() -> None:
    assert _parse(RESULT) == (
        "r1", "u1", "window.mode.1", "test_x[window.mode.1]", "conformance.suite.test_window#test_x", "failed",
        "FAIL", datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC), 250, "AssertionError: lost 1",
        "r1/allure-results/u1-result.json", "reference")
    bare = _parse({"uuid": "u2", "name": "test_plain", "status": "passed"})
    assert bare == ("r1", "u2", None, "test_plain", None, "passed", None, None, None, None,
                    "r1/allure-results/u1-result.json", "reference")


@pytest.mark.parametrize(("record", "reason"), [
    ([1], "not a JSON object but list"),
    ({k: v for k, v in RESULT.items() if k != "status"}, "field 'status' is missing or not a string"),
    ({**RESULT, "status": "green"}, "status 'green' is not one of passed, failed, broken, skipped, unknown"),
    ({**RESULT, "start": "noon"}, "field 'start' is not an integer (milliseconds)"),
])
def test_a_bad_result_gives_its_reason(record: object, reason: str) -> None:
    assert _parse(record) == reason


def test_truncated_and_non_utf8_results_are_refused() -> None:
    truncated = parse_allure_result(json.dumps(RESULT).encode()[:50], run_id="r1", file="f", target="t")
    assert isinstance(truncated, str)
    assert truncated.startswith("not JSON (truncated?): ")
    assert str(parse_allure_result(b"\xff{}", run_id="r1", file="f", target="t")).startswith("not UTF-8")


def test_allure_results_are_ingested_and_a_bad_one_quarantined(spark: SparkSession, schema: EvidenceSchema,
                                                              tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    shutil.copytree(EVIDENCE, evidence)
    run = sorted(evidence.iterdir())[0]
    results = sorted((run / "allure-results").glob("*-result.json"))
    good = sum(len(list(r.glob("allure-results/*-result.json"))) for r in evidence.iterdir())
    results[0].write_text(results[0].read_text(encoding="utf-8")[:100], encoding="utf-8")  # a killed writer
    extracted = extract(spark, evidence, schema)
    assert extracted.tables["allure"].count() == good - 1
    assert sorted(extracted.allure_dirs) == sorted(r / "allure-results" for r in evidence.iterdir())
    bad = extracted.quarantine.collect()
    assert len(bad) == 1
    assert (bad[0]["file"], bad[0]["line"], bad[0]["run_id"], bad[0]["kind"]) == (
        f"{run.name}/allure-results/{results[0].name}", 0, run.name, "allure")
    assert bad[0]["reason"].startswith("not JSON (truncated?)")
    for frame in extracted.persisted:
        frame.unpersist()


def _result(run: str, case: str | None, status: str, uuid: str = "") -> tuple[Any, ...]:
    return (run, uuid or f"{run}-{case}", case, f"test[{case}]", None, status, None, None, None, None, "f",
            "reference")


def test_status_counts_per_run(spark: SparkSession) -> None:
    allure = spark.createDataFrame([_result("r1", "a", "passed"), _result("r1", "b", "skipped"),
                                    _result("r1", None, "broken", "x"), _result("r2", "a", "failed")], ALLURE_STRUCT)
    expected = spark.createDataFrame(
        [("r1", "reference", 3, 1, 0, 1, 1, 0), ("r2", "reference", 1, 0, 1, 0, 0, 0)],
        "run_id string, target string, results long, passed long, failed long, broken long, skipped long, "
        "unknown long")
    assertDataFrameEqual(allure_status_counts(allure), expected)


def test_agreement_checks_each_status_against_its_verdict(spark: SparkSession, table: Table) -> None:
    cases = table("case",
                  {"run_id": "r1", "case_id": "pass", "verdict": "PASS"},
                  {"run_id": "r1", "case_id": "lenient", "verdict": "PASS_LENIENT"},
                  {"run_id": "r1", "case_id": "unsupported", "verdict": "UNSUPPORTED"},
                  {"run_id": "r1", "case_id": "fail", "verdict": "FAIL"},
                  {"run_id": "r1", "case_id": "indeterminate", "verdict": "INDETERMINATE"},
                  {"run_id": "r1", "case_id": "kit-error", "verdict": "KIT_ERROR"},
                  {"run_id": "r1", "case_id": "deviation", "verdict": "FAIL", "known_deviation": "documented"},
                  {"run_id": "r1", "case_id": "wrong", "verdict": "PASS"},
                  {"run_id": "r1", "case_id": "no-allure", "verdict": "PASS"})
    allure = spark.createDataFrame([
        _result("r1", "pass", "passed"), _result("r1", "lenient", "passed"),
        _result("r1", "unsupported", "skipped"), _result("r1", "fail", "failed"),
        _result("r1", "indeterminate", "broken"), _result("r1", "kit-error", "broken"),
        _result("r1", "deviation", "skipped"),
        _result("r1", "wrong", "failed"), _result("r1", "no-case", "passed"),
        _result("r1", None, "passed", "not-a-case")], ALLURE_STRUCT)
    expected = spark.createDataFrame([
        ("r1", "reference", "pass", "PASS", False, "passed", "passed", True, None),
        ("r1", "reference", "lenient", "PASS_LENIENT", False, "passed", "passed", True, None),
        ("r1", "reference", "unsupported", "UNSUPPORTED", False, "skipped", "skipped", True, None),
        ("r1", "reference", "fail", "FAIL", False, "failed", "failed|broken", True, None),
        ("r1", "reference", "indeterminate", "INDETERMINATE", False, "broken", "failed|broken", True, None),
        ("r1", "reference", "kit-error", "KIT_ERROR", False, "broken", "failed|broken", True, None),
        ("r1", "reference", "deviation", "FAIL", True, "skipped", "skipped", True, None),
        ("r1", "reference", "wrong", "PASS", False, "failed", "passed", False,
         "allure says failed, the verdict implies passed"),
        ("r1", "reference", "no-allure", "PASS", False, None, "passed", False, "a case record but no allure result"),
        ("r1", "reference", "no-case", None, False, "passed", None, False, "an allure result but no case record"),
    ], "run_id string, target string, case_id string, verdict string, known_deviation boolean, "
       "allure_status string, expected string, agrees boolean, problem string")
    assertDataFrameEqual(allure_agreement(allure, cases), expected)


def test_the_analytics_tag_is_removed_and_nothing_else() -> None:
    page = ('<head><script>window.x = 1;</script></head><body><div id="app"></div>\n'
            '    <script async src="https://www.googletagmanager.com/gtag/js?id=G-TEST"></script>\n'
            '    <script>\n        window.dataLayer = window.dataLayer || [];\n'
            '        function gtag(){dataLayer.push(arguments);}\n        gtag("config", "G-TEST");\n'
            '    </script>\n</body>')
    stripped, found = strip_analytics(page)
    assert found
    assert "googletagmanager" not in stripped
    assert "gtag" not in stripped
    assert '<script>window.x = 1;</script>' in stripped
    assert '<div id="app"></div>' in stripped
    assert strip_analytics(stripped) == (stripped, False)



def _broken_allure(home: Path) -> None:
    """An allure install whose CLI fails the way a damaged one does: a message and a non-zero exit."""
    cli = home / "node_modules" / "allure" / "cli.js"
    cli.parent.mkdir(parents=True)
    cli.write_text('console.error("allure: damaged install"); process.exit(3);\n', encoding="utf-8")


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_allure_modes_when_allure_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cck.reports._errors import ReportError
    from cck.reports._pipeline import QuietProgress, _allure_html

    monkeypatch.setenv("CCK_ALLURE_HOME", str(tmp_path / "home"))
    results = [next(EVIDENCE.glob("*/allure-results"))]
    assert _allure_html(results, tmp_path / "site", "off", QuietProgress()) == (None, "not built (--allure off)")
    assert _allure_html([], tmp_path / "site", "auto", QuietProgress()) == (
        None, "not built: no run has allure-results")
    assert _allure_html(results, tmp_path / "site", "auto", QuietProgress()) == (
        None, "not built: the pinned allure is not installed (cck install-allure)")
    with pytest.raises(ReportError, match="--allure require: the pinned allure is not installed"):
        _allure_html(results, tmp_path / "site", "require", QuietProgress())
    _broken_allure(tmp_path / "home")
    index, note = _allure_html(results, tmp_path / "site", "auto", QuietProgress())
    assert index is None
    assert note is not None
    assert note.startswith(f"failed: building the allure report in {tmp_path / 'site' / 'allure'}: ")
    assert "exited with 3: allure: damaged install" in note
    with pytest.raises(ReportError, match="exited with 3: allure: damaged install"):
        _allure_html(results, tmp_path / "site", "require", QuietProgress())
