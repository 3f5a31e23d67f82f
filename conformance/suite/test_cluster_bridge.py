"""Cluster bridges across connection failures (spec 002 "Cluster Connections": duplicate detection on the
bridges; notes cluster-wire §2.2-2.4).

Two nodes in a cluster; the only queue of the case's address is a subscription on node1, so every message
sent to node0 must cross node0's bridge to node1 exactly once.  While the kit sends, it cuts every TCP
connection between the two nodes several times (``ss -K``: the kernel destroys the sockets, the peers see a
reset; the kit's own connections are spared).  The bridge reconnects and resends what node1 had not
confirmed; node1's duplicate detection must drop what it already had.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Iterator

import pytest

from codec import RoutingType
from conformance.cases import Case, cases
from conformance.evidence import CaseEvidence
from conformance.plugin import Settings
from conformance.targets import ClusterSpec, Topology
from conformance.verdicts import unsupported

from ._cluster_kit import ClusterClients, ClusterPool, index_of, listed_on, message, unique
from ._running import run
from ._tcp_kill import kill_tcp, tcp_kill_unavailable

CASE_S = 120.0
FORM_S = 30.0
ARRIVE_S = 60.0
TOPOLOGY = Topology.cluster_of(2, ClusterSpec(message_load_balancing="ON_DEMAND", retry_interval_ms=200))

CUT = tuple(
    Case(f"cluster.bridge.{n}", "cluster.bridge-duplicates",
         f"two nodes; a subscription on node1 is the only queue of the address; the kit sends {count} "
         f"{'durable' if durable else 'non-durable'} messages to node0 and cuts every connection between the nodes "
         f"{cuts} times while it sends",
         f"node1's subscription gets each of the {count} messages exactly once: the bridge reconnects, resends "
         "what was not confirmed, and node1 drops what it already had",
         needs=("config",), params={"count": count, "cuts": cuts, "durable": durable})
    for n, (count, cuts, durable) in enumerate(((120, 3, True), (120, 3, False), (300, 6, True)), 1)
)


@pytest.fixture(scope="module")
def clusters(cck_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterPool]:
    pool = ClusterPool(cck_settings, tmp_path_factory.mktemp)
    try:
        yield pool
    finally:
        pool.close()


@cases(*CUT)
def test_no_duplicates_after_bridge_reconnects(case: Case, clusters: ClusterPool, cck_settings: Settings,
                                                evidence: CaseEvidence) -> None:
    why = tcp_kill_unavailable()
    if why is not None:
        unsupported(f"the case cuts the nodes' connections from outside: {why}")
    target = clusters.get(TOPOLOGY)
    evidence.note("target", target.describe())
    count, cuts, durable = case.params["count"], case.params["cuts"], case.params["durable"]
    address = unique(f"cck.bridge.{case.id}")
    ports = [spec.port for spec in target.topology.nodes]

    async def scenario() -> None:
        async with ClusterClients(target, cck_settings) as c:
            await c.address_on(["node0"], address, RoutingType.MULTICAST)
            await c.queue_on(["node1"], address, f"{address}.sub", routing=RoutingType.MULTICAST)
            await listed_on(c, "node0", address, 1, FORM_S, "node1's subscription (the cluster has not formed)")
            consumer = await c["node1"].create_consumer(f"{address}.sub")
            spare = [p for p in (conn.local_port for conn in c.connections.values()) if p is not None]
            producer = c["node0"].create_producer(address)
            received: list[int] = []
            arrived = asyncio.Event()

            async def collect() -> None:
                while len(set(received)) < count:
                    delivery = await consumer.receive(0.5)
                    if delivery is not None:
                        received.append(index_of(delivery))
                        await consumer.acknowledge(delivery)
                        arrived.set()

            async def until_received(index: int, seconds: float) -> None:
                loop = asyncio.get_running_loop()
                end = loop.time() + cck_settings.deadline(seconds)
                while index not in received:
                    arrived.clear()
                    if loop.time() >= end:
                        raise TimeoutError(f"message {index} did not reach node1 within {seconds:.0f} s after a cut: "
                                           "the bridge did not come back")
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(arrived.wait(), end - loop.time())

            collector = asyncio.ensure_future(collect())
            killed: list[int] = []
            every = count // (cuts + 1)
            try:
                for i in range(count):
                    await producer.send(dataclasses.replace(message(i), durable=durable))
                    if killed and i == every * len(killed):
                        await until_received(i, FORM_S)  # the bridge is back before the next stretch
                    if (i + 1) % every == 0 and len(killed) < cuts:  # cut right after a stretch, messages in flight
                        killed.append(await asyncio.to_thread(kill_tcp, ports, spare_local_ports=spare))
                evidence.note("sockets_destroyed_per_cut", killed)
                assert all(killed), f"a cut destroyed no socket between the nodes ({killed})"
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(collector), cck_settings.deadline(ARRIVE_S))
            finally:
                collector.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await collector
            evidence.note("received", len(received))
            duplicates = sorted({i for i in received if received.count(i) > 1})
            missing = sorted(set(range(count)) - set(received))
            assert not duplicates, (f"{len(duplicates)} message(s) arrived twice at node1 after the bridge "
                                    f"reconnected: {duplicates[:20]}")
            assert not missing, f"{len(missing)} of {count} message(s) never reached node1: {missing[:20]}"

    run(cck_settings, scenario(), CASE_S)
