"""Channels 0 and 1: pings and topology subscriptions; session creation, reattach and the failover
check (notes §5.2, §9).  Each channel is a table from packet class to handler, like the session one."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from cck.codec import (
    COMPATIBLE_VERSIONS,
    ActiveMQExceptionMessage,
    CheckFailoverMessage,
    CheckFailoverReplyMessage,
    CreateSessionMessage,
    CreateSessionMessage_V2,
    CreateSessionResponseMessage,
    ExceptionType,
    Packet,
    PacketsConfirmedMessage,
    Ping,
    ReattachSessionMessage,
    ReattachSessionResponseMessage,
    SubscribeClusterTopologyUpdatesMessage,
    SubscribeClusterTopologyUpdatesMessageV2,
)

from ._authorization import BrokerLogin, Principal
from ._connection import Connection
from ._outbox import Outbox
from ._session import Session, SessionRegistry
from ._session_handlers import SessionHandlers
from ._settings import BrokerSettings
from ._topology import PING_CHANNEL, Topology

__all__ = ["PING_CHANNEL", "SESSION_SETUP_CHANNEL", "ConnectionHandlers"]

LOG = logging.getLogger("cck.reference.broker")

#: Channel 1 carries session creation and reattach.
SESSION_SETUP_CHANNEL = 1

ChannelHandler = Callable[[Connection, Any], None]


class ConnectionHandlers:
    """The handlers of channels 0 and 1, by packet class (:attr:`channel0`, :attr:`channel1`)."""

    def __init__(self, settings: BrokerSettings, outbox: Outbox, registry: SessionRegistry,
                 sessions: SessionHandlers, topology: Topology) -> None:
        self._settings = settings
        self._outbox = outbox
        self._registry = registry
        self._sessions = sessions
        self._topology = topology
        self.channel0: dict[type[Packet], ChannelHandler] = {
            Ping: self._ping,
            SubscribeClusterTopologyUpdatesMessage: self._subscribe,
            SubscribeClusterTopologyUpdatesMessageV2: self._subscribe,
            PacketsConfirmedMessage: _ignore,
        }
        self.channel1: dict[type[Packet], ChannelHandler] = {
            CreateSessionMessage: self._create_session,
            CreateSessionMessage_V2: self._create_session,
            ReattachSessionMessage: self._reattach,
            CheckFailoverMessage: self._check_failover,
        }

    # ------------------------------------------------------------------ channel 0

    def _ping(self, conn: Connection, packet: Ping) -> None:
        if self._settings.connection_ttl_override_ms == -1:
            conn.ttl_ms = packet.connection_ttl
        self._outbox.send(conn, PING_CHANNEL, packet)

    def _subscribe(self, conn: Connection,
                   packet: SubscribeClusterTopologyUpdatesMessage | SubscribeClusterTopologyUpdatesMessageV2) -> None:
        if isinstance(packet, SubscribeClusterTopologyUpdatesMessageV2):
            conn.set_version(packet.client_version)
        conn.topology_subscribed = True
        self._topology.send_all(conn)

    # ------------------------------------------------------------------ channel 1

    def _check_failover(self, conn: Connection, packet: CheckFailoverMessage) -> None:
        self._outbox.send(conn, SESSION_SETUP_CHANNEL, CheckFailoverReplyMessage(True))

    def _refuse_login(self, conn: Connection, code: int, message: str) -> None:
        # only the session is refused: the connection and its other sessions stay (as Artemis's handleCreateSession
        # answers and closes nothing), and the client may try again on it
        self._outbox.send(conn, SESSION_SETUP_CHANNEL, ActiveMQExceptionMessage(code, message))

    def _create_session(self, conn: Connection, packet: CreateSessionMessage | CreateSessionMessage_V2) -> None:
        settings = self._settings
        if packet.version not in COMPATIBLE_VERSIONS:
            self._outbox.send(conn, SESSION_SETUP_CHANNEL, ActiveMQExceptionMessage(
                ExceptionType.INCOMPATIBLE_CLIENT_SERVER_VERSIONS,
                f"client version {packet.version} is not one of {COMPATIBLE_VERSIONS[0]}..{COMPATIBLE_VERSIONS[-1]}"))
            return
        if conn.version == 0:
            conn.set_version(packet.version)
        if isinstance(packet, CreateSessionMessage_V2) and packet.client_id:
            conn.client_id = packet.client_id
        role = settings.cluster
        if (role is not None and settings.authenticator is not None and packet.username == role.user
                and packet.password != role.password):
            # the cluster user is checked against cluster-password only (Artemis: 212, AMQ229099)
            self._refuse_login(conn, ExceptionType.CLUSTER_SECURITY_EXCEPTION,
                               f"AMQ229099: Unable to authenticate cluster user: {packet.username}")
            return
        principal = self._authenticate(packet.username, packet.password, conn.peer_certificate)
        if principal is None:
            self._refuse_login(conn, ExceptionType.SECURITY_EXCEPTION,
                               f"AMQ229031: Unable to validate user: {packet.username}")
            return
        channel = packet.session_channel_id
        old = conn.sessions.get(channel)
        if old is not None:  # a recreated session on the same channel (notes §9.5)
            self._sessions.close_session(old, failed=True)
        session = Session(
            name=packet.name,
            channel_id=channel,
            connection=conn,
            username=packet.username,
            principal=principal,
            xa=packet.xa,
            auto_commit_sends=packet.auto_commit_sends,
            auto_commit_acks=packet.auto_commit_acks,
            pre_acknowledge=packet.pre_acknowledge,
            window_size=packet.confirmation_window_size,
            default_address=packet.default_address,
            xa_timeout_s=settings.transaction_timeout_s,
        )
        conn.sessions[channel] = session
        conn.used_channels.add(channel)
        replaced = self._registry.register(session)
        if replaced is not None and replaced is not old:
            LOG.info("session name reused; replacing the registration", extra={"session": packet.name})
        self._outbox.send(conn, SESSION_SETUP_CHANNEL, CreateSessionResponseMessage(settings.server_version))
        LOG.info("session created", extra={"session": packet.name, "conn": conn.conn_id,
                                            "window": packet.confirmation_window_size})

    def _authenticate(self, username: str | None, password: str | None,
                      certificate: bytes | None = None) -> Principal | None:
        """The session's principal, or ``None``: refused.  A connection that presented a client certificate is
        judged by the certificate authenticator when there is one (Artemis's certificate domain)."""
        settings = self._settings
        role = settings.cluster
        if role is not None and username == role.user and password == role.password:
            # the other nodes' bridges log in with the cluster credentials, which hold every permission
            return BrokerLogin(username, every_permission=True)
        if certificate is not None and settings.certificate_authenticator is not None:
            return settings.certificate_authenticator(username, password, certificate)
        if settings.authenticator is not None:
            return settings.authenticator(username, password)
        if username is None or settings.users is None:
            return BrokerLogin(username) if settings.allow_anonymous else None
        return BrokerLogin(username) if settings.users.get(username) == password else None

    def _reattach(self, conn: Connection, packet: ReattachSessionMessage) -> None:
        session = self._registry.get(packet.name)
        if session is None:
            self._outbox.send(conn, SESSION_SETUP_CHANNEL, ReattachSessionResponseMessage(-1, False))
            return
        if not session.send_window.enabled:
            self._sessions.close_session(session, failed=True)
            self._outbox.send(conn, SESSION_SETUP_CHANNEL, ReattachSessionResponseMessage(-1, False))
            return
        old = session.connection
        if old is not conn:
            old.sessions.pop(session.channel_id, None)
        session.connection = conn
        session.detached_at_ms = None
        conn.sessions[session.channel_id] = session
        conn.used_channels.add(session.channel_id)
        # The server replays its unconfirmed packets before it answers (notes §9.4).
        self._outbox.replay(conn, session.send_window.replay_after(packet.last_confirmed_command_id))
        self._outbox.send(conn, SESSION_SETUP_CHANNEL,
                          ReattachSessionResponseMessage(session.receive_window.last_confirmed, True))
        LOG.info("session reattached", extra={"session": session.name, "conn": conn.conn_id})


def _ignore(conn: Connection, packet: Packet) -> None:
    """A confirmation on channel 0 confirms nothing the broker keeps."""
