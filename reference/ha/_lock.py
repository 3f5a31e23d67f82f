"""The shared store's lock: whoever holds ``server.lock`` in the shared data directory is the active server.

An advisory ``flock`` on an open file: the kernel drops it when the holder's process ends, however it ends
(kill -9 included), so a backup can take over without trusting anything the dead server wrote last.  A file
system that does not support ``flock`` across hosts (some NFS setups) cannot carry a shared store; that is the
operator's to provide, as for Artemis (its FileLockNodeManager locks the same way).

Beside the lock the store keeps one fact about the last active server: whether it stopped gracefully without
``failover-on-shutdown`` (:meth:`SharedStoreLock.pause`).  A backup that finds the store paused leaves it alone
until a primary activates on it again (:meth:`SharedStoreLock.resume`).  Artemis keeps the same fact as the
state byte of its ``server.lock`` (FileLockNodeManager: PAUSED, written by pausePrimaryServer)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["PAUSED", "SharedStoreLock"]

#: The file, in the shared data directory, that says the last active server stopped without failover.
PAUSED = "paused"


class SharedStoreLock:
    """``server.lock`` (or ``name``) in ``directory``; :meth:`try_acquire` never blocks.  The same kind of lock,
    under another name, is a replication pair's lock in its lock manager's locks folder."""

    def __init__(self, directory: Path, *, name: str = "server.lock") -> None:
        self.path = directory / name
        self.paused_path = directory / PAUSED
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

    @property
    def paused(self) -> bool:
        """Whether the last active server stopped gracefully without failover (a backup must not activate)."""
        return self.paused_path.exists()

    def pause(self) -> None:
        """Mark the store paused, durably, before the lock is let go (only its holder may): a backup that takes
        the lock after that finds the mark."""
        assert self._fd is not None, "only the holder of the lock pauses the store"
        fd = os.open(self.paused_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _sync_directory(self.paused_path.parent)

    def resume(self) -> None:
        """Clear the paused mark (a server activated on the store: it is in use again)."""
        assert self._fd is not None, "only the holder of the lock resumes the store"
        if self.paused:
            self.paused_path.unlink(missing_ok=True)
            _sync_directory(self.paused_path.parent)


def _sync_directory(directory: Path) -> None:
    """Make a file's creation or removal in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
