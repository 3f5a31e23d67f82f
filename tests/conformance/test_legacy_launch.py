"""The legacy servers (HornetQ 2.4.7.Final, Artemis 1.5.6) as embedded Java servers: resolved with mvn, started by
``cck.legacy.Main`` from a JSON configuration, stopped by SIGTERM with exit 0.

What the kit can do with them today (each found by running it):

* The kit's **codec** speaks to both: with the server's own preamble (``HORNETQ`` / ``ARTEMIS``), the version-1
  CREATESESSION (type 30) at the server's protocol version (124 / 128), then SESS_SEND, SESS_CREATECONSUMER,
  SESS_FLOWTOKEN, SESS_START, SESS_RECEIVE_MSG, SESS_ACKNOWLEDGE and SESS_CLOSE in their pre-2.0 layouts.
  :func:`test_a_durable_message_survives_a_restart` drives that by hand (also a refused password, and the
  journal across a restart).
* The kit's **client** (``cck.reference.client``), announcing the server's version (124 / 128), does the same
  end to end: :func:`test_the_kits_client_runs_a_session` (security on: a refused password, a session with
  credentials, CREATE_QUEUE, durable and non-durable sends, a consumer, receive, acknowledge, a transacted session
  committed, close) and :func:`test_the_kits_client_reattaches_after_a_cut` (security off, no credentials, a
  confirmation window: the connection cut by a proxy, the session reattached and the unconfirmed sends
  replayed).  What it needed, found here first:

  - the preamble: HornetQ 2.4.7's acceptor skips only ``HORNETQ`` (CoreProtocolManager.handshake) and read
    ``ARTEMIS`` as a 1095914565-byte frame length; the client now writes what the released client of its
    version wrote (``ClientSettings.preamble``: ``HORNETQ`` below 126, ``ARTEMIS`` from Artemis 1.0.0's 126);
  - CREATESESSION_V2 (type -18) only from 2.18 (131), as Artemis's ``isVersionSupportClientID``: both servers
    logged ``Invalid type: -18`` and never answered;
  - the pre-2.0 packets for queues (CREATE_QUEUE / CREATE_SHARED_QUEUE v1, no CREATE_ADDRESS), no consumer
    priority, no correlation IDs, and sends that ask for an answer only when blocking.
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cck.codec import (
    NEED_DATA,
    ActiveMQExceptionMessage,
    CoreMessage,
    CreateSessionMessage,
    CreateSessionResponseMessage,
    ExceptionType,
    FrameDecoder,
    NullResponseMessage,
    Packet,
    Ping,
    SessionAcknowledgeMessage,
    SessionCloseMessage,
    SessionConsumerFlowCreditMessage,
    SessionCreateConsumerMessage,
    SessionReceiveMessage,
    SessionSendMessage,
    SessionStart,
    TypedProperties,
    encode_packet,
)
from cck.conformance.targets import free_ports
from cck.conformance.targets._legacy_launch import (
    READY_PREFIX,
    LegacyError,
    LegacyLaunch,
    ensure_legacy,
    legacy_argv,
)
from cck.conformance.targets._process import BrokerProcess, ExitedEarly, NotReady
from cck.reference.client import BrokerRefused, ClientSettings, Connection, Session, connect
from tests.conformance import legacy_support
from tests.conformance.legacy_support import STOP_DEADLINE_S, LegacyProcess, needs_legacy
from tests.reference.cut_proxy import CutProxy

pytestmark = needs_legacy
launch = legacy_support.launch  # the fixture: each kind's launcher in turn
READY_DEADLINE_S = 120.0
IO_TIMEOUT_S = 15.0
QUIET_S = 0.5
SCENARIO_DEADLINE_S = 120.0
SESSION_CHANNEL = 10
QUEUE = "cck.legacy.q"
USER, PASSWORD, ROLE = "cck", "secret", "cck-role"


class Server(LegacyProcess):
    """One run of a legacy server as the kit will run it: started, and waited for until its ready line."""

    def __init__(self, launch: LegacyLaunch, tmp: Path, config: dict[str, Any], run: int) -> None:
        self.launch = launch
        started = time.monotonic()
        super().__init__(launch, config, tmp / f"config-{run}.json", tmp / "server.log",
                         ready=re.compile(re.escape(READY_PREFIX) + ".*"), tail_lines=400)
        try:
            self.ready_line = self.process.wait_ready(READY_DEADLINE_S).group(0)
        except (NotReady, ExitedEarly):
            self.process.kill(STOP_DEADLINE_S)
            raise AssertionError("the server did not become ready:\n" + "".join(self.tail)) from None
        self.startup_s = time.monotonic() - started


def config_for(launch: LegacyLaunch, data_dir: Path, port: int, *, security: bool = False) -> dict[str, Any]:
    return {
        "host": "127.0.0.1", "port": port, "data_dir": str(data_dir), "persistence": True,
        "security_enabled": security,
        "users": [{"name": USER, "password": PASSWORD, "roles": [ROLE]}] if security else [],
        "connection_ttl_override_ms": -1, "transaction_timeout_ms": 300000, "id_cache_size": 20000,
        "queues": [{"address": QUEUE, "name": QUEUE, "durable": True},
                   {"address": "DLQ", "name": "DLQ", "durable": True}],
        "address_settings": {"#": {"dead_letter_address": "DLQ", "max_delivery_attempts": 10}},
    }  # fmt: skip


@pytest.fixture
def started() -> Iterator[list[Server]]:
    """The servers a test started; any still running at the end is stopped (and must exit 0)."""
    servers: list[Server] = []
    yield servers
    for server in servers:
        if server.process.running:
            assert server.stop() == 0, server.log()


class CoreWire:
    """The kit's codec over a blocking socket: frames out, the reply on the same channel back (PINGs skipped)."""

    def __init__(self, port: int, version: int, preamble: bytes) -> None:
        self.version = version
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S)
        self.decoder = FrameDecoder(version=version)
        self.sock.sendall(preamble + encode_packet(Ping(60_000), 0, version=version))

    def write(self, packet: Packet, channel: int = SESSION_CHANNEL) -> None:
        self.sock.sendall(encode_packet(packet, channel, version=self.version))

    def read(self, channel: int = SESSION_CHANNEL) -> Packet:
        while True:
            frame = self.decoder.next_frame()
            if frame is NEED_DATA:
                data = self.sock.recv(65536)
                assert data, "the server closed the connection"
                self.decoder.feed(data)
            elif frame.channel_id == channel:
                return frame.packet

    def call(self, packet: Packet, channel: int = SESSION_CHANNEL) -> Packet:
        self.write(packet, channel)
        return self.read(channel)

    def create_session(self, username: str | None, password: str | None) -> Packet:
        """CREATESESSION, version 1 layout (type 30): what the Java clients of these versions send."""
        return self.call(CreateSessionMessage("cck-legacy", SESSION_CHANNEL, self.version, username, password),
                         channel=1)

    def close(self) -> None:
        self.sock.close()


def test_a_durable_message_survives_a_restart(launch: LegacyLaunch, tmp_path: Path, started: list[Server]) -> None:
    kind, version = launch.server.kind, launch.server.protocol_version
    port = free_ports(1)[0]
    config = config_for(launch, tmp_path / "data", port, security=True)
    first = Server(launch, tmp_path, config, 1)
    started.append(first)
    assert first.ready_line == f"{READY_PREFIX}127.0.0.1:{port} ({kind} {launch.server.version})"
    assert f"declares core protocol version {version}" in first.log()

    refused = CoreWire(port, version, launch.server.preamble)
    answer = refused.create_session(USER, "wrong")
    refused.close()
    assert isinstance(answer, ActiveMQExceptionMessage), answer
    assert answer.code == ExceptionType.SECURITY_EXCEPTION, answer

    wire = CoreWire(port, version, launch.server.preamble)
    assert wire.create_session(USER, PASSWORD) == CreateSessionResponseMessage(version)
    sent = CoreMessage(b"kept across a restart", address=QUEUE, durable=True)
    assert isinstance(wire.call(SessionSendMessage(sent, True, None, None)), NullResponseMessage)
    assert isinstance(wire.call(SessionCloseMessage()), NullResponseMessage)
    wire.close()
    assert first.stop() == 0, first.log()
    assert "server stopped" in first.log()
    made = {p.name for p in (tmp_path / "data").iterdir()}  # paging/ is made when an address first pages
    assert {"bindings", "journal", "large-messages"} <= made <= {"bindings", "journal", "large-messages", "paging"}

    second = Server(launch, tmp_path, config, 2)
    started.append(second)
    wire = CoreWire(port, version, launch.server.preamble)
    assert wire.create_session(USER, PASSWORD) == CreateSessionResponseMessage(version)
    query = wire.call(SessionCreateConsumerMessage(0, QUEUE, priority=None))
    assert getattr(query, "exists", None) is True, query
    wire.write(SessionConsumerFlowCreditMessage(0, 1 << 20))
    wire.write(SessionStart())
    delivery = wire.read()
    assert isinstance(delivery, SessionReceiveMessage), delivery
    assert (delivery.message.body, delivery.message.address, delivery.message.durable) == (sent.body, QUEUE, True)
    assert isinstance(wire.call(SessionAcknowledgeMessage(0, delivery.message.message_id, True)), NullResponseMessage)
    assert isinstance(wire.call(SessionCloseMessage()), NullResponseMessage)
    wire.close()
    assert second.stop() == 0, second.log()
    print(f"{kind}: ready after {first.startup_s:.2f} s, {second.startup_s:.2f} s (restart)")
    errors = [line.split("] ", 1)[-1] for line in (first.log() + second.log()).splitlines()
              if " SEVERE " in line or " ERROR " in line]
    assert errors == [f"{'HQ' if kind == 'hornetq' else 'AMQ'}224018: Failed to create session"], errors  # the refused


async def _session_round_trip(connection: Connection, session: Session, queue: str,
                              credentials: tuple[str | None, str | None]) -> None:
    """CREATE_QUEUE (v1 below 129), a durable (blocking) and a non-durable send, a consumer, both received and
    acknowledged; then a transacted session: a send and an acknowledgement, each made visible by SESS_COMMIT."""
    await session.create_queue(queue, queue, durable=False)
    producer = session.create_producer(queue)
    await producer.send(CoreMessage(b"durable", durable=True, properties=TypedProperties.of(seq=1)))
    await producer.send(CoreMessage(b"non-durable", durable=False, properties=TypedProperties.of(seq=2)))
    consumer = await session.create_consumer(queue)
    session.start()
    got: list[tuple[bytes, bool, object]] = []
    for _ in range(2):
        delivery = await consumer.receive(IO_TIMEOUT_S)
        assert delivery is not None, f"only {got} arrived"
        got.append((delivery.message.body, delivery.message.durable, delivery.message.properties.get("seq")))
        await consumer.acknowledge(delivery)
    assert got == [(b"durable", True, 1), (b"non-durable", False, 2)]
    assert await consumer.receive(QUIET_S) is None
    await consumer.close()

    transacted = await connection.create_session(transacted=True, username=credentials[0], password=credentials[1])
    sender = transacted.create_producer(queue)
    await sender.send(CoreMessage(b"in a transaction", durable=True))
    reader = await transacted.create_consumer(queue)
    transacted.start()
    assert await reader.receive(QUIET_S) is None, "an uncommitted send was delivered"
    await transacted.commit()
    delivery = await reader.receive(IO_TIMEOUT_S)
    assert delivery is not None
    assert delivery.message.body == b"in a transaction"
    await reader.acknowledge(delivery)
    await transacted.commit()
    query = await session.queue_query(queue)
    assert (query.exists, query.message_count) == (True, 0), query
    await transacted.close()


def test_the_kits_client_runs_a_session(launch: LegacyLaunch, tmp_path: Path, started: list[Server]) -> None:
    """The kit's client, announcing the server's version (124 / 128), against a server with security on: the
    preamble that version's client wrote, CREATESESSION v1 with credentials (a wrong password refused), the
    pre-2.0 packets for queues, sends, consumers, acknowledgements and commits, then a clean close."""
    kind, version = launch.server.kind, launch.server.protocol_version
    port = free_ports(1)[0]
    server = Server(launch, tmp_path, config_for(launch, tmp_path / "data", port, security=True), 1)
    started.append(server)
    settings = ClientSettings(version=version, topology_timeout_ms=10_000, call_timeout_ms=10_000)
    assert settings.preamble_bytes() == launch.server.preamble

    async def scenario() -> None:
        connection = await connect(f"tcp://127.0.0.1:{port}", settings=settings, connect_timeout=IO_TIMEOUT_S)
        try:
            with pytest.raises(BrokerRefused) as refused:
                await connection.create_session(username=USER, password="wrong")
            assert refused.value.code == ExceptionType.SECURITY_EXCEPTION
            session = await connection.create_session(username=USER, password=PASSWORD)
            assert session.core.server_version == version
            assert connection.core.version == version
            await _session_round_trip(connection, session, f"cck.legacy.client.{kind}", (USER, PASSWORD))
            await session.close()
        finally:
            await connection.close()

    asyncio.run(asyncio.wait_for(scenario(), SCENARIO_DEADLINE_S))
    assert server.stop() == 0, server.log()
    log = server.log()
    assert "Invalid type" not in log, log
    assert "Failed to decode" not in log, log


def test_the_kits_client_reattaches_after_a_cut(launch: LegacyLaunch, tmp_path: Path, started: list[Server]) -> None:
    """Security off, a session without credentials and a confirmation window: a cut connection is reconnected
    (HORNETQ/ARTEMIS preamble, SUBSCRIBE_TOPOLOGY_V2) and the session reattached, replaying what the server had
    not confirmed; sends before and after the cut all arrive once."""
    kind, version = launch.server.kind, launch.server.protocol_version
    port = free_ports(1)[0]
    server = Server(launch, tmp_path, config_for(launch, tmp_path / "data", port), 1)
    started.append(server)
    settings = ClientSettings(version=version, topology_timeout_ms=10_000, call_timeout_ms=10_000,
                              confirmation_window_size=1024, reconnect_attempts=-1, retry_interval_ms=100,
                              max_retry_interval_ms=100)  # fmt: skip
    queue = f"cck.legacy.reattach.{kind}"

    async def scenario() -> list[str]:
        with CutProxy("127.0.0.1", port) as proxy:
            connection = await connect(f"tcp://127.0.0.1:{proxy.port}", settings=settings,
                                       connect_timeout=IO_TIMEOUT_S)
            try:
                session = await connection.create_session()
                await session.create_queue(queue, queue)
                producer = session.create_producer(queue)
                for seq in range(20):
                    # Non-durable sends do not wait (before 130 nothing answers them; the window confirms them),
                    # so some are in flight, unconfirmed, at the cut: the reattach replays them.
                    await producer.send(CoreMessage(b"r", durable=seq >= 10, properties=TypedProperties.of(seq=seq)))
                    if seq == 9:
                        assert proxy.cut() == 1
                        await _restored(connection)
                consumer = await session.create_consumer(queue)
                session.start()
                seqs = []
                while (delivery := await consumer.receive(QUIET_S * 4)) is not None:
                    seqs.append(delivery.message.properties.get("seq"))
                    await consumer.acknowledge(delivery)
                assert seqs == list(range(20))
                await session.close()
                return [f"{e.kind} {e.detail}" for e in connection.events]
            finally:
                await connection.close()

    events = asyncio.run(asyncio.wait_for(scenario(), SCENARIO_DEADLINE_S))
    kinds = [event.split(" ", 1)[0] for event in events]
    assert "reattached" in kinds, events
    assert "recreated" not in kinds, events
    print(f"{kind}: {events}")
    assert server.stop() == 0, server.log()


async def _restored(connection: Connection) -> None:
    """Wait (bounded) for the reconnection to end: reattached, recreated or given up."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def watch(event: object) -> None:
        if getattr(event, "kind", None) in ("reattached", "recreated", "gave-up") and not done.done():
            done.set_result(None)

    connection.add_event_listener(watch)
    await asyncio.wait_for(done, IO_TIMEOUT_S)


def test_a_misspelt_setting_is_refused(launch: LegacyLaunch, tmp_path: Path) -> None:
    config = config_for(launch, tmp_path / "data", free_ports(1)[0]) | {"persistance": True}
    assert 'unknown configuration key "persistance"' in _refused_at_start(launch, config, tmp_path)


def _refused_at_start(launch: LegacyLaunch, config: dict[str, Any], tmp_path: Path) -> str:
    """What the launcher logged on refusing ``config`` (it exits with status 1 before any server starts)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    tail: collections.deque[str] = collections.deque(maxlen=100)
    process = BrokerProcess(legacy_argv(launch, path), ready=re.compile(re.escape(READY_PREFIX)),
                            log_file=tmp_path / "server.log", tail=tail)
    assert process.wait(STOP_DEADLINE_S) == 1
    return "".join(tail)


@pytest.mark.parametrize(("security", "refused"), [
    ({"security_settings": {"#": {ROLE: ["send", "createAddress"]}}}, 'permission "createAddress" is not one this'),
    ({"tls": {"keystore": "/k.p12", "password": "pw", "trust_store": "/t.p12"}}, 'unknown key "trust_store" in tls'),
    ({"certificate_users": [{"name": "c", "dn": "CN=c", "roles": []}]}, "certificate_users need tls with a truststore"),
], ids=["permission", "tls-key", "certificate-users-without-tls"])
def test_security_settings_are_checked_strictly(launch: LegacyLaunch, tmp_path: Path, security: dict[str, Any],
                                                refused: str) -> None:
    """Each server refuses a permission its Role lacks (createAddress: Artemis 2.0.0), a misspelt TLS key and
    certificate users without client certificates, before it starts."""
    config = config_for(launch, tmp_path / "data", free_ports(1)[0], security=True) | security
    assert refused in _refused_at_start(launch, config, tmp_path)


def test_a_failed_download_and_a_missing_mvn_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCK_CACHE", str(tmp_path))

    def offline(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        error = ("[ERROR] Failed to execute goal: Could not transfer artifact "
                 "org.hornetq:hornetq-server:pom:2.4.7.Final"
                 ": UnknownHostException")
        return subprocess.CompletedProcess(command, 1, error, "")

    with pytest.raises(LegacyError, match="no network access to Maven Central"):
        ensure_legacy("hornetq", runner=offline)
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "mvn" else real_which(name))
    with pytest.raises(LegacyError, match="mvn was not found on PATH"):
        ensure_legacy("hornetq")
    with pytest.raises(LegacyError, match="unknown legacy server kind 'activemq5'"):
        ensure_legacy("activemq5")
