"""What the restart, failover-transaction and DTX groups share beyond the suite kit: the three ways a case breaks
the connection (cut by a proxy, graceful stop, kill -9, each followed by a start) — the *disrupt* of their
disrupt → fill → judge scenarios —, an ordered log of failure-listener calls and failover events, and the
judgement of a history in which messages come back after a restart.

Every wait is bounded: a case runs under the kit's ``run(settings, coroutine, seconds)`` and each step waits on
an event or polls with its own deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

from cck.codec import RoutingType
from cck.conformance.evidence import CaseEvidence
from cck.conformance.faults import FaultProxy
from cck.conformance.oracles import History, check
from cck.conformance.plugin import Settings
from cck.conformance.targets import KILL, RESTART, Node, Target
from cck.conformance.verdicts import NotObserved
from cck.reference.client import (
    ClientError,
    Connection,
    Consumer,
    Delivery,
    FailoverEvent,
    Session,
    TransactionRolledBack,
    XAError,
    connect,
)

from ._kit import (
    QUIET_S,
    RECEIVE_S,
    RESTARTING,
    client_settings,
    drain,
    fence_behind,
    judge_history,
    key_of,
    poll,
    record_receipt,
    restarted,
    signalled,
)

__all__ = [
    "rolled_back",
    "redelivered",
    "take_acknowledged",
    "xa_code",
    "Trigger",
    "Disruption",
    "Watch",
    "connected_through",
    "consumers_gone",
    "ensure_queue",
    "judge_redelivery",
]

#: cut: the proxy resets the TCP connection (the broker keeps running); stop: graceful stop then start;
#: kill: SIGKILL then start.
Trigger = Literal["cut", "stop", "kill"]


class Watch:
    """One ordered log of a connection's failure-listener calls and failover events, with waits on it."""

    def __init__(self, connection: Connection) -> None:
        self.log: list[tuple[str, float, str]] = []
        self._changed = asyncio.Event()
        connection.add_failure_listener(self._failed)
        connection.add_event_listener(self._event)

    def _failed(self, error: ClientError) -> None:
        self.log.append(("listener", time.monotonic(), str(error)))
        self._changed.set()

    def _event(self, event: FailoverEvent) -> None:
        self.log.append((event.kind, time.monotonic(), event.detail))
        self._changed.set()

    @property
    def kinds(self) -> list[str]:
        return [kind for kind, _, _ in self.log]

    def mark(self) -> int:
        return len(self.log)

    async def until(self, kinds: tuple[str, ...], seconds: float, *, since: int = 0) -> str:
        """Wait until one of ``kinds`` is logged at or after index ``since``; returns which one."""

        def first() -> str | None:
            return next((kind for kind in self.kinds[since:] if kind in kinds), None)

        if not await signalled(self._changed, lambda: first() is not None, seconds):
            raise NotObserved(f"none of {kinds} within {seconds:.1f} s; log: {self.kinds[since:]}")
        found = first()
        assert found is not None
        return found

    def to_json(self) -> list[dict[str, Any]]:
        start = self.log[0][1] if self.log else 0.0
        return [{"kind": k, "offset_s": round(t - start, 4), "detail": d} for k, t, d in self.log]


class Disruption:
    """Breaks a connection by one trigger.  ``cut`` needs the client to connect through :attr:`url` (a fault
    proxy in front of the node); ``stop`` and ``kill`` stop or kill the node and start it again."""

    def __init__(self, target: Target, trigger: Trigger) -> None:
        if trigger == "stop":
            target.require(RESTART, action="stop and start the broker")
        elif trigger == "kill":
            target.require(KILL, RESTART, action="kill -9 and start the broker")
        self.target = target
        self.node: Node = target.nodes[0]
        self.trigger = trigger
        self.proxy: FaultProxy | None = None
        if trigger == "cut":
            host, _, port = self.node.url.removeprefix("tcp://").rpartition(":")
            self.proxy = FaultProxy(host.strip("[]"), int(port))

    @property
    def url(self) -> str:
        return self.proxy.url if self.proxy is not None else self.node.url

    async def __aenter__(self) -> Disruption:
        if self.proxy is not None:
            await self.proxy.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.proxy is not None:
            await self.proxy.stop()
        if not self.node.is_running:  # a case that failed between the crash and the start
            await asyncio.to_thread(self.node.start)

    async def down(self) -> None:
        """Break the connection; for stop and kill the broker stays down until :meth:`up`."""
        if self.proxy is not None:
            count = self.proxy.cut_all()
            if count < 1:
                raise AssertionError("the proxy had no connection to cut")
        elif self.trigger == "stop":
            await asyncio.to_thread(self.node.stop)
        else:
            await asyncio.to_thread(self.node.kill)

    async def up(self) -> None:
        if self.proxy is None:
            await restarted(self.node.start, self.node.name)

    async def bounce(self, settle: Callable[[], Awaitable[None]] | None = None) -> None:
        """Break the connection and restore the broker.  For a cut, ``settle`` (if given) runs while the proxy
        refuses new connections, so the client's reconnection cannot overtake what ``settle`` waits for."""
        if self.proxy is not None and settle is not None:
            await self.proxy.pause_listening()
            try:
                await self.down()
                await settle()
            finally:
                await self.proxy.resume_listening()
            return
        await self.down()
        await self.up()

    def record(self, evidence: CaseEvidence) -> None:
        if self.proxy is not None:
            evidence.wire(self.proxy.wire_log, label=self.trigger)
            evidence.attempts(self.proxy.attempts, label=self.trigger)
            evidence.ends(self.proxy.ends, label=self.trigger)


@asynccontextmanager
async def connected_through(target: Target, trigger: Trigger,
                            **changes: Any) -> AsyncIterator[tuple[Disruption, Connection, Watch]]:
    """The disrupt end of the restart-shaped scenarios: a :class:`Disruption` of ``target`` by ``trigger``, a
    connection of the kit's client (the RESTARTING profile with ``changes``) through it, and a :class:`Watch` of
    that connection from its start."""
    async with (Disruption(target, trigger) as disruption,
                await connect(disruption.url, settings=client_settings(target, RESTARTING, **changes)) as connection):
        yield disruption, connection, Watch(connection)


async def ensure_queue(session: Session, queue: str, *, durable: bool = True, temporary: bool = False) -> None:
    await session.create_queue(queue, queue, routing_type=RoutingType.ANYCAST, durable=durable, temporary=temporary)


def judge_redelivery(history: History, count_may_be_lost: bool, evidence: CaseEvidence,
                     label: str = "redelivery") -> None:
    """Judge a history in which messages come back after a failure.  A broker that kept the messages in memory
    (no restart), or stored each delivery's count before the delivery, must count the failed delivery (strict
    check).  When a restart may have lost the count (``count_may_be_lost``), nothing may be lost or wrongly
    duplicated, but the redelivered mark is a SHOULD."""
    if not count_may_be_lost:
        strict = judge_history(history, evidence, label)
        assert strict.ok, strict.explanation
        return
    lenient = judge_history(history, evidence, label, allow_duplicates=True)
    assert lenient.ok, lenient.explanation
    strict = check(history)
    evidence.should(strict.duplicated.count == 0 and strict.redelivery_mismatches.count == 0,
                    "messages redelivered after the restart are not marked redelivered (delivery count 1): "
                    + strict.explanation)


async def consumers_gone(target: Target, queue: str, seconds: float) -> None:
    """Wait until the broker has closed every consumer of ``queue`` (polled through a connection of its own, at
    most ``seconds``): after a cut, the broker's own handling of the dead connection is then complete."""
    settings = client_settings(target, RESTARTING, reconnect_attempts=0)
    async with await connect(target.nodes[0].url, settings=settings) as side:
        session = await side.create_session()

        async def gone() -> bool:
            return (await session.queue_query(queue)).consumer_count == 0

        await poll(gone, seconds, lambda: f"the broker still lists consumers of {queue} after the cut")


# ------------------------------------------------------------------------- the scenarios' shared steps


async def rolled_back(session: Session, evidence: CaseEvidence, what: str) -> None:
    """Commit ``session``'s transaction, which the failure must have rolled back: the commit must raise
    TransactionRolledBack (what it ended with goes to the evidence)."""
    outcome: object = None
    try:
        await session.commit()
    except ClientError as exc:
        outcome = exc
    evidence.note("commit", repr(outcome))
    assert isinstance(outcome, TransactionRolledBack), f"the commit of {what} after the failure ended with {outcome!r}"


async def redelivered(consumer: Consumer, history: History, process: str, expected: int, settings: Settings,
                      evidence: CaseEvidence) -> list[Delivery]:
    """The ``expected`` messages delivered again after a failure (acknowledged individually; the drain ends at a
    fence behind them where the session allows one, else after a quiet window), noted with their delivery counts."""
    again = await drain(consumer, history, process, expected=expected, quiet_s=settings.deadline(QUIET_S),
                        receive_s=settings.deadline(RECEIVE_S), fence=await fence_behind(consumer))
    evidence.note("redelivered", [(key_of(d), d.delivery_count) for d in again])
    return again


async def take_acknowledged(session: Session, queue: str, count: int, history: History,
                            settings: Settings) -> list[str]:
    """Receive and acknowledge ``count`` messages inside the session's transaction (or XA branch); the consumer is
    closed again so nothing else stays delivered to it."""
    consumer = await session.create_consumer(queue)
    session.start()
    keys: list[str] = []
    for _ in range(count):
        delivery = await consumer.receive(settings.deadline(RECEIVE_S))
        assert delivery is not None, f"only {len(keys)} of {count} messages to acknowledge arrived"
        record_receipt(history, "worker", delivery)
        await consumer.individual_acknowledge(delivery)
        keys.append(key_of(delivery))
    await consumer.close()
    return keys


async def xa_code(call: Awaitable[object]) -> int:
    """Await an XA call: 0 when it succeeds, else its XA error code."""
    try:
        await call
    except XAError as exc:
        return exc.code
    return 0
