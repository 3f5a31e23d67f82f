"""When a shared-store server may serve: once it holds the store's lock.

A primary takes the lock at start (waiting while a backup that took over still holds it); a backup waits for
it from the start, announced to the active server meanwhile, and activates when the active server's process
ends (the kernel drops its lock).  The lock is tried every ``poll_s``: ``flock`` has no asynchronous wait, and a
blocked ``flock`` in a thread could not be given up on when the waiting server is told to stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from ._lock import SharedStoreLock

__all__ = ["SharedStoreActivation"]

LOG = logging.getLogger("cck.reference.ha")


#: How long a backup that handed the store back leaves it to the primary that asked (the primary removes its
#: request once it holds the lock; a request left by a primary that died before that expires after this).
DEFER_S = 5.0


class SharedStoreActivation:
    """Waits for ``lock`` until it is held (True) or ``stop`` is set (False).  ``defer_to``: a failback request
    (a file) that, while it exists and for at most :data:`DEFER_S`, keeps this server from trying the lock."""

    def __init__(self, lock: SharedStoreLock, stop: asyncio.Event, *, poll_s: float = 0.1,
                 defer_to: Path | None = None) -> None:
        self.lock = lock
        self.stop = stop
        self.poll_s = poll_s
        self.defer_to = defer_to

    async def wait(self) -> bool:
        loop = asyncio.get_running_loop()
        defer_until = loop.time() + DEFER_S
        first = True
        while (self.defer_to is not None and self.defer_to.exists() and loop.time() < defer_until) \
                or not self.lock.try_acquire():
            if first:
                LOG.info("waiting for the shared store's lock", extra={"path": str(self.lock.path)})
                first = False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), self.poll_s)
            if self.stop.is_set():
                return False
        LOG.info("holding the shared store's lock", extra={"path": str(self.lock.path)})
        return True
