"""A graceful stop (SIGTERM) of a shared store's active server: the clients get DISCONNECT either way; with
``failover-on-shutdown`` false the server leaves the store paused and the backup stays passive (the clients'
reconnect attempts find no server) until the primary is started again; with true the backup activates and the
clients fail over to it.  The store's paused mark on its own: a backup heeds it, a primary clears it.  Every wait
has a deadline."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from cck.codec import CoreMessage, RoutingType, TypedProperties
from cck.reference.client import ClientError, ClientSettings, Connection, Connector, FailoverEvent, Session, connect
from cck.reference.ha import SharedStoreActivation, SharedStoreLock

from .conftest import Launched
from .ha_pair import DEADLINE_S, LISTENING, kill, pair, received, stop, write_configs

COUNT = 10
PAUSED_LINE = re.compile(r"the shared store is paused")
#: refused attempts on the backup the client must have made, after the stop, before the primary starts again
REFUSED = 3


# ---------------------------------------------------------------------------------------------------- the mark


def _holds(lock: SharedStoreLock) -> bool:
    return lock.held


def test_a_backup_leaves_a_paused_store_alone_until_a_primary_clears_the_mark(tmp_path: Path) -> None:
    active, waiting = SharedStoreLock(tmp_path), SharedStoreLock(tmp_path)
    assert active.try_acquire()
    active.pause()
    active.release()
    stop_event = asyncio.Event()
    backup = SharedStoreActivation(waiting, stop_event, heed_pause=True)
    primary = SharedStoreActivation(SharedStoreLock(tmp_path), stop_event)
    assert not backup.try_now()
    assert not _holds(waiting)  # paused: not even the lock is kept
    assert primary.try_now()  # a primary takes a paused store
    primary.lock.resume()
    assert not backup.try_now()  # held by the primary now
    primary.lock.release()
    assert backup.try_now()
    assert _holds(waiting)
    assert not waiting.paused


def test_a_backup_that_took_the_lock_as_the_store_was_paused_lets_it_go(tmp_path: Path) -> None:
    class PausedUnderfoot(SharedStoreLock):
        """The store is paused by the stopping server right after this backup's first look."""

        def try_acquire(self) -> bool:
            taken = super().try_acquire()
            self.paused_path.touch()
            return taken

    waiting = PausedUnderfoot(tmp_path)
    assert not SharedStoreActivation(waiting, asyncio.Event(), heed_pause=True).try_now()
    assert not _holds(waiting)


def test_only_the_holder_marks_the_store(tmp_path: Path) -> None:
    with pytest.raises(AssertionError):
        SharedStoreLock(tmp_path).pause()


# ---------------------------------------------------------------------------------------------------- the pair


class _Events:
    """The connection's failover events and failures, with a wait on them."""

    def __init__(self, connection: Connection) -> None:
        self.events: list[FailoverEvent] = []
        self.failures: list[ClientError] = []
        self._changed = asyncio.Event()
        connection.add_event_listener(self._event)
        connection.add_failure_listener(self._failed)

    def _event(self, event: FailoverEvent) -> None:
        self.events.append(event)
        self._changed.set()

    def _failed(self, error: ClientError) -> None:
        self.failures.append(error)
        self._changed.set()

    async def until(self, holds: Callable[[], bool], what: str) -> None:
        async def wait() -> None:
            while not holds():
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(wait(), DEADLINE_S)
        except TimeoutError:
            raise AssertionError(f"{what}: not within {DEADLINE_S}s; events {self.events}") from None


async def _fill(session: Session) -> None:
    await session.create_queue("ha", "ha", routing_type=RoutingType.ANYCAST, durable=True)
    producer = session.create_producer("ha")
    for seq in range(COUNT):
        await producer.send(CoreMessage(b"m", durable=True, properties=TypedProperties.of(seq=seq)))


def test_without_failover_on_shutdown_the_backup_stays_passive_until_the_primary_is_back(tmp_path: Path) -> None:
    ports = write_configs(tmp_path, failover_on_shutdown=False)
    primary, backup = pair(tmp_path)
    restarted: list[Launched] = []
    try:
        asyncio.run(_stopped_without_failover(primary, backup, ports, tmp_path, restarted))
    finally:
        kill(primary, backup, *restarted)


async def _stopped_without_failover(primary: Launched, backup: Launched, ports: tuple[int, int], tmp_path: Path,
                                    restarted: list[Launched]) -> None:
    primary_url, backup_url = (f"tcp://127.0.0.1:{port}" for port in ports)
    settings = ClientSettings(reconnect_attempts=-1, retry_interval_ms=100, max_retry_interval_ms=100)
    async with await connect(primary_url, settings=settings) as connection:
        watch = _Events(connection)
        session = await connection.create_session()
        await _fill(session)
        assert await asyncio.to_thread(stop, primary) == 0
        assert (tmp_path / "store" / "paused").exists()
        await asyncio.to_thread(backup.wait_for, PAUSED_LINE, DEADLINE_S)
        await watch.until(lambda: bool(watch.failures), "the client's failure listener told")
        assert "DISCONNECT" in str(watch.failures[0]), watch.failures  # told, not left to find a dead socket

        def refused_by_the_backup() -> int:
            return sum(1 for a, b in zip(watch.events, watch.events[1:], strict=False)
                       if a.kind == "attempt" and a.connector == backup_url and b.kind == "attempt-failed")

        await watch.until(lambda: refused_by_the_backup() >= REFUSED, f"{REFUSED} refused attempts on the backup")
        assert not any(LISTENING.search(line) for line in backup.log), backup.log
        assert not any(e.kind in ("recreated", "reattached") for e in watch.events), watch.events

        again = Launched("--config", str(tmp_path / "primary.xml"))
        restarted.append(again)
        await asyncio.to_thread(again.wait_for, LISTENING, DEADLINE_S)
        await watch.until(lambda: any(e.kind == "recreated" for e in watch.events), "the session recreated")
        assert connection.machine.connector == Connector("127.0.0.1", ports[0])
        assert sorted(await received(session, COUNT)) == list(range(COUNT))
        assert not (tmp_path / "store" / "paused").exists()  # the primary activated: the store is in use again
        assert not any(LISTENING.search(line) for line in backup.log), backup.log


def test_with_failover_on_shutdown_the_backup_activates_and_the_client_follows(tmp_path: Path) -> None:
    ports = write_configs(tmp_path, failover_on_shutdown=True)
    primary, backup = pair(tmp_path)
    try:
        asyncio.run(_stopped_with_failover(primary, backup, ports, tmp_path))
    finally:
        kill(primary, backup)


async def _stopped_with_failover(primary: Launched, backup: Launched, ports: tuple[int, int],
                                 tmp_path: Path) -> None:
    settings = ClientSettings(reconnect_attempts=-1, retry_interval_ms=100, max_retry_interval_ms=100)
    async with await connect(f"tcp://127.0.0.1:{ports[0]}", settings=settings) as connection:
        watch = _Events(connection)
        session = await connection.create_session()
        await _fill(session)
        assert await asyncio.to_thread(stop, primary) == 0
        assert not (tmp_path / "store" / "paused").exists()
        await asyncio.to_thread(backup.wait_for, LISTENING, DEADLINE_S)
        await watch.until(lambda: any(e.kind == "recreated" for e in watch.events), "the session recreated")
        assert "DISCONNECT" in str(watch.failures[0]), watch.failures
        assert connection.machine.connector == Connector("127.0.0.1", ports[1])
        assert sorted(await received(session, COUNT)) == list(range(COUNT))


def test_a_backup_that_took_over_and_is_stopped_leaves_the_store_paused_for_the_primary(tmp_path: Path) -> None:
    write_configs(tmp_path, failover_on_shutdown=False)
    primary, backup = pair(tmp_path)
    again = None
    try:
        kill(primary)
        backup.wait_for(LISTENING, DEADLINE_S)
        assert stop(backup) == 0
        assert (tmp_path / "store" / "paused").exists()
        again = Launched("--config", str(tmp_path / "primary.xml"))
        again.wait_for(LISTENING, DEADLINE_S)  # a primary takes a paused store
        assert not (tmp_path / "store" / "paused").exists()
    finally:
        kill(primary, backup, *([again] if again is not None else []))
