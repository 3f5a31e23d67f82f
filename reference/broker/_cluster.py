"""A node's part of a cluster, inside the sans-IO core: the remote bindings it learnt from other nodes,
how a message chooses between local queues and remote bindings, the notifications it emits about its
own bindings and consumers, and the management request a bridge uses to learn a node's current
state (docs/notes/cluster-wire.md §1.7, §2.2-2.3, §3, §4).

The bridges themselves (connections to the other nodes) live in the asyncio layer
(``reference.cluster._bridge``); they feed what they hear into :class:`ClusterState` and forward what
it puts into the store-and-forward queues.

Rules of this module:
* A binding's ID is derived from its name (:func:`stable_id`), so it is the same after a restart:
  a message waiting in a store-and-forward queue names its target by that ID.
* Names on the wire are Artemis's: ``activemq.notifications``, ``_AMQ_NotifType``,
  ``_AMQ_ROUTE_TO``, ``$.artemis.internal.sf.<cluster>.<node>``; an Artemis reader of these
  messages would recognise them.
"""

from __future__ import annotations

import json
import logging
import struct
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum

from cck.codec import CoreMessage, PropertyType, PropertyValue, TransportConfiguration, TypedProperties

from ._model import Queue, stable_id
from ._selector import compile_selector

__all__ = [
    "BRIDGE_DUP_KEY",
    "MANAGEMENT_ADDRESS",
    "NOTIFICATIONS_ADDRESS",
    "ROUTE_TO_KEY",
    "SF_PREFIX",
    "ClusterRole",
    "ClusterState",
    "LoadBalancing",
    "Notification",
    "RemoteBinding",
    "address_matches",
    "decode_ids",
    "encode_ids",
    "queue_info_request",
    "stable_id",
]

LOG = logging.getLogger("cck.reference.cluster")

NOTIFICATIONS_ADDRESS = "activemq.notifications"
MANAGEMENT_ADDRESS = "activemq.management"
SF_PREFIX = "$.artemis.internal.sf."
ROUTE_TO_KEY = "_AMQ_ROUTE_TO"
BRIDGE_DUP_KEY = "_AMQ_BRIDGE_DUP"
RESET_KEY = "_AMQ_RESET_QUEUE_DATA"
RESET_COMPLETE_KEY = "_AMQ_RESET_QUEUE_DATA_COMPLETE"
# the management message a bridge sends (Artemis's ManagementHelper property names)
RESOURCE_KEY = "_AMQ_ResourceName"
OPERATION_KEY = "_AMQ_OperationName"
QUEUE_INFO_OPERATION = "sendQueueInfoToQueue"


class LoadBalancing(Enum):
    OFF = "OFF"
    STRICT = "STRICT"
    ON_DEMAND = "ON_DEMAND"
    OFF_WITH_REDISTRIBUTION = "OFF_WITH_REDISTRIBUTION"


def encode_ids(ids: Iterable[int]) -> bytes:
    """``_AMQ_ROUTE_TO`` values: big-endian longs, one after another (as Artemis writes them)."""
    return b"".join(struct.pack(">q", i) for i in ids)


def decode_ids(data: bytes) -> list[int]:
    if len(data) % 8:
        raise ValueError(f"a route of {len(data)} bytes is not a whole number of 8-byte IDs")
    return [struct.unpack_from(">q", data, at)[0] for at in range(0, len(data), 8)]


def address_matches(spec: str, address: str) -> bool:
    """A cluster connection's ``<address>``: empty matches all; a comma list of prefixes, where a
    ``!prefix`` excludes and an exclusion wins over any inclusion."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if any(p.startswith("!") and address.startswith(p[1:]) for p in parts):
        return False
    includes = [p for p in parts if not p.startswith("!")]
    return not includes or any(address.startswith(p) for p in includes)


def internal_address(address: str) -> bool:
    return address.startswith(SF_PREFIX) or address in (NOTIFICATIONS_ADDRESS, MANAGEMENT_ADDRESS)


def queue_info_request(queue: str, address: str) -> CoreMessage:
    """The management message a bridge sends to learn a node's bindings and consumers: they come back
    as notifications into ``queue`` (Artemis's ``sendQueueInfoToQueue``; the body is a TEXT JSON array)."""
    return CoreMessage(
        body=CoreMessage.text_body(json.dumps([queue, address])),
        address=MANAGEMENT_ADDRESS,
        type=3,  # TEXT
        properties=TypedProperties.typed(
            (RESOURCE_KEY, PropertyType.STRING, "broker"),
            (OPERATION_KEY, PropertyType.STRING, QUEUE_INFO_OPERATION),
        ),
    )


@dataclass(frozen=True)
class ClusterRole:
    """What the core needs of its ``<cluster-connection>``."""

    name: str
    node_id: str
    connector: TransportConfiguration | None
    load_balancing: LoadBalancing = LoadBalancing.ON_DEMAND
    max_hops: int = 1
    address: str = ""
    user: str = "ACTIVEMQ.CLUSTER.ADMIN.USER"
    password: str = "CHANGE ME!!"  # noqa: S105 - Artemis's default, which the broker warns about
    id_cache_size: int = 20000
    #: the ``<scale-down><group-name>`` this node advertises in its topology
    scale_down_group: str | None = None
    #: an address's ``redistribution-delay`` in ms (-1: never)
    redistribution_delay: Callable[[str], int] = lambda _address: -1

    @property
    def redistributes(self) -> bool:
        return self.load_balancing in (LoadBalancing.ON_DEMAND, LoadBalancing.OFF_WITH_REDISTRIBUTION)

    def sf_queue(self, node_id: str) -> str:
        return f"{SF_PREFIX}{self.name}.{node_id}"


@dataclass(eq=False)
class RemoteBinding:
    """A queue on another node (``distance`` hops away) that this node may route to through the bridge
    to ``via``: the message goes into that bridge's store-and-forward queue, tagged with ``remote_id``."""

    binding_id: int
    via: str
    remote_id: int
    address: str
    routing_name: str
    cluster_name: str
    distance: int
    filter_string: str | None = None
    consumers: int = 0
    connected: bool = True
    #: one entry per remote consumer: its filter (``None``: it takes everything)
    consumer_filters: list[str | None] = field(default_factory=list)


@dataclass(frozen=True)
class Notification:
    """One notification message's content (the properties a bridge reads)."""

    kind: str  # BINDING_ADDED, BINDING_REMOVED, CONSUMER_CREATED, CONSUMER_CLOSED
    address: str
    routing_name: str
    cluster_name: str
    distance: int
    binding_id: int = 0
    filter_string: str | None = None
    consumer_count: int = 0

    def message(self, message_id: int, first: bool = False, last: bool = False) -> CoreMessage:
        entries: list[tuple[str, PropertyType, PropertyValue]] = [
            ("_AMQ_NotifType", PropertyType.STRING, self.kind),
            ("_AMQ_Address", PropertyType.STRING, self.address),
            ("_AMQ_RoutingName", PropertyType.STRING, self.routing_name),
            ("_AMQ_ClusterName", PropertyType.STRING, self.cluster_name),
            ("_AMQ_Distance", PropertyType.INT, self.distance),
            ("_AMQ_Binding_ID", PropertyType.LONG, self.binding_id),
            ("_AMQ_ConsumerCount", PropertyType.INT, self.consumer_count),
            ("_AMQ_Binding_Type", PropertyType.INT, 0),
        ]
        if self.filter_string is not None:
            entries.append(("_AMQ_FilterString", PropertyType.STRING, self.filter_string))
        if first:
            entries.append((RESET_KEY, PropertyType.BOOLEAN, True))
        if last:
            entries.append((RESET_COMPLETE_KEY, PropertyType.BOOLEAN, True))
        return CoreMessage(message_id=message_id, address=NOTIFICATIONS_ADDRESS,
                           properties=TypedProperties.typed(*entries))

    @classmethod
    def read(cls, properties: Mapping[str, PropertyValue]) -> Notification | None:
        """The notification in a message's properties; ``None`` for a bare reset/complete marker."""
        kind = properties.get("_AMQ_NotifType")
        if not isinstance(kind, str):
            return None
        filter_string = properties.get("_AMQ_FilterString")

        def text(key: str) -> str:
            value = properties.get(key)
            if not isinstance(value, str):
                raise ValueError(f"notification {kind} without the string property {key}")
            return value

        def number(key: str) -> int:
            value = properties.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"notification {kind}: {key} is not a number ({value!r})")
            return value

        return cls(kind, text("_AMQ_Address"), text("_AMQ_RoutingName"), text("_AMQ_ClusterName"),
                   number("_AMQ_Distance"), number("_AMQ_Binding_ID"),
                   filter_string if isinstance(filter_string, str) else None, number("_AMQ_ConsumerCount"))


#: the local queues chosen, and per store-and-forward queue the remote binding IDs to reach through it
Routes = tuple[list[Queue], dict[str, list[int]]]


@dataclass
class _Group:
    """The bindings of one routing name on one address, with its round-robin position."""

    position: int = 0


@dataclass
class ClusterState:
    """Remote bindings, the choice between bindings, and the duplicate-ID cache of bridged messages."""

    role: ClusterRole
    remote: dict[int, RemoteBinding] = field(default_factory=dict)
    members: dict[str, TransportConfiguration | None] = field(default_factory=dict)
    _positions: dict[tuple[str, str], _Group] = field(default_factory=dict)
    _seen: OrderedDict[bytes, int] = field(default_factory=OrderedDict)  # duplicate ID -> its journal record

    def __post_init__(self) -> None:
        self.members.setdefault(self.role.node_id, self.role.connector)

    # ------------------------------------------------------------------ what the bridges learn

    def remote_on(self, address: str) -> list[RemoteBinding]:
        return [b for b in self.remote.values() if b.address == address]

    def wanted(self, via: str, note: Notification) -> bool:
        """The notifications a bridge's filter would let through (Artemis filters on the remote node)."""
        return (note.distance < self.role.max_hops and not note.cluster_name.endswith(self.role.node_id)
                and not internal_address(note.address) and address_matches(self.role.address, note.address)
                and via != self.role.node_id)

    def reset(self, via: str) -> list[RemoteBinding]:
        """Forget what came through ``via`` (its bridge reconnected and sends everything again)."""
        gone = [b for b in self.remote.values() if b.via == via]
        for binding in gone:
            del self.remote[binding.binding_id]
        return gone

    @staticmethod
    def key_of(via: str, cluster_name: str) -> int:
        """The ID of the remote binding for ``cluster_name`` learnt through the bridge to ``via``."""
        return stable_id(f"remote:{via}:{cluster_name}")

    def apply(self, via: str, note: Notification) -> RemoteBinding | None:
        """A notification heard through the bridge to ``via``; returns the remote binding it changed."""
        if not self.wanted(via, note):
            return None
        key = self.key_of(via, note.cluster_name)
        binding = self.remote.get(key)
        if note.kind == "BINDING_ADDED":
            if binding is None:
                binding = RemoteBinding(key, via, note.binding_id, note.address, note.routing_name,
                                        note.cluster_name, note.distance + 1, note.filter_string)
                self.remote[key] = binding
            return binding
        if binding is None:
            return None
        if note.kind == "BINDING_REMOVED":
            del self.remote[key]
        elif note.kind == "CONSUMER_CREATED":
            binding.consumers += 1
            binding.consumer_filters.append(note.filter_string)
        elif note.kind == "CONSUMER_CLOSED":
            binding.consumers = max(0, binding.consumers - 1)
            if note.filter_string in binding.consumer_filters:
                binding.consumer_filters.remove(note.filter_string)
        return binding

    def consuming(self, queue: Queue) -> list[RemoteBinding]:
        """The connected remote queues of ``queue``'s name with consumers: where redistribution may send."""
        return [b for b in self.remote_on(queue.address) if b.routing_name == queue.name and b.connected
                and b.consumers > 0]

    def takes(self, binding: RemoteBinding, message: CoreMessage) -> bool:
        """Whether the remote queue's filter and one of its consumers' filters select the message."""
        lb = self.role.load_balancing
        return (binding.filter_string is None or compile_selector(binding.filter_string)(message)) \
            and self._high_priority(binding, lb if lb != LoadBalancing.OFF else LoadBalancing.ON_DEMAND, message)

    def connected(self, via: str, up: bool) -> None:
        for binding in self.remote.values():
            if binding.via == via:
                binding.connected = up

    # ------------------------------------------------------------------ routing

    def choose(self, address: str, message: CoreMessage, local: list[Queue]) -> Routes:
        """One binding per routing name (notes §4): the local queues chosen, and per store-and-forward
        queue the remote IDs the message must reach through it."""
        lb = self.role.load_balancing
        groups: dict[str, list[Queue | RemoteBinding]] = {}
        for queue in local:
            groups.setdefault(queue.name, []).append(queue)
        for binding in self.remote_on(address):
            groups.setdefault(binding.routing_name, []).append(binding)
        chosen_local: list[Queue] = []
        forwards: dict[str, list[int]] = {}
        for name, group in groups.items():
            pick = self._next(self._positions.setdefault((address, name), _Group()), group, lb, message)
            if isinstance(pick, Queue):
                chosen_local.append(pick)
            elif pick is not None:
                forwards.setdefault(self.role.sf_queue(pick.via), []).append(pick.remote_id)
        return chosen_local, forwards

    @staticmethod
    def _matches(binding: Queue | RemoteBinding, lb: LoadBalancing, message: CoreMessage) -> bool:
        if isinstance(binding, Queue):
            return True
        if lb in (LoadBalancing.OFF, LoadBalancing.OFF_WITH_REDISTRIBUTION):
            # as documented (and as Artemis up to 2.28): OFF never forwards.  Artemis 2.29+ (ARTEMIS-4196)
            # lets MULTICAST-typed messages reach remote queues; docs/conformance-results.md records it
            return False
        return binding.filter_string is None or compile_selector(binding.filter_string)(message)

    @staticmethod
    def _high_priority(binding: Queue | RemoteBinding, lb: LoadBalancing, message: CoreMessage) -> bool:
        """Whether a consumer there would take the message (its filter, if any, selects it)."""
        if isinstance(binding, Queue):
            return any(not c.browse_only and c.accepts(message) for c in binding.consumers)
        if binding.consumers <= 0 or lb == LoadBalancing.OFF:
            return False
        return not binding.consumer_filters or any(f is None or compile_selector(f)(message)
                                                   for f in binding.consumer_filters)

    def _next(self, state: _Group, group: list[Queue | RemoteBinding], lb: LoadBalancing,
              message: CoreMessage) -> Queue | RemoteBinding | None:
        size = len(group)
        fallback: Queue | RemoteBinding | None = None
        for step in range(size):
            index = (state.position + step) % size
            binding = group[index]
            if not self._matches(binding, lb, message):
                continue
            connected = isinstance(binding, Queue) or binding.connected
            if size == 1 or (connected and (lb == LoadBalancing.STRICT or self._high_priority(binding, lb, message))):
                state.position = (index + 1) % size
                return binding
            if fallback is None or (lb == LoadBalancing.ON_DEMAND and isinstance(binding, Queue)
                                    and not isinstance(fallback, Queue)):
                fallback = binding
        return fallback

    def route_to(self, ids: Iterable[int], queues_by_id: Mapping[int, Queue]) -> Routes:
        """A bridged message names its targets by ID: local queues, or remote bindings one hop further."""
        local: list[Queue] = []
        forwards: dict[str, list[int]] = {}
        for binding_id in ids:
            queue = queues_by_id.get(binding_id)
            if queue is not None:
                local.append(queue)
                continue
            remote = self.remote.get(binding_id)
            if remote is None:
                LOG.warning("bridged message for an unknown binding; dropped for it", extra={"binding": binding_id})
                continue
            forwards.setdefault(self.role.sf_queue(remote.via), []).append(remote.remote_id)
        return local, forwards

    def seen(self, dup_id: bytes) -> bool:
        """Whether a bridged message with this ``_AMQ_BRIDGE_DUP`` was routed already."""
        return dup_id in self._seen

    def remember(self, dup_id: bytes, record: int = 0) -> list[int]:
        """Keep a duplicate ID (``record``: its journal record, 0 when not stored); returns the records of the
        IDs the cache (id-cache-size) evicted, oldest first."""
        self._seen[dup_id] = record
        evicted: list[int] = []
        while len(self._seen) > max(1, self.role.id_cache_size):
            evicted.append(self._seen.popitem(last=False)[1])
        return evicted

    def duplicate(self, dup_id: bytes) -> bool:
        """Whether a bridged message was seen already; remembers it (unstored) if not."""
        if self.seen(dup_id):
            return True
        self.remember(dup_id)
        return False

    # ------------------------------------------------------------------ what this node tells the others

    def notes_for_queue(self, queue: Queue, kind: str, consumer_filter: str | None = None) -> Iterator[Notification]:
        """A change of a local queue; a consumer's notification carries the consumer's filter, a binding's the
        queue's."""
        if self._announced(queue):
            filter_string = consumer_filter if kind.startswith("CONSUMER") else queue.filter_string
            yield Notification(kind, queue.address, queue.name, queue.name + self.role.node_id, 0, queue.binding_id,
                               filter_string, len(queue.consumers))

    def notes_for_remote(self, binding: RemoteBinding, kind: str,
                         consumer_filter: str | None = None) -> Notification:
        filter_string = consumer_filter if kind.startswith("CONSUMER") else binding.filter_string
        return Notification(kind, binding.address, binding.routing_name, binding.cluster_name, binding.distance,
                            binding.binding_id, filter_string, binding.consumers)

    def snapshot(self, queues: Iterable[Queue]) -> list[Notification]:
        """Everything a new bridge must hear: every binding, then one CONSUMER_CREATED per consumer."""
        added: list[Notification] = []
        consumers: list[Notification] = []
        for queue in queues:
            for note in self.notes_for_queue(queue, "BINDING_ADDED"):
                added.append(note)
                consumers.extend(Notification("CONSUMER_CREATED", note.address, note.routing_name, note.cluster_name,
                                              0, note.binding_id, c.filter_string)
                                 for c in queue.consumers if not c.browse_only)
        for binding in self.remote.values():
            added.append(self.notes_for_remote(binding, "BINDING_ADDED"))
            consumers.extend(self.notes_for_remote(binding, "CONSUMER_CREATED", f) for f in binding.consumer_filters)
        return added + consumers

    @staticmethod
    def _announced(queue: Queue) -> bool:
        return not queue.temporary and not internal_address(queue.address)
