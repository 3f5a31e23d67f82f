from __future__ import annotations

import random
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from cck.conformance.oracles._history import Op
from cck.conformance.oracles._history_check import check
from cck.reports import audit_findings, delivery_audit

from .conftest import Table

AUDIT = ("run_id string, target string, case_id string, label string, ops long, sends long, confirmed long, "
         "failed long, indeterminate long, receipts long, received_keys long, acks_confirmed long, recovered long, "
         "unreceived_undrained long, lost long, unexpected long, duplicated long, ack_lost long, "
         "order_violation long, redelivery_mismatch long, final_drain_complete boolean, duplicates_allowed boolean, "
         "ok boolean, oracle_ok boolean")
COUNTS = ["ops", "sends", "confirmed", "failed", "indeterminate", "receipts", "received_keys", "acks_confirmed",
          "recovered", "unreceived_undrained"]
#: audit column -> the checker's result field
FINDINGS = {"lost": "lost", "unexpected": "unexpected", "duplicated": "duplicated", "ack_lost": "ack_lost",
            "order_violation": "order_violations", "redelivery_mismatch": "redelivery_mismatches"}


def _ops(case: str, label: str | None, *ops: tuple[Any, ...]) -> list[dict[str, Any]]:
    names = ("process", "type", "f", "value", "producer", "seq", "redelivered", "delivery_count")
    rows = []
    for index, op in enumerate(ops):
        row = dict(zip(names, op, strict=False))
        rows.append({"run_id": "r1", "case_id": case, "label": label, "index": index, "time_ns": index, **row})
    return rows


HISTORY_A = _ops(
    "a", None,
    ("p1", "invoke", "send", "k1", "P", 0), ("p1", "ok", "send", None),  # value-less completion: k1
    ("p1", "invoke", "send", "k2", "P", 1), ("p1", "ok", "send", "k2"),
    ("p1", "invoke", "send", "k3", "P", 2), ("p1", "fail", "send", "k3"),
    ("p1", "invoke", "send", "k4", "P", 3), ("p1", "info", "send", "k4"),
    ("p1", "invoke", "send", "k5", "P", 4), ("p1", "ok", "send", "k5"),  # confirmed, never received: lost
    ("c1", "ok", "receive", "k2", "P", 1, None, 1),
    ("c1", "ok", "receive", "k1", "P", 0, None, 1),  # after seq 1: order violation
    ("c1", "ok", "receive", "k3", "P", 2, None, 1),  # its send failed: unexpected
    ("c1", "ok", "receive", "k4", None, None, None, 1),  # indeterminate and received: recovered; seq 3 from the send
    ("c1", "ok", "receive", "k9"),  # never sent: unexpected
    ("c1", "ok", "receive", "k2", "P", 1, False, 1),  # not a redelivery: duplicated
    ("c1", "invoke", "ack", "k1"), ("c1", "ok", "ack", None),
    ("c1", "ok", "receive", "k1", "P", 0, True, 2),  # after its ack: duplicated and ack lost
    ("c1", "ok", "receive", "k4", None, None, True, 1),  # flagged but count 1: redelivery mismatch
)
HISTORY_B = _ops(
    "b", "x",
    ("p", "invoke", "send", "m1"), ("p", "ok", "send", "m1"),  # no final drain: unreceived, not lost
    ("p", "invoke", "send", "m2"), ("p", "ok", "send", "m2"),
    ("c", "ok", "receive", "m2"), ("c", "ok", "receive", "m2"),  # a duplicate the case allows
)
RESULT_B = {"run_id": "r1", "case_id": "b", "label": "x", "ok": True,
            "result": '{"final_drain_complete": false, "duplicates_allowed": true}'}


def test_audit_counts_every_finding(spark: SparkSession, table: Table) -> None:
    history = table("history", *HISTORY_A, *HISTORY_B)
    expected = spark.createDataFrame([
        ("r1", "reference", "a", "", 20, 5, 3, 1, 1, 8, 5, 1, 1, 0, 1, 2, 2, 1, 1, 1, True, False, False, None),
        ("r1", "reference", "b", "x", 6, 2, 2, 0, 0, 2, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, False, True, True, True),
    ], AUDIT)
    assertDataFrameEqual(delivery_audit(history, table("history_result", RESULT_B)), expected)


def test_findings_name_key_reason_and_op(spark: SparkSession, table: Table) -> None:
    findings = audit_findings(table("history", *HISTORY_A), table("history_result"))
    expected = spark.createDataFrame([
        ("lost", None, "k5", "p1", 9),
        ("order_violation", None, "k1", "c1", 11),
        ("unexpected", "send_failed", "k3", "c1", 12),
        ("unexpected", "never_sent", "k9", "c1", 14),
        ("duplicated", "not_redelivered", "k2", "c1", 15),
        ("duplicated", "after_ack", "k1", "c1", 18),
        ("ack_lost", None, "k1", "c1", 18),
        ("redelivery_mismatch", "flag_without_count", "k4", "c1", 19),
    ], "finding string, reason string, key string, process string, index long")
    assertDataFrameEqual(findings.select("finding", "reason", "key", "process", "index"), expected)


def _random_history(rng: random.Random, case: str) -> list[dict[str, Any]]:
    """A history with every kind of anomaly likely: retried, failed, unknown and lost sends; duplicated,
    redelivered, out-of-order and unexpected receipts; acks that do not stick."""
    ops: list[tuple[Any, ...]] = []
    sent: list[str] = []
    for n in range(rng.randint(5, 25)):
        key, producer = f"{case}-{n}", rng.choice(["P1", "P2"])
        for _ in range(rng.choice([1, 1, 2])):  # a retry reuses the key
            ops.append(("p-" + producer, "invoke", "send", key, producer, n))
            outcome = rng.choice(["ok", "ok", "ok", "fail", "info", None])
            if outcome is not None:
                ops.append(("p-" + producer, outcome, "send", rng.choice([key, None])))
        sent.append(key)
    received: list[str] = []
    for _ in range(rng.randint(0, 30)):
        key = rng.choice([*sent, f"{case}-ghost"])
        count = rng.choice([None, 1, 1, 2, 3])
        flag = rng.choice([None, False, True])
        producer, seq = (key.split("-")[0], None) if rng.random() < 0.2 else (None, None)
        ops.append((rng.choice(["c1", "c2"]), "ok", "receive", key, producer, seq, flag, count))
        received.append(key)
        if rng.random() < 0.3:
            consumer = rng.choice(["c1", "c2"])
            ops.append((consumer, "invoke", "ack", key))
            ops.append((consumer, "ok", "ack", rng.choice([key, None])))
    return _ops(case, None, *ops)


def _oracle(rows: list[dict[str, Any]]) -> dict[str, int]:
    ops = [Op(r["process"], r["type"], r["f"], r.get("value"), r["time_ns"], r.get("producer"), r.get("seq"),
              r.get("redelivered"), r.get("delivery_count")) for r in rows]
    result = check(ops).to_dict()
    counts = {name: result[name] for name in COUNTS}
    counts.update({column: result[name]["count"] for column, name in FINDINGS.items()})
    return counts


def test_audit_agrees_with_the_history_checker_on_random_histories(table: Table) -> None:
    rng = random.Random(20250131)
    histories = {f"h{n}": _random_history(rng, f"h{n}") for n in range(40)}
    rows = [row for history in histories.values() for row in history]
    audit = {row["case_id"]: row.asDict() for row in delivery_audit(table("history", *rows),
                                                                     table("history_result")).collect()}
    mismatches = {}
    for case, history in histories.items():
        expected = _oracle(history)
        got = {name: audit[case][name] for name in expected}
        if got != expected:
            mismatches[case] = {k: (got[k], expected[k]) for k in expected if got[k] != expected[k]}
    assert not mismatches, mismatches


def test_findings_agree_with_the_counts_on_random_histories(table: Table) -> None:
    rng = random.Random(20261122)
    rows = [row for n in range(30) for row in _random_history(rng, f"h{n}")]
    history, results = table("history", *rows), table("history_result")
    counts = {row["case_id"]: row.asDict() for row in delivery_audit(history, results).collect()}
    found: dict[str, dict[str, int]] = {case: dict.fromkeys(FINDINGS, 0) for case in counts}
    for row in audit_findings(history, results).collect():
        found[row["case_id"]][row["finding"]] += 1
    assert found == {case: {name: audit[name] for name in FINDINGS} for case, audit in counts.items()}


def test_two_histories_with_one_hash_fail_the_job(table: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    """The 64-bit history hash is checked: were two histories to share one, the job stops and names it."""
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    import cck.reports._audit as audit_module

    monkeypatch.setattr(audit_module, "_hid", lambda: F.lit(7).cast("long"))
    history = table("history", *HISTORY_A, *HISTORY_B)
    with pytest.raises(PySparkException, match="two histories have the same 64-bit hash 7"):
        delivery_audit(history, table("history_result")).collect()
