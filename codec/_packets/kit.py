"""The kit's own packets (not Artemis's): journal replication between a reference primary and its backup, on
channel 3 after a successful CLUSTER_CONNECT.  The backup subscribes; the primary answers with its node ID, then
streams journal records (its live state first, then every record it appends); the backup acknowledges what it
stored.  With session mirroring (the reference broker's transparent resume) the live state is followed by the
primary core's inputs instead of its journal's records: the backup's core applies them and writes its own
journal.  ``reference/ha`` speaks them; Artemis never sees them."""

from __future__ import annotations

from dataclasses import dataclass

from construct import Struct

from .._constants import PacketType
from .._primitives import I8, I64, Bool, Bytes, Str
from ._base import Packet

__all__ = ["ReplicaAck", "ReplicaBegin", "ReplicaInput", "ReplicaRecords", "ReplicaStopping", "ReplicaSubscribe"]


@dataclass(frozen=True, slots=True)
class ReplicaSubscribe(Packet):
    """KIT_REPLICA_SUBSCRIBE (backup → primary): send me your journal.  The backup sends nothing more until
    :class:`ReplicaBegin` arrives (the primary hands the connection to its replication then)."""

    TYPE = PacketType.KIT_REPLICA_SUBSCRIBE
    CONFIRMABLE = False
    FORMAT = Struct("backup" / Str)

    backup: str  # who asks (for the primary's log)


@dataclass(frozen=True, slots=True)
class ReplicaBegin(Packet):
    """KIT_REPLICA_BEGIN (primary → backup): the node ID the backup serves as when it takes over.  ``mirror``: the
    live state will be followed by the core's inputs (:class:`ReplicaInput`), not by journal records; the core's
    counters at that moment come with it (the next ID it allocates, when its TTL check and transaction scan are
    next due), so the backup's core, recovered from the live state, continues exactly as the primary's."""

    TYPE = PacketType.KIT_REPLICA_BEGIN
    CONFIRMABLE = False
    FORMAT = Struct("node_id" / Str, "mirror" / Bool, "next_id" / I64, "ttl_check_at_ms" / I64,
                    "tx_scan_at_ms" / I64)

    node_id: str
    mirror: bool = False
    next_id: int = 0
    ttl_check_at_ms: int = 0
    tx_scan_at_ms: int = 0


@dataclass(frozen=True, slots=True)
class ReplicaRecords(Packet):
    """KIT_REPLICA_RECORDS (primary → backup): journal records, concatenated as the journal encodes them;
    ``upto`` numbers the last of them (counted from 1 over the connection); ``synced``: the primary's live state
    has been sent in full with this batch or before (the backup may take over from now on)."""

    TYPE = PacketType.KIT_REPLICA_RECORDS
    CONFIRMABLE = False
    FORMAT = Struct("upto" / I64, "synced" / Bool, "records" / Bytes)

    upto: int
    synced: bool
    records: bytes


@dataclass(frozen=True, slots=True)
class ReplicaInput(Packet):
    """KIT_REPLICA_INPUT (primary → backup, mirroring): one input of the primary's core, numbered ``upto`` in the
    same count as the records before it.  ``kind``: 0 a connection made (``data``: its remote address), 1 bytes
    received on it, 2 it was lost, 3 a timer tick, 4 a delivery pass; ``now_ms``: the core's time."""

    TYPE = PacketType.KIT_REPLICA_INPUT
    CONFIRMABLE = False
    FORMAT = Struct("upto" / I64, "kind" / I8, "conn_id" / I64, "now_ms" / I64, "data" / Bytes)

    upto: int
    kind: int
    conn_id: int
    now_ms: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ReplicaAck(Packet):
    """KIT_REPLICA_ACK (backup → primary): every record (or mirrored input) up to ``upto`` is durable in the
    backup's journal."""

    TYPE = PacketType.KIT_REPLICA_ACK
    CONFIRMABLE = False
    FORMAT = Struct("upto" / I64)

    upto: int


@dataclass(frozen=True, slots=True)
class ReplicaStopping(Packet):
    """KIT_REPLICA_STOPPING (primary → backup): a graceful stop; ``failover``: take over (failover-on-shutdown),
    else wait for the primary to come back."""

    TYPE = PacketType.KIT_REPLICA_STOPPING
    CONFIRMABLE = False
    FORMAT = Struct("failover" / Bool)

    failover: bool
