"""Federation between brokers: the downstream connect a broker sends on channel 4 (``FEDERATION``)."""

from __future__ import annotations

from dataclasses import dataclass

from construct import Struct

from .._constants import PacketType
from .._format import DataclassAdapter
from .._primitives import F64, I32, I64, N1, NB, Bool, Counted, EmptyCounted, Str
from .._structures import TRANSPORT_CONFIGURATION, TransportConfiguration
from ._base import Packet

__all__ = ["FEDERATION_CREDENTIALS", "FederationCredentials", "FederationDownstreamConnectMessage"]


@dataclass(frozen=True, slots=True)
class FederationCredentials:
    """The federation's ``Credentials`` (``FederationConfiguration.Credentials``): user and password, each
    nullable."""

    user: str | None = None
    password: str | None = None


FEDERATION_CREDENTIALS = DataclassAdapter(FederationCredentials, Struct("user" / N1(Str), "password" / N1(Str)))


@dataclass(frozen=True, slots=True, kw_only=True)
class FederationDownstreamConnectMessage(Packet):
    """FEDERATION_DOWNSTREAM_CONNECT (channel 4, broker to broker): a broker's federation downstream asks the broker
    it connected to to create an upstream back to it, through ``upstream``.

    The message (``FederationStreamConnectMessage``) is followed by its ``FederationDownstreamConfiguration``: the
    stream's name, its ``FederationConnectionConfiguration`` (``username`` .. ``call_failover_timeout``), its policy
    references and the upstream connector.  Federation policies and transformer configurations travel as counted
    lists the codec does not model: it writes none, and refuses a frame that carries any.
    """

    TYPE = PacketType.FEDERATION_DOWNSTREAM_CONNECT
    FORMAT = Struct(
        "name" / Str,
        # writeBoolean(credentials != null), then the credentials: the flag bytes (0xFF / 0x00) are a BufferHelper
        # nullable's.
        "credentials" / NB(FEDERATION_CREDENTIALS),
        # i32 count, then per policy its class name and the policy's own encoding.
        "policies" / EmptyCounted("federation policies"),
        # i32 count, then per transformer its configuration.
        "transformers" / EmptyCounted("transformer configurations"),
        # FederationDownstreamConfiguration: the stream's name ...
        "stream_name" / Str,
        # ... its FederationConnectionConfiguration ...
        "username" / N1(Str),
        "password" / N1(Str),
        "share_connection" / Bool,
        "priority_adjustment" / I32,
        "client_failure_check_period" / I64,
        "connection_ttl" / I64,
        "retry_interval" / I64,
        "retry_interval_multiplier" / F64,
        # Artemis's encode writes retryInterval here again; its decode reads this long as maxRetryInterval.
        "max_retry_interval" / I64,
        "initial_connect_attempts" / I32,
        "reconnect_attempts" / I32,
        "call_timeout" / I64,
        "call_failover_timeout" / I64,
        # ... its policy references (a Java set: no order, no repeats) ...
        "policy_refs" / Counted(Str, 4),
        # ... and the connector the receiving broker connects back with (not nullable).
        "upstream" / TRANSPORT_CONFIGURATION,
    )

    name: str
    credentials: FederationCredentials | None = None
    stream_name: str
    username: str | None = None
    password: str | None = None
    share_connection: bool = False
    priority_adjustment: int = 0
    client_failure_check_period: int = 30000
    connection_ttl: int = 60000
    retry_interval: int = 500
    retry_interval_multiplier: float = 1.0
    #: What an Artemis sender puts here is its retry interval (see ``FORMAT``), hence the default.
    max_retry_interval: int = 500
    initial_connect_attempts: int = -1
    reconnect_attempts: int = -1
    call_timeout: int = 30000
    call_failover_timeout: int = -1
    policy_refs: tuple[str, ...] = ()
    upstream: TransportConfiguration
