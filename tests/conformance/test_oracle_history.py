"""The history checker: Jepsen-style histories, every anomaly kind, serialisation and linear cost."""

from __future__ import annotations

import gc
import itertools
import json
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cck.conformance.oracles import History, HistoryError, HistoryResult, Op, OpType, check


def clocked() -> History:
    """A history with a deterministic clock: 1 µs per operation."""
    ticks = itertools.count(1_000_000, 1000)
    return History(clock=lambda: next(ticks))


def only(result: HistoryResult, *kinds: str) -> dict[str, int]:
    """The non-zero anomaly counts, for 'exactly this was reported' assertions."""
    counts = {name: getattr(result, name).count for name in
              ("lost", "duplicated", "unexpected", "order_violations", "redelivery_mismatches", "ack_lost")}
    return {name: count for name, count in counts.items() if count}


def correct_run() -> History:
    h = clocked()
    for seq in range(1, 4):
        h.send("p1", f"m{seq}", "P1", seq)
    for seq in range(1, 4):
        h.received("c1", f"m{seq}", 1, False)
        h.ack("c1", f"m{seq}")
    return h


def test_correct_run_is_ok() -> None:
    result = check(correct_run())
    assert result.ok
    assert only(result) == {}
    assert (result.sends, result.confirmed, result.receipts, result.received_keys, result.acks_confirmed) == \
        (3, 3, 3, 3, 3)
    assert "OK: no anomaly" in result.explanation


# -- lost -------------------------------------------------------------------------------------------------


def test_confirmed_send_never_received_is_lost() -> None:
    h = correct_run()
    h.send("p1", "m4", "P1", 4)
    result = check(h)
    assert not result.ok
    assert only(result) == {"lost": 1}
    lost = result.lost.examples[0]
    assert (lost.key, lost.producer, lost.seq, lost.process) == ("m4", "P1", 4, "p1")
    assert "1 lost" in result.explanation
    assert "'m4'" in result.explanation


def test_without_final_drain_nothing_is_lost() -> None:
    h = correct_run()
    h.send("p1", "m4", "P1", 4)
    result = check(h, final_drain_complete=False)
    assert result.ok
    assert result.unreceived_undrained == 1
    assert "no final drain" in result.explanation


def test_completion_after_receipt_still_counts() -> None:
    # The broker may deliver before the producer sees its confirmation.
    h = clocked()
    h.invoke_send("p1", "m1", "P1", 1)
    h.received("c1", "m1", 1)
    h.ok("p1", "send", "m1")
    assert check(h).ok


@pytest.mark.parametrize("outcome", ["info", "fail"])
def test_unconfirmed_sends_that_never_arrive_are_not_lost(outcome: OpType) -> None:
    h = correct_run()
    h.send("p1", "m4", "P1", 4, outcome=outcome)
    h.invoke_send("p1", "m5", "P1", 5)  # the producer died before any answer
    result = check(h)
    assert result.ok
    assert (result.indeterminate, result.failed) == ((2, 0) if outcome == "info" else (1, 1))


# -- unexpected -----------------------------------------------------------------------------------------


def test_received_but_never_sent_is_unexpected() -> None:
    h = correct_run()
    h.received("c1", "ghost", 1)
    result = check(h)
    assert only(result) == {"unexpected": 1}
    assert result.unexpected.examples[0].reason == "never_sent"


def test_received_after_a_definite_failure_is_unexpected() -> None:
    h = correct_run()
    h.send("p1", "m4", "P1", 4, outcome="fail")
    h.received("c1", "m4", 1)
    result = check(h)
    assert only(result) == {"unexpected": 1}
    assert result.unexpected.examples[0].reason == "send_failed"


def test_indeterminate_send_may_arrive_once() -> None:
    h = correct_run()
    h.send("p1", "m4", "P1", 4, outcome="info")
    h.received("c1", "m4", 1)
    result = check(h)
    assert result.ok
    assert result.recovered == 1
    assert "recovered" in result.explanation
    h.received("c2", "m4", 1)  # ... but not twice
    assert only(check(h)) == {"duplicated": 1}


def test_retried_send_that_once_succeeded_counts_as_confirmed() -> None:
    h = clocked()
    h.send("p1", "m1", "P1", 1, outcome="fail")
    h.send("p1", "m1", "P1", 1, outcome="ok")
    result = check(h)
    assert only(result) == {"lost": 1}
    h.received("c1", "m1", 1)
    assert check(h).ok


# -- duplicates, redeliveries, acks ------------------------------------------------------------------------


@pytest.mark.parametrize(("count", "flag"), [(2, True), (2, None), (None, True)],
                         ids=["count and flag", "count only", "flag only"])
def test_marked_redelivery_of_an_unacked_message_is_legitimate(count: int | None, flag: bool | None) -> None:
    h = clocked()
    h.send("p1", "m1", "P1", 1)
    h.received("c1", "m1", 1 if count else None, False if flag is not None else None)
    h.received("c2", "m1", count, flag)
    h.ack("c2", "m1")
    assert check(h).ok


@pytest.mark.parametrize(("count", "flag"), [(1, False), (None, None), (1, None)])
def test_unmarked_second_receipt_is_a_duplicate(count: int | None, flag: bool | None) -> None:
    h = clocked()
    h.send("p1", "m1", "P1", 1)
    h.received("c1", "m1", 1, False)
    h.received("c1", "m1", count, flag)
    result = check(h)
    assert only(result) == {"duplicated": 1}
    dup = result.duplicated.examples[0]
    assert (dup.key, dup.reason, dup.first_process) == ("m1", "not_redelivered", "c1")


def test_receipt_after_confirmed_ack_is_a_duplicate_and_a_lost_ack() -> None:
    h = clocked()
    h.send("p1", "m1", "P1", 1)
    h.received("c1", "m1", 1, False)
    h.ack("c1", "m1")
    h.received("c2", "m1", 2, True)  # marked as redelivery, but the ack was confirmed
    result = check(h)
    assert only(result) == {"duplicated": 1, "ack_lost": 1}
    assert result.duplicated.examples[0].reason == "after_ack"
    assert result.ack_lost.examples[0].ack_process == "c1"
    assert not check(h, allow_duplicates=True).ok  # a lost ack fails even under at-least-once


@pytest.mark.parametrize("outcome", ["info", "fail"])
def test_redelivery_after_an_unconfirmed_ack_is_legitimate(outcome: OpType) -> None:
    h = clocked()
    h.send("p1", "m1", "P1", 1)
    h.received("c1", "m1", 1, False)
    h.ack("c1", "m1", outcome=outcome)
    h.received("c2", "m1", 2, True)
    assert check(h).ok


def test_duplicates_allowed_reports_but_passes() -> None:
    h = clocked()
    h.send("p1", "m1", "P1", 1)
    h.received("c1", "m1", 1, False)
    h.received("c1", "m1", 1, False)
    h.ack("c1", "m1")
    strict, lenient = check(h), check(h, allow_duplicates=True)
    assert not strict.ok
    assert lenient.ok
    assert lenient.duplicated.count == 1
    assert "OK with findings" in lenient.explanation
    assert "at-least-once" in lenient.explanation


# -- redelivery accounting ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("receipts", "reason"), [
    pytest.param([(2, True)], "first_delivery_count", id="first delivery with count 2"),
    pytest.param([(None, True)], "first_flagged_redelivered", id="first delivery flagged"),
    pytest.param([(1, False), (1, True)], "flag_without_count", id="flag but count 1"),
    pytest.param([(1, False), (3, False)], "count_without_flag", id="count 3 but flag false"),
    pytest.param([(1, False), (3, True), (3, True)], "count_not_increased", id="count stuck at 3"),
    pytest.param([(1, False), (3, True), (2, True)], "count_not_increased", id="count went down"),
])
def test_redelivery_accounting(receipts: list[tuple[int | None, bool | None]], reason: str) -> None:
    h = clocked()
    h.send("p1", "m1", "P1", 1)
    for count, flag in receipts:
        h.received("c1", "m1", count, flag)
    result = check(h)
    assert only(result) == {"redelivery_mismatches": 1}
    assert result.redelivery_mismatches.examples[0].reason == reason


# -- per-producer order ---------------------------------------------------------------------------------------


def test_out_of_order_first_deliveries_are_reported_as_pairs() -> None:
    h = clocked()
    for seq in (1, 2, 3):
        h.send("p1", f"m{seq}", "P1", seq)
    for seq in (1, 3, 2):
        h.received("c1", f"m{seq}", 1, False)
    result = check(h)
    assert only(result) == {"order_violations": 1}
    v = result.order_violations.examples[0]
    assert (v.consumer, v.producer, v.earlier_key, v.earlier_seq, v.later_key, v.later_seq) == \
        ("c1", "P1", "m3", 3, "m2", 2)


def test_order_ignores_redeliveries_and_separates_consumers_and_producers() -> None:
    h = clocked()
    for producer in ("P1", "P2"):
        for seq in (1, 2, 3):
            h.send("p-" + producer, f"{producer}-{seq}", producer, seq)
    # c1 gets P1's 1 and 3, c2 gets P1's 2 later: each consumer in order on its own.
    h.received("c1", "P1-1", 1, False)
    h.received("c1", "P1-3", 1, False)
    h.received("c2", "P1-2", 1, False)
    # P2 interleaved with P1 on c1: only P2's own order matters.
    h.received("c1", "P2-1", 1, False)
    h.received("c1", "P2-2", 1, False)
    # c1 crashes before acking P1-1; it comes back to c1 later, out of order but a redelivery.
    h.received("c1", "P1-1", 2, True)
    h.received("c1", "P2-3", 1, False)
    assert check(h).ok


def test_order_uses_producer_and_seq_from_the_receipt_when_given() -> None:
    h = clocked()
    h.send("p1", "a", None, None)
    h.send("p1", "b", None, None)
    h.received("c1", "b", 1, False, producer="P1", seq=2)
    h.received("c1", "a", 1, False, producer="P1", seq=1)
    assert only(check(h)) == {"order_violations": 1}


# -- capping, serialisation, malformed input ---------------------------------------------------------------------


def test_examples_are_capped_counts_are_exact() -> None:
    h = clocked()
    for n in range(50):
        h.send("p1", f"m{n}", "P1", n)
    result = check(h, max_examples=5)
    assert result.lost.count == 50
    assert len(result.lost.examples) == 5
    data = json.loads(json.dumps(result.to_dict()))
    assert data["lost"] == {"count": 50, "truncated": True, "examples": data["lost"]["examples"]}
    assert data["lost"]["examples"][0]["key"] == "m0"
    assert data["ok"] is False


def test_op_round_trips_through_json() -> None:
    h = correct_run()
    h.received("c1", "m1", 2, True, node="live-1")
    rows = json.loads(json.dumps(h.to_dicts()))
    assert History.from_dicts(rows).to_dicts() == rows
    assert list(History.from_dicts(rows)) == list(h)
    assert "seq" not in Op("c", "ok", "receive", "k", 1).to_dict()


@pytest.mark.parametrize(("row", "words"), [
    ({"process": "p", "type": "done", "f": "send", "value": "k", "time_ns": 1}, "type"),
    ({"process": "p", "type": "ok", "f": "send", "value": "k"}, "time_ns"),
    ({"process": "p", "type": "ok", "f": "send", "value": "k", "time_ns": "1"}, "time_ns"),
    ({"process": "p", "type": "ok", "f": "send", "value": "k", "time_ns": 1, "seq": True}, "seq"),
    ({"process": "p", "type": "ok", "f": "send", "value": "k", "time_ns": 1, "redelivered": 1}, "redelivered"),
    ({"process": None, "type": "ok", "f": "send", "value": "k", "time_ns": 1}, "process"),
    ({"process": "p", "type": "ok", "f": "send", "value": "k", "time_ns": 1, "colour": "red"}, "colour"),
])
def test_malformed_op_is_named(row: dict[str, object], words: str) -> None:
    with pytest.raises(HistoryError, match=f"history op 0: .*{words}"):
        History.from_dicts([row])


def test_completion_without_value_completes_the_pending_invoke() -> None:
    h = clocked()
    h.invoke_send("p1", "m1", "P1", 1)
    h.ok("p1", "send")
    h.received("c1", "m1", 1, False)
    h.invoke_ack("c1", "m1")
    h.ok("c1", "ack")
    h.received("c2", "m1", 2, True)
    assert only(check(h)) == {"duplicated": 1, "ack_lost": 1}


@pytest.mark.parametrize(("build", "words"), [
    (lambda h: h.ok("p1", "send"), "no value and no pending invoke"),
    (lambda h: h.ok("p1", "send", "m9"), "has no invoke"),
    (lambda h: h.received("c1", None), "must carry the message key"),
    (lambda h: h.ack("c1", "never-received"), "before any receipt"),
])
def test_malformed_history_names_the_op(build: Callable[[History], object], words: str) -> None:
    h = correct_run()
    build(h)
    with pytest.raises(HistoryError, match=f"history op {len(h) - 1}: "):
        check(h)
    with pytest.raises(HistoryError, match=words):
        check(h)


def test_other_operations_are_carried_not_judged() -> None:
    h = correct_run()
    h.invoke("c1", "commit", None)
    h.ok("c1", "commit", None)
    h.invoke("c1", "receive", None)  # a poll that got nothing
    h.fail("c1", "receive", None)
    assert check(h).ok


# -- random correct runs, with one injected fault --------------------------------------------------------------


@st.composite
def correct_histories(draw: st.DrawFn) -> tuple[History, list[int], list[int]]:
    """A run that follows the rules: sends in some interleaving, each message to one consumer in send
    order, some unacked messages redelivered (marked), failed sends never delivered.

    Returns the history, the indexes of first receipts of confirmed sends (removing one = a loss),
    and the indexes of all first receipts (repeating one unmarked right after = a duplicate).
    """
    producers = draw(st.integers(1, 3))
    per_producer = draw(st.lists(st.integers(0, 12), min_size=producers, max_size=producers))
    order = [p for p, n in enumerate(per_producer) for _ in range(n)]
    order = draw(st.permutations(order))
    h = clocked()
    seqs = [0] * producers
    messages: list[tuple[str, OpType]] = []  # (key, outcome) in send order
    send_outcomes: list[OpType] = ["ok", "ok", "ok", "info", "fail"]
    ack_outcomes: list[OpType] = ["ok", "ok", "info"]
    for p in order:
        seqs[p] += 1
        key = f"P{p}-{seqs[p]}"
        outcome = draw(st.sampled_from(send_outcomes))
        h.send(f"proc{p}", key, f"P{p}", seqs[p], outcome=outcome)
        messages.append((key, outcome))
    lost_candidates, first_receipts = [], []
    redeliver: list[str] = []
    for key, outcome in messages:
        if outcome == "fail" or (outcome == "info" and draw(st.booleans())):
            continue
        consumer = draw(st.sampled_from(["c1", "c2"]))
        if outcome == "ok":
            lost_candidates.append(len(h))
        first_receipts.append(len(h))
        h.received(consumer, key, 1, False)
        if draw(st.booleans()):
            h.ack(consumer, key, outcome=draw(st.sampled_from(ack_outcomes)))
        else:
            redeliver.append(key)
    for key in redeliver:  # the consumers "crashed": unacked messages come again, marked
        for count in range(2, 2 + draw(st.integers(1, 2))):
            h.received("c3", key, count, True)
        h.ack("c3", key)
    return h, lost_candidates, first_receipts


@settings(max_examples=200, deadline=None)
@given(correct_histories())
def test_random_correct_run_is_ok(case: tuple[History, list[int], list[int]]) -> None:
    history, _, _ = case
    result = check(history)
    assert result.ok, result.explanation
    assert only(result) == {}


@settings(max_examples=200, deadline=None)
@given(correct_histories(), st.data())
def test_injected_loss_is_exactly_reported(case: tuple[History, list[int], list[int]], data: st.DataObject) -> None:
    history, candidates, _ = case
    if not candidates:
        return
    drop = data.draw(st.sampled_from(candidates))
    key = history[drop].value
    # The loss takes every receipt and ack of that message with it.
    kept = [op for op in history if not (op.value == key and op.f in ("receive", "ack"))]
    result = check(kept)
    assert only(result) == {"lost": 1}
    assert result.lost.examples[0].key == key


@settings(max_examples=200, deadline=None)
@given(correct_histories(), st.data())
def test_injected_duplicate_is_exactly_reported(case: tuple[History, list[int], list[int]],
                                                data: st.DataObject) -> None:
    history, _, receipts = case
    if not receipts:
        return
    at = data.draw(st.sampled_from(receipts))
    ops = list(history)
    ops.insert(at + 1, ops[at])  # the same delivery again, unmarked, before any ack
    result = check(ops)
    assert only(result) == {"duplicated": 1}
    assert result.duplicated.examples[0].key == ops[at].value


# -- linear cost -------------------------------------------------------------------------------------------------


def big_history(messages: int) -> list[Op]:
    """Four ops per message (send invoke/ok, receive, ack ok) over 10 producers and 4 consumers."""
    ops: list[Op] = []
    append = ops.append
    for n in range(messages):
        key, producer, t = f"m{n}", f"P{n % 10}", n * 10
        append(Op("proc", "invoke", "send", key, t, producer, n // 10))
        append(Op("proc", "ok", "send", key, t + 1, producer, n // 10))
        append(Op(f"c{n % 4}", "ok", "receive", key, t + 2, None, None, False, 1))
        append(Op(f"c{n % 4}", "ok", "ack", key, t + 3))
    return ops


def test_a_million_ops_check_in_linear_time() -> None:
    small, large = big_history(25_000), big_history(250_000)  # 100k and 1M ops

    def timed(ops: list[Op]) -> float:
        # CPU time of this thread, best of three: a busy machine (a parallel tox env, a broker) stretches
        # wall time, not the work done; the minimum is the least disturbed run.
        best = float("inf")
        for _ in range(3):
            gc.collect()
            start = time.thread_time()
            result = check(ops)
            best = min(best, time.thread_time() - start)
            assert result.ok, result.explanation
            assert result.ops == len(ops)
        return best

    ratio = timed(large) / timed(small)
    # 10x the ops: a linear checker takes about 10x (a little more as dicts outgrow the caches); a
    # quadratic one would take ~100x.  The bound is generous on purpose: this catches complexity, not speed.
    assert ratio < 25, f"1M ops took {ratio:.1f}x the CPU time of 100k ops"
