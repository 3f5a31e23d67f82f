"""The shared store's lock: whoever holds ``server.lock`` in the shared data directory is the active server.

An advisory ``flock`` on an open file: the kernel drops it when the holder's process ends, however it ends
(kill -9 included), so a backup can take over without trusting anything the dead server wrote last.  A file
system that does not support ``flock`` across hosts (some NFS setups) cannot carry a shared store; that is the
operator's to provide, as for Artemis (its FileLockNodeManager locks the same way)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["SharedStoreLock"]


class SharedStoreLock:
    """``server.lock`` in ``directory``; :meth:`try_acquire` never blocks."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "server.lock"
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if no other process holds it; True when this process holds it afterwards."""
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
