"""A session's requests about addresses, queues and metadata (sans-IO): each writes one packet and returns
the call its answer resolves.

Before the address model (version 129, Artemis 2.0.0) there is no CREATE_ADDRESS and no _V2 queue creation:
Artemis's client then sends the version-1 CREATE_QUEUE / CREATE_SHARED_QUEUE (which carry no routing type,
max-consumers or purge flag: the broker's address settings decide those) and skips CREATE_ADDRESS, an address
being nothing but a name its queues are bound to."""

from __future__ import annotations

from cck.codec import (
    ADDRESSING_CHANGE_VERSION,
    CreateAddressMessage,
    CreateQueueMessage,
    CreateQueueMessage_V2,
    CreateSharedQueueMessage,
    CreateSharedQueueMessage_V2,
    NullResponseMessage,
    Packet,
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
        if self._before_addressing():
            done = self.connection.new_call("CREATE_ADDRESS (nothing to send before version 129)", NULL, None,
                                            blocking=False)
            done.resolve(NullResponseMessage())
            return done
        return self._call(CreateAddressMessage(address, tuple(int(t) for t in routing_types), True, auto_created),
                          NULL)

    def create_queue(self, address: str, queue: str, *, routing_type: RoutingType = RoutingType.ANYCAST,
                     durable: bool = True, filter_string: str | None = None, temporary: bool = False,
                     auto_created: bool = False, max_consumers: int = -1,
                     purge_on_no_consumers: bool = False) -> Call:
        packet: Packet
        if self._before_addressing():
            packet = CreateQueueMessage(address, queue, filter_string, durable, temporary, True)
        else:
            packet = CreateQueueMessage_V2(address, queue, filter_string, durable, temporary, True, auto_created,
                                           int(routing_type), max_consumers, purge_on_no_consumers)
        return self._call(packet, NULL)

    def create_shared_queue(self, address: str, queue: str, *, routing_type: RoutingType = RoutingType.MULTICAST,
                            durable: bool = True, filter_string: str | None = None) -> Call:
        packet: Packet
        if self._before_addressing():
            packet = CreateSharedQueueMessage(address, queue, filter_string, durable, True)
        else:
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

    def _before_addressing(self) -> bool:
        """Artemis's ``isVersionBeforeAddressChange``: 1..128 (0, nothing negotiated, counts as new)."""
        return 0 < self.version < ADDRESSING_CHANGE_VERSION
