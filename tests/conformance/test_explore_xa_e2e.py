"""XA examples end to end against the in-process reference broker: a conforming run is clean (a rolled-back
acknowledgement comes back, a prepared branch holds its messages, across a cut during an XA answer), and a
broker that answers an unknown Xid's forget with OK, or leaves a prepared branch out of recover, is found."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from cck.codec import SessionXAGetInDoubtXidsResponseMessage
from cck.conformance.explore import (
    ClientConfig,
    CutAtFrame,
    Example,
    FaultSchedule,
    Outcome,
    Send,
    Workload,
    run_example,
)
from cck.conformance.explore._model import Xa
from cck.reference._server import BrokerServer
from cck.reference.broker import BrokerCore, BrokerSettings
from cck.reference.broker._xa import OK, XAHandlers

DEADLINE_S = 30.0

XA_WORK = Example(
    Workload(
        ClientConfig(window=1024, connection_ttl_ms=10_000),
        (
            Send(0, 4),
            Xa("receive", 0, queue=0, count=2),  # x0 acknowledges two messages
            Xa("send", 0, queue=1, count=2),
            Xa("prepare", 0),  # ... and stays prepared: its sends and acknowledgements are held
            Xa("receive", 1, queue=0, count=1),
            Xa("rollback", 1),  # x1's acknowledgement is rolled back: the message comes back
            Xa("forget", 2),
            Xa("recover"),
        ),
    ),
    FaultSchedule((CutAtFrame(0, "s2c", "SESS_XA_RESP", at=3),)),  # the prepare's answer is cut: replayed
)


def _on_broker(run: Callable[[str], Awaitable[Outcome]]) -> Outcome:
    async def scenario() -> Outcome:
        async with BrokerServer(BrokerCore(BrokerSettings(node_id="n1")), "127.0.0.1", 0) as server:
            return await run(f"tcp://127.0.0.1:{server.bound_port}")

    return asyncio.run(asyncio.wait_for(scenario(), DEADLINE_S))


def test_a_conforming_xa_run_is_clean() -> None:
    outcome = _on_broker(lambda url: run_example(url, XA_WORK))
    assert outcome.kind == "clean", outcome.reason or outcome.describe()
    assert any(record["action"] == "cut" for record in outcome.wire)
    xa_received = [op.value for op in outcome.history if op.process == "xa" and op.f == "receive"]
    drained = {op.value for op in outcome.history if op.process == "drain" and op.f == "receive"}
    assert len(xa_received) == 3
    held, rolled_back = xa_received[:2], xa_received[2]
    assert rolled_back in drained  # put back by the rollback
    assert not drained & set(held)  # held by the prepared branch
    sent_in_x0 = {op.value for op in outcome.history if op.process == "xa" and op.f == "send"}
    assert sent_in_x0
    assert not drained & sent_in_x0


def test_a_forget_of_an_unknown_xid_answered_ok_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(XAHandlers, "_forget", lambda self, session, packet: OK)
    example = Example(Workload(ClientConfig(), (Xa("forget", 1),)), FaultSchedule())
    outcome = _on_broker(lambda url: run_example(url, example))
    assert outcome.kind == "finding", outcome.reason or outcome.describe()
    assert outcome.judgement is not None
    assert outcome.judgement.findings == (
        "forget of x1.never1, an Xid the broker does not know (never started), answered OK, not XAER_NOTA "
        "(dtx.completed-forgotten)",
    )


def test_a_prepared_branch_left_out_of_the_final_recover_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    def nothing_in_doubt(self: Any, session: Any, packet: Any) -> SessionXAGetInDoubtXidsResponseMessage:
        return SessionXAGetInDoubtXidsResponseMessage(())

    monkeypatch.setattr(XAHandlers, "_in_doubt", nothing_in_doubt)
    example = Example(Workload(ClientConfig(), (Xa("send", 0), Xa("prepare", 0))), FaultSchedule())
    outcome = _on_broker(lambda url: run_example(url, example))
    assert outcome.kind == "finding", outcome.reason or outcome.describe()
    assert outcome.judgement is not None
    assert outcome.judgement.findings == (
        "recover left out prepared, unresolved branch(es) x0.1 (dtx.prepared-survives)",
    )
