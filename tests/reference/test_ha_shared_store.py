"""A shared-store pair of reference brokers as real processes: the backup waits for the store's lock,
announced to the primary (whose topology then names it); the primary is killed with SIGKILL; the backup takes
the lock, loads the journal and serves; the kit's client fails over to it and finds every confirmed durable
message there exactly once.  Every wait has a deadline."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from cck.codec import CoreMessage, RoutingType, TypedProperties
from cck.reference.client import ClientSettings, Connector, connect

from .conftest import Launched
from .ha_pair import DEADLINE_S, LISTENING, kill, pair, received, write_configs

COUNT = 20


def test_the_backup_takes_over_the_shared_store_and_the_client_follows(tmp_path: Path) -> None:
    ports = write_configs(tmp_path)
    primary, backup = pair(tmp_path)
    try:
        asyncio.run(_scenario(primary, backup, ports))
    finally:
        kill(primary, backup)


def test_a_restarted_primary_takes_the_store_back_and_the_client_follows(tmp_path: Path) -> None:
    ports = write_configs(tmp_path)
    primary, backup = pair(tmp_path)
    restarted: list[Launched] = []
    try:
        asyncio.run(_failback(primary, backup, ports, tmp_path, restarted))
    finally:
        kill(primary, backup, *restarted)


async def _failback(primary: Launched, backup: Launched, ports: tuple[int, int], tmp_path: Path,
                    restarted: list[Launched]) -> None:
    settings = ClientSettings(reconnect_attempts=100, retry_interval_ms=100)
    async with await connect(f"tcp://127.0.0.1:{ports[0]}", settings=settings) as connection:
        session = await connection.create_session()
        await session.create_queue("ha", "ha", routing_type=RoutingType.ANYCAST, durable=True)
        producer = session.create_producer("ha")
        kill(primary)
        await asyncio.to_thread(backup.wait_for, LISTENING, DEADLINE_S)
        for seq in range(COUNT):  # sent to the backup once the client followed it
            await producer.send(CoreMessage(b"m", durable=True, properties=TypedProperties.of(seq=seq)))
        assert connection.machine.connector == Connector("127.0.0.1", ports[1])
        again = Launched("--config", str(tmp_path / "primary.xml"))
        restarted.append(again)
        await asyncio.to_thread(again.wait_for, re.compile("waiting for the shared store as primary"), DEADLINE_S)
        await asyncio.to_thread(backup.wait_for, re.compile("waiting for the shared store as backup"), DEADLINE_S)
        await asyncio.to_thread(again.wait_for, LISTENING, DEADLINE_S)
        got = await received(session, COUNT)
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
        kill(primary)
        await asyncio.to_thread(backup.wait_for, LISTENING, DEADLINE_S)
        got = await received(session, COUNT)
        assert sorted(got) == list(range(COUNT)), got
        assert connection.machine.connector == Connector("127.0.0.1", ports[1])
        kinds = [e.kind for e in connection.events]
        assert "recreated" in kinds, kinds  # a shared store's backup never had the session
