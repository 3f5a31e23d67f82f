"""Explorations (``cck explore --evidence-dir``, docs/exploration.md) aggregated like suite runs: pure transforms.

The tables are the ingest's (:data:`reports._schema.EXPLORE_RECORDS`): ``exploration`` (a ``summary.json`` each),
``explore_example`` (``examples.jsonl``: a row per run) and ``explore_history`` (``histories.jsonl``: every run's
history, a row per operation with its run's number).

* :func:`exploration_summary`: one row per exploration: what it explored (target, its arguments, seed, budget),
  how many runs it made (``runs``, as its summary says, and ``runs_read``, the rows read), runs per outcome and per
  phase, whether it found something and confirmed it, the first finding's run and time, its length
  (``duration_s``: the last run's end since the start) and pace (``runs_per_minute``), the exposure its generated
  runs reached (``most_unconfirmed``, ``most_durable_sends``, ``most_recent_durable_sends``; ``exposed_runs``,
  ``durable_exposed_runs``: the generated runs with any, null when none has exposure figures) and, for a finding,
  its one-line summary (the summary's ``finding``, else the last finding run's), the minimal example, the replay
  command and the pytest case.
* :func:`exploration_histories`, :func:`exploration_history_results`: the runs' histories as the delivery audit's
  input (:func:`reports._audit.delivery_audit`): a history per run, ``run_id`` the exploration's ID and
  ``case_id`` the run's number; the checker's verdict and flags as the run recorded them.  A run the checker did
  not judge (indeterminate, a kit error, or evidence older than ``examples.jsonl``'s ``checker``) counts as a run
  whose final drain was not complete: its unreceived sends are not judged lost.
* :func:`exploration_audit`: one row per exploration: the audit's counts over its runs' histories, how many runs
  it fails (and the first of them), how many the kit's checker failed during the run, and how many they disagree
  on.  Exploration's oracle counts only a sound subset of these (lost, unexpected, duplicated after a confirmed
  acknowledgement, unanswered calls): under faults a conforming broker reorders and miscounts redeliveries, so a
  run the audit fails is a finding only when ``explore_example``'s ``kind`` says so.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ._audit import FINDINGS, delivery_audit
from ._explore_page import OUTCOMES, PHASES

__all__ = ["FAILING_RUNS_LISTED", "OUTCOMES", "PHASES", "exploration_audit", "exploration_histories",
           "exploration_history_results", "exploration_summary"]

#: How many of the runs the audit fails an exploration's row names.
FAILING_RUNS_LISTED = 10

_ID = "exploration_id"


def _count_if(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0)).cast("long")


def _column(name: str) -> str:
    return name.replace("-", "_")


def exploration_summary(explorations: DataFrame, examples: DataFrame) -> DataFrame:
    """``exploration`` and ``explore_example`` rows -> one row per exploration (an exploration without run rows
    too: ``runs_read`` 0)."""
    kind, phase = F.col("kind"), F.col("phase")
    found, generated = kind == "finding", phase == "explore"
    per_run = examples.groupBy(_ID).agg(
        F.count("*").alias("runs_read"),
        *[_count_if(kind == name).alias(f"{_column(name)}_runs") for name in OUTCOMES],
        _count_if(~kind.isin(*OUTCOMES)).alias("other_runs"),
        *[_count_if(phase == name).alias(f"{name}_runs") for name in PHASES],
        F.min(F.when(found, F.struct("run", "at_s"))).alias("_first"),
        F.max_by("summary", F.when(found, F.col("run"))).alias("_last_finding"),
        F.max("at_s").alias("duration_s"),
        F.max(F.when(generated, F.col("unconfirmed"))).alias("_unconfirmed"),
        F.max(F.when(generated, F.col("durable_sends"))).alias("_durable_sends"),
        F.max(F.when(generated, F.col("recent_durable_sends"))).alias("_recent_durable_sends"),
        # null, not 0, when no generated run has exposure figures (evidence older than them)
        F.when(F.count(F.when(generated, F.col("unconfirmed"))) > 0,
               _count_if(generated & (F.col("unconfirmed") > 0))).alias("exposed_runs"),
        F.when(F.count(F.when(generated, F.col("durable_sends"))) > 0,
               _count_if(generated & (F.col("durable_sends") > 0))).alias("durable_exposed_runs"),
    )
    counts = ["runs_read", *[f"{_column(name)}_runs" for name in OUTCOMES], "other_runs",
              *[f"{name}_runs" for name in PHASES]]
    joined = explorations.join(per_run, _ID, "left")
    duration = F.col("duration_s")
    return joined.select(
        _ID, "target", "target_version", "target_args", "seed", "budget_s", "max_examples", "runs",
        *[F.coalesce(F.col(name), F.lit(0)).cast("long").alias(name) for name in counts],
        "exposed_runs", "durable_exposed_runs", "found", "confirmed",
        F.col("_first.run").alias("first_finding_run"),
        F.col("_first.at_s").alias("first_finding_at_s"),
        duration.alias("duration_s"),
        F.when(duration > 0, F.col("runs_read") * 60.0 / duration).alias("runs_per_minute"),
        F.coalesce(F.col("most_unconfirmed"), F.col("_unconfirmed")).alias("most_unconfirmed"),
        F.coalesce(F.col("most_durable_sends"), F.col("_durable_sends")).alias("most_durable_sends"),
        F.coalesce(F.col("most_recent_durable_sends"), F.col("_recent_durable_sends"))
        .alias("most_recent_durable_sends"),
        F.when(F.col("found"), F.coalesce(F.col("finding"), F.col("_last_finding"))).alias("finding"),
        "example", "replay", "regression_case", "finished",
    )


def _history() -> list[Column | str]:
    """The audit's history columns of an exploration run's rows: run ID the exploration, case ID the run."""
    return [F.col(_ID).alias("run_id"), "target", F.col("run").cast("string").alias("case_id"),
            F.lit(None).cast("string").alias("label")]


def exploration_histories(histories: DataFrame) -> DataFrame:
    """``explore_history`` rows -> HISTORY rows as the delivery audit reads them (a history per run)."""
    return histories.select(*_history(), "index", "process", "type", "f", "value", "time_ns", "producer",
                            "seq", "redelivered", "delivery_count", "node")


def exploration_history_results(examples: DataFrame) -> DataFrame:
    """``explore_example`` rows -> HISTORY_RESULT rows: the checker's verdict (``ok``) and, in ``result``, whether
    the final drain was complete (false for a run it did not judge) and whether duplicates were allowed."""
    result = F.to_json(F.struct(F.coalesce(F.col("final_drain_complete"), F.lit(False)).alias("final_drain_complete"),
                                F.col("duplicates_allowed")))
    return examples.select(*_history(), F.col("checker_ok").alias("ok"), result.alias("result"))


def exploration_audit(histories: DataFrame, examples: DataFrame) -> DataFrame:
    """``explore_history`` and ``explore_example`` rows -> one row per exploration with history rows: the delivery
    audit of its runs' histories summed, ``audit_failing`` (runs the audit fails) and the first
    :data:`FAILING_RUNS_LISTED` of them (``failing_runs``), ``checker_failing`` (runs the kit's checker failed
    during the run) and ``disagreeing`` (runs the two judged differently)."""
    audit = delivery_audit(exploration_histories(histories), exploration_history_results(examples))
    ok, checker = F.col("ok"), F.col("oracle_ok")
    run = F.col("case_id").cast("int")
    return audit.groupBy(F.col("run_id").alias(_ID), "target").agg(
        F.count("*").alias("histories"),
        F.sum("ops").cast("long").alias("ops"),
        *[F.sum(name).cast("long").alias(name) for name in FINDINGS],
        F.sum("unreceived_undrained").cast("long").alias("unreceived_undrained"),
        _count_if(~ok).alias("audit_failing"),
        F.slice(F.sort_array(F.collect_list(F.when(~ok, run))), 1, FAILING_RUNS_LISTED).alias("failing_runs"),
        _count_if(checker == F.lit(False)).alias("checker_failing"),
        _count_if(checker.isNotNull() & (checker != ok)).alias("disagreeing"),
    )
