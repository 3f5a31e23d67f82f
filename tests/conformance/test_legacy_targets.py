"""HornetQ 2.4.7 and Artemis 1.5.6 as targets: what of a topology their launcher is told, what makes a case
UNSUPPORTED on them, and a node started, killed and started again with its data."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from cck.conformance.suite._security_kit import ManagementNames, management_names
from cck.conformance.targets import (
    LEGACY_SERVERS,
    PERMISSIONS,
    AddressSetting,
    Artemis1Target,
    ArtemisTarget,
    CertificateUser,
    ClusterSpec,
    HASpec,
    HornetQTarget,
    ManagedTarget,
    Node,
    NodeSpec,
    ReferenceTarget,
    ScaleDownSpec,
    SecurityRule,
    SecuritySpec,
    TlsSpec,
    Topology,
    UnsupportedByTarget,
    User,
    free_ports,
    make_target,
)
from cck.conformance.targets._legacy import legacy_config

needs_java = pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None,
                                reason="java and mvn are needed to fetch and run the older servers")


def resolved(topology: Topology, tmp_path: Path) -> Topology:
    return topology.resolve(tmp_path, free_ports, free_ports)


def test_a_single_node_is_rendered_with_what_the_old_servers_know(tmp_path: Path) -> None:
    topology = resolved(Topology.single(NodeSpec(connection_ttl_override_ms=5000, id_cache_size=7),
                                        security=SecuritySpec(enabled=True, users=(User("kit", "pw", ("r",)),))),
                        tmp_path)
    config = legacy_config("hornetq", topology, "node0")
    assert config["port"] == topology.nodes[0].port
    assert config["data_dir"] == str(topology.nodes[0].data_dir)
    assert config["connection_ttl_override_ms"] == 5000
    assert config["id_cache_size"] == 7
    assert config["users"] == [{"name": "kit", "password": "pw", "roles": ["r"]}]
    assert {q["name"] for q in config["queues"]} == {"DLQ", "ExpiryQueue"}
    # the default setting's auto-create/delete elements are left out; dead letters and expiry kept
    assert config["address_settings"] == {"#": {"dead_letter_address": "DLQ", "expiry_address": "ExpiryQueue"}}


@pytest.mark.parametrize("kind", ["hornetq", "artemis1"])
def test_the_delivery_count_can_be_stored_before_delivery(kind: str, tmp_path: Path) -> None:
    plain = resolved(Topology.single(), tmp_path)
    assert legacy_config(kind, plain, "node0")["persist_delivery_count_before_delivery"] is False
    first = resolved(Topology.single(NodeSpec(extra=(("persist-delivery-count-before-delivery", "true"),))), tmp_path)
    assert legacy_config(kind, first, "node0")["persist_delivery_count_before_delivery"] is True


def test_numbers_and_flags_of_address_settings_are_typed(tmp_path: Path) -> None:
    setting = AddressSetting.of("q.#", max_delivery_attempts=3, redelivery_delay=100, send_to_dla_on_no_route=True,
                                redistribution_delay=0)
    topology = resolved(Topology.single(address_settings=(setting,)), tmp_path)
    assert legacy_config("artemis1", topology, "node0")["address_settings"] == {
        "q.#": {"max_delivery_attempts": 3, "redelivery_delay_ms": 100, "send_to_dla_on_no_route": True,
                "redistribution_delay_ms": 0}}


MUTUAL = TlsSpec(Path("/stores/server.p12"), "secret", Path("/stores/clients.p12"))
RULES = (SecurityRule("#", "send", ("a",)), SecurityRule("#", "browse", ("a", "b")),
         SecurityRule("x.#", "createAddress", ("a",)), SecurityRule("x.#", "consume", ("b",)))


@pytest.mark.parametrize(("kind", "expected"), [
    # what the server lacks is dropped, the role and the match kept (the match still decides for its addresses)
    ("hornetq", {"#": {"a": ["send"], "b": []}, "x.#": {"a": [], "b": ["consume"]}}),
    ("artemis1", {"#": {"a": ["send", "browse"], "b": ["browse"]}, "x.#": {"a": [], "b": ["consume"]}}),
])
def test_security_rules_keep_the_permissions_the_server_has(tmp_path: Path, kind: str,
                                                             expected: dict[str, object]) -> None:
    security = SecuritySpec(enabled=True, users=(User("u", "p", ("a", "b")),), rules=RULES)
    assert legacy_config(kind, resolved(Topology.single(security=security), tmp_path), "node0")["security_settings"] \
        == expected


@pytest.mark.parametrize("kind", ["hornetq", "artemis1"])
def test_without_rules_every_role_may_do_what_the_server_has_on_every_address(tmp_path: Path, kind: str) -> None:
    security = SecuritySpec(enabled=True, users=(User("u", "p", ("r", "s")),), guest_role="g")
    config = legacy_config(kind, resolved(Topology.single(security=security), tmp_path), "node0")
    has = [p for p in PERMISSIONS if p in LEGACY_SERVERS[kind].permissions]
    assert config["security_settings"] == {"#": {"r": has, "s": has, "g": has}}
    assert config["guest_role"] == "g"
    assert (config["tls"], config["certificate_users"]) == (None, [])


def test_the_permissions_table_is_the_targets() -> None:
    hornetq, artemis1 = LEGACY_SERVERS["hornetq"].permissions, LEGACY_SERVERS["artemis1"].permissions
    assert set(PERMISSIONS) - hornetq == {"browse", "createAddress", "deleteAddress"}
    assert artemis1 == hornetq | {"browse"}
    assert (HornetQTarget.permissions, Artemis1Target.permissions) == (hornetq, artemis1)
    assert ReferenceTarget.permissions == ArtemisTarget.permissions == frozenset(PERMISSIONS)


def test_tls_and_certificate_users_are_rendered(tmp_path: Path) -> None:
    certified = (CertificateUser("c", "CN=cck client, O=Core Conformance Kit", ("r",)),)
    topology = resolved(Topology(tls=MUTUAL, security=SecuritySpec(enabled=True, certificate_users=certified)),
                        tmp_path)
    config = legacy_config("artemis1", topology, "node0")
    assert config["tls"] == {"keystore": "/stores/server.p12", "password": "secret",
                             "truststore": "/stores/clients.p12"}
    assert config["certificate_users"] == [{"name": "c", "dn": "CN=cck client, O=Core Conformance Kit",
                                            "roles": ["r"]}]
    server_only = resolved(Topology(tls=TlsSpec(Path("/s.p12"), "pw")), tmp_path)
    assert legacy_config("hornetq", server_only, "node0")["tls"] == {"keystore": "/s.p12", "password": "pw",
                                                                    "truststore": None}
    pattern = dataclasses.replace(topology, security=SecuritySpec(enabled=True, certificate_users=(
        CertificateUser("c", "/CN=cck .*/"),)))
    with pytest.raises(UnsupportedByTarget, match="matches the subject exactly"):
        legacy_config("artemis1", pattern, "node0")


def test_a_cluster_and_an_ha_pair_are_rendered(tmp_path: Path) -> None:
    topology = resolved(Topology.ha_pair(HASpec("replication"), ClusterSpec(via=(("node0", "node1", "tcp://127.0.0.1:9"),))),
                        tmp_path)
    primary, backup = legacy_config("artemis1", topology, "node0"), legacy_config("artemis1", topology, "node1")
    assert primary["connectors"]["node1"] == {"host": "127.0.0.1", "port": 9}  # node0 reaches node1 through the proxy
    assert backup["connectors"]["node0"] == {"host": "127.0.0.1", "port": topology.nodes[0].port}
    assert primary["cluster"]["static_connectors"] == ["node1"]
    assert primary["cluster"]["discovery"] is None
    assert (primary["ha"]["role"], backup["ha"]["role"]) == ("primary", "backup")
    discovered = resolved(Topology.cluster_of(2, ClusterSpec(discovery="udp")), tmp_path)
    cluster = legacy_config("hornetq", discovered, "node1")["cluster"]
    assert cluster["static_connectors"] is None
    assert cluster["discovery"]["group_port"] == discovered.cluster.group_port  # type: ignore[union-attr]


def test_artemis_1_scales_down_as_broker_xml_would_say(tmp_path: Path) -> None:
    spec = ClusterSpec(scale_down=(ScaleDownSpec("node0", enabled=False, group_name="b"),
                                   ScaleDownSpec("node1", group_name="a", targets=("node0", "node2"))))
    topology = resolved(Topology.cluster_of(3, spec), tmp_path)
    assert legacy_config("artemis1", topology, "node1")["scale_down"] == {
        "enabled": True, "group_name": "a", "connectors": ["node0", "node2"], "discovery": False}
    assert legacy_config("artemis1", topology, "node0")["scale_down"] == {
        "enabled": False, "group_name": "b", "connectors": [], "discovery": False}
    assert "scale_down" not in legacy_config("artemis1", topology, "node2")
    found = resolved(Topology.cluster_of(2, ClusterSpec(discovery="udp", scale_down=(ScaleDownSpec("node1"),))),
                     tmp_path)
    assert legacy_config("artemis1", found, "node1")["scale_down"]["discovery"] is True


@pytest.mark.parametrize(("change", "named"), [
    (lambda t: Topology.cluster_of(2, ClusterSpec(scale_down=(ScaleDownSpec("node0"),))), "scale-down"),
    (lambda t: Topology.ha_pair(HASpec("replication", lock_manager=True)), "a pluggable lock manager"),
    (lambda t: Topology.cluster_of(2, ClusterSpec(message_load_balancing="OFF_WITH_REDISTRIBUTION")),
     "OFF_WITH_REDISTRIBUTION"),
    (lambda t: dataclasses.replace(t, nodes=(NodeSpec(extra=(("journal-type", "NIO"),)),)), "<journal-type>"),
    (lambda t: dataclasses.replace(t, address_settings=(AddressSetting.of("#", auto_delete_queues_delay=5),)),
     "address setting <auto-delete-queues-delay>"),
    (lambda t: dataclasses.replace(t, tls=MUTUAL, security=SecuritySpec(enabled=True, certificate_users=(
        CertificateUser("c", "CN=c"),))), "certificate login: org.hornetq:hornetq-server:2.4.7.Final has none"),
    (lambda t: dataclasses.replace(t, security=SecuritySpec(enabled=True, users=(User("a", "b"),), rules=(
        SecurityRule("a::q", "consume", ("amq",)),))), "security settings on a fully qualified queue name"),
], ids=["scale-down", "lock-manager", "off-with-redistribution", "extra", "setting", "certificate-login", "fqqn"])
def test_what_the_launcher_cannot_be_told_is_unsupported(tmp_path: Path, change: object, named: str) -> None:
    topology = change(Topology.single())  # type: ignore[operator]
    with pytest.raises(UnsupportedByTarget, match=named):
        make_target("hornetq", workdir=tmp_path, topology=topology)


@needs_java
@pytest.mark.parametrize("kind", ["hornetq", "artemis1"])
def test_a_node_starts_is_killed_and_starts_again(tmp_path: Path, kind: str) -> None:
    with make_target(kind, workdir=tmp_path, topology=Topology.single()) as target:
        assert isinstance(target, ManagedTarget)
        node, spec = target.nodes[0], target.topology.nodes[0]
        assert running(node)
        node.kill()
        assert not running(node)
        node.start()
        assert running(node)
        assert node.url == spec.url
        assert spec.data_dir is not None
        assert (spec.data_dir / "journal").is_dir()


def running(node: Node) -> bool:
    return node.is_running


def test_management_requests_are_spoken_in_the_servers_names() -> None:
    """The security group's management request as each protocol reads it: HornetQ's _HQ_ properties below Artemis
    1.0.0 (126), a queue's resource name core.queue.<name> until Artemis 2.0.0 (129), and Artemis 1.x's own
    management address (the one its scale-down writes to)."""
    assert management_names(124) == ManagementNames("activemq.management", "_HQ_ResourceName", "_HQ_Attribute",
                                                    "_HQ_OperationSucceeded", "core.queue.")
    assert management_names(128) == ManagementNames("jms.queue.activemq.management", "_AMQ_ResourceName",
                                                    "_AMQ_Attribute", "_AMQ_OperationSucceeded", "core.queue.")
    assert management_names(136).queue_prefix == "queue."
    assert management_names(136).address == "activemq.management"
