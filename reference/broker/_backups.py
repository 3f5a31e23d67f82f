"""Backup servers of this node, as clients learn them from the topology (spec 004 "Fail-over (session state)":
a cluster member informs its clients of backup candidates).

A backup announces itself on channel 3 of a connection to its primary: CLUSTER_CONNECT with the cluster
credentials, then NODE_ANNOUNCE with ``backup = true`` and this node's ID (notes §5, the packet catalogue:
NODE_ANNOUNCE is accepted only after a successful CLUSTER_CONNECT).  The backup stays announced while that
connection lives; when it closes, the topology loses the backup again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from cck.codec import (
    SERVER_CONNECT_VOTE_HANDLERS,
    BackupRegistrationMessage,
    BackupRegistrationProblem,
    BackupReplicationStartFailedMessage,
    ClusterConnectMessage,
    ClusterConnectReplyMessage,
    NodeAnnounceMessage,
    Packet,
    QuorumVoteMessage,
    QuorumVoteReplyMessage,
    ReplicaSubscribe,
    ServerConnectVote,
    TransportConfiguration,
)

from ._cluster_hooks import ClusterHooks
from ._connection import Connection
from ._outbox import Outbox
from ._settings import BrokerSettings

__all__ = ["CLUSTER_CHANNEL", "BackupRegistry", "ClusterChannelHandlers", "java_string"]

LOG = logging.getLogger("cck.reference.broker")

#: Channel 3 carries what servers say to each other (cluster login, node announcements).
CLUSTER_CHANNEL = 3

#: Told when this node's backup connector changes (``None``: no backup any more).
BackupChanged = Callable[[TransportConfiguration | None], None]


class BackupRegistry:
    """Which connection announced a backup of this node, and its connector (the latest announcement wins)."""

    def __init__(self, changed: BackupChanged) -> None:
        self._changed = changed
        self._by_conn: dict[int, TransportConfiguration] = {}
        self._listeners: list[BackupChanged] = []

    def listen(self, listener: BackupChanged) -> None:
        """Also tell ``listener`` when the backup changes (a server that waits for one before it hands over)."""
        self._listeners.append(listener)

    def _tell(self) -> None:
        self._changed(self.connector)
        for listener in self._listeners:
            listener(self.connector)

    @property
    def connector(self) -> TransportConfiguration | None:
        """The backup clients should fail over to: the most recent one still connected."""
        return next(reversed(self._by_conn.values()), None)

    def announced(self, conn: Connection, connector: TransportConfiguration) -> None:
        before = self.connector
        self._by_conn.pop(conn.conn_id, None)
        self._by_conn[conn.conn_id] = connector
        if self.connector != before:
            LOG.info("backup announced", extra={"conn": conn.conn_id, "backup": connector.params})
            self._tell()

    def connection_lost(self, conn_id: int) -> None:
        before = self.connector
        if self._by_conn.pop(conn_id, None) is not None and self.connector != before:
            LOG.info("backup gone", extra={"conn": conn_id})
            self._tell()


def java_string(connector: TransportConfiguration) -> str:
    """A connector as Artemis's ``TransportConfiguration.toString()`` prints it (what a server-connect vote
    carries): every dot a dash (Artemis's wildcard escaping), the parameters' passwords masked.  Artemis prints the
    parameters in its HashMap's order, the reference in wire order; a voter compares the string only with one it got
    the same way."""
    def dashed(text: object) -> str:
        return str(text).replace(".", "-")

    # passwords masked among the parameters only: extra properties are printed as they are
    params = [(p.key, "****" if "password" in p.key.lower() else p.value) for p in connector.params]
    params += [(p.key, p.value) for p in connector.extra_props]
    text = "&".join(f"{dashed(key)}={dashed(_java_value(value))}" for key, value in params)
    factory = dashed(connector.factory_class_name)
    return f"TransportConfiguration(name={connector.name}, factory={factory})" + (f"?{text}" if text else "")


def _java_value(value: object) -> str:
    """A parameter value as Java's ``toString`` prints it."""
    if value is None:
        return "null"
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


class ClusterChannelHandlers:
    """The handlers of channel 3 by packet class (:attr:`table`): cluster login, node announcements, a backup's
    subscription to the journal (the connection then leaves the core for the server's replication), the
    server-connect quorum vote, and Artemis's backup registration (refused: the reference replicates to reference
    backups only, with its own packets).  Everything but the login is ignored before a successful login."""

    def __init__(self, settings: BrokerSettings, outbox: Outbox, backups: BackupRegistry,
                 cluster: ClusterHooks | None = None) -> None:
        self._settings = settings
        self._outbox = outbox
        self._backups = backups
        self._cluster = cluster
        self._authorized: set[int] = set()
        self.table: dict[type[Packet], Callable[[Connection, Any], None]] = {
            ClusterConnectMessage: self._cluster_connect,
            NodeAnnounceMessage: self._node_announce,
            ReplicaSubscribe: self._replica_subscribe,
            QuorumVoteMessage: self._quorum_vote,
            BackupRegistrationMessage: self._backup_registration,
        }

    def _cluster_connect(self, conn: Connection, packet: ClusterConnectMessage) -> None:
        role = self._settings.cluster
        # without a cluster connection there are no cluster credentials to present: nobody is a peer
        ok = role is not None and (packet.cluster_user, packet.cluster_password) == (role.user, role.password)
        if ok:
            self._authorized.add(conn.conn_id)
        else:
            LOG.warning("cluster login refused", extra={"conn": conn.conn_id, "user": packet.cluster_user})
        self._outbox.send(conn, CLUSTER_CHANNEL, ClusterConnectReplyMessage(ok))

    def _node_announce(self, conn: Connection, packet: NodeAnnounceMessage) -> None:
        if conn.conn_id not in self._authorized:
            LOG.warning("node announcement before a cluster login ignored", extra={"conn": conn.conn_id})
            return
        connector = packet.backup_connector or packet.connector
        if packet.backup and packet.node_id == self._settings.node_id and connector is not None:
            self._backups.announced(conn, connector)
        elif not packet.backup and packet.connector is not None and self._cluster is not None:
            self._cluster.node_announced(packet.node_id, packet.connector)

    def _replica_subscribe(self, conn: Connection, packet: ReplicaSubscribe) -> None:
        if conn.conn_id not in self._authorized:
            LOG.warning("replica subscription before a cluster login refused", extra={"conn": conn.conn_id})
            self._outbox.close_after_output(conn)
        elif not self._settings.accept_replicas:
            LOG.warning("replica subscription refused: this server is not a replication primary",
                        extra={"conn": conn.conn_id, "backup": packet.backup})
            self._outbox.close_after_output(conn)
        else:
            LOG.info("backup subscribed to the journal", extra={"conn": conn.conn_id, "backup": packet.backup})
            self._outbox.hand_over(conn)

    def _quorum_vote(self, conn: Connection, packet: QuorumVoteMessage) -> None:
        """As Artemis's server-connect vote handler, which its replication servers register: a node the topology
        has as live keeps the asker's vote, with the node's connector; an unknown one gets the opposite vote."""
        if conn.conn_id not in self._authorized:
            LOG.warning("quorum vote before a cluster login ignored", extra={"conn": conn.conn_id})
            return
        if not self._settings.accept_replicas or packet.handler not in SERVER_CONNECT_VOTE_HANDLERS \
                or packet.vote is None:
            LOG.warning("quorum vote with no handler here ignored", extra={"conn": conn.conn_id,
                                                                           "handler": packet.handler})
            return
        asked = packet.vote
        members = dict(self._cluster.members()) if self._cluster is not None else {}
        connector = members.get(asked.node_id)
        answer = (ServerConnectVote(asked.vote, asked.node_id, java_string(connector)) if connector is not None
                  else ServerConnectVote(not asked.vote, asked.node_id, None))
        self._outbox.send(conn, CLUSTER_CHANNEL, QuorumVoteReplyMessage(packet.handler, answer))

    def _backup_registration(self, conn: Connection, packet: BackupRegistrationMessage) -> None:
        if conn.conn_id not in self._authorized:
            LOG.warning("backup registration before a cluster login ignored", extra={"conn": conn.conn_id})
            return
        # Artemis's replication packets are not the reference's: a replicating primary says it already has its
        # backup when it has, and otherwise refuses with the general problem
        problem = (BackupRegistrationProblem.ALREADY_REPLICATING if self._backups.connector is not None
                   else BackupRegistrationProblem.EXCEPTION)
        LOG.warning("backup registration refused: the reference replicates to reference backups only",
                    extra={"conn": conn.conn_id, "problem": problem.name, "backup": packet.connector.params})
        self._outbox.send(conn, CLUSTER_CHANNEL, BackupReplicationStartFailedMessage(int(problem)))

    def connection_lost(self, conn_id: int) -> None:
        self._authorized.discard(conn_id)
        self._backups.connection_lost(conn_id)
