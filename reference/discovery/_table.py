"""A discovery group, sans-IO (notes §12): what it makes of the datagrams it receives.  Time is passed
in (``now_ms``: monotonic milliseconds, :mod:`reference._clock`); nothing here touches a socket."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from cck.codec import CodecError, TransportConfiguration, decode_discovery

__all__ = [
    "ConnectorChanged",
    "DiscoveryChange",
    "DiscoveryEntry",
    "DiscoveryTable",
    "MalformedDatagram",
    "NodeExpired",
    "NodeFound",
    "SameNodeNewUniqueId",
    "Sender",
    "notifies_listeners",
]

#: Where a datagram came from: ``(host, port)`` as the socket reports it.
Sender = tuple[str, int]


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
