"""A session's requests about addresses, queues and metadata (sans-IO): each writes one packet and returns
the call its answer resolves."""

from __future__ import annotations

from cck.codec import (
    CreateAddressMessage,
    CreateQueueMessage_V2,
    CreateSharedQueueMessage_V2,
    RoutingType,
    SessionAddMetaDataMessageV2,
    SessionBindingQueryMessage,
    SessionDeleteQueueMessage,
    SessionQueueQueryMessage,
)

from ._calls import Call
from ._session_channel import BINDING_QUERY, NULL, QUEUE_QUERY, SessionChannel

__all__ = ["QueueRequests"]


class QueueRequests(SessionChannel):
    """Addresses, queues and metadata."""

    def create_address(self, address: str, routing_types: tuple[RoutingType, ...] = (RoutingType.ANYCAST,),
                       auto_created: bool = False) -> Call:
        return self._call(CreateAddressMessage(address, tuple(int(t) for t in routing_types), True, auto_created),
                          NULL)

    def create_queue(self, address: str, queue: str, *, routing_type: RoutingType = RoutingType.ANYCAST,
                     durable: bool = True, filter_string: str | None = None, temporary: bool = False,
                     auto_created: bool = False, max_consumers: int = -1,
                     purge_on_no_consumers: bool = False) -> Call:
        packet = CreateQueueMessage_V2(address, queue, filter_string, durable, temporary, True, auto_created,
                                       int(routing_type), max_consumers, purge_on_no_consumers)
        return self._call(packet, NULL)

    def create_shared_queue(self, address: str, queue: str, *, routing_type: RoutingType = RoutingType.MULTICAST,
                            durable: bool = True, filter_string: str | None = None) -> Call:
        packet = CreateSharedQueueMessage_V2(address, queue, filter_string, durable, int(routing_type), True)
        return self._call(packet, NULL)

    def delete_queue(self, queue: str) -> Call:
        return self._call(SessionDeleteQueueMessage(queue), NULL)

    def queue_query(self, queue: str) -> Call:
        return self._call(SessionQueueQueryMessage(queue), QUEUE_QUERY)

    def binding_query(self, address: str) -> Call:
        return self._call(SessionBindingQueryMessage(address), BINDING_QUERY)

    def add_metadata(self, key: str, data: str) -> Call:
        return self._call(SessionAddMetaDataMessageV2(key, data, True), NULL)
