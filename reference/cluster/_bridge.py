"""Cluster connections of the reference broker: one bridge to every other node (asyncio).

A bridge is two core connections made with the kit's own client, logged in with the cluster
credentials (docs/notes/cluster-wire.md §2):

* to the other node: a notification consumer on a temporary queue bound to ``activemq.notifications``
  (the node's bindings and consumers, after a ``sendQueueInfoToQueue`` request for the current
  state), and a producer that delivers forwarded messages with blocking sends;
* to this node: a consumer on the store-and-forward queue ``$.artemis.internal.sf.<cluster>.<node>``;
  a message is acknowledged there only after the other node confirmed it, and carries a
  ``_AMQ_BRIDGE_DUP`` ID, so a resend after a failure is dropped there: nothing lost, nothing twice.

When the connection fails the bridge retries with the cluster connection's retry-interval,
multiplier, maximum and reconnect-attempts (initial-connect-attempts before the first success).
A node found by discovery whose entry expires before any attempt reached it is no longer tried.
A refused cluster password (exception 212) ends that bridge only (Artemis stops the node's whole
cluster manager, which can end clustering between nodes that share the password).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from cck.codec import ExceptionType, PropertyValue, RoutingType, TransportConfiguration

from ..broker import NOTIFICATIONS_ADDRESS, ClusterHooks, ClusterRole, LoadBalancing, forwardable, queue_info_request
from ..client import (
    BrokerRefused,
    ClientError,
    ClientSettings,
    Connection,
    ConnectionFailed,
    Consumer,
    Producer,
    Session,
    connect,
    connector_of,
)
from ..config import BrokerConfig, ClusterConnection
from ..discovery import DiscoveryEntry, connector_transport_configuration
from ._udp import UdpGroups

__all__ = ["Bridge", "ClusterManager", "Peer", "cluster_role", "identify", "retry_delays", "start_cluster"]

LOG = logging.getLogger("cck.reference.cluster")
#: how long a receive waits before the bridge looks at its connections again
_RECEIVE_S = 1.0


@dataclass(frozen=True)
class Peer:
    """Where a bridge connects: ``host:port`` and the connector as the other nodes learn it."""

    host: str
    port: int
    connector: TransportConfiguration | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp://{host}:{self.port}"


def retry_delays(cc: ClusterConnection, *, connected_before: bool) -> Callable[[int], float | None]:
    """``delay(n)``: seconds to wait before attempt n+1 after n failed ones, ``None`` to give up."""
    attempts = cc.reconnect_attempts if connected_before else cc.initial_connect_attempts

    def delay(failed: int) -> float | None:
        if attempts != -1 and failed > attempts:
            return None
        interval = cc.retry_interval * cc.retry_interval_multiplier ** max(0, failed - 1)
        return min(interval, max(cc.max_retry_interval, cc.retry_interval)) / 1000

    return delay


class ClusterSecurityRefused(Exception):
    """The other node refused the cluster credentials."""


class Bridge:
    """One node's bridge to another, kept up until :meth:`stop`."""

    def __init__(self, manager: ClusterManager, peer: Peer, *, discovered: bool = False) -> None:
        self.manager = manager
        self.peer = peer
        #: found by a discovery group (not a static connector): dropped with its entry until it is reached
        self.discovered = discovered
        #: some attempt reached the other node (its node ID is known); reconnects then follow reconnect-attempts
        self.reached = False
        self.node_id: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._connections: list[Connection] = []
        self._up = False  # the last attempt reached the other node

    @property
    def running(self) -> bool:
        """Started and not ended (stopped, given up, or pointed at this node)."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"bridge to {self.peer.url}")

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._drop()

    async def _run(self) -> None:
        cc = self.manager.cc
        failed = 0
        while not self._stopping.is_set():
            self._up = False
            try:
                await self._session()
            except ClusterSecurityRefused as exc:
                # Artemis stops the node's whole cluster manager here, which can take clustering down between
                # nodes that do share the password; the reference broker gives up on that node only
                LOG.error("cluster credentials refused: no bridge to this node; check cluster-user and "
                          "cluster-password", extra={"peer": self.peer.url, "reason": str(exc)})
                return
            except (ClientError, OSError, ValueError) as exc:
                LOG.info("bridge connection failed", extra={"peer": self.peer.url, "reason": str(exc)})
                if self.node_id is not None and isinstance(exc, ConnectionFailed) \
                        and exc.code == ExceptionType.DISCONNECTED:
                    # the node said DISCONNECT (it is stopping): as Artemis, its queues are forgotten rather than
                    # kept as disconnected choices; they come back with the node
                    self.manager.node_left(self.node_id)
            finally:
                await self._drop()
            self.reached = self.reached or self._up
            failed = 1 if self._up else failed + 1
            delay = retry_delays(cc, connected_before=self.reached)(failed)
            if delay is None:
                LOG.warning("bridge gave up", extra={"peer": self.peer.url, "attempts": failed})
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)

    def _settings(self) -> ClientSettings:
        cc = self.manager.cc
        return ClientSettings(
            call_timeout_ms=cc.call_timeout, connection_ttl_ms=cc.connection_ttl,
            client_failure_check_period_ms=cc.check_period, reconnect_attempts=0, initial_connect_attempts=1,
            block_on_durable_send=True, block_on_non_durable_send=True, producer_window_size=-1,
        )  # fmt: skip

    async def _connect(self, url: str) -> Connection:
        connection = await connect(url, settings=self._settings(), connect_timeout=self.manager.cc.call_timeout / 1000)
        self._connections.append(connection)
        return connection

    async def _login(self, connection: Connection) -> Session:
        role = self.manager.hooks.role
        try:
            return await connection.create_session(username=role.user, password=role.password)
        except BrokerRefused as exc:
            if exc.code == ExceptionType.CLUSTER_SECURITY_EXCEPTION:
                raise ClusterSecurityRefused(str(exc)) from exc
            raise

    async def _session(self) -> None:
        remote = await self._connect(self.peer.url)
        node_id = self._identify(remote)
        if node_id == self.manager.node_id:
            LOG.info("a cluster connector points at this node; no bridge to itself", extra={"peer": self.peer.url})
            self._stopping.set()
            return
        notifications = await self._login(remote)
        producer_session = await self._login(remote)
        producer = producer_session.create_producer()
        queue = f"notif.{uuid.uuid4()}.{self.manager.node_id}"
        await notifications.create_queue(NOTIFICATIONS_ADDRESS, queue, routing_type=RoutingType.MULTICAST,
                                         durable=False, temporary=True)
        notes = await notifications.create_consumer(queue)
        notifications.start()
        request = notifications.create_producer()
        await request.send(queue_info_request(queue, ""))
        self.node_id = node_id
        self._up = True
        self.manager.node_up(node_id, self.peer.connector)
        local = await self._connect(self.manager.own_url)
        store = await self._login(local)
        sf_queue = self.manager.hooks.role.sf_queue(node_id)
        waiting = await store.create_consumer(sf_queue)
        store.start()
        LOG.info("bridge up", extra={"peer": self.peer.url, "node": node_id})
        try:
            await _first_failure(self._hear(notes, node_id), self._forward(waiting, producer, sf_queue))
        finally:
            self.manager.node_down(node_id)

    async def _hear(self, notes: Consumer, node_id: str) -> None:
        while True:
            delivery = await notes.receive(_RECEIVE_S)
            if delivery is None:
                self._check_alive(notes)
                continue
            self.manager.heard(node_id, delivery.message.properties)

    async def _forward(self, waiting: Consumer, producer: Producer, sf_queue: str) -> None:
        while True:
            delivery = await waiting.receive(_RECEIVE_S)
            if delivery is None:
                self._check_alive(waiting)
                continue
            message = forwardable(delivery.message, sf_queue, self.manager.node_id)
            if message is None:
                LOG.warning("a message in a store-and-forward queue has no route for it; dropped",
                            extra={"queue": sf_queue, "message": delivery.message.message_id})
            else:
                await producer.send(message)
            await waiting.individual_acknowledge(delivery)

    def _check_alive(self, consumer: Consumer) -> None:
        """After a receive that timed out, or returned at once because the consumer is closed."""
        for connection in self._connections:
            failure = connection.failure
            if failure is not None:
                raise failure
        if consumer.core.closed:
            raise ConnectionFailed("the bridge's consumer was closed", int(ExceptionType.DISCONNECTED))

    def _identify(self, remote: Connection) -> str:
        return identify(remote, self.peer)

    async def _drop(self) -> None:
        connections, self._connections = self._connections, []
        for connection in connections:
            with contextlib.suppress(ClientError, OSError, TimeoutError):
                await asyncio.wait_for(connection.close(), 5.0)


def identify(remote: Connection, peer: Peer) -> str:
    """The ID of the node connected to: the topology member whose connector is ``peer``'s."""
    members = remote.core.topology
    for member in members.values():
        found = connector_of(member.live) if member.live is not None else None
        if found is not None and (found.host, found.port) == (peer.host, peer.port):
            return member.node_id
    if len(members) == 1:
        return next(iter(members))
    raise ValueError(f"cannot tell which of {sorted(members)} is the node at {peer.url}")


async def _first_failure(*work: Coroutine[Any, Any, None]) -> None:
    """Run the coroutines until one of them ends (with an error): the others are cancelled."""
    tasks = [asyncio.ensure_future(w) for w in work]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class ClusterManager:
    """A node's ``<cluster-connection>``: bridges to the static connectors, or to every node its
    discovery group finds; each event a bridge reports goes into the core, then the server flushes."""

    def __init__(self, hooks: ClusterHooks, cc: ClusterConnection, own_url: str, flush: Callable[[], None]) -> None:
        self.hooks = hooks
        self.cc = cc
        self.own_url = own_url
        self.flush = flush
        self.bridges: dict[tuple[str, int], Bridge] = {}
        #: bridges being stopped because their discovery entry expired
        self.retiring: set[asyncio.Task[None]] = set()
        self.stopped = False
        self.unsubscribe: Callable[[], None] = lambda: None

    @property
    def node_id(self) -> str:
        return self.hooks.role.node_id

    def connect_to(self, peer: Peer, *, discovered: bool = False) -> None:
        if self.stopped or (peer.host, peer.port) in self.bridges:
            return
        bridge = Bridge(self, peer, discovered=discovered)
        self.bridges[(peer.host, peer.port)] = bridge
        bridge.start()

    def discovered(self, connectors: list[TransportConfiguration]) -> None:
        """A discovery group's current entries: a bridge to every node not bridged yet.

        A node whose entry expired before any attempt reached it is no longer tried (Artemis's cluster
        locator swaps its initial connectors for the entries left); if it broadcasts again it is found
        anew.  A node that was reached stays bridged: from then on its bridge follows reconnect-attempts,
        as Artemis's bridges follow the topology, not the discovery group."""
        listed: set[tuple[str, int]] = set()
        for connector in connectors:
            found = connector_of(connector)
            if found is not None:
                listed.add((found.host, found.port))
                self.connect_to(Peer(found.host, found.port, connector), discovered=True)
        for key, bridge in list(self.bridges.items()):
            if bridge.discovered and not bridge.reached and key not in listed:
                LOG.info("a discovered node expired before it was reached: no longer tried",
                         extra={"peer": bridge.peer.url})
                del self.bridges[key]
                self._retire(bridge)

    def announced(self, node_id: str, connector: TransportConfiguration | None) -> None:
        """A cluster member announced a live node: a bridge to it, as to any node of the topology, unless the
        cluster connection bridges only to the nodes it names (allow-direct-connections-only)."""
        found = connector_of(connector) if connector is not None else None
        if found is None or self.cc.allow_direct_connections_only:
            return
        LOG.info("a cluster member announced a node: bridging to it", extra={"node": node_id, "peer": found.url})
        self.connect_to(Peer(found.host, found.port, connector))

    def _retire(self, bridge: Bridge) -> None:
        task = asyncio.get_running_loop().create_task(bridge.stop(), name=f"stop bridge to {bridge.peer.url}")
        self.retiring.add(task)
        task.add_done_callback(self.retiring.discard)

    def node_up(self, node_id: str, connector: TransportConfiguration | None) -> None:
        self.hooks.node_up(node_id, connector)
        self.flush()

    def node_down(self, node_id: str) -> None:
        self.hooks.node_down(node_id)
        self.flush()

    def node_left(self, node_id: str) -> None:
        self.hooks.node_left(node_id)
        self.flush()

    def heard(self, node_id: str, properties: Mapping[str, PropertyValue]) -> None:
        self.hooks.heard(node_id, properties)
        self.flush()

    async def stop(self) -> None:
        self.stopped = True
        self.unsubscribe()
        await asyncio.gather(*(b.stop() for b in self.bridges.values()), *self.retiring, return_exceptions=True)


def cluster_role(config: BrokerConfig, node_id: str) -> ClusterRole | None:
    """The core's view of broker.xml's cluster connection (the first one; more are reported)."""
    if not config.cluster_connections:
        return None
    cc = config.cluster_connections[0]
    for extra in config.cluster_connections[1:]:
        LOG.warning("only the first cluster-connection is used", extra={"ignored": extra.name})
    if config.cluster_password == "CHANGE ME!!":  # noqa: S105 - Artemis's default, the one worth a warning
        LOG.warning("cluster-password is the default: set cluster-user and cluster-password so that only your "
                    "nodes can join the cluster", extra={"cluster": cc.name})
    own = next((c for c in config.connectors if c.name == cc.connector_ref), None)
    return ClusterRole(
        cc.name, node_id, connector_transport_configuration(own) if own is not None else None,
        LoadBalancing(cc.message_load_balancing.value), cc.max_hops, cc.address, config.cluster_user,
        config.cluster_password, config.id_cache_size,
        config.ha_policy.scale_down.group_name if config.ha_policy.scale_down is not None else None,
        lambda address: config.address_settings_for(address).redistribution_delay,
    )  # fmt: skip


def start_cluster(config: BrokerConfig, hooks: ClusterHooks | None, udp: UdpGroups, own_url: str,
                  flush: Callable[[], None]) -> ClusterManager | None:
    """Start the bridges of broker.xml's cluster connection (after the acceptor listens)."""
    if hooks is None or not config.cluster_connections:
        return None
    cc = config.cluster_connections[0]
    manager = ClusterManager(hooks, cc, own_url, flush)
    hooks.bridge_announced_through(manager.announced)
    connectors = {c.name: c for c in config.connectors}
    for name in cc.static_connectors:
        connector = connectors[name]  # the parser checked every reference
        manager.connect_to(Peer(connector.host, connector.port, connector_transport_configuration(connector)))
    if cc.discovery_group_ref is not None:
        group = udp.discovery[cc.discovery_group_ref]

        def found(entries: tuple[DiscoveryEntry, ...]) -> None:
            manager.discovered([e.connector for e in entries if e.node_id != hooks.role.node_id])

        manager.unsubscribe = group.subscribe(found)
        found(group.entries)
    return manager
