"""A shared-store pair of reference brokers as real processes: the backup waits for the store's lock,
announced to the primary (whose topology then names it); the primary is killed with SIGKILL; the backup takes
the lock, loads the journal and serves; the kit's client fails over to it and finds every confirmed durable
message there exactly once.  Every wait has a deadline."""

from __future__ import annotations

import asyncio
import re
import socket
from pathlib import Path

from cck.codec import CoreMessage, RoutingType, TypedProperties
from cck.reference.client import ClientSettings, Connector, connect

from .conftest import STOP_DEADLINE_S, Launched

WAITING = re.compile(r"waiting for the shared store")
LISTENING = re.compile(r"listening")
ANNOUNCED = re.compile(r"backup announced")
COUNT = 20
DEADLINE_S = 30.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _broker_xml(name: str, role: str, own: int, peer: int, store: Path) -> str:
    return f"""<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
  <name>{name}</name>
  <security-enabled>false</security-enabled>
  <journal-directory>{store}/journal</journal-directory>
  <bindings-directory>{store}/bindings</bindings-directory>
  <cluster-user>pair</cluster-user><cluster-password>pair-secret</cluster-password>
  <acceptors><acceptor name="core">tcp://127.0.0.1:{own}?protocols=CORE</acceptor></acceptors>
  <connectors>
    <connector name="self">tcp://127.0.0.1:{own}</connector>
    <connector name="peer">tcp://127.0.0.1:{peer}</connector>
  </connectors>
  <cluster-connections><cluster-connection name="pair">
    <connector-ref>self</connector-ref><retry-interval>200</retry-interval>
    <static-connectors><connector-ref>peer</connector-ref></static-connectors>
  </cluster-connection></cluster-connections>
  <ha-policy><shared-store><{role}/></shared-store></ha-policy>
</core></configuration>"""


def _configs(tmp_path: Path) -> tuple[int, int]:
    store = tmp_path / "store"
    ports = _free_port(), _free_port()
    for name, role, own, peer in (("primary", "master", ports[0], ports[1]), ("backup", "slave", ports[1], ports[0])):
        (tmp_path / f"{name}.xml").write_text(_broker_xml(name, role, own, peer, store), encoding="utf-8")
    return ports


def _pair(tmp_path: Path) -> tuple[Launched, Launched]:
    """The primary (serving) and its backup (waiting, announced: the primary has taken the announcement in)."""
    primary = Launched("--config", str(tmp_path / "primary.xml"))
    primary.wait_for(LISTENING)
    backup = Launched("--config", str(tmp_path / "backup.xml"))
    backup.wait_for(WAITING)
    primary.wait_for(ANNOUNCED)  # before the client connects: its first topology has the pair
    return primary, backup


def _kill(*launched: Launched) -> None:
    for one in launched:
        one.process.kill()
        one.process.wait(timeout=STOP_DEADLINE_S)


def test_the_backup_takes_over_the_shared_store_and_the_client_follows(tmp_path: Path) -> None:
    ports = _configs(tmp_path)
    primary, backup = _pair(tmp_path)
    try:
        asyncio.run(_scenario(primary, backup, ports))
    finally:
        _kill(primary, backup)


def test_a_restarted_primary_takes_the_store_back_and_the_client_follows(tmp_path: Path) -> None:
    ports = _configs(tmp_path)
    primary, backup = _pair(tmp_path)
    restarted: list[Launched] = []
    try:
        asyncio.run(_failback(primary, backup, ports, tmp_path, restarted))
    finally:
        _kill(primary, backup, *restarted)


async def _failback(primary: Launched, backup: Launched, ports: tuple[int, int], tmp_path: Path,
                    restarted: list[Launched]) -> None:
    settings = ClientSettings(reconnect_attempts=100, retry_interval_ms=100)
    async with await connect(f"tcp://127.0.0.1:{ports[0]}", settings=settings) as connection:
        session = await connection.create_session()
        await session.create_queue("ha", "ha", routing_type=RoutingType.ANYCAST, durable=True)
        producer = session.create_producer("ha")
        _kill(primary)
        await asyncio.to_thread(backup.wait_for, LISTENING, DEADLINE_S)
        for seq in range(COUNT):  # sent to the backup once the client followed it
            await producer.send(CoreMessage(b"m", durable=True, properties=TypedProperties.of(seq=seq)))
        assert connection.machine.connector == Connector("127.0.0.1", ports[1])
        again = Launched("--config", str(tmp_path / "primary.xml"))
        restarted.append(again)
        await asyncio.to_thread(again.wait_for, re.compile("waiting for the shared store as primary"), DEADLINE_S)
        await asyncio.to_thread(backup.wait_for, re.compile("waiting for the shared store as backup"), DEADLINE_S)
        await asyncio.to_thread(again.wait_for, LISTENING, DEADLINE_S)
        consumer = await session.create_consumer("ha")
        session.start()
        got: list[int] = []
        while (delivery := await consumer.receive(DEADLINE_S if len(got) < COUNT else 0.5)) is not None:
            got.append(int(str(delivery.message.properties.get("seq"))))
            await consumer.acknowledge(delivery)
        assert sorted(got) == list(range(COUNT)), got  # what was sent to the backup is on the primary again
        assert connection.machine.connector == Connector("127.0.0.1", ports[0])


async def _scenario(primary: Launched, backup: Launched, ports: tuple[int, int]) -> None:
    settings = ClientSettings(reconnect_attempts=50, retry_interval_ms=100, confirmation_window_size=1024 * 1024)
    async with await connect(f"tcp://127.0.0.1:{ports[0]}", settings=settings) as connection:
        assert connection.machine.backups == (Connector("127.0.0.1", ports[1]),)
        session = await connection.create_session()
        await session.create_queue("ha", "ha", routing_type=RoutingType.ANYCAST, durable=True)
        producer = session.create_producer("ha")
        for seq in range(COUNT):
            await producer.send(CoreMessage(b"m", durable=True, properties=TypedProperties.of(seq=seq)))
        _kill(primary)
        await asyncio.to_thread(backup.wait_for, LISTENING, DEADLINE_S)
        consumer = await session.create_consumer("ha")
        session.start()
        got: list[int] = []
        while (delivery := await consumer.receive(DEADLINE_S if len(got) < COUNT else 0.5)) is not None:
            got.append(int(str(delivery.message.properties.get("seq"))))
            await consumer.acknowledge(delivery)
        assert sorted(got) == list(range(COUNT)), got
        assert connection.machine.connector == Connector("127.0.0.1", ports[1])
        kinds = [e.kind for e in connection.events]
        assert "recreated" in kinds, kinds  # a shared store's backup never had the session
