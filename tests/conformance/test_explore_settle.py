"""A settled cut (``conformance/explore/_settle.py``): reconnects are refused from the cut until the broker has
closed the cut connection's sessions, and only then does the history say so; end to end against the in-process
reference broker, a delivery the cut ended comes back counted (rule 3 of ``_redelivery``)."""

from __future__ import annotations

import asyncio

from cck.conformance.explore import (
    ClientConfig,
    CutSettled,
    Example,
    FaultSchedule,
    Outcome,
    Receive,
    Send,
    Workload,
    run_example,
)
from cck.conformance.explore._settle import HoldAfterCut
from cck.conformance.faults import CutAfter, RuleHandle
from cck.reference._server import BrokerServer
from cck.reference.broker import BrokerCore, BrokerSettings

DEADLINE_S = 30.0


def test_the_hold_refuses_reconnects_from_the_cut_until_opened() -> None:
    cut = RuleHandle(CutAfter(0), 0, remaining=1)
    hold = HoldAfterCut(cut)
    handle = RuleHandle(hold, 0)
    assert hold.connection_effect(handle) is None  # before the cut: the workload's connections pass
    cut.remaining = 0  # the cut fired
    assert hold.connection_effect(handle) == "refuse"
    hold.opened = True
    assert hold.connection_effect(handle) is None


def _example(window: int) -> Example:
    # a delivery left unacknowledged, then the connection cut at the next send
    return Example(
        Workload(ClientConfig(window=window), (Send(0, 2), Receive(0, 1, ack=False), Send(1))),
        FaultSchedule((CutSettled(0, "c2s", "SESS_SEND", at=2),)),
    )


def _on_broker(example: Example) -> Outcome:
    async def scenario() -> Outcome:
        async with BrokerServer(BrokerCore(BrokerSettings(node_id="n1")), "127.0.0.1", 0) as server:
            return await run_example(f"tcp://127.0.0.1:{server.bound_port}", example)

    return asyncio.run(asyncio.wait_for(scenario(), DEADLINE_S))


def test_a_settled_cut_without_a_window_is_recorded_and_judged_clean_on_the_reference_broker() -> None:
    outcome = _on_broker(_example(-1))
    assert outcome.kind == "clean", outcome.reason or outcome.describe()
    fs = [op.f for op in outcome.history]
    assert "settled-failure" in fs
    received = [op for op in outcome.history if op.f == "receive"]
    first = next(op for op in received if op.process == "plain")
    again = [op for op in received if op.value == first.value and op.process == "drain"]
    assert again
    assert again[0].delivery_count is not None
    assert first.delivery_count is not None
    assert again[0].delivery_count > first.delivery_count  # what rule 3 asks, met by the reference broker
    assert any(kind == "recreated" for kind, _ in outcome.events)


def test_a_windowed_session_outlives_the_hold_and_nothing_is_recorded() -> None:
    # the broker keeps a windowed session for reattach: the hold ends at its bound and the client reattaches
    outcome = _on_broker(_example(64 * 1024))
    assert outcome.kind == "clean", outcome.reason or outcome.describe()
    assert "settled-failure" not in [op.f for op in outcome.history]
    assert any("did not settle" in event["text"] for event in outcome.timeline)
