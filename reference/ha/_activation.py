"""When a shared-store server may serve: once it holds the store's lock.

A primary takes the lock at start (waiting while a backup that took over still holds it); a backup waits for
it from the start, announced to the active server meanwhile, and activates when the active server's process
ends (the kernel drops its lock).  The lock is tried every ``poll_s``: ``flock`` has no asynchronous wait, and a
blocked ``flock`` in a thread could not be given up on when the waiting server is told to stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ._lock import SharedStoreLock

__all__ = ["SharedStoreActivation"]

LOG = logging.getLogger("cck.reference.ha")


class SharedStoreActivation:
    """Waits for ``lock`` until it is held (True) or ``stop`` is set (False)."""

    def __init__(self, lock: SharedStoreLock, stop: asyncio.Event, *, poll_s: float = 0.1) -> None:
        self.lock = lock
        self.stop = stop
        self.poll_s = poll_s

    async def wait(self) -> bool:
        first = True
        while not self.lock.try_acquire():
            if first:
                LOG.info("waiting for the shared store's lock", extra={"path": str(self.lock.path)})
                first = False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), self.poll_s)
            if self.stop.is_set():
                return False
        LOG.info("holding the shared store's lock", extra={"path": str(self.lock.path)})
        return True
