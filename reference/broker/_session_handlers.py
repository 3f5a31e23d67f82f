"""Session-channel packets: queues, producers, consumers, delivery, acks, local
and XA transactions (notes §5.2, §7.4, §8, §13).

Each handler returns the reply packet (or ``None``); :meth:`SessionHandlers.handle`
then confirms the request in the session's window and sends the reply, which is
Artemis's order (confirm, then respond).  A :class:`BrokerError` becomes an
EXCEPTION reply when the request wanted one, and the request is then *not*
counted as confirmed.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from codec import (
    ActiveMQExceptionMessage,
    CoreMessage,
    CreateAddressMessage,
    CreateProducerMessage,
    CreateQueueMessage,
    CreateQueueMessage_V2,
    CreateSharedQueueMessage,
    CreateSharedQueueMessage_V2,
    ExceptionType,
    NullResponseMessage,
    Packet,
    PacketsConfirmedMessage,
    PropertyType,
    RemoveProducerMessage,
    RollbackMessage,
    RoutingType,
    SessionAcknowledgeMessage,
    SessionAddMetaDataMessage,
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
    SessionExpireMessage,
    SessionForceConsumerDelivery,
    SessionIndividualAcknowledgeMessage,
    SessionProducerCreditsMessage,
    SessionQueueQueryMessage,
    SessionQueueQueryResponseMessage,
    SessionQueueQueryResponseMessage_V2,
    SessionQueueQueryResponseMessage_V3,
    SessionReceiveMessage,
    SessionRequestProducerCreditsMessage,
    SessionSendMessage,
    SessionStart,
    SessionStop,
    SessionUniqueAddMetaDataMessage,
    TypedProperties,
)

from ._cluster import MANAGEMENT_ADDRESS, ROUTE_TO_KEY
from ._errors import BrokerError
from ._model import ROUTING_TYPE_KEY, MessageRef, PostOffice, Queue, split_fqqn
from ._selector import SelectorError, compile_selector
from ._session import Consumer, Session, Transaction
from ._xa import XA_ANSWERED, XAHandlers

if TYPE_CHECKING:
    from ._cluster_hooks import ClusterHooks
    from ._connection import Connection
    from ._core import BrokerCore

__all__ = ["SessionHandlers"]

LOG = logging.getLogger("reference.broker")

#: Property of the marker a forced delivery ends with (notes §5.2).
FORCED_DELIVERY_KEY = "_hornetq.forced.delivery.seq"

# Requests Artemis always answers (others answer only when they carry requires_response).
_ALWAYS_ANSWERED = (
    SessionDeleteQueueMessage, SessionCommitMessage, RollbackMessage, SessionStop, SessionCloseMessage,
    SessionConsumerCloseMessage, SessionQueueQueryMessage, SessionBindingQueryMessage, SessionAddMetaDataMessage,
)  # fmt: skip


def wants_reply(packet: Packet) -> bool:
    """Whether the client waits for an answer (so a refusal must be an EXCEPTION)."""
    if isinstance(packet, (*_ALWAYS_ANSWERED, *XA_ANSWERED)):
        return True
    if isinstance(packet, (SessionAddMetaDataMessageV2, SessionUniqueAddMetaDataMessage)):
        return packet.requires_confirmation
    return bool(getattr(packet, "requires_response", False))


class SessionHandlers:
    """Protocol handlers for everything that travels on a session channel."""

    def __init__(self, core: BrokerCore) -> None:
        self.core = core
        self.post_office = PostOffice()
        self.dirty: set[Queue] = set()
        #: set by the core when broker.xml has a cluster connection
        self.cluster: ClusterHooks | None = None
        self.xa = XAHandlers(self)
        self._handlers: dict[type[Packet], Callable[[Session, Any], Packet | None]] = {
            SessionSendMessage: self._send,
            SessionAcknowledgeMessage: self._acknowledge,
            SessionIndividualAcknowledgeMessage: self._individual_acknowledge,
            SessionConsumerFlowCreditMessage: self._flow_credit,
            SessionRequestProducerCreditsMessage: self._producer_credits,
            SessionCreateConsumerMessage: self._create_consumer,
            SessionConsumerCloseMessage: self._close_consumer,
            SessionStart: self._start,
            SessionStop: self._stop,
            SessionCloseMessage: self._close,
            SessionCommitMessage: self._commit,
            RollbackMessage: self._rollback,
            SessionForceConsumerDelivery: self._force_delivery,
            SessionExpireMessage: self._expired,
            CreateAddressMessage: self._create_address,
            CreateQueueMessage: self._create_queue,
            CreateQueueMessage_V2: self._create_queue,
            CreateSharedQueueMessage: self._create_shared_queue,
            CreateSharedQueueMessage_V2: self._create_shared_queue,
            SessionDeleteQueueMessage: self._delete_queue,
            SessionQueueQueryMessage: self._queue_query,
            SessionBindingQueryMessage: self._binding_query,
            SessionAddMetaDataMessage: self._metadata,
            SessionAddMetaDataMessageV2: self._metadata,
            SessionUniqueAddMetaDataMessage: self._unique_metadata,
            CreateProducerMessage: self._create_producer,
            RemoveProducerMessage: self._remove_producer,
            **self.xa.handlers(),
        }

    # ------------------------------------------------------------------ entry

    def handle(self, session: Session, packet: Packet, size: int) -> None:
        if isinstance(packet, PacketsConfirmedMessage):
            session.send_window.confirmed(packet.command_id)
            return
        handler = self._handlers.get(type(packet))
        if handler is None:
            raise BrokerError(ExceptionType.UNSUPPORTED_PACKET,
                              f"{packet.type_name()} is not valid on a session channel")
        try:
            reply = handler(session, packet)
        except BrokerError as exc:
            LOG.info("request refused", extra={"session": session.name, "packet": packet.type_name(),
                                                "code": exc.code, "reason": str(exc)})
            if wants_reply(packet):
                correlation = getattr(packet, "correlation_id", None)
                self.core.send(session.connection, session.channel_id,
                               ActiveMQExceptionMessage(exc.code, str(exc), correlation), session)
            return
        if packet.requires_confirmations():
            self.confirm(session, size)
        if isinstance(packet, SessionCloseMessage):
            self.flush_confirmations(session)
        if reply is not None:
            self.core.send(session.connection, session.channel_id, reply, session,
                           needs_no_sync=isinstance(reply, SessionProducerCreditsMessage))

    def confirm(self, session: Session, size: int) -> None:
        index = session.receive_window.processed(size)
        if index is not None:
            self.core.send(session.connection, session.channel_id, PacketsConfirmedMessage(index))

    def flush_confirmations(self, session: Session) -> None:
        if session.detached_at is not None:
            return
        index = session.receive_window.flush()
        if index is not None:
            self.core.send(session.connection, session.channel_id, PacketsConfirmedMessage(index))

    def null_response(self, session: Session, correlation: int | None = -1) -> NullResponseMessage:
        version = session.connection.version
        return NullResponseMessage(-1 if correlation is None else correlation) if version == 0 or version >= 130 \
            else NullResponseMessage(None)

    # ------------------------------------------------------------------ sending

    def _send(self, session: Session, packet: SessionSendMessage) -> Packet | None:
        message = packet.message
        address = message.address or session.default_address
        if address is None:
            raise BrokerError(ExceptionType.ILLEGAL_STATE, "message has no address")
        reply = self.null_response(session, packet.correlation_id) if packet.requires_response else None
        if self.cluster is not None:
            if address == MANAGEMENT_ADDRESS:
                self.cluster.management(session, message)
                return reply
            if self.cluster.duplicate(message):  # a bridge resent what it had delivered before a failure
                return reply
        message = dataclasses.replace(message, message_id=self.post_office.next_id(), address=address)
        if ROUTE_TO_KEY not in message.properties:  # a bridged message names its queues by ID
            self._ensure_address(address, message)
        if session.tx.xid is not None or not session.auto_commit_sends:
            self._check_tx(session)
            session.tx.sends.append((message, address))
        else:
            self.route(message, address, None)
        return reply

    def _ensure_address(self, address: str, message: CoreMessage) -> None:
        if address in self.post_office.addresses:
            return
        settings = self.core.settings
        if not settings.auto_create_addresses:
            raise BrokerError(ExceptionType.ADDRESS_DOES_NOT_EXIST, f"AMQ229036: Address {address} does not exist")
        hint = message.properties.get(ROUTING_TYPE_KEY) if message.properties else None
        routing = int(hint) if isinstance(hint, int) else settings.default_routing_type
        created = self.post_office.add_address(address, {routing}, auto_created=True)
        self.core.storage.address_added(created)
        if routing == RoutingType.ANYCAST and settings.auto_create_queues:
            self.add_queue(Queue(address, address, RoutingType.ANYCAST, durable=True, auto_created=True))

    def route(self, message: CoreMessage, address: str, tx_id: int | None) -> bool:
        """Route and enqueue a message; returns whether anything durable was stored."""
        return self.enqueue(*self.resolve(message, address), tx_id)

    def resolve(self, message: CoreMessage, address: str) -> tuple[CoreMessage, list[Queue]]:
        """The message as stored (a cluster adds its store-and-forward routes) and the queues it goes to."""
        if self.cluster is None:
            return message, self.post_office.route(message, address)
        return self.cluster.resolve(message, address)

    def enqueue(self, message: CoreMessage, queues: list[Queue], tx_id: int | None,
                ref_ids: dict[tuple[int, str], int] | None = None) -> bool:
        durable = [q for q in queues if q.durable] if message.durable else []
        if durable and ref_ids is None:
            self.core.storage.message_routed(message, durable, tx_id)
            ref_ids = dict(zip(((message.message_id, q.name) for q in durable),
                               self.core.storage.take_ref_ids(message.message_id), strict=False))
        for queue in queues:
            record = (ref_ids or {}).get((message.message_id, queue.name), 0)
            queue.push_back(MessageRef(message, queue, record_id=record))
            self.dirty.add(queue)
        return bool(durable)

    def _producer_credits(self, session: Session, packet: SessionRequestProducerCreditsMessage) -> Packet | None:
        # Never full: grant at once (a broker that does not answer blocks Java producers).
        return SessionProducerCreditsMessage(packet.credits, packet.address)

    def _create_producer(self, session: Session, packet: CreateProducerMessage) -> Packet | None:
        session.producers[packet.producer_id] = packet.address
        return None

    def _remove_producer(self, session: Session, packet: RemoveProducerMessage) -> Packet | None:
        session.producers.pop(packet.producer_id, None)
        return None

    # ------------------------------------------------------------------ addresses and queues

    def add_queue(self, queue: Queue) -> Queue:
        added = self.post_office.add_queue(queue)
        address = self.post_office.addresses[queue.address]
        self.core.storage.address_added(address)
        if queue.durable and not queue.temporary:
            self.core.storage.queue_added(queue)
        if self.cluster is not None:
            self.cluster.queue_changed(added, "BINDING_ADDED")
        return added

    def define(self, address: str, routing_types: set[int], queues: list[Queue]) -> list[str]:
        """Addresses and queues the configuration declares (broker.xml ``<addresses>``);
        returns what could not be created, with the reason."""
        problems: list[str] = []
        created = self.post_office.add_address(address, routing_types)
        self.core.storage.address_added(created)
        for queue in queues:
            if queue.name in self.post_office.queues:
                continue  # recovered from the journal, or declared twice
            try:
                self._check_filter(queue.filter_string)
            except BrokerError as exc:
                problems.append(f"queue {queue.name}: {exc}; queue not created")
                continue
            self.add_queue(queue)
        return problems

    def _create_address(self, session: Session, packet: CreateAddressMessage) -> Packet | None:
        address = self.post_office.add_address(packet.address, set(packet.routing_types),
                                               auto_created=packet.auto_created)
        self.core.storage.address_added(address)
        return self.null_response(session) if packet.requires_response else None

    def _create_queue(self, session: Session, packet: CreateQueueMessage | CreateQueueMessage_V2) -> Packet | None:
        if packet.queue_name in self.post_office.queues:
            raise BrokerError(ExceptionType.QUEUE_EXISTS, f"AMQ229019: Queue {packet.queue_name} already exists")
        routing = getattr(packet, "routing_type", None)
        self._check_filter(packet.filter_string)
        queue = Queue(
            packet.queue_name, packet.address,
            RoutingType.MULTICAST if routing is None else routing,
            durable=packet.durable, filter_string=packet.filter_string, temporary=packet.temporary,
            auto_created=bool(getattr(packet, "auto_created", False)),
            max_consumers=getattr(packet, "max_consumers", -1),
            purge_on_no_consumers=bool(getattr(packet, "purge_on_no_consumers", False)),
            owner_session=session.name if packet.temporary else None,
        )  # fmt: skip
        self.add_queue(queue)
        return self.null_response(session) if packet.requires_response else None

    def _create_shared_queue(
        self, session: Session, packet: CreateSharedQueueMessage | CreateSharedQueueMessage_V2
    ) -> Packet | None:
        existing = self.post_office.queues.get(packet.queue_name)
        if existing is None:
            routing = getattr(packet, "routing_type", None)
            self._check_filter(packet.filter_string)
            self.add_queue(Queue(packet.queue_name, packet.address,
                                  RoutingType.MULTICAST if routing is None else routing,
                                  durable=packet.durable, filter_string=packet.filter_string))
        elif existing.address != packet.address or existing.filter_string != packet.filter_string:
            raise BrokerError(ExceptionType.QUEUE_EXISTS,
                              f"AMQ229019: Queue {packet.queue_name} already exists with another address or filter")
        return self.null_response(session) if packet.requires_response else None

    def _delete_queue(self, session: Session, packet: SessionDeleteQueueMessage) -> Packet | None:
        queue = self.post_office.queues.get(packet.queue_name)
        if queue is None:
            raise BrokerError(ExceptionType.QUEUE_DOES_NOT_EXIST,
                              f"AMQ229017: Queue {packet.queue_name} does not exist")
        if queue.consumers:
            raise BrokerError(ExceptionType.ILLEGAL_STATE, f"queue {packet.queue_name} has consumers")
        self._remove_queue(queue)
        return self.null_response(session)

    def _remove_queue(self, queue: Queue) -> None:
        self.post_office.remove_queue(queue.name)
        for ref in list(queue.ready):
            if ref.durable:
                self.core.storage.ref_acked(ref, None)
        queue.ready.clear()
        if queue.durable and not queue.temporary:
            self.core.storage.queue_removed(queue)
        if self.cluster is not None:
            self.cluster.queue_changed(queue, "BINDING_REMOVED")

    @staticmethod
    def _check_filter(filter_string: str | None) -> None:
        if filter_string:
            try:
                compile_selector(filter_string)
            except SelectorError as exc:
                raise BrokerError(ExceptionType.INVALID_FILTER_EXPRESSION, f"AMQ229042: Invalid filter: {exc}") from exc

    def _queue_query(self, session: Session, packet: SessionQueueQueryMessage) -> Packet:
        return self.queue_query_response(session, packet.queue_name)

    def queue_query_response(self, session: Session, name: str) -> Packet:
        address_part, queue_name = split_fqqn(name)
        queue = self.post_office.queues.get(queue_name)
        settings = self.core.settings
        if queue is None:
            base: dict[str, Any] = {"exists": False, "name": queue_name, "address": address_part or queue_name}
            routing = settings.default_routing_type
        else:
            base = {
                "exists": True, "durable": queue.durable, "temporary": queue.temporary,
                "consumer_count": len(queue.consumers), "message_count": queue.message_count,
                "filter_string": queue.filter_string, "address": queue.address, "name": queue.name,
            }  # fmt: skip
            routing = queue.routing_type
        version = session.connection.version
        if version == 0 or version >= 129:
            extra: dict[str, Any] = {"auto_create_queues": settings.auto_create_queues, "routing_type": routing}
            if queue is not None:
                extra.update(auto_created=queue.auto_created, purge_on_no_consumers=queue.purge_on_no_consumers,
                             max_consumers=queue.max_consumers)
            return SessionQueueQueryResponseMessage_V3(**base, **extra)
        if version >= 126:
            return SessionQueueQueryResponseMessage_V2(**base, auto_create_queues=settings.auto_create_queues)
        return SessionQueueQueryResponseMessage(**base)

    def _binding_query(self, session: Session, packet: SessionBindingQueryMessage) -> Packet:
        settings = self.core.settings
        address = self.post_office.addresses.get(packet.address)
        exists = address is not None
        names = tuple(address.queues) if address is not None else ()
        if self.cluster is not None:  # as Artemis: remote queues too, by their cluster name (queue name + node ID)
            names += tuple(b.cluster_name for b in self.cluster.state.remote_on(packet.address))
        version = session.connection.version
        common: dict[str, Any] = {"exists": exists, "queue_names": names}
        if version == 0 or version >= 129:
            v4: dict[str, Any] = {**common, "auto_create_queues": settings.auto_create_queues,
                                  "auto_create_addresses": settings.auto_create_addresses}
            if version == 0 or version >= 135:
                types = address.routing_types if address is not None else set()
                return SessionBindingQueryResponseMessage_V5(
                    **v4, supports_multicast=RoutingType.MULTICAST in types,
                    supports_anycast=RoutingType.ANYCAST in types)
            return SessionBindingQueryResponseMessage_V4(**v4)
        if version >= 127:
            return SessionBindingQueryResponseMessage_V3(**common, auto_create_queues=settings.auto_create_queues,
                                                         auto_create_addresses=settings.auto_create_addresses)
        if version >= 126:
            return SessionBindingQueryResponseMessage_V2(**common, auto_create_queues=settings.auto_create_queues)
        return SessionBindingQueryResponseMessage(**common)

    # ------------------------------------------------------------------ consumers and delivery

    def _create_consumer(self, session: Session, packet: SessionCreateConsumerMessage) -> Packet | None:
        _, queue_name = split_fqqn(packet.queue_name)
        queue = self.post_office.queues.get(queue_name)
        if queue is None:
            raise BrokerError(ExceptionType.QUEUE_DOES_NOT_EXIST, f"AMQ229017: Queue {queue_name} does not exist")
        self._check_filter(packet.filter_string)
        if queue.max_consumers != -1 and len(queue.consumers) >= queue.max_consumers:
            raise BrokerError(ExceptionType.MAX_CONSUMER_LIMIT_EXCEEDED,
                              f"AMQ229210: queue {queue_name} has its maximum of {queue.max_consumers} consumers")
        consumer = Consumer(packet.consumer_id, session, queue, packet.filter_string, packet.browse_only)
        session.consumers[packet.consumer_id] = consumer
        queue.consumers.append(consumer)
        if self.cluster is not None and not consumer.browse_only:
            self.cluster.queue_changed(queue, "CONSUMER_CREATED", consumer.filter_string)
        return self.queue_query_response(session, queue.name) if packet.requires_response else None

    def _flow_credit(self, session: Session, packet: SessionConsumerFlowCreditMessage) -> Packet | None:
        consumer = self._consumer(session, packet.consumer_id)
        if packet.credits == -1 or packet.credits == 0:
            consumer.credits = packet.credits
        elif consumer.credits != -1:
            consumer.credits += packet.credits
        self.dirty.add(consumer.queue)
        return None

    def _consumer(self, session: Session, consumer_id: int) -> Consumer:
        consumer = session.consumers.get(consumer_id)
        if consumer is None:
            raise BrokerError(ExceptionType.ILLEGAL_STATE, f"no consumer {consumer_id} in session {session.name}")
        return consumer

    def _start(self, session: Session, packet: SessionStart) -> Packet | None:
        session.started = True
        self.dirty.update(c.queue for c in session.consumers.values())
        return None

    def _stop(self, session: Session, packet: SessionStop) -> Packet | None:
        session.started = False
        return self.null_response(session)

    def deliver_all(self) -> None:
        while self.dirty:
            queue = self.dirty.pop()
            if queue.name in self.post_office.queues:
                self._deliver(queue)

    def _deliver(self, queue: Queue) -> None:
        if self.cluster is not None and self.cluster.redistributing(queue):
            self.cluster.redistribute(queue)  # it has no local consumer: the messages go where there are
            return
        for consumer in queue.consumers:
            if consumer.browse_only:
                self._browse(consumer)
        consumers = [c for c in queue.consumers if not c.browse_only]
        if any(c.filter_string for c in consumers):
            self._deliver_filtered(queue, consumers)
            return
        while queue.ready:
            consumers = [c for c in queue.consumers if not c.browse_only]
            count = len(consumers)
            chosen = None
            for step in range(count):
                candidate = consumers[(queue.next_consumer + step) % count]
                session = candidate.session
                if session.started and session.detached_at is None and candidate.has_credit():
                    chosen = candidate
                    queue.next_consumer = (queue.next_consumer + step + 1) % count
                    break
            if chosen is None:
                return
            ref = queue.ready.popleft()
            self._hand_over(chosen, ref)

    def _deliver_filtered(self, queue: Queue, consumers: list[Consumer]) -> None:
        """Round robin over the consumers whose filter selects each message; a message no ready consumer
        selects keeps its place for later."""
        count = len(consumers)
        kept: deque[MessageRef] = deque()
        while queue.ready:
            ready = [c for c in consumers if c.session.started and c.session.detached_at is None and c.has_credit()]
            if not ready:
                break
            ref = queue.ready.popleft()
            for step in range(count):
                candidate = consumers[(queue.next_consumer + step) % count]
                if candidate in ready and candidate.accepts(ref.message):
                    queue.next_consumer = (queue.next_consumer + step + 1) % count
                    self._hand_over(candidate, ref)
                    break
            else:
                kept.append(ref)
        kept.extend(queue.ready)
        queue.ready = kept

    def _hand_over(self, consumer: Consumer, ref: MessageRef) -> None:
        ref.delivery_count += 1
        session = consumer.session
        if not session.pre_acknowledge:
            self.core.storage.delivery_starting(ref)
        frame = self.core.send(session.connection, session.channel_id,
                               SessionReceiveMessage(ref.message, consumer.consumer_id, ref.delivery_count), session)
        if consumer.credits != -1:
            consumer.credits -= len(frame)
        consumer.delivering[ref.message_id] = ref
        if session.pre_acknowledge:
            self._ack_refs(session, [consumer.delivering.pop(ref.message_id)])

    def _browse(self, consumer: Consumer) -> None:
        session = consumer.session
        ready = list(consumer.queue.ready)
        while consumer.browse_position < len(ready) and consumer.has_credit() and session.started:
            ref = ready[consumer.browse_position]
            consumer.browse_position += 1
            if not consumer.accepts(ref.message):
                continue
            frame = self.core.send(session.connection, session.channel_id,
                                   SessionReceiveMessage(ref.message, consumer.consumer_id, ref.delivery_count + 1),
                                   session)
            if consumer.credits != -1:
                consumer.credits -= len(frame)

    def _force_delivery(self, session: Session, packet: SessionForceConsumerDelivery) -> Packet | None:
        consumer = self._consumer(session, packet.consumer_id)
        self._deliver(consumer.queue)
        # The marker bypasses credits and tells a receive(timeout) that nothing else is pending.
        marker = CoreMessage(
            message_id=self.post_office.next_id(), address=consumer.queue.name,
            properties=TypedProperties.typed((FORCED_DELIVERY_KEY, PropertyType.LONG, packet.sequence)),
        )  # fmt: skip
        self.core.send(session.connection, session.channel_id,
                       SessionReceiveMessage(marker, consumer.consumer_id, 0), session)
        return None

    def _close_consumer(self, session: Session, packet: SessionConsumerCloseMessage) -> Packet | None:
        consumer = self._consumer(session, packet.consumer_id)
        self._remove_consumer(consumer, failed=False)
        return self.null_response(session)

    def _remove_consumer(self, consumer: Consumer, *, failed: bool) -> None:
        refs = list(consumer.delivering.values())
        consumer.delivering.clear()
        for ref in refs:
            if not failed:  # as Artemis: a clean close says the client did not consume them; a failure may have
                ref.delivery_count = max(0, ref.delivery_count - 1)  # consumed them, so their count stays
            self.core.storage.delivery_counted(ref)
        consumer.queue.return_refs(refs)
        if consumer in consumer.queue.consumers:
            consumer.queue.consumers.remove(consumer)
            if self.cluster is not None and not consumer.browse_only:
                self.cluster.queue_changed(consumer.queue, "CONSUMER_CLOSED", consumer.filter_string)
        consumer.session.consumers.pop(consumer.consumer_id, None)
        self.dirty.add(consumer.queue)

    # ------------------------------------------------------------------ acknowledgements

    def _acknowledge(self, session: Session, packet: SessionAcknowledgeMessage) -> Packet | None:
        consumer = self._consumer(session, packet.consumer_id)
        if packet.message_id not in consumer.delivering:
            raise BrokerError(ExceptionType.ILLEGAL_STATE,
                              f"AMQ229027: Could not find reference on consumer ID={packet.consumer_id}, "
                              f"messageId = {packet.message_id}")
        acked: list[MessageRef] = []
        while consumer.delivering:  # cumulative, in delivery order
            message_id, ref = consumer.delivering.popitem(last=False)
            acked.append(ref)
            if message_id == packet.message_id:
                break
        self._ack_refs(session, acked)
        return self.null_response(session) if packet.requires_response else None

    def _individual_acknowledge(self, session: Session, packet: SessionIndividualAcknowledgeMessage) -> Packet | None:
        consumer = self._consumer(session, packet.consumer_id)
        ref = consumer.delivering.pop(packet.message_id, None)
        if ref is None:
            raise BrokerError(ExceptionType.ILLEGAL_STATE,
                              f"AMQ229027: Could not find reference on consumer ID={packet.consumer_id}, "
                              f"messageId = {packet.message_id}")
        self._ack_refs(session, [ref])
        return self.null_response(session) if packet.requires_response else None

    def _ack_refs(self, session: Session, refs: list[MessageRef]) -> None:
        if session.tx.xid is not None or not session.auto_commit_acks:
            self._check_tx(session)
            session.tx.acks.extend(refs)
            return
        for ref in refs:
            if ref.durable:
                self.core.storage.ref_acked(ref, None)

    def _expired(self, session: Session, packet: SessionExpireMessage) -> Packet | None:
        consumer = self._consumer(session, packet.consumer_id)
        ref = consumer.delivering.pop(packet.message_id, None)
        if ref is not None and ref.durable:
            self.core.storage.ref_acked(ref, None)
        return None

    # ------------------------------------------------------------------ local transactions

    def _check_tx(self, session: Session) -> None:
        if session.tx.rollback_only:
            raise BrokerError(ExceptionType.TRANSACTION_ROLLED_BACK, session.tx.rollback_only)

    def _commit(self, session: Session, packet: SessionCommitMessage) -> Packet | None:
        tx = session.tx
        if tx.rollback_only:
            reason = tx.rollback_only
            self.rollback_work(session, cancel_deliveries=False)
            raise BrokerError(ExceptionType.TRANSACTION_ROLLED_BACK, reason)
        self.commit_transaction(tx)
        session.tx = Transaction()
        return self.null_response(session, packet.correlation_id)

    def commit_transaction(self, tx: Transaction) -> None:
        """Route the sends and finish the acks of ``tx`` (durable effects as one journal transaction)."""
        journal_tx = tx.journal_tx or self.post_office.next_id()
        durable = False
        for message, address in tx.sends:
            durable = self.route(message, address, journal_tx) or durable
        for ref in tx.acks:
            if ref.durable:
                durable = True
                self.core.storage.ref_acked(ref, journal_tx)
        if durable or tx.state == "PREPARED":
            self.core.storage.tx_commit(journal_tx)

    def _rollback(self, session: Session, packet: RollbackMessage) -> Packet | None:
        self.rollback_work(session, cancel_deliveries=True)
        return self.null_response(session)

    def rollback_work(self, session: Session, *, cancel_deliveries: bool, closing_cleanly: bool = False) -> None:
        """Discard the session's transaction; acknowledged (and, when asked, all
        delivered but unacknowledged) messages go back for redelivery.  A clean
        session close does not count the unacknowledged deliveries (Artemis
        decrements their delivery count when the consumer was not failed)."""
        refs = list(session.tx.acks)
        session.tx = Transaction()
        if cancel_deliveries:
            for consumer in session.consumers.values():
                for ref in consumer.delivering.values():
                    if closing_cleanly:
                        ref.delivery_count = max(0, ref.delivery_count - 1)
                    refs.append(ref)
                consumer.delivering.clear()
        self.return_refs(refs)

    def return_refs(self, refs: list[MessageRef]) -> None:
        by_queue: dict[Queue, list[MessageRef]] = {}
        for ref in refs:
            self.core.storage.delivery_counted(ref)
            by_queue.setdefault(ref.queue, []).append(ref)
        for queue, queued in by_queue.items():
            queue.return_refs(sorted(queued, key=lambda r: r.message_id))
            self.dirty.add(queue)

    def scan_transaction_timeouts(self, now: float) -> None:
        self.xa.scan_timeouts(now)

    # ------------------------------------------------------------------ metadata

    def _metadata(
        self, session: Session, packet: SessionAddMetaDataMessage | SessionAddMetaDataMessageV2
    ) -> Packet | None:
        session.metadata[packet.key] = packet.data
        return self.null_response(session) if wants_reply(packet) else None

    def _unique_metadata(self, session: Session, packet: SessionUniqueAddMetaDataMessage) -> Packet | None:
        for other in self.core.sessions_by_name.values():
            if other is not session and other.metadata.get(packet.key) == packet.data:
                raise BrokerError(ExceptionType.DUPLICATE_METADATA,
                                  f"AMQ229213: metadata {packet.key}={packet.data} is already in use")
        session.metadata[packet.key] = packet.data
        return self.null_response(session) if packet.requires_confirmation else None

    # ------------------------------------------------------------------ closing

    def _close(self, session: Session, packet: SessionCloseMessage) -> Packet | None:
        # handle() then confirms, flushes the confirmations and answers (notes §7.4).
        self.close_session(session, failed=False)
        return self.null_response(session)

    def close_session(self, session: Session, *, failed: bool) -> None:
        """End a session: roll back its work, return its deliveries, drop temp queues."""
        if session.tx.xid is not None:
            self.xa.session_gone(session)
        self.rollback_work(session, cancel_deliveries=True, closing_cleanly=not failed)
        for consumer in list(session.consumers.values()):
            self._remove_consumer(consumer, failed=failed)
        conn: Connection = session.connection
        if conn.sessions.get(session.channel_id) is session:
            del conn.sessions[session.channel_id]
        if self.core.sessions_by_name.get(session.name) is session:
            del self.core.sessions_by_name[session.name]
        for queue in list(self.post_office.queues.values()):
            if queue.temporary and queue.owner_session == session.name:
                self._remove_queue(queue)
        LOG.info("session closed", extra={"session": session.name, "failed": failed})

    def fail_connection_sessions(self, conn: Connection) -> None:
        for session in list(conn.sessions.values()):
            if session.connection is conn:
                self.close_session(session, failed=True)
