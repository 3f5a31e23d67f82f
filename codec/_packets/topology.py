"""Cluster topology on channel 0 and cluster-connection packets on channel 3."""

from __future__ import annotations

from dataclasses import dataclass

from construct import Computed, If, IfThenElse, Struct, this

from .._constants import PacketType
from .._format import Since, Tail
from .._primitives import I32, I64, N1, NB, Bool, SimpleStr, Str
from .._structures import TRANSPORT_CONFIGURATION, TransportConfiguration
from ._base import Packet

#: the first protocol version whose NODE_ANNOUNCE carries the scale-down group name (HornetQ 2.5.0.Beta1)
SCALE_DOWN_ANNOUNCE_VERSION = 125

# A node leaving (exit=true) carries no connectors and no `last` flag.
_MEMBER = (
    "live" / If(~this.exit, NB(TRANSPORT_CONFIGURATION)),
    "backup" / If(~this.exit, NB(TRANSPORT_CONFIGURATION)),
    "last" / IfThenElse(this.exit, Computed(False), Bool),
)


@dataclass(frozen=True, slots=True)
class ClusterTopologyChangeMessage(Packet):
    """CLUSTER_TOPOLOGY: a node joined (with its live/backup connectors) or left."""

    TYPE = PacketType.CLUSTER_TOPOLOGY
    FORMAT = Struct("exit" / Bool, "node_id" / Str, *_MEMBER)

    exit: bool
    node_id: str
    live: TransportConfiguration | None = None
    backup: TransportConfiguration | None = None
    last: bool = True


@dataclass(frozen=True, slots=True)
class ClusterTopologyChangeMessage_V2(Packet):
    """CLUSTER_TOPOLOGY_V2: adds the event ID and the backup group name."""

    TYPE = PacketType.CLUSTER_TOPOLOGY_V2
    FORMAT = Struct(
        "exit" / Bool,
        "node_id" / Str,
        "unique_event_id" / I64,
        *_MEMBER,
        "backup_group_name" / Tail(N1(Str)),
    )

    exit: bool
    node_id: str
    unique_event_id: int
    live: TransportConfiguration | None = None
    backup: TransportConfiguration | None = None
    last: bool = True
    backup_group_name: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterTopologyChangeMessage_V3(Packet):
    """CLUSTER_TOPOLOGY_V3: adds the scale-down group name."""

    TYPE = PacketType.CLUSTER_TOPOLOGY_V3
    FORMAT = Struct(*ClusterTopologyChangeMessage_V2.FORMAT.subcons, "scale_down_group_name" / N1(Str))

    exit: bool
    node_id: str
    unique_event_id: int
    live: TransportConfiguration | None = None
    backup: TransportConfiguration | None = None
    last: bool = True
    backup_group_name: str | None = None
    scale_down_group_name: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterTopologyChangeMessage_V4(Packet):
    """CLUSTER_TOPOLOGY_V4: adds the server's protocol version, which clients adopt."""

    TYPE = PacketType.CLUSTER_TOPOLOGY_V4
    FORMAT = Struct(*ClusterTopologyChangeMessage_V3.FORMAT.subcons, "server_version" / I32)

    exit: bool
    node_id: str
    unique_event_id: int
    live: TransportConfiguration | None = None
    backup: TransportConfiguration | None = None
    last: bool = True
    backup_group_name: str | None = None
    scale_down_group_name: str | None = None
    server_version: int = 136


@dataclass(frozen=True, slots=True)
class NodeAnnounceMessage(Packet):
    """NODE_ANNOUNCE (channel 3): a cluster member announces itself.

    ``scale_down_group_name`` travels from protocol 125 (HornetQ 2.5.0.Beta1, which Artemis 1.0 continued): HornetQ
    2.4's NodeAnnounceMessage ends with the backup connector.  Below 125 it is ``None`` and not written."""

    TYPE = PacketType.NODE_ANNOUNCE
    FORMAT = Struct(
        "node_id" / Str,
        "backup_group_name" / N1(Str),
        "backup" / Bool,
        "current_event_id" / I64,
        "connector" / NB(TRANSPORT_CONFIGURATION),
        "backup_connector" / NB(TRANSPORT_CONFIGURATION),
        "scale_down_group_name" / Since(SCALE_DOWN_ANNOUNCE_VERSION, N1(Str), default=None),
    )

    node_id: str
    backup_group_name: str | None = None
    backup: bool = False
    current_event_id: int = 0
    connector: TransportConfiguration | None = None
    backup_connector: TransportConfiguration | None = None
    scale_down_group_name: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterConnectMessage(Packet):
    """CLUSTER_CONNECT (channel 3): a cluster bridge authenticates."""

    TYPE = PacketType.CLUSTER_CONNECT
    FORMAT = Struct("cluster_user" / Str, "cluster_password" / Str)

    cluster_user: str
    cluster_password: str


@dataclass(frozen=True, slots=True)
class ClusterConnectReplyMessage(Packet):
    """CLUSTER_CONNECT_REPLY: whether the cluster credentials were accepted."""

    TYPE = PacketType.CLUSTER_CONNECT_REPLY
    IS_RESPONSE = True
    FORMAT = Struct("authorized" / Bool)

    authorized: bool


@dataclass(frozen=True, slots=True)
class ScaleDownAnnounceMessage(Packet):
    """SCALEDOWN_ANNOUNCEMENT (channel 3): a node scaled its messages down to another."""

    TYPE = PacketType.SCALEDOWN_ANNOUNCEMENT
    FORMAT = Struct("target_node_id" / SimpleStr, "scaled_down_node_id" / SimpleStr)

    target_node_id: str
    scaled_down_node_id: str
