"""The client side of one core connection, sans-IO.

Feed it the bytes that arrive (:meth:`ClientConnectionCore.receive`), call
:meth:`tick` when :meth:`next_deadline` passes, and write what
:meth:`take_output` returns.  Every input takes ``now_ms`` (monotonic
milliseconds, ``reference._clock``) and the core never reads a clock, so every
timer — pings, the TTL check, call timeouts, the topology wait — can be driven
by a test without sleeping.  A request's timeout starts when its bytes are
taken for sending (``take_output(now_ms)``), so making one needs no time.

Channels: 0 carries PING, topology and DISCONNECT; 1 carries session creation
(and, in the next issue, reattach); every session gets its own channel from 10
up (notes §7.1).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from cck.codec import (
    ARTEMIS_2_18_0_VERSION,
    ActiveMQExceptionMessage,
    ClusterTopologyChangeMessage,
    ClusterTopologyChangeMessage_V2,
    ClusterTopologyChangeMessage_V3,
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
    FrameDecoder,
    Packet,
    PacketsConfirmedMessage,
    Ping,
    ReattachSessionResponseMessage,
    SubscribeClusterTopologyUpdatesMessageV2,
    TransportConfiguration,
    encode_packet,
)
from cck.codec import Frame as CodecFrame

from ._calls import Call, CallQueue
from ._errors import BrokerRefused, CallTimeout, ClientError, ConnectionFailed, ProtocolViolation
from ._session import SessionCore
from ._session_channel import SessionChannel, SessionOptions
from ._settings import ClientSettings

__all__ = ["ClientConnectionCore", "TopologyMember"]

LOG = logging.getLogger("cck.reference.client")

PING_CHANNEL = 0
SESSION_SETUP_CHANNEL = 1
FIRST_SESSION_CHANNEL = 10

_TOPOLOGY = (ClusterTopologyChangeMessage, ClusterTopologyChangeMessage_V2, ClusterTopologyChangeMessage_V3,
             ClusterTopologyChangeMessage_V4)  # fmt: skip
_DISCONNECT = (DisconnectMessage, DisconnectMessage_V2, DisconnectMessage_V3)


def _reason_name(code: int) -> str:
    try:
        return DisconnectReason(code).name
    except ValueError:
        return f"code {code}"


@dataclass(frozen=True)
class TopologyMember:
    node_id: str
    live: TransportConfiguration | None
    backup: TransportConfiguration | None
    #: the node's scale-down group name (CLUSTER_TOPOLOGY_V3 and later)
    scale_down_group: str | None = None


class ClientConnectionCore:
    """One connection's protocol state: channels, sessions, timers, output."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self.version = settings.version
        self.decoder = FrameDecoder(version=settings.version)
        self.sessions: dict[int, SessionCore] = {}
        self.topology: dict[str, TopologyMember] = {}
        self.failure: ClientError | None = None
        self.closed = False
        self.failure_listeners: list[Callable[[ClientError], None]] = []
        #: Called with each topology message's member (``None`` when it left) and its ``last`` flag.
        self.topology_listeners: list[Callable[[str, TopologyMember | None, bool], None]] = []
        self._outbox = bytearray()
        self._setup_calls = CallQueue()
        self._topology_call: Call | None = None
        self._next_channel = FIRST_SESSION_CHANNEL
        self._next_ping: int | None = None
        #: Detach sessions on failure instead of failing them (set by a reconnecting session factory).
        self.keep_sessions = False
        self._last_check = 0
        self._data_since_check = False
        self._started = False

    # ------------------------------------------------------------------ lifecycle

    def start(self, now_ms: int) -> Call:
        """Write the preamble, the first PING and SUBSCRIBE_TOPOLOGY_V2.  The returned call completes
        when the broker's topology ends with ``last=true`` (Artemis waits for that before any session)."""
        if self._started:
            raise RuntimeError("start() called twice")
        self._started = True
        now = now_ms
        self._outbox += self.settings.preamble_bytes()
        self._last_check = now
        self._ping(now)
        self.send_raw(PING_CHANNEL, SubscribeClusterTopologyUpdatesMessageV2(False, self.settings.version))
        timeout = self.settings.topology_timeout_ms
        self._topology_call = Call("SUBSCRIBE_TOPOLOGY (waiting for last=true)", _TOPOLOGY, None, timeout,
                                   deadline_ms=now + timeout)
        if self.failure is not None:
            # The socket can close between the TCP connect and start() (a broker that is stopping accepts
            # and hangs up); no timer runs on a failed core, so the call must fail now or nobody would end it.
            self._topology_call.fail(self.failure)
        return self._topology_call

    def close(self) -> list[Call]:
        """Close every session (SESS_CLOSE each, as the Java client does); the IO layer closes the socket
        once these calls complete (or fail)."""
        self.closed = True
        return [session.close() for session in list(self.sessions.values()) if not session.closed]

    @property
    def started(self) -> bool:
        return self._started

    def connection_lost(self, reason: str, now_ms: int) -> None:
        self.fail(ConnectionFailed(reason, int(ExceptionType.NOT_CONNECTED)), now_ms)

    def fail(self, error: ClientError, now_ms: int) -> None:
        """The connection is unusable: every waiter and reader learns why; listeners are told once.

        With ``keep_sessions`` (a session factory that will reconnect) the sessions are detached instead
        of failed: their calls and consumers wait for a new connection, bounded by the failover timeout.
        """
        if self.failure is not None:
            return
        self.failure = error
        if not self.closed:
            LOG.warning("connection failed", extra={"reason": str(error)})
        self._setup_calls.fail_all(error)
        if self._topology_call is not None:
            self._topology_call.fail(error)
        if self.keep_sessions and not self.closed:
            timeout = self.settings.call_failover_timeout_ms
            deadline = None if timeout == -1 else now_ms + timeout
            for session in self.sessions.values():
                if not session.closed:
                    session.detach(deadline)
        else:
            for session in list(self.sessions.values()):
                session.failed(error)
        for listener in list(self.failure_listeners):
            listener(error)

    @property
    def has_failed(self) -> bool:
        return self.failure is not None

    # ------------------------------------------------------------------ sessions

    def create_session(self, options: SessionOptions) -> tuple[SessionCore, Call]:
        self._check_usable()
        channel = self._next_channel
        self._next_channel += 1
        session = SessionCore(self, channel, options)
        self.sessions[channel] = session
        fields = (options.name, channel, self.settings.version, options.username, options.password,
                  self.settings.min_large_message_size, options.xa, options.auto_commit_sends,
                  options.auto_commit_acks, self.settings.confirmation_window_size, options.pre_acknowledge,
                  options.default_address)  # fmt: skip
        packet: CreateSessionMessage | CreateSessionMessage_V2
        if self.version >= ARTEMIS_2_18_0_VERSION:
            packet = CreateSessionMessage_V2(*fields, options.client_id)
        else:
            # As Artemis's isVersionSupportClientID: before 2.18 there is no CREATESESSION_V2 (a 1.x or HornetQ
            # server fails to decode type -18 and never answers), and so no client ID on the wire.
            packet = CreateSessionMessage(*fields)
        call = self._setup_calls.add(self.new_call("CREATESESSION", (CreateSessionResponseMessage,), None,
                                                   blocking=True))
        self.send_raw(SESSION_SETUP_CHANNEL, packet)

        def created(done: Call) -> None:
            if done.error is not None:
                self.sessions.pop(channel, None)
                session.closed = True
                return
            response = done.result()
            if not isinstance(response, CreateSessionResponseMessage):
                raise ProtocolViolation(f"CREATESESSION answered by {response.type_name()}")
            session.server_version = response.server_version
            self.adopt_version(response.server_version)

        call.add_done_callback(created)
        return session, call

    # ------------------------------------------------------------------ failover (notes §9.4, §9.5)

    def adopt(self, sessions: list[SessionCore], next_channel: int) -> None:
        """Take over the sessions of a failed connection (same channel IDs; channel numbering continues) and,
        as Artemis's reconnect does, the version the old connection had settled on."""
        for session in sessions:
            self.sessions[session.channel_id] = session
            if session.connection is not self:
                self.adopt_version(session.connection.version)
        self._next_channel = max(self._next_channel, next_channel)

    def adopt_version(self, server_version: int) -> None:
        """The broker said its version (CLUSTER_TOPOLOGY_V4, CREATESESSION_RESP): later frames are written
        and read at the lower of it and ours.  Artemis's client adopts the server's version outright, but its
        own version is its newest; a client announcing an older version must keep to that version's packets,
        because the broker decodes them by the version announced in SUBSCRIBE_TOPOLOGY_V2."""
        if server_version > 0:
            self.version = self.decoder.version = min(self.settings.version, server_version)

    @property
    def next_channel(self) -> int:
        return self._next_channel

    def reattach(self, session: SessionCore) -> Call:
        """REATTACH_SESSION on channel 1; answered by REATTACH_SESSION_RESP after the broker's replay."""
        self._check_usable()
        call = self._setup_calls.add(self.new_call("REATTACH_SESSION", (ReattachSessionResponseMessage,), None,
                                                   blocking=True))
        self.send_raw(SESSION_SETUP_CHANNEL, session.reattach_request())
        return call

    def recreate(self, session: SessionCore, name: str) -> Call:
        """CREATESESSION (the v1 layout, as Artemis's client sends on recreate) with the same channel ID."""
        self._check_usable()
        options = session.options
        packet = CreateSessionMessage(
            name, session.channel_id, session.server_version, options.username, options.password,
            self.settings.min_large_message_size, options.xa, options.auto_commit_sends, options.auto_commit_acks,
            self.settings.confirmation_window_size, options.pre_acknowledge, options.default_address)
        call = self._setup_calls.add(self.new_call("CREATESESSION (recreate)", (CreateSessionResponseMessage,),
                                                   None, blocking=True))
        self.send_raw(SESSION_SETUP_CHANNEL, packet)
        return call

    def write_frames(self, frames: list[bytes]) -> None:
        """Replayed frames: already encoded and already in the resend cache."""
        for frame in frames:
            self._outbox += frame

    def session_closed(self, session: SessionCore) -> None:
        session.closed = True
        self.sessions.pop(session.channel_id, None)

    # ------------------------------------------------------------------ output

    def send_session_packet(self, session: SessionChannel, packet: Packet) -> None:
        self._check_usable()
        frame = encode_packet(packet, session.channel_id, version=self.version)
        self._outbox += frame
        if packet.requires_confirmations():
            session.send_window.sent(frame)

    def send_raw(self, channel: int, packet: Packet) -> None:
        """A packet outside any resend cache (PING, PACKETS_CONFIRMED, channel 0 and 1 traffic)."""
        self._outbox += encode_packet(packet, channel, version=self.version)

    def take_output(self, now_ms: int) -> bytes:
        """The bytes to write; the requests among them have gone out at ``now_ms`` (their timeouts start)."""
        self._setup_calls.stamp(now_ms)
        for session in self.sessions.values():
            session.calls.stamp(now_ms)
        data = bytes(self._outbox)
        self._outbox.clear()
        return data

    def new_call(self, request: str, expect: tuple[type[Packet], ...], correlation: int | None,
                 *, blocking: bool) -> Call:
        return Call(request, expect, correlation, self.settings.call_timeout_ms if blocking else None)

    def _check_usable(self) -> None:
        if self.failure is not None:
            raise self.failure

    # ------------------------------------------------------------------ input

    def receive(self, data: bytes, now_ms: int) -> None:
        if self.failure is not None:
            return
        self._data_since_check = True
        self.decoder.feed(data)
        try:
            for frame in self.decoder:
                self._dispatch(frame, now_ms)
                if self.has_failed:
                    return
        except CodecError as exc:
            self.fail(ProtocolViolation(f"undecodable bytes from the broker: {exc}"), now_ms)
        except ProtocolViolation as exc:
            self.fail(exc, now_ms)

    def _dispatch(self, frame: CodecFrame, now_ms: int) -> None:
        channel, packet = frame.channel_id, frame.packet
        if channel == PING_CHANNEL:
            self._channel0(packet, now_ms)
        elif channel == SESSION_SETUP_CHANNEL:
            if not packet.IS_RESPONSE:
                raise ProtocolViolation(f"{packet.type_name()} on channel 1 is not an answer to anything")
            self._setup_calls.answer(packet)
        else:
            session = self.sessions.get(channel)
            if session is None:
                return  # a closed session's channel: late packets are dropped, as Artemis does
            session.handle(frame)

    def _channel0(self, packet: Packet, now_ms: int) -> None:
        if isinstance(packet, Ping | PacketsConfirmedMessage):
            return  # the echo of our PING: receiving it is the liveness signal
        if isinstance(packet, _TOPOLOGY):
            self._topology(packet)
        elif isinstance(packet, _DISCONNECT):
            reason = getattr(packet, "reason", None)
            said = f"the broker (node {packet.node_id}) sent {packet.type_name()}"
            if reason is not None:
                said += f" reason {_reason_name(reason)}"
            self.fail(ConnectionFailed(said, int(ExceptionType.DISCONNECTED)), now_ms)
        elif isinstance(packet, ActiveMQExceptionMessage):
            self.fail(BrokerRefused(packet.code, packet.message, "the connection"), now_ms)
        else:
            raise ProtocolViolation(f"{packet.type_name()} is not valid on channel 0")

    def _topology(self, packet: Packet) -> None:
        if not isinstance(packet, _TOPOLOGY):
            raise ProtocolViolation(f"{packet.type_name()} is not a topology message")
        member: TopologyMember | None = None
        if packet.exit:
            self.topology.pop(packet.node_id, None)
        else:
            member = self.topology[packet.node_id] = TopologyMember(
                packet.node_id, packet.live, packet.backup, getattr(packet, "scale_down_group_name", None))
        for listener in list(self.topology_listeners):
            listener(packet.node_id, member, bool(packet.last))
        if isinstance(packet, ClusterTopologyChangeMessage_V4):
            self.adopt_version(packet.server_version)
        if packet.last and self._topology_call is not None:
            self._topology_call.resolve(packet)

    # ------------------------------------------------------------------ time

    def next_deadline(self) -> int | None:
        candidates = [self._next_ping, self._setup_calls.next_deadline()]
        candidates += [s.calls.next_deadline() for s in self.sessions.values()]
        if self._topology_call is not None and not self._topology_call.done:
            candidates.append(self._topology_call.deadline)
        due = [c for c in candidates if c is not None]
        return min(due) if due else None

    def tick(self, now_ms: int) -> None:
        """Run every timer that is due: call timeouts, then the ping / failure check."""
        if self.failure is not None:
            return
        now = now_ms
        expired = self._setup_calls.expire(now)
        # a copy: an expired SESS_CLOSE's callback removes its session from the dict
        for session in list(self.sessions.values()):
            expired += session.calls.expire(now)
        topology = self._topology_call
        if topology is not None and not topology.done and topology.deadline is not None and now >= topology.deadline:
            topology.fail(CallTimeout(topology.request, topology.timeout_ms))
            expired.append(topology)
        if expired:
            # As the Java client does: a call that times out fails the whole connection (the FIFO
            # of answers cannot be trusted once one answer is missing).
            self.fail(ConnectionFailed(f"{expired[0].request} timed out after {expired[0].timeout_ms} ms",
                                       int(ExceptionType.CONNECTION_TIMEDOUT)), now)
            return
        if self._next_ping is not None and now >= self._next_ping:
            ttl = self.settings.connection_ttl_ms
            if ttl != -1 and now >= self._last_check + ttl:
                if not self._data_since_check:
                    self.fail(ConnectionFailed(f"nothing received from the broker for {ttl} ms (connection TTL)",
                                               int(ExceptionType.CONNECTION_TIMEDOUT)), now)
                    return
                self._last_check = now
                self._data_since_check = False
            self._ping(now)

    def _ping(self, now: int) -> None:
        for session in self.sessions.values():
            session.flush_confirmations()
        self.send_raw(PING_CHANNEL, Ping(self.settings.connection_ttl_ms))
        period = self.settings.client_failure_check_period_ms
        self._next_ping = now + period if period > 0 else None
