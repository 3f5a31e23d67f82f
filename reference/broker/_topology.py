"""The cluster topology as clients hear it on channel 0 (notes §5.2): the members when a client
subscribes, and each member that joins later."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cck.codec import (
    ClusterTopologyChangeMessage,
    ClusterTopologyChangeMessage_V2,
    ClusterTopologyChangeMessage_V4,
    Packet,
    TransportConfiguration,
)

from ._backups import BackupRegistry
from ._cluster_hooks import ClusterHooks
from ._connection import Connection
from ._outbox import Outbox
from ._settings import BrokerSettings

__all__ = ["PING_CHANNEL", "Topology"]

#: Channel 0 carries pings and topology.
PING_CHANNEL = 0


class Topology:
    """Tells subscribed connections of the members.  ``connections``: the core's map, read only here;
    ``wall_clock_ms``: a member's event time is wall-clock (the only wall-clock time in the core); ``backups``:
    this node's announced backup, paired with this node's own connector."""

    def __init__(self, settings: BrokerSettings, outbox: Outbox, connections: Mapping[int, Connection],
                 wall_clock_ms: Callable[[], int], cluster: ClusterHooks | None,
                 backups: BackupRegistry | None = None) -> None:
        self._settings = settings
        self._outbox = outbox
        self._connections = connections
        self._wall_clock_ms = wall_clock_ms
        self._cluster = cluster
        self._backups = backups

    def send_all(self, conn: Connection) -> None:
        """Every member, this node first, the last one with last=true; a standalone broker sends itself
        without connectors."""
        members: list[tuple[str, TransportConfiguration | None]] = [(self._settings.node_id, None)]
        if self._cluster is not None:
            members = self._cluster.members()
        for index, (node, connector) in enumerate(members):
            self._send_member(conn, node, connector, last=index == len(members) - 1)

    def member_joined(self, node: str, connector: TransportConfiguration | None) -> None:
        """Every connection that subscribed to the topology hears of it (last=false, as Artemis sends
        updates after the first topology)."""
        for conn in self._connections.values():
            if conn.topology_subscribed and not conn.closing:
                self._send_member(conn, node, connector, last=False)

    def backup_changed(self) -> None:
        """This node's backup came or went: its member again, with the backup connector or without."""
        own = self._settings.node_id
        connector = dict(self._cluster.members()).get(own) if self._cluster is not None else None
        self.member_joined(own, connector)

    def _send_member(self, conn: Connection, node: str, connector: TransportConfiguration | None, *,
                     last: bool) -> None:
        event, version = self._wall_clock_ms(), conn.version
        settings = self._settings
        role = settings.cluster
        own = node == settings.node_id
        group = role.scale_down_group if role is not None and own else None
        backup = self._backups.connector if own and self._backups is not None else None
        packet: Packet
        if version >= 131 or version == 0:
            packet = ClusterTopologyChangeMessage_V4(False, node, event, connector, backup, last, None, group,
                                                     settings.server_version)
        elif version >= 122:
            packet = ClusterTopologyChangeMessage_V2(False, node, event, connector, backup, last, None)
        else:
            packet = ClusterTopologyChangeMessage(False, node, connector, backup, last)
        self._outbox.send(conn, PING_CHANNEL, packet)
