"""The cluster and discovery cases' premises on a real network: every node in a network namespace of its own
with its own address on a bridge (``Topology(network="netns")``, root only; docs/targets.md), so broadcasts,
discovery and bridges cross interfaces instead of loopback.

* ``netns.discovery.1``: the kit joins the broadcast group on its side of the bridge and hears each node's
  datagram, whose connector names the node's own address; a session through it works.
* ``netns.cluster.1``: three nodes find each other through UDP discovery alone (no static connectors) and
  balance STRICT: 12 messages sent to node0 end up 4 on each node.
"""

from __future__ import annotations

import dataclasses

from cck.codec import RoutingType
from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.plugin import Settings
from cck.conformance.targets import ClusterSpec, Topology, netns_unavailable
from cck.conformance.verdicts import unsupported
from cck.reference.client import connect, connector_of

from ._cluster_kit import ClusterClients, RevivingPool, barrier
from ._discovery_kit import BroadcastListener
from ._kit import RESTARTING, client_settings, run, unique

CASE_S = 120.0
FORM_S = 30.0
ARRIVE_S = 15.0
N = 12
NODES = ("node0", "node1", "node2")
TOPOLOGY = dataclasses.replace(
    Topology.cluster_of(3, ClusterSpec(discovery="udp", message_load_balancing="STRICT", broadcast_period_ms=500)),
    network="netns")

NETNS = (
    Case("netns.discovery.1", "discovery.connector-usable",
         "three nodes, each in a network namespace with its own address on a bridge, broadcasting every 500 ms; "
         "the kit joins the group on its side of the bridge",
         "a datagram from every node, each advertising that node's own address and port; a session through "
         "each advertised connector works", needs=("config",)),
    Case("netns.cluster.1", "cluster.lb.strict",
         "three nodes in namespaces of their own that find each other only through UDP discovery, STRICT; an "
         f"anycast queue on every node, {N} messages sent to node0",
         f"{N // 3} messages on each node: discovery and the bridges work across real interfaces",
         needs=("config",)),
)


def _check_available() -> None:
    why = netns_unavailable()
    if why is not None:
        unsupported(f"the case runs its nodes in network namespaces: {why}")


@cases(NETNS[0])
def test_discovery_across_namespaces(case: Case, clusters: RevivingPool, cck_settings: Settings,
                                     evidence: CaseEvidence) -> None:
    _check_available()
    target = clusters.get(TOPOLOGY)
    evidence.note("target", target.describe())
    cluster = target.topology.cluster
    assert cluster is not None

    async def scenario() -> None:
        async with BroadcastListener(cluster.group_address, cluster.group_port, target.kit_address) as listener:
            for spec in target.topology.nodes:
                def heard(host: str = spec.host, port: int = spec.port) -> bool:
                    return bool(listener.from_node(host, port))

                await listener.wait_for(heard, cck_settings.deadline(FORM_S),
                                        f"a broadcast advertising {spec.host}:{spec.port} ({spec.name})")
        advertised = sorted({f"{h.sender[0]} -> {found.url}" for h in listener.heard if h.datagram
                             for found in map(connector_of, h.datagram.connectors) if found is not None})
        evidence.note("advertised", advertised)
        for spec in target.topology.nodes:
            async with await connect(spec.url, settings=client_settings(target, RESTARTING, reconnect_attempts=0)
                                     ) as connection:
                session = await connection.create_session()
                await session.close()

    run(cck_settings, scenario(), CASE_S)


@cases(NETNS[1])
def test_cluster_across_namespaces(case: Case, clusters: RevivingPool, cck_settings: Settings,
                                   evidence: CaseEvidence) -> None:
    _check_available()
    target = clusters.get(TOPOLOGY)
    evidence.note("target", target.describe())
    address = unique("cck.netns")

    async def scenario() -> None:
        async with ClusterClients(target, cck_settings) as c:
            await c.queue_on(NODES, address, routing=RoutingType.ANYCAST)
            await barrier(c, "node0", ("node1", "node2"), FORM_S)
            await c.send("node0", address, N)
            placement = await c.drain(address, NODES, N, ARRIVE_S)
            evidence.note("placement", placement.found)
            assert placement.counts() == dict.fromkeys(NODES, N // 3), (
                f"STRICT across namespaces: expected {N // 3} on each node, found {placement.describe()}")
            assert not placement.duplicates(), f"messages found twice: {placement.duplicates()}"

    run(cck_settings, scenario(), CASE_S)
