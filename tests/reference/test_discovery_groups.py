"""The reference broker's UDP broadcast and discovery groups (notes §12): the sans-IO core on a fake
clock, the bytes against Artemis's own (a checked-in capture and vectors made by Artemis 2.44.0's
``ConnectorTransportConfigurationParser`` + ``TransportConfiguration.encode``), the asyncio layer on
loopback multicast, and ``cck broker`` broadcasting.  Every wait has a deadline."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from cck.codec import (
    CodecError,
    DiscoveryDatagram,
    TransportConfiguration,
    TransportParam,
    TransportParamType,
    decode_discovery,
    encode_discovery,
)
from cck.reference.cluster import DiscoveryEndpoint, UdpGroups
from cck.reference.config import BroadcastGroup, BrokerConfig, ConfigError, Connector, DiscoveryGroup, parse_broker_xml
from cck.reference.discovery import (
    INVM_CONNECTOR_FACTORY,
    NETTY_CONNECTOR_FACTORY,
    Broadcaster,
    ConnectorChanged,
    DiscoveryChange,
    DiscoveryEntry,
    DiscoveryTable,
    MalformedDatagram,
    NodeExpired,
    NodeFound,
    SameNodeNewUniqueId,
    connector_transport_configuration,
    java_hash_map_order,
    notifies_listeners,
    open_multicast_receiver,
    open_multicast_sender,
)

from .conftest import start_reference_broker, stop_reference_broker

GROUP = "231.7.7.7"
LOOPBACK = "127.0.0.1"
SCENARIO_DEADLINE_S = 30.0
WAIT_S = 10.0
CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "captures"

OWN = "00000000-0000-0000-0000-000000000000"
NODE_A = "11111111-2222-3333-4444-555555555555"
NODE_B = "66666666-7777-8888-9999-000000000000"
SENDER = ("10.0.0.5", 40123)


def tc(port: int, host: str = "10.0.0.5", name: str = "netty") -> TransportConfiguration:
    return TransportConfiguration.netty(host, port, name)


def datagram(node_id: str, *connectors: TransportConfiguration, unique_id: str = "u-1") -> bytes:
    return encode_discovery(DiscoveryDatagram(node_id, unique_id, connectors))


def free_port(kind: socket.SocketKind) -> int:
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(scenario(), SCENARIO_DEADLINE_S)

    asyncio.run(bounded())


def connectors_of(uris: dict[str, str]) -> dict[str, Connector]:
    body = "".join(f'<connector name="{n}">{u.replace("&", "&amp;")}</connector>' for n, u in uris.items())
    config = parse_broker_xml(
        f'<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core"><connectors>{body}</connectors>'
        "</core></configuration>"
    )
    return {c.name: c for c in config.connectors}


def tc_bytes(config: TransportConfiguration) -> bytes:
    """The TransportConfiguration's own bytes: a one-connector datagram minus its header."""
    empty = encode_discovery(DiscoveryDatagram("n", "u"))
    return encode_discovery(DiscoveryDatagram("n", "u", (config,)))[len(empty) :]


@pytest.fixture
def cluster_log() -> Iterator[list[logging.LogRecord]]:
    """The records of ``reference.cluster`` (whatever another test did to the ``reference`` logger)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("cck.reference.cluster")
    handler, level = Keep(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


# ---------------------------------------------------------------------- the broadcaster (fake clock)


def test_the_first_datagram_is_immediate_then_one_per_period_after_the_previous_send() -> None:
    b = Broadcaster(NODE_A, [tc(61616)], period_ms=2000, now_ms=1_000)
    assert b.next_deadline() == 1_000
    assert b.poll(1_000) == b.payload
    assert b.poll(1_001) is None
    assert b.next_deadline() == 3_000
    assert b.poll(2_999) is None
    assert b.poll(3_000) == b.payload
    # a late wake-up: Artemis's fixed delay counts the period from the send that happened
    assert b.poll(5_500) == b.payload
    assert b.next_deadline() == 7_500
    assert b.sent == 3


def test_the_unique_id_is_made_once_per_instance() -> None:
    first = Broadcaster(NODE_A, [tc(61616)], period_ms=100, now_ms=0)
    payloads = {first.poll(t) for t in range(0, 1_000, 100)}
    assert payloads == {first.payload}
    decoded = decode_discovery(first.payload)
    assert decoded == DiscoveryDatagram(NODE_A, first.unique_id, (tc(61616),))
    assert uuid.UUID(first.unique_id).version == 4
    second = Broadcaster(NODE_A, [tc(61616)], period_ms=100, now_ms=0)
    assert second.unique_id != first.unique_id


def test_the_period_must_be_positive() -> None:
    with pytest.raises(ValueError, match="period_ms"):
        Broadcaster(NODE_A, [], period_ms=0, now_ms=0)


# ---------------------------------------------------------------------- the bytes, against Artemis


def test_the_datagram_is_byte_for_byte_the_captured_artemis_broadcast() -> None:
    scapy_utils = pytest.importorskip("scapy.utils")
    from scapy.layers.inet import UDP

    manifest = json.loads((CAPTURES / "captures.json").read_text(encoding="utf-8"))
    packets = scapy_utils.rdpcap(str(CAPTURES / manifest["discovery_pcap"]))
    captured = bytes(packets[0][UDP].payload)
    unique_id = decode_discovery(captured).unique_id
    # the capture's broker.xml: <connector name="artemis">tcp://127.0.0.1:{core_port}</connector>
    connector = connectors_of({"artemis": f"tcp://127.0.0.1:{manifest['core_port']}"})["artemis"]
    b = Broadcaster(manifest["node_id"], [connector_transport_configuration(connector)], 250, now_ms=0,
                    unique_id=unique_id)  # fmt: skip
    assert b.poll(0) == captured


# (uri, TransportConfiguration bytes from Artemis 2.44.0, connector name = "c")
ARTEMIS_VECTORS = {
    "query params, ';' and '&', an unknown key as extra property": (
        "tcp://localhost:61617?sslEnabled=true;tcpNoDelay=false&foo=bar",
        "0000000100630000004a004a6f72672e6170616368652e6163746976656d712e617274656d69732e636f72652e72656d6f74696e"
        "672e696d706c2e6e657474792e4e65747479436f6e6e6563746f72466163746f727900000005000000040070006f0072007403"
        "00000005003600310036003100370000000a000a73736c456e61626c656403000000040074007200750065000000040068006f"
        "00730074030000000900096c6f63616c686f73740000000a000a7463704e6f44656c6179030000000500660061006c00730065"
        "000000080024002e00450050002e0066006f006f0300000003006200610072",
    ),
    "host and port overridden by the query": (
        "tcp://h:1?host=other&port=5",
        "0000000100630000004a004a6f72672e6170616368652e6163746976656d712e617274656d69732e636f72652e72656d6f74696e"
        "672e696d706c2e6e657474792e4e65747479436f6e6e6563746f72466163746f727900000002000000040070006f0072007403"
        "000000010035000000040068006f007300740300000005006f0074006800650072",
    ),
    "an IPv6 host keeps its brackets": (
        "tcp://[::1]:61616",
        "0000000100630000004a004a6f72672e6170616368652e6163746976656d712e617274656d69732e636f72652e72656d6f74696e"
        "672e696d706c2e6e657474792e4e65747479436f6e6e6563746f72466163746f727900000002000000040070006f0072007403"
        "0000000500360031003600310036000000040068006f007300740300000005005b003a003a0031005d",
    ),
    "no port is -1": (
        "tcp://myhost",
        "0000000100630000004a004a6f72672e6170616368652e6163746976656d712e617274656d69732e636f72652e72656d6f74696e"
        "672e696d706c2e6e657474792e4e65747479436f6e6e6563746f72466163746f727900000002000000040070006f0072007403"
        "00000002002d0031000000040068006f007300740300000006006d00790068006f00730074",
    ),
    "colliding hashes keep their insertion order": (
        "tcp://h:3?Aa=1&BB=2&ab=3",
        "0000000100630000004a004a6f72672e6170616368652e6163746976656d712e617274656d69732e636f72652e72656d6f74696e"
        "672e696d706c2e6e657474792e4e65747479436f6e6e6563746f72466163746f727900000005000000040070006f007200740300"
        "0000010033000000040068006f0073007403000000010068000000070024002e00450050002e0041006103000000010031000000"
        "070024002e00450050002e0042004203000000010032000000070024002e00450050002e0061006203000000010033",
    ),
    "in-VM": (
        "vm://0",
        "0000000100630000004800486f72672e6170616368652e6163746976656d712e617274656d69732e636f72652e72656d6f74696e"
        "672e696d706c2e696e766d2e496e564d436f6e6e6563746f72466163746f72790000000100000008007300650072007600650072"
        "0049006403000000010030",
    ),
}


@pytest.mark.parametrize(("uri", "expected"), ARTEMIS_VECTORS.values(), ids=ARTEMIS_VECTORS.keys())
def test_connectors_encode_as_artemis_builds_them_from_broker_xml(uri: str, expected: str) -> None:
    config = connector_transport_configuration(connectors_of({"c": uri})["c"])
    assert tc_bytes(config).hex() == expected


def test_connector_values_are_strings_and_unknown_keys_extra_properties() -> None:
    config = connector_transport_configuration(connectors_of({"c": "tcp://10.1.2.3:61617?foo=1&sslEnabled=true"})["c"])
    assert config.name == "c"
    assert config.factory_class_name == NETTY_CONNECTOR_FACTORY
    assert {(p.key, p.type, p.value) for p in config.params} == {
        ("host", TransportParamType.STRING, "10.1.2.3"),
        ("port", TransportParamType.STRING, "61617"),
        ("sslEnabled", TransportParamType.STRING, "true"),
    }
    assert config.extra_props == (TransportParam("foo", TransportParamType.STRING, "1"),)
    vm = connector_transport_configuration(connectors_of({"v": "vm://3"})["v"])
    assert vm.factory_class_name == INVM_CONNECTOR_FACTORY
    assert vm.params == (TransportParam("serverId", TransportParamType.STRING, "3"),)


def test_java_hash_map_order_buckets_then_insertion_and_grows_past_three_quarters() -> None:
    assert java_hash_map_order(["host", "port"]) == ["port", "host"]  # buckets 8 and 5 of 16
    assert java_hash_map_order(["BB", "Aa"]) == ["BB", "Aa"]  # same String.hashCode: insertion order
    assert java_hash_map_order(["Aa", "BB", "Aa"]) == ["Aa", "BB"]
    # 13 keys > 12 = 3/4 of 16: a table of 32 (the order java.util.HashMap gave, Java 17)
    keys = ["host", "port", "sslEnabled", "tcpNoDelay", "useEpoll", "keyStorePath", "trustStorePath", "batchDelay",
            "localAddress", "localPort", "httpEnabled", "useNio", "verifyHost"]
    assert java_hash_map_order(keys) == [
        "localPort", "httpEnabled", "useNio", "verifyHost", "batchDelay", "useEpoll", "port", "localAddress",
        "sslEnabled", "host", "trustStorePath", "keyStorePath", "tcpNoDelay",
    ]  # fmt: skip


# ---------------------------------------------------------------------- the discovery table (fake clock)


def test_a_new_node_is_found_and_listeners_are_told_a_refresh_changes_nothing() -> None:
    table = DiscoveryTable(OWN, refresh_timeout_ms=10_000)
    changes = table.receive(datagram(NODE_A, tc(1)), SENDER, 0)
    assert changes == (NodeFound(NODE_A, tc(1), SENDER),)
    assert notifies_listeners(changes)
    assert table.receive(datagram(NODE_A, tc(1)), SENDER, 2_000) == ()
    assert table.entries == (DiscoveryEntry(NODE_A, tc(1), 2_000),)


def test_only_the_last_connector_of_a_datagram_is_kept() -> None:
    table = DiscoveryTable(OWN)
    changes = table.receive(datagram(NODE_A, tc(1), tc(2), tc(3)), SENDER, 0)
    assert changes == (NodeFound(NODE_A, tc(3), SENDER),)
    assert table.entries == (DiscoveryEntry(NODE_A, tc(3), 0),)


def test_a_changed_connector_is_stored_without_telling_listeners() -> None:
    table = DiscoveryTable(OWN)
    table.receive(datagram(NODE_A, tc(1)), SENDER, 0)
    changes = table.receive(datagram(NODE_A, tc(2)), SENDER, 100)
    assert changes == (ConnectorChanged(NODE_A, tc(1), tc(2), SENDER),)
    assert not notifies_listeners(changes)
    assert table.entries == (DiscoveryEntry(NODE_A, tc(2), 100),)


def test_our_own_node_is_ignored_but_expiry_is_still_evaluated() -> None:
    table = DiscoveryTable(OWN, refresh_timeout_ms=1_000)
    assert table.receive(datagram(OWN, tc(9)), SENDER, 0) == ()
    assert table.entries == ()
    table.receive(datagram(NODE_A, tc(1)), SENDER, 0)
    changes = table.receive(datagram(OWN, tc(9)), SENDER, 1_000)
    assert changes == (NodeExpired(NODE_A, tc(1), 0),)
    assert notifies_listeners(changes)
    assert table.entries == ()


def test_a_new_unique_id_for_a_known_node_only_warns_and_replaces() -> None:
    table = DiscoveryTable(OWN)
    table.receive(datagram(NODE_A, tc(1), unique_id="u-1"), SENDER, 0)
    other = ("10.0.0.6", 5000)
    changes = table.receive(datagram(NODE_A, tc(1), unique_id="u-2"), other, 10)
    assert changes == (SameNodeNewUniqueId(NODE_A, "u-1", "u-2", other),)
    assert not notifies_listeners(changes)
    assert table.unique_ids[NODE_A] == "u-2"
    assert table.entries == (DiscoveryEntry(NODE_A, tc(1), 10),)
    assert table.receive(datagram(NODE_A, tc(1), unique_id="u-2"), other, 20) == ()
    # our own node ID from someone else: the same warning (two servers with one node ID)
    table.receive(datagram(OWN, unique_id="mine"), SENDER, 30)
    assert table.receive(datagram(OWN, unique_id="theirs"), other, 40) == (
        SameNodeNewUniqueId(OWN, "mine", "theirs", other),
    )


def test_expiry_is_evaluated_only_when_a_datagram_arrives() -> None:
    table = DiscoveryTable(OWN, refresh_timeout_ms=10_000)
    table.receive(datagram(NODE_A, tc(1)), SENDER, 0)
    # long past the refresh timeout, nothing happens without a datagram
    assert table.entries == (DiscoveryEntry(NODE_A, tc(1), 0),)
    assert table.receive(datagram(NODE_B, tc(2)), SENDER, 9_999) == (NodeFound(NODE_B, tc(2), SENDER),)
    assert [e.node_id for e in table.entries] == [NODE_A, NODE_B]
    # last update + refresh timeout <= now: expired
    assert table.receive(datagram(NODE_B, tc(2)), SENDER, 10_000) == (NodeExpired(NODE_A, tc(1), 0),)
    assert table.entries == (DiscoveryEntry(NODE_B, tc(2), 10_000),)


def test_a_stale_node_that_broadcasts_again_is_refreshed_not_expired() -> None:
    table = DiscoveryTable(OWN, refresh_timeout_ms=1_000)
    table.receive(datagram(NODE_A, tc(1)), SENDER, 0)
    assert table.receive(datagram(NODE_A, tc(1)), SENDER, 50_000) == ()
    assert table.entries == (DiscoveryEntry(NODE_A, tc(1), 50_000),)


def test_a_datagram_without_connectors_stores_nothing_but_evaluates_expiry() -> None:
    table = DiscoveryTable(OWN, refresh_timeout_ms=1_000)
    table.receive(datagram(NODE_A, tc(1)), SENDER, 0)
    assert table.receive(datagram(NODE_B), SENDER, 1_000) == (NodeExpired(NODE_A, tc(1), 0),)
    assert table.entries == ()
    assert table.unique_ids[NODE_B] == "u-1"


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty"),
        pytest.param(datagram(NODE_A, tc(1))[:-3], id="truncated"),
        pytest.param(b"\xff" * 40, id="garbage"),
        pytest.param(datagram(NODE_A)[:-4] + b"\x7f\xff\xff\xff", id="huge-count"),
    ],
)
def test_a_malformed_datagram_is_ignored_without_evaluating_expiry(data: bytes) -> None:
    table = DiscoveryTable(OWN, refresh_timeout_ms=1_000)
    table.receive(datagram(NODE_A, tc(1)), SENDER, 0)
    changes = table.receive(data, SENDER, 5_000)
    assert len(changes) == 1
    change = changes[0]
    assert isinstance(change, MalformedDatagram)
    assert change.sender == SENDER
    assert isinstance(change.error, CodecError)
    assert change.error.offset is not None
    assert not notifies_listeners(changes)
    assert table.entries == (DiscoveryEntry(NODE_A, tc(1), 0),)


def test_another_nodes_well_formed_datagrams_count_as_broadcasts_with_or_without_connectors() -> None:
    table = DiscoveryTable(OWN)
    table.receive(datagram(OWN, tc(9)), SENDER, 0)
    table.receive(b"\xff" * 40, SENDER, 0)
    assert table.broadcasts == 0
    table.receive(datagram(NODE_A), SENDER, 0)
    table.receive(datagram(NODE_A, tc(1)), SENDER, 0)
    table.receive(datagram(NODE_A, tc(1)), SENDER, 0)
    assert table.broadcasts == 3


def test_bytes_after_the_last_connector_are_ignored() -> None:
    table = DiscoveryTable(OWN)
    assert table.receive(datagram(NODE_A, tc(1)) + bytes(100), SENDER, 0) == (NodeFound(NODE_A, tc(1), SENDER),)


def test_the_refresh_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="refresh_timeout_ms"):
        DiscoveryTable(OWN, refresh_timeout_ms=0)


# ---------------------------------------------------------------------- the endpoint without sockets


def test_listeners_hear_of_new_and_expired_nodes_only(cluster_log: list[logging.LogRecord]) -> None:
    now = [0]
    endpoint = DiscoveryEndpoint(DiscoveryGroup("dg", GROUP, 9876, refresh_timeout=1_000), OWN,
                                 clock_ms=lambda: now[0])  # fmt: skip
    heard: list[tuple[DiscoveryEntry, ...]] = []
    unsubscribe = endpoint.subscribe(heard.append)

    def broken(entries: tuple[DiscoveryEntry, ...]) -> None:
        raise RuntimeError("a broken listener does not stop the others")

    endpoint.subscribe(broken)
    endpoint.datagram_received(datagram(NODE_A, tc(1)), SENDER)
    endpoint.datagram_received(datagram(NODE_A, tc(2)), SENDER)  # changed connector: not told
    now[0] = 500
    endpoint.datagram_received(datagram(NODE_B, tc(3)), SENDER)
    now[0] = 1_000
    endpoint.datagram_received(datagram(NODE_B, tc(3)), SENDER)  # A expires
    assert heard == [
        (DiscoveryEntry(NODE_A, tc(1), 0),),
        (DiscoveryEntry(NODE_A, tc(2), 0), DiscoveryEntry(NODE_B, tc(3), 500)),
        (DiscoveryEntry(NODE_B, tc(3), 1_000),),
    ]
    unsubscribe()
    now[0] = 5_000
    endpoint.datagram_received(datagram(NODE_A, tc(1)), SENDER)
    assert len(heard) == 3
    messages = [r.getMessage() for r in cluster_log]
    assert messages.count("node discovered") == 3
    assert messages.count("node expired") == 2
    found = next(r for r in cluster_log if r.getMessage() == "node discovered")
    assert (found.__dict__["node_id"], found.__dict__["connector"]) == (NODE_A, "10.0.0.5:1")


def test_malformed_datagrams_and_duplicate_node_ids_are_logged_as_warnings(
    cluster_log: list[logging.LogRecord],
) -> None:
    endpoint = DiscoveryEndpoint(DiscoveryGroup("dg", GROUP, 9876), OWN, clock_ms=lambda: 0)
    changes: list[DiscoveryChange] = [*endpoint.datagram_received(b"\x00\x00\x00\x05", SENDER)]
    changes += endpoint.datagram_received(datagram(NODE_A, tc(1), unique_id="u-1"), SENDER)
    changes += endpoint.datagram_received(datagram(NODE_A, tc(1), unique_id="u-2"), SENDER)
    assert [type(c) for c in changes] == [MalformedDatagram, NodeFound, SameNodeNewUniqueId]
    warnings = [r for r in cluster_log if r.levelno == logging.WARNING]
    malformed, duplicate = warnings
    assert malformed.getMessage() == "malformed discovery datagram ignored"
    assert malformed.__dict__["sender"] == "10.0.0.5:40123"
    assert malformed.__dict__["offset"] is not None
    assert "offset" in malformed.__dict__["detail"]
    assert duplicate.getMessage() == "multiple servers broadcasting the same node id"
    assert duplicate.__dict__["node_id"] == NODE_A


# ---------------------------------------------------------------------- configuration


def _config(*groups: BroadcastGroup, connectors: tuple[Connector, ...] = ()) -> BrokerConfig:
    return BrokerConfig(connectors=connectors, broadcast_groups=groups)


def test_a_broadcast_group_naming_no_connector_is_a_config_error_naming_the_group() -> None:
    with pytest.raises(ConfigError, match=r"broadcast-group 'bg'.*undefined connector; found 'nope'"):
        UdpGroups(_config(BroadcastGroup("bg", GROUP, 9876, connector_refs=("nope",))), OWN)
    with pytest.raises(ConfigError, match=r"broadcast-group 'bg' needs <group-address> and <group-port>"):
        UdpGroups(_config(BroadcastGroup("bg", None, 9876)), OWN)
    with pytest.raises(ConfigError, match=r"discovery-group 'dg' needs"):
        UdpGroups(BrokerConfig(discovery_groups=(DiscoveryGroup("dg", GROUP, -1),)), OWN)
    # the parser already refuses these in broker.xml, naming the group in the path
    xml = ('<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core"><broadcast-groups>'
           '<broadcast-group name="bg"><group-address>231.7.7.7</group-address><group-port>9876</group-port>'
           "<connector-ref>nope</connector-ref></broadcast-group></broadcast-groups></core></configuration>")
    with pytest.raises(ConfigError, match=r"broadcast-group\[bg\]/connector-ref.*undefined connector"):
        parse_broker_xml(xml)


def test_jgroups_groups_are_reported_and_skipped(cluster_log: list[logging.LogRecord]) -> None:
    config = BrokerConfig(
        broadcast_groups=(BroadcastGroup("bg", jgroups_file="jgroups.xml", jgroups_channel="c"),),
        discovery_groups=(DiscoveryGroup("dg", jgroups_file="jgroups.xml", jgroups_channel="c"),),
    )
    groups = UdpGroups(config, OWN)
    assert groups.broadcast == {}
    assert groups.discovery == {}

    async def scenario() -> None:
        await groups.start()
        await groups.stop()

    run(scenario)
    assert [(r.getMessage(), r.__dict__["group"]) for r in cluster_log] == [
        ("JGroups broadcast group not started", "bg"),
        ("JGroups discovery group not started", "dg"),
    ]


# ---------------------------------------------------------------------- loopback multicast


class Recording(DiscoveryEndpoint):
    """A discovery endpoint that says when a datagram arrived."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.arrived = asyncio.Event()
        self.received: list[tuple[DiscoveryChange, ...]] = []

    def datagram_received(self, data: bytes, sender: tuple[str, int]) -> tuple[DiscoveryChange, ...]:
        changes = super().datagram_received(data, sender)
        self.received.append(changes)
        self.arrived.set()
        return changes

    async def next_datagram(self) -> tuple[DiscoveryChange, ...]:
        """What the next datagram to arrive (from now) changed."""
        self.arrived.clear()
        await asyncio.wait_for(self.arrived.wait(), WAIT_S)
        return self.received[-1]


def _udp_config(group_port: int, node_port: int) -> BrokerConfig:
    connector = Connector("netty", f"tcp://{LOOPBACK}:{node_port}", "tcp", LOOPBACK, node_port)
    return BrokerConfig(
        connectors=(connector,),
        broadcast_groups=(
            BroadcastGroup("bg", GROUP, group_port, local_bind_address=LOOPBACK, broadcast_period=50,
                           connector_refs=("netty",)),
        ),
        discovery_groups=(DiscoveryGroup("dg", GROUP, group_port, local_bind_address=LOOPBACK),),
    )  # fmt: skip


def test_a_broadcast_group_is_discovered_by_a_discovery_group_on_loopback() -> None:
    group_port = free_port(socket.SOCK_DGRAM)
    config = _udp_config(group_port, 61616)

    async def scenario() -> None:
        broadcaster = UdpGroups(config, NODE_A)
        receiver = Recording(config.discovery_groups[0], OWN)
        own = Recording(config.discovery_groups[0], NODE_A)  # the broadcasting node's own receiver
        found = asyncio.Event()
        receiver.subscribe(lambda entries: found.set())
        await receiver.start()
        await own.start()
        try:
            await broadcaster.start()
            endpoint = broadcaster.broadcast["bg"]
            assert endpoint.running
            local = endpoint.local_address
            assert local is not None
            assert local[0] == LOOPBACK
            await asyncio.wait_for(found.wait(), WAIT_S)
            (entry,) = receiver.entries
            assert entry.node_id == NODE_A
            assert (entry.connector.host, entry.connector.port) == (LOOPBACK, 61616)
            assert receiver.table.unique_ids[NODE_A] == endpoint.unique_id
            # later datagrams refresh the entry and carry the same unique ID
            assert await receiver.next_datagram() == ()
            assert receiver.table.unique_ids[NODE_A] == endpoint.unique_id
            # the broadcaster's own node ignores its datagrams
            assert await own.next_datagram() == ()
            assert own.entries == ()
            assert own.table.unique_ids == {NODE_A: endpoint.unique_id}
        finally:
            await broadcaster.stop()
            await receiver.stop()
            await own.stop()
        assert not broadcaster.broadcast["bg"].running
        assert not receiver.running

    run(scenario)


def test_the_discovery_endpoint_survives_malformed_datagrams(cluster_log: list[logging.LogRecord]) -> None:
    group_port = free_port(socket.SOCK_DGRAM)
    group = DiscoveryGroup("dg", GROUP, group_port, local_bind_address=LOOPBACK)

    async def scenario() -> None:
        receiver = Recording(group, OWN)
        await receiver.start()
        with open_multicast_sender(socket.AF_INET, LOOPBACK) as sender:
            address = sender.getsockname()
            try:
                sender.sendto(b"\x00\x00\x00\x24garbage", (GROUP, group_port))
                (malformed,) = await receiver.next_datagram()
                assert isinstance(malformed, MalformedDatagram)
                assert malformed.sender == address
                sender.sendto(datagram(NODE_B, tc(7, LOOPBACK)), (GROUP, group_port))
                assert await receiver.next_datagram() == (NodeFound(NODE_B, tc(7, LOOPBACK), address),)
            finally:
                await receiver.stop()
        warning = next(r for r in cluster_log if r.getMessage() == "malformed discovery datagram ignored")
        assert warning.__dict__["sender"] == f"{address[0]}:{address[1]}"

    run(scenario)


def test_a_group_that_cannot_start_is_logged_and_the_others_run(cluster_log: list[logging.LogRecord]) -> None:
    group_port = free_port(socket.SOCK_DGRAM)
    config = BrokerConfig(
        broadcast_groups=(BroadcastGroup("bad", GROUP, group_port, local_bind_address="192.0.2.1"),),  # TEST-NET
        discovery_groups=(DiscoveryGroup("dg", GROUP, group_port, local_bind_address=LOOPBACK),),
    )

    async def scenario() -> None:
        groups = UdpGroups(config, OWN)
        await groups.start()
        try:
            assert not groups.broadcast["bad"].running
            assert groups.discovery["dg"].running
        finally:
            await groups.stop()

    run(scenario)
    error = next(r for r in cluster_log if r.levelno == logging.ERROR)
    assert error.getMessage() == "broadcast group not started"
    assert error.__dict__["group"] == "bad"
    assert "cannot bind to 192.0.2.1" in error.__dict__["detail"]


def test_the_shared_sockets_name_what_they_could_not_do() -> None:
    group_port = free_port(socket.SOCK_DGRAM)
    with pytest.raises(OSError, match=rf"cannot join {GROUP} on 192\.0\.2\.1"):  # TEST-NET: not on this host
        open_multicast_receiver(GROUP, group_port, "192.0.2.1")
    with pytest.raises(OSError, match=r"cannot bind to 192\.0\.2\.1:0"):
        open_multicast_sender(socket.AF_INET, "192.0.2.1")
    # two receivers share the group port (SO_REUSEADDR/SO_REUSEPORT), and both hear a datagram
    with (
        open_multicast_receiver(GROUP, group_port, LOOPBACK) as one,
        open_multicast_receiver(GROUP, group_port, LOOPBACK) as other,
        open_multicast_sender(socket.AF_INET, LOOPBACK) as sender,
    ):
        sender.sendto(b"hello", (GROUP, group_port))
        for receiver in (one, other):
            receiver.settimeout(WAIT_S)
            assert receiver.recvfrom(64) == (b"hello", sender.getsockname())


# ---------------------------------------------------------------------- the broker process


BROKER_XML = """<?xml version="1.0"?>
<configuration xmlns="urn:activemq">
   <core xmlns="urn:activemq:core">
      <security-enabled>false</security-enabled>
      <persistence-enabled>false</persistence-enabled>
      <acceptors><acceptor name="core">tcp://127.0.0.1:{port}?protocols=CORE</acceptor></acceptors>
      <connectors><connector name="netty">tcp://127.0.0.1:{port}</connector></connectors>
      <broadcast-groups>
         <broadcast-group name="bg">
            <local-bind-address>127.0.0.1</local-bind-address>
            <group-address>{group}</group-address>
            <group-port>{group_port}</group-port>
            <broadcast-period>100</broadcast-period>
            <connector-ref>netty</connector-ref>
         </broadcast-group>
      </broadcast-groups>
   </core>
</configuration>
"""


def test_the_broker_broadcasts_its_node_id_and_connector(tmp_path: Path) -> None:
    port, group_port = free_port(socket.SOCK_STREAM), free_port(socket.SOCK_DGRAM)
    config = tmp_path / "etc" / "broker.xml"
    config.parent.mkdir()
    config.write_text(BROKER_XML.format(port=port, group=GROUP, group_port=group_port), encoding="utf-8")
    with open_multicast_receiver(GROUP, group_port, LOOPBACK) as listener:
        listener.settimeout(WAIT_S)
        data = tmp_path / "data"
        broker = start_reference_broker(data, "--config", str(config), "--port", str(port))
        try:
            first, sender = listener.recvfrom(65535)
            second, _ = listener.recvfrom(65535)
        finally:
            assert stop_reference_broker(broker) == 0
    node_id = (data / "node-id").read_text(encoding="ascii").strip()
    datagram_ = decode_discovery(first)
    assert datagram_.node_id == node_id
    assert uuid.UUID(datagram_.unique_id)
    (connector,) = datagram_.connectors
    assert connector == TransportConfiguration(
        "netty", NETTY_CONNECTOR_FACTORY,
        (TransportParam("port", TransportParamType.STRING, str(port)),
         TransportParam("host", TransportParamType.STRING, LOOPBACK)),
    )  # fmt: skip
    assert broker.port == port
    assert sender[0] == LOOPBACK
    assert second == first
    log = "".join(broker.log)
    assert '"msg": "broadcast group started"' in log
