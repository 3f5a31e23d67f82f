"""The conformance matrix: a column per target and version (broker cases) or per client (client cases).

A case judges one subject (``reports._verdicts.SUBJECTS``): a **broker** case judges the target, a **client**
case the client under test against a reference broker.  A case record without a subject (evidence older
than subjects) is a broker case.  A column of the matrix is, for a broker case, its run's target and target
version; for a client case, the client under test (``kit``, ``artemis@<version>``).

Definitions (one output row per subject, column and case):

* ``target``, ``target_version``: the column of a broker row; for a client row, the broker its latest run
  judged the client against.  ``client``: the column of a client row, null for a broker row.
* ``runs``: runs in which the case has a record (a case recorded twice in one run counts once: its
  record that finished last).
* ``pass`` ... ``fail``: how many of those runs gave each verdict (``kit_error`` counts KIT_ERROR);
  ``other``: verdicts the kit does not define.
* ``latest_verdict``, ``latest_run_id``, ``latest_reason``, ``latest_kit_error_type``,
  ``latest_kit_error_where``, ``latest_known_deviation``: from the run that started last (ties: the greater run
  ID); the kit error's type and place are null unless that verdict is KIT_ERROR; the known deviation is the reason
  (from the deviation file the run read) of the known deviation its verdict matched, else null.
* ``modal_verdict``: the most common verdict; a tie goes to the worse verdict (:data:`VERDICTS` order, then
  others).
* ``flake_rate``: the share of runs whose verdict differs from the modal one, in [0, 1).
* ``first_seen``, ``last_seen``: the earliest and latest start of a run that has the case.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ._verdicts import SUBJECTS, VERDICTS

__all__ = ["SUBJECTS", "VERDICTS", "case_verdicts", "conformance_matrix"]

_BROKER, _CLIENT = SUBJECTS
_KIT_ERROR = "KIT_ERROR"


def _severity(verdict: Column) -> Column:
    """0 for FAIL ... 5 for PASS (:data:`VERDICTS` order), 6 for a verdict the kit does not define."""
    expression = F.lit(len(VERDICTS))
    for rank, name in reversed(list(enumerate(VERDICTS))):
        expression = F.when(verdict == name, F.lit(rank)).otherwise(expression)
    return expression


def _count_column(verdict: str) -> str:
    """``KIT_ERROR`` -> ``kit_error``: a verdict's count column."""
    return verdict.lower()


def _only_for_clients(value: Column) -> Column:
    return F.when(F.col("subject") == _CLIENT, value)


def _only_for_brokers(value: Column) -> Column:
    return F.when(F.col("subject") != _CLIENT, value)


def _only_for_kit_errors(value: Column) -> Column:
    return F.when(F.col("verdict") == _KIT_ERROR, value)


def case_verdicts(cases: DataFrame, runs: DataFrame) -> DataFrame:
    """``cases`` (the CASE table) and ``runs`` (the RUN table) -> one row per run and case: its record that
    finished last, with its run's target, version and start.

    Columns: subject (null read as ``broker``), target, target_version, client (the client under test of a
    client case, from the case or else its run; null for a broker case), case_id, clause_id, group, run_id,
    run_started, verdict, reason, kit_error_type, kit_error_where (from the ``kit_error`` JSON of a KIT_ERROR
    record; null for any other verdict), known_deviation (the reason of the known deviation the verdict matched:
    the run wrote it from its deviation file)."""
    run_info = runs.select("run_id", "target", "target_version", F.col("client").alias("run_client"),
                           F.col("started").alias("run_started"))
    last_record = Window.partitionBy("run_id", "case_id").orderBy(F.col("finished").desc(), F.col("started").desc())
    return (
        cases.select("run_id", "case_id", "clause_id", "group", "subject", "client", "verdict", "reason", "kit_error",
                     "known_deviation", "started", "finished")
        .withColumn("_n", F.row_number().over(last_record))
        .where(F.col("_n") == 1)
        .join(run_info, "run_id")
        .withColumn("subject", F.coalesce(F.col("subject"), F.lit(_BROKER)))
        .select(
            "subject", "target", "target_version",
            _only_for_clients(F.coalesce(F.col("client"), F.col("run_client"))).alias("client"),
            "case_id", "clause_id", "group", "run_id", "run_started", "verdict", "reason",
            _only_for_kit_errors(F.get_json_object("kit_error", "$.type")).alias("kit_error_type"),
            _only_for_kit_errors(F.get_json_object("kit_error", "$.where")).alias("kit_error_where"),
            "known_deviation",
        )
    )


def conformance_matrix(cases: DataFrame, runs: DataFrame) -> DataFrame:
    """``cases`` (the CASE table) and ``runs`` (the RUN table) -> one row per subject, column and case."""
    # A broker row's column is its target and version; a client row's, its client (then the target is a
    # latest value, not a key).  Windows and groupBy keep a null target_version (a url target) as a group of
    # its own, where a join would not.
    cell = ["subject", "_column_target", "_column_version", "client", "case_id"]
    per_run = (
        case_verdicts(cases, runs)
        .withColumn("_column_target", _only_for_brokers(F.col("target")))
        .withColumn("_column_version", _only_for_brokers(F.col("target_version")))
        .withColumn("_verdict_runs", F.count("*").over(Window.partitionBy(*cell, "verdict")))
    )
    counts = [F.sum(F.when(F.col("verdict") == name, 1).otherwise(0)).cast("long").alias(_count_column(name))
              for name in reversed(VERDICTS)]
    latest = F.max_by(F.struct("verdict", "run_id", "reason", "kit_error_type", "kit_error_where", "known_deviation",
                               "clause_id", "group", "target", "target_version"),
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
            "subject",
            F.col("_latest.target").alias("target"),
            F.col("_latest.target_version").alias("target_version"),
            "client",
            "case_id",
            F.col("_latest.clause_id").alias("clause_id"),
            F.col("_latest.group").alias("group"),
            F.col("_latest.verdict").alias("latest_verdict"),
            F.col("_latest.run_id").alias("latest_run_id"),
            F.col("_latest.reason").alias("latest_reason"),
            F.col("_latest.kit_error_type").alias("latest_kit_error_type"),
            F.col("_latest.kit_error_where").alias("latest_kit_error_where"),
            F.col("_latest.known_deviation").alias("latest_known_deviation"),
            F.col("_modal.verdict").alias("modal_verdict"),
            "runs",
            *[_count_column(name) for name in reversed(VERDICTS)],
            "other",
            (1 - F.col("_modal._verdict_runs") / F.col("runs")).cast("double").alias("flake_rate"),
            "first_seen",
            "last_seen",
        )
    )
