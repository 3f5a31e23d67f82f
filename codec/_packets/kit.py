"""The kit's own packets (not Artemis's): journal replication between a reference primary and its backup, on
channel 3 after a successful CLUSTER_CONNECT.  The backup subscribes; the primary answers with its node ID, then
streams journal records (its live state first, then every record it appends); the backup acknowledges what it
stored.  ``reference/ha`` speaks them; Artemis never sees them."""

from __future__ import annotations

from dataclasses import dataclass

from construct import Struct

from .._constants import PacketType
from .._primitives import I64, Bool, Bytes, Str
from ._base import Packet

__all__ = ["ReplicaAck", "ReplicaBegin", "ReplicaRecords", "ReplicaStopping", "ReplicaSubscribe"]


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
    """KIT_REPLICA_BEGIN (primary → backup): the node ID the backup serves as when it takes over."""

    TYPE = PacketType.KIT_REPLICA_BEGIN
    CONFIRMABLE = False
    FORMAT = Struct("node_id" / Str)

    node_id: str


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
class ReplicaAck(Packet):
    """KIT_REPLICA_ACK (backup → primary): every record up to ``upto`` is durable in the backup's journal."""

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
