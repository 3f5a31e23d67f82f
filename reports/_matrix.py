"""The conformance matrix: target x version x case -> verdicts across runs.

Definitions (one output row per target, target version and case):

* ``runs``: runs in which the case has a record (a case recorded twice in one run counts once: its
  record that finished last).
* ``pass`` ... ``fail``: how many of those runs gave each verdict; ``other``: verdicts the kit does
  not define.
* ``latest_verdict``, ``latest_run_id``, ``latest_reason``: from the run that started last (ties: the
  greater run ID).
* ``modal_verdict``: the most common verdict; a tie goes to the worse verdict (FAIL, INDETERMINATE,
  PASS_LENIENT, UNSUPPORTED, PASS, then others).
* ``flake_rate``: the share of runs whose verdict differs from the modal one, in [0, 1).
* ``first_seen``, ``last_seen``: the earliest and latest start of a run that has the case.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

__all__ = ["VERDICTS", "conformance_matrix"]

#: The kit's verdicts, worst first (the order a modal tie is broken in).
VERDICTS = ("FAIL", "INDETERMINATE", "PASS_LENIENT", "UNSUPPORTED", "PASS")


def _severity(verdict: Column) -> Column:
    """0 for FAIL ... 4 for PASS, 5 for a verdict the kit does not define."""
    expression = F.lit(len(VERDICTS))
    for rank, name in reversed(list(enumerate(VERDICTS))):
        expression = F.when(verdict == name, F.lit(rank)).otherwise(expression)
    return expression


def conformance_matrix(cases: DataFrame, runs: DataFrame) -> DataFrame:
    """``cases`` (the CASE table) and ``runs`` (the RUN table) -> one row per target, version and case."""
    run_info = runs.select("run_id", "target", "target_version", F.col("started").alias("run_started"))
    last_record = Window.partitionBy("run_id", "case_id").orderBy(F.col("finished").desc(), F.col("started").desc())
    cell = ["target", "target_version", "case_id"]
    # Windows and groupBy keep a null target_version (a url target) as a group of its own, where a join would not.
    per_run = (
        cases.select("run_id", "case_id", "clause_id", "group", "verdict", "reason", "started", "finished")
        .withColumn("_n", F.row_number().over(last_record))
        .where(F.col("_n") == 1)
        .join(run_info, "run_id")
        .withColumn("_verdict_runs", F.count("*").over(Window.partitionBy(*cell, "verdict")))
    )
    counts = [F.sum(F.when(F.col("verdict") == name, 1).otherwise(0)).cast("long").alias(name.lower())
              for name in reversed(VERDICTS)]
    latest = F.max_by(F.struct("verdict", "run_id", "reason", "clause_id", "group"),
                      F.struct("run_started", "run_id"))
    modal = F.max_by(F.struct("verdict", "_verdict_runs"),
                     F.struct("_verdict_runs", -_severity(F.col("verdict")), F.col("verdict")))
    return (
        per_run.groupBy(*cell).agg(
            latest.alias("_latest"),
            modal.alias("_modal"),
            F.count("*").alias("runs"),
            *counts,
            F.sum(F.when(F.col("verdict").isin(*VERDICTS), 0).otherwise(1)).cast("long").alias("other"),
            F.min("run_started").alias("first_seen"),
            F.max("run_started").alias("last_seen"),
        )
        .select(
            *cell,
            F.col("_latest.clause_id").alias("clause_id"),
            F.col("_latest.group").alias("group"),
            F.col("_latest.verdict").alias("latest_verdict"),
            F.col("_latest.run_id").alias("latest_run_id"),
            F.col("_latest.reason").alias("latest_reason"),
            F.col("_modal.verdict").alias("modal_verdict"),
            "runs",
            *[name.lower() for name in reversed(VERDICTS)],
            "other",
            (1 - F.col("_modal._verdict_runs") / F.col("runs")).cast("double").alias("flake_rate"),
            "first_seen",
            "last_seen",
        )
    )
