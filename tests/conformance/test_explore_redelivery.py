"""The oracle's transaction rules on hand-made histories (``conformance/explore/_redelivery.py``): what a
transaction that never committed received comes back (rule 1), and what a rolled-back transaction had
acknowledged comes back counted once more (rule 2); each stays quiet where a conforming broker may differ."""

from __future__ import annotations

from cck.conformance.explore import Anomaly, judge
from cck.conformance.oracles import History


def _tx_received(history: History, key: str, count: int = 1, *, acked: str = "ok") -> None:
    """The transacted session receives ``key`` and acknowledges it in its transaction (``acked``: the answer)."""
    history.received("tx", key, delivery_count=count, redelivered=count > 1)
    history.invoke("tx", "tx-ack", key)
    history.op("tx", acked, "tx-ack", key)  # type: ignore[arg-type]


def _end(history: History, what: str, outcome: str = "ok") -> None:
    history.invoke("tx", what, None)
    history.op("tx", outcome, what, None)  # type: ignore[arg-type]


def _sent(history: History, *keys: str) -> None:
    for seq, key in enumerate(keys):
        history.send("plain", key, producer="P", seq=seq)


def _drained(history: History, key: str, count: int) -> None:
    history.received("drain", key, delivery_count=count, redelivered=count > 1)
    history.ack("drain", key)


# ------------------------------------------------------------------------------------------------ rule 1


def test_a_rolled_back_message_never_delivered_again_is_lost() -> None:
    history = History()
    _sent(history, "k1")
    _tx_received(history, "k1")
    _end(history, "rollback")
    verdict = judge(history, drain_complete=True, desynchronised=False)
    assert verdict.kind == "finding"
    assert verdict.anomalies == (Anomaly("ack-rolled-back-lost", "k1"),)
    assert verdict.findings[0].startswith("ack-rolled-back-lost: k1 received by tx (delivery count 1)")


def test_a_transaction_the_session_close_ended_must_give_its_messages_back_too() -> None:
    # no rollback: the workload ended with the transaction open, and the session's close rolled it back
    history = History()
    _sent(history, "k1", "k2")
    _tx_received(history, "k1")
    _tx_received(history, "k2", acked="info")  # unanswered: in the transaction or still delivering, back either way
    _drained(history, "k1", 2)
    verdict = judge(history, drain_complete=True, desynchronised=False)
    assert verdict.anomalies == (Anomaly("ack-rolled-back-lost", "k2"),)


def test_a_rolled_back_message_delivered_again_is_clean() -> None:
    history = History()
    _sent(history, "k1", "k2")
    _tx_received(history, "k1")
    _tx_received(history, "k2")
    _end(history, "rollback")
    _tx_received(history, "k1", 2)  # to the workload again
    _end(history, "commit")
    _drained(history, "k2", 2)  # or in the drain
    verdict = judge(history, drain_complete=True, desynchronised=False)
    assert verdict.kind == "clean", verdict.findings


def test_rule_1_is_quiet_after_any_commit_attempt() -> None:
    # a commit whose outcome is unknown may have consumed it
    history = History()
    _sent(history, "k1")
    _tx_received(history, "k1")
    _end(history, "commit", "info")
    verdict = judge(history, drain_complete=True, desynchronised=False)
    assert verdict.kind == "clean", verdict.findings


def test_rule_1_is_quiet_without_a_complete_drain() -> None:
    history = History()
    _sent(history, "k1")
    _tx_received(history, "k1")
    _end(history, "rollback")
    verdict = judge(history, drain_complete=False, desynchronised=False)
    assert verdict.kind == "clean"
    assert any(
        note.startswith("k1: received by tx") and "final drain was not complete" in note for note in verdict.notes
    )


def test_rule_1_is_quiet_when_a_counted_frame_was_dropped() -> None:
    # a reattach may then replay a delivery of a message a commit had already consumed
    history = History()
    _sent(history, "k1")
    _tx_received(history, "k1")
    _end(history, "commit")
    _tx_received(history, "k1")  # the replayed old delivery
    verdict = judge(history, drain_complete=True, desynchronised=True)
    assert verdict.kind == "clean"
    assert any("came back (counted) after its transaction ended not judged" in note for note in verdict.notes)


def test_rule_1_is_quiet_when_the_count_may_have_reached_max_delivery_attempts() -> None:
    # returned with count 10 at one of these rollbacks, it went to the dead-letter address
    history = History()
    _sent(history, "k1")
    _tx_received(history, "k1", 8)
    _end(history, "rollback")
    assert judge(history, drain_complete=True, desynchronised=False).kind == "finding"  # 8 + 1 < 10
    _end(history, "rollback")
    assert judge(history, drain_complete=True, desynchronised=False).kind == "clean"  # 8 + 2
    assert (
        judge(History(list(history)[:-2]), drain_complete=True, desynchronised=False, failures=1).kind == "clean"
    )  # 8 + 1 + a failure


def test_rule_1_leaves_a_message_another_ack_consumed_to_the_checker() -> None:
    history = History()
    _sent(history, "k1")
    history.received("plain", "k1", delivery_count=1, redelivered=False)
    history.ack("plain", "k1")
    _tx_received(history, "k1", 2)  # a duplicate after a confirmed ack: the checker's finding, not rule 1's
    verdict = judge(history, drain_complete=True, desynchronised=False)
    assert Anomaly("ack-rolled-back-lost", "k1") not in verdict.anomalies
    assert Anomaly("duplicated", "k1") in verdict.anomalies


# ------------------------------------------------------------------------------------------------ rule 2


def test_a_rolled_back_acknowledged_message_back_with_the_same_count_is_found() -> None:
    history = History()
    _sent(history, "k1")
    _tx_received(history, "k1")
    _end(history, "rollback")
    _drained(history, "k1", 1)
    verdict = judge(history, drain_complete=True, desynchronised=False)
    assert verdict.anomalies == (Anomaly("count-not-incremented", "k1"),)
    assert "delivered again to drain with delivery count 1 (rollback.redelivery: at least 2)" in verdict.findings[0]


def test_rule_2_judges_each_rolled_back_delivery() -> None:
    history = History()
    _sent(history, "k1")
    _tx_received(history, "k1")
    _end(history, "rollback")
    _tx_received(history, "k1", 2)
    _end(history, "rollback")
    _drained(history, "k1", 2)  # the second rollback did not count
    verdict = judge(history, drain_complete=True, desynchronised=False)
    assert verdict.anomalies == (Anomaly("count-not-incremented", "k1"),)
    assert "with delivery count 2, acknowledged" in verdict.findings[0]


def test_rule_2_holds_when_a_cut_counted_deliveries_the_client_never_saw() -> None:
    # the count only grows with deliveries lost with a connection: at least one more is all the rule asks
    history = History()
    _sent(history, "k1")
    _tx_received(history, "k1")
    _end(history, "rollback")
    _drained(history, "k1", 3)
    verdict = judge(history, drain_complete=True, desynchronised=False, failures=2, recreated=True)
    assert verdict.kind == "clean", verdict.findings


def test_rule_2_is_quiet_where_its_premises_do_not_hold() -> None:
    def verdict(
        *, acked: str = "ok", rollback: str = "ok", commit_between: bool = False, desynchronised: bool = False
    ) -> str:
        history = History()
        _sent(history, "k1")
        _tx_received(history, "k1", acked=acked)
        if commit_between:
            _end(history, "commit", "info")
        _end(history, "rollback", rollback)
        _drained(history, "k1", 1)
        return judge(history, drain_complete=True, desynchronised=desynchronised).kind

    assert verdict() == "finding"
    # the acknowledgement unanswered: maybe still a delivery, which a rollback cancels as a clean close does
    # (Artemis decrements its count: ServerConsumerImpl.updateDeliveryCountForCanceledRef)
    assert verdict(acked="info") == "clean"
    assert verdict(rollback="info") == "clean"  # the rollback unanswered
    assert verdict(commit_between=True) == "clean"  # maybe committed: the redelivery is another matter
    assert verdict(desynchronised=True) == "clean"  # a reattach may replay the old delivery frame, count and all


def test_histories_without_a_transaction_are_left_alone() -> None:
    history = History()
    _sent(history, "k1")
    history.received("plain", "k1", delivery_count=1, redelivered=False)
    verdict = judge(history, drain_complete=True, desynchronised=False)
    assert verdict.kind == "clean"
    assert verdict.notes == ()


# ------------------------------------------------------------------------------------------------ rule 3


def _settled(history: History) -> None:
    history.ok("connection", "settled-failure", None)


def test_a_delivery_a_settled_failure_ended_comes_back_counted() -> None:
    history = History()
    _sent(history, "k1", "k2")
    history.received("plain", "k1", delivery_count=1, redelivered=False)  # left unacknowledged
    _tx_received(history, "k2", acked="info")  # in the transaction or still a delivery: kept either way
    _settled(history)
    _drained(history, "k1", 1)
    _drained(history, "k2", 1)
    verdict = judge(history, drain_complete=True, desynchronised=False)
    assert verdict.anomalies == (Anomaly("failed-close-count", "k1"), Anomaly("failed-close-count", "k2"))
    assert "(failover.redelivery: a failed close keeps the count, so at least 2)" in verdict.findings[0]


def test_rule_3_holds_with_counts_raised_by_deliveries_the_client_never_saw() -> None:
    history = History()
    _sent(history, "k1")
    history.received("plain", "k1", delivery_count=1, redelivered=False)
    _settled(history)
    history.received("plain", "k1", delivery_count=3, redelivered=True)
    _drained(history, "k1", 4)
    verdict = judge(history, drain_complete=True, desynchronised=False, failures=1, recreated=True)
    assert verdict.kind == "clean", verdict.findings


def test_rule_3_is_quiet_where_its_premises_do_not_hold() -> None:
    def verdict(*, between: str = "", desynchronised: bool = False, settled: bool = True) -> str:
        history = History()
        _sent(history, "k1")
        if between == "ack":
            history.received("plain", "k1", delivery_count=1, redelivered=False)
            history.ack("plain", "k1")  # consumed: a later delivery is the duplicate check's
        else:
            _tx_received(history, "k1", acked="info")
            if between:
                _end(history, between, "info")  # a rollback cancels cleanly (Artemis decrements); a commit consumes
        if settled:
            _settled(history)
        history.received("drain", "k1", delivery_count=1, redelivered=False)
        return judge(history, drain_complete=True, desynchronised=desynchronised).kind

    assert verdict() == "finding"
    assert verdict(settled=False) == "clean"  # a failure not known to be one the broker handled first
    assert verdict(between="rollback") == "clean"
    assert verdict(between="commit") == "clean"
    assert verdict(desynchronised=True) == "clean"
    assert (
        Anomaly("failed-close-count", "k1")
        not in judge(_ack_then_settled(), drain_complete=True, desynchronised=False).anomalies
    )


def _ack_then_settled() -> History:
    history = History()
    _sent(history, "k1")
    history.received("plain", "k1", delivery_count=1, redelivered=False)
    history.ack("plain", "k1")
    _settled(history)
    history.received("drain", "k1", delivery_count=1, redelivered=False)
    return history


def test_a_clean_close_after_a_settled_failure_is_still_judged_from_the_failure() -> None:
    # redelivered (unseen, count 2) to the recreated consumer, whose clean close decrements it again: the drain
    # sees 2, which the rule accepts; a broker whose failed close decremented would show 1
    history = History()
    _sent(history, "k1")
    history.received("plain", "k1", delivery_count=1, redelivered=False)
    _settled(history)
    _drained(history, "k1", 2)
    assert judge(history, drain_complete=True, desynchronised=False).kind == "clean"
