"""High availability of the reference broker: a shared store's lock (``_lock.py``), a waiting server's
announcement to the active one (``_announce.py``), the activation of a server that waits for the store
(``_activation.py``), and journal replication: the primary's side (``_source.py``) and the backup's
(``_replica.py``), with the opt-in mirror of the primary's core that lets clients resume their sessions on the
backup (``_mirror.py``).  Everything here is I/O around the sans-IO broker core; the core's part is
``reference.broker``'s backup registry, topology and the hand-over of a subscribed backup's connection."""

from ._activation import SharedStoreActivation
from ._announce import BackupAnnouncer
from ._lock import PAUSED, SharedStoreLock
from ._mirror import Mirror
from ._replica import Replica, ReplicaEnd
from ._source import Replication, ReplicationSource

__all__ = ["PAUSED", "BackupAnnouncer", "Mirror", "Replica", "ReplicaEnd", "Replication", "ReplicationSource",
           "SharedStoreActivation", "SharedStoreLock"]
