"""Addresses, queues and message references: the broker's routing state.

Rules of this module:
* A message is stored once; each queue it is routed to holds a ``MessageRef``.
* A ref is in exactly one place: its queue's ``ready`` deque, a consumer's
  ``delivering`` map, or a transaction's acks (until commit removes it).
* ``delivery_count`` is incremented when a ref is handed to a consumer, so the
  first delivery carries 1 and a redelivery after rollback or close carries 2.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cck.codec import CoreMessage, RoutingType

from ._selector import compile_selector

if TYPE_CHECKING:
    from ._session import Consumer

__all__ = ["ROUTING_TYPE_KEY", "Address", "MessageRef", "PostOffice", "Queue", "split_fqqn", "stable_id"]

#: Message property carrying a routing-type hint (BYTE 0 multicast / 1 anycast).
ROUTING_TYPE_KEY = "_AMQ_ROUTING_TYPE"


def stable_id(name: str) -> int:
    """A positive 63-bit ID from a name: the same on every start, so a route stored in a message
    (a store-and-forward queue's ``_AMQ_ROUTE_TO``) still names the same binding after a restart."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") >> 1


def split_fqqn(name: str) -> tuple[str | None, str]:
    """``address::queue`` → (address, queue); a plain name → (None, name)."""
    if "::" in name:
        address, queue = name.split("::", 1)
        return address, queue
    return None, name


@dataclass(eq=False)
class MessageRef:
    """One queue's hold on a message."""

    message: CoreMessage
    queue: Queue
    delivery_count: int = 0
    record_id: int = 0  # its journal record, when durable

    @property
    def message_id(self) -> int:
        return self.message.message_id

    @property
    def durable(self) -> bool:
        return self.message.durable and self.queue.durable


@dataclass(eq=False)
class Queue:
    name: str
    address: str
    routing_type: int
    durable: bool
    filter_string: str | None = None
    temporary: bool = False
    auto_created: bool = False
    max_consumers: int = -1
    purge_on_no_consumers: bool = False
    ready: deque[MessageRef] = field(default_factory=deque)
    consumers: list[Consumer] = field(default_factory=list)
    next_consumer: int = 0
    owner_session: str | None = None  # temporary queues die with their session
    binding_id: int = 0  # how other nodes of a cluster name it; derived from the name when left 0

    def __post_init__(self) -> None:
        if not self.binding_id:
            self.binding_id = stable_id(f"queue:{self.name}")

    def accepts(self, message: CoreMessage) -> bool:
        """Whether the queue's filter selects the message (no filter selects everything)."""
        return self.filter_string is None or compile_selector(self.filter_string)(message)

    @property
    def message_count(self) -> int:
        return len(self.ready) + sum(len(c.delivering) for c in self.consumers)

    def push_back(self, ref: MessageRef) -> None:
        self.ready.append(ref)

    def return_refs(self, refs: list[MessageRef]) -> None:
        """Put cancelled refs back at the head, keeping their original order."""
        for ref in reversed(refs):
            self.ready.appendleft(ref)


@dataclass(eq=False)
class Address:
    name: str
    routing_types: set[int]
    durable: bool = True
    auto_created: bool = False
    queues: dict[str, Queue] = field(default_factory=dict)
    anycast_turn: int = 0


class PostOffice:
    """Addresses, queues and routing."""

    def __init__(self) -> None:
        self.addresses: dict[str, Address] = {}
        self.queues: dict[str, Queue] = {}
        self.queues_by_id: dict[int, Queue] = {}
        self._next_id = 1

    def next_id(self) -> int:
        allocated, self._next_id = self._next_id, self._next_id + 1
        return allocated

    @property
    def upcoming_id(self) -> int:
        """The ID :meth:`next_id` gives next (a mirroring backup's core continues from it)."""
        return self._next_id

    def restart_ids_after(self, highest: int) -> None:
        self._next_id = highest + 1

    def add_address(
        self, name: str, routing_types: set[int], *, durable: bool = True, auto_created: bool = False
    ) -> Address:
        existing = self.addresses.get(name)
        if existing is not None:
            existing.routing_types |= routing_types
            return existing
        address = Address(name, set(routing_types), durable, auto_created)
        self.addresses[name] = address
        return address

    def add_queue(self, queue: Queue) -> Queue:
        address = self.addresses.get(queue.address)
        if address is None:
            address = self.add_address(queue.address, {queue.routing_type}, durable=queue.durable, auto_created=True)
        address.routing_types.add(queue.routing_type)
        address.queues[queue.name] = queue
        self.queues[queue.name] = queue
        self.queues_by_id[queue.binding_id] = queue
        return queue

    def remove_queue(self, name: str) -> Queue | None:
        queue = self.queues.pop(name, None)
        if queue is not None:
            self.queues_by_id.pop(queue.binding_id, None)
            address = self.addresses.get(queue.address)
            if address is not None:
                address.queues.pop(name, None)
        return queue

    def candidates(self, message: CoreMessage, address_name: str) -> list[Queue]:
        """Every queue of the address the message's routing-type hint allows."""
        address = self.addresses.get(address_name)
        if address is None:
            return []
        hint = message.properties.get(ROUTING_TYPE_KEY) if message.properties else None
        return [q for q in address.queues.values() if (hint is None or q.routing_type == hint) and q.accepts(message)]

    def route(self, message: CoreMessage, address_name: str) -> list[Queue]:
        """The local queues a message sent to ``address_name`` goes to: one anycast queue
        (round robin) and every multicast queue, narrowed by a routing-type hint."""
        address = self.addresses.get(address_name)
        if address is None:
            return []
        hint = message.properties.get(ROUTING_TYPE_KEY) if message.properties else None
        anycast = [q for q in address.queues.values() if q.routing_type == RoutingType.ANYCAST and q.accepts(message)]
        multicast = [q for q in address.queues.values()
                     if q.routing_type == RoutingType.MULTICAST and q.accepts(message)]
        targets: list[Queue] = []
        if anycast and hint != RoutingType.MULTICAST:
            targets.append(anycast[address.anycast_turn % len(anycast)])
            address.anycast_turn += 1
        if hint != RoutingType.ANYCAST:
            targets.extend(multicast)
        return targets
