"""Clause coverage: which clauses of the clause table the evidence's cases check.

The clause table is ``conformance/clauses/*.toml`` (one ``[[clause]]`` array per group file), read here
with ``tomllib`` (the ``conformance`` package is never imported).  Coverage is of the *evidence read*: a
clause "has no case" when no case record in any run cites it, so a report over a partial run (``--case``)
shows the clauses that run left out.

Per clause: its level, group (the TOML file's stem) and whether the table records an
implementation/documentation disagreement; ``in_table`` (false for a clause ID cited by cases but absent
from the table); ``case_ids`` (sorted) and ``case_count``; ``targets`` that ran one of its cases; and
``reference_cases`` / ``reference_exercised``: cases of the clause run against the reference target with a
verdict other than UNSUPPORTED and KIT_ERROR (a case the kit erred in exercised nothing).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StringType, StructField, StructType

from ._errors import ReportError

__all__ = ["CLAUSE_DIR", "CLAUSE_STRUCT", "read_clause_table", "clause_coverage"]

#: The kit's clause table, beside ``reports/``.
CLAUSE_DIR = Path(__file__).resolve().parent.parent / "conformance" / "clauses"

CLAUSE_STRUCT = StructType([
    StructField("clause_id", StringType(), False),
    StructField("level", StringType(), False),
    StructField("group", StringType(), False),
    StructField("disagreement", BooleanType(), False),
])


def read_clause_table(directory: Path = CLAUSE_DIR) -> list[tuple[Any, ...]]:
    """Rows of :data:`CLAUSE_STRUCT`, one per ``[[clause]]`` of every ``*.toml`` in ``directory``."""
    if not directory.is_dir():
        raise ReportError(f"{directory}: clause table directory does not exist")
    rows: list[tuple[Any, ...]] = []
    for path in sorted(directory.glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ReportError(f"{path}: not readable TOML: {exc}") from None
        for number, entry in enumerate(data.get("clause", []), start=1):
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                raise ReportError(f"{path}: clause #{number} has no id")
            rows.append((entry["id"], str(entry.get("level", "")), path.stem, "implementation" in entry))
    return rows


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
