"""Verdicts across runs of one column: which cases changed verdict (flaky), and each run's conforming share.

Both read :func:`case_verdicts`'s rows (one per run and case).  A column is, as in the matrix, a broker target and
version or a client under test; its runs are the runs that recorded one of its cases, in the order they started
(ties: the run ID).

* :func:`case_sequences`: one row per subject, column and case recorded in **two or more** runs: ``runs``,
  ``verdicts`` (the verdict of each run, in run order), ``flaky`` (more than one verdict among them) and
  ``flake_rate`` (the share of runs whose verdict differs from the most common one: the matrix's definition).
* :func:`column_trends`: one row per subject, column and run: ``run_id``, ``run_started``, ``cases`` the run
  recorded for the column, ``conforming`` (PASS or PASS_LENIENT) and ``share`` (``conforming / cases``).  A run
  of a partial selection (``--case 'window.*'``) has fewer cases: its share is of those.

The column is ``target``, ``target_version`` for a broker row and ``client`` for a client row (the other fields
null), as in :func:`group_summary`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ._verdicts import CONFORMING, SUBJECTS

__all__ = ["case_sequences", "column_trends"]

_CLIENT = SUBJECTS[1]
_COLUMN = ("subject", "target", "target_version", "client")


def _columns(verdicts: DataFrame) -> DataFrame:
    """The rows keyed by their column: a client row's broker is not part of it."""
    client = F.col("subject") == _CLIENT
    return (verdicts.withColumn("target", F.when(~client, F.col("target")))
            .withColumn("target_version", F.when(~client, F.col("target_version"))))


def _most_common(verdicts: Column) -> Column:
    """How many times the most common element of the array ``verdicts`` occurs in it."""
    return F.aggregate(F.array_distinct(verdicts), F.lit(0),
                       lambda most, v: F.greatest(most, F.size(F.filter(verdicts, lambda x: x == v))))


def case_sequences(verdicts: DataFrame) -> DataFrame:
    """``verdicts`` (:func:`case_verdicts`'s rows) -> one row per column and case recorded in two or more runs."""
    in_order = F.sort_array(F.collect_list(F.struct("run_started", "run_id", "verdict")))
    return (
        _columns(verdicts)
        .groupBy(*_COLUMN, "case_id")
        .agg(F.transform(in_order, lambda run: run["verdict"]).alias("verdicts"))
        .withColumn("runs", F.size("verdicts"))
        .where(F.col("runs") > 1)
        .select(*_COLUMN, "case_id", "runs", "verdicts",
                (F.size(F.array_distinct("verdicts")) > 1).alias("flaky"),
                (1 - _most_common(F.col("verdicts")) / F.col("runs")).cast("double").alias("flake_rate"))
    )


def column_trends(verdicts: DataFrame) -> DataFrame:
    """``verdicts`` (:func:`case_verdicts`'s rows) -> one row per column and run."""
    return (
        _columns(verdicts)
        .groupBy(*_COLUMN, "run_id", "run_started")
        .agg(F.count("*").alias("cases"),
             F.sum(F.when(F.col("verdict").isin(*CONFORMING), 1).otherwise(0)).cast("long").alias("conforming"))
        .withColumn("share", (F.col("conforming") / F.col("cases")).cast("double"))
    )
