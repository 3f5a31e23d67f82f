"""Where the cluster meets the delivery engine: routing through remote bindings, bridged messages,
notifications out, what the bridges heard in, redistribution, and the management request for a
node's state.

Everything here runs inside the sans-IO core; the asyncio bridges call :meth:`ClusterHooks.node_up`,
:meth:`ClusterHooks.node_down` and :meth:`ClusterHooks.heard`, then let the transport flush.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from cck.codec import (
    CoreMessage,
    ExceptionType,
    PropertyType,
    PropertyValue,
    RoutingType,
    TransportConfiguration,
    TypedProperties,
)

from ._cluster import (
    BRIDGE_DUP_KEY,
    NOTIFICATIONS_ADDRESS,
    OPERATION_KEY,
    QUEUE_INFO_OPERATION,
    RESET_COMPLETE_KEY,
    RESET_KEY,
    ROUTE_TO_KEY,
    ClusterRole,
    ClusterState,
    Notification,
    decode_ids,
    encode_ids,
    internal_address,
)
from ._errors import BrokerError
from ._model import PostOffice, Queue
from ._storage import Storage
from ._time import CoreTime

if TYPE_CHECKING:
    from ._engine import DeliveryEngine
    from ._session import Session

#: told when a node joins the cluster (the core tells the clients that subscribed to the topology)
MemberJoined = Callable[[str, TransportConfiguration | None], None]

__all__ = ["ClusterHooks", "bridge_dup_id", "forwardable"]

LOG = logging.getLogger("cck.reference.cluster")


def bridge_dup_id(node_id: str, message_id: int) -> bytes:
    """``_AMQ_BRIDGE_DUP``: the sending node's 16-byte UUID and the message's ID (8 bytes)."""
    try:
        node = uuid.UUID(node_id).bytes
    except ValueError:
        node = node_id.encode()
    return node + message_id.to_bytes(8, "big", signed=True)


def forwardable(message: CoreMessage, sf_queue: str, node_id: str) -> CoreMessage | None:
    """The copy a bridge sends for a message taken from its store-and-forward queue: the route for
    this bridge becomes ``_AMQ_ROUTE_TO``, every other route key goes, and the duplicate ID is set.
    ``None`` when the message carries no route for this bridge."""
    route = message.properties.get(ROUTE_TO_KEY + sf_queue)
    if not isinstance(route, bytes):
        return None
    kept = tuple(e for e in message.properties.entries
                 if not e.key.startswith(ROUTE_TO_KEY) and e.key != BRIDGE_DUP_KEY)
    properties = TypedProperties(kept).with_value(ROUTE_TO_KEY, route, PropertyType.BYTES)
    properties = properties.with_value(BRIDGE_DUP_KEY, bridge_dup_id(node_id, message.message_id), PropertyType.BYTES)
    return dataclasses.replace(message, message_id=0, properties=properties)


class ClusterHooks:
    """The cluster's side of routing and delivery.  ``engine`` enqueues and delivers what the cluster
    decides; ``post_office`` is read for queues and message IDs (the engine owns it)."""

    def __init__(self, role: ClusterRole, *, engine: DeliveryEngine, post_office: PostOffice, storage: Storage,
                 time: CoreTime, member_joined: MemberJoined) -> None:
        self._engine = engine
        self._post_office = post_office
        self._storage = storage
        self._time = time
        self._member_joined = member_joined
        #: who bridges to a node a cluster member announced (the server's cluster connection; none in memory)
        self._bridge_to: MemberJoined = lambda _node, _connector: None
        self.state = ClusterState(role)
        self._due: dict[str, int] = {}  # queue -> when its redistributor starts (monotonic ms)
        self._redistributing: set[str] = set()
        self._turn = 0

    @property
    def role(self) -> ClusterRole:
        return self.state.role

    def members(self) -> list[tuple[str, TransportConfiguration | None]]:
        """The cluster's nodes with their connectors, this node first (as the topology lists them)."""
        own = self.role.node_id
        return [(own, self.role.connector), *((n, c) for n, c in self.state.members.items() if n != own)]

    # ------------------------------------------------------------------ routing

    def resolve(self, message: CoreMessage, address: str) -> tuple[CoreMessage, list[Queue]]:
        """The message to store (with its store-and-forward routes) and the queues that get it."""
        post_office = self._post_office
        route = message.properties.get(ROUTE_TO_KEY) if message.properties else None
        if isinstance(route, bytes):
            try:
                ids = decode_ids(route)
            except ValueError as exc:
                raise BrokerError(ExceptionType.ILLEGAL_STATE,
                                  f"{ROUTE_TO_KEY}: {exc}") from exc
            local, forwards = self.state.route_to(ids, post_office.queues_by_id)
            message = _without(message, ROUTE_TO_KEY)
        elif self.state.remote_on(address):
            local, forwards = self.state.choose(address, message, post_office.candidates(message, address))
        else:
            return message, post_office.route(message, address)
        queues = list(local)
        properties = message.properties
        for sf_name, ids in forwards.items():
            sf_queue = post_office.queues.get(sf_name)
            if sf_queue is None:  # the bridge was never up since the start: its queue comes with it
                LOG.warning("no store-and-forward queue for a chosen remote binding", extra={"queue": sf_name})
                continue
            properties = properties.with_value(ROUTE_TO_KEY + sf_name, encode_ids(ids), PropertyType.BYTES)
            queues.append(sf_queue)
        if properties is not message.properties:
            message = _replace_properties(message, properties)
        return message, queues

    def duplicate(self, message: CoreMessage) -> bool:
        """Whether a bridged message was routed already (then it is dropped); remembers it if not, in the
        journal too when it is durable, so a resend after a crash of this node is still recognised."""
        dup = message.properties.get(BRIDGE_DUP_KEY) if message.properties else None
        if not isinstance(dup, bytes):
            return False
        if self.state.seen(dup):
            LOG.info("a bridge resent a message already routed; dropped", extra={"dup_id": dup.hex()})
            return True
        storage = self._storage
        record = storage.duplicate_id_added(dup) if message.durable else 0
        for evicted in self.state.remember(dup, record):
            storage.duplicate_id_removed(evicted)
        return False

    def restore_duplicates(self, stored: list[tuple[int, bytes]]) -> None:
        """The duplicate IDs the journal kept (oldest first), back in the cache after a restart."""
        storage = self._storage
        for record, dup in stored:
            for evicted in self.state.remember(dup, record):
                storage.duplicate_id_removed(evicted)

    def remote_names(self, address: str) -> tuple[str, ...]:
        """The remote queues of an address by their cluster name (queue name + node ID), as a binding
        query lists them."""
        return tuple(b.cluster_name for b in self.state.remote_on(address))

    # ------------------------------------------------------------------ notifications out

    def queue_changed(self, queue: Queue, kind: str, consumer_filter: str | None = None) -> None:
        self._emit(self.state.notes_for_queue(queue, kind, consumer_filter))
        if kind in ("CONSUMER_CREATED", "CONSUMER_CLOSED"):
            self._consumers_changed(queue)
        elif kind == "BINDING_REMOVED":
            self._due.pop(queue.name, None)
            self._redistributing.discard(queue.name)

    # ------------------------------------------------------------------ redistribution (notes §5.1)

    def _consumers_changed(self, queue: Queue) -> None:
        """A local consumer cancels the queue's redistributor; the last one leaving (or a remote consumer
        appearing) starts one after the address's redistribution-delay."""
        if any(not c.browse_only for c in queue.consumers):
            self._due.pop(queue.name, None)
            self._redistributing.discard(queue.name)
            return
        delay = self.role.redistribution_delay(queue.address)
        if (not self.role.redistributes or delay < 0 or queue.temporary or internal_address(queue.address)
                or queue.name in self._due or queue.name in self._redistributing):
            return
        now_ms = self._time.ms
        self._due[queue.name] = now_ms + delay
        if delay == 0:
            self.tick(now_ms)

    def next_deadline(self) -> int | None:
        """When the next redistributor starts (monotonic ms), if one is waiting."""
        return min(self._due.values(), default=None)

    def tick(self, now_ms: int) -> None:
        for name, at in list(self._due.items()):
            if at <= now_ms:
                del self._due[name]
                queue = self._post_office.queues.get(name)
                if queue is not None:
                    self._redistributing.add(name)
                    self._engine.wake(queue)

    def redistributing(self, queue: Queue) -> bool:
        return queue.name in self._redistributing

    def redistribute(self, queue: Queue) -> None:
        """Move the queue's waiting messages to remote queues of its name that have consumers, round robin:
        each as a copy with a new message ID (so the receiving side does not take it for a resend), the
        original acknowledged.  Messages of a group stay; with no remote consumer nothing moves."""
        candidates = self.state.consuming(queue)
        if not candidates or not queue.ready:
            return
        post_office = self._post_office
        kept = []
        for ref in list(queue.ready):
            # a message no remote consumer would take stays (Artemis stops redistributing at such a message:
            # a recorded deviation); so do grouped messages
            targets = [b for b in candidates if self.state.takes(b, ref.message)]
            if not targets or ref.message.properties.get("_AMQ_GROUP_ID") is not None:
                kept.append(ref)
                continue
            target = targets[self._turn % len(targets)]
            self._turn += 1
            sf_name = self.role.sf_queue(target.via)
            sf_queue = post_office.queues.get(sf_name)
            if sf_queue is None:
                kept.append(ref)
                continue
            entries = tuple(e for e in ref.message.properties.entries
                            if not e.key.startswith(ROUTE_TO_KEY) and e.key != BRIDGE_DUP_KEY)
            properties = TypedProperties(entries).with_value(ROUTE_TO_KEY + sf_name, encode_ids([target.remote_id]),
                                                             PropertyType.BYTES)
            copy = dataclasses.replace(ref.message, message_id=post_office.next_id(), properties=properties)
            self._engine.enqueue(copy, [sf_queue], None)
            if ref.durable:
                self._storage.ref_acked(ref, None)
        queue.ready.clear()
        queue.ready.extend(kept)

    def _emit(self, notes: Iterable[Notification], into: list[Queue] | None = None) -> None:
        post_office = self._post_office
        if into is None:
            address = post_office.addresses.get(NOTIFICATIONS_ADDRESS)
            into = list(address.queues.values()) if address is not None else []
        if not into:
            return
        for note in notes:
            self._engine.enqueue(note.message(post_office.next_id()), into, None)

    def management(self, session: Session, message: CoreMessage) -> None:
        """A message to ``activemq.management``: only the bridges' state request is implemented."""
        operation = message.properties.get(OPERATION_KEY) if message.properties else None
        if operation != QUEUE_INFO_OPERATION:
            LOG.warning("management operation not implemented; ignored", extra={"operation": operation,
                                                                                  "session": session.name})
            return
        try:
            queue_name, _address = json.loads(message.text or "")
        except (ValueError, TypeError) as exc:
            LOG.warning("malformed sendQueueInfoToQueue request; ignored", extra={"reason": str(exc)})
            return
        post_office = self._post_office
        target = post_office.queues.get(str(queue_name))
        if target is None:
            LOG.warning("sendQueueInfoToQueue for a missing queue; ignored", extra={"queue": queue_name})
            return
        notes = self.state.snapshot(list(post_office.queues.values()))
        if not notes:
            marker = CoreMessage(message_id=post_office.next_id(), address=NOTIFICATIONS_ADDRESS,
                                 properties=TypedProperties.typed((RESET_KEY, PropertyType.BOOLEAN, True),
                                                                  (RESET_COMPLETE_KEY, PropertyType.BOOLEAN, True)))
            self._engine.enqueue(marker, [target], None)
            return
        for index, note in enumerate(notes):
            self._engine.enqueue(note.message(post_office.next_id(), first=index == 0, last=index == len(notes) - 1),
                                  [target], None)

    # ------------------------------------------------------------------ what the bridges report

    def node_up(self, node_id: str, connector: TransportConfiguration | None) -> None:
        """A bridge reached ``node_id``: its store-and-forward queue exists from now on (durable, so
        what waits in it survives a restart), its bindings count as connected, clients hear of it."""
        sf_name = self.role.sf_queue(node_id)
        if sf_name not in self._post_office.queues:
            self._engine.add_queue(Queue(sf_name, sf_name, RoutingType.MULTICAST, durable=True))
        self.state.connected(node_id, True)
        known = node_id in self.state.members
        self.state.members[node_id] = connector
        if not known:
            self._member_joined(node_id, connector)
        self._engine.wake(self._post_office.queues[sf_name])

    def bridge_announced_through(self, bridge_to: MemberJoined) -> None:
        """Who is asked to bridge to a node a cluster member announced (the cluster connection, which is made
        after the core)."""
        self._bridge_to = bridge_to

    def node_announced(self, node_id: str, connector: TransportConfiguration) -> None:
        """A peer logged in with the cluster credentials announced a live node: it is a member clients hear of,
        and the cluster connection bridges to it (Artemis's cluster connection bridges to every live node of its
        topology).  A node already known, or this one, changes nothing."""
        if node_id == self.role.node_id or node_id in self.state.members:
            return
        self.state.members[node_id] = connector
        self._member_joined(node_id, connector)
        self._bridge_to(node_id, connector)

    def node_down(self, node_id: str) -> None:
        self.state.connected(node_id, False)

    def node_left(self, node_id: str) -> None:
        """The node stopped (it said DISCONNECT): its queues are no longer choices; what waits for it in its
        store-and-forward queue stays there for when it comes back."""
        for binding in self.state.reset(node_id):
            self._emit([self.state.notes_for_remote(binding, "BINDING_REMOVED")])

    def heard(self, via: str, properties: Mapping[str, PropertyValue]) -> None:
        """A notification message from the node ``via`` (its bridge's notification consumer)."""
        if properties.get(RESET_KEY) is True:
            for binding in self.state.reset(via):
                self._emit([self.state.notes_for_remote(binding, "BINDING_REMOVED")])
        note = Notification.read(properties)
        if note is None:
            return
        before = self.state.remote.get(self.state.key_of(via, note.cluster_name))
        changed = self.state.apply(via, note)
        if changed is None:
            return
        if note.kind == "BINDING_ADDED" and before is None:
            self._emit([self.state.notes_for_remote(changed, "BINDING_ADDED")])
        elif note.kind == "BINDING_REMOVED":
            self._emit([self.state.notes_for_remote(changed, "BINDING_REMOVED")])
        elif note.kind in ("CONSUMER_CREATED", "CONSUMER_CLOSED"):
            self._emit([self.state.notes_for_remote(changed, note.kind, note.filter_string)])
            local = self._post_office.queues.get(changed.routing_name)
            if note.kind == "CONSUMER_CREATED" and local is not None and local.address == changed.address:
                self._consumers_changed(local)
        # queues whose choice may now differ get another look (ON_DEMAND follows consumers)
        for queue in self._post_office.candidates(CoreMessage(), changed.address):
            self._engine.wake(queue)


def _without(message: CoreMessage, key: str) -> CoreMessage:
    return _replace_properties(message, TypedProperties(tuple(e for e in message.properties.entries if e.key != key)))


def _replace_properties(message: CoreMessage, properties: TypedProperties) -> CoreMessage:
    return dataclasses.replace(message, properties=properties)

