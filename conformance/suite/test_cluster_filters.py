"""Queue filters across a cluster (Artemis user manual, address-model "Queue Filter"; spec 002 "Server-Side
Message Load Balancing").

A queue's filter decides what may enter it, wherever the message was sent: a node that forwards to a peer's
queue must apply that queue's filter as it would its own.  Three nodes under STRICT load balancing (every
message is round robin'd between the queues of its name, consumers or not), a queue of one name on each,
some of them filtered ``color='red'``; numbered messages alternating red and blue are sent to node0 and each
queue is consumed: no blue message may be found on a filtered queue, and every message exactly once.  The
cluster runs the kit's shared three-node STRICT topology (see ``_cluster_kit``); every wait has a deadline.
"""

from __future__ import annotations

from cck.codec import RoutingType
from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.plugin import Settings
from cck.conformance.targets import ClusterSpec, Topology
from cck.reference.client import Consumer

from ._cluster_kit import ARRIVE_S, FORM_S, NODES, QUIET_S, ClusterClients, ClusterPool, N, barrier, flush
from ._kit import run, unique

CASE_S = 90.0
#: even-numbered messages are red, odd-numbered ones blue
FILTER = "color='red'"
STRICT = Topology.cluster_of(3, ClusterSpec(message_load_balancing="STRICT"))

QUEUE_FILTER = tuple(
    Case(f"cluster.queue-filter.{i}", "cluster.queue-filter",
         f"STRICT, 3 nodes, an anycast queue of one name on every node, the queue on {' and '.join(filtered)} with "
         f"filter {FILTER}; {N} durable messages alternating color='red' and color='blue' sent to node0; then every "
         "queue is consumed",
         f"a forwarding node applies the remote queue's filter: no blue message is found on "
         f"{' or '.join(filtered)}; each of the {N} messages is found exactly once",
         needs=("config",), params={"filtered": filtered})
    for i, filtered in enumerate((("node1",), ("node1", "node2")), start=1)
)


def _color(i: int) -> dict[str, str | int | bool]:
    return {"color": "red" if i % 2 == 0 else "blue"}


@cases(*QUEUE_FILTER)
def test_remote_queue_filter(case: Case, clusters: ClusterPool, cck_settings: Settings,
                             evidence: CaseEvidence) -> None:
    filtered: tuple[str, ...] = case.params["filtered"]
    target = clusters.get(STRICT)
    evidence.note("target", target.describe())
    address = unique(f"cck.{case.id}")

    async def scenario() -> None:
        async with ClusterClients(target, cck_settings) as c:
            for node in NODES:
                await c[node].create_address(address, (RoutingType.ANYCAST,))
                await c[node].create_queue(address, address, routing_type=RoutingType.ANYCAST, durable=True,
                                           filter_string=FILTER if node in filtered else None)
            await barrier(c, "node0", ("node1", "node2"), FORM_S)  # node0 knows both remote queues and filters
            await c.send("node0", address, N, props=_color)
            consumers: list[tuple[str, Consumer]] = [(n, await c[n].create_consumer(address)) for n in NODES]
            placement = await c.collect(consumers, N, ARRIVE_S)
            for node in ("node1", "node2"):
                # anything forwarded there before the flush has arrived by now
                evidence.note(f"flushed_{node}", await flush(c, "node0", node, FORM_S))
            extra = await c.collect(consumers, 1, QUIET_S)
            for node, indexes in extra.found.items():
                placement.found[node] += indexes
            evidence.note("placement", placement.found)
            problems: list[str] = []
            for node in filtered:
                blue = sorted(i for i in placement.found[node] if i % 2)
                if blue:
                    problems.append(f"blue message(s) {blue} reached {node}, whose queue's filter is {FILTER}")
            found = [i for indexes in placement.found.values() for i in indexes]
            twice = sorted({i for i in found if found.count(i) > 1})
            if twice:
                problems.append(f"messages found twice: {twice}")
            missing = sorted(set(range(N)) - set(found))
            if missing:
                problems.append(f"messages not found on any node: {missing}")
            assert not problems, " | ".join(problems) + f" (found: {placement.describe()})"

    run(cck_settings, scenario(), CASE_S)
