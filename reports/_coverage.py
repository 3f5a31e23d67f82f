"""Clause coverage: which clauses of the clause table the evidence's cases check.

The clause table is ``conformance/clauses/*.toml`` (one ``[[clause]]`` array per group file), read with the
kit's own loader, :mod:`conformance.clauses` (standard library only; with the evidence schema and the sequence
diagram, the only parts of ``conformance`` that ``reports`` imports).  Coverage is of the *evidence read*: a
clause "has no case" when no case record in any run cites it, so a report over a partial run (``--case``)
shows the clauses that run left out.

Per clause: its level, group (the TOML file's stem) and whether the table records an
implementation/documentation disagreement; ``in_table`` (false for a clause ID cited by cases but absent
from the table); ``case_ids`` (sorted) and ``case_count``; ``targets`` that ran one of its cases; and
``reference_cases`` / ``reference_exercised``: cases of the clause run against the reference target with a
verdict other than UNSUPPORTED and KIT_ERROR (a case the kit erred in exercised nothing).
"""

from __future__ import annotations

from importlib.resources.abc import Traversable
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StringType, StructField, StructType

from cck.conformance.clauses import CLAUSE_DIR, ClauseError, load_clauses

from ._errors import ReportError

__all__ = ["CLAUSE_DIR", "CLAUSE_STRUCT", "read_clause_table", "clause_coverage"]

CLAUSE_STRUCT = StructType([
    StructField("clause_id", StringType(), False),
    StructField("level", StringType(), False),
    StructField("group", StringType(), False),
    StructField("disagreement", BooleanType(), False),
])


def read_clause_table(directory: Traversable = CLAUSE_DIR) -> list[tuple[Any, ...]]:
    """Rows of :data:`CLAUSE_STRUCT`, one per ``[[clause]]`` of every ``*.toml`` in ``directory`` (a
    :class:`~pathlib.Path`; default: the kit's table, :data:`conformance.clauses.CLAUSE_DIR`)."""
    try:
        table = load_clauses(directory)
    except ClauseError as exc:
        raise ReportError(str(exc)) from None
    return [(c.id, c.level, c.group, c.disagreement) for c in table.values()]


def clause_coverage(clauses: DataFrame, cases: DataFrame) -> DataFrame:
    """``clauses`` (:data:`CLAUSE_STRUCT`) and ``cases`` (the CASE table) -> one row per clause."""
    on_reference = (F.col("target") == "reference") & ~F.col("verdict").isin("UNSUPPORTED", "KIT_ERROR")
    cited = cases.groupBy("clause_id").agg(
        F.array_sort(F.collect_set("case_id")).alias("case_ids"),
        F.array_sort(F.collect_set("target")).alias("targets"),
        F.countDistinct(F.when(on_reference, F.col("case_id"))).alias("reference_cases"),
    )
    empty = F.array().cast("array<string>")
    joined = clauses.withColumn("in_table", F.lit(True)).join(cited, "clause_id", "full")
    return joined.select(
        "clause_id",
        "level",
        "group",
        "disagreement",
        F.coalesce(F.col("in_table"), F.lit(False)).alias("in_table"),
        F.coalesce(F.col("case_ids"), empty).alias("case_ids"),
        F.size(F.coalesce(F.col("case_ids"), empty)).alias("case_count"),
        F.coalesce(F.col("targets"), empty).alias("targets"),
        F.coalesce(F.col("reference_cases"), F.lit(0).cast("long")).alias("reference_cases"),
        (F.coalesce(F.col("reference_cases"), F.lit(0)) > 0).alias("reference_exercised"),
    )
