"""Server discovery over UDP (spec 002 "Server discovery", notes §12).

The kit starts brokers whose broadcast groups send to a multicast group on loopback (each case its own
group port), joins the group on 127.0.0.1 and keeps every datagram with its arrival time (monotonic).
Every datagram is dissected through the codec's scapy layer and must be exactly its encoding; what it
advertises must be the node's acceptor, usable by a client; the node ID must survive a restart while
the unique ID changes; broadcasts must come at the start and then every broadcast-period (timing
oracle, intervals judged).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import re
import socket
import time
import uuid
from collections.abc import Callable

import pytest

from cck.codec import (
    CoreMessage,
    DiscoveryDatagram,
    RoutingType,
    TransportConfiguration,
    encode_discovery,
    netty_connector_factory,
)
from cck.conformance.cases import Case, cases
from cck.conformance.clients import ClientUnderTest
from cck.conformance.evidence import CaseEvidence
from cck.conformance.oracles import check_schedule, expected_broadcast_schedule
from cck.conformance.plugin import Settings
from cck.conformance.targets import ClusterSpec, ManagedTarget, NodeSpec, Target, Topology
from cck.reference.client import Connection, Connector, connect, connector_of
from cck.reference.discovery import open_multicast_sender

from ._discovery_kit import BroadcastListener, Heard
from ._kit import RESTARTING, client_settings, restarted, run, signalled

#: The fixture ``cck_make_target``: a started target of the run's kind with the given topology.
MakeTarget = Callable[[Topology], Target]
CASE_S = 90.0
#: A node's first datagram once the target reports it started (a JVM's cluster manager starts last).
FIRST_S = 20.0
RECEIVE_S = 10.0
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _topology(nodes: int, period_ms: int) -> Topology:
    return Topology.cluster_of(nodes, ClusterSpec(discovery="udp", broadcast_period_ms=period_ms))


def _managed(target: Target) -> ManagedTarget:
    assert isinstance(target, ManagedTarget), f"a managed target was made, got {target!r}"
    return target


def _listener(target: ManagedTarget) -> BroadcastListener:
    cluster = target.topology.cluster
    assert cluster is not None
    return BroadcastListener(cluster.group_address, cluster.group_port)


async def _datagrams(listener: BroadcastListener, node: NodeSpec, count: int, seconds: float,
                     *, after_ns: int = 0) -> list[Heard]:
    def enough() -> bool:
        return len(listener.from_node(node.host, node.port, after_ns=after_ns)) >= count

    await listener.wait_for(enough, seconds, f"{count} broadcast(s) advertising {node.host}:{node.port}")
    return listener.from_node(node.host, node.port, after_ns=after_ns)[:count]


def _fake_connector(target: ManagedTarget, port: int) -> TransportConfiguration:
    """A connector to the kit's listener that the target's servers can load (HornetQ's name their own factory)."""
    return TransportConfiguration.netty("127.0.0.1", port, "fake",
                                        factory=netty_connector_factory(target.protocol_version))


def _content_problems(node: NodeSpec, heard: list[Heard], factory: str) -> list[str]:
    """What is wrong with one node's datagrams (layout, connector, identity within one instance); ``factory``
    is the Netty connector factory class the server's family names (as broker.xml connector URLs become)."""
    problems: list[str] = []
    for h in heard:
        if h.datagram is None:
            problems.append(f"a datagram from {h.sender} does not dissect: {h.error}")
            continue
        if not h.exact:
            problems.append(f"a datagram of {len(h.data)} bytes is not exactly its encoding (trailing or "
                            f"differently encoded bytes): {h.data.hex()}")
        if len(h.datagram.connectors) != 1:
            problems.append(f"{len(h.datagram.connectors)} connectors advertised, the broadcast group names one")
        for connector in h.datagram.connectors:
            if connector.factory_class_name != factory:
                problems.append(f"connector {connector.name!r} has factory {connector.factory_class_name!r}")
            if connector_of(connector) != Connector(node.host, node.port):
                problems.append(f"connector {connector.name!r} advertises {connector_of(connector)}, the node's "
                                f"connector is {node.host}:{node.port}")
    identities = {(h.datagram.node_id, h.datagram.unique_id) for h in heard if h.datagram is not None}
    if len(identities) > 1:
        problems.append(f"node and unique IDs changed between broadcasts of one broker instance: {sorted(identities)}")
    return problems


async def _round_trip(connection: Connection, queue: str, seconds: float) -> None:
    """Create a non-durable queue, send one message through the connection and receive it back."""
    session = await connection.create_session()
    await session.create_queue(queue, queue, routing_type=RoutingType.ANYCAST, durable=False)
    await session.create_producer(queue).send(CoreMessage(f"through {connection.peer}".encode(), durable=False))
    consumer = await session.create_consumer(queue)
    session.start()
    delivery = await consumer.receive(seconds)
    assert delivery is not None, f"nothing came back through {connection.peer}"


# ---------------------------------------------------------------------------------------------------- content

CONTENT = tuple(
    Case(f"discovery.datagram.{n}", "discovery.broadcast",
         f"{nodes} node(s), each with a broadcast group (broadcast-period {period} ms, one connector-ref: the "
         "node's own connector) on one multicast group; the kit listens for three broadcasts of each node",
         "every datagram dissects (scapy layer) and is exactly its encoding; it advertises one Netty connector, "
         "the node's acceptor host and port; node ID and unique ID do not change between broadcasts; "
         "different nodes have different node IDs and unique IDs; a node ID looks like a UUID (SHOULD)",
         needs=("config",), params={"nodes": nodes, "period": period})
    for n, (nodes, period) in enumerate(((1, 500), (2, 500), (3, 500), (1, 2000)), 1)
)


@cases(*CONTENT)
def test_broadcast_datagrams(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                             evidence: CaseEvidence) -> None:
    target = _managed(cck_make_target(_topology(case.params["nodes"], case.params["period"])))
    window = cck_settings.deadline(FIRST_S + 3 * case.params["period"] / 1000)

    async def scenario() -> None:
        async with _listener(target) as listener:
            per_node = {spec.name: await _datagrams(listener, spec, 3, window) for spec in target.topology.nodes}
        evidence.note("datagrams", {name: [h.to_json() for h in heard] for name, heard in per_node.items()})
        factory = netty_connector_factory(target.protocol_version)
        problems = [f"{name}: {p}" for spec in target.topology.nodes
                    for name in [spec.name] for p in _content_problems(spec, per_node[name], factory)]
        ids = [(heard[0].datagram.node_id, heard[0].datagram.unique_id)
               for heard in per_node.values() if heard[0].datagram is not None]
        if len({node_id for node_id, _ in ids}) != len(ids):
            problems.append(f"two nodes broadcast the same node ID: {ids}")
        if len({unique for _, unique in ids}) != len(ids):
            problems.append(f"two nodes broadcast the same unique ID: {ids}")
        for node_id, unique in ids:
            evidence.should(bool(UUID.fullmatch(node_id)), f"node ID {node_id!r} is not a UUID string")
            evidence.should(bool(UUID.fullmatch(unique)), f"unique ID {unique!r} is not a UUID string")
        assert not problems, " | ".join(problems)

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- cadence

PERIOD = tuple(
    Case(f"discovery.period.{n}", "discovery.broadcast-period",
         f"one node with broadcast-period {period} ms; the kit times {count} consecutive broadcasts on arrival "
         "(monotonic clock)",
         "each interval between consecutive broadcasts is broadcast-period within the run's timing tolerance "
         "(intervals judged, offsets reported)",
         needs=("config",), params={"period": period, "count": count})
    for n, (period, count) in enumerate(((250, 8), (500, 6), (1000, 5), (2000, 4)), 1)
)


@cases(*PERIOD)
@pytest.mark.cck_alone  # broadcast intervals judged against the run's tolerance
def test_broadcast_period(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                          evidence: CaseEvidence) -> None:
    period, count = case.params["period"], case.params["count"]
    target = _managed(cck_make_target(_topology(1, period)))
    node = target.topology.nodes[0]

    async def scenario() -> None:
        async with _listener(target) as listener:
            # the first broadcast heard is the origin: when the group started is not observable from outside
            first = await _datagrams(listener, node, 1, cck_settings.deadline(FIRST_S + period / 1000))
            heard = await _datagrams(listener, node, count, cck_settings.deadline(
                (count + 1) * period / 1000 + RECEIVE_S), after_ns=first[0].at_ns - 1)
        observed = [h.at_ns for h in heard]
        result = check_schedule(observed, expected_broadcast_schedule(period, count), cck_settings.tolerance,
                                origin_ns=None)
        evidence.timing(f"broadcast every {period} ms", result)
        assert result.ok, result.explanation

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- identity

RESTART = tuple(
    Case(f"discovery.restart.{n}", "discovery.node-identity",
         f"one node broadcasting every 500 ms; the kit {how} and starts it again",
         "after the restart the node broadcasts the same node ID (kept with its data) and a new unique ID "
         "(a new broadcast group instance)",
         needs=("restart",) if graceful else ("kill", "restart"), params={"graceful": graceful})
    for n, (graceful, how) in enumerate(((True, "stops the node gracefully"), (False, "kills the node (SIGKILL)")), 1)
)


@cases(*RESTART)
def test_identity_across_restart(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                 evidence: CaseEvidence) -> None:
    target = _managed(cck_make_target(_topology(1, 500)))
    node = target.topology.nodes[0]

    async def scenario() -> None:
        async with _listener(target) as listener:
            before = await _datagrams(listener, node, 1, cck_settings.deadline(FIRST_S))
            await restarted(functools.partial(target.node(node.name).restart, case.params["graceful"]), node.name)
            restarted_ns = time.monotonic_ns()
            after = await _datagrams(listener, node, 1, cck_settings.deadline(FIRST_S), after_ns=restarted_ns)
        assert before[0].datagram is not None, before[0].error
        assert after[0].datagram is not None, after[0].error
        evidence.note("before", before[0].to_json())
        evidence.note("after", after[0].to_json())
        assert after[0].datagram.node_id == before[0].datagram.node_id, (
            f"the node ID changed across the restart: {before[0].datagram.node_id} -> {after[0].datagram.node_id}")
        assert after[0].datagram.unique_id != before[0].datagram.unique_id, (
            f"the unique ID {after[0].datagram.unique_id} did not change across the restart")

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- usable

USABLE = tuple(
    Case(f"discovery.connector.{n}", "discovery.connector-usable",
         f"{nodes} node(s) broadcasting; the kit connects to each connector it heard (not to the URL it configured) "
         "and sends and receives one message there",
         "every advertised connector accepts a core session; the message sent through it comes back",
         needs=("config",), params={"nodes": nodes})
    for n, nodes in enumerate((1, 2), 1)
)


@cases(*USABLE)
def test_advertised_connector_is_usable(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                        evidence: CaseEvidence) -> None:
    target = _managed(cck_make_target(_topology(case.params["nodes"], 500)))
    settings = client_settings(target, RESTARTING, reconnect_attempts=0)

    async def scenario() -> None:
        async with _listener(target) as listener:
            heard = [(await _datagrams(listener, spec, 1, cck_settings.deadline(FIRST_S)))[0]
                     for spec in target.topology.nodes]
        for h in heard:
            assert h.datagram is not None, h.error
            endpoint = connector_of(h.datagram.connectors[0])
            assert endpoint is not None, f"the connector is not a TCP host and port: {h.datagram.connectors[0]}"
            async with await connect(endpoint.url, settings=settings) as connection:
                await _round_trip(connection, f"cck.{case.id}.{endpoint.port}", cck_settings.deadline(RECEIVE_S))
            evidence.note(f"round_trip_{endpoint.port}", True)

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- clients

CLIENT = tuple(
    Case(f"discovery.client.{n}", "discovery.client-udp",
         f"{nodes} node(s) broadcasting every 500 ms; the kit's client opens {connections} connection(s) with "
         "udp://<group-address>:<group-port> (joined on 127.0.0.1) and no broker address at all",
         "every connection is made to a node of the cluster found through the broadcasts, and a message sent "
         "through it comes back",
         needs=("config",), subject="client", params={"nodes": nodes, "connections": connections})
    for n, (nodes, connections) in enumerate(((1, 1), (3, 3)), 1)
)


@cases(*CLIENT)
def test_client_finds_brokers_through_udp(case: Case, cck_client: ClientUnderTest, cck_make_target: MakeTarget,
                                          cck_settings: Settings, evidence: CaseEvidence) -> None:
    cck_client.require_kit("the case opens udp:// connections through the kit's client API")
    target = _managed(cck_make_target(_topology(case.params["nodes"], 500)))
    cluster = target.topology.cluster
    assert cluster is not None
    wait_ms = int(cck_settings.deadline(FIRST_S) * 1000)
    url = (f"udp://{cluster.group_address}:{cluster.group_port}?localBindAddress=127.0.0.1"
           f"&discoveryInitialWaitTimeout={wait_ms}")
    settings = client_settings(target, RESTARTING, reconnect_attempts=0)
    nodes = {(spec.host, spec.port) for spec in target.topology.nodes}

    async def scenario() -> None:
        used: list[str] = []
        for i in range(case.params["connections"]):
            async with await connect(url, settings=settings) as connection:
                peer = connection.peer
                used.append(peer)
                host, _, port = peer.rpartition(":")
                assert (host, int(port)) in nodes, f"connected to {peer}, which is not a node of the cluster {nodes}"
                await _round_trip(connection, f"cck.{case.id}.{i}", cck_settings.deadline(RECEIVE_S))
        evidence.note("connected_to", used)

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- injected

INJECTED = tuple(
    Case(f"discovery.inject.{n}", clause,
         "one node whose cluster connection uses a discovery group (broadcasts every 500 ms); the kit broadcasts, "
         f"every 500 ms on the same group, a datagram with {who} and a connector naming a TCP listener of the kit",
         expectation, needs=("config",), params={"own_id": own_id})
    for n, (clause, who, own_id, expectation) in enumerate((
        ("discovery.cluster-finds", "a node ID of its own (a fake node)", False,
         "the node's cluster connection opens a TCP connection to the fake node's connector within 20 s"),
        ("discovery.own-node-ignored", "the node's own node ID (read from its broadcasts)", True,
         "no connection reaches the listener within 6 s (twelve broadcasts): a datagram with the receiver's own "
         "node ID is ignored"),
    ), 1)
)  # fmt: skip
#: how long the kit's datagrams must go unanswered for the own node ID to count as ignored
IGNORED_S = 6.0
#: how long, once a fake node's entry must have expired, the kit watches for connections to it
EXPIRED_QUIET_S = 2.0
#: a node announced again, once the broker runs, is connected to within this (both brokers take well under 1 s)
FOUND_AGAIN_S = 10.0


class _Doorbell:
    """A TCP listener that only records who connected (the fake node's connector)."""

    def __init__(self) -> None:
        self.rung: list[float] = []
        self.event = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> _Doorbell:
        self.server = await asyncio.start_server(self._connected, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def _connected(self, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.rung.append(time.monotonic())
        self.event.set()
        writer.close()

    async def wait(self, seconds: float, *, after: float = -math.inf) -> bool:
        """Whether a connection arrives later than ``after`` (monotonic), waiting at most ``seconds``."""
        return await signalled(self.event, lambda: any(t > after for t in self.rung), seconds)

    def between(self, start: float, end: float) -> list[float]:
        """The connections that arrived in ``(start, end]`` (monotonic)."""
        return [t for t in self.rung if start < t <= end]


class _Announcer:
    """Broadcasts one datagram every ``period_s`` until stopped; keeps how many went out and when the last did."""

    def __init__(self, group: tuple[str, int], datagram: bytes, period_s: float) -> None:
        self.group = group
        self.datagram = datagram
        self.period_s = period_s
        self.sent = 0
        self.last_sent: float | None = None  # monotonic
        self._stop = asyncio.Event()
        self._task: asyncio.Future[None] | None = None

    async def __aenter__(self) -> _Announcer:
        self._task = asyncio.ensure_future(self._run())
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Stop broadcasting (idempotent); a failure of the sender is raised here."""
        self._stop.set()
        if self._task is not None:
            task, self._task = self._task, None
            await task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        sock = open_multicast_sender(socket.AF_INET, "127.0.0.1")
        try:
            while not self._stop.is_set():
                await loop.sock_sendto(sock, self.datagram, self.group)
                self.sent += 1
                self.last_sent = time.monotonic()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.period_s)
        finally:
            sock.close()


@cases(*INJECTED)
@pytest.mark.cck_fresh_broker  # the fake node stays in the node's discovery table: no later case gets this broker
def test_cluster_connection_discovers_injected_node(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                                    evidence: CaseEvidence) -> None:
    target = _managed(cck_make_target(_topology(1, 500)))
    node = target.topology.nodes[0]
    cluster = target.topology.cluster
    assert cluster is not None

    async def scenario() -> None:
        async with _listener(target) as listener:
            own = (await _datagrams(listener, node, 1, cck_settings.deadline(FIRST_S)))[0]
        assert own.datagram is not None, own.error
        node_id = own.datagram.node_id if case.params["own_id"] else str(uuid.uuid4())
        async with _Doorbell() as doorbell:
            port = doorbell.port  # kept: the listener is closed when the verdict is written
            fake = DiscoveryDatagram(node_id, str(uuid.uuid4()), (_fake_connector(target, port),))
            started = time.monotonic()
            async with _Announcer((cluster.group_address, cluster.group_port), encode_discovery(fake),
                                  0.5) as announcer:
                wait_s = IGNORED_S if case.params["own_id"] else cck_settings.deadline(FIRST_S)
                rang = await doorbell.wait(wait_s)
            sent = announcer.sent
        evidence.note("node_id", node_id)
        evidence.note("datagrams_sent", sent)
        evidence.note("connected_after_s", round(doorbell.rung[0] - started, 3) if doorbell.rung else None)
        if case.params["own_id"]:
            assert not rang, (f"the node connected to the connector of a datagram carrying its own node ID "
                              f"{node_id} ({sent} datagrams sent)")
        else:
            assert rang, (f"the node's cluster connection did not connect to the fake node {node_id} at "
                          f"127.0.0.1:{port} within {wait_s:.0f} s ({sent} datagrams sent)")

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- expiry

EXPIRY = tuple(
    Case(f"discovery.expiry.{n}", "discovery.refresh-timeout",
         f"one node whose cluster connection uses a discovery group with refresh-timeout {refresh} ms (its own "
         "broadcasts, every 500 ms, reach that group); the kit announces a fake node every 500 ms, its connector a "
         "TCP listener of the kit that closes each connection, until the node connects to it; then the kit is "
         f"silent for refresh-timeout plus {EXPIRED_QUIET_S:.0f} s and more, and announces the same node again",
         "the fake node's entry is dropped after refresh-timeout: once refresh-timeout and one broadcast period "
         "(within the run's tolerance) have passed since its last datagram, no connection to its connector begins "
         f"in the next {EXPIRED_QUIET_S:.0f} s; and the announcement after the silence is a node found anew: the "
         f"node connects to it again within {FOUND_AGAIN_S:.0f} s",
         needs=("config",), params={"refresh": refresh})
    for n, refresh in enumerate((2000, 4000), 1)
)  # fmt: skip


@cases(*EXPIRY)
@pytest.mark.cck_alone  # the expiry is judged against the refresh timeout plus the run's tolerance
@pytest.mark.cck_fresh_broker  # the fake node stays in the node's discovery table: no later case gets this broker
def test_discovery_entry_expires(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                 evidence: CaseEvidence) -> None:
    refresh_ms: int = case.params["refresh"]
    period_ms = 500
    spec = ClusterSpec(discovery="udp", broadcast_period_ms=period_ms, refresh_timeout_ms=refresh_ms)
    target = _managed(cck_make_target(Topology.cluster_of(1, spec)))
    node = target.topology.nodes[0]
    cluster = target.topology.cluster
    assert cluster is not None
    group = (cluster.group_address, cluster.group_port)

    async def scenario() -> None:
        async with _listener(target) as listener:
            await _datagrams(listener, node, 1, cck_settings.deadline(FIRST_S))
        async with _Doorbell() as doorbell:
            port = doorbell.port
            connector = _fake_connector(target, port)
            fake = encode_discovery(DiscoveryDatagram(str(uuid.uuid4()), str(uuid.uuid4()), (connector,)))
            started = time.monotonic()
            async with _Announcer(group, fake, period_ms / 1000) as first:
                found = await doorbell.wait(cck_settings.deadline(FIRST_S))
            assert found, (f"the node's cluster connection never connected to the fake node at 127.0.0.1:"
                           f"{port} ({first.sent} datagrams in {time.monotonic() - started:.1f} s): "
                           "nothing to expire")
            assert first.last_sent is not None
            # The entry goes once a datagram (the node's own, every period) arrives after last + refresh-timeout.
            slack_ms = period_ms + cck_settings.tolerance.allowed_ms(refresh_ms)
            dropped_by = first.last_sent + (refresh_ms + slack_ms) / 1000
            quiet_until = dropped_by + EXPIRED_QUIET_S
            # watched to the end of the window, or until the first connection that should not be
            await doorbell.wait(max(0.0, quiet_until - time.monotonic()), after=dropped_by)
            stale = doorbell.between(dropped_by, quiet_until)
            again_from = time.monotonic()
            async with _Announcer(group, fake, period_ms / 1000) as second:
                again = await doorbell.wait(cck_settings.deadline(FOUND_AGAIN_S), after=again_from)
        evidence.note("fake_node_connector", f"127.0.0.1:{port}")
        evidence.note("connections_s", [round(t - started, 3) for t in doorbell.rung])
        evidence.note("last_datagram_s", round(first.last_sent - started, 3))
        evidence.note("dropped_by_s", round(dropped_by - started, 3))
        evidence.note("announced_again_s", round(again_from - started, 3))
        evidence.note("datagrams_sent", [first.sent, second.sent])
        problems = []
        if stale:
            problems.append(f"{len(stale)} connection(s) to the fake node's connector began after its entry should "
                            f"have expired (at {[round(t - first.last_sent, 3) for t in stale]} s after its last "
                            f"datagram; refresh-timeout {refresh_ms} ms)")
        if not again:
            problems.append(f"no connection within {cck_settings.deadline(FOUND_AGAIN_S):.0f} s of announcing the "
                            "fake node again after its entry expired: it was not found anew")
        assert not problems, " | ".join(problems)

    run(cck_settings, scenario(), CASE_S)
