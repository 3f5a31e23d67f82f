"""One example, run: the workload through a fault proxy in front of a broker, the schedule's rules installed
before the operations they name, a Jepsen-style history of every send, receipt and acknowledgement, a final
drain straight from the broker, and the oracle's judgement.

Every wait has a deadline on the event loop's monotonic clock.  What the broker does under the faults is
recorded, never raised: a client error during the workload is an operation whose outcome is unknown.  An
exception anywhere else, including one that escapes to the event loop from a callback of the kit's client or
proxy, is the kit's own error (``kit-error``), and a run that could not be judged (the broker
unreachable without faults, the example over its deadline) is ``indeterminate``: neither is ever a finding.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import traceback
import uuid
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from cck.codec import (
    ARTEMIS_2_7_0_VERSION,
    CURRENT_VERSION,
    CoreMessage,
    CreateQueueMessage,
    CreateQueueMessage_V2,
    Packet,
    RoutingType,
    TypedProperties,
    decode_frame,
)
from cck.conformance.faults import FaultProxy, RefuseConnections, WireRecord
from cck.conformance.oracles import History, Op, OpType
from cck.reference.client import (
    CallTimeout,
    ClientError,
    ClientSettings,
    Connection,
    Consumer,
    Delivery,
    Producer,
    Session,
    connect,
)

from ._client_rules import CallEnd, ClientEntry, LagSample, ProxyAttempt, judge_client, watch_loop, with_client_verdict
from ._faults import rule_of
from ._judge import Judgement, Unanswered, judge
from ._model import (
    IDLE_MS,
    QUEUES,
    Commit,
    CreateConsumer,
    CreateExistingQueue,
    CreateProducer,
    CutSettled,
    Example,
    Idle,
    Operation,
    Receive,
    RestartBroker,
    Rollback,
    Send,
    Workload,
    Xa,
)
from ._redelivery import COMMIT, ROLLBACK, TX_ACK
from ._restart import (
    Restarter,
    RestartFailed,
    RestartRecord,
    SentMessage,
    gone_with_restart,
    judge_restart,
    restart_broker,
)
from ._security_model import AnyExample
from ._settle import HoldAfterCut, settle
from ._wire import judge_wire, with_wire
from ._xa_oracle import XaCall, judge_xa
from ._xa_runner import XaSide, with_xa

__all__ = ["Limits", "Outcome", "OutcomeKind", "dropped_sends", "run_example", "run_example_sync"]

#: ``known``: a finding whose every line cites a clause the exploration was told to set aside (``--ignore-clause``:
#: a known deviation of the target), recorded and not shrunk.
OutcomeKind = Literal["clean", "finding", "known", "indeterminate", "kit-error"]
T = TypeVar("T")

#: The message property that marks the drain's fence (never a key).
_FENCE = "cck_explore_fence"
#: The client's failover events after which a call in flight may end unanswered by design.
_NOT_REATTACHED = frozenset({"recreated", "gave-up"})


@dataclass(frozen=True, slots=True)
class Limits:
    """Deadlines (seconds) and client timings of one run."""

    call_timeout_ms: int = 3_000
    failover_timeout_ms: int = 6_000
    retry_interval_ms: int = 50
    #: One operation of the workload, however many messages it sends or receives.
    operation_s: float = 15.0
    #: How long one receive waits for a message that may not be there.
    receive_s: float = 0.3
    #: Asynchronous sends' answers after the last operation; closing the workload's sessions.
    settle_s: float = 8.0
    #: Until the broker shows no consumer on a queue (the workload's sessions are gone from it).
    consumers_gone_s: float = 5.0
    #: The final drain: all of it, and the quiet window that ends it when no fence could be sent.
    drain_s: float = 20.0
    quiet_s: float = 0.5
    #: The whole example.
    example_s: float = 90.0
    #: One broker restart (and the queue query after it); the example's deadline grows by as much per restart.
    restart_s: float = 60.0
    #: How long a settled cut refuses reconnects while waiting for the broker to close the cut sessions.
    settle_hold_s: float = 1.0


@dataclass(frozen=True)
class Outcome:
    """What one run of an example came to."""

    example: AnyExample
    kind: OutcomeKind
    elapsed_s: float
    judgement: Judgement | None = None
    history: tuple[Op, ...] = ()
    #: The client's failover events, as (kind, detail).
    events: tuple[tuple[str, str], ...] = ()
    #: The proxy's wire log and connection attempts, as JSON objects.
    wire: tuple[dict[str, Any], ...] = ()
    attempts: tuple[dict[str, Any], ...] = ()
    #: When each operation began, each fault was installed and each phase (settle, drain) began, as JSON
    #: objects on the clock the history and the proxy use (``time.monotonic_ns``): ``ts_ns``, ``event``
    #: (``operation``, ``fault`` or ``phase``), ``text`` and, for operations, ``index``.
    timeline: tuple[dict[str, Any], ...] = ()
    #: Why the run is indeterminate or a kit error (a traceback for the latter).
    reason: str = ""
    #: How each of the proxy's connections ended (who ended it first, how, why), as JSON objects.
    ends: tuple[dict[str, Any], ...] = ()
    #: The client's failover events and failure-listener calls in the order it reported them, with when
    #: (``ts_ns``, ``kind``, ``detail``), as JSON objects: what the client's rules judge with ``attempts``.
    client_log: tuple[dict[str, Any], ...] = ()

    def describe(self) -> str:
        if self.kind in ("clean", "finding", "known") and self.judgement is not None:
            return f"{self.kind}: {self.judgement.describe()}"
        return f"{self.kind}: {self.reason.strip().splitlines()[-1] if self.reason else '?'}"

    def to_dict(self) -> dict[str, Any]:
        """The run's summary (the history and wire log are written separately, as JSON Lines)."""
        return {"kind": self.kind, "elapsed_s": round(self.elapsed_s, 3), "example": self.example.to_dict(),
                "judgement": None if self.judgement is None else self.judgement.to_dict(),
                "events": [list(e) for e in self.events], "reason": self.reason}


class _Indeterminate(Exception):
    """The run cannot be judged (not the broker's fault as far as anyone can tell, and not the kit's)."""


def _host_port(url: str) -> tuple[str, int]:
    host, _, port = url.removeprefix("tcp://").rpartition(":")
    return host.strip("[]"), int(port)


def _settings(example: Example, limits: Limits, protocol_version: int | None) -> ClientSettings:
    config = example.workload.config
    version = CURRENT_VERSION if protocol_version is None else min(CURRENT_VERSION, protocol_version)
    # the reconnection schedule is the example's (``Limits.retry_interval_ms`` is the first choice of its table)
    settings = ClientSettings(
        version=version, reconnect_attempts=config.reconnect_attempts, retry_interval_ms=config.retry_interval_ms,
        retry_interval_multiplier=config.retry_interval_multiplier,
        max_retry_interval_ms=config.max_retry_interval_ms, initial_connect_attempts=config.initial_connect_attempts,
        call_timeout_ms=limits.call_timeout_ms,
        call_failover_timeout_ms=limits.failover_timeout_ms, confirmation_window_size=config.window,
        connection_ttl_ms=config.connection_ttl_ms, client_failure_check_period_ms=config.connection_ttl_ms // 4,
        block_on_acknowledge=True)
    if version < ARTEMIS_2_7_0_VERSION and config.window != -1:
        # Below 130 a windowed send is answered only by a confirmation; ask for an answer to every send.
        settings = dataclasses.replace(settings, block_on_non_durable_send=True)
    return settings


#: The history's process for the messages put on the queues before the workload (``Workload.preloaded``).
PRELOAD = "preload"


def _message(key: str, seq: int, durable: bool) -> CoreMessage:
    return CoreMessage(key.encode(), durable=durable, properties=TypedProperties.of(key=key, seq=seq))


def _key_of(delivery: Delivery) -> str | None:
    return _message_key(delivery.message)


def _message_key(message: CoreMessage) -> str | None:
    value = message.properties.get("key")
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def dropped_sends(records: Iterable[WireRecord]) -> frozenset[str]:
    """The keys whose every SESS_SEND frame toward the broker the proxy dropped: such a message never reached the
    broker, so its loss is the fault's (a transaction's sends get no answer of their own, and without a
    confirmation window nothing tells the client; TCP itself would never drop one frame and pass the next)."""
    reached: set[str] = set()
    dropped: set[str] = set()
    for record in records:
        message = getattr(record.packet, "message", None)
        if record.direction != "c2s" or record.type_name != "SESS_SEND" or not isinstance(message, CoreMessage):
            continue
        key = _message_key(message)
        if key is not None:
            (reached if record.reached_peer else dropped).add(key)
    return frozenset(dropped - reached)


#: How often an idle spell looks whether the periodic flushes are done (a fraction of the 2 s ttl check).
IDLE_POLL_S = 0.05


def _queue_creation(frame: bytes) -> bool:
    return isinstance(decode_frame(frame).packet, CreateQueueMessage_V2 | CreateQueueMessage)


def _flushed(session: Session, pings: bool, first_unconfirmed: int) -> bool:
    """Nothing of ``session`` is left for a periodic flush: the broker confirmed every command it was sent, or sent
    a confirmation since the idle spell began, when ``first_unconfirmed`` was the first command it had not
    confirmed (nothing is sent during the spell, so that confirmation is the flush), or all the client still holds
    are queue creations, which the workload makes only of queues that exist: a refused command stays in the
    client's cache, as the broker does not count it, and would otherwise hold the spell to its end.  And
    (``pings``: the client pings within an idle spell) the client confirmed every broker packet it counted."""
    core = session.core
    if core.closed:
        return True
    window = core.send_window
    confirmed = (not window.cache or window.first_stored > first_unconfirmed
                 or all(_queue_creation(frame) for frame in window.cache))
    return confirmed and (not pings or core.receive_window.received_bytes == 0)


def _is_fence(delivery: Delivery, token: str) -> bool:
    value = delivery.message.properties.get(_FENCE)
    return (value.decode() if isinstance(value, bytes) else value) == token


@dataclass
class _Side:
    """One of the workload's two sessions (plain: auto-commit; tx: local transactions) and what it made."""

    name: str
    session: Session
    producers: dict[int, Producer] = field(default_factory=dict)
    consumers: dict[int, Consumer] = field(default_factory=dict)
    seqs: dict[int, int] = field(default_factory=dict)
    #: Transacted side: sends since the last commit or rollback, and whether each raised.
    open_sends: list[tuple[str, str, int, bool]] = field(default_factory=list)


class _Workload:
    """Carries out one workload's operations on a connection, writing the history."""

    def __init__(self, run_id: str, connection: Connection, plain: _Side, tx: _Side | None, history: History,
                 limits: Limits) -> None:
        self.run_id = run_id
        self.connection = connection
        self.plain = plain
        self.tx = tx
        self.history = history
        self.limits = limits
        #: Asynchronous sends whose answers are awaited, each with its message's key.
        self.pending: dict[asyncio.Future[Packet], str] = {}
        #: The calls no answer reached (the oracle judges them with the failover events).
        self.unanswered: list[Unanswered] = []
        #: Every message a send was invoked for, by key (what the restart rules judge by).
        self.sent: dict[str, SentMessage] = {}
        #: Every call that ended without an answer, with when (the client's rules judge them after a give-up).
        self.call_ends: list[CallEnd] = []
        self._keys = 0
        #: The XA session's operations, when the workload has any.
        self.xa: XaSide | None = None

    async def idle(self) -> None:
        """Up to :data:`IDLE_MS` with the connection up, so that the periodic flushes have to confirm partly filled
        windows: the broker's ttl check (every command of the workload's sessions confirmed, or a confirmation
        sent since the spell began) and, when the client
        pings within that time, the client's flush with its PING (every broker packet it counted confirmed).  It
        ends as soon as both are done (the wait is for them, not for a time); a flush that never comes keeps the
        connection up for the whole spell, which is what the wire rules judge."""
        loop = asyncio.get_running_loop()
        end = loop.time() + IDLE_MS / 1000
        pings = self.connection.settings.client_failure_check_period_ms < IDLE_MS
        sessions = [side.session for side in (self.plain, self.tx) if side is not None]
        sessions += [self.xa.session] if self.xa is not None else []
        began = [s.core.send_window.first_stored for s in sessions]
        while not all(_flushed(s, pings, first) for s, first in zip(sessions, began, strict=True)):
            left = end - loop.time()
            if left <= 0:
                return
            await asyncio.sleep(min(IDLE_POLL_S, left))

    def record_sent(self, key: str, queue: int, durable: bool) -> None:
        """Note a message whose send was invoked (the restart rules judge by them)."""
        self.sent[key] = SentMessage(queue, durable, time.monotonic_ns())

    def no_answer(self, error: BaseException, request: str, key: str | None = None) -> None:
        """Note ``request`` as unanswered when ``error`` says no answer came in time.  The wait for a reconnection
        to finish is not a call the broker failed to answer (the call was never sent), so it is left out."""
        self.call_ends.append(CallEnd(request, time.monotonic_ns(), isinstance(error, TimeoutError | CallTimeout)))
        if isinstance(error, TimeoutError) or (isinstance(error, CallTimeout)
                                               and "reconnection" not in error.request):
            self.unanswered.append(Unanswered(request, key))

    def queue(self, index: int) -> str:
        return queue_name(self.run_id, index)

    def side(self, tx: bool) -> _Side:
        if tx:
            assert self.tx is not None, "a transacted operation without the transacted session"
            return self.tx
        return self.plain

    def producer(self, side: _Side, queue: int) -> Producer:
        if queue not in side.producers:
            side.producers[queue] = side.session.create_producer(self.queue(queue))
        return side.producers[queue]

    async def consumer(self, side: _Side, queue: int) -> Consumer:
        if queue not in side.consumers:
            try:
                side.consumers[queue] = await side.session.create_consumer(self.queue(queue))
            except ClientError as exc:
                self.no_answer(exc, "create-consumer")
                raise
        return side.consumers[queue]

    async def do(self, op: Operation) -> None:
        if isinstance(op, CreateProducer):
            self.producer(self.side(op.tx), op.queue)
        elif isinstance(op, CreateConsumer):
            await self.consumer(self.side(op.tx), op.queue)
        elif isinstance(op, Send):
            await self.send(op)
        elif isinstance(op, Receive):
            await self.receive(op)
        elif isinstance(op, Commit):
            await self.end_transaction(commit=True)
        elif isinstance(op, Rollback):
            await self.end_transaction(commit=False)
        elif isinstance(op, Idle):
            await self.idle()
        elif isinstance(op, CreateExistingQueue):
            # refused (BrokerRefused, a ClientError the caller records nothing for): the queue exists
            name = self.queue(op.queue)
            await self.plain.session.create_queue(name, name, routing_type=RoutingType.ANYCAST)
        elif isinstance(op, Xa):
            assert self.xa is not None, "an XA operation without the XA session"
            await self.xa.do(op)

    async def send(self, op: Send) -> None:
        side = self.side(op.tx)
        producer = self.producer(side, op.queue)
        name = f"{side.name}-{QUEUES[op.queue]}"
        for _ in range(op.count):
            seq = side.seqs.get(op.queue, 0)
            side.seqs[op.queue] = seq + 1
            self._keys += 1
            key = f"{self.run_id}-{self._keys}"
            self.history.invoke_send(side.name, key, producer=name, seq=seq)
            self.record_sent(key, op.queue, op.durable)
            try:
                future = await producer.send_async(_message(key, seq, op.durable))
            except ClientError as exc:
                self.no_answer(exc, "credits", key)
                if op.tx:
                    side.open_sends.append((key, name, seq, True))
                else:
                    self.history.info(side.name, "send", key, producer=name, seq=seq)
                continue
            if op.tx:
                # Its outcome is the transaction's (the answer, if any, says only that the broker has it in there).
                side.open_sends.append((key, name, seq, False))
                if future is not None:
                    future.add_done_callback(_quiet)
                continue
            if future is None:  # no answer will come (no window, a non-blocking send): unknown
                self.history.info(side.name, "send", key, producer=name, seq=seq)
                continue
            if op.blocking:
                try:
                    await asyncio.wait_for(asyncio.shield(future), self.limits.call_timeout_ms / 1000 * 2)
                except (ClientError, TimeoutError) as exc:
                    self.no_answer(exc, "send", key)
                    future.add_done_callback(_quiet)
                    self.history.info(side.name, "send", key, producer=name, seq=seq)
                else:
                    self.history.ok(side.name, "send", key, producer=name, seq=seq)
            else:
                future.add_done_callback(self._settler(side.name, key, name, seq))
                self.pending[future] = key

    def _settler(self, process: str, key: str, producer: str, seq: int) -> Any:
        def settle(done: asyncio.Future[Packet]) -> None:
            error = None if done.cancelled() else done.exception()
            if error is not None:
                self.no_answer(error, "send", key)
            failed = done.cancelled() or error is not None
            (self.history.info if failed else self.history.ok)(process, "send", key, producer=producer, seq=seq)

        return settle

    async def receive(self, op: Receive) -> None:
        side = self.side(op.tx)
        try:
            consumer = await self.consumer(side, op.queue)
        except ClientError:
            return
        for _ in range(op.count):
            started = time.monotonic_ns()
            try:
                delivery = await consumer.receive(self.limits.receive_s)
            except ClientError:
                return
            if delivery is None:
                ended = time.monotonic_ns()
                if ended - started >= self.limits.receive_s * 1e9:  # its wait ran out (not a closed consumer)
                    self.call_ends.append(CallEnd("receive", ended, True, started))
                return
            key = _key_of(delivery)
            if key is None:
                raise AssertionError(f"a message without a key on {self.queue(op.queue)}: {delivery!r}")
            count = delivery.delivery_count
            self.history.received(side.name, key, delivery_count=count, redelivered=count > 1)
            if not op.ack:
                continue  # left to the session's end (or the transaction's)
            if op.tx:
                # Acknowledged in the transaction: settled by its commit or rollback, so not an ack but a tx-ack
                # (what the transaction rules of ``_redelivery`` read).
                self.history.invoke(side.name, TX_ACK, key)
                try:
                    await consumer.individual_acknowledge(delivery)
                except ClientError:
                    self.history.info(side.name, TX_ACK, key)
                else:
                    self.history.ok(side.name, TX_ACK, key)
                continue
            self.history.invoke_ack(side.name, key)
            try:
                await consumer.individual_acknowledge(delivery)
            except ClientError as exc:
                self.no_answer(exc, "ack", key)
                self.history.info(side.name, "ack", key)
            else:
                self.history.ok(side.name, "ack", key)

    async def end_transaction(self, *, commit: bool) -> None:
        side = self.side(True)
        sends, side.open_sends = side.open_sends, []
        self.history.invoke(side.name, COMMIT if commit else ROLLBACK, None)
        try:
            await (side.session.commit() if commit else side.session.rollback())
        except ClientError as exc:
            self.no_answer(exc, "commit" if commit else "rollback")
            ended: OpType | None = None  # the transaction's outcome is unknown
            self.history.info(side.name, COMMIT if commit else ROLLBACK, None)
        else:
            ended = "ok" if commit else "fail"
            self.history.ok(side.name, COMMIT if commit else ROLLBACK, None)
        for key, name, seq, raised in sends:
            outcome: OpType = "info" if ended is None or raised else ended
            self.history.op(side.name, outcome, "send", key, producer=name, seq=seq)

    def abandon_transaction(self) -> None:
        """Sends of a transaction still open at the end: the close rolls it back, but say only "unknown"."""
        if self.tx is not None:
            for key, name, seq, _ in self.tx.open_sends:
                self.history.info(self.tx.name, "send", key, producer=name, seq=seq)
            self.tx.open_sends = []


def _quiet(future: asyncio.Future[Packet]) -> None:
    """Retrieve an abandoned future's exception, so asyncio does not log it as never retrieved."""
    if not future.cancelled():
        future.exception()


def queue_name(run_id: str, index: int) -> str:
    return f"cck.explore.{run_id}.{QUEUES[index]}"


async def _bounded(awaitable: Awaitable[T], seconds: float, what: str) -> T:
    try:
        return await asyncio.wait_for(awaitable, seconds)
    except TimeoutError:
        raise _Indeterminate(f"{what} took longer than {seconds:g} s") from None


async def _setup(url: str, run_id: str, settings: ClientSettings, limits: Limits, workload: Workload,
                 history: History, sent: dict[str, SentMessage]) -> None:
    """The example's queues, over a plain connection straight to the broker, and the messages the workload has
    preloaded (``Workload.preloaded``): durable, each sent blocking and recorded as an answered send of process
    ``preload`` (and in ``sent``)."""
    plain = dataclasses.replace(settings, reconnect_attempts=0, block_on_durable_send=True)
    try:
        async with await _bounded(connect(url, settings=plain, connect_timeout=limits.settle_s), limits.settle_s,
                                  "connecting to the broker") as connection:
            session = await connection.create_session()
            for index in range(len(QUEUES)):
                name = queue_name(run_id, index)
                await session.create_queue(name, name, routing_type=RoutingType.ANYCAST,
                                           durable=index not in workload.volatile)
            for index, count in sorted(workload.preloaded.items()):
                producer = session.create_producer(queue_name(run_id, index))
                for seq in range(count):
                    key = f"{run_id}-p{index}.{seq}"
                    name = f"preload-{QUEUES[index]}"
                    history.invoke_send(PRELOAD, key, producer=name, seq=seq)
                    sent[key] = SentMessage(index, True, time.monotonic_ns())
                    await _bounded(producer.send(_message(key, seq, True)), limits.settle_s, "preloading a message")
                    history.ok(PRELOAD, "send", key, producer=name, seq=seq)
            await session.close()
    except ClientError as exc:
        raise _Indeterminate(f"setting up the queues straight on the broker failed: {exc!r}") from exc


async def _drain(url: str, run_id: str, settings: ClientSettings, history: History, limits: Limits) -> bool:
    """Empty every queue over a plain connection straight to the broker, recording receipts and confirmed
    acknowledgements; whether the drain was complete: no consumer of the workload left on any queue, and each
    queue read up to a fence sent to its tail (or, where no fence could be sent, until a quiet window)."""
    plain = dataclasses.replace(settings, reconnect_attempts=0, block_on_acknowledge=True,
                                confirmation_window_size=-1)
    loop = asyncio.get_running_loop()
    complete = True
    try:
        async with await _bounded(connect(url, settings=plain, connect_timeout=limits.settle_s), limits.settle_s,
                                  "connecting to the broker for the drain") as connection:
            session = await connection.create_session()
            session.start()
            for index in range(len(QUEUES)):
                name = queue_name(run_id, index)
                gone_by = loop.time() + limits.consumers_gone_s
                while (query := await session.queue_query(name)).consumer_count and loop.time() < gone_by:
                    await asyncio.sleep(0.05)
                if query.consumer_count:
                    complete = False  # a session of the workload still holds messages: nothing is judged lost
                if not query.exists:
                    # a non-durable queue a restart took (or a durable one: a finding of the restart rules); a
                    # consumer would be refused, and nothing of it can be read
                    continue
                token = uuid.uuid4().hex
                if query.exists and not query.consumer_count:
                    await session.create_producer(name).send(
                        CoreMessage(b"", priority=0, properties=TypedProperties.of({_FENCE: token})))
                    fenced = True
                else:
                    fenced = False
                consumer = await session.create_consumer(name)
                end = loop.time() + limits.drain_s
                seen_fence = False
                while loop.time() < end:
                    wait = min(limits.drain_s if fenced else limits.quiet_s, end - loop.time())
                    delivery = await consumer.receive(max(wait, 0.0))
                    if delivery is None:
                        break
                    if _is_fence(delivery, token):
                        await consumer.individual_acknowledge(delivery)
                        seen_fence = True
                        break
                    key = _key_of(delivery)
                    if key is None:
                        raise AssertionError(f"a message without a key on {name}: {delivery!r}")
                    count = delivery.delivery_count
                    history.received("drain", key, delivery_count=count, redelivered=count > 1)
                    history.invoke_ack("drain", key)
                    await consumer.individual_acknowledge(delivery)
                    history.ok("drain", "ack", key)
                if fenced and not seen_fence:
                    complete = False
                await consumer.close()
            await session.close()
    except ClientError as exc:
        raise _Indeterminate(f"the final drain, straight from the broker, failed: {exc!r}") from exc
    return complete


def _mark(timeline: list[dict[str, Any]], event: str, text: str, **extra: Any) -> None:
    timeline.append({"ts_ns": time.monotonic_ns(), "event": event, "text": text, **extra})


async def _run(url: str, example: Example, limits: Limits, protocol_version: int | None, history: History,
               proxy_box: list[FaultProxy], events: list[tuple[str, str]], timeline: list[dict[str, Any]],
               unanswered: list[Unanswered], restarter: Restarter | None = None,
               restarts: list[RestartRecord] | None = None,
               sent: dict[str, SentMessage] | None = None, client_log: list[ClientEntry] | None = None,
               call_ends: list[CallEnd] | None = None,
               xa_calls: list[XaCall] | None = None) -> bool:
    """The run proper; whether the drain was complete.  Fills ``events`` with the client's failover events,
    ``unanswered`` with the workload's calls no answer reached, ``restarts`` with the broker restarts, ``sent``
    with the messages sent, ``client_log`` with the client's events and failure-listener calls as it reported
    them, ``call_ends`` with the calls that ended without an answer and ``xa_calls`` with the XA calls."""
    client_log = [] if client_log is None else client_log
    call_ends = [] if call_ends is None else call_ends
    run_id = uuid.uuid4().hex[:8]
    settings = _settings(example, limits, protocol_version)
    await _setup(url, run_id, settings, limits, example.workload, history, {} if sent is None else sent)
    host, port = _host_port(url)
    proxy = FaultProxy(host, port, stop_timeout=2.0)
    proxy_box.append(proxy)
    await proxy.start()
    graceful = True
    connection: Connection | None = None
    work: _Workload | None = None
    if example.schedule.refuse_initial:
        proxy.add(RefuseConnections(count=example.schedule.refuse_initial))
        _mark(timeline, "fault", f"refuse {example.schedule.refuse_initial} initial connect(s)")
    settlers: list[tuple[asyncio.Task[None], HoldAfterCut]] = []
    try:
        try:
            try:
                connection = await _bounded(connect(proxy.url, settings=settings, connect_timeout=limits.settle_s),
                                            limits.settle_s, "connecting through the proxy")
            except ClientError as exc:
                if example.schedule.refuse_initial < max(1, settings.initial_connect_attempts):
                    raise
                # every initial attempt refused: the connect must fail; the workload sent nothing, so only what was
                # preloaded is to be drained
                client_log.append(ClientEntry(time.monotonic_ns(), "connect-failed", str(exc)))
                if not example.workload.preloaded:
                    return True
                _mark(timeline, "phase", "final drain, straight from the broker (not through the proxy)", drain=True)
                return await _drain(url, run_id, settings, history, limits)
            client_log.append(ClientEntry(time.monotonic_ns(), "connected"))
            connection.add_failure_listener(
                lambda error: client_log.append(ClientEntry(time.monotonic_ns(), "listener", str(error))))
            connection.add_event_listener(
                lambda event: client_log.append(ClientEntry(time.monotonic_ns(), event.kind, event.detail)))
            plain = _Side("plain", await connection.create_session())
            plain.session.start()
            tx = None
            if example.workload.transacted:
                tx = _Side("tx", await connection.create_session(transacted=True))
                tx.session.start()
            work = _Workload(run_id, connection, plain, tx, history, limits)
            if example.workload.xa:
                work.xa = XaSide(run_id, await connection.create_session(xa=True), history,
                                 [] if xa_calls is None else xa_calls, limits.receive_s, work.queue,
                                 work.no_answer, work.record_sent)
                work.xa.session.start()
        except ClientError as exc:
            raise _Indeterminate(f"connecting through the proxy (before any fault) failed: {exc!r}") from exc
        operations = example.workload.operations

        async def restart(fault: RestartBroker) -> None:
            assert restarter is not None, "run_example refuses an example with a restart without a restarter"
            assert restarts is not None
            # a phase, not a fault: no proxy rule carries it out (the diagram draws faults as the proxy's rules)
            _mark(timeline, "phase", f"{fault.describe()}: the broker is {'stopped' if fault.graceful else 'killed'} "
                                     "and started again with its data; the proxy refuses reconnects meanwhile")
            names = tuple(queue_name(run_id, i) for i in range(len(QUEUES)))
            try:
                record = await restart_broker(restarter, fault.graceful, proxy, url, names, settings,
                                              limits.restart_s)
            except RestartFailed as exc:
                raise _Indeterminate(str(exc)) from exc
            restarts.append(record)
            if work is not None and work.xa is not None:
                work.xa.restarted()  # the XA rules judge the branches' fate across it [dtx.prepared-survives]
            _mark(timeline, "phase", f"broker back after {(record.ended_ns - record.started_ns) / 1e9:.1f} s; "
                                     f"queues there: {', '.join(QUEUES[i] for i in record.present) or 'none'}")

        for index, op in enumerate(operations):
            for fault in example.schedule.faults:
                if isinstance(fault, RestartBroker):
                    if fault.at == index:
                        await restart(fault)
                elif min(fault.at, len(operations) - 1) == index:
                    handle = proxy.add(rule_of(fault))
                    _mark(timeline, "fault", fault.describe())
                    if isinstance(fault, CutSettled):
                        hold = HoldAfterCut(handle)
                        hold_handle = proxy.add(hold)
                        queues = [queue_name(run_id, i) for i in range(len(QUEUES))]
                        settlers.append((asyncio.create_task(settle(
                            proxy, hold, hold_handle, url, settings, queues, history, limits.settle_hold_s,
                            limits.example_s,
                            lambda text: _mark(timeline, "phase", text))), hold))
            _mark(timeline, "operation", op.describe(), index=index)
            # a client error is the broker's or the fault's doing: recorded as unknown outcomes where it matters
            with contextlib.suppress(ClientError, TimeoutError):
                await asyncio.wait_for(work.do(op), limits.operation_s)
        for fault in example.schedule.restarts:
            if fault.at >= len(operations):  # after the workload, before its sessions close
                await restart(fault)
        _mark(timeline, "phase", "waiting for asynchronous answers; then the rules are cleared and the sessions "
                                 "closed")
        if work.pending:
            await asyncio.wait(set(work.pending), timeout=limits.settle_s)
            work.unanswered.extend(Unanswered("send", key) for future, key in work.pending.items()
                                   if not future.done())
        proxy.clear()
        work.abandon_transaction()
        if work.xa is not None:
            work.xa.abandon()
            try:
                await asyncio.wait_for(work.xa.session.close(), limits.settle_s)
            except (ClientError, TimeoutError):
                graceful = False
        for side in (plain, tx):
            if side is None:
                continue
            try:
                await asyncio.wait_for(side.session.close(), limits.settle_s)
            except (ClientError, TimeoutError):
                graceful = False  # the broker may still hold this session's messages
    finally:
        for task, hold in settlers:  # a settle under way is bounded by settle_hold_s; one still waiting for its cut
            if not task.done() and hold.cut.spent:  # ends
                await asyncio.wait({task}, timeout=limits.settle_hold_s * 2)
            task.cancel()
        await asyncio.gather(*(task for task, _ in settlers), return_exceptions=True)
        if work is not None:
            unanswered.extend(work.unanswered)
            if sent is not None:
                sent.update(work.sent)
            call_ends.extend(work.call_ends)
        if connection is not None:
            events.extend((e.kind, e.detail) for e in connection.events)
            with contextlib.suppress(ClientError, TimeoutError):
                await asyncio.wait_for(connection.close(), limits.settle_s)
        for future in work.pending if work is not None else ():
            if not future.done():
                future.cancel()
        await proxy.stop()
    _mark(timeline, "phase", "final drain, straight from the broker (not through the proxy)", drain=True)
    complete = await _drain(url, run_id, settings, history, limits)
    if work is not None and work.xa is not None:
        await work.xa.final_recover(url, settings, limits.settle_s)
    return graceful and complete


async def run_example(url: str, example: Example, *, limits: Limits = Limits(),
                      protocol_version: int | None = None, restarter: Restarter | None = None) -> Outcome:
    """Run ``example`` against the broker at ``url`` (``tcp://host:port``, reached through a fault proxy of
    its own) and judge it.  Never raises for what the broker does; see the module's docstring.  ``restarter``
    restarts that broker (None: the target cannot; an example with a restart is then a ValueError)."""
    if example.schedule.restarts and restarter is None:
        raise ValueError(f"the example restarts the broker, which this target cannot: {example.describe()}")
    started = time.monotonic()
    restarts: list[RestartRecord] = []
    sent: dict[str, SentMessage] = {}
    history = History()
    proxies: list[FaultProxy] = []
    events: list[tuple[str, str]] = []
    timeline: list[dict[str, Any]] = []
    unanswered: list[Unanswered] = []
    client_log: list[ClientEntry] = []
    call_ends: list[CallEnd] = []
    lag: list[LagSample] = []
    xa_calls: list[XaCall] = []

    def outcome(kind: OutcomeKind, judgement: Judgement | None = None, reason: str = "",
                escaped: Sequence[str] = ()) -> Outcome:
        if escaped:
            # An exception in one of the kit's callbacks (its client's timers, the proxy's protocols): whatever
            # the history says, the kit misbehaved, so the run is the kit's error and judges nothing.
            kind, judgement = "kit-error", None
            reason = (f"{len(escaped)} exception(s) escaped to the event loop; the first:\n{escaped[0]}"
                      + (f"\n(the run itself: {reason})" if reason else ""))
        proxy = proxies[0] if proxies else None
        return Outcome(example, kind, time.monotonic() - started, judgement, tuple(history), tuple(events),
                       tuple(r.to_json() for r in proxy.wire_log) if proxy else (),
                       tuple(a.to_json() for a in proxy.attempts) if proxy else (), tuple(timeline), reason,
                       ends=tuple(e.to_json() for e in proxy.ends) if proxy else (),
                       client_log=tuple({"ts_ns": e.ts_ns, "kind": e.kind, "detail": e.detail} for e in client_log))

    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    escaped: list[str] = []

    def unhandled(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, ClientError | OSError | asyncio.CancelledError):
            return  # a failure the history records (or a socket reset by a fault), left unretrieved
        text = context.get("message", "an unhandled exception on the event loop")
        if isinstance(exc, BaseException):
            text += "\n" + "".join(traceback.format_exception(exc))
        escaped.append(text)

    loop.set_exception_handler(unhandled)
    probe = asyncio.ensure_future(watch_loop(lag))  # the load the client's timing rules allow for
    try:
        deadline = limits.example_s + limits.restart_s * len(example.schedule.restarts)
        complete = await asyncio.wait_for(_run(url, example, limits, protocol_version, history, proxies, events,
                                               timeline, unanswered, restarter, restarts, sent, client_log,
                                               call_ends, xa_calls), deadline)
        # A refused command is not counted by the broker (from protocol 130) but is by the kit's client, so after
        # a reattach their numbering differs as after a dropped counted frame: the client may replay a command the
        # broker already has.
        refused = any(isinstance(op, CreateExistingQueue) for op in example.workload.operations)
        judgement = judge(history, drain_complete=complete,
                          desynchronised=example.schedule.desynchronises or refused,
                          unanswered=unanswered, recreated=any(kind in _NOT_REATTACHED for kind, _ in events)
                          # a settled cut holds the client's reconnects: its calls in flight are not judged either
                          or any(isinstance(f, CutSettled) for f in example.schedule.faults),
                          dropped=dropped_sends(r for proxy in proxies for r in proxy.wire_log),
                          gone=gone_with_restart(sent, restarts, example.workload.volatile),
                          restarted=bool(restarts),
                          failures=sum(kind in ("failed", "attempt-failed") for kind, _ in events))
        judgement = judge_restart(judgement, history, sent, (r for proxy in proxies for r in proxy.wire_log),
                                  restarts, example.workload.volatile, len(QUEUES))
        probe.cancel()
        attempts = [ProxyAttempt(a.ts_ns, a.outcome == "refused") for proxy in proxies for a in proxy.attempts]
        judgement = with_client_verdict(judgement, judge_client(example.workload.config,
                                                                example.schedule.refuse_initial, attempts,
                                                                client_log, call_ends, lag))
        version = CURRENT_VERSION if protocol_version is None else min(CURRENT_VERSION, protocol_version)
        judgement = with_wire(judgement, judge_wire((r for proxy in proxies for r in proxy.wire_log),
                                                    window=example.workload.config.window,
                                                    refusals_counted=version < ARTEMIS_2_7_0_VERSION))
        if xa_calls:
            judgement = with_xa(judgement, judge_xa(list(history), xa_calls, drain_complete=complete,
                                                    desynchronised=example.schedule.desynchronises or refused))
    except _Indeterminate as exc:
        return outcome("indeterminate", reason=str(exc), escaped=escaped)
    except TimeoutError:
        return outcome("indeterminate", reason=f"the example took longer than {limits.example_s:g} s",
                       escaped=escaped)
    except Exception:  # noqa: BLE001 - any other exception is the kit's own error, reported as such
        return outcome("kit-error", reason=traceback.format_exc())
    finally:
        probe.cancel()
        loop.set_exception_handler(previous)
    return outcome(judgement.kind, judgement, escaped=escaped)


def run_example_sync(url: str, example: Example, *, limits: Limits = Limits(),
                     protocol_version: int | None = None, restarter: Restarter | None = None) -> Outcome:
    """:func:`run_example` on an event loop of its own."""
    return asyncio.run(run_example(url, example, limits=limits, protocol_version=protocol_version,
                                   restarter=restarter))
