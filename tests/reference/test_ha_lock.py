"""The shared store's lock and the wait for it (no broker: two holders in one process conflict as two processes
do, since an flock belongs to the open file)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cck.reference.ha import SharedStoreActivation, SharedStoreLock


def test_one_holder_at_a_time_and_the_next_after_a_release(tmp_path: Path) -> None:
    first, second = SharedStoreLock(tmp_path), SharedStoreLock(tmp_path)
    assert first.try_acquire()
    assert first.held
    assert not second.try_acquire()
    assert not second.held
    first.release()
    assert second.try_acquire()
    second.release()


def test_a_waiting_server_activates_once_the_holder_lets_go(tmp_path: Path) -> None:
    holder, waiter = SharedStoreLock(tmp_path), SharedStoreLock(tmp_path)
    assert holder.try_acquire()

    async def scenario() -> bool:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.2, holder.release)
        return await asyncio.wait_for(SharedStoreActivation(waiter, stop, poll_s=0.02).wait(), 5.0)

    assert asyncio.run(scenario())
    assert waiter.held
    waiter.release()


def test_a_waiting_server_told_to_stop_does_not_activate(tmp_path: Path) -> None:
    holder, waiter = SharedStoreLock(tmp_path), SharedStoreLock(tmp_path)
    assert holder.try_acquire()

    async def scenario() -> bool:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.1, stop.set)
        return await asyncio.wait_for(SharedStoreActivation(waiter, stop, poll_s=0.02).wait(), 5.0)

    assert not asyncio.run(scenario())
    assert not waiter.held
    holder.release()


def test_a_backup_that_handed_the_store_back_leaves_it_to_the_primary_while_it_asks(tmp_path: Path) -> None:
    request = tmp_path / "failback-requested"
    request.touch()
    backup = SharedStoreLock(tmp_path)

    async def scenario() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        loop.call_later(0.3, request.unlink)  # the primary took the store and removed its request
        held = await asyncio.wait_for(
            SharedStoreActivation(backup, asyncio.Event(), poll_s=0.02, defer_to=request).wait(), 5.0)
        return held, loop.time() - started

    held, waited = asyncio.run(scenario())
    assert held  # the store was free all along: only the request held the backup back
    assert waited >= 0.25
    backup.release()
