"""High availability of the reference broker: a shared store's lock (``_lock.py``), a waiting server's
announcement to the active one (``_announce.py``) and the activation of a server that waits for the store
(``_activation.py``).  Everything here is I/O around the sans-IO broker core; the core's part is
``reference.broker``'s backup registry and topology."""

from ._activation import SharedStoreActivation
from ._announce import BackupAnnouncer
from ._lock import PAUSED, SharedStoreLock

__all__ = ["PAUSED", "BackupAnnouncer", "SharedStoreActivation", "SharedStoreLock"]
