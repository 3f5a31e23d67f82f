"""The broker core: a sans-IO state machine for the Artemis core protocol.

Rules of this module:
* No I/O and no clock: callers feed bytes with ``receive(conn_id, data, now_ms)``,
  call ``tick(now_ms)`` at ``next_deadline()``, and take bytes to write with
  ``take_output()``.  Time is monotonic milliseconds (``reference._clock``).
* A packet is handled completely (state change, storage call, reply) before the
  next one; replies go to the connection's outbox.  Storage calls are made
  before the reply is queued, and the transport makes storage durable (one
  fsync for everything queued, a group commit) before it writes the outbox.
* Every confirmable packet a session sends is kept in its resend cache; every
  confirmable packet it receives is counted once processed, except when the
  reply is an EXCEPTION (as Artemis does, notes §9.3).

The core assembles the owners and drives them; it keeps only the connections and
its timers.  Routing and delivery: :class:`~._engine.DeliveryEngine`; transactions:
:class:`~._transactions.Transactions`; sessions by name: :class:`~._session.SessionRegistry`;
output and closes: :class:`~._outbox.Outbox`; the packet handlers of channels 0/1
(:mod:`._setup_handlers`) and of session channels (:mod:`._session_handlers`,
:mod:`._queue_handlers`, :mod:`._xa`); the cluster's side (:mod:`._cluster_hooks`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from cck.codec import (
    CURRENT_VERSION,
    ActiveMQExceptionMessage,
    CodecError,
    DisconnectMessage,
    DisconnectMessage_V2,
    DisconnectMessage_V3,
    DisconnectReason,
    ExceptionType,
    Frame,
    Packet,
    TransportConfiguration,
    UnknownPacketType,
)

from ._authorization import Authorization
from ._backups import CLUSTER_CHANNEL, BackupRegistry, ClusterChannelHandlers
from ._cluster_hooks import ClusterHooks
from ._connection import Connection
from ._duplicates import DuplicateIds
from ._engine import DeliveryEngine
from ._errors import BrokerError
from ._model import PostOffice, Queue
from ._outbox import Outbox
from ._queue_handlers import QueueHandlers
from ._session import SessionRegistry
from ._session_handlers import SessionHandlers
from ._settings import BrokerSettings
from ._setup_handlers import PING_CHANNEL, SESSION_SETUP_CHANNEL, ConnectionHandlers
from ._storage import MemoryStorage, Storage
from ._time import CoreTime
from ._topology import Topology
from ._transactions import Transactions
from ._xa import XAHandlers

__all__ = ["BrokerCore", "BrokerSettings", "MirrorPoint"]

LOG = logging.getLogger("cck.reference.broker")

FIRST_SESSION_CHANNEL = 10


@dataclass(frozen=True, slots=True)
class MirrorPoint:
    """What a core started from the same journal needs besides it to continue exactly as this one: the ID it
    allocates next and when its periodic checks are next due (a mirroring backup's core; ``_inputs``)."""

    next_id: int
    ttl_check_at_ms: int
    tx_scan_at_ms: int


@dataclass
class _Timers:
    """When the periodic checks are next due (monotonic ms); 0: at the first tick."""

    next_ttl_check_ms: int = 0
    next_tx_scan_ms: int = 0


class BrokerCore:
    """The whole broker, without I/O: the owners of its state, assembled, and the connections."""

    def __init__(
        self,
        settings: BrokerSettings,
        *,
        storage: Storage | None = None,
        wall_clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.settings = settings
        self.storage: Storage = storage if storage is not None else MemoryStorage()
        self.connections: dict[int, Connection] = {}
        self._time = CoreTime()
        self._timers = _Timers()
        self._outbox = Outbox()
        self.sessions = SessionRegistry()
        self.post_office = PostOffice()
        self.engine = DeliveryEngine(self.post_office, self.storage, self._outbox, settings)
        self.duplicates = DuplicateIds(self.storage, settings.id_cache_size, persist=settings.persist_id_cache)
        self.transactions = Transactions(self.engine, self.post_office, self.storage, self.duplicates)
        self.cluster: ClusterHooks | None = None
        if settings.cluster is not None:
            self.cluster = ClusterHooks(settings.cluster, engine=self.engine, post_office=self.post_office,
                                        storage=self.storage, time=self._time, member_joined=self._member_joined)
            self.engine.route_through(self.cluster)
        self.backups = BackupRegistry(lambda _connector: self._topology.backup_changed())
        self._topology = Topology(settings, self._outbox, self.connections, wall_clock_ms or (lambda: 0),
                                  self.cluster, self.backups)
        authorization = Authorization(settings.authorizer)
        self._sessions = SessionHandlers(
            engine=self.engine, post_office=self.post_office, transactions=self.transactions, outbox=self._outbox,
            duplicates=self.duplicates, registry=self.sessions, authorization=authorization,
            queues=QueueHandlers(self.engine, self.post_office, settings, self.cluster, authorization),
            xa=XAHandlers(self.transactions, self._time, settings.transaction_timeout_s), cluster=self.cluster)
        setup = ConnectionHandlers(settings, self._outbox, self.sessions, self._sessions, self._topology)
        self._cluster_channel = ClusterChannelHandlers(settings, self._outbox, self.backups, self.cluster)
        self._channels = {PING_CHANNEL: setup.channel0, SESSION_SETUP_CHANNEL: setup.channel1,
                          CLUSTER_CHANNEL: self._cluster_channel.table}

    # ------------------------------------------------------------------ lifecycle

    def connection_made(self, conn_id: int, now_ms: int, remote: str = "",
                        peer_certificate: bytes | None = None) -> None:
        self._time.advance(now_ms)
        self.connections[conn_id] = Connection(conn_id, now_ms, last_check_at_ms=now_ms, remote=remote,
                                               peer_certificate=peer_certificate)
        LOG.info("connection opened", extra={"conn": conn_id, "remote": remote})

    def connection_lost(self, conn_id: int, now_ms: int) -> None:
        """The transport saw the socket close (or failed)."""
        self._time.advance(now_ms)
        conn = self.connections.pop(conn_id, None)
        self._outbox.forget(conn_id)
        self._cluster_channel.connection_lost(conn_id)
        if conn is None or conn.closed:
            return
        conn.closed = True
        for session in list(conn.sessions.values()):
            if session.supports_reattach and session.connection is conn:
                # Kept for connection-ttl so that the client can reattach (notes §9.1).
                session.detached_at_ms = now_ms
                LOG.info("session detached", extra={"session": session.name, "conn": conn_id})
            elif session.connection is conn:
                self._sessions.close_session(session, failed=True)
        conn.sessions.clear()
        self.engine.deliver_all()

    def receive(self, conn_id: int, data: bytes, now_ms: int) -> None:
        """Bytes arrived on a connection."""
        self._time.advance(now_ms)
        conn = self.connections.get(conn_id)
        if conn is None or conn.closing:
            return
        conn.received_since_check = True
        conn.decoder.feed(data)
        while True:
            if self._outbox.closing(conn_id):  # a handler decided to close it
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
        self.engine.deliver_all()

    def tick(self, now_ms: int) -> None:
        """Timers: TTL checks (which also flush confirmations), detached-session
        expiry, transaction timeouts and the cluster's redistribution delays."""
        self._time.advance(now_ms)
        timers = self._timers
        if now_ms >= timers.next_ttl_check_ms:
            timers.next_ttl_check_ms = now_ms + self.settings.ttl_check_interval_ms
            self._check_ttl(now_ms)
        if now_ms >= timers.next_tx_scan_ms:
            timers.next_tx_scan_ms = now_ms + self.settings.transaction_timeout_scan_ms
            self.transactions.scan_timeouts(now_ms)
        if self.cluster is not None:
            self.cluster.tick(now_ms)
        self.engine.deliver_all()

    def mirror_point(self) -> MirrorPoint:
        """This core's counters, for a backup's core that will be fed its inputs from now on."""
        return MirrorPoint(self.post_office.upcoming_id, self._timers.next_ttl_check_ms, self._timers.next_tx_scan_ms)

    def continue_from(self, point: MirrorPoint) -> None:
        """Take a primary's counters (this core was recovered from the primary's journal, and will be fed its
        inputs)."""
        self.post_office.restart_ids_after(point.next_id - 1)
        self._timers.next_ttl_check_ms = point.ttl_check_at_ms
        self._timers.next_tx_scan_ms = point.tx_scan_at_ms

    def next_deadline(self) -> int:
        """When ``tick`` is next due (monotonic ms)."""
        cluster = self.cluster.next_deadline() if self.cluster is not None else None
        due = min(self._timers.next_ttl_check_ms, self._timers.next_tx_scan_ms)
        return due if cluster is None else min(due, cluster)

    def deliver_all(self) -> None:
        """Something changed the state from outside a connection (a cluster bridge): deliver what can go."""
        self.engine.deliver_all()

    def define(self, address: str, routing_types: set[int], queues: list[Queue]) -> list[str]:
        """Addresses and queues broker.xml declares; returns what could not be created, with the reason."""
        return self.engine.define(address, routing_types, queues)

    def _member_joined(self, node: str, connector: TransportConfiguration | None) -> None:
        """The cluster met a new node: the clients that subscribed to the topology hear of it."""
        self._topology.member_joined(node, connector)

    # ------------------------------------------------------------------ output

    def take_output(self) -> dict[int, bytes]:
        """Bytes to write, per connection (and clears them); early replies first, as they were queued."""
        early, held, _ = self.take_output_split()
        return {conn_id: early.get(conn_id, b"") + held.get(conn_id, b"") for conn_id in (*early, *held)}

    def take_output_split(self) -> tuple[dict[int, bytes], dict[int, bytes], frozenset[int]]:
        """``(early, held, counted)``: bytes that need no journal sync, bytes that must wait for it, and the
        connections whose held bytes include a counted (resend-cached) packet.  Writing ``early`` first keeps
        the counted packets in cache order only if no counted packet of that connection is still held from an
        earlier flush; the transport checks that."""
        return self._outbox.take(self.connections.values())

    def take_closing(self) -> set[int]:
        """Connections the transport must close once their output is written."""
        return self._outbox.take_closing()

    def take_handed(self) -> set[int]:
        """Connections the transport must hand, once their output is written, to the journal replication (a
        backup subscribed on them); the core is done with them (it forgets them when told they are lost)."""
        return self._outbox.take_handed()

    def shutdown(self, scale_down_to: tuple[str, TransportConfiguration | None] | None = None) -> None:
        """Flush confirmations, say DISCONNECT to every client and end every session (broker stopping).

        ``scale_down_to``: the node (ID, connector) this one's messages are moving to; the DISCONNECT
        names it with reason SCALE_DOWN, so clients can follow (notes on scale-down, §5.2)."""
        node_id = self.settings.node_id
        for conn in list(self.connections.values()):
            if conn.closing:
                continue  # told already (a scale-down disconnects before the messages move)
            for session in conn.sessions.values():
                self._outbox.flush_confirmations(session)
            version = conn.version or CURRENT_VERSION
            packet: Packet
            if version >= 131 and scale_down_to is not None:
                packet = DisconnectMessage_V3(node_id, DisconnectReason.SCALE_DOWN, *scale_down_to)
            elif version >= 131:
                packet = DisconnectMessage_V3(node_id, DisconnectReason.SHUT_DOWN)
            elif version >= 125:
                packet = DisconnectMessage_V2(node_id, None)
            else:
                packet = DisconnectMessage(node_id)
            self._outbox.send(conn, PING_CHANNEL, packet)
            self._outbox.close_after_output(conn)
        # As Artemis's stop: every session ends, so deliveries in flight are cancelled and their delivery counts
        # stored (a message redelivered after a graceful restart carries the redelivered mark).
        for session in self.sessions:
            self._sessions.close_session(session, failed=True)

    def _refuse(self, conn: Connection, code: int, message: str) -> None:
        """Bad input: answer with an EXCEPTION and close this connection only."""
        LOG.warning("closing connection on bad input", extra={"conn": conn.conn_id, "reason": message})
        self._outbox.send(conn, PING_CHANNEL, ActiveMQExceptionMessage(int(code), message[:1000]))
        self._outbox.close_after_output(conn)
        for session in list(conn.sessions.values()):
            if session.connection is conn:
                self._sessions.close_session(session, failed=True)

    # ------------------------------------------------------------------ dispatch

    def _dispatch(self, conn: Connection, frame: Frame) -> None:
        packet = frame.packet
        channel = frame.channel_id
        if channel >= FIRST_SESSION_CHANNEL:
            session = conn.sessions.get(channel)
            if session is None:
                if channel in conn.used_channels:
                    return  # a closed session's channel: Artemis drops such packets silently
                raise BrokerError(ExceptionType.ILLEGAL_STATE,
                                  f"{packet.type_name()} on channel {channel}, which has no session")
            self._sessions.handle(session, packet, frame.size)
            return
        table = self._channels.get(channel)
        if table is None:
            raise BrokerError(ExceptionType.ILLEGAL_STATE, f"{packet.type_name()} on reserved channel {channel}")
        handler = table.get(type(packet))
        if handler is None:
            raise BrokerError(ExceptionType.ILLEGAL_STATE, f"{packet.type_name()} is not valid on channel {channel}")
        handler(conn, packet)

    # ------------------------------------------------------------------ timers

    def _check_ttl(self, now_ms: int) -> None:
        for conn in list(self.connections.values()):
            for session in conn.sessions.values():
                self._outbox.flush_confirmations(session)
            if conn.ttl_ms != -1 and not conn.received_since_check and now_ms >= conn.last_check_at_ms + conn.ttl_ms:
                LOG.warning("connection TTL expired", extra={"conn": conn.conn_id, "ttl_ms": conn.ttl_ms})
                self._sessions.fail_connection_sessions(conn)
                self._outbox.close_after_output(conn)
                continue
            if conn.received_since_check:
                conn.last_check_at_ms = now_ms
            conn.received_since_check = False
        for session in self.sessions:
            if session.detached_at_ms is not None:
                ttl_ms = session.connection.ttl_ms
                if ttl_ms != -1 and now_ms >= session.detached_at_ms + ttl_ms:
                    LOG.info("detached session expired", extra={"session": session.name})
                    self._sessions.close_session(session, failed=True)
