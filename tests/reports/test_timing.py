from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from cck.reports import timing_attempts, timing_outliers, timing_summary

from .conftest import Table

ATTEMPTS = ("target string, case_id string, name string, run_id string, run int, index int, status string, "
            "expected_ms double, observed_ms double, deviation_ms double, allowed_ms double, outside_tolerance boolean")


def _row(index: int | None, expected: float | None, observed: float | None, status: str | None, *,
         case: str = "b.1", run: int = 0, allowed: float | None = 110.0):
    deviation = None if expected is None or observed is None else observed - expected
    return {"run_id": "r1", "case_id": case, "name": case, "run": run, "index": index, "status": status,
            "expected_ms": expected, "observed_ms": observed, "deviation_ms": deviation,
            "allowed_ms": allowed if deviation is not None else None}


def test_attempts_keep_indexed_rows_and_rederive_the_tolerance(spark: SparkSession, table: Table) -> None:
    timing = table("timing",
                   _row(None, None, None, None, case="b.0"),  # a schedule without samples: no attempt
                   _row(0, 0.0, 1.0, "ok"),
                   _row(1, 100.0, 250.0, "late"),
                   _row(2, 100.0, None, "missing"))
    expected = spark.createDataFrame([
        ("reference", "b.1", "b.1", "r1", 0, 0, "ok", 0.0, 1.0, 1.0, 110.0, False),
        ("reference", "b.1", "b.1", "r1", 0, 1, "late", 100.0, 250.0, 150.0, 110.0, True),
        ("reference", "b.1", "b.1", "r1", 0, 2, "missing", 100.0, None, None, None, None),
    ], ATTEMPTS)
    assertDataFrameEqual(timing_attempts(timing), expected)


def test_summary_counts_statuses_and_percentiles(spark: SparkSession, table: Table) -> None:
    attempts = timing_attempts(table("timing",
                                     _row(0, 0.0, 1.0, "ok"), _row(1, 100.0, 102.0, "ok"),
                                     _row(2, 100.0, 103.0, "ok"), _row(3, 100.0, 250.0, "late"),
                                     _row(0, 0.0, 1.0, "ok", run=1)))
    expected = spark.createDataFrame(
        # |deviations| 1, 1, 2, 3, 150: exact percentiles at p * (n - 1), linear interpolation
        [("reference", "b.1", "b.1", 1, 5, 4, 0, 1, 0, 0, 0, 1, 2.0, 3 + 0.6 * 147, 3 + 0.96 * 147, 150.0)],
        "target string, case_id string, name string, runs long, attempts long, ok long, early long, late long, "
        "missing long, extra long, unjudged long, outside_tolerance long, abs_deviation_p50 double, "
        "abs_deviation_p90 double, abs_deviation_p99 double, abs_deviation_max double")
    assertDataFrameEqual(timing_summary(attempts), expected)


def test_outliers_are_outside_the_fences_or_the_tolerance(spark: SparkSession, table: Table) -> None:
    rows = [_row(i, 100.0, 100.0 + d, "ok") for i, d in enumerate([1.0, 2.0, 2.0, 3.0, 30.0])]
    rows.append(_row(5, 100.0, 250.0, "late"))
    rows.append(_row(0, 100.0, 300.0, "late", case="b.2"))  # one attempt: inside its fences, outside the tolerance
    outliers = timing_outliers(timing_attempts(table("timing", *rows)))
    got = outliers.select("case_id", "index", "outlier", "outside_tolerance")
    # b.1 deviations 1, 2, 2, 3, 30, 150: Q1 2 (at 1.25), Q3 23.25 (at 3.75), width 31.875
    expected = spark.createDataFrame([("b.1", 5, True, True), ("b.2", 0, False, True)],
                                     "case_id string, index int, outlier boolean, outside_tolerance boolean")
    assertDataFrameEqual(got, expected)
    fences = outliers.where("case_id = 'b.1'").select("fence_low", "fence_high")
    assertDataFrameEqual(fences, spark.createDataFrame([(-29.875, 55.125)], "fence_low double, fence_high double"))


def test_min_fence_keeps_millisecond_wobble_in(spark: SparkSession, table: Table) -> None:
    rows = [_row(i, 100.0, 100.0 + d, "ok") for i, d in enumerate([1.0, 1.0, 1.0, 1.0, 4.0])]
    assert timing_outliers(timing_attempts(table("timing", *rows))).count() == 0
    assert timing_outliers(timing_attempts(table("timing", *rows)), min_fence_ms=1.0).count() == 1
