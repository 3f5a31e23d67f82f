"""Client-side UDP discovery (notes §12): a sans-IO table of what broadcast groups announce, and a
small asyncio receiver that feeds it.

The table follows Artemis's ``DiscoveryGroup``: entries are keyed by the broadcasting node's ID
(the last connector of a datagram wins), a datagram carrying our own node ID is ignored, and
entries older than ``refreshTimeout`` are dropped — evaluated only when a datagram arrives, there
is no timer.  Time is passed in (``now``, seconds of any monotonic clock).

::

    table = DiscoveryTable(node_id=str(uuid.uuid4()), refresh_timeout_ms=10_000)
    arrival = table.receive(datagram_bytes, now, sender="10.0.0.5:40123")
    table.connectors  # (Connector("10.0.0.5", 61616),) in discovery order
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codec import CodecError, DiscoveryDatagram, ExceptionType, TransportConfiguration, decode_discovery

from ._errors import ConnectionFailed
from ._locator import DEFAULT_PORT, Connector, DiscoveryEndpoint

LOG = logging.getLogger("reference.client.discovery")

__all__ = ["DiscoveryArrival", "DiscoveryEntry", "DiscoveryReceiver", "DiscoveryTable", "connector_of", "discover"]

#: Artemis's Netty connector defaults (TransportConstants.DEFAULT_HOST / DEFAULT_PORT) for a
#: TransportConfiguration without ``host`` or ``port``.
_DEFAULT_HOST = "localhost"


@dataclass(frozen=True)
class DiscoveryEntry:
    """What one node announced last, and when it arrived (the table's clock)."""

    node_id: str
    connector: TransportConfiguration
    last_update: float


@dataclass(frozen=True)
class DiscoveryArrival:
    """What one datagram did to the table.

    ``kind`` is ``"new"`` (a node not known before), ``"refresh"`` (a known node), ``"empty"`` (no
    connectors: nothing stored, but it still counts as a broadcast, as in Artemis), ``"own"`` (our own node
    ID: ignored) or ``"malformed"`` (ignored; ``warning`` names the sender and the codec error).
    ``changed`` is when Artemis calls its discovery listeners: a new node appeared or an entry expired.
    """

    kind: str
    sender: str
    node_id: str | None = None
    changed: bool = False
    expired: tuple[str, ...] = ()
    warning: str | None = None

    @property
    def counts_as_broadcast(self) -> bool:
        """Whether this ends the initial wait (Artemis sets ``received`` only for another node's valid datagram)."""
        return self.kind in ("new", "refresh", "empty")


def connector_of(config: TransportConfiguration) -> Connector | None:
    """The TCP connector a TransportConfiguration describes, or ``None`` when it is not a Netty connector.

    ``host`` and ``port`` may be strings (URI-built connectors) or numbers (programmatic ones), notes §3.8;
    a missing one takes Artemis's Netty default (localhost, 61616)."""
    if not config.factory_class_name.endswith("NettyConnectorFactory"):
        return None
    host = config.param("host", _DEFAULT_HOST)
    port = config.param("port", DEFAULT_PORT)
    if not isinstance(host, str) or not isinstance(port, int | str) or isinstance(port, bool):
        return None
    try:
        number = int(port)
    except ValueError:
        return None
    if not 0 < number < 65536:
        return None
    return Connector(host, number)


class DiscoveryTable:
    """The receiver's view of the broadcasting nodes, sans-IO.  ``node_id`` is our own (a random UUID for a
    client); ``refresh_timeout_ms`` is ``refreshTimeout``."""

    def __init__(self, node_id: str, refresh_timeout_ms: int = 10_000) -> None:
        if refresh_timeout_ms <= 0:
            raise ValueError(f"refresh_timeout_ms must be > 0, got {refresh_timeout_ms}")
        self.node_id = node_id
        self.refresh_timeout_ms = refresh_timeout_ms
        self._entries: dict[str, DiscoveryEntry] = {}
        self._unique_ids: dict[str, str] = {}
        #: How many datagrams counted as a broadcast (another node's, well-formed).
        self.broadcasts = 0

    @property
    def entries(self) -> tuple[DiscoveryEntry, ...]:
        """One entry per node, in the order the nodes were first seen."""
        return tuple(self._entries.values())

    @property
    def connectors(self) -> tuple[Connector, ...]:
        """The TCP connectors of the known nodes, in discovery order (entries that are not TCP connectors
        are left out; :meth:`receive` warns about them)."""
        found = (connector_of(entry.connector) for entry in self._entries.values())
        return tuple(c for c in found if c is not None)

    def receive(self, data: bytes, now: float, sender: str = "?") -> DiscoveryArrival:
        """Take one datagram that arrived at ``now`` from ``sender`` (``host:port``, for messages)."""
        try:
            datagram = decode_discovery(data)
        except CodecError as exc:
            # Artemis logs and goes on; it evaluates no expiry for a datagram it cannot read.
            return DiscoveryArrival("malformed", sender,
                                    warning=f"ignored a malformed discovery datagram from {sender}: {exc}")
        warning = self._check_unique_id(datagram)
        if datagram.node_id == self.node_id:
            expired = self._expire(now)
            return DiscoveryArrival("own", sender, datagram.node_id, bool(expired), expired, warning)
        warning = self._usable(datagram, sender) or warning
        new = False
        for config in datagram.connectors:  # keyed by node: the last connector of the datagram stays
            new = self._entries.get(datagram.node_id) is None or new
            self._entries[datagram.node_id] = DiscoveryEntry(datagram.node_id, config, now)
        expired = self._expire(now)
        self.broadcasts += 1
        kind = "new" if new else "refresh" if datagram.connectors else "empty"
        return DiscoveryArrival(kind, sender, datagram.node_id, new or bool(expired), expired, warning)

    def _check_unique_id(self, datagram: DiscoveryDatagram) -> str | None:
        known = self._unique_ids.get(datagram.node_id)
        self._unique_ids[datagram.node_id] = datagram.unique_id
        if known is not None and known != datagram.unique_id:
            return (f"multiple servers broadcasting node id {datagram.node_id} "
                    f"(unique id {known} then {datagram.unique_id})")
        return None

    def _usable(self, datagram: DiscoveryDatagram, sender: str) -> str | None:
        if not datagram.connectors:
            return None
        last = datagram.connectors[-1]
        if connector_of(last) is None:
            return (f"node {datagram.node_id} (from {sender}) announces connector {last.name!r} "
                    f"({last.factory_class_name}, params { {p.key: p.value for p in last.params} }), "
                    "which is not a TCP host:port the kit can connect to")
        return None

    def _expire(self, now: float) -> tuple[str, ...]:
        limit = self.refresh_timeout_ms / 1000
        gone = tuple(node for node, entry in self._entries.items() if entry.last_update + limit <= now)
        for node in gone:
            del self._entries[node]
        return gone


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, receiver: DiscoveryReceiver) -> None:
        self.receiver = receiver

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.receiver._arrived(data, f"{addr[0]}:{addr[1]}")

    def error_received(self, exc: Exception) -> None:
        LOG.warning("discovery on %s: %s", self.receiver.endpoint.url, exc)


class DiscoveryReceiver:
    """Joins the group on ``endpoint.local_bind_address`` and feeds every datagram to a :class:`DiscoveryTable`.

    As Artemis opens its receiving socket: bound to (group, port), falling back to the wildcard address when
    the system refuses that, with SO_REUSEADDR (and SO_REUSEPORT) so several receivers share the port."""

    def __init__(self, endpoint: DiscoveryEndpoint, *, node_id: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.endpoint = endpoint
        self.clock = clock
        self.table = DiscoveryTable(node_id or str(uuid.uuid4()), endpoint.refresh_timeout_ms)
        self.arrivals: list[DiscoveryArrival] = []
        self._broadcast = asyncio.Event()
        self._transport: asyncio.DatagramTransport | None = None

    @property
    def node_id(self) -> str:
        return self.table.node_id

    @property
    def connectors(self) -> tuple[Connector, ...]:
        return self.table.connectors

    @property
    def where(self) -> str:
        """``group:port (joined on address)``, for messages."""
        endpoint = self.endpoint
        return f"{endpoint.group_address}:{endpoint.group_port} (joined on {endpoint.local_bind_address})"

    async def open(self) -> None:
        try:
            sock = _multicast_socket(self.endpoint)
        except OSError as exc:
            raise ConnectionFailed(f"cannot join the discovery group {self.where}: {exc}") from exc
        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(lambda: _Datagrams(self), sock=sock)
        self._transport = transport

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    async def wait_for_broadcast(self, timeout_ms: int) -> bool:
        """Wait (at most ``timeout_ms``) for a datagram that counts as a broadcast since the last wait;
        as Artemis's ``waitForBroadcast``, the flag is consumed."""
        try:
            await asyncio.wait_for(self._broadcast.wait(), timeout_ms / 1000)
        except TimeoutError:
            return False
        self._broadcast.clear()
        return True

    def _arrived(self, data: bytes, sender: str) -> None:
        arrival = self.table.receive(data, self.clock(), sender)
        self.arrivals.append(arrival)
        if arrival.warning is not None:
            LOG.warning("discovery on %s: %s", self.where, arrival.warning)
        if arrival.counts_as_broadcast:
            self._broadcast.set()

    async def __aenter__(self) -> DiscoveryReceiver:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


def _multicast_socket(endpoint: DiscoveryEndpoint) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            sock.bind((endpoint.group_address, endpoint.group_port))
        except OSError:
            sock.bind(("", endpoint.group_port))
        membership = socket.inet_aton(endpoint.group_address) + socket.inet_aton(endpoint.local_bind_address)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def discover(endpoint: DiscoveryEndpoint, initial_connect_attempts: int, *,
                   clock: Callable[[], float] = time.monotonic) -> DiscoveryReceiver:
    """Open a receiver and wait for the first broadcast, as ServerLocator does before connecting (notes §12.2).

    Each wait lasts ``initial_wait_timeout_ms``; with ``initialConnectAttempts`` N > 0 a timed-out wait is
    retried N times (Artemis's ``executeDiscovery``: N + 1 waits in all), otherwise it fails at once.  Returns
    the open receiver (the caller closes it) once it knows at least one TCP connector; raises
    :class:`ConnectionFailed` (``CONNECTION_TIMEDOUT``) when nothing arrived."""
    receiver = DiscoveryReceiver(endpoint, clock=clock)
    await receiver.open()
    try:
        waits = 1 + max(0, initial_connect_attempts)
        timeout = endpoint.initial_wait_timeout_ms
        for wait in range(1, waits + 1):
            if await receiver.wait_for_broadcast(timeout):
                break
            if wait < waits:
                LOG.warning("discovery on %s: no broadcast within %d ms, waiting again (%d of %d)",
                            receiver.where, timeout, wait + 1, waits)
        else:
            detail = f" ({waits} waits: initialConnectAttempts={initial_connect_attempts})" if waits > 1 else ""
            raise ConnectionFailed(f"no broadcast on {receiver.where} within {timeout} ms{detail}",
                                   int(ExceptionType.CONNECTION_TIMEDOUT))
        if not receiver.connectors:
            nodes = ", ".join(entry.node_id for entry in receiver.table.entries) or "none"
            raise ConnectionFailed(f"the broadcasts on {receiver.where} name no TCP connector to connect to "
                                   f"(nodes: {nodes})")
    except BaseException:
        receiver.close()
        raise
    return receiver
