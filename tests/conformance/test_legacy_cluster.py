"""The legacy servers (HornetQ 2.4.7.Final, Artemis 1.5.6) as clusters and HA pairs, through the launcher's "name",
"connectors", "cluster" and "ha" keys (``fixtures/java/legacy/src/cck/legacy/Config.java``).

For each kind: two nodes clustered by static connectors and by UDP discovery on loopback (ON_DEMAND: what is sent
to one node goes to the other, where the consumer is), a shared-store pair and a replicated pair (a durable
message sent to the primary, the primary killed, the backup active and the message received from it by the kit's
client).  The launcher prints ``cck legacy server waiting as backup (<kind> <version>)`` once a backup is passive,
``cck legacy server backup synchronised (<kind> <version>)`` once a replica has caught up, and the usual
``cck legacy server active on <host>:<port> (<kind> <version>)`` when it takes over.  The servers' own messages
waited for: ``HQ221027`` / ``AMQ221027`` (a cluster bridge connected).
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cck.codec import CoreMessage, TypedProperties
from cck.conformance.targets import free_ports
from cck.conformance.targets._legacy_launch import (
    READY_PREFIX,
    LegacyLaunch,
    legacy_argv,
)
from cck.conformance.targets._process import BrokerProcess, ExitedEarly, NotReady
from cck.reference.client import ClientSettings, Connection, connect
from tests.conformance import legacy_support
from tests.conformance.legacy_support import STOP_DEADLINE_S, LegacyProcess, needs_legacy

pytestmark = needs_legacy
launch = legacy_support.launch  # the fixture: each kind's launcher in turn
WAIT_S = 60.0  # each wait for a line: the machine is small and may be busy with another run
IO_TIMEOUT_S = 15.0
SCENARIO_DEADLINE_S = 180.0
QUEUE = "cck.legacy.cluster.q"
CLUSTER_USER, CLUSTER_PASSWORD = "cck-cluster", "cck-cluster-secret"
BACKUP_PREFIX = "cck legacy server waiting as backup"
SYNCHRONISED_PREFIX = "cck legacy server backup synchronised"
#: the first line a node prints: active, or passive as a backup
FIRST_LINE = re.compile(f"(?:{re.escape(READY_PREFIX)}|{re.escape(BACKUP_PREFIX)}).*")
ACTIVE = re.compile(re.escape(READY_PREFIX) + r"\S+:(\d+) .*")
SYNCHRONISED = re.compile(re.escape(SYNCHRONISED_PREFIX) + ".*")
#: BridgeImpl logs bridgeConnected (221027) once a cluster bridge to another node is up
BRIDGE_CONNECTED = re.compile(r"\b(?:HQ|AMQ)221027: Bridge .* is connected")
#: BackupManager logs backupAnnounced (221031) once a backup has told its live server (through the cluster
#: connection) that it is there
BACKUP_ANNOUNCED = re.compile(r"\b(?:HQ|AMQ)221031: backup announced")


class Node(LegacyProcess):
    """One server of a cluster or pair: its first line is the active or the backup line."""

    def __init__(self, launch: LegacyLaunch, tmp: Path, config: dict[str, Any]) -> None:
        self.name = str(config["name"])
        super().__init__(launch, config, tmp / f"{self.name}.json", tmp / f"{self.name}.log", ready=FIRST_LINE,
                         tail_lines=2000)
        self.first_line = ""

    def wait_first_line(self) -> str:
        try:
            self.first_line = self.process.wait_ready(WAIT_S).group(0)
        except (NotReady, ExitedEarly) as exc:
            raise AssertionError(f"{self.name} printed no first line ({exc}):\n{self.log()}") from None
        return self.first_line

    def wait_for(self, pattern: re.Pattern[str]) -> re.Match[str]:
        """The first line matching ``pattern``, before the first line or after it (waiting up to WAIT_S)."""
        for line in self.process.startup:
            match = pattern.search(line)
            if match:
                return match
        try:
            return self.process.wait_line(pattern, WAIT_S)
        except (NotReady, ExitedEarly) as exc:
            raise AssertionError(f"{self.name}: no line matching {pattern.pattern!r} ({exc}):\n{self.log()}") from None


@pytest.fixture
def nodes() -> Iterator[list[Node]]:
    """The nodes a test started; any still running at the end is stopped (and must exit 0)."""
    started: list[Node] = []
    yield started
    codes = {node.name: node.stop() for node in started if node.process.running}
    assert all(code == 0 for code in codes.values()), (codes, [node.log() for node in started])


def node_config(name: str, port: int, data_dir: Path, ports: dict[str, int], *,
                discovery: dict[str, Any] | None = None, ha: dict[str, Any] | None = None) -> dict[str, Any]:
    """``name`` listening on ``port``, clustered with the other nodes of ``ports`` (static connectors unless
    ``discovery``), ON_DEMAND, retrying for ever every 200 ms; ``QUEUE`` deployed."""
    others = [other for other in ports if other != name]
    return {
        "name": name, "host": "127.0.0.1", "port": port, "data_dir": str(data_dir), "persistence": True,
        "queues": [{"address": QUEUE, "name": QUEUE, "durable": True}],
        "connectors": {node: {"host": "127.0.0.1", "port": p} for node, p in ports.items()},
        "cluster": {
            "name": "cck-cluster", "connector": name,
            "static_connectors": None if discovery else others, "discovery": discovery,
            "message_load_balancing": "ON_DEMAND", "max_hops": 1, "retry_interval_ms": 200,
            "retry_interval_multiplier": 1.0, "max_retry_interval_ms": 1000, "reconnect_attempts": -1,
            "initial_connect_attempts": -1, "user": CLUSTER_USER, "password": CLUSTER_PASSWORD,
            "check_period_ms": None, "connection_ttl_ms": None, "allow_direct_connections_only": False,
        },
        "ha": ha,
    }  # fmt: skip


def settings_for(launch: LegacyLaunch) -> ClientSettings:
    """The kit's client announcing the server's version (124 HornetQ, 128 Artemis 1.5.6)."""
    return ClientSettings(version=launch.server.protocol_version, topology_timeout_ms=10_000, call_timeout_ms=10_000)


async def _connect(launch: LegacyLaunch, port: int) -> Connection:
    return await connect(f"tcp://127.0.0.1:{port}", settings=settings_for(launch), connect_timeout=IO_TIMEOUT_S)


def start_pair(launch: LegacyLaunch, tmp: Path, nodes: list[Node], configs: list[dict[str, Any]]) -> list[Node]:
    """Start every node at once, then wait for each one's first line."""
    started = [Node(launch, tmp, config) for config in configs]
    nodes.extend(started)
    for node in started:
        node.wait_first_line()
    return started


def forwarded(launch: LegacyLaunch, node0: Node, node1: Node) -> list[int]:
    """A consumer on node1; sends to node0 until one probe reaches it (node0 has learnt of the consumer), then ten
    messages to node0: the ``seq`` of those node1's consumer receives."""

    async def scenario() -> list[int]:
        receiving = await _connect(launch, node1.port)
        sending = await _connect(launch, node0.port)
        try:
            consumer_session = await receiving.create_session()
            consumer = await consumer_session.create_consumer(QUEUE)
            consumer_session.start()
            producer_session = await sending.create_session()
            producer = producer_session.create_producer(QUEUE)
            loop = asyncio.get_running_loop()
            end = loop.time() + WAIT_S
            probes = 0
            while True:  # each turn waits on the consumer, not on a clock
                assert loop.time() < end, f"no probe crossed the cluster in {WAIT_S:.0f}s ({probes} sent)"
                await producer.send(CoreMessage(b"probe", durable=False, properties=TypedProperties.of(probe=probes)))
                probes += 1
                delivery = await consumer.receive(1.0)
                if delivery is not None:
                    await consumer.acknowledge(delivery)
                    break
            for seq in range(10):
                await producer.send(CoreMessage(b"m", durable=True, properties=TypedProperties.of(seq=seq)))
            seqs: list[int] = []
            while len(seqs) < 10 and (delivery := await consumer.receive(IO_TIMEOUT_S)) is not None:
                await consumer.acknowledge(delivery)
                got = delivery.message.properties.get("seq")
                if isinstance(got, int):  # a late probe is skipped
                    seqs.append(got)
            await producer_session.close()
            await consumer_session.close()
            return seqs
        finally:
            await sending.close()
            await receiving.close()

    return asyncio.run(asyncio.wait_for(scenario(), SCENARIO_DEADLINE_S))


def _cluster_of_two(launch: LegacyLaunch, tmp: Path, nodes: list[Node],
                    discovery: dict[str, Any] | None) -> None:
    kind, version = launch.server.kind, launch.server.version
    port0, port1 = free_ports(2)
    ports = {"node0": port0, "node1": port1}
    node0, node1 = start_pair(launch, tmp, nodes, [
        node_config("node0", port0, tmp / "data0", ports, discovery=discovery),
        node_config("node1", port1, tmp / "data1", ports, discovery=discovery)])
    assert node0.first_line == f"{READY_PREFIX}127.0.0.1:{port0} ({kind} {version})"
    assert node1.first_line == f"{READY_PREFIX}127.0.0.1:{port1} ({kind} {version})"
    node0.wait_for(BRIDGE_CONNECTED)
    node1.wait_for(BRIDGE_CONNECTED)
    assert forwarded(launch, node0, node1) == list(range(10)), node0.log() + node1.log()


def test_a_cluster_of_static_connectors_forwards_to_the_consumer(launch: LegacyLaunch, tmp_path: Path,
                                                                 nodes: list[Node]) -> None:
    _cluster_of_two(launch, tmp_path, nodes, None)


def test_a_cluster_found_by_udp_discovery_forwards_to_the_consumer(launch: LegacyLaunch, tmp_path: Path,
                                                                   nodes: list[Node]) -> None:
    udp_port = free_ports(1, kind=socket.SOCK_DGRAM)[0]
    discovery = {"group_address": "231.7.7.7", "group_port": udp_port, "local_bind_address": "127.0.0.1",
                 "broadcast_period_ms": 500, "refresh_timeout_ms": 10_000}
    _cluster_of_two(launch, tmp_path, nodes, discovery)


def _failover(launch: LegacyLaunch, tmp: Path, nodes: list[Node], policy: str) -> None:
    """primary then backup (shared store: one data_dir), a durable message sent to the primary, the primary
    killed, the backup active, the message received from the backup."""
    kind, version = launch.server.kind, launch.server.version
    port0, port1 = free_ports(2)
    ports = {"primary": port0, "backup": port1}
    shared = policy == "shared-store"

    def ha(role: str) -> dict[str, Any]:
        return {"policy": policy, "role": role, "allow_failback": False, "failover_on_shutdown": False,
                "check_for_live_server": False}

    (primary,) = start_pair(launch, tmp, nodes, [
        node_config("primary", port0, tmp / "data0", ports, ha=ha("primary"))])
    assert primary.first_line == f"{READY_PREFIX}127.0.0.1:{port0} ({kind} {version})"
    (backup,) = start_pair(launch, tmp, nodes, [
        node_config("backup", port1, tmp / ("data0" if shared else "data1"), ports, ha=ha("backup"))])
    assert backup.first_line == f"{BACKUP_PREFIX} ({kind} {version})"
    if not shared:
        assert backup.wait_for(SYNCHRONISED).group(0) == f"{SYNCHRONISED_PREFIX} ({kind} {version})"
    backup.wait_for(BACKUP_ANNOUNCED)  # (a passive backup has no acceptor: the primary's bridge never connects)

    async def send() -> None:
        connection = await _connect(launch, port0)
        try:
            session = await connection.create_session()
            producer = session.create_producer(QUEUE)
            await producer.send(CoreMessage(b"kept by the backup", durable=True))  # blocking: journalled (replicated)
            await session.close()
        finally:
            await connection.close()

    asyncio.run(asyncio.wait_for(send(), SCENARIO_DEADLINE_S))
    assert primary.process.kill(STOP_DEADLINE_S) == -signal.SIGKILL
    active = backup.wait_for(ACTIVE)
    assert active.group(0) == f"{READY_PREFIX}127.0.0.1:{port1} ({kind} {version})", backup.log()

    async def receive() -> bytes | None:
        connection = await _connect(launch, port1)
        try:
            session = await connection.create_session()
            consumer = await session.create_consumer(QUEUE)
            session.start()
            delivery = await consumer.receive(IO_TIMEOUT_S)
            if delivery is not None:
                await consumer.acknowledge(delivery)
            await session.close()
            return None if delivery is None else delivery.message.body
        finally:
            await connection.close()

    assert asyncio.run(asyncio.wait_for(receive(), SCENARIO_DEADLINE_S)) == b"kept by the backup", backup.log()


def test_a_shared_store_backup_takes_over(launch: LegacyLaunch, tmp_path: Path, nodes: list[Node]) -> None:
    _failover(launch, tmp_path, nodes, "shared-store")


def test_a_replicating_backup_takes_over(launch: LegacyLaunch, tmp_path: Path, nodes: list[Node]) -> None:
    _failover(launch, tmp_path, nodes, "replication")


def _refused(launch: LegacyLaunch, tmp: Path, config: dict[str, Any]) -> str:
    """What the launcher says on exiting with 1 for ``config``."""
    path = tmp / "refused.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    tail: collections.deque[str] = collections.deque(maxlen=200)
    process = BrokerProcess(legacy_argv(launch, path), ready=FIRST_LINE, log_file=tmp / "refused.log", tail=tail)
    assert process.wait(STOP_DEADLINE_S) == 1, "".join(tail)
    return "".join(tail)


def test_a_misspelt_or_impossible_cluster_setting_is_refused(launch: LegacyLaunch, tmp_path: Path) -> None:
    port0, port1 = free_ports(2)
    config = node_config("node0", port0, tmp_path / "data", {"node0": port0, "node1": port1})
    config["cluster"]["max_hop"] = 1
    assert 'unknown key "max_hop" in cluster' in _refused(launch, tmp_path, config)
    config = node_config("node0", port0, tmp_path / "data", {"node0": port0, "node1": port1},
                         ha={"policy": "replication", "role": "backup"})
    config["cluster"] = None
    assert "ha with the replication policy needs a cluster" in _refused(launch, tmp_path, config)
    config = node_config("node0", port0, tmp_path / "data", {"node0": port0, "node1": port1})
    config["cluster"]["message_load_balancing"] = "OFF"
    if launch.server.kind == "hornetq":  # forward-when-no-consumers only: STRICT or ON_DEMAND
        assert "cluster.message_load_balancing OFF has no equivalent in HornetQ 2.4.7" in \
            _refused(launch, tmp_path, config)
