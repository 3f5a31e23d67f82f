"""Session-channel packets that manage and query addresses and queues (notes §5.2).

Each handler returns its reply (or ``None``), as the session handlers do; the session handlers'
entry point confirms the request and sends the reply.  Creating an address, creating and deleting a queue are
checked against the session's permissions (:mod:`._authorization`) where Artemis checks them: queue creation before
anything else (the queue may exist already), deletion once the queue is found; the queries are not checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cck.codec import (
    CreateAddressMessage,
    CreateQueueMessage,
    CreateQueueMessage_V2,
    CreateSharedQueueMessage,
    CreateSharedQueueMessage_V2,
    ExceptionType,
    Packet,
    RoutingType,
    SessionBindingQueryMessage,
    SessionDeleteQueueMessage,
    SessionQueueQueryMessage,
)

from ._authorization import Authorization, CheckType
from ._cluster_hooks import ClusterHooks
from ._engine import DeliveryEngine, check_filter
from ._errors import BrokerError
from ._model import PostOffice, Queue, split_fqqn
from ._replies import binding_query_response, null_response, queue_query_response
from ._session import Session
from ._settings import BrokerSettings

__all__ = ["QueueHandlers"]


class QueueHandlers:
    """Create, delete and query addresses and queues.  ``cluster``: lists remote queues in a binding query."""

    def __init__(self, engine: DeliveryEngine, post_office: PostOffice, settings: BrokerSettings,
                 cluster: ClusterHooks | None, authorization: Authorization) -> None:
        self._engine = engine
        self._post_office = post_office
        self._settings = settings
        self._cluster = cluster
        self._authorization = authorization

    def handlers(self) -> dict[type[Packet], Callable[[Session, Any], Packet | None]]:
        return {
            CreateAddressMessage: self._create_address,
            CreateQueueMessage: self._create_queue,
            CreateQueueMessage_V2: self._create_queue,
            CreateSharedQueueMessage: self._create_shared_queue,
            CreateSharedQueueMessage_V2: self._create_shared_queue,
            SessionDeleteQueueMessage: self._delete_queue,
            SessionQueueQueryMessage: self._queue_query,
            SessionBindingQueryMessage: self._binding_query,
        }

    def _create_address(self, session: Session, packet: CreateAddressMessage) -> Packet | None:
        self._authorization.check(session, CheckType.CREATE_ADDRESS, packet.address)
        self._engine.add_address(packet.address, set(packet.routing_types), auto_created=packet.auto_created)
        return null_response(session.connection.version) if packet.requires_response else None

    def _create_queue(self, session: Session, packet: CreateQueueMessage | CreateQueueMessage_V2) -> Packet | None:
        routing = getattr(packet, "routing_type", None)
        routing = RoutingType.MULTICAST if routing is None else routing
        self._authorization.check(session, CheckType.create_queue(packet.durable), packet.address, packet.queue_name)
        address = self._post_office.addresses.get(packet.address)
        if address is None or routing not in address.routing_types:
            # the address is created, or given the queue's routing type, with the queue (Artemis checks this only
            # with auto-create-addresses; without it Artemis refuses the queue, where this broker creates it)
            self._authorization.check(session, CheckType.CREATE_ADDRESS, packet.address, packet.queue_name)
        if packet.queue_name in self._post_office.queues:
            raise BrokerError(ExceptionType.QUEUE_EXISTS, f"AMQ229019: Queue {packet.queue_name} already exists")
        check_filter(packet.filter_string)
        queue = Queue(
            packet.queue_name, packet.address, routing,
            durable=packet.durable, filter_string=packet.filter_string, temporary=packet.temporary,
            auto_created=bool(getattr(packet, "auto_created", False)),
            max_consumers=getattr(packet, "max_consumers", -1),
            purge_on_no_consumers=bool(getattr(packet, "purge_on_no_consumers", False)),
            owner_session=session.name if packet.temporary else None,
        )  # fmt: skip
        self._engine.add_queue(queue)
        return null_response(session.connection.version) if packet.requires_response else None

    def _create_shared_queue(
        self, session: Session, packet: CreateSharedQueueMessage | CreateSharedQueueMessage_V2
    ) -> Packet | None:
        existing = self._post_office.queues.get(packet.queue_name)
        wanted = (packet.address, packet.filter_string)
        if existing is not None and (existing.address, existing.filter_string) == wanted:
            return null_response(session.connection.version) if packet.requires_response else None
        # checked whenever the queue is to be created (Artemis: no createAddress check for a shared queue's address)
        self._authorization.check(session, CheckType.create_queue(packet.durable), packet.address, packet.queue_name)
        if existing is not None:
            raise BrokerError(ExceptionType.QUEUE_EXISTS,
                              f"AMQ229019: Queue {packet.queue_name} already exists with another address or filter")
        routing = getattr(packet, "routing_type", None)
        check_filter(packet.filter_string)
        self._engine.add_queue(Queue(packet.queue_name, packet.address,
                                     RoutingType.MULTICAST if routing is None else routing,
                                     durable=packet.durable, filter_string=packet.filter_string))
        return null_response(session.connection.version) if packet.requires_response else None

    def _delete_queue(self, session: Session, packet: SessionDeleteQueueMessage) -> Packet | None:
        queue = self._post_office.queues.get(packet.queue_name)
        if queue is None:
            raise BrokerError(ExceptionType.QUEUE_DOES_NOT_EXIST,
                              f"AMQ229017: Queue {packet.queue_name} does not exist")
        self._authorization.check(session, CheckType.delete_queue(queue.durable), queue.address, queue.name)
        if queue.consumers:
            raise BrokerError(ExceptionType.ILLEGAL_STATE, f"queue {packet.queue_name} has consumers")
        self._engine.remove_queue(queue)
        return null_response(session.connection.version)

    def _queue_query(self, session: Session, packet: SessionQueueQueryMessage) -> Packet:
        return self.queue_query_response(session, packet.queue_name)

    def queue_query_response(self, session: Session, name: str) -> Packet:
        queue = self._post_office.queues.get(split_fqqn(name)[1])
        return queue_query_response(session.connection.version, name, queue, self._settings)

    def _binding_query(self, session: Session, packet: SessionBindingQueryMessage) -> Packet:
        address = self._post_office.addresses.get(packet.address)
        names = tuple(address.queues) if address is not None else ()
        if self._cluster is not None:  # as Artemis: remote queues too, by their cluster name (queue name + node ID)
            names += self._cluster.remote_names(packet.address)
        return binding_query_response(session.connection.version, address, names, self._settings)
