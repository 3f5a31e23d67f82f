"""Server-side message load balancing in a cluster (spec 002 "Server-Side Message Load Balancing", "Cluster
topologies", "Cluster User Credentials"; notes cluster-wire §1.5, §1.6, §1.7, §4).

The kit starts three nodes in a symmetric cluster (static connectors to every peer) or in a chain
(node0 -> node1 -> node2, allow-direct-connections-only), creates the case's queues at run time with its own
client on the nodes the case names, attaches consumers where it says, waits until the sending node has caught
up with what the others announced (a barrier: see ``_cluster_kit``), sends numbered durable messages and reads
where each one ended up by consuming every node's queue.  Cases of one topology share one running cluster (a
module-scoped pool: each 3-node start costs seconds of JVM time), each with addresses of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cck.codec import RoutingType
from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.plugin import Settings
from cck.conformance.targets import AddressSetting, ClusterSpec, SecuritySpec, Topology, User
from cck.conformance.verdicts import NotObserved
from cck.reference.client import Connector, Consumer, connect, connector_of

from ._cluster_kit import (
    ARRIVE_S,
    FORM_S,
    NODES,
    QUIET_S,
    ClusterClients,
    ClusterPool,
    N,
    Placement,
    barrier,
    flush,
)
from ._kit import RESTARTING, client_settings, run, unique, wait_until

CASE_S = 90.0
#: under OFF, how long a flush message may take before the kit takes it that the broker forwards nothing
OFF_FLUSH_S = 3.0
KIT_USER = User("cck", "cck-secret", ("amq",))


def _settings_with(**values: object) -> tuple[AddressSetting, ...]:
    # the kit's defaults plus what the group needs (Topology's defaults are private to the descriptor)
    return (
        AddressSetting.of("#", dead_letter_address="DLQ", expiry_address="ExpiryQueue", auto_create_queues=True,
                          auto_create_addresses=True, auto_delete_queues=False, auto_delete_addresses=False),
        *(AddressSetting.of(match, redistribution_delay=delay) for match, delay in values.items()),
    )


def _mesh(balancing: str, **cluster: Any) -> Topology:
    return Topology.cluster_of(3, ClusterSpec(message_load_balancing=balancing, **cluster))  # type: ignore[arg-type]


#: Every topology the group runs, by key; cases of one key share one running cluster.
TOPOLOGIES: dict[str, Topology] = {
    "strict": _mesh("STRICT"),
    "on-demand": _mesh("ON_DEMAND"),
    "off": _mesh("OFF"),
    "off-redistribution": Topology(
        _mesh("OFF_WITH_REDISTRIBUTION").nodes, cluster=ClusterSpec(message_load_balancing="OFF_WITH_REDISTRIBUTION"),
        address_settings=_settings_with(**{"cck.redistributed.#": 0})),
    "chain-hops-2": Topology.chain_of(3, ClusterSpec(max_hops=2)),
    "chain-hops-1": Topology.chain_of(3, ClusterSpec(max_hops=1)),
    "credentials": Topology(
        _mesh("ON_DEMAND").nodes, security=SecuritySpec(enabled=True, users=(KIT_USER,)),
        cluster=ClusterSpec(passwords=(("node2", "another-cluster-secret"),))),
}




# ---------------------------------------------------------------------------------------------------- topology

TOPOLOGY = tuple(
    Case(f"cluster.topology.{n}", "cluster.topology",
         f"STRICT, 3 nodes with static connectors; the kit's client connects to {node} and subscribes to the "
         "cluster topology",
         "the topology it receives names all three nodes, each once with a node ID of its own, and each member's "
         "connector is that node's acceptor (host and port)",
         needs=("config",), params={"node": node})
    for n, node in enumerate(NODES, 1)
)


@cases(*TOPOLOGY)
def test_topology_names_every_node(case: Case, clusters: ClusterPool, cck_settings: Settings,
                                   evidence: CaseEvidence) -> None:
    target = clusters.get(TOPOLOGIES["strict"])
    acceptors = {Connector(spec.host, spec.port): spec.name for spec in target.topology.nodes}
    spec = target.topology.node(case.params["node"])

    async def scenario() -> None:
        async with await connect(spec.url, settings=client_settings(target, RESTARTING, reconnect_attempts=0)
                                     ) as connection:
            members = connection.core.topology

            def problems() -> list[str]:
                found: list[str] = []
                named: list[str] = []
                for node_id, member in sorted(members.items()):
                    live = connector_of(member.live) if member.live is not None else None
                    if live not in acceptors:
                        found.append(f"member {node_id} advertises {live}, not a node's acceptor "
                                     f"({', '.join(map(str, acceptors))})")
                    else:
                        named.append(acceptors[live])
                if sorted(named) != sorted(acceptors.values()):
                    found.append(f"the members are {sorted(named)}, not every node {sorted(acceptors.values())}")
                return found

            # topology updates arrive on the connection as the cluster forms (the client core signals none the
            # kit could wait on): looked at again at the kit's poll interval, judged below either way
            with contextlib.suppress(NotObserved):
                await wait_until(lambda: not problems(), cck_settings.deadline(FORM_S), "the cluster's topology")
            evidence.note("topology", {k: str(m.live) for k, m in members.items()})
            found = problems()
            assert not found, " | ".join(found)

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- scenarios


@dataclass(frozen=True)
class Scenario:
    """One routing experiment: where the queue is, who consumes, who sends what, where it must end up."""

    topology: str
    queues: tuple[str, ...] = NODES  # nodes with the case's queue (created at run time)
    routing: RoutingType = RoutingType.ANYCAST  # the address's and queues' routing type
    distinct: bool = False  # each node's queue has a name of its own (<address>.<node>) instead of one name
    consumers: tuple[str, ...] = ()  # nodes with a consumer before the sends
    filter: str | None = None  # the consumers' filter
    sender: str = "node0"
    message_routing: RoutingType | None = None  # the _AMQ_ROUTING_TYPE the messages carry (None: untyped)
    color: bool = False  # messages alternate color='red' (even index) / 'blue' (odd)
    expect: Mapping[str, int] = field(default_factory=dict)  # messages per node (per queue when distinct)
    period: int | None = None  # message i and i+period on the same node, period consecutive ones on distinct nodes
    only: Mapping[str, str] | None = None  # 'red'/'blue' -> the one node all messages of that color must reach
    barriers: tuple[tuple[str, tuple[str, ...]], ...] | None = None  # (observer, sources); None: sender <- others
    flush: tuple[str, ...] = ()  # nodes to flush (from the sender) before judging that nothing more arrives
    local_first: bool = False  # the sender's own queue holds every message right after the sends (ON_DEMAND)
    redistribute_to: str | None = None  # after the sends, a consumer only there; all messages must move to it
    prefix: str = "cck"  # the case's address starts <prefix>.<case id>


def _case(cid: str, clause: str, description: str, expectation: str, scenario: Scenario, *,
          checks: str = "both") -> Case:
    return Case(cid, clause, description, expectation, checks=checks,  # type: ignore[arg-type]
                needs=("config",), params={"scenario": scenario})


STRICT = (
    _case("cluster.strict.1", "cluster.lb.strict",
          f"STRICT, 3 nodes, an anycast queue of one name on every node, no consumers; {N} durable messages "
          "sent to node0",
          f"the messages are spread evenly: {N // 3} on each node",
          Scenario("strict", expect=dict.fromkeys(NODES, N // 3))),
    _case("cluster.strict.2", "cluster.lb.round-robin",
          "as cluster.strict.1; the kit reads which node each numbered message reached",
          "round robin: three consecutive messages reach three different nodes, message i and i+3 the same node",
          Scenario("strict", expect=dict.fromkeys(NODES, N // 3), period=3)),
    _case("cluster.strict.3", "cluster.lb.round-robin",
          f"as cluster.strict.1, but the {N} messages are sent to node1",
          f"node1 rotates too: {N // 3} on each node, message i and i+3 on the same node",
          Scenario("strict", sender="node1", expect=dict.fromkeys(NODES, N // 3), period=3)),
    _case("cluster.strict.4", "cluster.lb.strict-needs-queue",
          f"STRICT; the anycast queue exists on node0 and node1 only (node2 has none); {N} messages to node0",
          f"nothing is forwarded to node2 (it has no queue of that name): {N // 2} on node0, {N // 2} on node1",
          Scenario("strict", queues=("node0", "node1"), expect={"node0": N // 2, "node1": N // 2}, period=2,
                   flush=("node2",))),
    _case("cluster.strict.5", "cluster.lb.strict",
          f"STRICT; queue on every node, a consumer on node1 only; {N} messages to node0",
          f"consumers make no difference under STRICT: {N // 3} reach each node, in rotation",
          Scenario("strict", consumers=("node1",), expect=dict.fromkeys(NODES, N // 3), period=3)),
    _case("cluster.strict.6", "cluster.lb.strict",
          f"STRICT; consumers on node1 with filter color='red'; messages alternate red and blue; {N} to node0",
          "consumer filters make no difference under STRICT either: every node gets its third, in rotation",
          Scenario("strict", consumers=("node1",), filter="color='red'", color=True,
                   expect=dict.fromkeys(NODES, N // 3), period=3)),
)

ON_DEMAND = (
    _case("cluster.on-demand.1", "cluster.lb.on-demand",
          f"ON_DEMAND, 3 nodes, queue on every node, no consumers anywhere; {N} messages to node0",
          f"nothing is forwarded: all {N} stay on node0",
          Scenario("on-demand", expect={"node0": N}, local_first=True, flush=("node1", "node2"))),
    _case("cluster.on-demand.2", "cluster.lb.on-demand",
          f"ON_DEMAND; queue on every node, a consumer on node2 only; {N} messages to node0",
          f"every message goes to the node with the consumer: all {N} on node2",
          Scenario("on-demand", consumers=("node2",), expect={"node2": N})),
    _case("cluster.on-demand.3", "cluster.lb.round-robin",
          f"ON_DEMAND; consumers on node1 and node2 (none on node0); {N} messages to node0",
          f"round robin between the nodes with consumers: {N // 2} each, alternating; none left on node0",
          Scenario("on-demand", consumers=("node1", "node2"), expect={"node1": N // 2, "node2": N // 2}, period=2)),
    _case("cluster.on-demand.4", "cluster.lb.round-robin",
          f"ON_DEMAND; consumers on node0 (local) and node2; {N} messages to node0",
          f"round robin between the local and the remote consumer: {N // 2} each, alternating",
          Scenario("on-demand", consumers=("node0", "node2"), expect={"node0": N // 2, "node2": N // 2}, period=2)),
    _case("cluster.on-demand.5", "cluster.lb.round-robin",
          f"ON_DEMAND; consumers on all three nodes; {N} messages to node0",
          f"round robin over the three: {N // 3} each, message i and i+3 on the same node",
          Scenario("on-demand", consumers=NODES, expect=dict.fromkeys(NODES, N // 3), period=3)),
    _case("cluster.on-demand.6", "cluster.lb.on-demand",
          f"ON_DEMAND; queue on every node, a consumer on node2 with filter color='red'; messages alternate red "
          f"and blue; {N} to node0",
          "only messages the remote consumer's filter matches are forwarded: every red one reaches node2, every "
          "blue one stays on node0",
          Scenario("on-demand", consumers=("node2",), filter="color='red'", color=True,
                   expect={"node0": N // 2, "node2": N // 2}, only={"red": "node2", "blue": "node0"})),
    _case("cluster.on-demand.7", "cluster.lb.remote-only-queue",
          f"ON_DEMAND; the address exists on node0 without a queue, the queue only on node2, no consumers; "
          f"{N} messages to node0",
          f"the only queue of that name is remote, so all {N} are forwarded to node2 although nobody consumes there",
          Scenario("on-demand", queues=("node2",), expect={"node2": N}), checks="implementation"),
    _case("cluster.on-demand.8", "cluster.lb.on-demand",
          f"ON_DEMAND; the queue on node1 and node2 only (none on node0), a consumer on node1; {N} messages to "
          "node0",
          "every message goes to node1, where the consumer is; node2 gets none",
          Scenario("on-demand", queues=("node1", "node2"), consumers=("node1",), expect={"node1": N},
                   flush=("node2",))),
)

MULTICAST = (
    _case("cluster.multicast.1", "cluster.lb.by-queue-name",
          f"ON_DEMAND; a multicast address with a subscription queue of one name on every node and a consumer "
          f"on each; {N} MULTICAST messages to node0",
          f"queues of one name across the cluster share the messages: each message reaches one node ({N // 3} "
          "each, in rotation), not all three",
          Scenario("on-demand", routing=RoutingType.MULTICAST, message_routing=RoutingType.MULTICAST,
                   consumers=NODES, expect=dict.fromkeys(NODES, N // 3), period=3)),
    _case("cluster.multicast.2", "cluster.lb.by-queue-name",
          f"ON_DEMAND; a multicast address with a subscription queue of a different name on each node, no "
          f"consumers; {N} MULTICAST messages to node0",
          f"every subscription gets every message: {N} in each node's queue",
          Scenario("on-demand", routing=RoutingType.MULTICAST, message_routing=RoutingType.MULTICAST,
                   distinct=True, expect=dict.fromkeys(NODES, N)), checks="implementation"),
    _case("cluster.multicast.3", "cluster.lb.on-demand",
          f"ON_DEMAND; a subscription queue of one name on every node, no consumers; {N} MULTICAST messages "
          "to node0",
          f"nothing is forwarded: all {N} stay in node0's subscription",
          Scenario("on-demand", routing=RoutingType.MULTICAST, message_routing=RoutingType.MULTICAST,
                   expect={"node0": N}, local_first=True, flush=("node1", "node2"))),
)

OFF = (
    _case("cluster.off.1", "cluster.lb.off",
          f"OFF; an anycast queue on every node, consumers on node1 and node2 (none on node0); {N} messages "
          "to node0",
          f"messages are never forwarded: all {N} stay on node0",
          Scenario("off", consumers=("node1", "node2"), expect={"node0": N}, local_first=True)),
    _case("cluster.off.2", "cluster.lb.off",
          f"OFF; the address on node0 without a queue, the anycast queue only on node2 with a consumer; {N} "
          "untyped messages to node0",
          "nothing is forwarded: node2 receives none (node0 has no queue for them)",
          Scenario("off", queues=("node2",), consumers=("node2",), expect={"node2": 0}, flush=("node2",))),
    _case("cluster.off.3", "cluster.lb.off",
          f"OFF; a multicast subscription of one name on every node with a consumer on each; {N} MULTICAST "
          "messages to node0",
          f"nothing is forwarded: all {N} reach node0's consumer",
          Scenario("off", routing=RoutingType.MULTICAST, message_routing=RoutingType.MULTICAST, consumers=NODES,
                   expect={"node0": N})),
    _case("cluster.off.4", "cluster.lb.off",
          f"OFF; a multicast subscription of one name on every node, no consumers; {N} MULTICAST messages to "
          "node0",
          f"nothing is forwarded: all {N} stay in node0's subscription",
          Scenario("off", routing=RoutingType.MULTICAST, message_routing=RoutingType.MULTICAST, expect={"node0": N},
                   local_first=True, flush=("node1", "node2")), checks="spec"),
    _case("cluster.off.6", "cluster.lb.off",
          f"OFF; a multicast address with a subscription of a different name on each node; {N} untyped messages "
          "to node0",
          f"nothing is forwarded: node0's subscription gets all {N}, node1's and node2's none",
          Scenario("off", routing=RoutingType.MULTICAST, distinct=True, expect={"node0": N, "node1": 0, "node2": 0},
                   flush=("node1", "node2"))),
)

OFF_REDISTRIBUTION = (
    _case("cluster.off-redistribution.1", "cluster.lb.off-with-redistribution",
          f"OFF_WITH_REDISTRIBUTION; an anycast queue on every node, consumers on node1 and node2; {N} messages "
          "to node0",
          f"initial distribution is as OFF: all {N} stay on node0",
          Scenario("off-redistribution", consumers=("node1", "node2"), expect={"node0": N}, local_first=True)),
    _case("cluster.off-redistribution.2", "cluster.lb.off-with-redistribution",
          f"OFF_WITH_REDISTRIBUTION; a multicast subscription of one name on every node, consumers on node0 and "
          f"node1; {N} MULTICAST messages to node0",
          "local consumers have priority: every message reaches node0's consumer",
          Scenario("off-redistribution", routing=RoutingType.MULTICAST, message_routing=RoutingType.MULTICAST,
                   consumers=("node0", "node1"), expect={"node0": N}), checks="spec"),
    _case("cluster.off-redistribution.4", "cluster.lb.off-with-redistribution",
          "OFF_WITH_REDISTRIBUTION with redistribution-delay 0 for the address; an anycast queue on node0 and "
          f"node1, no consumers; {N} messages to node0, then a consumer on node1",
          f"all {N} stay on node0 at first; once node1 has the only consumer they are redistributed to it",
          Scenario("off-redistribution", queues=("node0", "node1"), expect={"node1": N}, local_first=True,
                   redistribute_to="node1", prefix="cck.redistributed")),
)

HOPS = (
    _case("cluster.max-hops.1", "cluster.max-hops",
          f"chain node0 -> node1 -> node2 (allow-direct-connections-only, max-hops 2, ON_DEMAND); the queue on "
          f"node0 and node2, a consumer on node2; {N} messages to node0",
          f"node0 knows node2's consumer two hops away: all {N} reach node2 through node1",
          Scenario("chain-hops-2", queues=("node0", "node2"), consumers=("node2",), expect={"node2": N},
                   barriers=(("node0", ("node2",)),))),
    _case("cluster.max-hops.2", "cluster.max-hops",
          f"chain with max-hops 2; the address on node0 without a queue, the queue only on node2, no consumers; "
          f"{N} messages to node0",
          f"the only queue of that name is two hops away and still reached: all {N} on node2",
          Scenario("chain-hops-2", queues=("node2",), expect={"node2": N}, barriers=(("node0", ("node2",)),))),
    _case("cluster.max-hops.3", "cluster.max-hops",
          f"chain with max-hops 1; the queue on node0 and node2, a consumer on node2; the kit waits until node1 "
          f"knows node2's queues and node0 knows node1's; {N} messages to node0",
          f"node2 is two hops away, beyond max-hops 1: all {N} stay on node0",
          Scenario("chain-hops-1", queues=("node0", "node2"), consumers=("node2",), expect={"node0": N},
                   local_first=True, barriers=(("node1", ("node2",)), ("node0", ("node1",))))),
    _case("cluster.max-hops.4", "cluster.max-hops",
          f"chain with max-hops 1; the queue on node1 and node2, a consumer on node2; {N} messages to node1",
          f"one hop is within max-hops 1: all {N} reach node2",
          Scenario("chain-hops-1", queues=("node1", "node2"), consumers=("node2",), sender="node1",
                   expect={"node2": N}, barriers=(("node1", ("node2",)),))),
)

CHAIN = (
    _case("cluster.chain.1", "cluster.chain",
          f"chain node0 -> node1 -> node2 (max-hops 2); the queue on node0 and node2, a consumer on node0 only; "
          f"{N} messages to node2",
          f"the chain carries messages one way only (node2 has no cluster connection to anyone): all {N} stay "
          "on node2",
          Scenario("chain-hops-2", queues=("node0", "node2"), consumers=("node0",), sender="node2",
                   expect={"node2": N}, local_first=True, barriers=(("node1", ("node2",)), ("node0", ("node1",))))),
    _case("cluster.chain.2", "cluster.direct-only",
          f"chain with max-hops 2; the queue on node0, node1 and node2, consumers on node0 and node2; {N} messages "
          "to node1",
          "node1 only connects to the node its static connector names (node2), though node0 connected to it: all "
          f"{N} reach node2, none node0",
          Scenario("chain-hops-2", consumers=("node0", "node2"), sender="node1", expect={"node2": N},
                   barriers=(("node1", ("node2",)),))),
)

CREDENTIALS = (
    _case("cluster.credentials.1", "cluster.credentials",
          "security enabled; node2's cluster password differs from node0's and node1's; the queue on every node, "
          f"consumers on node1 and node2; {N} messages to node0",
          f"node0 and node1 form a cluster, node2 is no part of it: all {N} reach node1, none node2",
          Scenario("credentials", consumers=("node1", "node2"), expect={"node1": N},
                   barriers=(("node0", ("node1",)),))),
    _case("cluster.credentials.2", "cluster.credentials",
          f"as cluster.credentials.1; consumers on node0 and node1; {N} messages to node2",
          f"node2 forwards nothing to the nodes whose cluster password differs from its own: all {N} stay on node2",
          Scenario("credentials", consumers=("node0", "node1"), sender="node2", expect={"node2": N},
                   local_first=True, barriers=())),  # node2 learns nothing from the others: nothing to wait for
    _case("cluster.credentials.3", "cluster.credentials",
          f"as cluster.credentials.1; consumers on node0 and node2; {N} messages to node1",
          f"all {N} reach node0, none node2",
          Scenario("credentials", consumers=("node0", "node2"), sender="node1", expect={"node0": N},
                   barriers=(("node1", ("node0",)),))),
)

# in topology order, so each topology starts once
ROUTING = STRICT + ON_DEMAND + MULTICAST + OFF + OFF_REDISTRIBUTION + HOPS[:2] + CHAIN + HOPS[2:] + CREDENTIALS


def _props(scenario: Scenario) -> Any:
    if not scenario.color:
        return None
    return lambda i: {"color": "red" if i % 2 == 0 else "blue"}


def _judge(scenario: Scenario, placement: Placement) -> list[str]:
    problems: list[str] = []
    counts = placement.counts()
    wanted = {n: scenario.expect.get(n, 0) for n in counts}
    if counts != wanted:
        problems.append(f"messages per node {counts}, expected {wanted}")
    twice = placement.duplicates(per_node=scenario.distinct)
    if twice:
        problems.append(f"messages found twice: {twice}")
    if not scenario.distinct:
        missing = sorted(set(range(N)) - set(placement.node_of())) if sum(scenario.expect.values()) == N else []
        if missing:
            problems.append(f"messages not found on any node: {missing}")
    where = placement.node_of()
    if scenario.period and not problems:
        k = scenario.period
        for i in range(N - k):
            if where.get(i) != where.get(i + k):
                problems.append(f"not round robin over {k}: message {i} on {where.get(i)}, message {i + k} on "
                                f"{where.get(i + k)}")
                break
        for i in range(N - k + 1):
            run_of = {where.get(j) for j in range(i, i + k)}
            if len(run_of) != k:
                problems.append(f"messages {i}..{i + k - 1} reached {sorted(map(str, run_of))}, not {k} nodes")
                break
    if scenario.only:
        for i, node in sorted(where.items()):
            color = "red" if i % 2 == 0 else "blue"
            if scenario.only.get(color, node) != node:
                problems.append(f"{color} message {i} reached {node}, not {scenario.only[color]}")
    return problems


@cases(*ROUTING)
def test_routing(case: Case, clusters: ClusterPool, cck_settings: Settings, evidence: CaseEvidence) -> None:
    scenario: Scenario = case.params["scenario"]
    target = clusters.get(TOPOLOGIES[scenario.topology])
    evidence.note("target", target.describe())
    address = unique(f"{scenario.prefix}.{case.id}")
    names = {n: f"{address}.{n}" if scenario.distinct else address for n in NODES}

    login = (KIT_USER.name, KIT_USER.password) if target.topology.security.enabled else None

    async def scenario_run() -> None:
        async with ClusterClients(target, cck_settings, login) as c:
            await c.address_on([scenario.sender], address, scenario.routing)
            for node in scenario.queues:
                await c.queue_on([node], address, names[node], routing=scenario.routing)
            early = {n: await c[n].create_consumer(names[n], filter_string=scenario.filter)
                     for n in scenario.consumers}
            barriers = scenario.barriers
            if barriers is None:
                barriers = ((scenario.sender, tuple(n for n in NODES if n != scenario.sender)),)
            for observer, sources in barriers:
                await barrier(c, observer, sources, FORM_S)
            await c.send(scenario.sender, address, N, routing=scenario.message_routing, props=_props(scenario))
            if scenario.local_first:
                # routing happens as the broker takes the message: a message it forwarded is not in the local queue
                seen = await c.wait_count(scenario.sender, names[scenario.sender], N, ARRIVE_S)
                evidence.note("local_count_after_sends", seen)
                assert seen == N, (f"{scenario.sender}'s queue holds {seen} of the {N} messages sent to it; the "
                                   "others were forwarded")
            # every queue gets an unfiltered consumer (the sender's first, so nothing is redistributed away from
            # it), unless the case watches messages move to one node
            if scenario.redistribute_to is not None:
                order = [scenario.redistribute_to]
            else:
                order = sorted(scenario.queues, key=lambda n: n != scenario.sender)
            late = [(n, await c[n].create_consumer(names[n])) for n in order
                    if n not in early or scenario.filter is not None]
            consumers: list[tuple[str, Consumer]] = [*early.items(), *late]
            placement = await c.collect(consumers, sum(scenario.expect.values()), ARRIVE_S)
            if scenario.flush:
                # anything forwarded to these nodes before the flush has arrived by now; listen a moment longer
                # on every consumer for a message that must not come (a duplicate, a forwarded one)
                # under OFF a broker may forward nothing at all (as the clause says), flush messages included:
                # then a short flush that does not arrive is evidence enough, with the quiet listen below
                off = target.topology.cluster is not None and target.topology.cluster.message_load_balancing == "OFF"
                for node in scenario.flush:
                    flushed = await flush(c, scenario.sender, node, OFF_FLUSH_S if off else FORM_S, required=not off)
                    evidence.note(f"flushed_{node}", flushed)
                extra = await c.collect(consumers, 1, QUIET_S)
                for node, indexes in extra.found.items():
                    placement.found[node] += indexes
            evidence.note("placement", placement.found)
            problems = _judge(scenario, placement)
            assert not problems, " | ".join(problems) + f" (found: {placement.describe()})"

    run(cck_settings, scenario_run(), CASE_S)
