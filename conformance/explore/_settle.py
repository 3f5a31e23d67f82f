"""A settled cut (``CutSettled``): the connection is cut, then the client's new connections are refused until the
broker shows that it has closed the cut connection's sessions, so that the broker, not a reattach, ends them.

Why: with no confirmation window a reattach that reaches Artemis before it has handled the dead connection makes it
close the old session as a clean close (AMQ222066), which decrements the delivery count of every unacknowledged
delivery; only a failed close keeps the count (clause ``failover.redelivery``).  Which of the two happened decides
what count a redelivery must carry, so the oracle judges it only after a cut settled here (rule 3 of
``_redelivery``), and only for the workload's first connection: no earlier failure can have returned its
deliveries another way.

What settled means is asked straight of the broker (a connection of its own, not through the proxy): no consumer
left on any of the example's queues.  The wait is bounded (``Limits.settle_hold_s``); past it the client's
connections are let through and nothing is recorded (a broker that keeps a windowed session for reattach until its
connection-ttl holds its consumers that long, and then the client reattaches).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from cck.conformance.faults import FaultProxy, Rule, RuleHandle
from cck.conformance.oracles import History
from cck.conformance.verdicts import NotObserved
from cck.reference.client import ClientError, ClientSettings, connect

from ._redelivery import SETTLED

__all__ = ["HoldAfterCut", "settle"]


@dataclass(eq=False)
class HoldAfterCut(Rule):
    """Refuse every new connection from the moment ``cut`` has fired until ``opened``.  Refusal starts with the
    cut itself (the proxy asks on each accept), so no reconnect can slip in before the hold."""

    cut: RuleHandle
    opened: bool = False

    def connection_effect(self, handle: RuleHandle) -> Literal["refuse", "blackhole"] | None:
        return "refuse" if self.cut.spent and not self.opened else None

    def describe(self) -> str:
        return "refuse reconnects until the broker closed the cut connection's sessions"


async def settle(
    proxy: FaultProxy,
    hold: HoldAfterCut,
    installed: RuleHandle,
    url: str,
    settings: ClientSettings,
    queues: Sequence[str],
    history: History,
    hold_s: float,
    wait_s: float,
    mark: Callable[[str], None],
) -> None:
    """Wait (up to ``wait_s``) for the hold's cut; then (up to ``hold_s``) for the broker to show no consumer on
    ``queues``; then open the hold.  When the cut was of the proxy's first connection and the broker settled in
    time, with the hold still in place (``installed``: the run clears the proxy's rules when its operations are
    done), record a ``SETTLED`` operation in ``history`` (what rule 3 reads)."""
    try:
        record = await proxy.wait_for_record(lambda r: r.action == "cut" and hold.cut.spent, wait_s)
    except NotObserved:
        return
    try:
        first = min(r.conn for r in proxy.wire_log)
        if record.conn == first and await _consumers_gone(url, settings, queues, hold_s) and installed.installed:
            history.ok("connection", SETTLED, None)
            mark("the cut connection's sessions are closed at the broker: reconnects let through")
        else:
            mark(
                "the cut did not settle (not the first connection, or its sessions outlived the hold): "
                "reconnects let through"
            )
    finally:
        hold.opened = True


async def _consumers_gone(url: str, settings: ClientSettings, queues: Sequence[str], seconds: float) -> bool:
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds
    plain = dataclasses.replace(settings, reconnect_attempts=0, confirmation_window_size=-1)

    async def gone() -> bool:
        async with await connect(url, settings=plain, connect_timeout=seconds) as connection:
            session = await connection.create_session()
            while loop.time() < until:
                counts = [(await session.queue_query(name)).consumer_count for name in queues]
                if not any(counts):
                    return True
                await asyncio.sleep(0.02)  # the broker offers no event for it: asked again, within the bound
            return False

    try:
        return await asyncio.wait_for(gone(), seconds)
    except (ClientError, TimeoutError, OSError):
        return False
