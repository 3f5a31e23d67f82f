"""The kit client's UDP discovery (notes §12): udp:// URLs, the sans-IO discovery table on a fake
clock, and connect("udp://...") against the in-process reference broker with datagrams multicast
on loopback.  Every wait has a deadline; nothing sleeps and checks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from cck.codec import (
    CoreMessage,
    DiscoveryDatagram,
    ExceptionType,
    TransportConfiguration,
    TransportParam,
    TransportParamType,
    encode_discovery,
)
from cck.reference._server import BrokerServer
from cck.reference.broker import BrokerCore, BrokerSettings
from cck.reference.client import (
    ConnectionFailed,
    Connector,
    DiscoveryEndpoint,
    DiscoveryReceiver,
    connect,
    parse_locator_url,
)
from cck.reference.client._discovery import connector_of
from cck.reference.discovery import (
    MalformedDatagram,
    NodeExpired,
    NodeFound,
    SameNodeNewUniqueId,
    open_multicast_sender,
)

GROUP = "231.7.7.7"
LOOPBACK = "127.0.0.1"
SCENARIO_DEADLINE_S = 30.0
WAIT_S = 5.0
BROADCAST_PERIOD_S = 0.05

NODE_A = "11111111-2222-3333-4444-555555555555"
NODE_B = "66666666-7777-8888-9999-000000000000"
SENDER = ("10.0.0.5", 40123)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(scenario(), SCENARIO_DEADLINE_S)

    asyncio.run(bounded())


def datagram(node_id: str, *connectors: TransportConfiguration, unique_id: str = "u-1") -> bytes:
    return encode_discovery(DiscoveryDatagram(node_id, unique_id, connectors))


def free_port(kind: socket.SocketKind) -> int:
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("", 0))
        port: int = sock.getsockname()[1]
        return port


# ---------------------------------------------------------------------- URLs


def test_a_udp_url_is_a_discovery_locator_with_artemis_defaults() -> None:
    locator = parse_locator_url("udp://231.7.7.7:9876")
    assert locator.is_discovery
    assert locator.connectors == ()
    assert locator.params == {}
    assert locator.discovery == DiscoveryEndpoint(GROUP, 9876, "0.0.0.0", -1, 10_000, 10_000)
    assert locator.discovery.url == "udp://231.7.7.7:9876"


def test_udp_url_parameters_split_into_discovery_and_client_settings() -> None:
    locator = parse_locator_url(
        "udp://231.7.7.7:9877?localBindAddress=127.0.0.1&localBindPort=4000&refreshTimeout=2500"
        "&discoveryInitialWaitTimeout=300&retryInterval=50&initialConnectAttempts=3")
    assert locator.discovery == DiscoveryEndpoint(GROUP, 9877, LOOPBACK, 4000, 2500, 300)
    assert locator.params == {"retryInterval": "50", "initialConnectAttempts": "3"}
    settings = locator.settings()
    assert settings.retry_interval_ms == 50
    assert settings.initial_connect_attempts == 3


def test_tcp_urls_are_not_discovery_locators() -> None:
    locator = parse_locator_url("(tcp://a:1,tcp://b:2)?retryInterval=5")
    assert not locator.is_discovery
    assert locator.connectors == (Connector("a", 1), Connector("b", 2))


@pytest.mark.parametrize(
    ("url", "names"),
    [
        ("udp://231.7.7.7", ["no group port"]),
        ("udp://231.7.7.7:0", ["group port 0 out of range"]),
        ("udp://10.0.0.1:9876", ["'10.0.0.1'", "not a multicast address"]),
        ("udp://group.example:9876", ["'group.example'", "not an IPv4 address"]),
        ("udp://[ff02::1]:9876", ["'ff02::1'", "only IPv4"]),
        ("udp://231.7.7.7:9876/x", ["is not group-address:group-port"]),
        ("(udp://231.7.7.7:9876,tcp://a:1)", ["cannot be part of a connector list"]),
        ("udp://231.7.7.7:9876?initialWaitTimeout=300", ["unknown parameter 'initialWaitTimeout'",
                                                         "discoveryInitialWaitTimeout"]),
        ("udp://231.7.7.7:9876?localAddress=127.0.0.1", ["unknown parameter 'localAddress'", "localBindAddress"]),
        ("udp://231.7.7.7:9876?stoppingTimeout=5", ["'stoppingTimeout' is not supported by the kit"]),
        ("udp://231.7.7.7:9876?groupPort=1", ["'groupPort' is not supported", "URL's port"]),
        ("udp://231.7.7.7:9876?localBindAddress=eth0", ["localBindAddress 'eth0' is not an IPv4 address"]),
        ("udp://231.7.7.7:9876?refreshTimeout=soon", ["refreshTimeout='soon' is not an integer"]),
        ("udp://231.7.7.7:9876?discoveryInitialWaitTimeout=0", ["discoveryInitialWaitTimeout=0 must be > 0"]),
        ("udp://231.7.7.7:9876?localBindPort=70000", ["localBindPort=70000 out of range"]),
        ("udp://231.7.7.7:9876?refreshTimeout", ["'refreshTimeout' is not name=value"]),
        ("http://231.7.7.7:9876", ["scheme 'http' is not supported (only tcp and udp)"]),
    ],
)
def test_bad_udp_urls_name_the_wrong_part(url: str, names: list[str]) -> None:
    with pytest.raises(ValueError, match="bad broker URL") as caught:
        parse_locator_url(url)
    for name in names:
        assert name in str(caught.value)


# ---------------------------------------------------------------------- the sans-IO table


def test_connector_of_reads_string_and_integer_ports_and_netty_defaults() -> None:
    assert connector_of(TransportConfiguration.netty("h", 61617)) == Connector("h", 61617)
    numeric = TransportConfiguration("n", params=(TransportParam("host", TransportParamType.STRING, "h"),
                                                  TransportParam("port", TransportParamType.INT, 5445)))
    assert connector_of(numeric) == Connector("h", 5445)
    assert connector_of(TransportConfiguration("bare")) == Connector("localhost", 61616)
    invm = TransportConfiguration("in-vm", "org.apache.activemq.artemis.core.remoting.impl.invm.InVMConnectorFactory")
    assert connector_of(invm) is None


def receiver_at(now_ms: list[int], node_id: str = "me", refresh_timeout_ms: int = 10_000) -> DiscoveryReceiver:
    """A receiver fed by hand (no socket), on a fake clock in monotonic ms."""
    endpoint = DiscoveryEndpoint(GROUP, 9876, LOOPBACK, refresh_timeout_ms=refresh_timeout_ms)
    return DiscoveryReceiver(endpoint, node_id=node_id, clock_ms=lambda: now_ms[0])


def test_the_receiver_keeps_the_tcp_connectors_of_the_table_in_discovery_order() -> None:
    now = [100_000]
    receiver = receiver_at(now)
    assert receiver.datagram_received(datagram(NODE_B, TransportConfiguration.netty("b", 2)), SENDER) == (
        NodeFound(NODE_B, TransportConfiguration.netty("b", 2), SENDER),
    )
    now[0] = 101_000
    receiver.datagram_received(datagram(NODE_A, TransportConfiguration.netty("a", 1)), SENDER)
    assert receiver.connectors == (Connector("b", 2), Connector("a", 1))
    # A known node announcing another connector: replaced in place (listeners are not told, as Artemis).
    receiver.datagram_received(datagram(NODE_B, TransportConfiguration.netty("b2", 3)), SENDER)
    assert receiver.connectors == (Connector("b2", 3), Connector("a", 1))
    # Several connectors in one datagram: keyed by node, the last one stays.
    now[0] = 103_000
    receiver.datagram_received(
        datagram(NODE_A, TransportConfiguration.netty("a", 1), TransportConfiguration.netty("a-last", 9)), SENDER)
    assert receiver.connectors == (Connector("b2", 3), Connector("a-last", 9))
    # The table's time is the receiver's clock_ms at each arrival.
    assert [(e.node_id, e.last_update_ms) for e in receiver.table.entries] == [(NODE_B, 101_000), (NODE_A, 103_000)]
    assert [sender for sender, _ in receiver.arrivals] == [SENDER] * 4


def test_the_receivers_ms_clock_expires_entries_at_the_refresh_timeout() -> None:
    now = [100_000]
    receiver = receiver_at(now, refresh_timeout_ms=1_000)
    receiver.datagram_received(datagram(NODE_A, TransportConfiguration.netty("a", 1)), SENDER)
    now[0] = 100_999
    assert receiver.datagram_received(datagram(NODE_B, TransportConfiguration.netty("b", 2)), SENDER) == (
        NodeFound(NODE_B, TransportConfiguration.netty("b", 2), SENDER),
    )
    now[0] = 101_000
    assert receiver.datagram_received(datagram(NODE_B, TransportConfiguration.netty("b", 2)), SENDER) == (
        NodeExpired(NODE_A, TransportConfiguration.netty("a", 1), 100_000),
    )
    assert receiver.connectors == (Connector("b", 2),)


def test_only_another_nodes_well_formed_datagram_ends_the_wait_for_a_broadcast() -> None:
    async def scenario() -> None:
        receiver = receiver_at([1_000], node_id=NODE_A)
        receiver.datagram_received(datagram(NODE_A, TransportConfiguration.netty("me", 1)), SENDER)  # our own
        receiver.datagram_received(b"\x00\x00\x00\x24\x00", SENDER)  # malformed
        assert not await receiver.wait_for_broadcast(1)
        # Another node's datagram counts even without connectors (Artemis sets `received`), storing nothing.
        assert receiver.datagram_received(datagram(NODE_B), SENDER) == ()
        assert receiver.table.entries == ()
        assert receiver.table.broadcasts == 1
        assert await receiver.wait_for_broadcast(1)
        assert not await receiver.wait_for_broadcast(1)  # the flag is consumed, as Artemis's waitForBroadcast

    run(scenario)


def test_the_receiver_warns_about_malformed_datagrams_twin_node_ids_and_non_tcp_connectors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    receiver = receiver_at([1_000])
    with caplog.at_level(logging.WARNING, logger="cck.reference.client.discovery"):
        (malformed,) = receiver.datagram_received(b"\x00\x00\x00\x24\x00", ("10.9.8.7", 4321))
        receiver.datagram_received(datagram(NODE_A, TransportConfiguration.netty("a", 1), unique_id="u-1"), SENDER)
        (twin,) = receiver.datagram_received(
            datagram(NODE_A, TransportConfiguration.netty("a", 1), unique_id="u-2"), SENDER)
        invm = TransportConfiguration("in-vm",
                                      "org.apache.activemq.artemis.core.remoting.impl.invm.InVMConnectorFactory")
        receiver.datagram_received(datagram(NODE_B, invm), ("10.0.0.2", 9))
    assert isinstance(malformed, MalformedDatagram)
    assert twin == SameNodeNewUniqueId(NODE_A, "u-1", "u-2", SENDER)
    malformed_warning, twin_warning, invm_warning = [r.getMessage() for r in caplog.records]
    assert "malformed discovery datagram from 10.9.8.7:4321" in malformed_warning
    assert "offset" in malformed_warning  # the CodecError's own message
    assert f"multiple servers broadcasting node id {NODE_A}" in twin_warning
    assert "'in-vm'" in invm_warning
    assert "from 10.0.0.2:9" in invm_warning
    assert "not a TCP host:port" in invm_warning
    # The entry is kept (as Artemis), but it is no connector the client can use.
    assert len(receiver.table.entries) == 2
    assert receiver.connectors == (Connector("a", 1),)


# ---------------------------------------------------------------------- over loopback multicast


class Broadcaster:
    """A broadcast group on loopback: sends its datagrams every BROADCAST_PERIOD_S, first one at once."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = open_multicast_sender(socket.AF_INET, LOOPBACK)  # the broker's broadcast socket

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()
        return host, port

    def send(self, data: bytes) -> None:
        self.sock.sendto(data, (GROUP, self.port))

    @contextlib.asynccontextmanager
    async def periodically(self, *datagrams: bytes) -> AsyncIterator[None]:
        async def broadcast() -> None:
            while True:
                for data in datagrams:
                    self.send(data)
                await asyncio.sleep(BROADCAST_PERIOD_S)

        task = asyncio.ensure_future(broadcast())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def close(self) -> None:
        self.sock.close()


def broker() -> BrokerServer:
    """An in-process reference broker on a free port (``async with broker() as server``)."""
    return BrokerServer(BrokerCore(BrokerSettings(node_id="n1")), LOOPBACK, 0)


@contextlib.asynccontextmanager
async def broadcaster(port: int) -> AsyncIterator[Broadcaster]:
    sender = Broadcaster(port)
    try:
        yield sender
    finally:
        sender.close()


def test_connect_over_udp_finds_the_advertised_broker_and_does_a_round_trip() -> None:
    async def scenario() -> None:
        group_port = free_port(socket.SOCK_DGRAM)
        async with broker() as server, broadcaster(group_port) as sender:
            advert = datagram(str(uuid.uuid4()), TransportConfiguration.netty(LOOPBACK, server.bound_port),
                              unique_id=str(uuid.uuid4()))
            url = f"udp://{GROUP}:{group_port}?localBindAddress={LOOPBACK}&discoveryInitialWaitTimeout=5000"
            async with sender.periodically(advert):
                connection = await connect(url)
            async with connection:
                assert connection.connectors == (Connector(LOOPBACK, server.bound_port),)
                assert connection.peer == f"{LOOPBACK}:{server.bound_port}"
                session = await connection.create_session()
                await session.create_queue("discovered")
                await session.create_producer("discovered").send(CoreMessage(b"found you", durable=True))
                consumer = await session.create_consumer("discovered")
                session.start()
                delivery = await consumer.receive(WAIT_S)
                assert delivery is not None
                assert delivery.message.body == b"found you"

    run(scenario)


def test_connect_round_robins_over_the_discovered_connectors() -> None:
    async def scenario() -> None:
        group_port = free_port(socket.SOCK_DGRAM)
        dead_port = free_port(socket.SOCK_STREAM)  # nothing listens there
        async with broker() as server, broadcaster(group_port) as sender:
            dead = datagram(NODE_A, TransportConfiguration.netty(LOOPBACK, dead_port))
            alive = datagram(NODE_B, TransportConfiguration.netty(LOOPBACK, server.bound_port))
            url = (f"udp://{GROUP}:{group_port}?localBindAddress={LOOPBACK}&discoveryInitialWaitTimeout=5000"
                   "&initialConnectAttempts=2&retryInterval=100")
            async with sender.periodically(dead, alive):
                connection = await connect(url)
            async with connection:
                # Round robin (the default policy) from a random start: the dead node, when tried, was passed over.
                assert connection.connectors == (Connector(LOOPBACK, dead_port), Connector(LOOPBACK, server.bound_port))
                assert connection.connector == Connector(LOOPBACK, server.bound_port)

    run(scenario)


def test_no_broadcast_within_the_initial_wait_fails_naming_group_interface_and_timeout() -> None:
    async def scenario() -> None:
        group_port = free_port(socket.SOCK_DGRAM)
        url = (f"udp://{GROUP}:{group_port}?localBindAddress={LOOPBACK}&discoveryInitialWaitTimeout=300"
               "&initialConnectAttempts=0")
        started = time.monotonic()
        with pytest.raises(ConnectionFailed) as caught:
            await connect(url)
        elapsed = time.monotonic() - started
        assert f"no broadcast on {GROUP}:{group_port} (joined on {LOOPBACK}) within 300 ms" in str(caught.value)
        assert caught.value.code == ExceptionType.CONNECTION_TIMEDOUT
        assert 0.25 <= elapsed < 0.3 + 2.0, elapsed

    run(scenario)


def test_initial_connect_attempts_retry_the_initial_wait_as_artemis_does() -> None:
    async def scenario() -> None:
        group_port = free_port(socket.SOCK_DGRAM)
        # initialConnectAttempts=1 (the default) > 0: executeDiscovery waits a second time before it fails.
        url = f"udp://{GROUP}:{group_port}?localBindAddress={LOOPBACK}&discoveryInitialWaitTimeout=300"
        started = time.monotonic()
        with pytest.raises(ConnectionFailed, match=r"within 300 ms \(2 waits: initialConnectAttempts=1\)"):
            await connect(url)
        elapsed = time.monotonic() - started
        assert 0.55 <= elapsed < 0.6 + 2.0, elapsed

    run(scenario)


def test_the_receiver_ignores_its_own_node_and_warns_about_malformed_datagrams(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        group_port = free_port(socket.SOCK_DGRAM)
        endpoint = DiscoveryEndpoint(GROUP, group_port, LOOPBACK)
        async with broadcaster(group_port) as sender, DiscoveryReceiver(endpoint, node_id=NODE_A) as receiver:
            assert receiver.node_id == NODE_A
            address = sender.address
            sender.send(datagram(NODE_A, TransportConfiguration.netty("me", 1)))
            sender.send(b"\x00\x00\x00\x24garbage")
            sender.send(datagram(NODE_B, TransportConfiguration.netty(LOOPBACK, 2)))
            assert await receiver.wait_for_broadcast(int(WAIT_S * 1000))
            own, malformed, found = receiver.arrivals
            assert own == (address, ())
            assert isinstance(malformed[1][0], MalformedDatagram)
            assert found == (address, (NodeFound(NODE_B, TransportConfiguration.netty(LOOPBACK, 2), address),))
            assert malformed[0] == address
            assert receiver.table.unique_ids[NODE_A] == "u-1"  # our own node ID is read, its entry is not kept
            assert receiver.connectors == (Connector(LOOPBACK, 2),)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        from_sender = f"malformed discovery datagram from {address[0]}:{address[1]}"
        assert any(from_sender in w and "offset" in w for w in warnings), warnings

    with caplog.at_level(logging.WARNING, logger="cck.reference.client.discovery"):
        run(scenario)


def test_a_random_discovery_node_id_per_receiver() -> None:
    async def scenario() -> None:
        endpoint = DiscoveryEndpoint(GROUP, free_port(socket.SOCK_DGRAM), LOOPBACK)
        async with DiscoveryReceiver(endpoint) as one, DiscoveryReceiver(endpoint) as other:
            assert one.node_id != other.node_id
            assert uuid.UUID(one.node_id).version == 4

    run(scenario)


def test_joining_on_an_address_that_is_not_a_local_interface_fails_naming_it() -> None:
    async def scenario() -> None:
        group_port = free_port(socket.SOCK_DGRAM)
        url = f"udp://{GROUP}:{group_port}?localBindAddress=203.0.113.9&discoveryInitialWaitTimeout=300"
        with pytest.raises(ConnectionFailed, match=rf"cannot join the discovery group {GROUP}:{group_port} "
                                                    r"\(joined on 203\.0\.113\.9\)"):
            await connect(url)

    run(scenario)


def test_a_broadcast_without_a_tcp_connector_fails_the_connect_naming_the_node() -> None:
    async def scenario() -> None:
        group_port = free_port(socket.SOCK_DGRAM)
        url = f"udp://{GROUP}:{group_port}?localBindAddress={LOOPBACK}&discoveryInitialWaitTimeout=5000"
        async with broadcaster(group_port) as sender, sender.periodically(datagram(NODE_A)):
            with pytest.raises(ConnectionFailed, match=r"name no TCP connector to connect to \(nodes: none\)"):
                await connect(url)

    run(scenario)
