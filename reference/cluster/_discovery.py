"""Broadcast and discovery groups, sans-IO (notes §12): what a broadcast group sends and when, and
what a discovery group makes of what it receives.  Time is passed in (``now_ms``: milliseconds of
any monotonic clock); nothing here touches a socket.

::

    broadcaster = Broadcaster(node_id, [connector_transport_configuration(c)], period_ms=2000, now_ms=now)
    payload = broadcaster.poll(now)          # bytes at once, then None until next_deadline()

    table = DiscoveryTable(node_id, refresh_timeout_ms=10_000)
    for change in table.receive(payload, ("10.0.0.5", 40123), now):
        ...                                  # NodeFound, NodeExpired, SameNodeNewUniqueId, ...
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from codec import (
    CodecError,
    DiscoveryDatagram,
    TransportConfiguration,
    TransportParam,
    TransportParamType,
    decode_discovery,
    encode_discovery,
)

from ..config import Connector

__all__ = [
    "INVM_CONNECTOR_FACTORY",
    "NETTY_CONNECTOR_FACTORY",
    "NETTY_CONNECTOR_KEYS",
    "Broadcaster",
    "ConnectorChanged",
    "DiscoveryChange",
    "DiscoveryEntry",
    "DiscoveryTable",
    "MalformedDatagram",
    "NodeExpired",
    "NodeFound",
    "SameNodeNewUniqueId",
    "Sender",
    "connector_transport_configuration",
    "java_hash_map_order",
    "notifies_listeners",
]

NETTY_CONNECTOR_FACTORY = "org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory"
INVM_CONNECTOR_FACTORY = "org.apache.activemq.artemis.core.remoting.impl.invm.InVMConnectorFactory"

#: The query keys a ``tcp://`` connector keeps as parameters (Netty ``TransportConstants``
#: ALLOWABLE_CONNECTOR_KEYS, the same 57 keys in 2.28.0 and 2.44.0); any other key travels as an
#: extra property (``$.EP.`` prefix on the wire).
NETTY_CONNECTOR_KEYS = frozenset({
    "activemq.passwordcodec", "activemq.usemaskedpassword", "activemqServerName", "batchDelay",
    "connect-timeout-millis", "crlPath", "enabledCipherSuites", "enabledProtocols", "forceSSLParameters",
    "handshake-timeout", "host", "httpClientIdleScanPeriod", "httpClientIdleTime", "httpEnabled",
    "httpRequiresSessionId", "httpUpgradeEnabled", "httpUpgradeEndpoint", "keyStoreAlias", "keyStorePassword",
    "keyStorePath", "keyStoreProvider", "keyStoreType", "localAddress", "localPort", "nioRemotingThreads",
    "port", "remotingThreads", "servletPath", "sniHost", "socksEnabled", "socksHost", "socksPassword",
    "socksPort", "socksRemoteDNS", "socksUsername", "socksVersion", "sslEnabled", "sslProvider", "tcpNoDelay",
    "tcpReceiveBufferSize", "tcpSendBufferSize", "trustAll", "trustManagerFactoryPlugin", "trustStorePassword",
    "trustStorePath", "trustStoreProvider", "trustStoreType", "useDefaultSslContext", "useEpoll",
    "useGlobalWorkerPool", "useKQueue", "useNio", "useNioGlobalWorkerPool", "useServlet", "verifyHost",
    "writeBufferHighWaterMark", "writeBufferLowWaterMark",
})  # fmt: skip

#: Where a datagram came from: ``(host, port)`` as the socket reports it.
Sender = tuple[str, int]


# --------------------------------------------------------------------------- the connector


def _java_string_hash(text: str) -> int:
    """``String.hashCode()``: over UTF-16 code units, 32-bit wrap-around (unsigned here)."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_map_order(keys: Iterable[str]) -> list[str]:
    """The order a ``java.util.HashMap`` created empty iterates ``keys`` put in that order.

    Buckets are ``(h ^ h >>> 16) & (capacity - 1)`` with the capacity doubling from 16 while the
    size exceeds 3/4 of it; a bucket keeps the order its keys were first put in (a resize splits
    buckets without reordering them).  Buckets turned into trees (8 colliding keys in a table of
    64 or more) are not modelled.
    """
    order = list(dict.fromkeys(keys))
    capacity = 16
    while len(order) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = _java_string_hash(key)
        return (h ^ (h >> 16)) & (capacity - 1)

    return [key for _, _, key in sorted((bucket(k), i, k) for i, k in enumerate(order))]


def _raw_authority(uri: str) -> tuple[str, str]:
    """Host and port of a transport URI as ``java.net.URI`` gives them to Artemis: an IPv6 host
    keeps its brackets, a missing port is ``-1``, an authority without a host is ``null``/``-1``."""
    rest = uri.strip().partition("://")[2].partition("#")[0]
    q = rest.rfind("?")
    authority = (rest[:q] if q >= 0 else rest).split("/", 1)[0]
    if authority.startswith("["):
        end = authority.find("]")
        host, tail = (authority[: end + 1], authority[end + 1 :]) if end >= 0 else (authority, "")
    else:
        host, sep, port = authority.partition(":")
        tail = sep + port
    port = tail[1:] if tail.startswith(":") and tail[1:].isdigit() else "-1"
    if not host:
        return "null", "-1"
    return host, port


def connector_transport_configuration(connector: Connector) -> TransportConfiguration:
    """The TransportConfiguration Artemis builds from a broker.xml ``<connector>`` and broadcasts.

    For ``tcp://``: the connector's name, the Netty connector factory, and every value a
    **string**: ``host`` and ``port`` from the URI's authority, then the query parameters (which
    may override them); query keys outside :data:`NETTY_CONNECTOR_KEYS` become extra properties.
    Parameters and extra properties are each in ``HashMap`` order, so the bytes are Artemis's
    (``tcp://127.0.0.1:58023`` encodes ``port`` before ``host``).  For ``vm://N``: the in-VM
    factory with ``serverId`` = N (Artemis drops the query of a ``vm://`` connector).
    """
    if connector.scheme == "vm":
        server_id = _raw_authority(connector.uri)[0]
        return TransportConfiguration(
            connector.name, INVM_CONNECTOR_FACTORY, (TransportParam("serverId", TransportParamType.STRING, server_id),)
        )
    host, port = _raw_authority(connector.uri)
    params: dict[str, str] = {"host": host, "port": port}
    extra: dict[str, str] = {}
    # Artemis reads the query into a HashMap first, so that map's order is the order of the puts.
    for key in java_hash_map_order(connector.params):
        (params if key in NETTY_CONNECTOR_KEYS else extra)[key] = connector.params[key]
    return TransportConfiguration(
        connector.name,
        NETTY_CONNECTOR_FACTORY,
        tuple(TransportParam(k, TransportParamType.STRING, params[k]) for k in java_hash_map_order(params)),
        tuple(TransportParam(k, TransportParamType.STRING, extra[k]) for k in java_hash_map_order(extra)),
    )


# --------------------------------------------------------------------------- broadcasting


class Broadcaster:
    """One broadcast group: the datagram it sends and when (``BroadcastGroupImpl``).

    The unique ID is a random UUID made once per instance (a broker start makes a new one).  The
    first datagram is due at ``now_ms``; then Artemis's fixed delay: each one ``period_ms`` after
    the previous was actually sent.
    """

    def __init__(
        self,
        node_id: str,
        connectors: Sequence[TransportConfiguration],
        period_ms: int,
        *,
        now_ms: int,
        unique_id: str | None = None,
    ) -> None:
        if period_ms <= 0:
            raise ValueError(f"period_ms must be > 0, got {period_ms}")
        self.period_ms = period_ms
        self.unique_id = unique_id if unique_id is not None else str(uuid.uuid4())
        self.datagram = DiscoveryDatagram(node_id, self.unique_id, tuple(connectors))
        #: The bytes of every datagram (the content never changes for one instance).
        self.payload = encode_discovery(self.datagram)
        self._due = now_ms
        #: How many datagrams :meth:`poll` handed out.
        self.sent = 0

    @property
    def node_id(self) -> str:
        return self.datagram.node_id

    def next_deadline(self) -> int:
        """When the next datagram is due (``now_ms`` clock)."""
        return self._due

    def poll(self, now_ms: int) -> bytes | None:
        """The datagram to send now, or ``None`` when none is due yet."""
        if now_ms < self._due:
            return None
        self._due = now_ms + self.period_ms
        self.sent += 1
        return self.payload


# --------------------------------------------------------------------------- discovery


@dataclass(frozen=True, slots=True)
class DiscoveryEntry:
    """What one node announced last (its last connector) and when that arrived."""

    node_id: str
    connector: TransportConfiguration
    last_update_ms: int


@dataclass(frozen=True, slots=True)
class NodeFound:
    """A node ID not in the table before announced a connector (listeners are told)."""

    notifies: ClassVar[bool] = True
    node_id: str
    connector: TransportConfiguration
    sender: Sender


@dataclass(frozen=True, slots=True)
class NodeExpired:
    """No datagram of the node for ``refresh-timeout``; seen when another datagram arrived (listeners are told)."""

    notifies: ClassVar[bool] = True
    node_id: str
    connector: TransportConfiguration
    last_update_ms: int


@dataclass(frozen=True, slots=True)
class ConnectorChanged:
    """A known node announced another connector: stored, but listeners are *not* told (as Artemis)."""

    notifies: ClassVar[bool] = False
    node_id: str
    old: TransportConfiguration
    new: TransportConfiguration
    sender: Sender


@dataclass(frozen=True, slots=True)
class SameNodeNewUniqueId:
    """A known node ID came with another unique ID: two servers broadcast the same node ID (or the
    node restarted).  Artemis only warns and remembers the new one."""

    notifies: ClassVar[bool] = False
    node_id: str
    old_unique_id: str
    new_unique_id: str
    sender: Sender


@dataclass(frozen=True, slots=True)
class MalformedDatagram:
    """A datagram that does not decode: ignored entirely (no expiry is evaluated for it)."""

    notifies: ClassVar[bool] = False
    sender: Sender
    error: CodecError


DiscoveryChange = NodeFound | NodeExpired | ConnectorChanged | SameNodeNewUniqueId | MalformedDatagram


def notifies_listeners(changes: Iterable[DiscoveryChange]) -> bool:
    """Whether Artemis would call its discovery listeners: a new node ID appeared or an entry expired."""
    return any(change.notifies for change in changes)


class DiscoveryTable:
    """One discovery group's view of the broadcasting nodes (Artemis's ``DiscoveryGroup``).

    ``node_id`` is the receiver's own (datagrams carrying it are ignored); ``refresh_timeout_ms``
    is ``refresh-timeout``.  Entries are keyed by node ID, so of a datagram's connectors only the
    last one is kept; an entry expires once ``last_update + refresh_timeout <= now``, evaluated
    only when a datagram arrives (there is no timer).  The broker's discovery groups and the kit
    client's ``udp://`` receiver both use it.
    """

    def __init__(self, node_id: str, refresh_timeout_ms: int = 10_000) -> None:
        if refresh_timeout_ms <= 0:
            raise ValueError(f"refresh_timeout_ms must be > 0, got {refresh_timeout_ms}")
        self.node_id = node_id
        self.refresh_timeout_ms = refresh_timeout_ms
        self._entries: dict[str, DiscoveryEntry] = {}
        self._unique_ids: dict[str, str] = {}
        #: How many well-formed datagrams of another node arrived, with connectors or without: each one
        #: sets Artemis's ``received`` flag, which ends a client's initial wait for a broadcast.
        self.broadcasts = 0

    @property
    def entries(self) -> tuple[DiscoveryEntry, ...]:
        """One entry per node, in the order the nodes were first seen."""
        return tuple(self._entries.values())

    @property
    def unique_ids(self) -> Mapping[str, str]:
        """The last unique ID seen per node ID (our own included)."""
        return MappingProxyType(self._unique_ids)

    def receive(self, data: bytes, sender: Sender, now_ms: int) -> tuple[DiscoveryChange, ...]:
        """Take one datagram that arrived from ``sender`` at ``now_ms``; return what it changed."""
        try:
            datagram = decode_discovery(data)
        except CodecError as exc:
            return (MalformedDatagram(sender, exc),)
        changes: list[DiscoveryChange] = []
        node = datagram.node_id
        known = self._unique_ids.get(node)
        if known is not None and known != datagram.unique_id:
            changes.append(SameNodeNewUniqueId(node, known, datagram.unique_id, sender))
        self._unique_ids[node] = datagram.unique_id
        if node != self.node_id:
            self.broadcasts += 1
        if node != self.node_id and datagram.connectors:
            # keyed by node ID: of the datagram's connectors the last one stays
            previous = self._entries.get(node)
            last = datagram.connectors[-1]
            self._entries[node] = DiscoveryEntry(node, last, now_ms)
            if previous is None:
                changes.append(NodeFound(node, last, sender))
            elif previous.connector != last:
                changes.append(ConnectorChanged(node, previous.connector, last, sender))
        changes.extend(self._expire(now_ms))
        return tuple(changes)

    def _expire(self, now_ms: int) -> list[DiscoveryChange]:
        gone = [e for e in self._entries.values() if e.last_update_ms + self.refresh_timeout_ms <= now_ms]
        for entry in gone:
            del self._entries[entry.node_id]
        return [NodeExpired(e.node_id, e.connector, e.last_update_ms) for e in gone]
