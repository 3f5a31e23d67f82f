"""Client-side load balancing (spec 002 "Client-Side Load balancing"): where the connections of one locator go.

One symmetric three-node cluster (static connectors) serves the whole module.  Each case opens K connections
(session factories) through one :class:`reference.client.ServerLocator` whose policy draws from a seeded random
source, creates a session on each, and notes which node each reached (by the connector it connected to, matched
to the topology descriptor's host and port).  What a broker contributes is the cluster topology it sends to
clients: the members and their connectors (``client-lb.topology``), which a locator with
``useTopologyForLoadBalancing=true`` (the default) chooses among once it has received it.  Cases that depend on
the topology wait, bounded, until a client connected to node0 has learnt all three members.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from cck.conformance.cases import Case, cases
from cck.conformance.clients import ClientUnderTest
from cck.conformance.evidence import CaseEvidence
from cck.conformance.plugin import Settings, TargetFactory
from cck.conformance.targets import ManagedTarget, Target, Topology
from cck.reference.client import (
    FIRST_ELEMENT,
    RANDOM,
    RANDOM_STICKY,
    ROUND_ROBIN,
    Connection,
    Connector,
    ServerLocator,
    connect,
    connector_of,
)

from ._kit import RESTARTING, client_settings, run, wait_until

CASE_S = 90.0
#: How long the cluster may take to form once the nodes are up (bridges retry every 500 ms).
FORM_S = 60.0
NODES = 3

POLICY = {"round-robin": ROUND_ROBIN, "random": RANDOM, "random-sticky": RANDOM_STICKY, "first-element": FIRST_ELEMENT}


@pytest.fixture(scope="module")
def lb_cluster(cck_targets: TargetFactory) -> Iterator[Target]:
    """One started three-node cluster for every case of the module (a JVM cluster takes long to start)."""
    target = cck_targets.started(Topology.cluster_of(NODES))
    try:
        yield target
    finally:
        target.close()


def _node_of(target: Target, connector: Connector) -> str:
    """The node whose acceptor the connector names (``not-a-node(host:port)`` when none does)."""
    assert isinstance(target, ManagedTarget), f"a managed target was made, got {target!r}"
    for spec in target.topology.nodes:
        if (spec.host, spec.port) == (connector.host, connector.port):
            return spec.name
    return f"not-a-node({connector.host}:{connector.port})"


async def _learnt_topology(target: Target, seconds: float) -> dict[str, str]:
    """Wait until a client of *every* node learns every node with a usable connector (a locator's first
    connection may land on any of them and takes that node's topology); node ID -> node."""
    settings = client_settings(target, RESTARTING, reconnect_attempts=0)
    names: dict[str, str] = {}
    for node in target.nodes:
        async with await connect(node.url, settings=settings) as probe:

            def complete(probe: Connection = probe) -> bool:
                names.clear()
                for node_id, member in probe.core.topology.items():
                    connector = connector_of(member.live) if member.live is not None else None
                    if connector is not None:
                        names[node_id] = _node_of(target, connector)
                return {n.name for n in target.nodes} <= set(names.values())

            try:
                await wait_until(complete, seconds, f"a client of {node.name} learning all {NODES} cluster members")
            except TimeoutError as exc:
                raise AssertionError(f"{exc}; topology learnt: {names or 'no member with a connector'}") from None
    return dict(names)


async def _landings(target: Target, locator: ServerLocator, count: int) -> list[str]:
    """Open ``count`` connections through the locator, one after another; the node each reached."""
    reached: list[str] = []
    for _ in range(count):
        async with await locator.connect() as connection:
            await connection.create_session()  # the node takes a session, not only a TCP connection
            reached.append(_node_of(target, connection.connector))
    return reached


def _rotation(sequence: list[str], order: list[str]) -> bool:
    """``sequence`` goes round ``order`` from some start: order[s], order[s+1], ... wrapping."""
    n = len(order)
    return any(sequence == [order[(s + i) % n] for i in range(len(sequence))] for s in range(n))


def _cycles_all(sequence: list[str], nodes: int) -> bool:
    """Every ``nodes`` consecutive entries are distinct and the sequence repeats with period ``nodes``."""
    return (len(set(sequence[:nodes])) == nodes
            and all(sequence[i] == sequence[i % nodes] for i in range(len(sequence))))


# ---------------------------------------------------------------------------------------------------- cases

# (id, clause, policy (None: not in the URL), url nodes, useTopologyForLoadBalancing (None: not in the URL), K,
#  seed, check, description, expectation)
_ROWS: tuple[tuple[str, str, str | None, tuple[int, ...], bool | None, int, int, str, str, str], ...] = (
    ("round-robin.1", "client-lb.round-robin", "round-robin", (0, 1, 2), False, 7, 11, "rotation",
     "RoundRobin policy named on the URL",
     "the nodes are reached in the URL's order, round and round, from whichever node the first connection chose"),
    ("round-robin.2", "client-lb.round-robin", None, (0, 1, 2), None, 7, 12, "topology-rotation",
     "no policy parameter (the default, RoundRobin) and the default useTopologyForLoadBalancing",
     "from the second connection on (chosen among the topology's members) every 3 consecutive connections "
     "reach the 3 nodes and the sequence repeats: node after node in one fixed order"),
    ("round-robin.3", "client-lb.server-set", None, (0,), None, 7, 13, "topology-rotation",
     "a URL naming only node0, the default policy (RoundRobin) and the default useTopologyForLoadBalancing",
     "the first connection reaches node0; once it has received the topology, the others go round all 3 nodes"),
    ("round-robin.4", "client-lb.server-set", "round-robin", (0,), False, 5, 14, "first",
     "a URL naming only node0 with useTopologyForLoadBalancing=false (RoundRobin)",
     "every connection reaches node0: the topology's other members are never chosen"),
    ("first-element.1", "client-lb.first-element", "first-element", (2, 0, 1), False, 5, 21, "first",
     "FirstElement on a URL naming node2, node0, node1 in that order, useTopologyForLoadBalancing=false",
     "every connection reaches node2, the URL's first connector"),
    ("first-element.2", "client-lb.first-element", "first-element", (2, 0, 1), None, 5, 22, "topology-first",
     "FirstElement on a URL naming node2, node0, node1, default useTopologyForLoadBalancing",
     "the first connection reaches node2 (the URL's first); every later one reaches the first member of the "
     "topology the locator learnt"),
    ("random-sticky.1", "client-lb.random-sticky", "random-sticky", (0, 1, 2), False, 6, 31, "sticky",
     "RandomSticky on a URL naming the 3 nodes, useTopologyForLoadBalancing=false",
     "every connection reaches the node the first one reached"),
    ("random-sticky.2", "client-lb.random-sticky", "random-sticky", (0,), None, 6, 32, "topology-sticky",
     "RandomSticky on a URL naming only node0, default useTopologyForLoadBalancing",
     "the first connection reaches node0; every later one reaches one and the same node of the topology"),
    ("random.1", "client-lb.random", "random", (0, 1, 2), False, 15, 41, "all",
     "Random on a URL naming the 3 nodes, useTopologyForLoadBalancing=false, 15 connections",
     "every node is reached (a uniform choice misses some node in 15 tries with probability at most "
     "3 x (2/3)^15 < 0.7%; the seeded source makes the run repeatable)"),
    ("random.2", "client-lb.server-set", "random", (0,), None, 16, 42, "topology-all",
     "Random on a URL naming only node0, default useTopologyForLoadBalancing, 16 connections",
     "the first reaches node0; the other 15 (chosen among the topology's members) reach every node "
     "(missed with probability at most 3 x (2/3)^15 < 0.7%)"),
)

BALANCE = tuple(
    Case(f"client-lb.{sub}", clause,
         f"3-node symmetric cluster; one locator, {description}, opens {count} connections one after another "
         f"(a session on each) with a seeded random source (seed {seed})",
         expect, checks="implementation" if check.startswith("topology") else "both", needs=("config",),
         subject="client", params={"policy": policy, "urls": urls, "use_topology": use_topology, "count": count,
                                   "seed": seed, "check": check})
    for sub, clause, policy, urls, use_topology, count, seed, check, description, expect in _ROWS
)

TOPOLOGY = (
    Case("client-lb.topology.1", "client-lb.topology",
         "3-node symmetric cluster; the kit's client connects to node0 only and reads the topology messages",
         "within the cluster's forming time the client learns 3 members, each with a distinct node ID and a "
         "connector that is one node's acceptor (host and port), and a session can be made through each",
         needs=("config",)),
)


def _url(target: Target, case: Case) -> str:
    policy = case.params["policy"]
    params = [] if policy is None else [f"connectionLoadBalancingPolicyClassName={POLICY[policy]}"]
    if case.params["use_topology"] is not None:
        params.append(f"useTopologyForLoadBalancing={str(case.params['use_topology']).lower()}")
    members = ",".join(target.nodes[i].url.partition("?")[0] for i in case.params["urls"])
    return f"({members})" + (f"?{'&'.join(params)}" if params else "")


def _problems(case: Case, target: Target, reached: list[str], url_nodes: list[str], locator: ServerLocator,
              names: dict[str, str]) -> list[str]:
    check = case.params["check"]
    first, rest = reached[0], reached[1:]
    problems: list[str] = []
    if check == "rotation" and not _rotation(reached, url_nodes):
        problems.append(f"not a rotation over the URL's order {url_nodes}")
    elif check == "first" and set(reached) != {url_nodes[0]}:
        problems.append(f"not always the URL's first node {url_nodes[0]}")
    elif check == "sticky" and len(set(reached)) != 1:
        problems.append("the connections did not all reach the first connection's node")
    elif check == "all" and set(reached) != set(names.values()):
        problems.append(f"not every node was reached ({sorted(set(reached))} of {sorted(set(names.values()))})")
    elif check.startswith("topology"):
        if first != url_nodes[0] and len(url_nodes) == 1:
            problems.append(f"the first connection did not reach {url_nodes[0]}, the URL's only node")
        if first not in url_nodes:
            problems.append(f"the first connection reached {first}, which the URL does not name")
        if check == "topology-rotation" and not _cycles_all(rest, NODES):
            problems.append("from the second connection on, the nodes are not visited in a repeating rotation "
                            "of all 3")
        elif check == "topology-first":
            learnt = list(locator.topology.values())
            head = _node_of(target, learnt[0]) if learnt else "no member"
            if set(rest) != {head}:
                problems.append(f"after the first connection not always the topology's first member ({head})")
            if first != url_nodes[0]:
                problems.append(f"the first connection did not reach the URL's first node {url_nodes[0]}")
        elif check == "topology-sticky" and len(set(rest)) != 1:
            problems.append("after the first connection, the connections did not all reach one node")
        elif check == "topology-all" and set(rest) != set(names.values()):
            problems.append(f"the connections after the first did not reach every node ({sorted(set(rest))})")
    return problems


@cases(*BALANCE)
def test_connections_are_balanced(case: Case, cck_client: ClientUnderTest, lb_cluster: Target,
                                  cck_settings: Settings, evidence: CaseEvidence) -> None:
    cck_client.require_kit("the case counts where each connection of one locator lands, with a seeded random "
                           "source, through the kit's client API")
    target = lb_cluster
    url = _url(target, case)
    url_nodes = [target.nodes[i].name for i in case.params["urls"]]
    evidence.note("url", url)

    async def scenario() -> None:
        names = await _learnt_topology(target, cck_settings.deadline(FORM_S))
        evidence.note("cluster", names)
        locator = ServerLocator(url, settings=client_settings(target, RESTARTING, reconnect_attempts=0),
                                rng=random.Random(case.params["seed"]))  # noqa: S311 - repeatable, not secret
        reached = await _landings(target, locator, case.params["count"])
        evidence.note("reached", reached)
        evidence.note("locator_topology", {node_id: c.url for node_id, c in locator.topology.items()})
        problems = _problems(case, target, reached, url_nodes, locator, names)
        assert not problems, f"{' | '.join(problems)}; connections reached {reached}"

    run(cck_settings, scenario(), CASE_S)


@cases(*TOPOLOGY)
def test_clients_learn_the_cluster_topology(case: Case, lb_cluster: Target, cck_settings: Settings,
                                            evidence: CaseEvidence) -> None:
    target = lb_cluster

    async def scenario() -> None:
        names = await _learnt_topology(target, cck_settings.deadline(FORM_S))
        evidence.note("cluster", names)
        assert sorted(names.values()) == sorted(n.name for n in target.nodes), names
        assert len(names) == NODES, f"{len(names)} node IDs for {NODES} nodes: {names}"
        settings = client_settings(target, RESTARTING, reconnect_attempts=0)
        for node in target.nodes:
            async with await connect(node.url, settings=settings) as connection:
                await connection.create_session()

    run(cck_settings, scenario(), CASE_S)
