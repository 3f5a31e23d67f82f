"""What the reattach and window groups share beyond the suite kit: the fault proxy in front of the target, a
producer that writes a Jepsen-style history, the scenario through the proxy (with its judging end and the
cut-mid-batch fill), and readers of the proxy's wire log.

Everything waits on an event or on a wire-log predicate with a deadline scaled by the run's settings; the
only deliberate pauses are fault durations (an outage the case imposes), never a wait for an outcome.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from cck.codec import CoreMessage, Packet, RoutingType, SessionSendMessage
from cck.conformance.evidence import CaseEvidence
from cck.conformance.faults import CutAfter, FaultProxy, WireRecord
from cck.conformance.oracles import History
from cck.conformance.plugin import Settings
from cck.conformance.targets import Target
from cck.reference.client import ClientError, ClientSettings, Connection, FailoverEvent, Producer, Session, connect

from ._kit import REATTACHING, client_settings, drain_url, judged, key_of, message, observed, queue_for

__all__ = [
    "RESTORE_S",
    "SETTLE_S",
    "Flow",
    "SESSION_CHANNEL_MIN",
    "Scenario",
    "confirmable_session_frames",
    "outage",
    "producer_elsewhere",
    "proxied",
    "proxied_scenario",
    "send_keys",
    "send_through_a_cut",
    "server_replay_problems",
    "wait_event",
    "warm_up",
]

#: Artemis numbers session channels from 10 (notes §7.1 step 6).
SESSION_CHANNEL_MIN = 10
#: How long a reattach (or recreate) may take once the link is back (unscaled seconds).
RESTORE_S = 20.0
#: How long the broker's answers and confirmations may take, and a scenario's final drain at most.
SETTLE_S = 30.0
#: A scenario's final drain ends once nothing arrived for this long.
DRAIN_QUIET_S = 0.5


def _host_port(url: str) -> tuple[str, int]:
    host, _, port = url.removeprefix("tcp://").rpartition(":")
    return host.strip("[]"), int(port)


@asynccontextmanager
async def proxied(target: Target, evidence: CaseEvidence) -> AsyncIterator[FaultProxy]:
    """A fault proxy in front of the target's first node; its wire log and attempts go into the evidence
    however the case ends."""
    host, port = _host_port(target.url)
    proxy = FaultProxy(host, port)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()
        evidence.wire(proxy.wire_log)
        evidence.attempts(proxy.attempts)
        evidence.ends(proxy.ends)


async def wait_event(connection: Connection, kinds: Iterable[str], timeout: float) -> FailoverEvent:
    """The first failover event (already recorded or still to come) whose kind is one of ``kinds`` or
    ``gave-up``; :class:`NotObserved` after ``timeout`` seconds."""
    wanted = {*kinds, "gave-up"}
    for event in connection.events:
        if event.kind in wanted:
            return event
    done: asyncio.Future[FailoverEvent] = asyncio.get_running_loop().create_future()

    def watch(event: FailoverEvent) -> None:
        if event.kind in wanted and not done.done():
            done.set_result(event)

    connection.add_event_listener(watch)
    return await observed(done, timeout, f"the client's failover event ({' or '.join(sorted(wanted))})")


@dataclass
class Flow:
    """One producer's sends, recorded in a history: blocking sends complete at once, asynchronous ones when
    the broker's answer (or the failure) resolves their future."""

    producer: Producer
    history: History
    prefix: str
    durable: bool
    body: bytes = b"m"
    process: str = "producer-1"
    pending: list[asyncio.Future[Packet]] = field(default_factory=list)
    sent: int = 0

    def message(self, seq: int) -> CoreMessage:
        return message(f"{self.prefix}-{seq}", seq, durable=self.durable, body=self.body)

    def _invoked(self) -> tuple[int, Callable[[str], None]]:
        """The next send's number, its invoke recorded; and how to record its outcome (``ok`` or ``info``)."""
        seq = self.sent
        self.sent += 1
        key = f"{self.prefix}-{seq}"
        self.history.invoke_send(self.process, key, producer="P1", seq=seq)

        def outcome(kind: str) -> None:
            (self.history.ok if kind == "ok" else self.history.info)(self.process, "send", key, producer="P1",
                                                                     seq=seq)

        return seq, outcome

    async def send_blocking(self) -> None:
        """Send and wait for the broker's answer (whether or not the Java client would block on this send)."""
        seq, outcome = self._invoked()
        try:
            future = await self.producer.send_async(self.message(seq))
            if future is None:  # no window and not a blocking send: the broker will not answer
                outcome("info")
                return
            await future
        except ClientError:
            outcome("info")
            raise
        outcome("ok")

    async def send_async(self) -> None:
        seq, outcome = self._invoked()
        future = await self.producer.send_async(self.message(seq))
        if future is None:  # no answer will come (no window, non-blocking): the outcome stays unknown
            outcome("info")
            return

        def settle(done: asyncio.Future[Packet]) -> None:
            outcome("info" if done.cancelled() or done.exception() is not None else "ok")

        future.add_done_callback(settle)
        self.pending.append(future)

    async def send(self, blocking: bool) -> None:
        await (self.send_blocking() if blocking else self.send_async())

    async def settled(self, timeout: float) -> None:
        """Every asynchronous answer in (errors are in the history as ``info``)."""
        if self.pending:
            await observed(asyncio.gather(*self.pending, return_exceptions=True), timeout,
                           f"the broker's answers to {len(self.pending)} asynchronous send(s)")


async def send_through_a_cut(sc: Scenario, evidence: CaseEvidence, run: Settings, *, cut_after: int, total: int,
                             blocking: bool) -> FailoverEvent:
    """The disrupt and fill of the cut-mid-batch scenario: cut the link when the ``cut_after``-th confirmable
    command of the session arrives, send ``total`` messages meanwhile, and wait for the client's failover and the
    answers it is owed; the failover event (its kind is the caller's to judge).  Notes the events and how long the
    restore took."""
    sc.proxy.add(CutAfter(cut_after, channel=sc.channel))
    started = time.monotonic_ns()
    for _ in range(total):
        await sc.flow.send(blocking)
    event = await wait_event(sc.connection, ("reattached", "recreated"), run.deadline(RESTORE_S))
    await sc.flow.settled(run.deadline(SETTLE_S))
    evidence.note("events", [(e.kind, e.detail) for e in sc.connection.events])
    evidence.note("restore_ms", (time.monotonic_ns() - started) / 1e6)
    return event


def confirmable_session_frames(log: Sequence[WireRecord], *, direction: str, conn: int | None = None,
                               channel: int | None = None,
                               actions: Iterable[str] = ("forwarded", "delayed", "duplicated")) -> list[WireRecord]:
    """Confirmable frames on session channels in the order they were sent (connection, then position: the
    log is in the order actions happened, and frames still queued at a cut are logged before ones written
    just ahead of it); by default only those that reached the peer."""
    wanted = set(actions)
    return sorted((r for r in log
            if r.direction == direction and r.confirmable and r.channel is not None
            and r.channel >= SESSION_CHANNEL_MIN and (channel is None or r.channel == channel)
            and (conn is None or r.conn == conn) and r.action in wanted), key=lambda r: (r.conn, r.seq))  # fmt: skip


def send_keys(records: Iterable[WireRecord]) -> list[str]:
    keys = []
    for record in records:
        if isinstance(record.packet, SessionSendMessage):
            keys.append(key_of(record.packet.message))
    return keys


@dataclass
class Scenario:
    """One case's setup through the proxy: a connection, a session (its channel), a queue and a flow."""

    proxy: FaultProxy
    connection: Connection
    session: Session
    queue: str
    flow: Flow
    history: History
    settings: ClientSettings
    #: What the case's wire-level checks found, judged with the history (see :meth:`judged`).
    problems: list[str] = field(default_factory=list)

    @property
    def channel(self) -> int:
        return self.session.core.channel_id

    @classmethod
    async def open(cls, proxy: FaultProxy, settings: ClientSettings, case_id: str, *, durable: bool,
                   body: bytes = b"m", transacted: bool = False) -> Scenario:
        connection = await connect(proxy.url, settings=settings)
        session = await connection.create_session(transacted=transacted)
        queue = queue_for(case_id)
        setup = session if not transacted else await connection.create_session()
        await setup.create_queue(queue, queue, routing_type=RoutingType.ANYCAST)
        history = History()
        flow = Flow(session.create_producer(queue), history, case_id, durable, body)
        return cls(proxy, connection, session, queue, flow, history, settings)

    def stray_answers(self) -> list[Packet]:
        """Correlated answers that matched no waiting call: the broker answered a command twice."""
        return list(self.session.core.calls.stray)

    def judged(self, url: str, evidence: CaseEvidence, run: Settings, *, sent: int | None = None,
               settings: ClientSettings | None = None) -> AbstractAsyncContextManager[None]:
        """The scenario's judging end (the kit's :func:`judged`): however the block ends, drain what the broker
        holds for the queue over a fresh connection straight to ``url`` (with ``settings``, by default the
        scenario's) and judge the history together with :attr:`problems`.  ``sent``: the messages the case sent,
        noted in the evidence (default: what the flow sent)."""

        async def drained() -> None:
            await drain_url(url, self.queue, self.history, settings or self.settings,
                            quiet=run.deadline(DRAIN_QUIET_S), timeout=run.deadline(SETTLE_S))
            evidence.note("messages_sent", self.flow.sent if sent is None else sent)

        return judged(self.history, evidence, before=drained, problems=self.problems)


@asynccontextmanager
async def proxied_scenario(target: Target, evidence: CaseEvidence, case_id: str, *, durable: bool, body: bytes = b"m",
                           transacted: bool = False, **changes: Any) -> AsyncIterator[Scenario]:
    """A case's :class:`Scenario` through a fault proxy in front of ``target`` (see :func:`proxied`), its client
    the REATTACHING profile with ``changes`` (the case's window, ttl, ...)."""
    settings = client_settings(target, REATTACHING, **changes)
    async with proxied(target, evidence) as proxy:
        yield await Scenario.open(proxy, settings, case_id, durable=durable, body=body, transacted=transacted)


@asynccontextmanager
async def producer_elsewhere(target: Target, settings: ClientSettings, sc: Scenario) -> AsyncIterator[Flow]:
    """A producer on its own connection straight to the broker (the consumer's link is the one the proxy
    cuts), writing into the scenario's history under the scenario's key prefix."""
    plain = dataclasses.replace(settings, reconnect_attempts=0)
    async with await connect(target.url, settings=plain) as connection:
        session = await connection.create_session()
        yield Flow(session.create_producer(sc.queue), sc.history, sc.flow.prefix, sc.flow.durable, sc.flow.body)


async def warm_up(target: Target) -> None:
    """One plain session on a freshly started broker before a case with a short connection-ttl: a cold JVM
    can take longer than such a ttl to answer the first handshake, which would fail the case's own
    connection before the fault it is about."""
    settings = client_settings(target, REATTACHING, reconnect_attempts=0)
    async with await connect(target.url, settings=settings) as connection:
        session = await connection.create_session()
        await session.close()


def _identity(packet: Packet | None) -> tuple[str, object] | None:
    """What makes a broker packet unique on a channel: an answer's correlation ID, a delivery's message key
    (credits grants and uncorrelated answers look alike, so they have none)."""
    correlation = getattr(packet, "correlation_id", None)
    if isinstance(correlation, int) and correlation != -1:
        return ("answer", correlation)
    message = getattr(packet, "message", None)
    if isinstance(message, CoreMessage) and message.properties.get("key") is not None:
        return ("delivery", key_of(message))
    return None


def server_replay_problems(processed: Sequence[WireRecord], missed: Sequence[WireRecord],
                           later: Sequence[WireRecord]) -> list[str]:
    """Judge a broker's replay on reattach (notes §9.4 step 4): its first confirmable packets on the session
    channel of the new connection (``later``, in order) must be what the client provably missed (``missed``:
    dropped on the way, in order), and nothing the client had processed (``processed``: forwarded to it before
    the cut) may come again.  Packets the broker had queued but never got onto the old wire may follow the
    missed ones; the proxy never saw them, so they are allowed.  Whether the replay precedes the
    REATTACH_SESSION_RESP is not judged here: the documents say nothing of it (Artemis 2.44.0 replays before
    answering, 2.28.0 after; the cases note which)."""
    problems = []
    head = [r.packet for r in later[:len(missed)]]
    if head != [r.packet for r in missed]:
        problems.append(f"the broker's replay began {[r.type_name for r in later[:len(missed) + 2]]}; the client "
                        f"had missed {[r.type_name for r in missed]}")
    had = {i for r in processed if (i := _identity(r.packet)) is not None}
    again = [i for r in later if (i := _identity(r.packet)) is not None and i in had]
    if again:
        problems.append(f"the broker re-sent {len(again)} packet(s) the client had already processed: {again[:5]}")
    return problems


async def outage(proxy: FaultProxy, seconds: float) -> None:
    """Reset the link and keep the proxy's listener closed for ``seconds`` (the fault's length, not a wait for
    an outcome): the client's reconnect attempts are refused until it reopens, so the broker has handled the
    drop (or let the ttl pass) before the client can reattach."""
    if seconds <= 0:
        assert proxy.cut_all() >= 1
        return
    await proxy.pause_listening()
    try:
        assert proxy.cut_all() >= 1
        await asyncio.sleep(seconds)
    finally:
        await proxy.resume_listening()
