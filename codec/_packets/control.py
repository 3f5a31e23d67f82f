"""Connection control on channel 0 and the generic responses (notes §5.2 "Control")."""

from __future__ import annotations

from dataclasses import dataclass

from construct import Struct

from .._constants import PacketType
from .._format import Trailing
from .._primitives import I32, I64, N1, NB, Bool, NullableByte, SimpleStr, Str
from .._structures import TRANSPORT_CONFIGURATION, TransportConfiguration
from ._base import Packet, extend


@dataclass(frozen=True, slots=True)
class Ping(Packet):
    """PING: the client's liveness signal, carrying its connection TTL in ms (-1 = none)."""

    TYPE = PacketType.PING
    CONFIRMABLE = False
    FORMAT = Struct("connection_ttl" / I64)

    connection_ttl: int = 60000


@dataclass(frozen=True, slots=True)
class DisconnectMessage(Packet):
    """DISCONNECT: the server closes the connection."""

    TYPE = PacketType.DISCONNECT
    CONFIRMABLE = False
    FORMAT = Struct("node_id" / N1(SimpleStr))

    node_id: str | None = None


@dataclass(frozen=True, slots=True)
class DisconnectMessage_V2(Packet):
    """DISCONNECT_V2: adds the node that messages were scaled down to."""

    TYPE = PacketType.DISCONNECT_V2
    CONFIRMABLE = False
    FORMAT = Struct("node_id" / N1(SimpleStr), "scale_down_node_id" / N1(SimpleStr))

    node_id: str | None = None
    scale_down_node_id: str | None = None


@dataclass(frozen=True, slots=True)
class DisconnectMessage_V3(Packet):
    """DISCONNECT_V3: adds the reason and, for redirects, where to go."""

    TYPE = PacketType.DISCONNECT_V3
    CONFIRMABLE = False
    FORMAT = Struct(
        "node_id" / N1(SimpleStr),
        "reason" / NullableByte,
        "target_node_id" / N1(SimpleStr),
        "target_connector" / NB(TRANSPORT_CONFIGURATION),
    )

    node_id: str | None = None
    reason: int | None = None
    target_node_id: str | None = None
    target_connector: TransportConfiguration | None = None


@dataclass(frozen=True, slots=True)
class ActiveMQExceptionMessage(Packet):
    """EXCEPTION: an error reply.  ``correlation_id`` is on the wire only in the V2
    layout, which servers use for correlated requests (SESS_SEND, SESS_COMMIT)."""

    TYPE = PacketType.EXCEPTION
    IS_RESPONSE = True
    FORMAT = Struct("code" / I32, "message" / N1(Str), "correlation_id" / Trailing(I64))

    code: int = 0
    message: str | None = None
    correlation_id: int | None = None


@dataclass(frozen=True, slots=True)
class NullResponseMessage(Packet):
    """NULL_RESPONSE: success with nothing to say; V2 (version >= 130) echoes the
    request's correlation ID (-1 for uncorrelated requests)."""

    TYPE = PacketType.NULL_RESPONSE
    IS_RESPONSE = True
    FORMAT = Struct("correlation_id" / Trailing(I64))

    correlation_id: int | None = -1


@dataclass(frozen=True, slots=True)
class PacketsConfirmedMessage(Packet):
    """PACKETS_CONFIRMED: index of the last confirmed command of the session channel."""

    TYPE = PacketType.PACKETS_CONFIRMED
    CONFIRMABLE = False
    FORMAT = Struct("command_id" / I32)

    command_id: int


@dataclass(frozen=True, slots=True)
class SubscribeClusterTopologyUpdatesMessage(Packet):
    """SUBSCRIBE_TOPOLOGY: ask for topology updates."""

    TYPE = PacketType.SUBSCRIBE_TOPOLOGY
    FORMAT = Struct("cluster_connection" / Bool)

    cluster_connection: bool = False


@dataclass(frozen=True, slots=True)
class SubscribeClusterTopologyUpdatesMessageV2(Packet):
    """SUBSCRIBE_TOPOLOGY_V2: also tells the server the client's protocol version."""

    TYPE = PacketType.SUBSCRIBE_TOPOLOGY_V2
    FORMAT = extend(SubscribeClusterTopologyUpdatesMessage, "client_version" / I32)

    cluster_connection: bool = False
    client_version: int = 136


@dataclass(frozen=True, slots=True)
class CheckFailoverMessage(Packet):
    """CHECK_FOR_FAILOVER: may this client fail over to the server (channel 1)?"""

    TYPE = PacketType.CHECK_FOR_FAILOVER
    FORMAT = Struct("node_id" / N1(Str))

    node_id: str | None = None


@dataclass(frozen=True, slots=True)
class CheckFailoverReplyMessage(Packet):
    """CHECK_FOR_FAILOVER_REPLY: the answer (a standalone server says yes)."""

    TYPE = PacketType.CHECK_FOR_FAILOVER_REPLY
    IS_RESPONSE = True
    FORMAT = Struct("ok_to_failover" / Bool)

    ok_to_failover: bool = True
