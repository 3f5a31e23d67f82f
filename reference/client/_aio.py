"""The asyncio face of the client: the sockets and the one timer of a :class:`Failover` machine.

::

    async with await connect("tcp://127.0.0.1:61616") as connection:
        session = await connection.create_session()
        await session.create_queue("orders", "orders")
        producer = session.create_producer("orders")
        await producer.send(CoreMessage(b"hello", durable=True))
        consumer = await session.create_consumer("orders")
        session.start()
        delivery = await consumer.receive(timeout=5)

Connecting, reconnecting, reattaching and recreating sessions, the retry schedule and every protocol
timer are the sans-IO machine's (``_failover.py``) and its cores'; this layer opens the sockets the machine
asks for, feeds it bytes and the time (``reference._clock.monotonic_ms``), writes what it says, calls the
listeners and arms one timer at ``next_deadline()``.

TLS (``sslEnabled=true`` and the store parameters, :class:`ClientSettings`): the context is made once per
connection, from the settings, and every socket it opens uses it -- the first, each reconnection, each failover to
a backup.  Artemis gives each connector its own parameters, and a connector learnt from the topology carries the
broker's; the kit keeps it simple: the URL's TLS settings apply to every connector of the locator.  A handshake
that fails (the broker's certificate does not verify, the broker refuses the client's) is a failed attempt whose
reason names the TLS error, so the caller gets :class:`ConnectFailed` ("TLS handshake with 127.0.0.1:61617 failed:
certificate verify failed: ...") once the attempts are spent; the handshake is bounded by ``connect_timeout``.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from types import TracebackType

from cck.codec import Packet

from .._clock import monotonic_ms
from .._tls import handshake_failure
from ._aio_session import Consumer, Producer, Session, awaitable
from ._balance import Balancer, make_policy
from ._calls import Call
from ._connection import ClientConnectionCore
from ._discovery import DiscoveryReceiver, discover
from ._errors import CallTimeout, ClientError
from ._failover import Failover
from ._failover_terms import (
    Attached,
    Command,
    Connect,
    Disconnect,
    FailoverEvent,
    GaveUp,
    NotifyFailure,
    Record,
    Send,
)
from ._locator import Connector, LocatorURL, parse_locator_url
from ._session_channel import SessionOptions, fresh_session_name
from ._settings import ClientSettings

LOG = logging.getLogger("cck.reference.client")

__all__ = ["Connection", "Consumer", "FailoverEvent", "Producer", "ServerLocator", "Session", "connect"]


class _Protocol(asyncio.Protocol):
    """Bound to one connection core: a late callback from a replaced socket cannot touch its successor."""

    def __init__(self, connection: Connection, core: ClientConnectionCore) -> None:
        self.connection = connection
        self.core = core

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not isinstance(transport, asyncio.Transport):
            raise TypeError(f"a TCP connection gave {transport!r}, not a stream transport")
        self.connection._attach(self.core, transport)

    def data_received(self, data: bytes) -> None:
        self.connection._received(self.core, data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.connection._lost(self.core, exc)


async def connect(url: str = "tcp://127.0.0.1:61616", *, settings: ClientSettings | None = None,
                  connect_timeout: float = 30.0) -> Connection:
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
    return await ServerLocator(url, settings=settings, connect_timeout=connect_timeout).connect()


class ServerLocator:
    """Artemis's ServerLocator: one URL whose connections share a load-balancing policy and a topology.

    ::

        locator = ServerLocator("(tcp://a:61616,tcp://b:61616)?useTopologyForLoadBalancing=false")
        first, second = await locator.connect(), await locator.connect()  # a, b or b, a (round robin)

    The first connection goes to one of the URL's connectors (or the discovered ones); once a connection has
    received the brokers' topology, later ones choose among its members unless ``useTopologyForLoadBalancing``
    is false.  ``rng`` is the policy's random source (seed it to repeat the choices).
    """

    def __init__(self, url: str, *, settings: ClientSettings | None = None, connect_timeout: float = 30.0,
                 rng: random.Random | None = None) -> None:
        self.url = parse_locator_url(url)
        self.settings = self.url.settings(settings)
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
        connection = Connection(self.url, self.settings, self.connect_timeout, self.balancer)
        await connection._initial_connect()
        return connection


class Connection:
    """A connection to a broker that, when configured to, survives the loss of its TCP connection."""

    def __init__(self, locator: LocatorURL, settings: ClientSettings, connect_timeout: float,
                 balancer: Balancer[Connector] | None = None) -> None:
        self.locator = locator
        self.settings = settings
        self.connect_timeout = connect_timeout
        #: Where the locator's policy chooses the connector from (shared by every connection of a locator).
        self.balancer: Balancer[Connector] = balancer or Balancer(
            locator.connectors, make_policy(settings.connection_load_balancing_policy_class_name),
            use_topology=settings.use_topology_for_load_balancing)
        self.machine = Failover(settings, self.balancer, refresh=self._refresh_discovered)
        self._tls = settings.tls_context()  # before any attempt: a store that cannot be read is a ValueError
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._transport_core: ClientConnectionCore | None = None
        self._opening: set[asyncio.Task[None]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._listeners: list[Callable[[ClientError], None]] = []
        self._event_listeners: list[Callable[[FailoverEvent], None]] = []
        self._discovery: DiscoveryReceiver | None = None
        self._connected: asyncio.Future[None] = self._loop.create_future()
        self._settled = asyncio.Event()  # set while no reconnection is under way
        self._settled.set()

    @property
    def core(self) -> ClientConnectionCore:
        """The current connection core (a new one for every TCP connection)."""
        return self.machine.core

    @property
    def events(self) -> list[FailoverEvent]:
        """What the connection went through since it connected (failed, attempt, reattached, ...)."""
        return self.machine.events

    @property
    def connectors(self) -> tuple[Connector, ...]:
        """The connectors the initial connection chose from: the URL's, those discovered, or the topology's."""
        return self.machine.connectors

    @property
    def connector(self) -> Connector:
        """The connector this connection uses (the one its last attempt went to)."""
        if self.machine.connector is None:
            raise RuntimeError("the connection has not chosen a connector yet")
        return self.machine.connector

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

    async def _initial_connect(self) -> None:
        if self.locator.discovery is not None:
            self._discovery = await discover(self.locator.discovery, self.settings.initial_connect_attempts)
            self.balancer.set_initial(self._discovery.connectors)
        try:
            self.machine.start(monotonic_ms())
            self._pump()
            await self._connected  # bounded: every attempt is (connect_timeout, the handshake's call timeout)
        except BaseException:
            # Given up, or the caller stopped waiting (cancelled): no attempt may follow.
            self.machine.close(monotonic_ms())
            self._pump()
            if self._timer is not None:
                self._timer.cancel()
            raise
        finally:
            if self._discovery is not None:
                # Connected (a topology arrived) or given up: reconnection uses the connectors known now, as
                # Artemis stops taking discovery results once it has a topology (notes §12.2).
                self._discovery.close()
                self._discovery = None

    def _refresh_discovered(self) -> None:
        """Until a topology arrives, discovery results replace the initial connectors (after each failed attempt)."""
        if self._discovery is not None and self._discovery.connectors:
            self.balancer.set_initial(self._discovery.connectors)

    async def _open(self, command: Connect) -> None:
        """Carry out a Connect: the TCP connection (its handshake is the machine's, once it is open)."""
        core, connector = command.core, command.connector
        tls = self._tls
        try:
            await asyncio.wait_for(
                self._loop.create_connection(
                    lambda: _Protocol(self, core), connector.host, connector.port, ssl=tls,
                    server_hostname=connector.host if tls is not None else None,
                    ssl_handshake_timeout=self.connect_timeout if tls is not None and self.connect_timeout > 0
                    else None),
                self.connect_timeout)
        except (OSError, TimeoutError) as exc:
            refused = handshake_failure(exc)
            reason = (f"TLS handshake with {connector.host}:{connector.port} failed: {refused}" if refused is not None
                      else f"cannot connect to {connector.host}:{connector.port}: "
                           f"{str(exc) or f'timed out after {self.connect_timeout} s'}")
            self.machine.open_failed(core, reason, monotonic_ms())
            self._pump()

    # ------------------------------------------------------------------ carrying out the machine's commands

    def _pump(self) -> None:
        """Carry out what the machine says, then re-arm the one timer."""
        now = monotonic_ms()
        for command in self.machine.take_commands(now):
            self._carry_out(command)
        if self.machine.reconnecting:
            self._settled.clear()
        else:
            self._settled.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.machine.next_deadline()
        if deadline is not None:
            self._timer = self._loop.call_later(max(0, deadline - now) / 1000, self._on_timer)

    def _carry_out(self, command: Command) -> None:
        if isinstance(command, Send):
            transport = self._transport
            if command.core is self._transport_core and transport is not None and not transport.is_closing():
                transport.write(command.data)
        elif isinstance(command, Connect):
            task = asyncio.ensure_future(self._open(command))
            self._opening.add(task)
            task.add_done_callback(self._opening.discard)
        elif isinstance(command, Disconnect):
            if command.core is self._transport_core and self._transport is not None:
                self._transport.close()
                self._transport = self._transport_core = None
        elif isinstance(command, Record):
            for event_listener in list(self._event_listeners):
                event_listener(command.event)
        elif isinstance(command, NotifyFailure):
            for listener in list(self._listeners):
                listener(command.error)
        elif isinstance(command, Attached | GaveUp) and not self._connected.done():
            # The first connection is made, or given up (after that, a give-up is the sessions' news).
            if isinstance(command, GaveUp):
                self._connected.set_exception(command.error)
            else:
                self._connected.set_result(None)

    def _on_timer(self) -> None:
        self._timer = None
        self.machine.tick(monotonic_ms())
        self._pump()

    def _attach(self, core: ClientConnectionCore, transport: asyncio.Transport) -> None:
        if core is not self.machine.core:
            transport.close()  # the attempt it was opened for is over
            return
        self._transport, self._transport_core = transport, core
        self.machine.opened(core, monotonic_ms())
        self._pump()

    def _received(self, core: ClientConnectionCore, data: bytes) -> None:
        self.machine.received(core, data, monotonic_ms())
        self._pump()

    def _lost(self, core: ClientConnectionCore, exc: Exception | None) -> None:
        if core is not self._transport_core:
            return  # a socket already let go of
        self._transport = self._transport_core = None
        refused = None if exc is None else handshake_failure(exc)
        reason = (f"the TLS connection to {self.peer} failed: {refused}" if refused is not None
                  else f"the TCP connection to {self.peer} closed" + (f": {exc}" if exc else ""))
        self.machine.connection_lost(core, reason, monotonic_ms())
        self._pump()

    async def _wait(self, call: Call) -> Packet:
        self._pump()
        return await awaitable(call)

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
        return self.machine.failure

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
            name or fresh_session_name(), username, password, xa,
            auto_commit_sends=not (transacted or xa), auto_commit_acks=not (transacted or xa),
            pre_acknowledge=pre_acknowledge, client_id=client_id)
        core, call = self.core.create_session(options)
        await self._wait(call)
        return Session(self, core)

    async def close(self) -> None:
        """Close every session, then the socket; a reconnection under way is abandoned."""
        self.machine.close(monotonic_ms())
        self._pump()  # an attempt under way is disconnected
        core = self.core
        if core.failure is None and self._transport is not None:
            calls = core.close()
            self._pump()
            for call in calls:
                try:
                    await awaitable(call)
                except ClientError:
                    break  # the connection failed while closing; nothing left to tidy
        else:
            core.closed = True
        if self._transport is not None:
            self._transport.close()
        if self._timer is not None:
            self._timer.cancel()

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()
