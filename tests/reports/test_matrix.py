from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from cck.reports import VERDICTS, case_verdicts, conformance_matrix

from .conftest import Table, ts

MATRIX = ("subject string, target string, target_version string, client string, case_id string, clause_id string, "
          "group string, latest_verdict string, latest_run_id string, latest_reason string, "
          "latest_kit_error_type string, latest_kit_error_where string, latest_known_deviation string, "
          "modal_verdict string, runs long, "
          "pass long, unsupported long, pass_lenient long, indeterminate long, kit_error long, fail long, other long, "
          "flake_rate double, first_seen timestamp, last_seen timestamp")
CASE_VERDICTS = ("subject string, target string, target_version string, client string, case_id string, "
                 "clause_id string, group string, run_id string, run_started timestamp, verdict string, "
                 "reason string, kit_error_type string, kit_error_where string, known_deviation string")
KIT_ERROR = '{"type":"TypeError","where":"conformance/suite/test_x.py:12 in case"}'


def _case(run: str, case: str, verdict: str, *, finished: int = 0, reason: str | None = None,
          target: str = "reference", **fields: Any) -> dict[str, object]:
    return {"run_id": run, "case_id": case, "clause_id": f"clause.{case}", "group": "g", "verdict": verdict,
            "reason": reason, "target": target, "started": ts(0), "finished": ts(0, finished), **fields}


def _broker(case: str, latest: str, run: str, modal: str, counts: tuple[int, ...], flake: float, first: int,
            last: int, *, reason: str | None = None, target: str = "reference",
            version: str | None = "1.0") -> tuple[Any, ...]:
    """An expected broker row; ``counts`` is (pass, unsupported, pass_lenient, indeterminate, kit_error, fail,
    other)."""
    return ("broker", target, version, None, case, f"clause.{case}", "g", latest, run, reason, None, None, None, modal,
            sum(counts), *counts, flake, ts(first), ts(last))


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
        _broker("c1", "PASS", "r3", "PASS", (2, 0, 0, 0, 0, 1, 0), 1 / 3, 1, 3),
        # a 1-1 tie: the worse verdict is the modal one
        _broker("c2", "FAIL", "r2", "FAIL", (1, 0, 0, 0, 0, 1, 0), 0.5, 1, 2, reason="late"),
        _broker("c3", "PASS", "r1", "PASS", (1, 0, 0, 0, 0, 0, 0), 0.0, 1, 1),
        _broker("c4", "WEIRD", "r1", "WEIRD", (0, 0, 0, 0, 0, 0, 1), 0.0, 1, 1),
        # a url target without a version is a column of its own
        _broker("c1", "UNSUPPORTED", "u1", "UNSUPPORTED", (0, 1, 0, 0, 0, 0, 0), 0.0, 4, 4, reason="no control",
                target="url", version=None),
    ], MATRIX)
    assertDataFrameEqual(conformance_matrix(cases, runs), expected)


def test_matrix_of_no_cases_is_empty(spark: SparkSession, table: Table) -> None:
    assertDataFrameEqual(conformance_matrix(table("case"), table("run")), spark.createDataFrame([], MATRIX))


def test_kit_error_is_counted_apart_and_ranks_between_fail_and_indeterminate(spark: SparkSession,
                                                                            table: Table) -> None:
    assert VERDICTS == ("FAIL", "KIT_ERROR", "INDETERMINATE", "PASS_LENIENT", "UNSUPPORTED", "PASS")
    runs = table("run", *({"run_id": f"r{n}", "target_version": "1.0", "started": ts(n)} for n in range(1, 5)))
    kit_error = {"kit_error": KIT_ERROR, "reason": "kit error in call: TypeError: x"}
    cases = table("case",
                  # a KIT_ERROR-INDETERMINATE tie: KIT_ERROR is the worse
                  _case("r1", "k1", "INDETERMINATE"), _case("r2", "k1", "KIT_ERROR", **kit_error),
                  # a FAIL-KIT_ERROR tie: FAIL is the worse; the latest (r4) is KIT_ERROR with its type and place
                  _case("r3", "k2", "FAIL"), _case("r4", "k2", "KIT_ERROR", **kit_error),
                  # a kit_error on a record of another verdict is not the kit's error
                  _case("r4", "k3", "PASS", kit_error=KIT_ERROR))
    where = "conformance/suite/test_x.py:12 in case"
    reason = "kit error in call: TypeError: x"
    expected = spark.createDataFrame([
        ("broker", "reference", "1.0", None, "k1", "clause.k1", "g", "KIT_ERROR", "r2", reason, "TypeError", where,
         None, "KIT_ERROR", 2, 0, 0, 0, 1, 1, 0, 0, 0.5, ts(1), ts(2)),
        ("broker", "reference", "1.0", None, "k2", "clause.k2", "g", "KIT_ERROR", "r4", reason, "TypeError", where,
         None, "FAIL", 2, 0, 0, 0, 0, 1, 1, 0, 0.5, ts(3), ts(4)),
        _broker("k3", "PASS", "r4", "PASS", (1, 0, 0, 0, 0, 0, 0), 0.0, 4, 4),
    ], MATRIX)
    assertDataFrameEqual(conformance_matrix(cases, runs), expected)


def test_client_rows_have_the_client_as_their_column(spark: SparkSession, table: Table) -> None:
    runs = table("run",
                 {"run_id": "b1", "subject": "broker", "target_version": "1.0", "started": ts(1)},
                 {"run_id": "k1", "subject": "client", "client": "kit", "target_version": "1.0", "started": ts(2)},
                 # the same client judged against another broker version: the same column
                 {"run_id": "k2", "subject": "client", "client": "kit", "target_version": "1.1", "started": ts(3)},
                 {"run_id": "a1", "subject": "client", "client": "artemis@2.44.0", "target_version": "1.1",
                  "started": ts(4)},
                 # a broker run of the artemis target 2.44.0: not the column of the artemis@2.44.0 client
                 {"run_id": "b2", "subject": "broker", "target": "artemis", "target_version": "2.44.0",
                  "started": ts(5)})
    cases = table("case",
                  _case("b1", "w.1", "PASS", subject="broker"),
                  _case("k1", "backoff.1", "FAIL", subject="client", client="kit"),
                  _case("k2", "backoff.1", "PASS", subject="client", client="kit"),
                  # a client case whose record lacks its client: its run's
                  _case("a1", "backoff.1", "UNSUPPORTED", subject="client"),
                  _case("b2", "w.1", "PASS", subject="broker", target="artemis"))
    expected = spark.createDataFrame([
        _broker("w.1", "PASS", "b1", "PASS", (1, 0, 0, 0, 0, 0, 0), 0.0, 1, 1),
        _broker("w.1", "PASS", "b2", "PASS", (1, 0, 0, 0, 0, 0, 0), 0.0, 5, 5, target="artemis", version="2.44.0"),
        # the broker of a client row is the one of its latest run
        ("client", "reference", "1.1", "kit", "backoff.1", "clause.backoff.1", "g", "PASS", "k2", None, None, None,
         None, "FAIL", 2, 1, 0, 0, 0, 0, 1, 0, 0.5, ts(2), ts(3)),
        ("client", "reference", "1.1", "artemis@2.44.0", "backoff.1", "clause.backoff.1", "g", "UNSUPPORTED", "a1",
         None, None, None, None, "UNSUPPORTED", 1, 0, 1, 0, 0, 0, 0, 0, 0.0, ts(4), ts(4)),
    ], MATRIX)
    assertDataFrameEqual(conformance_matrix(cases, runs), expected)


def test_a_case_without_a_subject_is_a_broker_case(spark: SparkSession, table: Table) -> None:
    runs = table("run", {"run_id": "r1", "target_version": "1.0", "started": ts(1)})
    cases = table("case", _case("r1", "c1", "PASS", client="kit"),
                  _case("r1", "c2", "KIT_ERROR", kit_error=KIT_ERROR, reason="kit error"))
    expected = spark.createDataFrame([
        ("broker", "reference", "1.0", None, "c1", "clause.c1", "g", "r1", ts(1), "PASS", None, None, None, None),
        ("broker", "reference", "1.0", None, "c2", "clause.c2", "g", "r1", ts(1), "KIT_ERROR", "kit error",
         "TypeError", "conformance/suite/test_x.py:12 in case", None),
    ], CASE_VERDICTS)
    assertDataFrameEqual(case_verdicts(cases, runs), expected)
