"""The front page's heat map: one row per subject, column and group, from the conformance matrix.

A case's **group** is its ID's first component (``reattach.cut.9`` -> ``reattach``), the same as the case
record's ``group``, but derived from the ID so that it holds for records that lack one.  Each matrix cell counts
once, with its latest verdict (the matrix's ``latest_verdict``): the heat map says where each column stands now,
and the matrix below it keeps the history.

Definitions (one output row per subject, column and group):

* ``subject``; the column: ``target``, ``target_version`` for a broker row, ``client`` for a client row (the other
  fields null: a client column is not keyed by the broker it was judged against);
* ``cases``: the group's cases in that column; ``conforming``: those whose latest verdict is PASS or
  PASS_LENIENT; ``pass`` ... ``fail``: cases per latest verdict; ``fail_known``: the FAILs that matched a known
  deviation (``fail`` - ``fail_known`` are findings nobody has explained yet); ``other``: verdicts the kit does
  not define;
* ``share``: ``conforming / cases``.  UNSUPPORTED, INDETERMINATE and KIT_ERROR count against it: none is evidence
  that the subject conforms.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ._verdicts import CONFORMING, SUBJECTS, VERDICTS

__all__ = ["group_summary"]

_CLIENT = SUBJECTS[1]


def _group_of(case_id: Column) -> Column:
    """``reattach.cut.9`` -> ``reattach``."""
    return F.substring_index(case_id, ".", 1)


def _count(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0)).cast("long")


def group_summary(matrix: DataFrame) -> DataFrame:
    """``matrix`` (:func:`conformance_matrix`'s rows) -> one row per subject, column and group."""
    client = F.col("subject") == _CLIENT
    verdict = F.col("latest_verdict")
    counts = [_count(verdict == name).alias(name.lower()) for name in reversed(VERDICTS)]
    return (
        matrix.select(
            "subject",
            F.when(~client, F.col("target")).alias("target"),
            F.when(~client, F.col("target_version")).alias("target_version"),
            "client",
            _group_of(F.col("case_id")).alias("group"),
            "latest_verdict",
            "latest_known_deviation",
        )
        .groupBy("subject", "target", "target_version", "client", "group")
        .agg(
            F.count("*").alias("cases"),
            _count(verdict.isin(*CONFORMING)).alias("conforming"),
            *counts,
            _count((verdict == "FAIL") & F.col("latest_known_deviation").isNotNull()).alias("fail_known"),
            _count(~verdict.isin(*VERDICTS)).alias("other"),
        )
        .withColumn("share", (F.col("conforming") / F.col("cases")).cast("double"))
    )
