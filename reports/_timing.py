"""Timing compliance: observed vs expected per attempt, from the timing oracle's TIMING rows.

Definitions:

* An **attempt** is a TIMING row with an ``index`` (rows without one only say a schedule had no
  samples).  Rows of every judging run (``run`` 0 and each re-verification run) count.
* ``deviation_ms`` is the oracle's (observed - expected); ``outside_tolerance`` re-derives its judgement
  from the numbers: ``|deviation_ms| > allowed_ms`` (null when either is missing, e.g. a missing or
  unjudged attempt).
* Per case (target, case, schedule name): attempts, status counts, and the 50th/90th/99th
  percentiles and maximum of ``|deviation_ms|`` (exact percentiles, linear interpolation).
* An **outlier** is an attempt whose ``deviation_ms`` lies outside its case's Tukey fences
  ``[Q1 - w, Q3 + w]`` with ``w = max(1.5 * IQR, min_fence_ms)``: the floor keeps a schedule that is
  met to the millisecond from calling a 2 ms wobble an outlier.  The outliers table lists attempts
  that are outliers or outside the tolerance.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

__all__ = ["STATUSES", "timing_attempts", "timing_summary", "timing_outliers"]

#: The oracle's per-attempt statuses.
STATUSES = ("ok", "early", "late", "missing", "extra", "unjudged")

_CASE = ["target", "case_id", "name"]


def timing_attempts(timing: DataFrame) -> DataFrame:
    """TIMING rows -> one row per judged attempt, with ``outside_tolerance``."""
    return (
        timing.where(F.col("index").isNotNull())
        .select(*_CASE, "run_id", "run", "index", "status", "expected_ms", "observed_ms", "deviation_ms",
                "allowed_ms")
        .withColumn("outside_tolerance", F.abs(F.col("deviation_ms")) > F.col("allowed_ms"))
    )


def timing_summary(attempts: DataFrame) -> DataFrame:
    """Attempts (from :func:`timing_attempts`) -> one row per target, case and schedule."""
    deviation = F.abs(F.col("deviation_ms"))
    statuses = [F.sum(F.when(F.col("status") == s, 1).otherwise(0)).cast("long").alias(s) for s in STATUSES]
    return attempts.groupBy(*_CASE).agg(
        F.countDistinct("run_id").alias("runs"),
        F.count("*").alias("attempts"),
        *statuses,
        F.sum(F.when(F.col("outside_tolerance"), 1).otherwise(0)).cast("long").alias("outside_tolerance"),
        F.percentile(deviation, F.lit(0.5)).alias("abs_deviation_p50"),
        F.percentile(deviation, F.lit(0.9)).alias("abs_deviation_p90"),
        F.percentile(deviation, F.lit(0.99)).alias("abs_deviation_p99"),
        F.max(deviation).alias("abs_deviation_max"),
    )


def timing_outliers(attempts: DataFrame, *, min_fence_ms: float = 5.0) -> DataFrame:
    """Attempts outside their case's Tukey fences or outside the tolerance, with the fences and ``outlier``."""
    per_case = Window.partitionBy(*_CASE)
    q1 = F.percentile(F.col("deviation_ms"), F.lit(0.25)).over(per_case)
    q3 = F.percentile(F.col("deviation_ms"), F.lit(0.75)).over(per_case)
    width = F.greatest(F.lit(1.5) * (F.col("q3") - F.col("q1")), F.lit(float(min_fence_ms)))
    fenced = (
        attempts.withColumn("q1", q1).withColumn("q3", q3)
        .withColumn("fence_low", F.col("q1") - width)
        .withColumn("fence_high", F.col("q3") + width)
        .withColumn("outlier", (F.col("deviation_ms") < F.col("fence_low"))
                    | (F.col("deviation_ms") > F.col("fence_high")))
        .drop("q1", "q3")
    )
    return fenced.where(F.coalesce(F.col("outlier"), F.lit(False)) | F.coalesce(F.col("outside_tolerance"),
                                                                                F.lit(False)))
