from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from reports import conformance_matrix

from .conftest import Table, ts

MATRIX = ("target string, target_version string, case_id string, clause_id string, group string, "
          "latest_verdict string, latest_run_id string, latest_reason string, modal_verdict string, runs long, "
          "pass long, unsupported long, pass_lenient long, indeterminate long, fail long, other long, "
          "flake_rate double, first_seen timestamp, last_seen timestamp")


def _case(run: str, case: str, verdict: str, *, finished: int = 0, reason: str | None = None,
          target: str = "reference") -> dict[str, object]:
    return {"run_id": run, "case_id": case, "clause_id": f"clause.{case}", "group": "g", "verdict": verdict,
            "reason": reason, "target": target, "started": ts(0), "finished": ts(0, finished)}


def test_matrix_latest_modal_flake_and_seen(spark: SparkSession, table: Table) -> None:
    runs = table("run",
                 {"run_id": "r1", "target_version": "1.0", "started": ts(1)},
                 {"run_id": "r2", "target_version": "1.0", "started": ts(2)},
                 {"run_id": "r3", "target_version": "1.0", "started": ts(3)},
                 {"run_id": "u1", "target": "url", "target_version": None, "started": ts(4)})
    cases = table("case",
                  _case("r1", "c1", "PASS"), _case("r2", "c1", "FAIL", reason="lost 1"), _case("r3", "c1", "PASS"),
                  _case("r1", "c2", "PASS"), _case("r2", "c2", "FAIL", reason="late"),
                  # recorded twice in one run: the record that finished last counts, once
                  _case("r1", "c3", "FAIL", finished=1), _case("r1", "c3", "PASS", finished=2),
                  _case("r1", "c4", "WEIRD"),
                  _case("u1", "c1", "UNSUPPORTED", target="url", reason="no control"))
    expected = spark.createDataFrame([
        ("reference", "1.0", "c1", "clause.c1", "g", "PASS", "r3", None, "PASS", 3, 2, 0, 0, 0, 1, 0, 1 / 3,
         ts(1), ts(3)),
        # a 1-1 tie: the worse verdict is the modal one
        ("reference", "1.0", "c2", "clause.c2", "g", "FAIL", "r2", "late", "FAIL", 2, 1, 0, 0, 0, 1, 0, 0.5,
         ts(1), ts(2)),
        ("reference", "1.0", "c3", "clause.c3", "g", "PASS", "r1", None, "PASS", 1, 1, 0, 0, 0, 0, 0, 0.0,
         ts(1), ts(1)),
        ("reference", "1.0", "c4", "clause.c4", "g", "WEIRD", "r1", None, "WEIRD", 1, 0, 0, 0, 0, 0, 1, 0.0,
         ts(1), ts(1)),
        # a url target without a version is a column of its own
        ("url", None, "c1", "clause.c1", "g", "UNSUPPORTED", "u1", "no control", "UNSUPPORTED", 1, 0, 1, 0, 0, 0,
         0, 0.0, ts(4), ts(4)),
    ], MATRIX)
    assertDataFrameEqual(conformance_matrix(cases, runs), expected)


def test_matrix_of_no_cases_is_empty(spark: SparkSession, table: Table) -> None:
    assertDataFrameEqual(conformance_matrix(table("case"), table("run")), spark.createDataFrame([], MATRIX))
