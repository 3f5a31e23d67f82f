"""The exploration's oracle on hand-made histories: a loss and a duplicate after a confirmed ack are found; a
conforming history is clean; what a conforming broker may do under faults is noted, never counted."""

from __future__ import annotations

from cck.codec import CoreMessage, SessionSendMessage, TypedProperties
from cck.conformance.explore import Anomaly, Unanswered, dropped_sends, judge
from cck.conformance.faults import WireRecord
from cck.conformance.oracles import History


def _sent(history: History, *keys: str) -> None:
    for seq, key in enumerate(keys):
        history.send("plain", key, producer="P", seq=seq)


def test_a_confirmed_send_never_received_is_lost() -> None:
    history = History()
    _sent(history, "k1", "k2")
    history.received("drain", "k1", delivery_count=1, redelivered=False)
    verdict = judge(history, drain_complete=True, desynchronised=False)
    assert verdict.kind == "finding"
    assert verdict.findings == ("1 lost: confirmed, never received (k2)",)
    assert verdict.anomalies == (Anomaly("lost", "k2"),)  # what the sequence diagram marks
    assert verdict.to_dict()["anomalies"] == [{"kind": "lost", "key": "k2"}]


def test_a_send_the_proxy_dropped_is_not_lost_by_the_broker() -> None:
    # a transaction's sends get no answer of their own: one the proxy dropped is committed as if sent
    history = History()
    _sent(history, "k1", "k2")
    verdict = judge(history, drain_complete=True, desynchronised=True, dropped=frozenset({"k1"}))
    assert verdict.findings == ("1 lost: confirmed, never received (k2)",)
    assert verdict.anomalies == (Anomaly("lost", "k2"),)
    assert any("k1; not counted: the proxy dropped every frame" in note for note in verdict.notes)


def _send_frame(key: str, action: str, direction: str = "c2s") -> WireRecord:
    message = CoreMessage(body=key.encode(), address="q", durable=True,
                          properties=TypedProperties.of({"key": key}))
    return WireRecord(1, 1, 1, direction, 1, 10, "SESS_SEND", 100, True, action,  # type: ignore[arg-type]
                      SessionSendMessage(message=message, requires_response=False))


def test_only_keys_whose_every_send_frame_was_dropped_count_as_dropped() -> None:
    records = [_send_frame("k1", "dropped"),
               _send_frame("k2", "dropped"), _send_frame("k2", "forwarded"),  # replayed after a reattach
               _send_frame("k3", "delayed"),
               _send_frame("k4", "dropped", direction="s2c")]  # not toward the broker
    assert dropped_sends(records) == {"k1"}


def test_without_a_complete_drain_nothing_is_judged_lost() -> None:
    history = History()
    _sent(history, "k1")
    verdict = judge(history, drain_complete=False, desynchronised=False)
    assert verdict.kind == "clean"
    assert any("not judged lost" in note for note in verdict.notes)


def test_a_conforming_history_is_clean() -> None:
    history = History()
    _sent(history, "k1", "k2")
    history.invoke_send("plain", "k3", producer="P", seq=2)
    history.info("plain", "send", "k3", producer="P", seq=2)  # unknown outcome, never arrived: fine
    history.received("plain", "k1", delivery_count=1, redelivered=False)
    history.ack("plain", "k1")
    history.received("drain", "k2", delivery_count=1, redelivered=False)
    history.ack("drain", "k2")
    verdict = judge(history, drain_complete=True, desynchronised=False)
    assert verdict.kind == "clean"
    assert verdict.findings == ()
    assert verdict.notes == ()


def test_a_delivery_after_a_confirmed_ack_is_a_duplicate() -> None:
    history = History()
    _sent(history, "k1")
    history.received("plain", "k1", delivery_count=1, redelivered=False)
    history.ack("plain", "k1")
    history.received("drain", "k1", delivery_count=1, redelivered=False)
    verdict = judge(history, drain_complete=True, desynchronised=False)
    assert verdict.kind == "finding"
    assert "duplicated after a confirmed acknowledgement" in verdict.findings[0]
    assert verdict.anomalies == (Anomaly("duplicated", "k1"),)
    # ... unless a dropped counted frame desynchronised the numbering: then a reattach may replay
    again = judge(history, drain_complete=True, desynchronised=True)
    assert again.kind == "clean"
    assert "desynchronised" in again.notes[0]
    assert again.anomalies == ()


def test_what_a_conforming_broker_may_do_under_faults_is_noted_not_counted() -> None:
    history = History()
    _sent(history, "k1", "k2")
    history.received("plain", "k2", delivery_count=2, redelivered=True)  # a delivery lost with a cut counts
    history.received("plain", "k1", delivery_count=1, redelivered=False)  # out of order
    history.invoke_ack("plain", "k1")
    history.info("plain", "ack", "k1")  # the ack's answer never came
    history.received("drain", "k1", delivery_count=1, redelivered=False)  # count reset by a clean close
    history.ack("drain", "k1")
    verdict = judge(history, drain_complete=True, desynchronised=False)
    assert verdict.kind == "clean"
    assert len(verdict.notes) == 2  # redelivered without the flag; the count/flag mismatch


def test_a_message_never_sent_or_rolled_back_is_unexpected() -> None:
    history = History()
    history.invoke_send("tx", "k1", producer="T", seq=0)
    history.fail("tx", "send", "k1", producer="T", seq=0)  # an explicit rollback succeeded
    history.received("drain", "k1", delivery_count=1, redelivered=False)
    history.received("drain", "ghost", delivery_count=1, redelivered=False)
    verdict = judge(history, drain_complete=True, desynchronised=False)
    assert verdict.kind == "finding"
    assert verdict.findings[0].startswith("2 unexpected:")
    assert verdict.anomalies == (Anomaly("unexpected", "k1"), Anomaly("unexpected", "ghost"))


def test_a_call_never_answered_while_sessions_reattached_is_a_finding() -> None:
    history = History()
    _sent(history, "k1")
    history.received("drain", "k1", delivery_count=1, redelivered=False)
    unanswered = (Unanswered("send", "k2"), Unanswered("commit"))
    verdict = judge(history, drain_complete=True, desynchronised=False, unanswered=unanswered)
    assert verdict.kind == "finding"
    assert verdict.findings == ("2 call(s) never answered, with the command numbering in step and no session "
                                "recreated: send k2, commit",)
    assert verdict.anomalies == (Anomaly("unanswered", "k2"),)  # the commit has no key to mark


def test_calls_in_flight_when_a_session_is_recreated_or_the_numbering_slips_are_only_noted() -> None:
    history = History()
    _sent(history, "k1")
    history.received("drain", "k1", delivery_count=1, redelivered=False)
    unanswered = (Unanswered("ack", "k1"),)
    recreated = judge(history, drain_complete=True, desynchronised=False, unanswered=unanswered, recreated=True)
    assert recreated.kind == "clean"
    assert recreated.notes == ("1 call(s) never answered (ack k1); not counted: a failover recreated a session, "
                               "which ends its calls in flight",)
    slipped = judge(history, drain_complete=True, desynchronised=True, unanswered=unanswered)
    assert slipped.kind == "clean"
    assert "desynchronised the command numbering" in slipped.notes[0]
