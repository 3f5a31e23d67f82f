"""The version diff: two columns of one matrix side by side, case by case (``diff/<subject>/<a>_vs_<b>.html``).

One output row per subject, pair of its columns and case that either column has.  A pair is unordered: it appears
once, its ``left`` column the one whose name, then version, sorts first as text (the site may show it the other
way round).  The sides are the matrix's latest verdict of the case in each column, with that run's reason and,
when the verdict matched a known deviation, the deviation's reason (the run copied it from
``conformance/deviations/<target or client-client>.toml`` into its case record).

Columns: subject, left_name, left_version, right_name, right_version (a broker column's target and version, a
client column's client and a null version), case_id, status, left_verdict, right_verdict, left_known_deviation,
right_known_deviation, left_reason, right_reason.  ``status``: ``differs`` (both columns have the case, with
different verdicts), ``only left`` / ``only right`` (one column did not run it), ``same``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ._verdicts import DIFF_STATUSES, SUBJECTS

__all__ = ["column_diff"]

_CLIENT = SUBJECTS[1]
_DIFFERS, _ONLY_LEFT, _ONLY_RIGHT, _SAME = DIFF_STATUSES
_SIDE_FIELDS = ("key", "name", "version", "verdict", "known_deviation", "reason", "present")


def _cells(matrix: DataFrame) -> DataFrame:
    """The matrix's cells with their column as a name, a version and a key that is never null (a url target has
    no version, and joins do not match nulls)."""
    client = F.col("subject") == _CLIENT
    name = F.when(client, F.coalesce(F.col("client"), F.lit("?"))).otherwise(F.col("target"))
    version = F.when(~client, F.col("target_version"))
    return matrix.select(
        "subject", "case_id", name.alias("name"), version.alias("version"),
        F.concat(name, F.lit("@"), F.coalesce(version, F.lit("?"))).alias("key"),
        F.col("latest_verdict").alias("verdict"), F.col("latest_known_deviation").alias("known_deviation"),
        F.col("latest_reason").alias("reason"), F.lit(True).alias("present"))


def _side(frame: DataFrame, side: str) -> DataFrame:
    return frame.select(*[F.col(c).alias(f"{side}_{c}") if c in _SIDE_FIELDS else F.col(c) for c in frame.columns])


def column_diff(matrix: DataFrame) -> DataFrame:
    """``matrix`` (:func:`conformance_matrix`'s rows) -> one row per subject, pair of columns and case."""
    cells = _cells(matrix)
    columns = cells.select("subject", "key", "name", "version").distinct()
    pairs = (_side(columns, "left").join(_side(columns, "right"), "subject")
             .where(F.col("left_key") < F.col("right_key")))
    grid = pairs.join(cells.select("subject", "case_id").distinct(), "subject")
    sides = cells.drop("name", "version")
    joined = (grid.join(_side(sides, "left"), ["subject", "case_id", "left_key"], "left")
              .join(_side(sides, "right"), ["subject", "case_id", "right_key"], "left")
              .where(F.col("left_present") | F.col("right_present")))
    status = (F.when(F.col("left_present").isNull(), F.lit(_ONLY_RIGHT))
              .when(F.col("right_present").isNull(), F.lit(_ONLY_LEFT))
              .when(F.col("left_verdict").eqNullSafe(F.col("right_verdict")), F.lit(_SAME))
              .otherwise(F.lit(_DIFFERS)))
    return joined.select(
        "subject", "left_name", "left_version", "right_name", "right_version", "case_id", status.alias("status"),
        "left_verdict", "right_verdict", "left_known_deviation", "right_known_deviation", "left_reason",
        "right_reason")
