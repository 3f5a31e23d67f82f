"""XA in exploration: the XA oracle on hand-made histories and XA logs (each rule finds its violation, is quiet on
a conforming run, and only notes what faults leave uncertain), what a restart obliges (``across_restart``), the
XA operation's model, and the XA side's calls against a fake session (any subsequence is a valid call sequence)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cck.codec import Xid
from cck.conformance.explore._model import ExampleError, Workload, Xa
from cck.conformance.explore._xa_oracle import (
    XAER_NOTA,
    XaCall,
    across_restart,
    branch_states,
    judge_xa,
)
from cck.conformance.explore._xa_runner import XaSide
from cck.conformance.oracles import History
from cck.reference.client import CallTimeout, XAError


def _judge(
    history: History, calls: list[XaCall], *, drain_complete: bool = True, desynchronised: bool = False
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    verdict = judge_xa(list(history), calls, drain_complete=drain_complete, desynchronised=desynchronised)
    return verdict.findings, verdict.notes


def _prepared(branch: str = "x0.1", at: int = 0) -> list[XaCall]:
    return [XaCall("start", branch, at=at), XaCall("end", branch, at=at), XaCall("prepare", branch, at=at, code=0)]


# ------------------------------------------------------------------------------------------------ forget


def test_forget_of_an_unknown_xid_answered_ok_is_a_finding() -> None:
    findings, notes = _judge(History(), [XaCall("forget", "x0.never1")])
    assert notes == ("XA calls: forget x0.never1",)  # the evidence: the calls and their answers
    assert len(findings) == 1
    assert "answered OK, not XAER_NOTA" in findings[0]
    assert "never started" in findings[0]
    assert "dtx.completed-forgotten" in findings[0]


def test_forget_of_a_completed_xid_answered_with_another_code_is_a_finding() -> None:
    calls = [*_prepared(), XaCall("commit", "x0.1"), XaCall("forget", "x0.1", "error", code=-6)]
    findings, _ = _judge(History(), calls)
    assert len(findings) == 1
    assert "XA code -6" in findings[0]
    assert "completed" in findings[0]


def test_forget_answered_xaer_nota_is_clean_and_an_unanswered_one_is_noted() -> None:
    assert _judge(History(), [XaCall("forget", "x0.never1", "error", code=XAER_NOTA)]) == ((), ())
    findings, notes = _judge(History(), [XaCall("forget", "x0.never1", "unknown")])
    assert findings == ()
    assert any("no answer" in n for n in notes)


def test_forget_of_an_xid_the_broker_may_know_is_not_judged() -> None:
    # prepared, or its commit unanswered: the broker may know it, so OK is not judged
    calls = [*_prepared(), XaCall("forget", "x0.1")]
    assert _judge(History(), calls)[0] == ()
    calls = [*_prepared(), XaCall("commit", "x0.1", "unknown"), XaCall("forget", "x0.1")]
    assert _judge(History(), calls)[0] == ()


# ------------------------------------------------------------------------------------------------ recover


def test_recover_must_list_exactly_the_prepared_unresolved_branches() -> None:
    base = [*_prepared("x0.1"), *_prepared("x1.1"), XaCall("rollback", "x1.1"), XaCall("start", "x2.1")]
    assert _judge(History(), [*base, XaCall("recover", listed=("x0.1",))]) == ((), ())
    findings, _ = _judge(History(), [*base, XaCall("recover", listed=())])
    assert findings == ("recover left out prepared, unresolved branch(es) x0.1 (dtx.prepared-survives)",)
    findings, _ = _judge(History(), [*base, XaCall("recover", listed=("x0.1", "x1.1", "x2.1"))])
    assert findings == ("recover listed branch(es) not prepared: x1.1, x2.1 (dtx.prepared-survives)",)


def test_recover_is_judged_against_the_state_at_its_own_moment() -> None:
    # prepared at the recover, committed after it
    calls = [*_prepared(), XaCall("recover", listed=("x0.1",)), XaCall("commit", "x0.1")]
    assert _judge(History(), calls) == ((), ())


def test_recover_ignores_branches_an_unanswered_call_left_unknown() -> None:
    calls = [
        *_prepared("x0.1"),
        XaCall("commit", "x0.1", "unknown"),
        XaCall("start", "x1.1"),
        XaCall("prepare", "x1.1", "unknown"),
    ]
    for listed in ((), ("x0.1",), ("x1.1",), ("x0.1", "x1.1")):
        assert _judge(History(), [*calls, XaCall("recover", listed=listed)])[0] == ()
    findings, notes = _judge(History(), [*calls, XaCall("recover", "", "unknown")])
    assert findings == ()
    assert any("recover: no answer" in n for n in notes)


# ------------------------------------------------------------------------------------------------ messages


def _prepared_with_work(history: History) -> list[XaCall]:
    """x0.1 receives k1 (acknowledged, answered) and sends s1, then is prepared and never completed."""
    history.send("plain", "k1", producer="P", seq=0)
    history.received("xa", "k1", delivery_count=1, redelivered=False)
    calls = [XaCall("start", "x0.1"), XaCall("ack", "x0.1", key="k1", at=len(history))]
    history.invoke_send("xa", "s1", producer="xa-q1", seq=0)
    calls.append(XaCall("send", "x0.1", key="s1", at=len(history)))
    calls += [XaCall("end", "x0.1", at=len(history)), XaCall("prepare", "x0.1", at=len(history), code=0)]
    history.info("xa", "send", "s1", producer="xa-q1", seq=0)
    return calls


def test_a_prepared_branch_holds_its_sends_and_its_acknowledged_messages() -> None:
    history = History()
    calls = _prepared_with_work(history)
    assert _judge(history, calls) == ((), ())
    history.received("drain", "s1", delivery_count=1, redelivered=False)
    history.received("drain", "k1", delivery_count=2, redelivered=True)
    findings, _ = _judge(history, calls)
    assert findings == (
        "1 send(s) of x0.1, prepared and never completed, delivered: s1 (dtx.prepared-survives)",
        "1 message(s) acknowledged in x0.1, prepared and never completed, delivered again: k1 (dtx.prepared-acks-held)",
    )


def test_only_the_drain_is_trusted_for_held_messages_and_desynchronised_runs_are_noted() -> None:
    history = History()
    calls = _prepared_with_work(history)
    history.received("plain", "k1", delivery_count=2, redelivered=True)  # a workload buffer: not judged
    assert _judge(history, calls)[0] == ()
    history.received("drain", "k1", delivery_count=2, redelivered=True)
    findings, notes = _judge(history, calls, desynchronised=True)
    assert findings == ()
    assert any("not counted: a dropped counted frame" in n for n in notes)


def test_a_committed_branch_acknowledgements_are_effective() -> None:
    history = History()
    calls = _prepared_with_work(history)
    calls.append(XaCall("commit", "x0.1", at=len(history)))
    assert _judge(history, calls) == ((), ())
    history.received("drain", "k1", delivery_count=2, redelivered=True)
    findings, _ = _judge(history, calls)
    assert findings == (
        "1 message(s) acknowledged in x0.1, committed (commit), delivered again: k1 (dtx.one-phase-durable)",
    )


def test_a_rolled_back_branch_puts_its_acknowledged_messages_back() -> None:
    history = History()
    calls = _prepared_with_work(history)
    calls.append(XaCall("rollback", "x0.1", at=len(history)))
    findings, _ = _judge(history, calls)
    assert findings == (
        "1 message(s) acknowledged in x0.1, rolled back, never delivered again: k1 (dtx.rollback-after-restart)",
    )
    findings, notes = _judge(history, calls, drain_complete=False)
    assert findings == ()
    assert any("the final drain was not complete" in n for n in notes)
    history.received("drain", "k1", delivery_count=2, redelivered=True)
    assert _judge(history, calls) == ((), ())


def test_an_unanswered_completion_leaves_the_branch_unjudged() -> None:
    history = History()
    calls = _prepared_with_work(history)
    calls.append(XaCall("rollback", "x0.1", "unknown", at=len(history)))
    history.received("drain", "s1", delivery_count=1, redelivered=False)
    findings, notes = _judge(history, calls)
    assert findings == ()
    assert any("x0.1: an XA call got no answer" in n for n in notes)


# ------------------------------------------------------------------------------------------------ restart


def test_branch_states_a_restart_aborts_active_and_ended_branches_and_keeps_prepared_ones() -> None:
    calls = [XaCall("start", "a"), XaCall("start", "b"), XaCall("end", "b"), *_prepared("c"), XaCall("restart")]
    assert branch_states(calls, 4) == {"a": "active", "b": "ended", "c": "active"}
    assert branch_states(calls) == {"a": "done", "b": "done", "c": "prepared"}


def test_across_restart_says_what_survives() -> None:
    calls = [
        # p: prepared, sent s1 (durable) and acknowledged k1: survives, holds both
        XaCall("start", "p"),
        XaCall("send", "p", key="s1"),
        XaCall("ack", "p", key="k1"),
        XaCall("end", "p"),
        XaCall("prepare", "p", code=0),
        # o: committed in one phase: its durable send persists, its non-durable one may be lost, k2 stays consumed
        XaCall("start", "o"),
        XaCall("send", "o", key="s2"),
        XaCall("send", "o", key="s3", durable=False),
        XaCall("ack", "o", key="k2"),
        XaCall("end", "o"),
        XaCall("commit-one-phase", "o"),
        # u: its prepare unanswered: unknown, in no set; a: left active, aborted
        XaCall("start", "u"),
        XaCall("send", "u", key="s4"),
        XaCall("end", "u"),
        XaCall("prepare", "u", "unknown"),
        XaCall("start", "a"),
        XaCall("send", "a", key="s5", answer="unknown"),
        XaCall("restart"),
        # after the restart: not what the restart obliges
        XaCall("commit", "p"),
    ]
    restart = calls.index(XaCall("restart"))
    expected = across_restart(calls, restart)
    assert expected.survivors == {"p"}
    assert expected.aborted == {"a"}
    assert expected.held == {"k1"}
    assert expected.held_sends == {"s1"}
    assert expected.persisted == {"s2"}
    assert expected.consumed == {"k2"}
    # a restart before o's commit answered: o is aborted, nothing of it persists
    early = across_restart(calls, calls.index(XaCall("commit-one-phase", "o")))
    assert early.persisted == set()
    assert early.aborted == {"o"}


# ------------------------------------------------------------------------------------------------ the model


def test_the_xa_operation_round_trips_and_checks_its_fields() -> None:
    op = Xa("commit-one-phase", xid=2, queue=1, count=3, durable=False)
    workload = Workload.from_dict({"config": {"window": 1024, "connection_ttl_ms": 2000}, "operations": [op.to_dict()]})
    assert workload.operations == (op,)
    assert workload.xa
    assert not workload.transacted
    assert op.describe() == "xa-commit-one-phase(x2)"
    with pytest.raises(ExampleError):
        Xa("heuristic")
    with pytest.raises(ExampleError):
        Xa("start", xid=3)


# ------------------------------------------------------------------------------------------------ the XA side


class _FakeSession:
    """Answers XA calls as a conforming broker would for a run without faults; ``fail`` maps a call to an error."""

    def __init__(self, fail: dict[str, BaseException] | None = None) -> None:
        self.calls: list[str] = []
        self.fail = fail or {}
        self.prepared: list[Xid] = []

    async def _do(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail:
            raise self.fail[name]

    async def xa_start(self, xid: Xid) -> None:
        await self._do("start")

    async def xa_end(self, xid: Xid) -> None:
        await self._do("end")

    async def xa_prepare(self, xid: Xid) -> int:
        await self._do("prepare")
        self.prepared.append(xid)
        return 0

    async def xa_commit(self, xid: Xid, *, one_phase: bool = False) -> None:
        await self._do("commit-one-phase" if one_phase else "commit")

    async def xa_rollback(self, xid: Xid) -> None:
        await self._do("rollback")

    async def xa_forget(self, xid: Xid) -> None:
        await self._do("forget")
        raise XAError(XAER_NOTA, "unknown", "SESS_XA_FORGET")

    async def xa_recover(self) -> tuple[Xid, ...]:
        await self._do("recover")
        return (*self.prepared, Xid(1, b"someone else's", b"b"))

    def create_producer(self, address: str) -> Any:
        return _FakeProducer()


class _FakeProducer:
    async def send_async(self, message: Any) -> None:
        return None


def _side(ops: list[Xa], session: _FakeSession) -> tuple[XaSide, History, list[XaCall]]:
    history = History()
    calls: list[XaCall] = []
    side = XaSide("r1", session, history, calls, 0.1, lambda q: f"q{q}", lambda exc, request: None)  # type: ignore[arg-type]

    async def go() -> None:
        for op in ops:
            await side.do(op)
        side.abandon()

    asyncio.run(go())
    return side, history, calls


def test_operations_that_need_a_branch_start_one_and_completions_end_it_first() -> None:
    session = _FakeSession()
    _, history, calls = _side([Xa("send"), Xa("commit"), Xa("send", xid=1), Xa("commit-one-phase", xid=1)], session)
    assert session.calls == ["start", "end", "prepare", "commit", "start", "end", "commit-one-phase"]
    assert [(c.call, c.branch) for c in calls if c.call != "send"] == [
        ("start", "x0.1"),
        ("end", "x0.1"),
        ("prepare", "x0.1"),
        ("commit", "x0.1"),
        ("start", "x1.1"),
        ("end", "x1.1"),
        ("commit-one-phase", "x1.1"),
    ]
    assert [op.type for op in history if op.f == "send"] == ["invoke", "ok", "invoke", "ok"]


def test_completions_without_an_open_branch_do_nothing_and_forget_names_an_unknown_xid() -> None:
    session = _FakeSession()
    _, _, calls = _side([Xa("prepare"), Xa("rollback", xid=2), Xa("end"), Xa("forget", xid=1), Xa("recover")], session)
    assert session.calls == ["forget", "recover"]
    assert calls[0] == XaCall("forget", "x1.never1", "error", code=XAER_NOTA)
    assert calls[1].listed == ()  # another run's Xid is not this run's


def test_a_prepared_branch_is_listed_by_its_label_and_its_sends_stay_unknown() -> None:
    session = _FakeSession()
    _, history, calls = _side([Xa("send", xid=2), Xa("prepare", xid=2), Xa("start", xid=2), Xa("recover")], session)
    assert session.calls == ["start", "end", "prepare", "recover"]  # x2's branch is still open: no new start
    assert calls[-1].listed == ("x2.1",)
    assert [op.type for op in history if op.f == "send"] == ["invoke", "info"]
    assert judge_xa(list(history), calls, drain_complete=True, desynchronised=False).findings == ()


def test_an_unanswered_call_is_logged_unknown_and_a_rollback_fails_the_sends() -> None:
    session = _FakeSession({"prepare": CallTimeout("SESS_XA_PREPARE", 3000)})
    _, history, calls = _side([Xa("send"), Xa("prepare"), Xa("send", xid=1), Xa("rollback", xid=1)], session)
    assert ("prepare", "x0.1", "unknown") in [(c.call, c.branch, c.answer) for c in calls]
    assert [op.type for op in history if op.f == "send"] == ["invoke", "info", "invoke", "fail"]


def test_a_restart_marks_the_log_and_aborts_the_open_unprepared_branches() -> None:
    session = _FakeSession()
    side, history, calls = _side([Xa("send"), Xa("prepare"), Xa("send", xid=1)], session)
    side.restarted()
    assert calls[-1].call == "restart"
    assert branch_states(calls) == {"x0.1": "prepared", "x1.1": "done"}
    assert side.active is None
    # x1's send: aborted by the restart, its outcome "unknown" to the history (judged from the log, not there)
    assert [op.type for op in history if op.f == "send"] == ["invoke", "invoke", "info", "info"]
    assert across_restart(calls, len(calls) - 1).survivors == {"x0.1"}


def test_every_send_in_a_branch_is_told_to_the_restart_rules() -> None:
    told: list[tuple[str, int, bool]] = []
    history = History()
    side = XaSide("r1", _FakeSession(), history, [], 0.1, lambda q: f"q{q}",  # type: ignore[arg-type]
                  lambda exc, request: None, lambda key, queue, durable: told.append((key, queue, durable)))

    async def go() -> None:
        await side.do(Xa("send", queue=2, count=2, durable=False))
        await side.do(Xa("send", xid=1))

    asyncio.run(go())
    keys = [op.value for op in history if op.f == "send" and op.type == "invoke"]
    assert told == [(keys[0], 2, False), (keys[1], 2, False), (keys[2], 0, True)]
