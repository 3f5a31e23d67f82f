"""What the cluster group's cases run on: one started cluster shared by the cases of a topology, a client
session on every node, indexed sends, collectors that read where each message ended up, and two waits that
make "the cluster knows" observable from outside:

* a **barrier**: a fresh queue is created on each source node and the observing node's binding query is
  polled until it lists all of them, twice over.  A node learns a peer's bindings and consumers from one
  ordered stream of notifications (notes cluster-wire §1.5, §3), except for the snapshot that opens the stream
  when a bridge connects: Artemis writes the queues it knows in the order of a hash map
  (``PostOfficeImpl.queueInfos``), each followed by its consumers, so in a cluster still forming a barrier
  queue can overtake the queues created before it (seen against Artemis 2.44.0: the observer listed the
  barrier queue, then routed the case's first message before it knew the remote consumer).  A second barrier
  queue, created once the first is listed, comes after that whole snapshot; once it is listed every binding
  and consumer change the source made before the barrier is known too;
* a **flush**: a message the sending node must forward to one peer (a MULTICAST-typed message to an
  address whose only queue is on that peer) is sent and received there.  A node forwards to a peer through
  one ordered store-and-forward queue, so anything forwarded before the flush has arrived by then.

Every wait has a deadline; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cck.codec import CoreMessage, PropertyType, RoutingType, TypedProperties
from cck.conformance.plugin import Settings, TargetFactory
from cck.conformance.targets import ManagedTarget, Topology
from cck.conformance.verdicts import NotObserved
from cck.reference.client import Connection, Consumer, Delivery, Session, connect

from ._kit import RESTARTING, client_settings, poll, poll_value, unique

__all__ = [
    "ARRIVE_S",
    "FORM_S",
    "INDEX",
    "N",
    "NODES",
    "QUIET_S",
    "ClusterClients",
    "ClusterPool",
    "Placement",
    "RevivingPool",
    "barrier",
    "flush",
    "listed_on",
    "message",
    "mixed",
    "send_mixed",
    "stop_node",
    "wait_counts",
]

#: how long the cluster may take to form, or a node to learn what another announced (a JVM cluster forms in
#: seconds once started; the first bridges wait a retry-interval)
FORM_S = 30.0
#: how long the messages of a case may take to arrive where they go
ARRIVE_S = 15.0
#: after a flush, how long the kit listens for a message that must not come
QUIET_S = 0.5
#: messages per case (divisible by 2, 3 and 4 so even spreads are exact; even: half red or durable, half not)
N = 12
#: the nodes of the group's three-node clusters
NODES = ("node0", "node1", "node2")
#: the property that numbers the messages of a case, 0..N-1 in sending order
INDEX = "cck_index"
#: Artemis's header for a message's routing type (a BYTE: 0 MULTICAST, 1 ANYCAST)
ROUTING_TYPE_HEADER = "_AMQ_ROUTING_TYPE"
class ClusterPool:
    """The one running cluster of a module: a case asks for a topology and gets the running target when it is
    the same, otherwise the old one is closed and a new one started (one cluster at a time: a 3-node JVM
    cluster is all a small machine runs well).  Start failures are INDETERMINATE, a target that takes no topology
    of the kit's (url; command without apply_config) UNSUPPORTED."""

    def __init__(self, targets: TargetFactory) -> None:
        self.targets = targets
        #: the running cluster's topology and JVM flavour (see ``TargetFactory.flavour``)
        self.flavour: tuple[Topology, bool] | None = None
        self.target: ManagedTarget | None = None
        self.starts = 0

    def get(self, topology: Topology) -> ManagedTarget:
        flavour = self.targets.flavour(topology)
        if self.target is not None and self.flavour == flavour and all(n.is_running for n in self.target.nodes):
            return self.target
        self.close()
        target = self.targets.started(topology)  # UNSUPPORTED on a target that takes no topology of the kit's
        assert isinstance(target, ManagedTarget), target
        self.flavour, self.target = flavour, target
        self.starts += 1
        return target

    def close(self) -> None:
        if self.target is not None:
            self.target.close()
        self.target = self.flavour = None


def message(index: int, *, routing: RoutingType | None = None, **props: str | int | bool) -> CoreMessage:
    """A durable message numbered ``index`` (property ``cck_index``), optionally typed with a routing type."""
    entries: list[tuple[str, PropertyType, str | int | bool]] = [(INDEX, PropertyType.INT, index)]
    if routing is not None:
        entries.append((ROUTING_TYPE_HEADER, PropertyType.BYTE, int(routing)))
    for key, value in props.items():
        kind = (PropertyType.BOOLEAN if isinstance(value, bool) else
                PropertyType.INT if isinstance(value, int) else PropertyType.STRING)  # fmt: skip
        entries.append((key, kind, value))
    return CoreMessage(f"message {index}".encode(), durable=True, properties=TypedProperties.typed(*entries))


def index_of(delivery: Delivery) -> int:
    value = delivery.message.properties.get(INDEX)
    assert isinstance(value, int), f"a message without its {INDEX} property: {delivery.message}"
    return value


@dataclass
class Placement:
    """Where each message of a case was found: node name -> indexes in arrival order."""

    found: dict[str, list[int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.found.values())

    def counts(self) -> dict[str, int]:
        return {node: len(indexes) for node, indexes in self.found.items()}

    def node_of(self) -> dict[int, str]:
        return {i: node for node, indexes in self.found.items() for i in indexes}

    def duplicates(self, *, per_node: bool = False) -> list[int]:
        """Indexes found more than once: anywhere, or (``per_node``) on one node."""
        groups = list(self.found.values()) if per_node else [[i for ix in self.found.values() for i in ix]]
        return sorted({i for every in groups for i in every if every.count(i) > 1})

    def describe(self) -> str:
        return ", ".join(f"{node}: {len(ix)} {sorted(ix)[:12]}{'...' if len(ix) > 12 else ''}"
                         for node, ix in self.found.items())


class ClusterClients:
    """``async with ClusterClients(target, settings) as c:`` one connection and session per node, by name."""

    def __init__(self, target: ManagedTarget, settings: Settings, user: tuple[str, str] | None = None) -> None:
        self.target = target
        self.settings = settings
        self.user = user
        self.connections: dict[str, Connection] = {}
        self.sessions: dict[str, Session] = {}
        self.names = tuple(n.name for n in target.topology.nodes)

    async def __aenter__(self) -> ClusterClients:
        client = client_settings(self.target, RESTARTING, reconnect_attempts=0)
        for spec in self.target.topology.nodes:
            connection = await connect(spec.url, settings=client)
            self.connections[spec.name] = connection
            username, password = self.user or (None, None)
            self.sessions[spec.name] = await connection.create_session(username=username, password=password)
            self.sessions[spec.name].start()
        return self

    async def __aexit__(self, *_: object) -> None:
        for connection in self.connections.values():
            with contextlib.suppress(Exception):
                await connection.close()

    def __getitem__(self, node: str) -> Session:
        return self.sessions[node]

    def deadline(self, seconds: float) -> float:
        return self.settings.deadline(seconds)

    # ------------------------------------------------------------------ queues

    async def queue_on(self, nodes: Iterable[str], address: str, queue: str | None = None, *,
                       routing: RoutingType = RoutingType.ANYCAST, durable: bool = True) -> None:
        """Create the address (of that routing type) and a queue on it on each of ``nodes``."""
        for node in nodes:
            await self[node].create_address(address, (routing,))
            await self[node].create_queue(address, queue or address, routing_type=routing, durable=durable)

    async def address_on(self, nodes: Iterable[str], address: str, routing: RoutingType = RoutingType.ANYCAST) -> None:
        for node in nodes:
            await self[node].create_address(address, (routing,))

    async def count(self, node: str, queue: str) -> int | None:
        """The queue's message count on ``node`` (``None``: no such queue there)."""
        answer = await self[node].queue_query(queue)
        return int(answer.message_count) if answer.exists else None

    async def wait_count(self, node: str, queue: str, expected: int, seconds: float) -> int | None:
        """Poll the queue's message count on ``node`` until it is ``expected``; the last count seen either way."""
        seen = await poll_value(lambda: self.count(node, queue), lambda n: n == expected, self.deadline(seconds))
        return seen[-1]

    # ------------------------------------------------------------------ sending and collecting

    async def send(self, node: str, address: str, count: int, *, first: int = 0, routing: RoutingType | None = None,
                   props: Callable[[int], dict[str, str | int | bool]] | None = None) -> None:
        """Send ``count`` durable messages numbered ``first..`` to ``address`` through ``node`` (each confirmed)."""
        producer = self[node].create_producer(address)
        for i in range(first, first + count):
            await producer.send(message(i, routing=routing, **(props(i) if props else {})))
        producer.close()

    async def consumers(self, queue: str, nodes: Iterable[str], *, filter_string: str | None = None,
                        ) -> dict[str, Consumer]:
        return {node: await self[node].create_consumer(queue, filter_string=filter_string) for node in nodes}

    async def collect(self, consumers: Sequence[tuple[str, Consumer]], expected: int, seconds: float) -> Placement:
        """Receive from every ``(node, consumer)`` at once until ``expected`` messages arrived in all (or the
        deadline): where each one was found, by its index.  Deliveries are acknowledged."""
        placement = Placement({node: [] for node, _ in consumers})
        if expected <= 0:
            return placement
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        end = loop.time() + self.deadline(seconds)

        async def drain(node: str, consumer: Consumer) -> None:
            while not done.is_set():
                remaining = end - loop.time()
                if remaining <= 0:
                    return
                delivery = await consumer.receive(min(remaining, 0.25))
                if delivery is None:
                    continue
                placement.found[node].append(index_of(delivery))
                await consumer.acknowledge(delivery)
                if placement.total >= expected:
                    done.set()

        await asyncio.gather(*(drain(node, c) for node, c in consumers))
        return placement

    async def drain(self, queue: str, nodes: Iterable[str], expected: int, seconds: float) -> Placement:
        """Consume ``queue`` on each of ``nodes`` that has it until ``expected`` messages were found."""
        chosen = [n for n in nodes if await self.count(n, queue) is not None]
        consumers = await self.consumers(queue, chosen)
        try:
            return await self.collect(list(consumers.items()), expected, seconds)
        finally:
            for consumer in consumers.values():
                with contextlib.suppress(Exception):
                    await consumer.close()


async def binding_names(session: Session, address: str) -> list[str]:
    """The queue names a node's binding query lists for ``address`` (its own queues and, on Artemis, the remote
    ones).  Asked through the session core because ``Session.binding_query`` expects the V5 answer and Artemis
    2.28.0 (protocol 134) answers SESS_BINDINGQUERY_RESP_V4; both carry ``queue_names``."""
    answer = await session._call(session.core.binding_query(address))
    names = getattr(answer, "queue_names", None)
    assert isinstance(names, tuple), f"a binding query of {address} was answered with {answer!r}"
    return [str(n) for n in names]


async def barrier(clients: ClusterClients, observer: str, sources: Sequence[str], seconds: float) -> None:
    """Wait until ``observer`` has processed everything ``sources`` announced so far (see the module doc):
    a fresh queue on each source, polled for in the observer's binding query; then a second one (the first may
    have reached the observer inside a bridge's opening snapshot, ahead of queues created before it)."""
    for _ in range(2):  # each wait has the whole deadline: the second one is quick once the cluster has formed
        address = unique("cck.cluster.barrier")
        await clients.queue_on(sources, address, durable=False)
        await listed_on(clients, observer, address, len(sources), seconds,
                        f"the queues {', '.join(sources)} created (the cluster has not formed, or the broker does "
                        "not list remote bindings in its binding query)")


async def listed_on(clients: ClusterClients, observer: str, address: str, count: int, seconds: float,
                    what: str = "") -> None:
    """Wait until ``observer``'s binding query of ``address`` lists at least ``count`` queues."""
    seen: list[str] = []

    async def listed() -> bool:
        seen[:] = await binding_names(clients[observer], address)
        return len(seen) >= count

    await poll(listed, clients.deadline(seconds),
               lambda: f"{observer} lists {seen} on {address}, not {count} queue(s){': ' + what if what else ''}")


async def flush(clients: ClusterClients, sender: str, receiver: str, seconds: float, *, required: bool = True) -> bool:
    """Send one MULTICAST-typed message through ``sender`` that only ``receiver`` has a queue for, and
    receive it there: whatever ``sender`` forwarded to ``receiver`` before has arrived by then.  True when it
    arrived; when it did not, NotObserved, or False if not ``required`` (a broker that forwards nothing at
    all under message-load-balancing OFF cannot be flushed, and then forwarded nothing before either)."""
    address = unique("cck.cluster.flush")
    await clients.address_on([sender], address, RoutingType.MULTICAST)
    await clients.queue_on([receiver], address, routing=RoutingType.MULTICAST, durable=False)
    await listed_on(clients, sender, address, 1, seconds, f"the flush queue on {receiver}")
    consumer = await clients[receiver].create_consumer(address)
    producer = clients[sender].create_producer(address)
    await producer.send(message(-1, routing=RoutingType.MULTICAST))
    producer.close()
    delivery = await consumer.receive(clients.deadline(seconds))
    await consumer.close()
    if delivery is None and required:
        raise NotObserved(f"the flush message sent through {sender} did not reach {receiver} within {seconds:.0f} s")
    return delivery is not None


# ---------------------------------------------------------------------------------------------------- moves
# What the redistribution and scale-down cases (test_cluster_moves.py) add: a pool that starts a stopped node
# again instead of the whole cluster, messages of either durability, and a node stopped off the event loop.


class RevivingPool(ClusterPool):
    """A :class:`ClusterPool` that, when the running cluster has the topology asked for but some of its nodes
    were stopped (a scale-down case stops one), starts just those nodes again with their data: cheaper than a
    new cluster, and the nodes keep their IDs.  A node that will not start again means a new cluster."""

    revived = 0

    def get(self, topology: Topology) -> ManagedTarget:
        target = self.target
        if target is not None and self.flavour == self.targets.flavour(topology):
            stopped = [n for n in target.nodes if not n.is_running]
            try:
                for node in stopped:
                    node.start()
            except Exception:  # noqa: BLE001 - any start failure: fall back to a fresh cluster below
                self.close()
            else:
                self.revived += len(stopped)
        return super().get(topology)


def mixed(index: int, *, durable: bool, routing: RoutingType | None = None) -> CoreMessage:
    """Message ``index`` as :func:`message` makes it, durable or not."""
    made = message(index, routing=routing)
    return CoreMessage(made.body, durable=durable, properties=made.properties)


async def send_mixed(clients: ClusterClients, node: str, address: str, indexes: Iterable[int],
                     durable: Callable[[int], bool], routing: RoutingType | None = None) -> None:
    """Send the numbered messages ``indexes`` to ``address`` through ``node``, message i durable iff
    ``durable(i)``, in order (one producer)."""
    producer = clients[node].create_producer(address)
    for i in indexes:
        await producer.send(mixed(i, durable=durable(i), routing=routing))
    producer.close()


async def stop_node(target: ManagedTarget, node: str) -> float:
    """Stop ``node`` gracefully (SIGTERM; a node with scale-down moves its messages first) in a worker thread,
    so the event loop keeps reading what the node's clients receive meanwhile; the seconds it took."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    await asyncio.to_thread(target.node(node).stop)
    return loop.time() - began


async def wait_counts(clients: ClusterClients, wanted: Mapping[tuple[str, str], int | None], seconds: float,
                      ) -> dict[tuple[str, str], int | None]:
    """Poll each ``(node, queue)``'s message count until every one is as ``wanted`` (``None``: no such queue) or
    ``seconds`` passed; the last counts seen either way."""

    async def counts() -> dict[tuple[str, str], int | None]:
        return {(node, queue): await clients.count(node, queue) for (node, queue) in wanted}

    seen = await poll_value(counts, lambda now: now == dict(wanted), clients.deadline(seconds))
    return seen[-1]

