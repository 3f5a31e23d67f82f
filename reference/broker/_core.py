"""The broker core: a sans-IO state machine for the Artemis core protocol.

Rules of this module:
* No I/O and no clock: callers feed bytes with ``receive(conn_id, data, now)``,
  call ``tick(now)`` at ``next_deadline()``, and take bytes to write with
  ``take_output()``.  ``now`` is a monotonic time in seconds.
* A packet is handled completely (state change, storage call, reply) before the
  next one; replies go to the connection's outbox.  Storage calls are made
  before the reply is queued, and the transport makes storage durable (one
  fsync for everything queued, a group commit) before it writes the outbox.
* Every confirmable packet a session sends is kept in its resend cache; every
  confirmable packet it receives is counted once processed, except when the
  reply is an EXCEPTION (as Artemis does, notes §9.3).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codec import (
    COMPATIBLE_VERSIONS,
    CURRENT_VERSION,
    ActiveMQExceptionMessage,
    CheckFailoverMessage,
    CheckFailoverReplyMessage,
    ClusterTopologyChangeMessage,
    ClusterTopologyChangeMessage_V2,
    ClusterTopologyChangeMessage_V4,
    CodecError,
    CreateSessionMessage,
    CreateSessionMessage_V2,
    CreateSessionResponseMessage,
    DisconnectMessage,
    DisconnectMessage_V2,
    DisconnectMessage_V3,
    DisconnectReason,
    ExceptionType,
    Frame,
    Packet,
    PacketsConfirmedMessage,
    Ping,
    ReattachSessionMessage,
    ReattachSessionResponseMessage,
    SubscribeClusterTopologyUpdatesMessage,
    SubscribeClusterTopologyUpdatesMessageV2,
    TransportConfiguration,
    UnknownPacketType,
    encode_packet,
)

from ._cluster import ClusterRole
from ._cluster_hooks import ClusterHooks
from ._connection import Connection
from ._errors import BrokerError
from ._session import Session
from ._session_handlers import SessionHandlers

__all__ = ["BrokerCore", "BrokerSettings"]

LOG = logging.getLogger("reference.broker")

#: Channel 0 carries pings and topology; channel 1 session creation and reattach.
PING_CHANNEL = 0
SESSION_SETUP_CHANNEL = 1
FIRST_SESSION_CHANNEL = 10


@dataclass(frozen=True)
class BrokerSettings:
    """What the core needs from the configuration."""

    node_id: str
    #: user -> password; ``None`` means anonymous access is allowed.
    users: dict[str, str] | None = None
    allow_anonymous: bool = True
    #: (user, password) -> accepted?  When set it decides, instead of ``users``.
    authenticator: Callable[[str | None, str | None], bool] | None = None
    auto_create_queues: bool = True
    auto_create_addresses: bool = True
    default_routing_type: int = 0  # MULTICAST, Artemis's default-address-routing-type
    connection_ttl_override_ms: int = -1
    ttl_check_interval_s: float = 2.0
    transaction_timeout_s: int = 300
    transaction_timeout_scan_s: float = 1.0
    server_version: int = CURRENT_VERSION
    #: this node's cluster connection, when broker.xml has one
    cluster: ClusterRole | None = None


@dataclass
class _Timers:
    next_ttl_check: float = 0.0
    next_tx_scan: float = 0.0


class BrokerCore:
    """The whole broker state and its protocol handlers, without I/O."""

    def __init__(
        self,
        settings: BrokerSettings,
        *,
        storage: Any = None,
        wall_clock_ms: Callable[[], int] | None = None,
    ) -> None:
        from ._storage import MemoryStorage  # local import: storage modules import the model

        self.settings = settings
        self.storage = storage if storage is not None else MemoryStorage()
        self.wall_clock_ms = wall_clock_ms or (lambda: 0)
        self.connections: dict[int, Connection] = {}
        self.sessions_by_name: dict[str, Session] = {}
        self.to_close: set[int] = set()
        self.timers = _Timers()
        self.now = 0.0
        self.session = SessionHandlers(self)
        self.post_office = self.session.post_office
        if settings.cluster is not None:
            self.session.cluster = ClusterHooks(self.session, settings.cluster)

    # ------------------------------------------------------------------ lifecycle

    def connection_made(self, conn_id: int, now: float, remote: str = "") -> None:
        self.now = now
        conn = Connection(conn_id, now, last_check_at=now, remote=remote)
        self.connections[conn_id] = conn
        LOG.info("connection opened", extra={"conn": conn_id, "remote": remote})

    def connection_lost(self, conn_id: int, now: float) -> None:
        """The transport saw the socket close (or failed)."""
        self.now = now
        conn = self.connections.pop(conn_id, None)
        self.to_close.discard(conn_id)
        if conn is None or conn.closed:
            return
        conn.closed = True
        for session in list(conn.sessions.values()):
            if session.supports_reattach and session.connection is conn:
                # Kept for connection-ttl so that the client can reattach (notes §9.1).
                session.detached_at = now
                LOG.info("session detached", extra={"session": session.name, "conn": conn_id})
            elif session.connection is conn:
                self.session.close_session(session, failed=True)
        conn.sessions.clear()
        self.session.deliver_all()

    def receive(self, conn_id: int, data: bytes, now: float) -> None:
        """Bytes arrived on a connection."""
        self.now = now
        conn = self.connections.get(conn_id)
        if conn is None or conn.closing:
            return
        conn.received_since_check = True
        conn.decoder.feed(data)
        while True:
            if conn.conn_id in self.to_close:  # a handler decided to close it
                return
            try:
                frame = conn.decoder.next_frame()
            except UnknownPacketType as exc:
                self._refuse(conn, ExceptionType.UNSUPPORTED_PACKET, str(exc))
                return
            except CodecError as exc:
                self._refuse(conn, ExceptionType.INTERNAL_ERROR, str(exc))
                return
            if not isinstance(frame, Frame):
                break
            try:
                self._dispatch(conn, frame)
            except BrokerError as exc:
                self._refuse(conn, exc.code, str(exc))
                return
        self.session.deliver_all()

    def tick(self, now: float) -> None:
        """Timers: TTL checks (which also flush confirmations), detached-session
        expiry and transaction timeouts."""
        self.now = now
        if now >= self.timers.next_ttl_check:
            self.timers.next_ttl_check = now + self.settings.ttl_check_interval_s
            self._check_ttl(now)
        if now >= self.timers.next_tx_scan:
            self.timers.next_tx_scan = now + self.settings.transaction_timeout_scan_s
            self.session.scan_transaction_timeouts(now)
        if self.session.cluster is not None:
            self.session.cluster.tick(now)
        self.session.deliver_all()

    def next_deadline(self) -> float:
        cluster = self.session.cluster.next_deadline() if self.session.cluster is not None else None
        return min(self.timers.next_ttl_check, self.timers.next_tx_scan,
                   cluster if cluster is not None else self.timers.next_tx_scan)

    def take_output(self) -> dict[int, bytes]:
        """Bytes to write, per connection (and clears them); early replies first, as they were queued."""
        early, held, _ = self.take_output_split()
        return {conn_id: early.get(conn_id, b"") + held.get(conn_id, b"") for conn_id in (*early, *held)}

    def take_output_split(self) -> tuple[dict[int, bytes], dict[int, bytes], frozenset[int]]:
        """``(early, held, counted)``: bytes that need no journal sync, bytes that must wait for it, and the
        connections whose held bytes include a counted (resend-cached) packet.  Writing ``early`` first keeps
        the counted packets in cache order only if no counted packet of that connection is still held from an
        earlier flush; the transport checks that."""
        early: dict[int, bytes] = {}
        held: dict[int, bytes] = {}
        counted: set[int] = set()
        for conn_id, conn in self.connections.items():
            if conn.early:
                early[conn_id] = bytes(conn.early)
                conn.early.clear()
            if conn.outbox:
                held[conn_id] = bytes(conn.outbox)
                conn.outbox.clear()
                if conn.outbox_counted:
                    counted.add(conn_id)
                conn.outbox_counted = False
        return early, held, frozenset(counted)

    def take_closing(self) -> set[int]:
        """Connections the transport must close once their output is written."""
        closing, self.to_close = self.to_close, set()
        return closing

    def shutdown(self, scale_down_to: tuple[str, TransportConfiguration | None] | None = None) -> None:
        """Flush confirmations, say DISCONNECT to every client and end every session (broker stopping).

        ``scale_down_to``: the node (ID, connector) this one's messages are moving to; the DISCONNECT
        names it with reason SCALE_DOWN, so clients can follow (notes on scale-down, §5.2)."""
        for conn in list(self.connections.values()):
            if conn.closing:
                continue  # told already (a scale-down disconnects before the messages move)
            for session in conn.sessions.values():
                self.session.flush_confirmations(session)
            version = conn.version or CURRENT_VERSION
            packet: Packet
            if version >= 131 and scale_down_to is not None:
                packet = DisconnectMessage_V3(self.settings.node_id, DisconnectReason.SCALE_DOWN, *scale_down_to)
            elif version >= 131:
                packet = DisconnectMessage_V3(self.settings.node_id, DisconnectReason.SHUT_DOWN)
            elif version >= 125:
                packet = DisconnectMessage_V2(self.settings.node_id, None)
            else:
                packet = DisconnectMessage(self.settings.node_id)
            self.send(conn, PING_CHANNEL, packet)
            conn.closing = True
            self.to_close.add(conn.conn_id)
        # As Artemis's stop: every session ends, so deliveries in flight are cancelled and their delivery counts
        # stored (a message redelivered after a graceful restart carries the redelivered mark).
        for session in list(self.sessions_by_name.values()):
            self.session.close_session(session, failed=True)

    # ------------------------------------------------------------------ output

    def send(self, conn: Connection, channel_id: int, packet: Packet, session: Session | None = None, *,
             needs_no_sync: bool = False) -> bytes:
        """Queue a packet; a confirmable one on a session channel enters its resend cache.

        ``needs_no_sync``: the packet confirms nothing stored (a credit grant, which Artemis also sends at once), so
        it may go out before the journal sync -- when no counted packet is queued ahead of it."""
        frame = encode_packet(packet, channel_id, version=conn.version or CURRENT_VERSION)
        counted = session is not None and packet.requires_confirmations()
        if needs_no_sync and not conn.outbox_counted:
            conn.early += frame
        else:
            conn.outbox += frame
            conn.outbox_counted = conn.outbox_counted or counted
        if counted:
            assert session is not None
            session.send_window.sent(frame)
        return frame

    def exception(self, conn: Connection, channel: int, code: int, message: str, correlation: int | None) -> None:
        self.send(conn, channel, ActiveMQExceptionMessage(int(code), message, correlation),
                  conn.sessions.get(channel))

    def _refuse(self, conn: Connection, code: int, message: str) -> None:
        """Bad input: answer with an EXCEPTION and close this connection only."""
        LOG.warning("closing connection on bad input", extra={"conn": conn.conn_id, "reason": message})
        self.send(conn, PING_CHANNEL, ActiveMQExceptionMessage(int(code), message[:1000]))
        conn.closing = True
        self.to_close.add(conn.conn_id)
        for session in list(conn.sessions.values()):
            if session.connection is conn:
                self.session.close_session(session, failed=True)

    # ------------------------------------------------------------------ dispatch

    def _dispatch(self, conn: Connection, frame: Frame) -> None:
        packet = frame.packet
        channel = frame.channel_id
        if channel == PING_CHANNEL:
            self._channel0(conn, packet)
        elif channel == SESSION_SETUP_CHANNEL:
            self._channel1(conn, packet)
        elif channel >= FIRST_SESSION_CHANNEL:
            session = conn.sessions.get(channel)
            if session is None:
                if channel in conn.used_channels:
                    return  # a closed session's channel: Artemis drops such packets silently
                raise BrokerError(ExceptionType.ILLEGAL_STATE,
                                  f"{packet.type_name()} on channel {channel}, which has no session")
            self.session.handle(session, packet, frame.size)
        else:
            raise BrokerError(ExceptionType.ILLEGAL_STATE, f"{packet.type_name()} on reserved channel {channel}")

    def _channel0(self, conn: Connection, packet: Packet) -> None:
        if isinstance(packet, Ping):
            if self.settings.connection_ttl_override_ms == -1:
                conn.ttl_ms = packet.connection_ttl
            self.send(conn, PING_CHANNEL, packet)
        elif isinstance(packet, (SubscribeClusterTopologyUpdatesMessageV2, SubscribeClusterTopologyUpdatesMessage)):
            if isinstance(packet, SubscribeClusterTopologyUpdatesMessageV2):
                conn.set_version(packet.client_version)
            conn.topology_subscribed = True
            self._send_topology(conn)
        elif isinstance(packet, PacketsConfirmedMessage):
            return
        else:
            raise BrokerError(ExceptionType.ILLEGAL_STATE, f"{packet.type_name()} is not valid on channel 0")

    def _send_topology(self, conn: Connection) -> None:
        """Every member, this node first, the last one with last=true; a standalone broker sends itself
        without connectors (notes §5.2)."""
        cluster = self.session.cluster
        members: list[tuple[str, TransportConfiguration | None]] = [(self.settings.node_id, None)]
        if cluster is not None:
            members = [(self.settings.node_id, cluster.role.connector)]
            members += [(n, c) for n, c in cluster.state.members.items() if n != self.settings.node_id]
        for index, (node, connector) in enumerate(members):
            self._send_member(conn, node, connector, last=index == len(members) - 1)

    def _send_member(self, conn: Connection, node: str, connector: TransportConfiguration | None, *,
                     last: bool) -> None:
        event, version = self.wall_clock_ms(), conn.version
        cluster = self.settings.cluster
        group = cluster.scale_down_group if cluster is not None and node == self.settings.node_id else None
        packet: Packet
        if version >= 131 or version == 0:
            packet = ClusterTopologyChangeMessage_V4(False, node, event, connector, None, last, None, group,
                                                     self.settings.server_version)
        elif version >= 122:
            packet = ClusterTopologyChangeMessage_V2(False, node, event, connector, None, last, None)
        else:
            packet = ClusterTopologyChangeMessage(False, node, connector, None, last)
        self.send(conn, PING_CHANNEL, packet)

    def topology_changed(self, node: str, connector: TransportConfiguration | None) -> None:
        """A member joined: every connection that subscribed to the topology hears of it (last=false,
        as Artemis sends updates after the first topology)."""
        for conn in self.connections.values():
            if conn.topology_subscribed and not conn.closing:
                self._send_member(conn, node, connector, last=False)

    def _channel1(self, conn: Connection, packet: Packet) -> None:
        if isinstance(packet, (CreateSessionMessage, CreateSessionMessage_V2)):
            self._create_session(conn, packet)
        elif isinstance(packet, ReattachSessionMessage):
            self._reattach(conn, packet)
        elif isinstance(packet, CheckFailoverMessage):
            self.send(conn, SESSION_SETUP_CHANNEL, CheckFailoverReplyMessage(True))
        else:
            raise BrokerError(ExceptionType.ILLEGAL_STATE, f"{packet.type_name()} is not valid on channel 1")

    def _create_session(self, conn: Connection, packet: CreateSessionMessage | CreateSessionMessage_V2) -> None:
        if packet.version not in COMPATIBLE_VERSIONS:
            self.send(conn, SESSION_SETUP_CHANNEL, ActiveMQExceptionMessage(
                ExceptionType.INCOMPATIBLE_CLIENT_SERVER_VERSIONS,
                f"client version {packet.version} is not one of {COMPATIBLE_VERSIONS[0]}..{COMPATIBLE_VERSIONS[-1]}"))
            return
        if conn.version == 0:
            conn.set_version(packet.version)
        if isinstance(packet, CreateSessionMessage_V2) and packet.client_id:
            conn.client_id = packet.client_id
        cluster = self.settings.cluster
        if (cluster is not None and self.settings.authenticator is not None and packet.username == cluster.user
                and packet.password != cluster.password):
            # the cluster user is checked against cluster-password only (Artemis: 212, AMQ229099)
            self.send(conn, SESSION_SETUP_CHANNEL, ActiveMQExceptionMessage(
                ExceptionType.CLUSTER_SECURITY_EXCEPTION,
                f"AMQ229099: Unable to authenticate cluster user: {packet.username}"))
            conn.closing = True
            self.to_close.add(conn.conn_id)
            return
        if not self._authenticate(packet.username, packet.password):
            self.send(conn, SESSION_SETUP_CHANNEL, ActiveMQExceptionMessage(
                ExceptionType.SECURITY_EXCEPTION, f"AMQ229031: Unable to validate user: {packet.username}"))
            conn.closing = True
            self.to_close.add(conn.conn_id)
            return
        channel = packet.session_channel_id
        old = conn.sessions.get(channel)
        if old is not None:  # a recreated session on the same channel (notes §9.5)
            self.session.close_session(old, failed=True)
        session = Session(
            name=packet.name,
            channel_id=channel,
            connection=conn,
            username=packet.username,
            xa=packet.xa,
            auto_commit_sends=packet.auto_commit_sends,
            auto_commit_acks=packet.auto_commit_acks,
            pre_acknowledge=packet.pre_acknowledge,
            window_size=packet.confirmation_window_size,
            default_address=packet.default_address,
            xa_timeout_s=self.settings.transaction_timeout_s,
        )
        conn.sessions[channel] = session
        conn.used_channels.add(channel)
        replaced = self.sessions_by_name.get(packet.name)
        if replaced is not None and replaced is not old:
            LOG.info("session name reused; replacing the registration", extra={"session": packet.name})
        self.sessions_by_name[packet.name] = session
        self.send(conn, SESSION_SETUP_CHANNEL, CreateSessionResponseMessage(self.settings.server_version))
        LOG.info("session created", extra={"session": packet.name, "conn": conn.conn_id,
                                            "window": packet.confirmation_window_size})

    def _authenticate(self, username: str | None, password: str | None) -> bool:
        cluster = self.settings.cluster
        if cluster is not None and username == cluster.user and password == cluster.password:
            return True  # the other nodes' bridges log in with the cluster credentials
        if self.settings.authenticator is not None:
            return self.settings.authenticator(username, password)
        users = self.settings.users
        if username is None:
            return self.settings.allow_anonymous
        if users is None:
            return self.settings.allow_anonymous
        return users.get(username) == password

    def _reattach(self, conn: Connection, packet: ReattachSessionMessage) -> None:
        session = self.sessions_by_name.get(packet.name)
        if session is None:
            self.send(conn, SESSION_SETUP_CHANNEL, ReattachSessionResponseMessage(-1, False))
            return
        if not session.send_window.enabled:
            self.session.close_session(session, failed=True)
            self.send(conn, SESSION_SETUP_CHANNEL, ReattachSessionResponseMessage(-1, False))
            return
        old = session.connection
        if old is not conn:
            old.sessions.pop(session.channel_id, None)
        session.connection = conn
        session.detached_at = None
        conn.sessions[session.channel_id] = session
        conn.used_channels.add(session.channel_id)
        # The server replays its unconfirmed packets before it answers (notes §9.4).
        for frame in session.send_window.replay_after(packet.last_confirmed_command_id):
            conn.outbox += frame
        self.send(conn, SESSION_SETUP_CHANNEL,
                  ReattachSessionResponseMessage(session.receive_window.last_confirmed, True))
        LOG.info("session reattached", extra={"session": session.name, "conn": conn.conn_id})

    # ------------------------------------------------------------------ timers

    def _check_ttl(self, now: float) -> None:
        for conn in list(self.connections.values()):
            for session in conn.sessions.values():
                self.session.flush_confirmations(session)
            if conn.ttl_ms != -1 and not conn.received_since_check and now >= conn.last_check_at + conn.ttl_ms / 1000:
                LOG.warning("connection TTL expired", extra={"conn": conn.conn_id, "ttl_ms": conn.ttl_ms})
                self.session.fail_connection_sessions(conn)
                conn.closing = True
                self.to_close.add(conn.conn_id)
                continue
            if conn.received_since_check:
                conn.last_check_at = now
            conn.received_since_check = False
        for session in list(self.sessions_by_name.values()):
            if session.detached_at is not None:
                ttl_ms = session.connection.ttl_ms
                if ttl_ms != -1 and now >= session.detached_at + ttl_ms / 1000:
                    LOG.info("detached session expired", extra={"session": session.name})
                    self.session.close_session(session, failed=True)

