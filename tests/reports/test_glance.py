"""The front page's transforms on tiny frames: the group heat map, the version diff, flakes and trends."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from cck.reports import case_sequences, case_verdicts, column_diff, column_trends, conformance_matrix, group_summary

from .conftest import Table, ts

GROUPS = ("subject string, target string, target_version string, client string, group string, cases long, "
          "conforming long, pass long, unsupported long, pass_lenient long, indeterminate long, kit_error long, "
          "fail long, fail_known long, other long, share double")
DIFF = ("subject string, left_name string, left_version string, right_name string, right_version string, "
        "case_id string, status string, left_verdict string, right_verdict string, left_known_deviation string, "
        "right_known_deviation string, left_reason string, right_reason string")
SEQUENCES = ("subject string, target string, target_version string, client string, case_id string, runs int, "
             "verdicts array<string>, flaky boolean, flake_rate double")
TRENDS = ("subject string, target string, target_version string, client string, run_id string, "
          "run_started timestamp, cases long, conforming long, share double")
OLD, NEW = "known: stored twice", "known: window 0"


def _case(run: str, case: str, verdict: str, **fields: Any) -> dict[str, object]:
    return {"run_id": run, "case_id": case, "clause_id": "c", "group": case.split(".")[0], "verdict": verdict,
            "started": ts(0), "finished": ts(0), **fields}


@pytest.fixture(scope="module")
def evidence(table: Table) -> tuple[DataFrame, DataFrame]:
    """Broker runs of artemis 2.28.0 (two) and 2.44.0, a url target without a version, and two runs of the kit's
    client against two reference versions (one column)."""
    runs = table("run",
                 {"run_id": "a1", "target": "artemis", "target_version": "2.28.0", "started": ts(1)},
                 {"run_id": "a2", "target": "artemis", "target_version": "2.28.0", "started": ts(2)},
                 {"run_id": "b1", "target": "artemis", "target_version": "2.44.0", "started": ts(3)},
                 {"run_id": "u1", "target": "url", "target_version": None, "started": ts(4)},
                 {"run_id": "k1", "subject": "client", "client": "kit", "target_version": "0.1", "started": ts(5)},
                 {"run_id": "k2", "subject": "client", "client": "kit", "target_version": "0.2", "started": ts(6)})
    cases = table("case",
                  _case("a1", "reattach.cut.9", "FAIL", known_deviation=OLD),
                  _case("a2", "reattach.cut.9", "PASS"),
                  _case("a1", "reattach.cut.1", "PASS"),
                  _case("a2", "reattach.cut.1", "PASS"),
                  _case("a2", "window.mode.6", "FAIL", reason="reattached", known_deviation=NEW),
                  _case("a2", "window.mode.7", "FAIL", reason="lost 1"),
                  _case("a2", "security.tls.1", "UNSUPPORTED"),
                  _case("b1", "reattach.cut.9", "PASS"),
                  _case("b1", "reattach.cut.1", "PASS_LENIENT"),
                  _case("b1", "window.mode.6", "PASS"),
                  _case("b1", "window.mode.7", "FAIL", reason="lost 2"),
                  _case("b1", "ha.pair.1", "KIT_ERROR"),
                  _case("u1", "window.mode.7", "PASS"),
                  _case("k1", "backoff.interval.1", "FAIL", subject="client", client="kit"),
                  _case("k2", "backoff.interval.1", "PASS", subject="client", client="kit"))
    return cases, runs


def _counts(**given: int) -> tuple[int, ...]:
    """pass, unsupported, pass_lenient, indeterminate, kit_error, fail, fail_known, other."""
    names = ("pass", "unsupported", "pass_lenient", "indeterminate", "kit_error", "fail", "fail_known", "other")
    return tuple(given.get(name, 0) for name in names)


def test_group_summary_counts_latest_verdicts_per_group_and_column(spark: SparkSession,
                                                                   evidence: tuple[DataFrame, DataFrame]) -> None:
    def broker(target: str, version: str | None, group: str, cases: int, conforming: int,
               counts: tuple[int, ...]) -> tuple[Any, ...]:
        return ("broker", target, version, None, group, cases, conforming, *counts, conforming / cases)

    expected = spark.createDataFrame([
        # 2.28.0's latest run passed reattach.cut.9: the earlier known FAIL is history, not the heat map
        broker("artemis", "2.28.0", "reattach", 2, 2, _counts(**{"pass": 2})),
        # one known FAIL, one FAIL nobody explained
        broker("artemis", "2.28.0", "window", 2, 0, _counts(fail=2, fail_known=1)),
        # UNSUPPORTED is not conforming
        broker("artemis", "2.28.0", "security", 1, 0, _counts(unsupported=1)),
        broker("artemis", "2.44.0", "reattach", 2, 2, _counts(**{"pass": 1, "pass_lenient": 1})),
        broker("artemis", "2.44.0", "window", 2, 1, _counts(**{"pass": 1, "fail": 1})),
        broker("artemis", "2.44.0", "ha", 1, 0, _counts(kit_error=1)),
        broker("url", None, "window", 1, 1, _counts(**{"pass": 1})),
        # a client column is its client alone, whichever broker its runs were judged against
        ("client", None, None, "kit", "backoff", 1, 1, *_counts(**{"pass": 1}), 1.0),
    ], GROUPS)
    assertDataFrameEqual(group_summary(conformance_matrix(*evidence)), expected)


def test_column_diff_pairs_every_two_columns_of_a_subject_case_by_case(spark: SparkSession,
                                                                      evidence: tuple[DataFrame, DataFrame]) -> None:
    def row(left: tuple[str, str | None], right: tuple[str, str | None], case: str, status: str,
            verdicts: tuple[str | None, str | None], known: tuple[str | None, str | None] = (None, None),
            reasons: tuple[str | None, str | None] = (None, None)) -> tuple[Any, ...]:
        return ("broker", *left, *right, case, status, *verdicts, *known, *reasons)

    old, new, url = ("artemis", "2.28.0"), ("artemis", "2.44.0"), ("url", None)
    expected = spark.createDataFrame([
        row(old, new, "reattach.cut.9", "same", ("PASS", "PASS")),
        row(old, new, "reattach.cut.1", "differs", ("PASS", "PASS_LENIENT")),
        row(old, new, "window.mode.6", "differs", ("FAIL", "PASS"), (NEW, None), ("reattached", None)),
        row(old, new, "window.mode.7", "same", ("FAIL", "FAIL"), reasons=("lost 1", "lost 2")),
        row(old, new, "security.tls.1", "only left", ("UNSUPPORTED", None)),
        row(old, new, "ha.pair.1", "only right", (None, "KIT_ERROR")),
        # a column without a version pairs like any other
        row(old, url, "reattach.cut.9", "only left", ("PASS", None)),
        row(old, url, "reattach.cut.1", "only left", ("PASS", None)),
        row(old, url, "window.mode.6", "only left", ("FAIL", None), (NEW, None), ("reattached", None)),
        row(old, url, "window.mode.7", "differs", ("FAIL", "PASS"), reasons=("lost 1", None)),
        row(old, url, "security.tls.1", "only left", ("UNSUPPORTED", None)),
        row(new, url, "reattach.cut.9", "only left", ("PASS", None)),
        row(new, url, "reattach.cut.1", "only left", ("PASS_LENIENT", None)),
        row(new, url, "window.mode.6", "only left", ("PASS", None)),
        row(new, url, "window.mode.7", "differs", ("FAIL", "PASS"), reasons=("lost 2", None)),
        row(new, url, "ha.pair.1", "only left", ("KIT_ERROR", None)),
        # the client matrix has one column: no pair
    ], DIFF)
    assertDataFrameEqual(column_diff(conformance_matrix(*evidence)), expected)


def test_case_sequences_give_each_repeated_case_its_verdicts_in_run_order(
        spark: SparkSession, evidence: tuple[DataFrame, DataFrame]) -> None:
    expected = spark.createDataFrame([
        ("broker", "artemis", "2.28.0", None, "reattach.cut.9", 2, ["FAIL", "PASS"], True, 0.5),
        ("broker", "artemis", "2.28.0", None, "reattach.cut.1", 2, ["PASS", "PASS"], False, 0.0),
        ("client", None, None, "kit", "backoff.interval.1", 2, ["FAIL", "PASS"], True, 0.5),
    ], SEQUENCES)
    assertDataFrameEqual(case_sequences(case_verdicts(*evidence)), expected)


def test_a_flake_rate_is_the_share_of_runs_off_the_most_common_verdict(spark: SparkSession, table: Table) -> None:
    runs = table("run", *({"run_id": f"r{n}", "target_version": "1", "started": ts(n)} for n in range(1, 5)))
    # started out of run-ID order: the sequence follows the start
    cases = table("case", _case("r3", "c.1", "PASS"), _case("r1", "c.1", "FAIL"), _case("r2", "c.1", "PASS"),
                  _case("r4", "c.1", "PASS"))
    expected = spark.createDataFrame(
        [("broker", "reference", "1", None, "c.1", 4, ["FAIL", "PASS", "PASS", "PASS"], True, 0.25)], SEQUENCES)
    assertDataFrameEqual(case_sequences(case_verdicts(cases, runs)), expected)


def test_column_trends_give_each_run_its_conforming_share(spark: SparkSession,
                                                         evidence: tuple[DataFrame, DataFrame]) -> None:
    def broker(version: str | None, run: str, minute: int, cases: int, conforming: int,
               target: str = "artemis") -> tuple[Any, ...]:
        return ("broker", target, version, None, run, ts(minute), cases, conforming, conforming / cases)

    expected = spark.createDataFrame([
        broker("2.28.0", "a1", 1, 2, 1),
        broker("2.28.0", "a2", 2, 5, 2),
        broker("2.44.0", "b1", 3, 5, 3),
        broker(None, "u1", 4, 1, 1, target="url"),
        ("client", None, None, "kit", "k1", ts(5), 1, 0, 0.0),
        ("client", None, None, "kit", "k2", ts(6), 1, 1, 1.0),
    ], TRENDS)
    assertDataFrameEqual(column_trends(case_verdicts(*evidence)), expected)

