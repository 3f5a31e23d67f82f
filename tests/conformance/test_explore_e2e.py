"""One example end to end against the in-process reference broker: the workload through the fault proxy, a cut
the client reattaches across, the final drain, the judgement (clean); the runner's other outcomes (a kit
error, an unreachable broker) are never findings."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable

import pytest

from cck.conformance.explore import (
    ClientConfig,
    Commit,
    CutAfterCommands,
    CutAtFrame,
    Example,
    FaultSchedule,
    Limits,
    Outcome,
    Receive,
    ResetReattach,
    Send,
    Workload,
    diagram,
    records_of,
    render_text,
    run_example,
)
from cck.conformance.explore._model import IDLE_MS, Idle
from cck.conformance.faults import CutAfter
from cck.reference._server import BrokerServer
from cck.reference.broker import BrokerCore, BrokerSettings
from cck.reference.broker._outbox import Outbox

DEADLINE_S = 20.0

TINY = Example(
    Workload(ClientConfig(window=1024, connection_ttl_ms=10_000),
             (Send(0, 3), Receive(0, 2), Send(1, 2, durable=False, blocking=False), Send(0, 2, tx=True), Commit(),
              Receive(1, 1))),
    FaultSchedule((CutAfterCommands(2), ResetReattach(1, at=3))))


def _on_broker(run: Callable[[str], Awaitable[Outcome]]) -> Outcome:
    async def scenario() -> Outcome:
        async with BrokerServer(BrokerCore(BrokerSettings(node_id="n1")), "127.0.0.1", 0) as server:
            return await run(f"tcp://127.0.0.1:{server.bound_port}")

    return asyncio.run(asyncio.wait_for(scenario(), DEADLINE_S))


def test_a_tiny_example_runs_reattaches_and_is_clean() -> None:
    outcome = _on_broker(lambda url: run_example(url, TINY))
    assert outcome.kind == "clean", outcome.reason or outcome.describe()
    assert outcome.judgement is not None
    result = outcome.judgement.result
    assert result.sends == 7
    assert result.final_drain_complete
    assert any(kind == "reattached" for kind, _ in outcome.events)
    assert any(record["action"] == "cut" for record in outcome.wire)
    assert {op.process for op in outcome.history} >= {"plain", "tx", "drain"}
    # the timeline: each operation's start, the faults installed before them, the phases after
    assert [e["text"] for e in outcome.timeline if e["event"] == "operation"] == [
        op.describe() for op in TINY.workload.operations]
    assert [e["text"] for e in outcome.timeline if e["event"] == "fault"] == [
        f.describe() for f in TINY.schedule.faults]
    # ... and the sequence diagram of the real run: the cut, the reconnection, the reattach, the notes in order
    rows = diagram(records_of(outcome, "e2e run")).rows
    kinds = [(r.kind, r.action) for r in rows]
    cut = kinds.index(("frame", "cut"))
    assert ("boundary", "forwarded") in kinds[cut:]  # the client's new connection after the cut
    assert any(r.text.startswith("REATTACH_SESSION_RESP ch1") and "reattached" in r.text for r in rows[cut:])
    notes = [r.text for r in rows if r.kind == "note" and r.lane == "client" and r.text.startswith("op ")]
    assert notes == [f"op {i}: {op.describe()}" for i, op in enumerate(TINY.workload.operations)]
    assert "final drain" in render_text(diagram(records_of(outcome, "e2e run")))
    # every connection the proxy accepted ended once; the cut one by the proxy, where the cut is drawn
    assert sorted(end["conn"] for end in outcome.ends) == [attempt["conn"] for attempt in outcome.attempts]
    cut_conn = next(record["conn"] for record in outcome.wire if record["action"] == "cut")
    cut_end = next(end for end in outcome.ends if end["conn"] == cut_conn)
    assert (cut_end["by"], cut_end["how"]) == ("proxy", "reset")
    assert cut_end["reason"].startswith("connection cut by CutAfter(")
    ended = next(i for i, r in enumerate(rows) if i > cut and r.kind == "end")
    assert rows[ended].text.startswith(f"TCP connection {cut_conn} reset by the proxy: cut by CutAfter(")
    assert ("boundary", "forwarded") in kinds[ended:]  # drawn at the cut, before the client reconnected


def _idle_s(outcome: Outcome) -> float:
    starts = [e["ts_ns"] for e in outcome.timeline if e["event"] in ("operation", "phase")]
    idle_at = next(e["ts_ns"] for e in outcome.timeline if e["event"] == "operation" and e["text"].startswith("idle"))
    return (min(t for t in starts if t > idle_at) - idle_at) / 1e9


@pytest.mark.parametrize("ttl_ms", [2_000, 60_000])
def test_an_idle_spell_ends_once_the_periodic_flushes_have_confirmed_everything(ttl_ms: int) -> None:
    # the broker's 2 s ttl check confirms the partly filled window (and with ttl 2 s the client's PING every
    # 0.5 s confirms the broker's packets): the spell ends there, not after the whole IDLE_MS
    example = Example(Workload(ClientConfig(window=64 * 1024, connection_ttl_ms=ttl_ms), (Send(0, 2), Idle(), Send(1))),
                      FaultSchedule())
    outcome = _on_broker(lambda url: run_example(url, example))
    assert outcome.kind == "clean", outcome.reason or outcome.describe()
    idle_s = _idle_s(outcome)
    assert idle_s < IDLE_MS / 1000 - 0.5, idle_s
    confirms = [r for r in outcome.wire if r["type"] == "PACKETS_CONFIRMED" and r["direction"] == "s2c"]
    assert confirms, "the broker's periodic flush ended the spell"


def test_an_idle_spell_after_a_refused_command_ends_at_the_brokers_flush() -> None:
    # the broker does not count the refused CREATE_QUEUE, so the client's cache keeps it whatever the broker
    # confirms: the spell ends at the flush that came during it, not after the whole IDLE_MS
    from cck.conformance.explore._model import CreateExistingQueue

    example = Example(Workload(ClientConfig(window=64 * 1024, connection_ttl_ms=60_000),
                               (CreateExistingQueue(0), Send(0, 2), Idle(), Send(1))), FaultSchedule())
    outcome = _on_broker(lambda url: run_example(url, example))
    assert outcome.kind == "clean", outcome.reason or outcome.describe()
    assert any(r["type"] == "EXCEPTION" for r in outcome.wire)
    assert _idle_s(outcome) < IDLE_MS / 1000 - 0.5
    # with window 0 the broker confirms each command at once: the refused one is all the client holds when the
    # spell begins, and no flush comes during it; the spell ends at once
    at_once = Example(Workload(ClientConfig(window=0, connection_ttl_ms=60_000),
                               (Send(0, 1), CreateExistingQueue(0), Idle(), Send(1))), FaultSchedule())
    outcome = _on_broker(lambda url: run_example(url, at_once))
    assert outcome.kind == "clean", outcome.reason or outcome.describe()
    assert _idle_s(outcome) < 0.5


def test_an_idle_spell_without_the_brokers_flush_lasts_its_whole_length(monkeypatch: pytest.MonkeyPatch) -> None:
    # no periodic flush (nor the close's: the finding may name either)
    monkeypatch.setattr(Outbox, "flush_confirmations", lambda self, session: None)
    example = Example(Workload(ClientConfig(window=64 * 1024, connection_ttl_ms=60_000), (Send(0, 2), Idle(), Send(1))),
                      FaultSchedule())
    outcome = _on_broker(lambda url: run_example(url, example))
    assert _idle_s(outcome) >= IDLE_MS / 1000
    assert outcome.kind == "finding"
    assert any("window.flush" in f for f in outcome.judgement.findings)  # type: ignore[union-attr]


def test_an_exception_in_the_kit_is_a_kit_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(fault: object) -> None:
        raise RuntimeError("the kit's own bug")

    monkeypatch.setattr("cck.conformance.explore._runner.rule_of", broken)
    outcome = _on_broker(lambda url: run_example(url, TINY))
    assert outcome.kind == "kit-error"
    assert "the kit's own bug" in outcome.reason
    assert outcome.judgement is None


def test_an_unreachable_broker_is_indeterminate() -> None:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connects are refused
        limits = Limits(settle_s=2.0, example_s=10.0)
        outcome = asyncio.run(run_example(f"tcp://127.0.0.1:{port}", TINY, limits=limits))
    assert outcome.kind == "indeterminate"
    assert outcome.judgement is None


def test_an_exception_escaping_to_the_event_loop_is_a_kit_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> None:
        raise RuntimeError("a callback of the kit failed")

    def sneaky(fault: object) -> CutAfter:
        asyncio.get_running_loop().call_soon(boom)  # as a client timer whose exception nobody awaits
        return CutAfter(2)

    monkeypatch.setattr("cck.conformance.explore._runner.rule_of", sneaky)
    outcome = _on_broker(lambda url: run_example(url, TINY))
    assert outcome.kind == "kit-error"
    assert "a callback of the kit failed" in outcome.reason


def test_a_broker_that_does_not_replay_its_answer_after_a_reattach_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # The proxy cuts the connection as the broker's answer to the first blocking send arrives, so only the
    # broker's replay on reattach can answer that send; a broker that skips its replay leaves the call unanswered
    # (its outcome "unknown" in the history, which alone would find nothing).
    monkeypatch.setattr("cck.reference.broker._outbox.Outbox.replay", lambda self, conn, frames: None)
    example = Example(Workload(ClientConfig(window=1024, connection_ttl_ms=10_000), (Send(0, 2),)),
                      FaultSchedule((CutAtFrame(0, "s2c", "NULL_RESPONSE"),)))
    outcome = _on_broker(lambda url: run_example(url, example, limits=Limits(call_timeout_ms=1_000)))
    assert outcome.kind == "finding", outcome.describe()
    assert outcome.judgement is not None
    assert any(kind == "reattached" for kind, _ in outcome.events)
    assert outcome.judgement.findings[0].startswith("1 call(s) never answered")
    assert [a.kind for a in outcome.judgement.anomalies] == ["unanswered"]
    # the same example against the broker as it is: answered, clean
    monkeypatch.undo()
    assert _on_broker(lambda url: run_example(url, example, limits=Limits(call_timeout_ms=1_000))).kind == "clean"


def _window_fill() -> Example:
    return Example(Workload(ClientConfig(window=1024, connection_ttl_ms=60_000),
                            (Send(0, 30, durable=False, blocking=True), Receive(0, 1))),
                   FaultSchedule((CutAfterCommands(2, at=1),)))


def test_a_window_filled_on_the_first_connection_is_judged_by_full_frame_sizes(monkeypatch: pytest.MonkeyPatch
                                                                             ) -> None:
    # the shape window_fills draws: the reference broker counts full frames (clean); one that leaves out each
    # frame's 4-byte length prefix confirms later than the window says (the byte rule's finding)
    outcome = _on_broker(lambda url: run_example(url, _window_fill()))
    assert outcome.kind == "clean", outcome.reason or outcome.describe()
    confirms = [r for r in outcome.wire if r["type"] == "PACKETS_CONFIRMED" and r["direction"] == "s2c"
                and r["conn"] == 1]
    assert len(confirms) >= 2  # the window filled several times on connection 1
    counted = Outbox.confirm
    monkeypatch.setattr(Outbox, "confirm", lambda self, session, size: counted(self, session, size - 4))
    late = _on_broker(lambda url: run_example(url, _window_fill()))
    assert late.kind == "finding"
    assert any(f.startswith("window.confirm-bytes") for f in late.judgement.findings)  # type: ignore[union-attr]


def test_the_window_fill_shape_puts_a_long_batch_first_on_the_smallest_window() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from cck.conformance.explore._strategies import window_fills

    base = Example(Workload(ClientConfig(window=-1), (Receive(1, 1),)),
                   FaultSchedule((CutAfterCommands(0, at=0),), refuse_initial=2))

    @settings(max_examples=20, database=None)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        shaped = data.draw(window_fills(base))
        first = shaped.workload.operations[0]
        assert shaped.workload.config.window == 1024
        assert isinstance(first, Send)
        assert (first.count >= 20, first.blocking, first.durable) == (True, True, False)
        assert shaped.workload.operations[1:] == base.workload.operations
        assert [f.at for f in shaped.schedule.faults] == [1]
        assert shaped.schedule.refuse_initial == 0

    check()


def test_a_give_up_with_a_call_waiting_fails_the_call_at_once_and_is_clean() -> None:
    from hypothesis import find

    from cck.conformance.explore._strategies import gave_up

    base = Example(Workload(ClientConfig(window=64 * 1024, connection_ttl_ms=60_000), (Send(0, 2),)),
                   FaultSchedule((CutAfterCommands(40),)))
    shaped = find(gave_up(base), lambda e: e.workload.config.reconnect_attempts == 2)
    assert shaped.workload.operations[:1] == base.workload.operations
    assert [f.describe() for f in shaped.schedule.faults[1:]] == ["refuse 2 connect(s) @op1",
                                                                  "cut after 0 confirmable c2s @op1"]
    outcome = _on_broker(lambda url: run_example(url, shaped))
    assert outcome.kind == "clean", outcome.reason or outcome.describe()
    assert ("gave-up" in [kind for kind, _ in outcome.events]), outcome.events
    assert shaped.workload.config.window == -1  # the broker drops the lost sessions at once: the drain is quick


def test_a_backoff_shape_makes_four_attempts_with_growing_waits_and_is_clean() -> None:
    from hypothesis import find

    from cck.conformance.explore._strategies import backoffs

    base = Example(Workload(ClientConfig(window=64 * 1024, connection_ttl_ms=60_000), (Send(0, 2),)),
                   FaultSchedule((CutAfterCommands(40),)))
    shaped = find(backoffs(base), lambda e: (e.workload.config.retry_interval_ms,
                                             e.workload.config.retry_interval_multiplier) == (100, 2.0))
    config = shaped.workload.config
    assert (config.reconnect_attempts, config.max_retry_interval_ms) == (-1, 1_000)
    outcome = _on_broker(lambda url: run_example(url, shaped))
    assert outcome.kind == "clean", outcome.reason or outcome.describe()
    refused = [a for a in outcome.attempts if a["outcome"] != "forwarded"]
    assert len(refused) == 3


def test_the_xa_completion_shape_forgets_a_completed_branch_clean_and_found_where_forget_says_ok(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from hypothesis import find

    from cck.conformance.explore._model import Xa
    from cck.conformance.explore._strategies import xa_completions
    from cck.reference.broker._xa import OK, XAHandlers

    base = Example(Workload(ClientConfig(window=1024, connection_ttl_ms=10_000), (Send(0, 2),)),
                   FaultSchedule((CutAfterCommands(1),)))
    shaped = find(xa_completions(base), lambda e: e.workload.operations[2].action == "commit")  # type: ignore[union-attr]
    tail = shaped.workload.operations[1:]
    assert shaped.workload.operations[:1] == base.workload.operations
    assert [(op.action, op.xid) for op in tail if isinstance(op, Xa)] == [
        ("send", tail[0].xid), ("commit", tail[0].xid), ("forget", tail[0].xid), ("recover", tail[0].xid)]  # type: ignore[union-attr]
    assert shaped.schedule == base.schedule
    outcome = _on_broker(lambda url: run_example(url, shaped))
    assert outcome.kind == "clean", outcome.reason or outcome.describe()
    # a broker that answers the forget of the completed branch with OK is found
    monkeypatch.setattr(XAHandlers, "_forget", lambda self, session, packet: OK)
    found = _on_broker(lambda url: run_example(url, shaped))
    assert found.kind == "finding", found.describe()
    assert any("dtx.completed-forgotten" in f for f in found.judgement.findings)  # type: ignore[union-attr]


def test_a_transacted_receive_from_an_empty_queue_gets_preloaded_messages_clean_and_found_where_a_rollback_drops_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from cck.reference.broker._transactions import Transactions

    example = Example(Workload(ClientConfig(window=1024, connection_ttl_ms=10_000),
                               (Receive(1, 2, tx=True), Send(0, 1))), FaultSchedule(()))
    outcome = _on_broker(lambda url: run_example(url, example))
    assert outcome.kind == "clean", outcome.reason or outcome.describe()
    preloads = [op.value for op in outcome.history if op.process == "preload" and op.type == "ok"]
    assert len(preloads) == 2
    assert {op.value for op in outcome.history if op.process == "tx" and op.f == "receive"} == set(preloads)
    # the session's close ends the transaction: a broker that then drops its acknowledgements is found
    rollback_work = Transactions.rollback_work

    def dropping(self: Transactions, session: object, *, cancel_deliveries: bool,
                 closing_cleanly: bool = False) -> None:
        session.tx.acks.clear()  # type: ignore[attr-defined]
        rollback_work(self, session, cancel_deliveries=cancel_deliveries,  # type: ignore[arg-type]
                      closing_cleanly=closing_cleanly)

    monkeypatch.setattr(Transactions, "rollback_work", dropping)
    found = _on_broker(lambda url: run_example(url, example))
    assert found.kind == "finding", found.describe()
    assert all("ack-rolled-back-lost" in f for f in found.judgement.findings), found.judgement  # type: ignore[union-attr]
    assert len(found.judgement.findings) == 2  # type: ignore[union-attr]


def test_preloaded_messages_are_drained_when_every_initial_connect_is_refused() -> None:
    example = Example(Workload(ClientConfig(window=65_536, connection_ttl_ms=2_000),
                               (Receive(1, 1), Receive(1, 1, tx=True))),
                      FaultSchedule((CutAfterCommands(5),), refuse_initial=1))
    outcome = _on_broker(lambda url: run_example(url, example))
    assert outcome.kind == "clean", outcome.reason or outcome.describe()
    assert [op.process for op in outcome.history if op.f == "receive"] == ["drain"]


@pytest.mark.parametrize("window", [-1, 65_536])
def test_a_half_open_cut_reaches_a_broker_that_still_holds_the_session_and_is_clean(window: int) -> None:
    from cck.conformance.explore import CutHalfOpen

    example = Example(Workload(ClientConfig(window=window, connection_ttl_ms=10_000),
                               (Send(0, 2), Receive(0, 1, tx=True), Send(1, 1))),
                      FaultSchedule((CutHalfOpen(0, at=2),)))
    assert example.schedule.faults[0].describe() == "cut the client's side after 0 confirmable c2s @op2"
    outcome = _on_broker(lambda url: run_example(url, example))
    assert outcome.kind == "clean", outcome.reason or outcome.describe()
    ends = {end["conn"]: end for end in outcome.ends}
    assert ends[1]["reason"].startswith("client side cut by")
    answers = [record["packet"] for record in outcome.wire if record.get("type") == "REATTACH_SESSION_RESP"]
    assert answers, outcome.wire
    # with a window the session moves to the new connection; without one the broker refuses and the client recreates
    assert all(("reattached=True" in str(a)) == (window > 0) for a in answers), answers
