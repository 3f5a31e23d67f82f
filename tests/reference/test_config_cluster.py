"""reference.config: broadcast/discovery groups, cluster connections (discovery, static, chain)
and live-only scale-down, read as the clusters chapter (spec 002) describes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cck.reference.config import (
    FILE_LOCK_MANAGERS,
    ConfigError,
    HAPolicy,
    LockManager,
    MessageLoadBalancing,
    ScaleDown,
    load_config,
    parse_broker_xml,
)

DATA = Path(__file__).parent / "data"


def _core(body: str) -> str:
    return f'<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">{body}</core></configuration>'


def test_discovery_cluster_every_element() -> None:
    config = parse_broker_xml(DATA / "cluster-discovery.xml")
    assert config.name == "node0"
    assert (config.cluster_user, config.cluster_password) == ("cluster-admin", "s3cret")
    (bg,) = config.broadcast_groups
    assert bg.name == "my-broadcast-group"
    assert (bg.local_bind_address, bg.local_bind_port) == ("172.16.9.3", 5432)
    assert (bg.group_address, bg.group_port, bg.broadcast_period) == ("231.7.7.7", 9876, 2500)
    assert bg.connector_refs == ("netty-connector", "backup-connector")
    assert not bg.is_jgroups
    (dg,) = config.discovery_groups
    assert (dg.local_bind_address, dg.local_bind_port) == ("172.16.9.7", -1)
    assert (dg.refresh_timeout, dg.initial_wait_timeout) == (12000, 3000)
    (cc,) = config.cluster_connections
    assert cc.address == "eu,!eu.uk"
    assert cc.connector_ref == "netty-connector"
    assert (cc.check_period, cc.connection_ttl, cc.min_large_message_size, cc.call_timeout) == (1000, 5000, 50000, 5000)
    assert (cc.retry_interval, cc.retry_interval_multiplier, cc.max_retry_interval) == (500, 1.5, 5000)
    assert (cc.initial_connect_attempts, cc.reconnect_attempts) == (-1, 7)
    assert cc.use_duplicate_detection is False
    assert cc.message_load_balancing is MessageLoadBalancing.OFF_WITH_REDISTRIBUTION
    assert (cc.max_hops, cc.confirmation_window_size, cc.producer_window_size) == (1, 32000, -1)
    assert (cc.call_failover_timeout, cc.notification_interval, cc.notification_attempts) == (30000, 1500, 3)
    assert cc.discovery_group_ref == "my-discovery-group"
    assert config.discovery_group("my-discovery-group") is dg
    assert config.address_settings_for("anything").redistribution_delay == 0
    assert config.warnings == ()


def test_cluster_connection_defaults() -> None:
    config = parse_broker_xml(
        _core(
            "<connectors><connector name='c'>tcp://h:1</connector></connectors>"
            "<cluster-connections><cluster-connection name='cc'><connector-ref>c</connector-ref>"
            "</cluster-connection></cluster-connections>"
        )
    )
    (cc,) = config.cluster_connections
    # ActiveMQDefaultConfiguration / ActiveMQClient values
    assert cc.address == ""
    assert (cc.check_period, cc.connection_ttl, cc.call_timeout, cc.call_failover_timeout) == (30000, 60000, 30000, -1)
    assert (cc.retry_interval, cc.retry_interval_multiplier, cc.max_retry_interval) == (500, 1.0, 2000)
    assert (cc.initial_connect_attempts, cc.reconnect_attempts) == (-1, -1)
    assert cc.use_duplicate_detection is True
    assert cc.message_load_balancing is MessageLoadBalancing.ON_DEMAND
    assert cc.max_hops == 1
    assert cc.min_large_message_size == 102400
    assert cc.confirmation_window_size == 10485760  # the code's value; the xsd and the chapter say 1048576
    assert cc.producer_window_size == 1048576
    assert (cc.notification_interval, cc.notification_attempts) == (1000, 2)
    assert cc.discovery_group_ref is None
    assert cc.static_connectors == ()
    assert cc.allow_direct_connections_only is False


def test_static_connectors_unnamespaced() -> None:
    config = parse_broker_xml(DATA / "cluster-static.xml")
    (cc,) = config.cluster_connections
    assert cc.static_connectors == ("server1-connector", "server2-connector")
    assert cc.allow_direct_connections_only is True
    assert cc.message_load_balancing is MessageLoadBalancing.STRICT
    assert cc.address == ""
    ipv6 = config.connector("server2-connector")
    assert (ipv6.host, ipv6.port, ipv6.params["sslEnabled"]) == ("::1", 61618, "false")
    assert [w.element for w in config.warnings] == ["connector"]  # sslEnabled is a parameter it ignores
    assert "sslEnabled" in config.warnings[0].message


def test_chain_cluster_from_one_template() -> None:
    ports = {"A": 61616, "B": 61617, "C": 61618}
    nodes = {}
    for name, nxt in (("A", "B"), ("B", "C"), ("C", None)):
        props = {"node": name, "port": str(ports[name])}
        if nxt:
            props["next.port"] = str(ports[nxt])
        nodes[name] = parse_broker_xml(DATA / "cluster-chain-node.xml", properties=props)
    for name, nxt in (("A", "B"), ("B", "C")):
        config = nodes[name]
        (cc,) = config.cluster_connections
        assert config.name == name
        assert cc.max_hops == 2
        assert cc.static_connectors == ("next",)
        assert config.connector("next").port == nodes[nxt].acceptors[0].port
        assert config.journal.persistence_enabled is False  # ${persistence:false}
    assert nodes["C"].connector("next").port == 0  # ${next.port:0}: end of the chain
    assert all(n.warnings == () for n in nodes.values())


def test_forward_when_no_consumers_legacy_element() -> None:
    body = (
        "<connectors><connector name='c'>tcp://h:1</connector></connectors><cluster-connections>"
        "<cluster-connection name='a'><connector-ref>c</connector-ref>"
        "<forward-when-no-consumers>true</forward-when-no-consumers></cluster-connection>"
        "<cluster-connection name='b'><connector-ref>c</connector-ref>"
        "<forward-when-no-consumers>false</forward-when-no-consumers>"
        "<message-load-balancing>OFF</message-load-balancing></cluster-connection>"
        "</cluster-connections>"
    )
    a, b = parse_broker_xml(_core(body)).cluster_connections
    assert a.message_load_balancing is MessageLoadBalancing.STRICT
    assert b.message_load_balancing is MessageLoadBalancing.ON_DEMAND  # the legacy element wins, as in Artemis


@pytest.mark.parametrize("value", [m.value for m in MessageLoadBalancing])
def test_every_message_load_balancing_value(value: str) -> None:
    body = (
        "<connectors><connector name='c'>tcp://h:1</connector></connectors><cluster-connections>"
        f"<cluster-connection name='a'><connector-ref>c</connector-ref>"
        f"<message-load-balancing>{value}</message-load-balancing></cluster-connection></cluster-connections>"
    )
    (cc,) = parse_broker_xml(_core(body)).cluster_connections
    assert cc.message_load_balancing.value == value


def test_discovery_and_static_both_given_uses_discovery() -> None:
    body = (
        "<connectors><connector name='c'>tcp://h:1</connector></connectors>"
        "<discovery-groups><discovery-group name='d'><group-address>231.7.7.7</group-address>"
        "<group-port>9876</group-port></discovery-group></discovery-groups><cluster-connections>"
        "<cluster-connection name='a'><connector-ref>c</connector-ref>"
        "<static-connectors><connector-ref>c</connector-ref></static-connectors>"
        "<discovery-group-ref discovery-group-name='d'/></cluster-connection></cluster-connections>"
    )
    config = parse_broker_xml(_core(body))
    (cc,) = config.cluster_connections
    assert cc.discovery_group_ref == "d"
    assert cc.static_connectors == ()
    assert [w.element for w in config.warnings] == ["static-connectors"]


def test_scale_down_with_discovery_and_group_name() -> None:
    config = parse_broker_xml(DATA / "scale-down.xml")
    assert config.ha_policy == HAPolicy(
        "live-only", ScaleDown(enabled=True, group_name="my-group", discovery_group_ref="my-discovery-group")
    )
    assert config.warnings == ()


def test_scale_down_with_connectors_under_primary_only() -> None:
    body = (
        "<connectors><connector name='server0-connector'>tcp://server0:61616</connector></connectors>"
        "<ha-policy><primary-only><scale-down><connectors><connector-ref>server0-connector</connector-ref>"
        "</connectors></scale-down></primary-only></ha-policy>"
    )
    policy = parse_broker_xml(_core(body)).ha_policy
    assert policy.kind == "live-only"
    assert policy.scale_down == ScaleDown(enabled=True, connectors=("server0-connector",))  # enabled defaults true


def test_no_ha_policy_is_live_only_without_scale_down() -> None:
    assert parse_broker_xml(_core("")).ha_policy == HAPolicy("live-only", None)
    assert parse_broker_xml(_core("<ha-policy><live-only/></ha-policy>")).ha_policy == HAPolicy("live-only", None)
    off = parse_broker_xml(_core("<ha-policy><live-only><scale-down><enabled>false</enabled></scale-down>"
                                 "</live-only></ha-policy>"))
    assert off.ha_policy.scale_down == ScaleDown(enabled=False)


@pytest.mark.parametrize(("body", "expected"), [
    ("<shared-store><master/></shared-store>", HAPolicy("shared-store", role="primary")),
    ("<shared-store><primary><failover-on-shutdown>true</failover-on-shutdown>"
     "<wait-for-activation>false</wait-for-activation></primary></shared-store>",
     HAPolicy("shared-store", role="primary", failover_on_shutdown=True, wait_for_activation=False)),
    ("<shared-store><slave><allow-failback>false</allow-failback><restart-backup>false</restart-backup>"
     "<failover-on-shutdown>true</failover-on-shutdown></slave></shared-store>",
     HAPolicy("shared-store", role="backup", allow_failback=False, restart_backup=False, failover_on_shutdown=True)),
    ("<shared-store><backup/></shared-store>", HAPolicy("shared-store", role="backup")),
    ("<replication><master><check-for-live-server>true</check-for-live-server><group-name>g1</group-name>"
     "</master></replication>",
     HAPolicy("replication", role="primary", check_for_live_server=True, group_name="g1")),
    ("<replication><primary><check-for-active-server>true</check-for-active-server></primary></replication>",
     HAPolicy("replication", role="primary", check_for_live_server=True)),
    ("<replication><slave><allow-failback>true</allow-failback><initial-replication-sync-timeout>5000"
     "</initial-replication-sync-timeout></slave></replication>",
     HAPolicy("replication", role="backup", initial_replication_sync_timeout_ms=5000)),
], ids=["ss-master", "ss-primary", "ss-slave", "ss-backup", "repl-master", "repl-primary-new-name", "repl-slave"])
def test_paired_ha_policies_in_both_spellings(body: str, expected: HAPolicy) -> None:
    config = parse_broker_xml(_core(f"<ha-policy>{body}</ha-policy>"))
    assert config.ha_policy == expected
    assert config.warnings == ()
    assert config.ha_policy.is_backup == (expected.role == "backup")


_MANAGER = ("<manager><class-name>{cls}</class-name><properties><property key=\"locks-folder\" value=\"locks\"/>"
            "</properties></manager>")


@pytest.mark.parametrize("class_name", FILE_LOCK_MANAGERS)
def test_a_replication_pair_under_a_lock_manager(class_name: str) -> None:
    manager = _MANAGER.format(cls=class_name)
    primary = parse_broker_xml(_core(f"<ha-policy><replication><primary>{manager}<coordination-id>pair-a"
                                     "</coordination-id></primary></replication></ha-policy>"))
    assert primary.ha_policy.lock_manager == LockManager(class_name, "locks", "pair-a")
    assert primary.warnings == ()
    backup = parse_broker_xml(_core(f"<ha-policy><replication><backup>{manager}</backup></replication></ha-policy>"))
    assert backup.ha_policy.is_backup
    assert backup.ha_policy.lock_manager == LockManager(class_name, "locks")


@pytest.mark.parametrize(("manager", "named"), [
    ("<manager><class-name>org.example.EtcdLockManager</class-name></manager>", "org.example.EtcdLockManager"),
    ("<manager><class-name>" + FILE_LOCK_MANAGERS[0] + "</class-name></manager>", "locks-folder"),
], ids=["unknown-class", "no-locks-folder"])
def test_a_lock_manager_the_reference_broker_cannot_run_is_an_error(manager: str, named: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_broker_xml(_core(f"<ha-policy><replication><primary>{manager}</primary></replication></ha-policy>"))
    assert named in str(info.value)


def test_options_the_reference_broker_does_not_use_are_warned() -> None:
    config = parse_broker_xml(_core("<ha-policy><replication><master><quorum-size>2</quorum-size></master>"
                                    "</replication></ha-policy>"))
    assert config.ha_policy.kind == "replication"
    assert [w.element for w in config.warnings] == ["quorum-size"]


def test_a_policy_with_two_roles_is_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        parse_broker_xml(_core("<ha-policy><shared-store><master/><slave/></shared-store></ha-policy>"))
    assert info.value.element == "shared-store"
    assert "more than one role" in info.value.reason


@pytest.mark.parametrize(
    ("body", "element", "reason"),
    [
        (
            "<cluster-connections><cluster-connection name='a'><connector-ref>missing</connector-ref>"
            "</cluster-connection></cluster-connections>",
            "connector-ref",
            "undefined connector",
        ),
        (
            "<connectors><connector name='c'>tcp://h:1</connector></connectors><cluster-connections>"
            "<cluster-connection name='a'><connector-ref>c</connector-ref>"
            "<discovery-group-ref discovery-group-name='nope'/></cluster-connection></cluster-connections>",
            "discovery-group-ref",
            "undefined discovery-group",
        ),
        (
            "<broadcast-groups><broadcast-group name='b'><group-port>9876</group-port></broadcast-group>"
            "</broadcast-groups>",
            "broadcast-group",
            "needs <group-address> and <group-port>",
        ),
        (
            "<ha-policy><live-only><scale-down><connectors><connector-ref>x</connector-ref></connectors>"
            "</scale-down></live-only></ha-policy>",
            "connector-ref",
            "undefined connector",
        ),
        (
            "<cluster-connections><cluster-connection name='a'/></cluster-connections>",
            "cluster-connection",
            "needs a <connector-ref>",
        ),
    ],
    ids=["connector-ref", "discovery-group-ref", "udp-group", "scale-down-connector", "no-connector-ref"],
)
def test_dangling_references_are_errors(body: str, element: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_broker_xml(_core(body), file="node.xml")
    assert info.value.element == element
    assert reason in info.value.reason
    assert info.value.line == 1
    assert info.value.file == "node.xml"


def test_load_config_reads_a_cluster_node_directory(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "broker.xml").write_bytes((DATA / "cluster-discovery.xml").read_bytes())
    config = load_config(etc / "broker.xml")
    assert config.cluster_connections[0].name == "my-cluster"
    assert config.instance_dir == tmp_path
