"""The delivery engine: addresses, queues and bindings (through the :class:`PostOffice`), routing,
the delivery scheduler, acknowledgement and redelivery.

Rules of this module:
* Every change that may let a queue deliver (a message enqueued or returned, a consumer added,
  credit granted, a session started) marks the queue; :meth:`DeliveryEngine.deliver_all` then
  delivers from the marked queues only.  The core calls it once per input, after the handlers.
* Storage calls are made as the state changes, before any reply that depends on them is queued.
* With a cluster connection, routing goes through the cluster (remote bindings) and so does a
  queue with no local consumer that is redistributing; the engine tells the cluster of every
  binding and consumer change.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from cck.codec import CoreMessage, ExceptionType, PropertyType, RoutingType, SessionReceiveMessage, TypedProperties

from ._errors import BrokerError
from ._model import ROUTING_TYPE_KEY, Address, MessageRef, PostOffice, Queue
from ._outbox import Outbox
from ._selector import SelectorError, compile_selector
from ._session import Consumer, Session
from ._settings import BrokerSettings
from ._storage import Storage

if TYPE_CHECKING:
    from ._cluster_hooks import ClusterHooks

__all__ = ["FORCED_DELIVERY_KEY", "DeliveryEngine", "check_filter"]

LOG = logging.getLogger("cck.reference.broker")

#: Property of the marker a forced delivery ends with (notes §5.2).
FORCED_DELIVERY_KEY = "_hornetq.forced.delivery.seq"


def check_filter(filter_string: str | None) -> None:
    """Refuse a filter that does not parse, as Artemis does when a queue or consumer is created."""
    if filter_string:
        try:
            compile_selector(filter_string)
        except SelectorError as exc:
            raise BrokerError(ExceptionType.INVALID_FILTER_EXPRESSION, f"AMQ229042: Invalid filter: {exc}") from exc


class DeliveryEngine:
    """Owns the routing state and delivers from it."""

    def __init__(self, post_office: PostOffice, storage: Storage, outbox: Outbox, settings: BrokerSettings) -> None:
        self.post_office = post_office
        self._storage = storage
        self._outbox = outbox
        self._settings = settings
        self._dirty: set[Queue] = set()
        self.cluster: ClusterHooks | None = None

    def route_through(self, cluster: ClusterHooks) -> None:
        """Once, when the core is assembled with a cluster connection: routing, redistribution and
        binding notifications go through it from now on."""
        self.cluster = cluster

    # ------------------------------------------------------------------ addresses and queues

    def add_address(self, name: str, routing_types: set[int], *, auto_created: bool = False) -> Address:
        address = self.post_office.add_address(name, routing_types, auto_created=auto_created)
        self._storage.address_added(address)
        return address

    def ensure_address(self, address: str, message: CoreMessage,
                       permit: Callable[[str, bool], None] | None = None) -> None:
        """A send to an address that does not exist creates it (and, anycast, its queue) when allowed.
        ``permit(address, with_queue)`` is asked first, and refuses by raising."""
        if address in self.post_office.addresses:
            return
        settings = self._settings
        if not settings.auto_create_addresses:
            raise BrokerError(ExceptionType.ADDRESS_DOES_NOT_EXIST, f"AMQ229036: Address {address} does not exist")
        hint = message.properties.get(ROUTING_TYPE_KEY) if message.properties else None
        routing = int(hint) if isinstance(hint, int) else settings.default_routing_type
        with_queue = routing == RoutingType.ANYCAST and settings.auto_create_queues
        if permit is not None:
            permit(address, with_queue)
        self.add_address(address, {routing}, auto_created=True)
        if with_queue:
            self.add_queue(Queue(address, address, RoutingType.ANYCAST, durable=True, auto_created=True))

    def add_queue(self, queue: Queue) -> Queue:
        added = self.post_office.add_queue(queue)
        self._storage.address_added(self.post_office.addresses[queue.address])
        if queue.durable and not queue.temporary:
            self._storage.queue_added(queue)
        if self.cluster is not None:
            self.cluster.queue_changed(added, "BINDING_ADDED")
        return added

    def define(self, address: str, routing_types: set[int], queues: list[Queue]) -> list[str]:
        """Addresses and queues the configuration declares (broker.xml ``<addresses>``);
        returns what could not be created, with the reason."""
        problems: list[str] = []
        self.add_address(address, routing_types)
        for queue in queues:
            if queue.name in self.post_office.queues:
                continue  # recovered from the journal, or declared twice
            try:
                check_filter(queue.filter_string)
            except BrokerError as exc:
                problems.append(f"queue {queue.name}: {exc}; queue not created")
                continue
            self.add_queue(queue)
        return problems

    def remove_queue(self, queue: Queue) -> None:
        """The queue goes, with the messages waiting in it."""
        self.post_office.remove_queue(queue.name)
        for ref in list(queue.ready):
            if ref.durable:
                self._storage.ref_acked(ref, None)
        queue.ready.clear()
        if queue.durable and not queue.temporary:
            self._storage.queue_removed(queue)
        if self.cluster is not None:
            self.cluster.queue_changed(queue, "BINDING_REMOVED")

    def queues(self) -> list[Queue]:
        """Every queue, in the order they were created."""
        return list(self.post_office.queues.values())

    def remove_temporary_queues(self, owner: str) -> None:
        for queue in list(self.post_office.queues.values()):
            if queue.temporary and queue.owner_session == owner:
                self.remove_queue(queue)

    # ------------------------------------------------------------------ routing

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
        """Put the message at the back of ``queues`` (stored first when durable; ``ref_ids``: the REF records
        a prepared transaction wrote already)."""
        durable = [q for q in queues if q.durable] if message.durable else []
        if durable and ref_ids is None:
            self._storage.message_routed(message, durable, tx_id)
            ref_ids = dict(zip(((message.message_id, q.name) for q in durable),
                               self._storage.take_ref_ids(message.message_id), strict=False))
        for queue in queues:
            record = (ref_ids or {}).get((message.message_id, queue.name), 0)
            queue.push_back(MessageRef(message, queue, record_id=record))
            self._dirty.add(queue)
        return bool(durable)

    # ------------------------------------------------------------------ consumers

    def add_consumer(self, consumer: Consumer) -> None:
        queue = consumer.queue
        if queue.max_consumers != -1 and len(queue.consumers) >= queue.max_consumers:
            raise BrokerError(ExceptionType.MAX_CONSUMER_LIMIT_EXCEEDED,
                              f"AMQ229210: queue {queue.name} has its maximum of {queue.max_consumers} consumers")
        consumer.session.consumers[consumer.consumer_id] = consumer
        queue.consumers.append(consumer)
        if self.cluster is not None and not consumer.browse_only:
            self.cluster.queue_changed(queue, "CONSUMER_CREATED", consumer.filter_string)

    def remove_consumer(self, consumer: Consumer, *, failed: bool) -> None:
        """Its deliveries go back to the queue's head (counted as delivered only when the consumer failed)."""
        refs = list(consumer.delivering.values())
        consumer.delivering.clear()
        for ref in refs:
            if not failed:  # as Artemis: a clean close says the client did not consume them; a failure may have
                ref.delivery_count = max(0, ref.delivery_count - 1)  # consumed them, so their count stays
            self._storage.delivery_counted(ref)
        consumer.queue.return_refs(refs)
        if consumer in consumer.queue.consumers:
            consumer.queue.consumers.remove(consumer)
            if self.cluster is not None and not consumer.browse_only:
                self.cluster.queue_changed(consumer.queue, "CONSUMER_CLOSED", consumer.filter_string)
        consumer.session.consumers.pop(consumer.consumer_id, None)
        self._dirty.add(consumer.queue)

    def grant(self, consumer: Consumer, credits: int) -> None:
        """SESS_FLOWTOKEN: -1 unbounded, 0 stop, otherwise more bytes."""
        if credits in (-1, 0):
            consumer.credits = credits
        elif consumer.credits != -1:
            consumer.credits += credits
        self._dirty.add(consumer.queue)

    def wake(self, queue: Queue) -> None:
        """Something outside the engine may let ``queue`` deliver (a session started, a bridge came up)."""
        self._dirty.add(queue)

    # ------------------------------------------------------------------ delivery

    def deliver_all(self) -> None:
        while self._dirty:
            queue = self._dirty.pop()
            if queue.name in self.post_office.queues:
                self.deliver(queue)

    def deliver(self, queue: Queue) -> None:
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
                if _can_take(candidate):
                    chosen = candidate
                    queue.next_consumer = (queue.next_consumer + step + 1) % count
                    break
            if chosen is None:
                return
            self._hand_over(chosen, queue.ready.popleft())

    def _deliver_filtered(self, queue: Queue, consumers: list[Consumer]) -> None:
        """Round robin over the consumers whose filter selects each message; a message no ready consumer
        selects keeps its place for later."""
        count = len(consumers)
        kept: deque[MessageRef] = deque()
        while queue.ready:
            ready = [c for c in consumers if _can_take(c)]
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
            self._storage.delivery_starting(ref)
        frame = self._outbox.send(session.connection, session.channel_id,
                                  SessionReceiveMessage(ref.message, consumer.consumer_id, ref.delivery_count),
                                  session)
        if consumer.credits != -1:
            consumer.credits -= len(frame)
        consumer.delivering[ref.message_id] = ref
        if session.pre_acknowledge:
            self.acknowledge(session, [consumer.delivering.pop(ref.message_id)])

    def _browse(self, consumer: Consumer) -> None:
        """A browser sees the waiting messages in order, without taking them."""
        session = consumer.session
        ready = list(consumer.queue.ready)
        while consumer.browse_position < len(ready) and consumer.has_credit() and session.started:
            ref = ready[consumer.browse_position]
            consumer.browse_position += 1
            if not consumer.accepts(ref.message):
                continue
            frame = self._outbox.send(session.connection, session.channel_id,
                                      SessionReceiveMessage(ref.message, consumer.consumer_id,
                                                            ref.delivery_count + 1), session)
            if consumer.credits != -1:
                consumer.credits -= len(frame)

    def force_delivery(self, consumer: Consumer, sequence: int) -> None:
        """Deliver what the consumer can take now, then the marker that tells a receive(timeout) that
        nothing else is pending; the marker bypasses credits."""
        self.deliver(consumer.queue)
        marker = CoreMessage(
            message_id=self.post_office.next_id(), address=consumer.queue.name,
            properties=TypedProperties.typed((FORCED_DELIVERY_KEY, PropertyType.LONG, sequence)),
        )  # fmt: skip
        session = consumer.session
        self._outbox.send(session.connection, session.channel_id,
                          SessionReceiveMessage(marker, consumer.consumer_id, 0), session)

    # ------------------------------------------------------------------ acknowledgement and redelivery

    def acknowledge(self, session: Session, refs: list[MessageRef]) -> None:
        """The refs are consumed: at once, or at the commit of the session's transaction."""
        tx = session.tx
        if tx.xid is not None or not session.auto_commit_acks:
            tx.check_open()
            tx.acks.extend(refs)
            return
        for ref in refs:
            if ref.durable:
                self._storage.ref_acked(ref, None)

    def expire(self, ref: MessageRef) -> None:
        """The client found a delivered message expired: it leaves its queue."""
        if ref.durable:
            self._storage.ref_acked(ref, None)

    def remove_waiting(self, refs: Iterable[MessageRef]) -> None:
        """Waiting messages that left this broker (scale-down moved them to another node): out of their queues
        and out of storage."""
        for ref in refs:
            with contextlib.suppress(ValueError):
                ref.queue.ready.remove(ref)
            if ref.durable:
                self._storage.ref_acked(ref, None)

    def return_refs(self, refs: list[MessageRef]) -> None:
        """Cancelled deliveries go back to their queues' heads, in message order, for redelivery."""
        by_queue: dict[Queue, list[MessageRef]] = {}
        for ref in refs:
            self._storage.delivery_counted(ref)
            by_queue.setdefault(ref.queue, []).append(ref)
        for queue, queued in by_queue.items():
            queue.return_refs(sorted(queued, key=lambda r: r.message_id))
            self._dirty.add(queue)


def _can_take(consumer: Consumer) -> bool:
    session = consumer.session
    return session.started and session.detached_at_ms is None and consumer.has_credit()
