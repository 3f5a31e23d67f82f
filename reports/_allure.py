"""Allure results as a table, and the cross-check of what allure recorded against the kit's own verdicts.

allure-pytest writes one ``<uuid>-result.json`` per test into ``<run>/allure-results/``.  The pipeline reads
the few fields a report needs (which case, which status, when, why) into :data:`ALLURE_STRUCT`; a file that
is not JSON or lacks those fields is quarantined like a bad evidence row.  Everything else allure keeps
(steps, attachments, containers) stays for the allure HTML report (``_allure_html``).

The cross-check is worth having because the two records are written by different code: the case record by
the kit's plugin, the allure result by allure-pytest from pytest's outcome, which the plugin adjusts so that
pytest shows the verdict.  A case whose allure status does not follow from its verdict, or a case with only
one of the two records, points at the plugin (or at a run that was cut off).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from ._site import ALLURE_STATUSES  # the statuses allure knows (kept with the pages, which need no Spark)

__all__ = [
    "ALLURE_STRUCT",
    "ALLURE_STATUSES",
    "RESULT_SUFFIX",
    "parse_allure_result",
    "parse_allure_file",
    "expected_allure_status",
    "allure_agreement",
    "allure_status_counts",
]

RESULT_SUFFIX = "-result.json"


#: One allure result.  ``case_id`` is the ``case_id`` label the kit's plugin puts on every case (null for
#: a test that is not a conformance case); ``verdict`` its ``verdict`` label.
ALLURE_STRUCT = StructType([
    StructField("run_id", StringType(), False),
    StructField("uuid", StringType(), False),
    StructField("case_id", StringType(), True),
    StructField("name", StringType(), False),
    StructField("full_name", StringType(), True),
    StructField("status", StringType(), False),
    StructField("verdict", StringType(), True),
    StructField("started", TimestampType(), True),
    StructField("duration_ms", LongType(), True),
    StructField("message", StringType(), True),
    StructField("file", StringType(), False),
    StructField("target", StringType(), False),
])


def _millis(value: Any, name: str) -> datetime | str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return f"field {name!r} is not an integer (milliseconds)"
    return datetime.fromtimestamp(value / 1000, UTC)


def parse_allure_result(raw: bytes, *, run_id: str, file: str, target: str) -> tuple[Any, ...] | str:
    """One allure result file's bytes as a row of :data:`ALLURE_STRUCT`, or the reason it is refused."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return f"not UTF-8: {exc.reason} at byte {exc.start}"
    except json.JSONDecodeError as exc:
        return f"not JSON (truncated?): {exc}"
    if not isinstance(record, dict):
        return f"not a JSON object but {type(record).__name__}"
    for name in ("uuid", "name", "status"):
        if not isinstance(record.get(name), str):
            return f"field {name!r} is missing or not a string"
    if record["status"] not in ALLURE_STATUSES:
        return f"status {record['status']!r} is not one of {', '.join(ALLURE_STATUSES)}"
    labels: dict[str, str] = {}
    for label in record.get("labels") or ():
        if isinstance(label, dict) and isinstance(label.get("name"), str) and isinstance(label.get("value"), str):
            labels.setdefault(label["name"], label["value"])
    start, stop = _millis(record.get("start"), "start"), _millis(record.get("stop"), "stop")
    for value in (start, stop):
        if isinstance(value, str):
            return value
    duration = None
    if isinstance(record.get("start"), int) and isinstance(record.get("stop"), int):
        duration = record["stop"] - record["start"]
    details = record.get("statusDetails")
    message = details.get("message") if isinstance(details, dict) else None
    full_name = record.get("fullName")
    return (run_id, record["uuid"], labels.get("case_id"), record["name"],
            full_name if isinstance(full_name, str) else None, record["status"], labels.get("verdict"),
            start, duration, message if isinstance(message, str) else None, file, target)


def parse_allure_file(path: str, relative: str, run_id: str,
                      target: str) -> Iterator[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]]:
    """(row, None) or (None, quarantine row) for one result file; runs on the executors."""
    with open(path, "rb") as stream:
        parsed = parse_allure_result(stream.read(), run_id=run_id, file=relative, target=target)
    if isinstance(parsed, str):
        yield None, (relative, 0, run_id, "allure", parsed)
    else:
        yield parsed, None


#: What allure-pytest records for a case, given the kit's verdict: PASS_LENIENT and the known deviations
#: are pytest outcomes the plugin set (passed; skipped as xfail); FAIL, INDETERMINATE and KIT_ERROR come from
#: a failing setup, call or teardown, which allure calls failed (an assertion) or broken (any other exception).
_EXPECTED: Mapping[str, str] = {
    "PASS": "passed",
    "PASS_LENIENT": "passed",
    "UNSUPPORTED": "skipped",
    "FAIL": "failed|broken",
    "INDETERMINATE": "failed|broken",
    "KIT_ERROR": "failed|broken",
}


def expected_allure_status(verdict: Column, known_deviation: Column) -> Column:
    """The allure status(es) a verdict implies, as ``a|b`` text (null for a verdict the kit does not have)."""
    mapping = F.create_map(*[F.lit(x) for pair in _EXPECTED.items() for x in pair])
    return F.when(known_deviation.isNotNull(), F.lit("skipped")).otherwise(mapping[verdict])


def allure_agreement(allure: DataFrame, case: DataFrame) -> DataFrame:
    """Per run and case: the kit's verdict, allure's status, and whether the status follows from the verdict.

    Columns: run_id, target, case_id, verdict, known_deviation (bool), allure_status, expected, agrees,
    problem (null when it agrees).  Allure results of tests that are not cases (no ``case_id`` label) are
    left out; a case with two allure results (a rerun plugin) is checked on each.
    """
    cases = case.select("run_id", "target", "case_id", "verdict",
                        F.col("known_deviation").isNotNull().alias("known_deviation"))
    results = allure.where(F.col("case_id").isNotNull()).select(
        "run_id", "target", "case_id", F.col("status").alias("allure_status"))
    joined = cases.join(results, ["run_id", "target", "case_id"], "full_outer")
    expected = expected_allure_status(F.col("verdict"), F.when(F.col("known_deviation"), F.lit(True)))
    joined = joined.withColumn("expected", expected)
    follows = F.array_contains(F.split(F.col("expected"), r"\|"), F.col("allure_status"))
    problem = (F.when(F.col("verdict").isNull(), F.lit("an allure result but no case record"))
               .when(F.col("allure_status").isNull(), F.lit("a case record but no allure result"))
               .when(F.col("expected").isNull(), F.concat(F.lit("unknown verdict "), F.col("verdict")))
               .when(~follows, F.concat(F.lit("allure says "), F.col("allure_status"), F.lit(", the verdict implies "),
                                        F.regexp_replace(F.col("expected"), r"\|", " or "))))
    return (joined.withColumn("problem", problem)
            .withColumn("agrees", F.col("problem").isNull())
            .select("run_id", "target", "case_id", "verdict", F.coalesce("known_deviation", F.lit(False))
                    .alias("known_deviation"), "allure_status", "expected", "agrees", "problem"))


def allure_status_counts(allure: DataFrame) -> DataFrame:
    """Per run and target: how many allure results had each status (one column per status, zeros kept)."""
    counts = [F.sum(F.when(F.col("status") == status, 1).otherwise(0)).cast("long").alias(status)
              for status in ALLURE_STATUSES]
    return allure.groupBy("run_id", "target").agg(F.count(F.lit(1)).alias("results"), *counts)
