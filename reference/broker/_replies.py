"""Replies whose layout depends on the client's protocol version (notes §5.2): pure functions of
what is answered and the version the connection speaks (0: not known yet, answered as the newest)."""

from __future__ import annotations

from typing import Any

from cck.codec import (
    NullResponseMessage,
    Packet,
    RoutingType,
    SessionBindingQueryResponseMessage,
    SessionBindingQueryResponseMessage_V2,
    SessionBindingQueryResponseMessage_V3,
    SessionBindingQueryResponseMessage_V4,
    SessionBindingQueryResponseMessage_V5,
    SessionQueueQueryResponseMessage,
    SessionQueueQueryResponseMessage_V2,
    SessionQueueQueryResponseMessage_V3,
)

from ._model import Address, Queue, split_fqqn
from ._settings import BrokerSettings

__all__ = ["binding_query_response", "null_response", "queue_query_response"]


def null_response(version: int, correlation: int | None = -1) -> NullResponseMessage:
    """NULL_RESP; from version 130 on it carries the request's correlation ID."""
    return NullResponseMessage(-1 if correlation is None else correlation) if version == 0 or version >= 130 \
        else NullResponseMessage(None)


def queue_query_response(version: int, name: str, queue: Queue | None, settings: BrokerSettings) -> Packet:
    """SESS_QUEUEQUERY_RESP for ``name`` (plain or ``address::queue``); ``queue``: the queue found, if any."""
    address_part, queue_name = split_fqqn(name)
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
    if version == 0 or version >= 129:
        extra: dict[str, Any] = {"auto_create_queues": settings.auto_create_queues, "routing_type": routing}
        if queue is not None:
            extra.update(auto_created=queue.auto_created, purge_on_no_consumers=queue.purge_on_no_consumers,
                         max_consumers=queue.max_consumers)
        return SessionQueueQueryResponseMessage_V3(**base, **extra)
    if version >= 126:
        return SessionQueueQueryResponseMessage_V2(**base, auto_create_queues=settings.auto_create_queues)
    return SessionQueueQueryResponseMessage(**base)


def binding_query_response(version: int, address: Address | None, names: tuple[str, ...],
                           settings: BrokerSettings) -> Packet:
    """SESS_BINDINGQUERY_RESP: whether the address exists and the names of its queues."""
    common: dict[str, Any] = {"exists": address is not None, "queue_names": names}
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
