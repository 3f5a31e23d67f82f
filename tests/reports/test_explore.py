"""The Exploration page's transforms on tiny frames: each exploration's summary (outcomes, phases, the first
finding, exposure, pace, the finding's line) and its runs' histories through the delivery audit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructField, StructType
from pyspark.testing import assertDataFrameEqual

from cck.conformance.oracles._history import Op
from cck.conformance.oracles._history_check import check
from cck.reports._audit import delivery_audit
from cck.reports._explore import (
    exploration_audit,
    exploration_histories,
    exploration_history_results,
    exploration_summary,
)
from cck.reports._schema import explore_struct

from .conftest import ts

SUMMARY = ("exploration_id string, target string, target_version string, target_args string, seed long, "
           "budget_s double, max_examples int, runs int, runs_read long, clean_runs long, finding_runs long, "
           "indeterminate_runs long, kit_error_runs long, other_runs long, explore_runs long, shrink_runs long, "
           "retry_runs long, confirm_runs long, exposed_runs long, durable_exposed_runs long, found boolean, "
           "confirmed boolean, first_finding_run int, first_finding_at_s double, duration_s double, "
           "runs_per_minute double, most_unconfirmed int, most_durable_sends int, most_recent_durable_sends int, "
           "finding string, example string, "
           "replay string, regression_case string, finished timestamp")
AUDIT = ("exploration_id string, target string, histories long, ops long, lost long, unexpected long, "
         "duplicated long, ack_lost long, order_violation long, redelivery_mismatch long, unreceived_undrained long, "
         "audit_failing long, failing_runs array<int>, checker_failing long, disagreeing long")
REPLAY = "cck explore --target artemis --artemis-version 2.44.0 --replay /ev/x/minimal/example.json --tries 20"


def _frame(spark: SparkSession, kind: str, *rows: Mapping[str, Any]) -> DataFrame:
    """A frame of an exploration table's stored schema, every column nullable (as read back from Parquet)."""
    struct = StructType([StructField(f.name, f.dataType, True) for f in explore_struct(kind).fields])
    return spark.createDataFrame([tuple(row.get(name) for name in struct.fieldNames()) for row in rows], struct)


def _exploration(ident: str, **fields: Any) -> dict[str, Any]:
    return {"exploration_id": ident, "target": "artemis", "target_version": "2.44.0",
            "target_args": "--target artemis --artemis-version 2.44.0", "seed": 7, "budget_s": 600.0,
            "max_examples": 1000, "runs": 6, "found": False, "confirmed": False, **fields}


def _run(ident: str, run: int, phase: str, kind: str, at_s: float, **fields: Any) -> dict[str, Any]:
    return {"exploration_id": ident, "target": "artemis", "run": run, "phase": phase, "kind": kind, "at_s": at_s,
            "elapsed_s": 0.1, "summary": f"{kind}: run {run}", **fields}


EXAMPLES = [
    _run("a", 1, "explore", "clean", 1.0, unconfirmed=0, durable_sends=0),
    _run("a", 2, "explore", "clean", 2.0, unconfirmed=12, durable_sends=3, recent_durable_sends=2),
    _run("a", 3, "explore", "finding", 3.5, unconfirmed=4, durable_sends=0),
    # not generated: not the exposure's
    _run("a", 4, "shrink", "finding", 4.0, unconfirmed=40, durable_sends=30, recent_durable_sends=9),
    _run("a", 5, "retry", "indeterminate", 5.0),
    _run("a", 6, "confirm", "finding", 6.0),
    _run("b", 1, "explore", "kit-error", 30.0),
    _run("b", 2, "explore", "weird", 45.0),
]


def test_an_exploration_is_summarised_from_its_summary_and_its_runs(spark: SparkSession) -> None:
    explorations = _frame(spark, "exploration",
                          # evidence older than the summary's finding and exposure: both from the runs
                          _exploration("a", found=True, confirmed=True, example="send(q0 x1 durable async)",
                                       replay=REPLAY, finished=ts(1)),
                          # runs without exposure figures: how many were exposed is unknown, not 0
                          _exploration("b", runs=2, most_unconfirmed=9, most_durable_sends=1,
                                       most_recent_durable_sends=1),
                          _exploration("c", runs=0, finding="ignored: nothing was found"))
    expected = spark.createDataFrame([
        ("a", "artemis", "2.44.0", "--target artemis --artemis-version 2.44.0", 7, 600.0, 1000, 6,
         6, 2, 3, 1, 0, 0, 3, 1, 1, 1, 2, 1, True, True, 3, 3.5, 6.0, 60.0, 12, 3, 2, "finding: run 6",
         "send(q0 x1 durable async)", REPLAY, None, ts(1)),
        ("b", "artemis", "2.44.0", "--target artemis --artemis-version 2.44.0", 7, 600.0, 1000, 2,
         2, 0, 0, 0, 1, 1, 2, 0, 0, 0, None, None, False, False, None, None, 45.0, 60 * 2 / 45.0, 9, 1, 1, None,
         None, None, None, None),
        ("c", "artemis", "2.44.0", "--target artemis --artemis-version 2.44.0", 7, 600.0, 1000, 0,
         0, 0, 0, 0, 0, 0, 0, 0, 0, 0, None, None, False, False, None, None, None, None, None, None, None,
         None, None, None, None, None),
    ], SUMMARY)
    assertDataFrameEqual(exploration_summary(explorations, _frame(spark, "explore_example", *EXAMPLES)), expected)


def test_the_summarys_finding_line_wins_over_the_runs(spark: SparkSession) -> None:
    explorations = _frame(spark, "exploration", _exploration("a", found=True, finding="finding: 1 lost (k1)"))
    [row] = exploration_summary(explorations, _frame(spark, "explore_example", *EXAMPLES[:6])).collect()
    assert row["finding"] == "finding: 1 lost (k1)"


def _ops(ident: str, run: int, *ops: tuple[Any, ...]) -> list[dict[str, Any]]:
    names = ("process", "type", "f", "value", "producer", "seq", "redelivered", "delivery_count")
    return [{"exploration_id": ident, "target": "reference", "run": run, "index": index, "time_ns": index,
             **dict(zip(names, op, strict=False))} for index, op in enumerate(ops)]


def _checked(ident: str, run: int, kind: str, checker: bool | None, drained: bool | None = True) -> dict[str, Any]:
    return {**_run(ident, run, "explore", kind, float(run)), "target": "reference", "checker_ok": checker,
            "final_drain_complete": drained if checker is not None else None,
            "duplicates_allowed": True if checker is not None else None}


HISTORIES = [
    *_ops("a", 1, ("p", "invoke", "send", "k1"), ("p", "ok", "send", None), ("d", "ok", "receive", "k1", None, None,
                                                                            False, 1)),
    *_ops("a", 2, ("p", "invoke", "send", "k2"), ("p", "ok", "send", "k2")),  # drained, never received: lost
    *_ops("a", 3, ("p", "invoke", "send", "k3"), ("p", "ok", "send", "k3")),  # not judged: not lost, undrained
    *_ops("a", 4, ("d", "ok", "receive", "k9", None, None, False, 1)),  # never sent; the checker said ok
    *_ops("a", 5, ("p", "invoke", "send", "k5"), ("p", "ok", "send", "k5"),
          ("d", "ok", "receive", "k5", None, None, False, 1), ("d", "ok", "receive", "k5", None, None, False, 1)),
    *_ops("b", 1, ("p", "invoke", "send", "k1"), ("p", "info", "send", "k1")),
]
RUNS = [_checked("a", 1, "clean", True), _checked("a", 2, "finding", False), _checked("a", 3, "indeterminate", None),
        _checked("a", 4, "clean", True),  # a checker that missed the never-sent receipt: a disagreement
        _checked("a", 5, "clean", True),  # a duplicate the exploration's checker allows
        _checked("a", 6, "clean", True),  # an empty history: nothing to audit
        _checked("b", 1, "clean", True, drained=False)]


def test_every_runs_history_goes_through_the_delivery_audit(spark: SparkSession) -> None:
    audit = exploration_audit(_frame(spark, "explore_history", *HISTORIES), _frame(spark, "explore_example", *RUNS))
    expected = spark.createDataFrame([
        ("a", "reference", 5, 12, 1, 1, 1, 0, 0, 0, 1, 2, [2, 4], 1, 1),
        ("b", "reference", 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, [], 0, 0),
    ], AUDIT)
    assertDataFrameEqual(audit, expected)


def test_the_audit_of_exploration_histories_agrees_with_the_kits_checker(spark: SparkSession) -> None:
    """Each run's history read back as the kit's ops: the checker's counts are the audit's, run by run."""
    frame = exploration_histories(_frame(spark, "explore_history", *HISTORIES))
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in frame.orderBy("run_id", "case_id", "index").collect():
        rows.setdefault((row["run_id"], row["case_id"]), []).append(row.asDict())
    assert sorted(rows) == [("a", "1"), ("a", "2"), ("a", "3"), ("a", "4"), ("a", "5"), ("b", "1")]
    audited = {(r["run_id"], r["case_id"]): r.asDict() for r in delivery_audit(
        frame, exploration_history_results(_frame(spark, "explore_example", *RUNS))).collect()}
    for key, ops in rows.items():
        drained = {("a", "3"): False, ("b", "1"): False}.get(key, True)
        result = check([Op(o["process"], o["type"], o["f"], o["value"], o["time_ns"], o["producer"], o["seq"],
                           o["redelivered"], o["delivery_count"]) for o in ops],
                       final_drain_complete=drained, allow_duplicates=True).to_dict()
        assert {n: audited[key][n] for n in ("lost", "unexpected", "unreceived_undrained", "ok")} == {
            "lost": result["lost"]["count"], "unexpected": result["unexpected"]["count"],
            "unreceived_undrained": result["unreceived_undrained"], "ok": result["ok"]}, key
