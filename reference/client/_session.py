"""One client session: its channel, confirmation window, pending calls,
producers' credits and consumers' buffers (sans-IO; the connection core writes
the bytes and passes the time in).

What the Java client does and this follows (notes §7-§9, §13):

* Blocking requests get correlation IDs -2, -3, ... (only the packets that
  carry one on the wire: SESS_SEND, SESS_COMMIT); asynchronous sends 1, 2, ...
* With a confirmation window every send asks for a response, which arrives
  asynchronously; without one only blocking sends do.
* Every confirmable packet received is counted once processed; when the bytes
  counted reach the window a PACKETS_CONFIRMED goes back.
* Producer credits per address: ``producer_window_size`` requested up front and
  topped up so that a window's worth is always available or on its way.
* Consumer credits: the initial window in SESS_FLOWTOKEN, then the consumed
  bytes are returned once they reach half the window.
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codec import (
    ARTEMIS_2_28_0_VERSION,
    CoreMessage,
    CreateAddressMessage,
    CreateProducerMessage,
    CreateQueueMessage_V2,
    CreateSharedQueueMessage_V2,
    DisconnectConsumerMessage,
    NullResponseMessage,
    Packet,
    PacketsConfirmedMessage,
    ReattachSessionMessage,
    RemoveProducerMessage,
    RollbackMessage,
    RoutingType,
    SessionAcknowledgeMessage,
    SessionAddMetaDataMessageV2,
    SessionBindingQueryMessage,
    SessionBindingQueryResponseMessage,
    SessionBindingQueryResponseMessage_V2,
    SessionBindingQueryResponseMessage_V3,
    SessionBindingQueryResponseMessage_V4,
    SessionBindingQueryResponseMessage_V5,
    SessionCloseMessage,
    SessionCommitMessage,
    SessionConsumerCloseMessage,
    SessionConsumerFlowCreditMessage,
    SessionCreateConsumerMessage,
    SessionDeleteQueueMessage,
    SessionIndividualAcknowledgeMessage,
    SessionProducerCreditsFailMessage,
    SessionProducerCreditsMessage,
    SessionQueueQueryMessage,
    SessionQueueQueryResponseMessage,
    SessionQueueQueryResponseMessage_V2,
    SessionQueueQueryResponseMessage_V3,
    SessionReceiveMessage,
    SessionSendMessage,
    SessionStart,
    SessionStop,
    SessionXAAfterFailedMessage,
    SessionXACommitMessage,
    SessionXAEndMessage,
    SessionXAForgetMessage,
    SessionXAGetInDoubtXids,
    SessionXAGetInDoubtXidsResponseMessage,
    SessionXAGetTimeout,
    SessionXAGetTimeoutResponseMessage,
    SessionXAJoinMessage,
    SessionXAPrepareMessage,
    SessionXAResponseMessage,
    SessionXAResumeMessage,
    SessionXARollbackMessage,
    SessionXASetTimeoutMessage,
    SessionXASetTimeoutResponseMessage,
    SessionXAStartMessage,
    SessionXASuspend,
    Xid,
)
from codec import Frame as CodecFrame

from .._window import ReceiveWindow, SendWindow
from ._calls import Call, CallQueue
from ._errors import (
    ClientError,
    FailoverInterrupted,
    ObjectClosed,
    ProtocolViolation,
    TransactionRolledBack,
)
from ._flow import ConsumerCore, Delivery, ProducerCore, ProducerCredits

if TYPE_CHECKING:
    from ._connection import ClientConnectionCore

__all__ = ["SessionCore", "SessionOptions", "fresh_session_name"]

_NULL = (NullResponseMessage,)
_QUEUE_QUERY = (SessionQueueQueryResponseMessage, SessionQueueQueryResponseMessage_V2,
                SessionQueueQueryResponseMessage_V3)  # fmt: skip
_BINDING_QUERY = (SessionBindingQueryResponseMessage, SessionBindingQueryResponseMessage_V2,
                  SessionBindingQueryResponseMessage_V3, SessionBindingQueryResponseMessage_V4,
                  SessionBindingQueryResponseMessage_V5)  # fmt: skip
_XA = (SessionXAResponseMessage,)
#: SESS_COMMIT carries a correlation ID from this version on (SessionCommitMessage_V2).
_COMMIT_CORRELATED_VERSION = 132
_session_numbers = itertools.count(1)


def fresh_session_name() -> str:
    """A name no broker has seen: a new session, or a session recreated after failover (notes §9.5)."""
    return f"cck-{uuid.uuid4()}-{next(_session_numbers)}"


@dataclass(frozen=True)
class SessionOptions:
    """How the session was asked for in CREATESESSION."""

    name: str
    username: str | None = None
    password: str | None = None
    xa: bool = False
    auto_commit_sends: bool = True
    auto_commit_acks: bool = True
    pre_acknowledge: bool = False
    default_address: str | None = None
    client_id: str | None = None

    @property
    def transacted(self) -> bool:
        return not (self.auto_commit_sends and self.auto_commit_acks)


class SessionCore:
    """The client side of one session channel."""

    def __init__(self, connection: ClientConnectionCore, channel_id: int, options: SessionOptions) -> None:
        self.connection = connection
        self.channel_id = channel_id
        self.options = options
        settings = connection.settings
        self.settings = settings
        self.send_window = SendWindow(settings.confirmation_window_size)
        self.receive_window = ReceiveWindow(settings.confirmation_window_size)
        self.calls = CallQueue()
        self.consumers: dict[int, ConsumerCore] = {}
        self.producers: dict[int, ProducerCore] = {}
        self.credits: dict[str | None, ProducerCredits] = {}
        self.started = False
        self.closed = False
        self.failure: ClientError | None = None  # why the session ended, when a failure ended it
        self.server_version = settings.version
        # Failover state (notes §9.4, §9.5).
        self.attached = True
        self.held: list[Packet] = []  # written while detached: sent once reattached or recreated
        self._calls_at_detach = 0
        self.work_done = False  # a transacted session has sent or acknowledged since its last commit/rollback
        self.rollback_only = False
        self.active_xid: Xid | None = None
        self._blocking_correlation = -1
        self._async_correlation = 0
        self._next_consumer = 0
        self._next_producer = 0
        #: Called when producer credits arrive (the IO layer wakes blocked senders).
        self.on_credits: Callable[[], None] | None = None

    # ------------------------------------------------------------------ plumbing

    def write(self, packet: Packet) -> None:
        """Send a packet on this session's channel (confirmable ones enter the resend cache)."""
        if self.closed:
            if self.failure is not None:
                raise self.failure
            if self.connection.failure is not None:
                raise self.connection.failure
            raise ObjectClosed(f"session {self.options.name!r} is closed; cannot send {packet.type_name()}")
        if not self.attached:
            self.held.append(packet)
            return
        self.connection.send_session_packet(self, packet)

    def _call(self, packet: Packet, expect: tuple[type[Packet], ...], correlation: int | None = None) -> Call:
        call = self.calls.add(self.connection.new_call(packet.type_name(), expect, correlation, blocking=True))
        self.write(packet)
        return call

    def _blocking_id(self) -> int:
        self._blocking_correlation -= 1
        return self._blocking_correlation

    # ------------------------------------------------------------------ incoming

    def handle(self, frame: CodecFrame) -> None:
        packet = frame.packet
        if isinstance(packet, PacketsConfirmedMessage):
            self.send_window.confirmed(packet.command_id)
            return
        if packet.IS_RESPONSE:
            self.calls.answer(packet)
        elif isinstance(packet, SessionReceiveMessage):
            self._receive(packet, frame.size)
        elif isinstance(packet, (SessionProducerCreditsMessage, SessionProducerCreditsFailMessage)):
            self._credits(packet)
        elif isinstance(packet, DisconnectConsumerMessage):
            consumer = self.consumers.pop(packet.consumer_id, None)
            if consumer is not None:
                consumer.closed = consumer.closed_by_broker = True
                consumer._changed()
        else:
            raise ProtocolViolation(f"{packet.type_name()} on session channel {self.channel_id} is not something "
                                    "a broker sends to a client (large messages are not supported by this client)")
        if packet.requires_confirmations():
            self.confirm(frame.size)

    def confirm(self, frame_size: int) -> None:
        index = self.receive_window.processed(frame_size)
        if index is not None:
            self.connection.send_raw(self.channel_id, PacketsConfirmedMessage(index))

    def flush_confirmations(self) -> None:
        """Confirm a partly filled window (on every PING, notes §9.3)."""
        index = self.receive_window.flush()
        if index is not None and not self.closed:
            self.connection.send_raw(self.channel_id, PacketsConfirmedMessage(index))

    def _receive(self, packet: SessionReceiveMessage, size: int) -> None:
        consumer = self.consumers.get(packet.consumer_id)
        if consumer is None:
            return  # a delivery racing a consumer close; the broker cancels it back to the queue
        consumer.delivered(Delivery(packet.message, packet.consumer_id, packet.delivery_count, size))

    def _credits(self, packet: SessionProducerCreditsMessage | SessionProducerCreditsFailMessage) -> None:
        credits = self.credits.get(packet.address) or self.credits.get(packet.address or None)
        if credits is not None:
            credits.granted(packet.credits, failed=isinstance(packet, SessionProducerCreditsFailMessage))
        if self.on_credits is not None:
            self.on_credits()

    def failed(self, error: ClientError) -> None:
        """The connection is gone: every waiter learns why, every reader wakes."""
        self.closed = True
        self.failure = error
        self.calls.fail_all(error)
        for consumer in self.consumers.values():
            consumer.closed = True
            consumer._changed()
        if self.on_credits is not None:
            self.on_credits()

    # ------------------------------------------------------------------ failover

    def detach(self, failover_deadline_ms: int | None) -> None:
        """The connection failed and a new one is being made: keep everything, hold new writes, and bound
        the calls already waiting by the failover timeout instead of the dead connection's timers."""
        self.attached = False
        self._calls_at_detach = len(self.calls)
        self.calls.extend_deadlines(failover_deadline_ms)

    def reattach_request(self) -> ReattachSessionMessage:
        """REATTACH_SESSION: our name and the last broker command we processed."""
        return ReattachSessionMessage(self.options.name, self.receive_window.last_confirmed)

    def reattached(self, connection: ClientConnectionCore, broker_last_confirmed: int, call_deadline_ms: int) -> int:
        """The broker kept the session: resend what it has not seen, then what was held; returns how many
        cached commands were replayed."""
        self.connection = connection
        replay = self.send_window.replay_after(broker_last_confirmed)
        connection.write_frames(replay)
        self._resume(call_deadline_ms)
        return len(replay)

    def recreated(self, connection: ClientConnectionCore, server_version: int, call_deadline_ms: int) -> None:
        """The broker lost the session and a new one was created on the same channel (notes §9.5): fresh
        windows, consumers and the started state rebuilt, waiting calls told their outcome is unknown,
        a transaction with work in it marked rollback-only, an XA branch reported failed."""
        self.connection = connection
        self.server_version = server_version
        self.send_window.reset()
        self.receive_window.last_confirmed = -1
        self.receive_window.received_bytes = 0
        self.calls.fail_oldest(self._calls_at_detach, lambda call: FailoverInterrupted(call.request))
        self.attached = True
        if self.options.transacted and self.work_done:
            self.rollback_only = True
        for consumer in self.consumers.values():
            consumer.clear()
            self.write(SessionCreateConsumerMessage(consumer.consumer_id, consumer.queue, consumer.filter_string,
                                                    consumer.browse_only, False))
            credits = consumer.initial_credits()
            if credits != 0:
                self.write(SessionConsumerFlowCreditMessage(consumer.consumer_id, credits))
        for producer in self.producers.values():
            if self.server_version >= ARTEMIS_2_28_0_VERSION:
                self.write(CreateProducerMessage(producer.producer_id, producer.address))
        self.credits.clear()  # credits granted by the lost session are gone; they are asked for again on use
        if self.active_xid is not None:
            self.write(SessionXAAfterFailedMessage(self.active_xid))
        if self.started:
            self.write(SessionStart())
        self._resume(call_deadline_ms)

    def _resume(self, call_deadline_ms: int) -> None:
        self.attached = True
        self.calls.extend_deadlines(call_deadline_ms)
        held, self.held = self.held, []
        for packet in held:
            self.write(packet)

    # ------------------------------------------------------------------ addresses and queues

    def create_address(self, address: str, routing_types: tuple[RoutingType, ...] = (RoutingType.ANYCAST,),
                       auto_created: bool = False) -> Call:
        return self._call(CreateAddressMessage(address, tuple(int(t) for t in routing_types), True, auto_created),
                          _NULL)

    def create_queue(self, address: str, queue: str, *, routing_type: RoutingType = RoutingType.ANYCAST,
                     durable: bool = True, filter_string: str | None = None, temporary: bool = False,
                     auto_created: bool = False, max_consumers: int = -1,
                     purge_on_no_consumers: bool = False) -> Call:
        packet = CreateQueueMessage_V2(address, queue, filter_string, durable, temporary, True, auto_created,
                                       int(routing_type), max_consumers, purge_on_no_consumers)
        return self._call(packet, _NULL)

    def create_shared_queue(self, address: str, queue: str, *, routing_type: RoutingType = RoutingType.MULTICAST,
                            durable: bool = True, filter_string: str | None = None) -> Call:
        packet = CreateSharedQueueMessage_V2(address, queue, filter_string, durable, int(routing_type), True)
        return self._call(packet, _NULL)

    def delete_queue(self, queue: str) -> Call:
        return self._call(SessionDeleteQueueMessage(queue), _NULL)

    def queue_query(self, queue: str) -> Call:
        return self._call(SessionQueueQueryMessage(queue), _QUEUE_QUERY)

    def binding_query(self, address: str) -> Call:
        return self._call(SessionBindingQueryMessage(address), _BINDING_QUERY)

    def add_metadata(self, key: str, data: str) -> Call:
        return self._call(SessionAddMetaDataMessageV2(key, data, True), _NULL)

    # ------------------------------------------------------------------ producers

    def create_producer(self, address: str | None) -> ProducerCore:
        producer = ProducerCore(self._next_producer, address)
        self._next_producer += 1
        if self.server_version >= ARTEMIS_2_28_0_VERSION:
            self.write(CreateProducerMessage(producer.producer_id, address))
        self.producers[producer.producer_id] = producer
        return producer

    def close_producer(self, producer: ProducerCore) -> None:
        if producer.closed:
            return
        producer.closed = True
        self.producers.pop(producer.producer_id, None)
        if self.server_version >= ARTEMIS_2_28_0_VERSION and not self.closed:
            self.write(RemoveProducerMessage(producer.producer_id))

    def credits_for(self, address: str | None) -> ProducerCredits | None:
        """The address's producer credits, created on first use; ``None`` without producer flow control."""
        if self.settings.producer_window_size == -1:
            return None
        credits = self.credits.get(address)
        if credits is None:
            credits = self.credits[address] = ProducerCredits(self, address, self.settings.producer_window_size)
        return credits

    def send(self, producer: ProducerCore, message: CoreMessage) -> tuple[Call | None, bool]:
        """Queue a SESS_SEND.  Returns the call that its response resolves (``None`` when the broker will
        not answer) and whether the Java client would block on it."""
        if producer.closed:
            raise ObjectClosed(f"producer {producer.producer_id} is closed")
        if message.address is None:
            if producer.address is None:
                raise ValueError("the message has no address and the producer has none either")
            message = dataclasses.replace(message, address=producer.address)
        blocking = (self.settings.block_on_durable_send if message.durable
                    else self.settings.block_on_non_durable_send)  # fmt: skip
        windowed = self.send_window.enabled
        requires_response = blocking or windowed
        correlation = 0
        call = None
        if blocking:
            correlation = self._blocking_id()
        elif windowed:
            self._async_correlation += 1
            correlation = self._async_correlation
        packet = SessionSendMessage(message, requires_response, correlation, producer.producer_id)
        self.work_done = True
        if requires_response:
            call = self.calls.add(self.connection.new_call("SESS_SEND", _NULL, correlation, blocking=blocking))
        self.write(packet)
        return call, blocking

    # ------------------------------------------------------------------ consumers

    def create_consumer(self, queue: str, *, filter_string: str | None = None,
                        browse_only: bool = False) -> tuple[ConsumerCore, Call]:
        consumer = ConsumerCore(self, self._next_consumer, queue, self.settings.consumer_window_size, browse_only,
                                filter_string)
        self._next_consumer += 1
        self.consumers[consumer.consumer_id] = consumer
        call = self._call(SessionCreateConsumerMessage(consumer.consumer_id, queue, filter_string, browse_only, True),
                          _QUEUE_QUERY)
        credits = consumer.initial_credits()
        if credits != 0:
            self.write(SessionConsumerFlowCreditMessage(consumer.consumer_id, credits))
        return consumer, call

    def close_consumer(self, consumer: ConsumerCore) -> Call | None:
        if consumer.closed:
            return None
        consumer.closed = True
        consumer.clear()
        self.consumers.pop(consumer.consumer_id, None)
        consumer._changed()
        return self._call(SessionConsumerCloseMessage(consumer.consumer_id), _NULL)

    def acknowledge(self, delivery: Delivery, *, individually: bool = False) -> Call | None:
        """Acknowledge ``delivery`` (cumulatively up to it, or just it); a call only with block_on_acknowledge."""
        blocking = self.settings.block_on_acknowledge
        self.work_done = True
        packet: Packet
        if individually:
            packet = SessionIndividualAcknowledgeMessage(delivery.consumer_id, delivery.message_id, blocking)
        else:
            packet = SessionAcknowledgeMessage(delivery.consumer_id, delivery.message_id, blocking)
        if blocking:
            return self._call(packet, _NULL)
        self.write(packet)
        return None

    def start(self) -> None:
        self.started = True
        self.write(SessionStart())

    def stop(self) -> Call:
        self.started = False
        return self._call(SessionStop(), _NULL)

    # ------------------------------------------------------------------ local transactions

    def commit(self) -> Call:
        """SESS_COMMIT; on a rollback-only session (recreated after failover) a rollback instead, and the call
        fails with TransactionRolledBack once the broker has rolled back."""
        if self.rollback_only:
            rollback = self.rollback()
            failed = Call("SESS_COMMIT", _NULL, None)
            rollback.add_done_callback(lambda done: failed.fail(done.error or TransactionRolledBack(self.options.name)))
            return failed
        correlation = self._blocking_id() if self.server_version >= _COMMIT_CORRELATED_VERSION else None
        self.work_done = False
        return self._call(SessionCommitMessage(correlation), _NULL, correlation)

    def rollback(self, *, consider_last_message_as_delivered: bool = False) -> Call:
        """Roll back; buffered deliveries are dropped first, the broker redelivers them."""
        for consumer in self.consumers.values():
            consumer.clear()
        self.work_done = self.rollback_only = False
        return self._call(RollbackMessage(consider_last_message_as_delivered), _NULL)

    # ------------------------------------------------------------------ XA (notes §13)

    def xa_start(self, xid: Xid) -> Call:
        self.active_xid = xid
        return self._call(SessionXAStartMessage(xid), _XA)

    def xa_join(self, xid: Xid) -> Call:
        self.active_xid = xid
        return self._call(SessionXAJoinMessage(xid), _XA)

    def xa_resume(self, xid: Xid) -> Call:
        self.active_xid = xid
        return self._call(SessionXAResumeMessage(xid), _XA)

    def xa_end(self, xid: Xid, *, failed: bool = False) -> Call:
        self.active_xid = None
        return self._call(SessionXAEndMessage(xid, failed), _XA)

    def xa_suspend(self) -> Call:
        self.active_xid = None
        return self._call(SessionXASuspend(), _XA)

    def xa_prepare(self, xid: Xid) -> Call:
        return self._call(SessionXAPrepareMessage(xid), _XA)

    def xa_commit(self, xid: Xid, *, one_phase: bool = False) -> Call:
        return self._call(SessionXACommitMessage(xid, one_phase), _XA)

    def xa_rollback(self, xid: Xid) -> Call:
        for consumer in self.consumers.values():
            consumer.clear()
        return self._call(SessionXARollbackMessage(xid), _XA)

    def xa_forget(self, xid: Xid) -> Call:
        return self._call(SessionXAForgetMessage(xid), _XA)

    def xa_recover(self) -> Call:
        return self._call(SessionXAGetInDoubtXids(), (SessionXAGetInDoubtXidsResponseMessage,))

    def xa_set_timeout(self, seconds: int) -> Call:
        return self._call(SessionXASetTimeoutMessage(seconds), (SessionXASetTimeoutResponseMessage,))

    def xa_get_timeout(self) -> Call:
        return self._call(SessionXAGetTimeout(), (SessionXAGetTimeoutResponseMessage,))

    def xa_failed(self, xid: Xid) -> None:
        """SESS_XA_FAILED: no answer; the broker marks the branch rollback-only."""
        self.write(SessionXAAfterFailedMessage(xid))

    # ------------------------------------------------------------------ close

    def close(self) -> Call:
        """SESS_CLOSE; the session is gone once the broker answers."""
        for consumer in list(self.consumers.values()):
            consumer.closed = True
            consumer._changed()
        call = self._call(SessionCloseMessage(), _NULL)
        call.add_done_callback(lambda _: self.connection.session_closed(self))
        return call

