"""The conformance targets: the topology rendered to one broker.xml both brokers read, the
reference broker and real Artemis (2.44.0, 2.28.0) run, killed and restarted with their data, the
url target refusing control by capability name, and every wait bounded by its deadline."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import select
import subprocess
import sys
import textwrap
import time
import uuid
import zipfile
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from lxml import etree

from cck.codec import CoreMessage
from cck.conformance.artemis.distribution import load_versions
from cck.conformance.targets import (
    ALL_CAPABILITIES,
    KILL,
    LEGACY_LOCK_MANAGER_CLASS,
    AddressSetting,
    AddressSpec,
    ArtemisTarget,
    ClusterSpec,
    HASpec,
    ManagedNode,
    ManagedTarget,
    NodeSpec,
    NodeStartError,
    NodeStopError,
    ProcessNode,
    QueueSpec,
    ReferenceTarget,
    SecurityRule,
    SecuritySpec,
    Target,
    TargetError,
    Topology,
    UnsupportedByTarget,
    UrlTarget,
    User,
    free_ports,
    kit_version,
    make_target,
    render_broker_xml,
    render_etc,
    write_etc,
)
from cck.conformance.targets._topology import ScaleDownSpec
from cck.reference.client import BrokerRefused, ClientSettings, connect
from cck.reference.config import SecurityModel, load_config
from cck.reference.config._login import parse_properties

CLIENT_DEADLINE_S = 30.0
ALICE = User("alice", "s3cret pass", ("amq",))
SECURED = SecuritySpec(enabled=True, users=(ALICE,))


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, CLIENT_DEADLINE_S))


def _settings(target: Target) -> ClientSettings:
    # Artemis refuses a client announcing a newer protocol than its own (2.28.0 speaks 134)
    return ClientSettings() if target.protocol_version is None else ClientSettings(version=target.protocol_version)


async def _session(url: str) -> None:
    conn = await connect(url)
    try:
        await conn.create_session()
    finally:
        await conn.close()


async def _send_durable(target: Target, queue: str, body: bytes, user: User | None = None) -> None:
    conn = await connect(target.url, settings=_settings(target))
    try:
        session = await conn.create_session(username=user.name if user else None,
                                            password=user.password if user else None)
        await session.create_queue(queue)
        await session.create_producer(queue).send(CoreMessage(body, durable=True))
    finally:
        await conn.close()


async def _receive(target: Target, queue: str, user: User | None = None, wait_s: float = 5) -> bytes | None:
    conn = await connect(target.url, settings=_settings(target))
    try:
        session = await conn.create_session(username=user.name if user else None,
                                            password=user.password if user else None)
        consumer = await session.create_consumer(queue)
        session.start()
        delivery = await consumer.receive(wait_s)
        if delivery is None:
            return None
        await consumer.acknowledge(delivery)
        return delivery.message.body
    finally:
        await conn.close()


def _resolved(topology: Topology, workdir: Path) -> Topology:
    return topology.resolve(workdir, free_ports, free_ports)


TOPOLOGIES = {
    "single-default": Topology(),
    "secured-with-guest-and-queues": Topology.single(
        NodeSpec(persistence=False, connection_ttl_override_ms=5000, connection_ttl_check_interval_ms=500),
        security=SecuritySpec(enabled=True, users=(ALICE, User("bob", "pässword=:#", ("amq", "ops"))),
                              guest_role="guests",
                              rules=(SecurityRule("#", "send", ("amq",)), SecurityRule("ops.#", "consume", ("ops",)))),
        addresses=(AddressSpec("orders", ("anycast", "multicast"), (
            QueueSpec("orders.eu", filter="region='eu' AND size < 10", max_consumers=2, purge_on_no_consumers=True),
            QueueSpec("orders.audit", routing="multicast", durable=False),
        )),),
        address_settings=(AddressSetting.of("#", max_delivery_attempts=3, redelivery_delay=100),
                          AddressSetting.of("orders.#", auto_create_queues=False)),
    ),
    "static-cluster-of-3": Topology.cluster_of(3),
    "udp-cluster-of-3": Topology.cluster_of(3, ClusterSpec(discovery="udp", message_load_balancing="STRICT")),
    "chain-of-3": Topology.chain_of(3, ClusterSpec(max_hops=2, passwords=(("node2", "odd-one-out"),))),
    "scale-down-groups-of-3": Topology.cluster_of(3, ClusterSpec(
        retry_interval_multiplier=1.5, max_retry_interval_ms=4000, initial_connect_attempts=3,
        scale_down=(ScaleDownSpec("node0", enabled=False, group_name="b"), ScaleDownSpec("node1", group_name="a"),
                    ScaleDownSpec("node2", enabled=False, group_name="a", targets=("node0",))))),
    "scale-down-udp-of-2": Topology.cluster_of(2, ClusterSpec(discovery="udp", scale_down=(ScaleDownSpec("node1"),))),
    "ha-shared-store-pair": Topology.ha_pair(HASpec(failover_on_shutdown=True)),
    "ha-replication-pair": Topology.ha_pair(HASpec("replication", allow_failback=False, check_for_live_server=True)),
    # the split-brain cases' pair: a lock manager, fast failure detection, each server reaching the other by a proxy
    "ha-lock-manager-pair-through-proxies": Topology.ha_pair(
        HASpec("replication", lock_manager=True),
        ClusterSpec(check_period_ms=1000, connection_ttl_ms=4000,
                    via=(("node0", "node1", "tcp://127.0.0.1:1101"), ("node1", "node0", "tcp://127.0.0.1:1100")))),
}


# --------------------------------------------------------------------------- topology and broker.xml


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_rendered_config_is_read_by_the_reference_broker_without_warnings(name: str, tmp_path: Path) -> None:
    topology = _resolved(TOPOLOGIES[name], tmp_path)
    for node in topology.nodes:
        broker_xml = write_etc(topology, node.name, tmp_path / node.name / "etc", max_disk_usage=None)
        etree.parse(str(broker_xml))  # well-formed on disk, not only as a string
        config = load_config(broker_xml)
        assert config.warnings == (), [str(w) for w in config.warnings]
        assert config.name == node.name
        [acceptor] = config.acceptors
        assert (acceptor.host, acceptor.port, acceptor.protocols) == (node.host, node.port, ("CORE",))
        assert config.journal.persistence_enabled is node.persistence
        assert node.data_dir is not None
        assert Path(config.journal.journal_directory) == node.data_dir / "journal"
        assert config.connection_ttl_override == node.connection_ttl_override_ms
        assert config.connection_ttl_check_interval == node.connection_ttl_check_interval_ms
        assert config.security_enabled is topology.security.enabled
        assert [a.name for a in config.addresses] == [a.name for a in topology.addresses]
        assert [s.match for s in config.address_settings] == [s.match for s in topology.address_settings]
        if topology.cluster is not None:
            [cluster] = config.cluster_connections
            assert cluster.connector_ref == node.name
            assert cluster.message_load_balancing.value == topology.cluster.message_load_balancing
            peers = sorted(topology.cluster.static_targets(node.name, tuple(n.name for n in topology.nodes)))
            assert config.cluster_password == topology.cluster.password_of(node.name)
            if topology.cluster.discovery == "static":
                assert sorted(cluster.static_connectors) == peers
                assert cluster.allow_direct_connections_only is (topology.cluster.allow_direct_connections_only
                                                                  and bool(peers))
            else:
                assert cluster.discovery_group_ref is not None
                assert config.broadcast_groups[0].group_port == topology.cluster.group_port


def test_security_files_let_the_same_users_in(tmp_path: Path) -> None:
    topology = _resolved(TOPOLOGIES["secured-with-guest-and-queues"], tmp_path)
    config = load_config(write_etc(topology, "node0", tmp_path / "etc"))
    security = SecurityModel(config)
    bob = security.authenticate("bob", "pässword=:#")
    assert bob is not None
    assert bob.roles == {"amq", "ops"}
    assert security.authenticate("alice", "s3cret pass") is not None
    assert security.authenticate("alice", "wrong") is not None  # the guest module is "sufficient" too
    guest = security.authenticate(None, None)
    assert guest is not None
    assert guest.guest
    # the queue details made it through
    [orders] = config.addresses
    eu = next(q for q in orders.queues if q.name == "orders.eu")
    assert (eu.filter, eu.max_consumers, eu.purge_on_no_consumers) == ("region='eu' AND size < 10", 2, True)
    audit = next(q for q in orders.queues if q.name == "orders.audit")
    assert (audit.routing_type.value, audit.durable) == ("MULTICAST", False)
    assert config.address_settings_for("x").max_delivery_attempts == 3


def test_users_file_escapes_what_java_properties_would_misread(tmp_path: Path) -> None:
    odd = User("we:ird=name", " lead\\ing€", ("amq",))
    files = render_etc(_resolved(Topology.single(security=SecuritySpec(True, (odd,))), tmp_path), "node0")
    assert files.users.isascii()  # Artemis reads the file as ISO-8859-1, the reference broker as UTF-8
    entries = {key: value for key, value, _ in parse_properties(files.users)}
    assert entries == {"we:ird=name": " lead\\ing€"}


def test_chain_renders_one_way_static_connectors_with_direct_connections_only(tmp_path: Path) -> None:
    topology = _resolved(Topology.chain_of(3, ClusterSpec(max_hops=2, passwords=(("node2", "odd"),))), tmp_path)
    ns = {"c": "urn:activemq:core"}
    for node, targets in (("node0", ["node1"]), ("node1", ["node2"]), ("node2", [])):
        core = etree.fromstring(render_broker_xml(topology, node).encode()).find("c:core", ns)
        assert core is not None
        [connection] = core.findall("c:cluster-connections/c:cluster-connection", ns)
        assert connection.findtext("c:max-hops", namespaces=ns) == "2"
        static = connection.find("c:static-connectors", ns)
        if targets:
            assert static is not None
            assert static.get("allow-direct-connections-only") == "true"
            assert [e.text for e in static.findall("c:connector-ref", ns)] == targets
        else:
            assert static is None  # the XSD needs at least one connector-ref: the chain's end names nobody
        assert core.findtext("c:cluster-password", namespaces=ns) == ("odd" if node == "node2" else "cluster-secret")
        # every node still has a connector for each node (its own is the cluster connection's connector-ref)
        assert len(core.findall("c:connectors/c:connector", ns)) == 3


def test_symmetric_cluster_names_every_peer_without_the_direct_only_attribute(tmp_path: Path) -> None:
    topology = _resolved(Topology.cluster_of(3), tmp_path)
    ns = {"c": "urn:activemq:core"}
    core = etree.fromstring(render_broker_xml(topology, "node1").encode()).find("c:core", ns)
    assert core is not None
    static = core.find("c:cluster-connections/c:cluster-connection/c:static-connectors", ns)
    assert static is not None
    assert static.get("allow-direct-connections-only") is None
    assert [e.text for e in static.findall("c:connector-ref", ns)] == ["node0", "node2"]


def test_cluster_links_choose_static_targets() -> None:
    spec = ClusterSpec(links=(("b", "a"), ("b", "c"), ("c", "a")))
    assert spec.static_targets("b", ("a", "b", "c")) == ("a", "c")
    assert spec.static_targets("a", ("a", "b", "c")) == ()
    assert ClusterSpec().static_targets("b", ("a", "b", "c")) == ("a", "c")
    assert ClusterSpec(passwords=(("b", "x"),)).password_of("b") == "x"
    assert ClusterSpec(passwords=(("b", "x"),)).password_of("a") == "cluster-secret"
    chain = Topology.chain_of(4).cluster
    assert chain is not None
    assert chain.links == (("node0", "node1"), ("node1", "node2"), ("node2", "node3"))
    assert chain.allow_direct_connections_only


def test_cluster_connection_renders_the_bridge_backoff(tmp_path: Path) -> None:
    ns = {"c": "urn:activemq:core"}
    for spec, expected in ((ClusterSpec(), ("1.0", "2000", "-1")),
                           (ClusterSpec(retry_interval_multiplier=2.5, max_retry_interval_ms=7000,
                                        initial_connect_attempts=0), ("2.5", "7000", "0"))):
        topology = _resolved(Topology.cluster_of(2, spec), tmp_path)
        core = etree.fromstring(render_broker_xml(topology, "node0").encode()).find("c:core", ns)
        assert core is not None
        [connection] = core.findall("c:cluster-connections/c:cluster-connection", ns)
        names = [etree.QName(e).localname for e in connection if isinstance(e.tag, str)]
        # Artemis 2.28.0's XSD is a sequence: this order, between retry-interval and reconnect-attempts
        at = names.index("retry-interval")
        assert names[at:at + 5] == ["retry-interval", "retry-interval-multiplier", "max-retry-interval",
                                    "initial-connect-attempts", "reconnect-attempts"]
        assert tuple(connection.findtext(f"c:{n}", namespaces=ns) for n in names[at + 1:at + 4]) == expected
        config = load_config(write_etc(topology, "node0", tmp_path / "etc"))
        [cluster] = config.cluster_connections
        assert (cluster.retry_interval_multiplier, cluster.max_retry_interval, cluster.initial_connect_attempts) == (
            spec.retry_interval_multiplier, spec.max_retry_interval_ms, spec.initial_connect_attempts)


def test_topology_scanner_attempts_render_only_where_the_broker_has_a_scanner(tmp_path: Path) -> None:
    ns = {"c": "urn:activemq:core"}

    def scanner(spec: ClusterSpec, *, has_scanner: bool) -> list[str]:
        topology = _resolved(Topology.cluster_of(2, spec), tmp_path)
        core = etree.fromstring(render_broker_xml(topology, "node0", topology_scanner=has_scanner).encode())
        return [e.text or "" for e in core.iterfind(".//c:cluster-connection/c:topology-scanner-attempts", ns)]

    assert scanner(ClusterSpec(topology_scanner_attempts=0), has_scanner=True) == ["0"]
    assert scanner(ClusterSpec(topology_scanner_attempts=-1), has_scanner=True) == ["-1"]
    assert scanner(ClusterSpec(), has_scanner=True) == []  # the broker's default
    assert scanner(ClusterSpec(topology_scanner_attempts=0), has_scanner=False) == []  # none to turn off
    with pytest.raises(ValueError, match="topology_scanner_attempts=5: this broker has no topology scanner"):
        scanner(ClusterSpec(topology_scanner_attempts=5), has_scanner=False)
    with pytest.raises(ValueError, match="topology_scanner_attempts must be -1"):
        ClusterSpec(topology_scanner_attempts=-2)


def test_a_pair_under_a_lock_manager_reaching_each_other_through_proxies(tmp_path: Path) -> None:
    topology = _resolved(TOPOLOGIES["ha-lock-manager-pair-through-proxies"], tmp_path)
    primary_data = topology.node("node0").data_dir
    assert primary_data is not None
    for node, peer, proxy in (("node0", "node1", "tcp://127.0.0.1:1101"), ("node1", "node0", "tcp://127.0.0.1:1100")):
        config = load_config(write_etc(topology, node, tmp_path / node / "etc"))
        connectors = {c.name: f"tcp://{c.host}:{c.port}" for c in config.connectors}
        assert connectors == {node: topology.node(node).url, peer: proxy}  # its own acceptor, the peer by the proxy
        [cluster] = config.cluster_connections
        assert (cluster.check_period, cluster.connection_ttl) == (1000, 4000)
        lock = config.ha_policy.lock_manager
        assert lock is not None
        assert lock.locks_folder == str(primary_data.parent / "locks")  # one folder for the pair, made beforehand
        assert (primary_data.parent / "locks").is_dir()
    legacy = render_broker_xml(topology, "node1", lock_manager_class=LEGACY_LOCK_MANAGER_CLASS)
    assert f"<class-name>{LEGACY_LOCK_MANAGER_CLASS}</class-name>" in legacy
    assert "<backup>" in legacy
    assert "<slave>" not in legacy  # the lock-manager policy is only spelt primary/backup
    with pytest.raises(ValueError, match="a lock manager is a replication setting"):
        HASpec("shared-store", lock_manager=True)
    with pytest.raises(ValueError, match="a link is given twice"):
        ClusterSpec(via=(("node0", "node1", "tcp://a:1"), ("node0", "node1", "tcp://b:2")))
    with pytest.raises(ValueError, match="the cluster names node"):
        Topology.ha_pair(cluster=ClusterSpec(via=(("node0", "node7", "tcp://a:1"),)))


def test_scale_down_renders_a_live_only_ha_policy_per_node(tmp_path: Path) -> None:
    topology = _resolved(TOPOLOGIES["scale-down-groups-of-3"], tmp_path)
    ns = {"c": "urn:activemq:core"}
    # node -> (enabled, group-name, connectors): node1 scales down (to every other node, in topology order),
    # node0 and node2 only advertise a group; node2's explicit targets are rendered although it is disabled
    expected = {"node0": ("false", "b", []), "node1": ("true", "a", ["node0", "node2"]),
                "node2": ("false", "a", ["node0"])}
    for node, (enabled, group, connectors) in expected.items():
        core = etree.fromstring(render_broker_xml(topology, node).encode()).find("c:core", ns)
        assert core is not None
        [policy] = core.findall("c:ha-policy/*", ns)
        assert etree.QName(policy).localname == "live-only"
        scale = policy.find("c:scale-down", ns)
        assert scale is not None
        assert scale.findtext("c:enabled", namespaces=ns) == enabled
        assert scale.findtext("c:group-name", namespaces=ns) == group
        assert [e.text for e in scale.findall("c:connectors/c:connector-ref", ns)] == connectors
        assert scale.find("c:discovery-group-ref", ns) is None
        config = load_config(write_etc(topology, node, tmp_path / node / "etc", max_disk_usage=None))
        assert config.warnings == ()
        read = config.ha_policy.scale_down
        assert read is not None
        assert (read.enabled, read.group_name, list(read.connectors)) == (enabled == "true", group, connectors)
    # a node without a policy gets no <ha-policy>; under UDP discovery the scale-down names the discovery group
    plain = _resolved(Topology.cluster_of(2), tmp_path)
    assert "<ha-policy>" not in render_broker_xml(plain, "node1")
    udp = _resolved(TOPOLOGIES["scale-down-udp-of-2"], tmp_path)
    assert "<ha-policy>" not in render_broker_xml(udp, "node0")
    core = etree.fromstring(render_broker_xml(udp, "node1").encode()).find("c:core", ns)
    assert core is not None
    ref = core.find("c:ha-policy/c:live-only/c:scale-down/c:discovery-group-ref", ns)
    assert ref is not None
    assert ref.get("discovery-group-name") == "cluster-discovery"
    config = load_config(write_etc(udp, "node1", tmp_path / "udp" / "etc"))
    assert config.ha_policy.scale_down is not None
    assert config.ha_policy.scale_down.discovery_group_ref == "cluster-discovery"


@pytest.mark.parametrize("policy", ["shared-store", "replication"])
def test_an_ha_pair_renders_master_and_slave_and_shares_the_store_only_when_it_should(policy: str,
                                                                                      tmp_path: Path) -> None:
    topology = _resolved(Topology.ha_pair(HASpec(policy)), tmp_path)  # type: ignore[arg-type]
    primary, backup = topology.nodes
    assert (primary.data_dir == backup.data_dir) is (policy == "shared-store")
    configs = {n.name: load_config(write_etc(topology, n.name, tmp_path / n.name / "etc")) for n in topology.nodes}
    assert (configs["node0"].ha_policy.kind, configs["node0"].ha_policy.role) == (policy, "primary")
    assert (configs["node1"].ha_policy.kind, configs["node1"].ha_policy.role) == (policy, "backup")
    assert "<master>" in render_broker_xml(topology, "node0")
    assert "<slave>" in render_broker_xml(topology, "node1")
    assert HASpec().role_of("node1") == ("backup", "node0")
    assert HASpec().role_of("node7") is None


def test_scale_down_spec_chooses_its_connectors() -> None:
    nodes = ("node0", "node1", "node2")
    assert ScaleDownSpec("node1").connectors(nodes, "static") == ("node0", "node2")
    assert ScaleDownSpec("node1", targets=("node2",)).connectors(nodes, "static") == ("node2",)
    assert ScaleDownSpec("node1").connectors(nodes, "udp") == ()
    assert ScaleDownSpec("node1").uses_discovery("udp")
    assert not ScaleDownSpec("node1", targets=("node0",)).uses_discovery("udp")
    assert ScaleDownSpec("node1", enabled=False, group_name="g").connectors(nodes, "static") == ()
    assert not ScaleDownSpec("node1", enabled=False, group_name="g").uses_discovery("udp")
    spec = ClusterSpec(scale_down=(ScaleDownSpec("node1", group_name="a"),))
    assert spec.scale_down_of("node1") == ScaleDownSpec("node1", group_name="a")
    assert spec.scale_down_of("node0") is None


def test_render_needs_a_resolved_topology() -> None:
    with pytest.raises(ValueError, match="resolved"):
        render_broker_xml(Topology(), "node0")


def test_resolve_picks_distinct_ports_and_keeps_fixed_ones(tmp_path: Path) -> None:
    fixed = free_ports(1)[0]
    topology = Topology((NodeSpec("a", port=fixed), NodeSpec("b"), NodeSpec("c")), cluster=ClusterSpec())
    resolved = _resolved(topology, tmp_path)
    ports = [n.port for n in resolved.nodes]
    assert ports[0] == fixed
    assert len(set(ports)) == 3
    assert 0 not in ports
    assert resolved.cluster is not None
    assert resolved.cluster.group_port != 0
    assert resolved.nodes[1].data_dir == (tmp_path / "b" / "data").absolute()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Topology(()), "at least one node"),
        (lambda: Topology((NodeSpec("a"), NodeSpec("a"))), "duplicate node names"),
        (lambda: NodeSpec("../up"), "node name"),
        (lambda: NodeSpec(connection_ttl_override_ms=0), "-1 or > 0"),
        (lambda: NodeSpec(extra=(("bad name", "x"),)), "not an XML name"),
        (lambda: SecuritySpec(enabled=True), "nobody could log in"),
        (lambda: User("a,b", "p"), "user name"),
        (lambda: SecurityRule("#", "sendd", ("amq",)), "unknown permission"),
        (lambda: AddressSpec("a", ("anycast",), (QueueSpec("q", routing="multicast"),)), "is multicast"),
        (lambda: ClusterSpec(discovery="udp", links=(("node0", "node1"),)), "need discovery='static'"),
        (lambda: ClusterSpec(discovery="udp", allow_direct_connections_only=True), "needs discovery='static'"),
        (lambda: ClusterSpec(links=(("node0", "node0"),)), "two different node names"),
        (lambda: ClusterSpec(links=(("node0", "node1"), ("node0", "node1"))), "duplicate cluster links"),
        (lambda: ClusterSpec(passwords=(("node0", "a"), ("node0", "b"))), "two cluster passwords"),
        (lambda: Topology.cluster_of(2, ClusterSpec(links=(("node0", "node7"),))), "node7 that the topology"),
        (lambda: Topology.cluster_of(2, ClusterSpec(passwords=(("nodeX", "p"),))), "nodeX that the topology"),
        (lambda: Topology.chain_of(1), "at least two nodes"),
        (lambda: ClusterSpec(retry_interval_multiplier=0), "retry_interval_multiplier must be"),
        (lambda: ClusterSpec(retry_interval_multiplier=float("inf")), "retry_interval_multiplier must be"),
        (lambda: ClusterSpec(max_retry_interval_ms=0), "max_retry_interval_ms must be > 0"),
        (lambda: ClusterSpec(initial_connect_attempts=-2), "initial_connect_attempts must be -1"),
        (lambda: ScaleDownSpec("node1", enabled=False), "disabled and names no group-name"),
        (lambda: ScaleDownSpec("node1", targets=("node1",)), "cannot scale down to itself"),
        (lambda: ScaleDownSpec("node1", targets=()), "at least one node"),
        (lambda: ScaleDownSpec("node1", targets=("node0", "node0")), "duplicate scale-down targets"),
        (lambda: ScaleDownSpec("node1", group_name="a\nb"), "holds a newline"),
        (lambda: ClusterSpec(scale_down=(ScaleDownSpec("node1"), ScaleDownSpec("node1", group_name="a"))),
         "two scale-down policies"),
        (lambda: Topology.cluster_of(2, ClusterSpec(scale_down=(ScaleDownSpec("node5"),))), "node5 that the topology"),
        (lambda: Topology.cluster_of(2, ClusterSpec(scale_down=(ScaleDownSpec("node1", targets=("node9",)),))),
         "node9 that the topology"),
        (lambda: HASpec("colocated"), "is not 'shared-store' or 'replication'"),  # type: ignore[arg-type]
        (lambda: HASpec(pairs=()), "at least one"),
        (lambda: HASpec(pairs=(("node0", "node0"),)), "more than one HA pair, or paired with itself"),
        (lambda: HASpec(pairs=(("node0", "node1"), ("node1", "node2"))), "more than one HA pair"),
        (lambda: Topology(nodes=(NodeSpec("node0"), NodeSpec("node1")), ha=HASpec()), "need a cluster"),
        (lambda: dataclasses.replace(Topology.ha_pair(), ha=HASpec(pairs=(("node0", "node3"),))),
         "node3 that the topology"),
        (lambda: Topology.ha_pair(cluster=ClusterSpec(scale_down=(ScaleDownSpec("node1"),))), "one ha-policy"),
    ],
)
def test_topology_refuses_what_no_broker_could_run(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.artemis
@pytest.mark.parametrize("version", ["2.44.0", "2.28.0"])
@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_rendered_config_is_valid_for_artemis_schema(version: str, name: str, tmp_path: Path) -> None:
    from cck.conformance.artemis.distribution import ensure_distribution

    # Artemis validates <core> against this schema from its server jar when it starts
    jar = ensure_distribution(version).lib / f"artemis-server-{version}.jar"
    with zipfile.ZipFile(jar) as archive:
        archive.extractall(tmp_path / "jar", [n for n in archive.namelist() if n.startswith("schema/")])
    schema = etree.XMLSchema(etree.parse(str(tmp_path / "jar" / "schema" / "artemis-configuration.xsd")))
    topology = _resolved(TOPOLOGIES[name], tmp_path)
    for node in topology.nodes:
        root = etree.fromstring(render_broker_xml(topology, node.name).encode())
        core = root.find("{urn:activemq:core}core")
        assert core is not None
        assert schema.validate(core), schema.error_log


# --------------------------------------------------------------------------- url target and factory


def test_url_target_refuses_control_naming_the_capability() -> None:
    target = UrlTarget("tcp://broker.example:61616?callTimeout=5000", version="2.44.0")
    assert (target.name, target.version, target.capabilities) == ("url", "2.44.0", frozenset())
    assert target.url == "tcp://broker.example:61616?callTimeout=5000"
    node = target.nodes[0]
    for action, capability in [(node.kill, "kill"), (node.stop, "control"), (node.start, "control"),
                               (node.restart, "restart"), (target.stop, "control")]:
        with pytest.raises(UnsupportedByTarget, match=f"lacks the '{capability}' capability") as caught:
            action()
        assert caught.value.capability == capability
        assert caught.value.target == "url"
    with pytest.raises(UnsupportedByTarget, match="'kill'"):
        target.require(KILL)
    with target:  # start and close have nothing to do, and do not refuse
        pass
    assert UrlTarget("tcp://h:1").version == "unknown"


def test_url_target_of_a_pinned_version_speaks_its_protocol() -> None:
    """A url target declared as a pinned Artemis version gets that version's protocol (so the kit's clients do
    not offer a newer one the broker refuses); any other declared version leaves it unknown."""
    _, versions = load_versions()
    for version, info in versions.items():
        assert make_target("url", url="tcp://h:1", version=version).protocol_version == info.protocol_version
    assert make_target("url", url="tcp://h:1", version="9.9.9").protocol_version is None
    assert make_target("url", url="tcp://h:1").protocol_version is None


@pytest.mark.parametrize(
    ("url", "problem"),
    [("http://h:1", "scheme must be tcp"), ("tcp://:61616", "no host"), ("tcp://h", "no port"),
     ("tcp://h:99999", "bad broker URL"), ("tcp://h:1/path", "only tcp://host:port")],
)
def test_url_target_refuses_a_bad_url(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        UrlTarget(url)


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"kind": "activemq"}, "unknown target kind 'activemq'"),
        ({"kind": "url"}, "needs the broker's URL"),
        ({"kind": "url", "url": "tcp://h:1", "topology": Topology()}, "takes no topology"),
        ({"kind": "url", "url": "tcp://h:1", "workdir": Path()}, "takes no workdir"),
        ({"kind": "reference", "url": "tcp://h:1", "workdir": Path()}, "only for target 'url'"),
        ({"kind": "reference"}, "needs a workdir"),
        ({"kind": "reference", "version": "9.9", "workdir": Path()}, "kit's own"),
        ({"kind": "artemis", "version": "1.0.0", "workdir": Path()}, "not pinned: use one of 2.28.0, 2.44.0"),
    ],
)
def test_make_target_explains_bad_combinations(kwargs: dict[str, Any], problem: str) -> None:
    kind = kwargs.pop("kind")
    with pytest.raises(ValueError, match=re.escape(problem)):
        make_target(kind, **kwargs)


def test_make_target_builds_each_kind(tmp_path: Path) -> None:
    url = make_target("url", url="tcp://h:61616")
    assert isinstance(url, UrlTarget)
    reference = make_target("reference", workdir=tmp_path, version=kit_version())
    assert isinstance(reference, ReferenceTarget)
    assert reference.capabilities == ALL_CAPABILITIES
    artemis = make_target("artemis", workdir=tmp_path, version="2.28.0")
    assert isinstance(artemis, ArtemisTarget)
    assert (artemis.version, artemis.protocol_version) == ("2.28.0", 134)
    assert make_target("artemis", workdir=tmp_path).version == "2.44.0"  # the pins' default


def test_a_quick_start_artemis_target_runs_its_jvms_c1_only(tmp_path: Path) -> None:
    timed = make_target("artemis", workdir=tmp_path / "timed", topology=Topology.cluster_of(2))
    quick = make_target("artemis", workdir=tmp_path / "quick", topology=Topology.cluster_of(2),
                        quick_start=True)
    assert isinstance(timed, ArtemisTarget)
    assert isinstance(quick, ArtemisTarget)
    assert all("TieredStopAtLevel" not in node.java_args for node in timed.nodes)
    assert all(node.java_args.endswith(" -XX:TieredStopAtLevel=1") for node in quick.nodes)
    assert isinstance(make_target("reference", workdir=tmp_path / "ref", quick_start=True), ReferenceTarget)


# --------------------------------------------------------------------------- reference target


def test_reference_durable_message_survives_kill_and_start(tmp_path: Path) -> None:
    with ReferenceTarget(Topology(), tmp_path) as target:
        node = target.nodes[0]
        assert all(n.is_running for n in target.nodes)
        assert target.url.startswith("tcp://127.0.0.1:")
        run(_send_durable(target, "q", b"x"))
        node.kill()
        assert not node.is_running
        assert node.last_exit_code == -9
        node.start()
        assert node.url == target.url  # same port after a restart
        assert run(_receive(target, "q")) == b"x"
        assert "recovered" in node.logs()
        node.restart(graceful=True)
        assert node.last_exit_code == 0  # SIGTERM is a clean stop for the reference broker
        assert run(_receive(target, "q", wait_s=0.5)) is None  # acknowledged before the restart
    assert not node.is_running


def test_reference_security_comes_from_the_topology(tmp_path: Path) -> None:
    with ReferenceTarget(Topology.single(security=SECURED), tmp_path) as target:
        run(_send_durable(target, "secured", b"y", ALICE))
        with pytest.raises(BrokerRefused, match="SECURITY"):
            run(_send_durable(target, "secured", b"z", User("alice", "wrong")))
        assert run(_receive(target, "secured", ALICE)) == b"y"


def test_start_with_a_bad_config_fails_fast_with_the_log_tail(tmp_path: Path) -> None:
    bad = Topology.single(NodeSpec(extra=(("journal-min-files", "0"),)))
    target = ReferenceTarget(bad, tmp_path, start_deadline_s=20)
    started = time.monotonic()
    with pytest.raises(NodeStartError, match="exited with code 2") as caught:
        target.start()
    assert time.monotonic() - started < 20
    assert caught.value.node == "node0"
    assert "journal-min-files" in str(caught.value)  # the broker's own complaint, from the log tail
    assert not target.nodes[0].is_running
    target.close()


def test_failed_cluster_start_leaves_nothing_running(tmp_path: Path) -> None:
    topology = Topology((NodeSpec("good"), NodeSpec("bad", extra=(("journal-min-files", "0"),))))
    target = ReferenceTarget(topology, tmp_path)
    with pytest.raises(NodeStartError, match="node 'bad'"), target:
        pass
    assert not any(n.is_running for n in target.nodes)


def test_reference_cluster_nodes_start_and_stop_together(tmp_path: Path) -> None:
    with ReferenceTarget(Topology.cluster_of(3), tmp_path) as target:
        assert len(set(target.urls)) == 3
        assert all(n.is_running for n in target.nodes)
        for url in target.urls:
            run(_session(url))
        target.stop()
        assert [n.last_exit_code for n in target.nodes] == [0, 0, 0]
        target.node("node1").start()
        assert [n.is_running for n in target.nodes] == [False, True, False]


class _ScriptNode(ProcessNode):
    """A stand-in broker: a Python one-liner, to drive the deadlines without a real broker."""

    ready = re.compile(r"READY")
    script: ClassVar[str] = ""

    def _prepare(self) -> None:
        pass

    def _argv(self) -> list[str]:
        return [sys.executable, "-u", "-c", self.script]


class _SilentNode(_ScriptNode):
    script = "import signal; print('starting up'); signal.pause()"  # never says READY


class _StubbornNode(_ScriptNode):
    script = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('READY'); signal.pause()"


class _ScriptTarget(ManagedTarget):
    name = "script"

    def __init__(self, node_class: type[_ScriptNode], workdir: Path) -> None:
        self.node_class = node_class
        super().__init__("test", 0, Topology(), workdir)

    def _make_node(self, spec: NodeSpec, node_dir: Path) -> ManagedNode:
        return self.node_class(spec, self.topology, node_dir, start_deadline_s=1.0, stop_deadline_s=1.0)


def test_start_deadline_kills_a_broker_that_never_gets_ready(tmp_path: Path) -> None:
    target = _ScriptTarget(_SilentNode, tmp_path)
    started = time.monotonic()
    with pytest.raises(NodeStartError, match=r"not ready: .*within 1s; it was killed") as caught:
        target.start()
    assert time.monotonic() - started < 10
    assert "starting up" in caught.value.log_tail
    assert not target.nodes[0].is_running
    assert "starting up" in (tmp_path / "node0" / "broker.log").read_text()


def test_stop_deadline_kills_a_broker_that_ignores_sigterm(tmp_path: Path) -> None:
    with _ScriptTarget(_StubbornNode, tmp_path) as target:
        node = target.nodes[0]
        with pytest.raises(NodeStopError, match="node 'node0': ignored SIGTERM for 1s and was killed"):
            node.stop()
        assert not node.is_running
        assert node.last_exit_code == -9


def test_brokers_left_running_are_killed_at_interpreter_exit(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        from pathlib import Path
        from cck.conformance.targets import ReferenceTarget
        target = ReferenceTarget(workdir=Path({str(tmp_path)!r}))
        target.start()
        print(target.nodes[0]._process.pid, flush=True)
    """)  # exits without close()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    pid = int(done.stdout.strip())
    _wait_for_exit(pid, deadline_s=10)
    assert not _alive(pid), f"broker {pid} outlived the interpreter that started it"


def _wait_for_exit(pid: int, *, deadline_s: float) -> None:
    """Block until ``pid`` terminates or the deadline passes (a pidfd becomes readable when it exits)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([fd], [], [], deadline_s)
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (dead, not yet reaped by init) counts as gone
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


# --------------------------------------------------------------------------- Artemis


@pytest.fixture(scope="module")
def artemis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArtemisTarget]:
    # one instance for the module: creating and starting a JVM broker costs seconds
    target = ArtemisTarget(Topology.single(security=SECURED), tmp_path_factory.mktemp("artemis"), version="2.44.0")
    with target:
        yield target


@pytest.mark.artemis
def test_artemis_durable_message_survives_kill_and_start(artemis: ArtemisTarget) -> None:
    node = artemis.nodes[0]
    queue = f"q.{uuid.uuid4().hex[:8]}"
    run(_send_durable(artemis, queue, b"x", ALICE))
    node.kill()
    assert not node.is_running
    node.start()
    assert run(_receive(artemis, queue, ALICE)) == b"x"


@pytest.mark.artemis
def test_artemis_graceful_restart_keeps_port_and_data(artemis: ArtemisTarget) -> None:
    node = artemis.nodes[0]
    queue = f"q.{uuid.uuid4().hex[:8]}"
    run(_send_durable(artemis, queue, b"kept", ALICE))
    url = node.url
    node.restart(graceful=True)
    assert node.last_exit_code in (0, 143)
    assert node.url == url
    assert "AMQ221007" in node.logs()
    assert run(_receive(artemis, queue, ALICE)) == b"kept"


@pytest.mark.artemis
def test_artemis_runs_the_rendered_config_and_users(artemis: ArtemisTarget) -> None:
    node = artemis.nodes[0]
    assert isinstance(node, ManagedNode)
    etc = node.node_dir / "instance" / "etc"
    assert (etc / "broker.xml").read_text() == render_broker_xml(artemis.topology, "node0")
    assert "alice = s3cret\\ pass" not in (etc / "artemis-users.properties").read_text()  # only leading blanks escape
    assert "alice = s3cret pass" in (etc / "artemis-users.properties").read_text()
    with pytest.raises(BrokerRefused, match="SECURITY"):
        run(_send_durable(artemis, "refused", b"z", User("alice", "wrong")))


@pytest.mark.artemis
def test_artemis_2_28_starts_and_accepts_a_session(tmp_path: Path) -> None:
    with make_target("artemis", version="2.28.0", workdir=tmp_path) as target:
        assert target.protocol_version == 134
        queue = f"q.{uuid.uuid4().hex[:8]}"
        run(_send_durable(target, queue, b"old"))
        assert run(_receive(target, queue)) == b"old"
        assert "2.28.0" in target.nodes[0].logs()


@pytest.mark.parametrize("policy", ["shared-store", "replication"])
def test_a_backup_that_handed_back_is_passive_again_for_wait_active(policy: str, tmp_path: Path) -> None:
    ha = HASpec(policy, allow_failback=True, check_for_live_server=policy == "replication")  # type: ignore[arg-type]
    with ReferenceTarget(Topology.ha_pair(ha), tmp_path) as target:
        primary, backup = target.node("node0"), target.node("node1")
        with pytest.raises(NodeStartError, match="did not become active"):
            backup.wait_active(0.5)  # passive from the start
        primary.kill()
        backup.wait_active(20.0)  # took over
        primary.start()  # asks for its place back: the backup hands back and waits again
        primary.wait_active(20.0)
        with pytest.raises(NodeStartError, match="did not become active"):
            backup.wait_active(0.5)  # passive again, though it was active before
        if policy == "replication":  # a replication backup takes over only once it holds the primary's state again
            process = backup._process
            assert process is not None
            handed = max(i for i, line in enumerate(process.later_lines()) if "(handed back)" in line)
            process.wait_line(re.compile(r"waiting as the replication backup of node \S+\s*$"), 20.0, since=handed + 1)
        primary.kill()
        backup.wait_active(20.0)  # and takes over once more


def test_wait_synced_returns_once_a_replication_backup_holds_its_primary_s_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ReferenceTarget(Topology.ha_pair(HASpec("replication")), tmp_path) as target:
        primary, backup = target.node("node0"), target.node("node1")
        backup.wait_synced(20.0)  # its start already said so: at once
        backup.stop()
        with pytest.raises(NodeStartError, match="cannot synchronise"):
            backup.wait_synced(0.5)
        backup.start()
        backup.wait_synced(20.0)
        monkeypatch.setattr(type(primary), "synced", None)  # a kind of broker that prints no such line
        with pytest.raises(TargetError, match="says nothing the kit reads as synchronised"):
            primary.wait_synced(0.5)


def test_artemis_nodes_block_producers_only_on_a_full_disk(tmp_path: Path) -> None:
    topology = _resolved(Topology.single(), tmp_path)
    artemis = etree.fromstring(render_broker_xml(topology, "node0").encode())
    reference = etree.fromstring(render_broker_xml(topology, "node0", max_disk_usage=None).encode())
    namespace = {"c": "urn:activemq:core"}
    assert artemis.findtext("c:core/c:max-disk-usage", namespaces=namespace) == "100"
    assert reference.find("c:core/c:max-disk-usage", namespaces=namespace) is None
