from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from cck.reports._errors import ReportError
from cck.reports._results_doc import BEGIN, END, latest_results, results_markdown, splice

from .conftest import Table, ts

LATEST = ("subject string, target string, target_version string, client string, run_id string, "
          "run_started timestamp, run_finished timestamp, case_id string, verdict string, known boolean")


def _case(run: str, case: str, verdict: str, *, finished: int = 0, known: str | None = None,
          **fields: Any) -> dict[str, object]:
    return {"run_id": run, "case_id": case, "clause_id": f"clause.{case}", "group": "g", "verdict": verdict,
            "target": "reference", "started": ts(0), "finished": ts(0, finished), "known_deviation": known,
            **fields}


def test_latest_results_takes_each_cases_verdict_from_its_columns_newest_run_that_has_it(
        spark: SparkSession, table: Table) -> None:
    runs = table("run",
                 {"run_id": "a1", "target": "artemis", "target_version": "2.44.0", "started": ts(1), "finished": ts(2)},
                 {"run_id": "a2", "target": "artemis", "target_version": "2.44.0", "started": ts(3), "finished": ts(4)},
                 {"run_id": "b1", "target": "artemis", "target_version": "2.28.0", "started": ts(1), "finished": ts(2)},
                 {"run_id": "k1", "subject": "client", "client": "kit", "started": ts(5), "finished": ts(6)})
    cases = table("case",
                  _case("a1", "c1", "FAIL"), _case("a2", "c1", "FAIL", known="why"),
                  # only the older run has c3: its verdict stands in the column
                  _case("a1", "c3", "PASS_LENIENT"),
                  # recorded twice in one run: the record that finished last counts
                  _case("a2", "c2", "FAIL", finished=1), _case("a2", "c2", "PASS", finished=2),
                  _case("b1", "c1", "PASS"), _case("k1", "x1", "PASS", subject="client", client="kit"))
    expected = spark.createDataFrame([
        ("broker", "artemis", "2.44.0", None, "a2", ts(3), ts(4), "c1", "FAIL", True),
        ("broker", "artemis", "2.44.0", None, "a2", ts(3), ts(4), "c2", "PASS", False),
        ("broker", "artemis", "2.44.0", None, "a1", ts(1), ts(2), "c3", "PASS_LENIENT", False),
        ("broker", "artemis", "2.28.0", None, "b1", ts(1), ts(2), "c1", "PASS", False),
        ("client", "reference", None, "kit", "k1", ts(5), ts(6), "x1", "PASS", False),
    ], LATEST)
    assertDataFrameEqual(latest_results(cases, runs), expected)


def _row(case: str, verdict: str, *, version: str = "2.44.0", known: bool = False, subject: str = "broker",
         client: str | None = None) -> dict[str, Any]:
    return {"subject": subject, "target": "artemis", "target_version": version, "client": client,
            "run_id": f"run-{version}", "run_started": ts(0), "run_finished": ts(1, 5), "case_id": case,
            "verdict": verdict, "known": known}


def test_results_markdown_counts_and_lists_every_non_pass() -> None:
    text = results_markdown([
        _row("reattach.cut.2", "PASS"), _row("reattach.cut.10", "FAIL", known=True),
        _row("reattach.cut.2", "PASS", version="2.28.0"),
        _row("backoff.interval.1", "UNSUPPORTED", subject="client", client="artemis@2.44.0"),
    ], evidence="ev")
    assert text.startswith(BEGIN)
    assert text.rstrip().endswith(END)
    assert "| artemis 2.44.0 | 2 | 1 | 0 | 0 | 1 (1 known) | 0 | 0 | `run-2.44.0` | 1 min 5 s |" in text
    # the case not run on 2.28.0 shows as "-"; the plain PASS case is not listed
    assert "| `reattach.cut.10` | - | FAIL (known) |" in text
    assert "| `reattach.cut.2` |" not in text
    assert "### Client cases" in text
    assert "| `backoff.interval.1` | UNSUPPORTED |" in text


def test_a_column_of_several_runs_names_the_newest_and_adds_up_their_time() -> None:
    older = {**_row("security.tls.1", "PASS"), "run_id": "run-a", "run_started": ts(0), "run_finished": ts(0, 30)}
    newer = {**_row("reattach.cut.2", "FAIL"), "run_id": "run-b", "run_started": ts(2), "run_finished": ts(3)}
    text = results_markdown([older, newer], evidence="ev")
    assert "| artemis 2.44.0 | 2 | 1 | 0 | 0 | 1 | 0 | 0 | `run-b` and 1 earlier | 1 min 30 s |" in text


def test_results_markdown_refuses_no_rows() -> None:
    with pytest.raises(ReportError, match="no case verdicts"):
        results_markdown([], evidence="ev")


def test_splice_replaces_only_between_the_markers() -> None:
    doc = f"# Results\n\nintro\n\n{BEGIN}\nold\n{END}\n\n## Why\n\nkept\n"
    new = splice(doc, f"{BEGIN}\nnew\n{END}\n", name="doc.md")
    assert new == f"# Results\n\nintro\n\n{BEGIN}\nnew\n{END}\n\n## Why\n\nkept\n"
    assert splice(new, f"{BEGIN}\nnew\n{END}\n", name="doc.md") == new
    with pytest.raises(ReportError, match=r"doc\.md: no generated-results markers"):
        splice("# no markers\n", "x", name="doc.md")
