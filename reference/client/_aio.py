"""The asyncio face of the client: one transport around :class:`ClientConnectionCore`.

::

    async with await connect("tcp://127.0.0.1:61616") as connection:
        session = await connection.create_session()
        await session.create_queue("orders", "orders")
        producer = session.create_producer("orders")
        await producer.send(CoreMessage(b"hello", durable=True))
        consumer = await session.create_consumer("orders")
        session.start()
        delivery = await consumer.receive(timeout=5)

Every wait is bounded: broker answers by ``call_timeout_ms`` (enforced by the
core's timers), receives by the caller's ``timeout``, producer credits by
``call_timeout_ms``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from codec import (
    CoreMessage,
    CreateSessionResponseMessage,
    ExceptionType,
    Packet,
    ReattachSessionResponseMessage,
    RoutingType,
    SessionBindingQueryResponseMessage_V5,
    SessionQueueQueryResponseMessage_V3,
    SessionXAGetInDoubtXidsResponseMessage,
    SessionXAGetTimeoutResponseMessage,
    SessionXAResponseMessage,
    Xid,
    encode_message,
)

from ._balance import Balancer, InitialConnect, make_policy
from ._calls import Call
from ._connection import ClientConnectionCore, TopologyMember
from ._discovery import DiscoveryReceiver, connector_of, discover
from ._errors import CallTimeout, ClientError, ConnectFailed, ConnectionFailed, ObjectClosed
from ._locator import Connector, LocatorURL, RetryLoop, intervals, parse_locator_url
from ._session import ConsumerCore, Delivery, ProducerCore, SessionCore, SessionOptions
from ._settings import ClientSettings

LOG = logging.getLogger("reference.client")

__all__ = ["Connection", "Consumer", "Producer", "ServerLocator", "Session", "connect"]

_session_numbers = itertools.count(1)


def _awaitable(call: Call) -> asyncio.Future[Packet]:
    """An asyncio future completed by the sans-IO call."""
    future: asyncio.Future[Packet] = asyncio.get_running_loop().create_future()

    def done(finished: Call) -> None:
        if future.done():
            return
        if finished.error is not None:
            future.set_exception(finished.error)
        else:
            future.set_result(finished.result())

    call.add_done_callback(done)
    return future


class _Protocol(asyncio.Protocol):
    """Bound to one connection core: a late callback from a replaced socket cannot touch its successor."""

    def __init__(self, connection: Connection, core: ClientConnectionCore) -> None:
        self.connection = connection
        self.core = core

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.connection._attach(self.core, transport)

    def data_received(self, data: bytes) -> None:
        self.connection._received(self.core, data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.connection._lost(self.core, exc)


@dataclass(frozen=True)
class FailoverEvent:
    """What the connection went through, for listeners and evidence (times are the injected clock's)."""

    kind: str  # "failed", "attempt", "attempt-failed", "reattached", "recreated", "gave-up"
    time: float
    connector: str
    detail: str = ""


async def connect(url: str = "tcp://127.0.0.1:61616", *, settings: ClientSettings | None = None,
                  clock: Callable[[], float] = time.monotonic, connect_timeout: float = 30.0) -> Connection:
    """Connect as Artemis's ServerLocator does and wait for the broker's topology (``last=true``).

    ``url`` is ``tcp://host:port`` or ``(tcp://a:p,tcp://b:q)`` with client parameters in Artemis's
    spelling (``?confirmationWindowSize=1048576&reconnectAttempts=-1``); they override ``settings``.
    ``udp://group:port?localBindAddress=...`` discovers the connectors from broadcast groups first: it
    waits ``discoveryInitialWaitTimeout`` for a broadcast and raises :class:`ConnectionFailed` naming
    the group when none comes.
    Each attempt of the initial connection goes where ``connectionLoadBalancingPolicyClassName`` says
    (round robin from a random start by default), ``initialConnectAttempts`` times per connector,
    waiting ``retryInterval`` (backed off) between attempts.  After a failure the connection
    reconnects when ``reconnectAttempts`` is not 0 and reattaches (or recreates) its sessions.

    A fresh :class:`ServerLocator` makes the connection; make one yourself to balance several connections.
    """
    return await ServerLocator(url, settings=settings, clock=clock, connect_timeout=connect_timeout).connect()


class ServerLocator:
    """Artemis's ServerLocator: one URL whose connections share a load-balancing policy and a topology.

    ::

        locator = ServerLocator("(tcp://a:61616,tcp://b:61616)?useTopologyForLoadBalancing=false")
        first, second = await locator.connect(), await locator.connect()  # a, b or b, a (round robin)

    The first connection goes to one of the URL's connectors (or the discovered ones); once a connection has
    received the brokers' topology, later ones choose among its members unless ``useTopologyForLoadBalancing``
    is false.  ``rng`` is the policy's random source (seed it to repeat the choices).
    """

    def __init__(self, url: str, *, settings: ClientSettings | None = None,
                 clock: Callable[[], float] = time.monotonic, connect_timeout: float = 30.0,
                 rng: random.Random | None = None) -> None:
        self.url = parse_locator_url(url)
        self.settings = self.url.settings(settings)
        self.clock = clock
        self.connect_timeout = connect_timeout
        self.balancer: Balancer[Connector] = Balancer(
            self.url.connectors, make_policy(self.settings.connection_load_balancing_policy_class_name, rng),
            use_topology=self.settings.use_topology_for_load_balancing)

    @property
    def topology(self) -> dict[str, Connector]:
        """The members learnt from the brokers (node ID -> live connector), in the order first learnt."""
        return dict(self.balancer.members)

    async def connect(self) -> Connection:
        """A new connection (Artemis's ``createSessionFactory``), to the connector the policy chooses."""
        connection = Connection(self.url, self.settings, self.clock, self.connect_timeout, self.balancer)
        await connection._initial_connect()
        return connection


class Connection:
    """A connection to a broker that, when configured to, survives the loss of its TCP connection."""

    def __init__(self, locator: LocatorURL, settings: ClientSettings, clock: Callable[[], float],
                 connect_timeout: float, balancer: Balancer[Connector] | None = None) -> None:
        self.locator = locator
        self.settings = settings
        self.clock = clock
        self.connect_timeout = connect_timeout
        self.events: list[FailoverEvent] = []
        #: Where the locator's policy chooses the connector from (shared by every connection of a locator).
        self.balancer: Balancer[Connector] = balancer or Balancer(
            locator.connectors, make_policy(settings.connection_load_balancing_policy_class_name),
            use_topology=settings.use_topology_for_load_balancing)
        #: The connectors the initial connection chose from: the URL's, those discovered, or the topology's.
        self.connectors: tuple[Connector, ...] = locator.connectors
        self._connector: Connector | None = locator.connectors[0] if locator.connectors else None
        self.core = self._new_core()
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._listeners: list[Callable[[ClientError], None]] = []
        self._event_listeners: list[Callable[[FailoverEvent], None]] = []
        self._reconnecting: asyncio.Task[None] | None = None
        self._closing = False
        self._final_failure: ClientError | None = None
        self._settled = asyncio.Event()  # set while no reconnection is under way
        self._settled.set()

    @property
    def connector(self) -> Connector:
        """The connector this connection uses (the one its last attempt went to)."""
        if self._connector is None:
            raise RuntimeError("the connection has not chosen a connector yet")
        return self._connector

    @property
    def peer(self) -> str:
        return f"{self.connector.host}:{self.connector.port}"

    @property
    def local_port(self) -> int | None:
        """The local TCP port of the current socket (``None`` while there is none)."""
        if self._transport is None:
            return None
        name = self._transport.get_extra_info("sockname")
        return int(name[1]) if name else None

    # ------------------------------------------------------------------ connecting

    def _new_core(self) -> ClientConnectionCore:
        core = ClientConnectionCore(self.settings, self.clock)
        core.keep_sessions = self.settings.reconnect_attempts != 0
        core.failure_listeners.append(lambda error: self._core_failed(core, error))
        core.topology_listeners.append(self._topology_changed)
        return core

    def _topology_changed(self, node_id: str, member: TopologyMember | None, last: bool) -> None:
        """Every topology message of every connection feeds the locator's balancer, as in Artemis."""
        if member is None:
            self.balancer.node_down(node_id)
            return
        if member.live is None and member.backup is None:
            # A broker outside a cluster names no connector: Artemis records the one the connection used.
            connector = self._connector
        else:
            connector = connector_of(member.live) if member.live is not None else None
        if connector is None:
            LOG.warning("topology member %s has no TCP connector the client can use (%s); not balanced to",
                        node_id, member.live)
            if last:
                self.balancer.received_topology = True
            return
        self.balancer.node_up(node_id, connector, last=last)

    def _record(self, kind: str, detail: str = "") -> None:
        event = FailoverEvent(kind, self.clock(), self.connector.url, detail)
        self.events.append(event)
        for listener in list(self._event_listeners):
            listener(event)

    async def _open(self, core: ClientConnectionCore) -> None:
        """One attempt: TCP connect to the current connector, handshake, topology."""
        connector = self.connector
        try:
            await asyncio.wait_for(
                self._loop.create_connection(lambda: _Protocol(self, core), connector.host, connector.port),
                self.connect_timeout)
        except (OSError, TimeoutError) as exc:
            raise ConnectionRefusedError(f"cannot connect to {connector.host}:{connector.port}: "
                                         f"{exc or 'timed out'}") from exc
        topology = core.start()
        self._pump()
        await _awaitable(topology)

    async def _initial_connect(self) -> None:
        discovery: DiscoveryReceiver | None = None
        if self.locator.discovery is not None:
            discovery = await discover(self.locator.discovery, self.settings.initial_connect_attempts,
                                       clock=self.clock)
            self.balancer.set_initial(discovery.connectors)
        try:
            await self._connect_balanced(discovery)
        finally:
            if discovery is not None:
                # Connected (a topology arrived) or given up: reconnection uses the connectors known now, as
                # Artemis stops taking discovery results once it has a topology (notes §12.2).
                discovery.close()

    async def _connect_balanced(self, discovery: DiscoveryReceiver | None) -> None:
        """Artemis's createSessionFactory: every attempt goes where the policy says, among the initial
        connectors or the topology's members (then the other list once, when both are known)."""
        attempt = InitialConnect(self.balancer, self.settings.initial_connect_attempts, intervals(self.settings))
        while True:
            self.connectors = self.balancer.candidates(attempt.from_initial)
            self._connector = attempt.next_connector()
            try:
                await self._open(self.core)
                return
            except (ConnectionRefusedError, ClientError) as exc:
                self._drop_transport()
                if discovery is not None and discovery.connectors:
                    # Until a topology arrives, discovery results replace the initial connectors.
                    self.balancer.set_initial(discovery.connectors)
                retry_at = attempt.failed(self.clock())
                if retry_at is None:
                    raise ConnectFailed(f"{exc} (gave up after {attempt.failures} attempt(s))") from exc
                self.core = self._new_core()
                await asyncio.sleep(max(0.0, retry_at - self.clock()))

    def _core_failed(self, core: ClientConnectionCore, error: ClientError) -> None:
        if core is not self.core:
            return
        for listener in list(self._listeners):
            listener(error)
        if core.keep_sessions and not self._closing and self._reconnecting is None and self._final_failure is None:
            self._record("failed", str(error))
            self._settled.clear()
            self._reconnecting = asyncio.ensure_future(self._reconnect(core, error))

    async def _reconnect(self, failed: ClientConnectionCore, error: ClientError) -> None:
        """Notes §11.4: the first attempt at once, then retryInterval backed off, at most reconnectAttempts;
        on a new connection every session is reattached, or recreated when the broker no longer has it."""
        sessions = [s for s in failed.sessions.values() if not s.closed]
        loop = RetryLoop(self.settings, reconnect=True)
        timer = self._failover_timer(sessions)
        try:
            while not self._closing:
                core = self._new_core()
                core.adopt(sessions, failed.next_channel)
                self.core = core
                self._record("attempt")
                try:
                    await self._open(core)
                    await self._restore(core, sessions)
                    return
                except (ConnectionRefusedError, ClientError) as exc:
                    self._record("attempt-failed", str(exc))
                    self._drop_transport()
                    retry_at = loop.attempt_failed(self.clock())
                    if retry_at is None:
                        break
                    await asyncio.sleep(max(0.0, retry_at - self.clock()))
                except Exception as exc:
                    # A defect of this client, not of the peer: end the reconnection with the cause named
                    # rather than leave the sessions waiting on a task that has died.
                    LOG.exception("reconnection stopped by an internal error")
                    self._record("attempt-failed", f"internal error: {exc!r}")
                    internal = ConnectionFailed(f"{getattr(error, 'reason', error)}; reconnection stopped by an "
                                                f"internal error: {exc!r}",
                                                getattr(error, "code", int(ExceptionType.NOT_CONNECTED)))
                    self._give_up(sessions, internal, loop.failures + 1)
                    core.fail(internal)  # its socket's close must not start another reconnection
                    self._drop_transport()
                    return
            self._give_up(sessions, error, loop.failures)
        finally:
            timer.cancel()
            self._reconnecting = None
            self._settled.set()

    async def _restore(self, core: ClientConnectionCore, sessions: list[SessionCore]) -> None:
        deadline = self.clock() + self.settings.call_timeout_ms / 1000
        for session in sessions:
            answer = await self._wait(core.reattach(session))
            assert isinstance(answer, ReattachSessionResponseMessage), answer
            if answer.reattached:
                replayed = session.reattached(core, answer.last_confirmed_command_id, deadline)
                self._record("reattached", f"{session.options.name}: {replayed} command(s) replayed")
            else:
                name = f"cck-{uuid.uuid4()}-{next(_session_numbers)}"
                created = await self._wait(core.recreate(session, name))
                assert isinstance(created, CreateSessionResponseMessage), created
                session.options = dataclasses.replace(session.options, name=name)
                session.recreated(core, created.server_version, deadline)
                self._record("recreated", f"new session name {name}")
        self._pump()

    def _failover_timer(self, sessions: list[SessionCore]) -> asyncio.Task[None]:
        """While reconnecting, the dead core's timers are gone: expire waiting calls at their failover deadline."""

        async def expire() -> None:
            while True:
                deadlines = [d for s in sessions if (d := s.calls.next_deadline()) is not None]
                if not deadlines:
                    await asyncio.sleep(self.settings.call_timeout_ms / 1000)
                    continue
                await asyncio.sleep(max(0.0, min(deadlines) - self.clock()))
                now = self.clock()
                for session in sessions:
                    if not session.attached:
                        session.calls.expire(now)

        return asyncio.ensure_future(expire())

    def _give_up(self, sessions: list[SessionCore], error: ClientError, attempts: int) -> None:
        final = ConnectionFailed(f"{getattr(error, 'reason', error)}; reconnection gave up after {attempts} attempt(s)",
                                 getattr(error, "code", int(ExceptionType.NOT_CONNECTED)))
        self._final_failure = final
        self._record("gave-up", str(final))
        for session in sessions:
            session.failed(final)

    def _drop_transport(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    # ------------------------------------------------------------------ plumbing

    def _attach(self, core: ClientConnectionCore, transport: asyncio.Transport) -> None:
        if core is self.core:
            self._transport = transport
        else:
            transport.close()

    def _received(self, core: ClientConnectionCore, data: bytes) -> None:
        if core is not self.core:
            return
        core.receive(data)
        self._pump()

    def _lost(self, core: ClientConnectionCore, exc: Exception | None) -> None:
        if core is not self.core:
            return
        self._transport = None
        if self._timer is not None:
            self._timer.cancel()
        core.connection_lost(f"the TCP connection to {self.peer} closed" + (f": {exc}" if exc else ""))

    def _pump(self) -> None:
        """Write what the core produced and re-arm its timer."""
        core = self.core
        data = core.take_output()
        transport = self._transport
        if data and transport is not None and not transport.is_closing():
            transport.write(data)
        if core.failure is not None and transport is not None:
            transport.close()
        self._arm_timer()

    def _arm_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.core.next_deadline()
        if deadline is not None and self.core.failure is None:
            self._timer = self._loop.call_later(max(0.0, deadline - self.clock()), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.core.tick()
        self._pump()

    async def _wait(self, call: Call) -> Packet:
        self._pump()
        return await _awaitable(call)

    async def _settle(self) -> None:
        """Wait for a reconnection under way to end (bounded by callFailoverTimeout), as Artemis's client blocks
        a commit during failover: whether it may commit depends on reattach or recreate."""
        if self._settled.is_set():
            return
        timeout = self.settings.call_failover_timeout_ms
        try:
            await asyncio.wait_for(self._settled.wait(), None if timeout == -1 else timeout / 1000)
        except TimeoutError:
            raise CallTimeout("waiting for the reconnection to finish", timeout) from None

    # ------------------------------------------------------------------ API

    @property
    def failure(self) -> ClientError | None:
        """Why the connection is unusable (``None`` while it works or is reconnecting)."""
        if self._final_failure is not None:
            return self._final_failure
        if self._reconnecting is not None:
            return None
        return self.core.failure

    def add_failure_listener(self, listener: Callable[[ClientError], None]) -> None:
        """Called with the reason each time a TCP connection fails (before any reconnection, as Artemis calls
        its session failure listeners)."""
        self._listeners.append(listener)

    def add_event_listener(self, listener: Callable[[FailoverEvent], None]) -> None:
        """Called with every failover event (failed, attempt, attempt-failed, reattached, recreated, gave-up)."""
        self._event_listeners.append(listener)

    async def create_session(self, name: str | None = None, *, username: str | None = None,
                             password: str | None = None, xa: bool = False, transacted: bool = False,
                             pre_acknowledge: bool = False, client_id: str | None = None) -> Session:
        """A session; ``transacted`` (or ``xa``) turns auto-commit of sends and acks off."""
        options = SessionOptions(
            name or f"cck-{uuid.uuid4()}-{next(_session_numbers)}", username, password, xa,
            auto_commit_sends=not (transacted or xa), auto_commit_acks=not (transacted or xa),
            pre_acknowledge=pre_acknowledge, client_id=client_id)
        core, call = self.core.create_session(options)
        await self._wait(call)
        return Session(self, core)

    async def close(self) -> None:
        """Close every session, then the socket; a reconnection under way is abandoned."""
        self._closing = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        if self.core.failure is None and self._transport is not None:
            calls = self.core.close()
            self._pump()
            for call in calls:
                try:
                    await _awaitable(call)
                except ClientError:
                    break  # the connection failed while closing; nothing left to tidy
        else:
            self.core.closed = True
        if self._transport is not None:
            self._transport.close()
        if self._timer is not None:
            self._timer.cancel()

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()


class Session:
    """A session: queues, producers, consumers, local and XA transactions."""

    def __init__(self, connection: Connection, core: SessionCore) -> None:
        self.connection = connection
        self.core = core
        self._credit_event = asyncio.Event()
        core.on_credits = self._credit_event.set

    @property
    def name(self) -> str:
        return self.core.options.name

    async def _call(self, call: Call) -> Packet:
        return await self.connection._wait(call)

    def _pump(self) -> None:
        self.connection._pump()

    # ------------------------------------------------------------------ addresses and queues

    async def create_address(self, address: str, routing_types: tuple[RoutingType, ...] = (RoutingType.ANYCAST,),
                             *, auto_created: bool = False) -> None:
        await self._call(self.core.create_address(address, routing_types, auto_created))

    async def create_queue(self, address: str, queue: str | None = None, **options: Any) -> None:
        """CREATE_QUEUE_V2; options as :meth:`SessionCore.create_queue` (routing_type, durable, filter_string, ...)."""
        await self._call(self.core.create_queue(address, queue or address, **options))

    async def create_shared_queue(self, address: str, queue: str, **options: Any) -> None:
        await self._call(self.core.create_shared_queue(address, queue, **options))

    async def delete_queue(self, queue: str) -> None:
        await self._call(self.core.delete_queue(queue))

    async def queue_query(self, queue: str) -> SessionQueueQueryResponseMessage_V3:
        answer = await self._call(self.core.queue_query(queue))
        assert isinstance(answer, SessionQueueQueryResponseMessage_V3), answer
        return answer

    async def binding_query(self, address: str) -> SessionBindingQueryResponseMessage_V5:
        answer = await self._call(self.core.binding_query(address))
        assert isinstance(answer, SessionBindingQueryResponseMessage_V5), answer
        return answer

    async def add_metadata(self, key: str, data: str) -> None:
        await self._call(self.core.add_metadata(key, data))

    # ------------------------------------------------------------------ producers and consumers

    def create_producer(self, address: str | None = None) -> Producer:
        producer = Producer(self, self.core.create_producer(address))
        self._pump()
        return producer

    async def create_consumer(self, queue: str, *, filter_string: str | None = None,
                              browse_only: bool = False) -> Consumer:
        core, call = self.core.create_consumer(queue, filter_string=filter_string, browse_only=browse_only)
        consumer = Consumer(self, core)
        await self._call(call)
        return consumer

    def start(self) -> None:
        """SESS_START: deliveries begin (no answer)."""
        self.core.start()
        self._pump()

    async def stop(self) -> None:
        await self._call(self.core.stop())

    # ------------------------------------------------------------------ local transactions

    async def commit(self) -> None:
        """Commit; raises TransactionRolledBack when failover recreated the session under the transaction."""
        await self.connection._settle()
        if self.core.rollback_only and self.core.started:
            # The commit becomes a rollback: stop delivery first, as rollback() does, or messages the broker
            # delivers to the recreated consumers before it rolls back stay buffered and arrive twice.
            await self.stop()
            try:
                await self._call(self.core.commit())
            finally:
                self.start()
            return
        await self._call(self.core.commit())

    async def rollback(self, *, consider_last_message_as_delivered: bool = False) -> None:
        """Roll back.  As the Java client does: stop delivery, drop buffered messages, roll back, restart."""
        started = self.core.started
        if started:
            await self.stop()
        await self._call(self.core.rollback(consider_last_message_as_delivered=consider_last_message_as_delivered))
        if started:
            self.start()

    # ------------------------------------------------------------------ XA (each raises XAError on an XA error)

    async def _xa(self, call: Call) -> int:
        answer = await self._call(call)
        assert isinstance(answer, SessionXAResponseMessage), answer
        return answer.response_code

    async def xa_start(self, xid: Xid) -> None:
        await self._xa(self.core.xa_start(xid))

    async def xa_join(self, xid: Xid) -> None:
        await self._xa(self.core.xa_join(xid))

    async def xa_resume(self, xid: Xid) -> None:
        await self._xa(self.core.xa_resume(xid))

    async def xa_end(self, xid: Xid, *, failed: bool = False) -> None:
        await self._xa(self.core.xa_end(xid, failed=failed))

    async def xa_suspend(self) -> None:
        await self._xa(self.core.xa_suspend())

    async def xa_prepare(self, xid: Xid) -> int:
        """The vote (XA_OK = 0; Artemis never answers XA_RDONLY)."""
        return await self._xa(self.core.xa_prepare(xid))

    async def xa_commit(self, xid: Xid, *, one_phase: bool = False) -> None:
        await self._xa(self.core.xa_commit(xid, one_phase=one_phase))

    async def xa_rollback(self, xid: Xid) -> None:
        started = self.core.started
        if started:
            await self.stop()
        await self._xa(self.core.xa_rollback(xid))
        if started:
            self.start()

    async def xa_forget(self, xid: Xid) -> None:
        await self._xa(self.core.xa_forget(xid))

    async def xa_recover(self) -> tuple[Xid, ...]:
        answer = await self._call(self.core.xa_recover())
        assert isinstance(answer, SessionXAGetInDoubtXidsResponseMessage), answer
        return answer.xids

    async def xa_set_timeout(self, seconds: int) -> None:
        await self._call(self.core.xa_set_timeout(seconds))

    async def xa_get_timeout(self) -> int:
        answer = await self._call(self.core.xa_get_timeout())
        assert isinstance(answer, SessionXAGetTimeoutResponseMessage), answer
        return answer.timeout_seconds

    def xa_failed(self, xid: Xid) -> None:
        self.core.xa_failed(xid)
        self._pump()

    # ------------------------------------------------------------------ close

    async def close(self) -> None:
        if self.core.closed:
            return
        await self._call(self.core.close())

    async def _credits(self, address: str | None, size: int) -> None:
        """Wait for producer credits (bounded by call_timeout_ms, as a blocked Java producer would not be)."""
        credits = self.core.credits_for(address)
        if credits is None:
            return
        timeout_ms = self.core.settings.call_timeout_ms
        deadline = self.connection.core.clock() + timeout_ms / 1000
        while not credits.try_acquire(size):
            self._pump()
            self._credit_event.clear()
            if self.core.closed:
                raise self.connection.core.failure or ObjectClosed(f"session {self.name!r} is closed")
            remaining = deadline - self.connection.core.clock()
            if remaining <= 0:
                raise CallTimeout(f"producer credits for {address!r}", timeout_ms)
            try:
                await asyncio.wait_for(self._credit_event.wait(), remaining)
            except TimeoutError:
                raise CallTimeout(f"producer credits for {address!r}", timeout_ms) from None


class Producer:
    def __init__(self, session: Session, core: ProducerCore) -> None:
        self.session = session
        self.core = core

    async def send(self, message: CoreMessage) -> None:
        """Send; waits for the broker's answer when the Java client would block (durable sends by default)."""
        call, blocking = await self._send(message)
        if call is not None and blocking:
            await _awaitable(call)

    async def send_async(self, message: CoreMessage) -> asyncio.Future[Packet] | None:
        """Send without waiting; the future completes when the broker answers (needs a confirmation window
        or a blocking send setting — otherwise the broker does not answer and ``None`` is returned)."""
        call, _ = await self._send(message)
        return None if call is None else _awaitable(call)

    async def _send(self, message: CoreMessage) -> tuple[Call | None, bool]:
        address = message.address or self.core.address
        await self.session._credits(address, len(encode_message(message)))
        result = self.session.core.send(self.core, message)
        self.session._pump()
        return result

    def close(self) -> None:
        self.session.core.close_producer(self.core)
        self.session._pump()


class Consumer:
    def __init__(self, session: Session, core: ConsumerCore) -> None:
        self.session = session
        self.core = core
        self._event = asyncio.Event()
        core.on_change = self._event.set

    @property
    def consumer_id(self) -> int:
        return self.core.consumer_id

    def receive_nowait(self) -> Delivery | None:
        delivery = self.core.take()
        self.session._pump()
        return delivery

    async def receive(self, timeout: float) -> Delivery | None:
        """The next delivery, or ``None`` after ``timeout`` seconds (or once the consumer is closed)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            delivery = self.receive_nowait()
            if delivery is not None:
                return delivery
            if self.core.closed:
                failure = self.session.connection.failure
                if failure is not None:
                    raise failure
                return None
            self._event.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            try:
                await asyncio.wait_for(self._event.wait(), remaining)
            except TimeoutError:
                return None

    async def acknowledge(self, delivery: Delivery) -> None:
        """Cumulative acknowledgement up to ``delivery``; waits only with block_on_acknowledge."""
        call = self.session.core.acknowledge(delivery)
        self.session._pump()
        if call is not None:
            await _awaitable(call)

    async def individual_acknowledge(self, delivery: Delivery) -> None:
        call = self.session.core.acknowledge(delivery, individually=True)
        self.session._pump()
        if call is not None:
            await _awaitable(call)

    async def close(self) -> None:
        call = self.session.core.close_consumer(self.core)
        if call is not None:
            await self.session._call(call)
