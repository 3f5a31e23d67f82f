"""When a shared-store server may serve: once it holds the store's lock.

A primary takes the lock at start (waiting while a backup that took over still holds it); a backup waits for
it from the start, announced to the active server meanwhile, and activates when the active server's process
ends (the kernel drops its lock), unless that server stopped gracefully without failover-on-shutdown and left
the store paused: then the backup waits on until a primary activates on the store again.  The lock is tried
every ``poll_s``: ``flock`` has no asynchronous wait, and a blocked ``flock`` in a thread could not be given up
on when the waiting server is told to stop."""

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


#: What keeps a waiting server from activating, as its log says it.
_WAITING = {
    "held": "waiting for the shared store's lock",
    "deferring": "leaving the shared store to the primary that asked for it back",
    "paused": "the shared store is paused (its active server stopped without failover-on-shutdown): waiting for "
              "a primary to activate on it",
}


class SharedStoreActivation:
    """Waits for ``lock`` until it is held (True) or ``stop`` is set (False).  ``defer_to``: a failback request
    (a file) that, while it exists and for at most :data:`DEFER_S`, keeps this server from trying the lock.
    ``heed_pause`` (a backup): a store its active server paused (a graceful stop without failover-on-shutdown)
    is left alone until a primary activates on it and clears the mark."""

    def __init__(self, lock: SharedStoreLock, stop: asyncio.Event, *, poll_s: float = 0.1,
                 defer_to: Path | None = None, heed_pause: bool = False) -> None:
        self.lock = lock
        self.stop = stop
        self.poll_s = poll_s
        self.defer_to = defer_to
        self.heed_pause = heed_pause

    async def wait(self) -> bool:
        loop = asyncio.get_running_loop()
        defer_until = loop.time() + DEFER_S
        said: str | None = None
        while (why := self._held_back(loop.time() < defer_until)) is not None:
            if why != said:
                LOG.info(_WAITING[why], extra={"path": str(self.lock.path)})
                said = why
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), self.poll_s)
            if self.stop.is_set():
                return False
        LOG.info("holding the shared store's lock", extra={"path": str(self.lock.path)})
        return True

    def try_now(self) -> bool:
        """Whether the lock could be taken at once, nothing holding this server back (then it holds it)."""
        return self._held_back(deferring=False) is None

    def _held_back(self, deferring: bool) -> str | None:
        """Why this server cannot activate now (the lock is held afterwards only when nothing holds it back)."""
        if deferring and self.defer_to is not None and self.defer_to.exists():
            return "deferring"
        if self.heed_pause and self.lock.paused:
            return "paused"
        if not self.lock.try_acquire():
            return "held"
        if self.heed_pause and self.lock.paused:
            # paused between the look and the lock: the stopping server marks the store before it lets go
            self.lock.release()
            return "paused"
        return None
