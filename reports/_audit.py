"""The delivery audit: the history checker's definitions (``conformance/oracles/_history_check.py``) as
DataFrame operations, so the audit runs over millions of HISTORY rows on any Spark cluster.

A **history** is the rows of one (run, target, case, label).  Ops are ordered by ``index``.  Message keys
are ``value``; a ``send`` or ``ack`` completion without a value completes its process's latest invoke of
the same ``f``.  Per key:

* **send outcome**: among keys with a send ``invoke``: *confirmed* if any completion is ``ok``; else
  *indeterminate* if one is ``info`` or invokes outnumber completions; else *failed*.
* a **receipt** is a ``receive`` ``ok``; the first receipt (lowest index) of a key is its delivery.
* **lost**: confirmed and never received, when the history ended with a complete drain (the
  ``final_drain_complete`` of the checker's HISTORY_RESULT row; true when there is none); without a
  drain such keys are only counted (``unreceived_undrained``).  **recovered**: indeterminate and received.
* **unexpected**: received but never invoked (``never_sent``), or failed with no invoke left open
  (``send_failed``).
* a later receipt of a key is a **duplicate** when the key's ack was confirmed before it (``after_ack``,
  also counted as **ack_lost**), or when neither the redelivered flag nor a delivery count above
  ``max(1, highest count before)`` marks it as a redelivery (``not_redelivered``).
* **redelivery mismatches**: a first receipt with a delivery count other than 1
  (``first_delivery_count``) or flagged redelivered (``first_flagged_redelivered``); a redelivery whose
  count is below 2 (``flag_without_count``), not above the highest before (``count_not_increased``), or
  that says ``redelivered=false`` with a count (``count_without_flag``).
* **order violation**: a first delivery (not flagged, count at most 1) to a consumer whose producer
  sequence number (from the receipt, else from the first send invoke, when that came before it) is not
  above every sequence number of that producer that consumer received first before it.
* **ok**: none of the above, duplicates excepted when the checker allowed them (``duplicates_allowed``).

Differences from the checker: it raises on malformed histories (a completion with no invoke, an ack
before any receipt); the audit counts what it can and does not judge such rows.

**The plan.**  Everything is judged within one history, so the ops are shuffled once, by a 64-bit hash of
the history's four columns (``hid``), and every later step runs inside those partitions with no further
exchange: a window over (process, f) resolves the value-less completions; one window over the key, in
index order, gives each receipt what came before it (receipts, highest delivery count, a confirmed ack,
the first send invoke); one aggregate per key; one window over (consumer, producer) for the order of
first deliveries; one aggregate per history.  Spark accepts a partitioning by ``hid`` for a window or an
aggregate keyed by ``hid`` and more columns, so the plan has one large exchange instead of the dozen of
a join per definition (see docs/benchmarks.md).  The four history columns travel only in a small table
of distinct histories, which is also where two histories with the same hash would be caught: the job
then fails with an error naming them, instead of merging them.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

__all__ = ["FINDINGS", "audit_findings", "delivery_audit"]

#: Finding kinds, in the order the checker explains them.
FINDINGS = ("lost", "unexpected", "duplicated", "ack_lost", "order_violation", "redelivery_mismatch")

_HISTORY = ["run_id", "target", "case_id", "label"]
_BEFORE = (Window.unboundedPreceding, -1)
_HID = "hid"


def _count_if(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0)).cast("long")


def _with_label(frame: DataFrame) -> DataFrame:
    return frame.withColumn("label", F.coalesce(F.col("label"), F.lit("")))


def _hid() -> Column:
    return F.xxhash64(*_HISTORY)


def _histories(history: DataFrame) -> DataFrame:
    """One row per history: ``hid`` and the four columns; a hash shared by two histories fails the job."""
    names = _with_label(history).select(*_HISTORY).distinct().withColumn(_HID, _hid())
    sharing = F.count("*").over(Window.partitionBy(_HID))
    clash = F.concat(F.lit("delivery audit: two histories have the same 64-bit hash "), F.col(_HID).cast("string"),
                     F.lit(", one of them is "), F.concat_ws("/", *_HISTORY))
    return names.withColumn(_HID, F.when(sharing == 1, F.col(_HID)).otherwise(F.raise_error(clash)))


def _rows(history: DataFrame) -> DataFrame:
    """Every op with ``key`` resolved and, on receipts, the per-receipt findings and the order columns."""
    ops = (
        _with_label(history)
        .select(_hid().alias(_HID), "index", "process", "type", "f", "value", "producer", "seq", "redelivered",
                "delivery_count")
        .repartition(_HID)
    )
    pending = Window.partitionBy(_HID, "process", "f").orderBy("index").rowsBetween(*_BEFORE)
    last_invoke = F.last(F.when(F.col("type") == "invoke", F.col("value")), ignorenulls=True).over(pending)
    completes = F.col("f").isin("send", "ack") & (F.col("type") != "invoke")
    keyed = ops.withColumn("key", F.when(completes & F.col("value").isNull(), last_invoke)
                           .otherwise(F.col("value")))

    known = F.col("key").isNotNull()
    receipt = (F.col("f") == "receive") & (F.col("type") == "ok") & known
    ack_ok = (F.col("f") == "ack") & (F.col("type") == "ok") & known
    send_invoke = (F.col("f") == "send") & (F.col("type") == "invoke") & known
    count, flag = F.col("delivery_count"), F.coalesce(F.col("redelivered"), F.lit(False))
    before = Window.partitionBy(_HID, "key").orderBy("index").rowsBetween(*_BEFORE)
    marked = keyed.select(
        "*",
        receipt.alias("receipt"),
        ack_ok.alias("ack_ok"),
        send_invoke.alias("send_invoke"),
        (F.coalesce(F.sum(F.when(receipt, 1)).over(before), F.lit(0)) == 0).alias("_none_before"),
        F.coalesce(F.max(F.when(receipt, F.coalesce(count, F.lit(0)))).over(before), F.lit(0)).alias("previous"),
        F.coalesce(F.max(ack_ok).over(before), F.lit(False)).alias("after_ack"),
        F.first(F.when(send_invoke, F.struct("producer", "seq")), ignorenulls=True).over(before).alias("_invoked"),
    )
    first = F.col("receipt") & F.col("_none_before")
    after_ack = F.col("after_ack")
    redelivery = flag | (count.isNotNull() & (count > F.greatest(F.col("previous"), F.lit(1))))
    duplicate = F.when(F.col("receipt") & ~first, F.when(after_ack, "after_ack").when(~redelivery, "not_redelivered"))
    mismatch = (F.when(~F.col("receipt"), None)
                .when(first, F.when(count.isNotNull() & (count != 1), "first_delivery_count")
                      .when(flag, "first_flagged_redelivered"))
                .when(after_ack | ~redelivery, None)
                .when(count.isNotNull() & (count < 2), "flag_without_count")
                .when(count.isNotNull() & (count <= F.col("previous")), "count_not_increased")
                .when((F.col("redelivered") == F.lit(False)) & count.isNotNull(), "count_without_flag"))
    ordered = first & ~(flag | (count.isNotNull() & (count > 1)))
    return marked.select(
        _HID, "index", "process", "type", "f", "key", "receipt", "ack_ok", "send_invoke",
        first.alias("first"),
        duplicate.alias("duplicate"),
        (F.col("receipt") & ~first & after_ack).alias("ack_lost"),
        mismatch.alias("mismatch"),
        F.when(ordered, F.coalesce(F.col("producer"), F.col("_invoked.producer"))).alias("o_producer"),
        F.when(ordered, F.coalesce(F.col("seq"), F.col("_invoked.seq"))).alias("o_seq"),
    )


def _keys(rows: DataFrame) -> DataFrame:
    """One row per (history, key): counts, the send outcome, the first receipt and its order verdict.

    The value-less rows no invoke resolves (key null) form one row per history too, for the op counts."""
    send = (F.col("f") == "send") & F.col("key").isNotNull()
    invoke = send & (F.col("type") == "invoke")
    rank = F.when(F.col("type") == "ok", 2).when(F.col("type") == "info", 1).when(F.col("type") == "fail", 0)
    grouped = rows.groupBy(_HID, "key").agg(
        F.count("*").alias("ops"),
        _count_if(F.col("receipt")).alias("receipts"),
        _count_if(F.col("ack_ok")).alias("acks_confirmed"),
        _count_if(invoke).alias("_invokes"),
        _count_if(send & (F.col("type") != "invoke")).alias("_completions"),
        F.coalesce(F.max(F.when(send, rank)), F.lit(0)).alias("_rank"),
        F.min_by(F.struct("index", "process"), F.when(send & (F.col("type") == "ok"), F.col("index")))
        .alias("_confirm"),
        F.min_by(F.struct("index", "process", "o_producer", "o_seq"), F.when(F.col("first"), F.col("index")))
        .alias("_first"),
        _count_if(F.col("duplicate").isNotNull()).alias("duplicated"),
        _count_if(F.col("ack_lost")).alias("ack_lost"),
        _count_if(F.col("mismatch").isNotNull()).alias("redelivery_mismatch"),
    )
    open_invokes = F.col("_invokes") - F.col("_completions")
    outcome = (F.when(F.col("_invokes") == 0, None)
               .when(F.col("_rank") == 2, "confirmed")
               .when((F.col("_rank") == 1) | (open_invokes > 0), "indeterminate")
               .otherwise("failed"))
    keyed = grouped.select(
        _HID, "key", "ops", "receipts", "acks_confirmed", "duplicated", "ack_lost", "redelivery_mismatch",
        outcome.alias("outcome"),
        F.col("_confirm.index").alias("confirm_index"), F.col("_confirm.process").alias("confirm_process"),
        (F.col("receipts") > 0).alias("received"),
        F.col("_first.index").alias("receipt_index"), F.col("_first.process").alias("receipt_process"),
        F.col("_first.o_producer").alias("o_producer"), F.col("_first.o_seq").alias("o_seq"),
    )
    in_order = F.col("o_producer").isNotNull() & F.col("o_seq").isNotNull()
    slot = Window.partitionBy(_HID, "receipt_process", "o_producer").orderBy("receipt_index").rowsBetween(*_BEFORE)
    highest = F.max(F.when(in_order, F.col("o_seq"))).over(slot)
    unexpected = (F.when(~F.col("received"), None)
                  .when(F.col("outcome").isNull(), "never_sent")
                  .when(F.col("outcome") == "failed", "send_failed"))
    return keyed.select(
        "*",
        (in_order & F.coalesce(F.col("o_seq") <= highest, F.lit(False))).alias("order_violation"),
        unexpected.alias("unexpected"),
        ((F.col("outcome") == "confirmed") & ~F.col("received")).alias("unreceived"),
    )


def _drain_flags(results: DataFrame) -> DataFrame:
    """Per history: the checker's final_drain_complete and duplicates_allowed (from its result JSON)."""
    def flag(name: str) -> Column:
        return F.get_json_object(F.col("result"), f"$.{name}").cast("boolean")

    return (
        _with_label(results)
        .groupBy(*_HISTORY)
        .agg(F.first(flag("final_drain_complete"), ignorenulls=True).alias("final_drain_complete"),
             F.first(flag("duplicates_allowed"), ignorenulls=True).alias("duplicates_allowed"),
             F.first("ok", ignorenulls=True).alias("oracle_ok"))
    )


def audit_findings(history: DataFrame, history_results: DataFrame) -> DataFrame:
    """HISTORY and HISTORY_RESULT rows -> one row per finding: history, finding, reason, key, process, index."""
    rows = _rows(history)
    keys = _keys(rows)
    drains = _drain_flags(history_results).withColumn(_HID, _hid())
    drained = F.coalesce(F.col("final_drain_complete"), F.lit(True))
    none = F.lit(None).cast("string")
    lost = (keys.join(F.broadcast(drains.select(_HID, "final_drain_complete")), _HID, "left")
            .where(F.col("unreceived") & drained)
            .select(_HID, F.lit("lost").alias("finding"), none.alias("reason"), "key",
                    F.col("confirm_process").alias("process"), F.col("confirm_index").alias("index")))

    def per_key(finding: str, condition: Column, reason: Column) -> DataFrame:
        return keys.where(condition).select(_HID, F.lit(finding).alias("finding"), reason.alias("reason"), "key",
                                            F.col("receipt_process").alias("process"),
                                            F.col("receipt_index").alias("index"))

    def per_receipt(finding: str, condition: Column, reason: Column) -> DataFrame:
        return rows.where(condition).select(_HID, F.lit(finding).alias("finding"), reason.alias("reason"), "key",
                                            "process", "index")

    findings = (
        lost.unionByName(per_key("unexpected", F.col("unexpected").isNotNull(), F.col("unexpected")))
        .unionByName(per_receipt("duplicated", F.col("duplicate").isNotNull(), F.col("duplicate")))
        .unionByName(per_receipt("ack_lost", F.col("ack_lost"), none))
        .unionByName(per_key("order_violation", F.col("order_violation"), none))
        .unionByName(per_receipt("redelivery_mismatch", F.col("mismatch").isNotNull(), F.col("mismatch")))
    )
    return (findings.join(F.broadcast(_histories(history)), _HID)
            .select(*_HISTORY, "finding", "reason", "key", "process", "index"))


def delivery_audit(history: DataFrame, history_results: DataFrame) -> DataFrame:
    """HISTORY and HISTORY_RESULT rows -> one row per history with the checker's counts and verdict.

    ``oracle_ok`` is the checker's own verdict from its HISTORY_RESULT row (null without one), so the
    site shows where the two disagree."""
    keys = _keys(_rows(history))
    outcome = F.col("outcome")
    per_history = keys.groupBy(_HID).agg(
        F.sum("ops").alias("ops"),
        _count_if(outcome.isNotNull()).alias("sends"),
        *[_count_if(outcome == o).alias(o) for o in ("confirmed", "failed", "indeterminate")],
        F.sum("receipts").alias("receipts"),
        _count_if(F.col("received")).alias("received_keys"),
        F.sum("acks_confirmed").alias("acks_confirmed"),
        _count_if((outcome == "indeterminate") & F.col("received")).alias("recovered"),
        _count_if(F.col("unreceived")).alias("_unreceived"),
        _count_if(F.col("unexpected").isNotNull()).alias("unexpected"),
        F.sum("duplicated").alias("duplicated"),
        F.sum("ack_lost").alias("ack_lost"),
        _count_if(F.col("order_violation")).alias("order_violation"),
        F.sum("redelivery_mismatch").alias("redelivery_mismatch"),
    )
    drains = _drain_flags(history_results)
    audit = (per_history.join(F.broadcast(_histories(history)), _HID)
             .join(F.broadcast(drains), _HISTORY, "left"))
    drained = F.coalesce(F.col("final_drain_complete"), F.lit(True))
    allowed = F.coalesce(F.col("duplicates_allowed"), F.lit(False))
    columns = ("ops", "sends", "confirmed", "failed", "indeterminate", "receipts", "received_keys", "acks_confirmed",
               "recovered", "unreceived_undrained", *FINDINGS)
    counts = {name: F.col(name).cast("long") for name in columns if name not in ("unreceived_undrained", "lost")}
    counts["unreceived_undrained"] = F.when(drained, F.lit(0)).otherwise(F.col("_unreceived")).cast("long")
    counts["lost"] = F.when(drained, F.col("_unreceived")).otherwise(F.lit(0)).cast("long")
    failing = [counts[name] > 0 for name in FINDINGS if name != "duplicated"]
    bad = failing[0]
    for condition in failing[1:]:
        bad = bad | condition
    return audit.select(
        *_HISTORY,
        *[counts[name].alias(name) for name in columns],
        drained.alias("final_drain_complete"),
        allowed.alias("duplicates_allowed"),
        (~(bad | ((counts["duplicated"] > 0) & ~allowed))).alias("ok"),
        "oracle_ok",
    )
