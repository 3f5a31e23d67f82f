"""Federation between brokers: the downstream connect a broker sends on channel 4 (``FEDERATION``).

The message carries the federation's policies (each one travels as its Java class name, then that class's own
``encode``) and transformer configurations.  The layouts are those of Artemis 2.12.0 onwards (2.28.0, 2.44.0 and
the main branch write the same bytes); Artemis 2.11.x, which speaks the same protocol version (130), wrote an address
policy without its last field (``enable_divert_bindings``), and is not supported.
"""

from __future__ import annotations

from dataclasses import dataclass
from io import BytesIO
from typing import Any, ClassVar

from construct import Adapter, Construct, Sequence, Struct

from .._constants import PacketType
from .._format import DataclassAdapter
from .._primitives import F64, I32, I64, N1, NB, Bool, Counted, FieldError, Str
from .._structures import TRANSPORT_CONFIGURATION, TransportConfiguration
from ._base import Packet

__all__ = [
    "FEDERATION_CREDENTIALS",
    "FEDERATION_POLICY_FORMATS",
    "FederationAddressPolicy",
    "FederationCredentials",
    "FederationDownstreamConnectMessage",
    "FederationPolicy",
    "FederationPolicySet",
    "FederationQueueMatcher",
    "FederationQueuePolicy",
    "FederationTransformer",
]

_CONFIG = "org.apache.activemq.artemis.core.config.federation."


@dataclass(frozen=True, slots=True)
class FederationCredentials:
    """The federation's ``Credentials`` (``FederationConfiguration.Credentials``): user and password, each
    nullable."""

    user: str | None = None
    password: str | None = None


FEDERATION_CREDENTIALS = DataclassAdapter(FederationCredentials, Struct("user" / N1(Str), "password" / N1(Str)))


# ------------------------------------------------------------------------------------------------ policies


@dataclass(frozen=True, slots=True)
class FederationQueueMatcher:
    """A queue policy's include or exclude (``FederationQueuePolicyConfiguration.Matcher``): an address match and a
    queue match, each nullable (Artemis's wildcard syntax, ``#`` and ``*``)."""

    address_match: str | None = None
    queue_match: str | None = None


FEDERATION_QUEUE_MATCHER = DataclassAdapter(
    FederationQueueMatcher, Struct("address_match" / N1(Str), "queue_match" / N1(Str))
)


@dataclass(frozen=True, slots=True, kw_only=True)
class FederationQueuePolicy:
    """``FederationQueuePolicyConfiguration``: which queues the upstream federates.

    ``includes`` and ``excludes`` are Java sets (no order, no repeats); ``priority_adjustment`` and
    ``transformer_ref`` are nullable.
    """

    JAVA_CLASS: ClassVar[str] = _CONFIG + "FederationQueuePolicyConfiguration"

    name: str
    include_federated: bool = False
    priority_adjustment: int | None = None
    transformer_ref: str | None = None
    includes: tuple[FederationQueueMatcher, ...] = ()
    excludes: tuple[FederationQueueMatcher, ...] = ()


FEDERATION_QUEUE_POLICY = DataclassAdapter(
    FederationQueuePolicy,
    Struct(
        "name" / Str,
        "include_federated" / Bool,
        "priority_adjustment" / N1(I32),
        "transformer_ref" / N1(Str),
        "includes" / Counted(FEDERATION_QUEUE_MATCHER, 2),
        "excludes" / Counted(FEDERATION_QUEUE_MATCHER, 2),
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class FederationAddressPolicy:
    """``FederationAddressPolicyConfiguration``: which addresses the upstream federates.

    ``includes`` and ``excludes`` are address matches (its ``Matcher`` carries only that, not nullable), Java sets
    like the queue policy's; ``auto_delete`` .. ``auto_delete_message_count`` and ``transformer_ref`` are nullable.
    """

    JAVA_CLASS: ClassVar[str] = _CONFIG + "FederationAddressPolicyConfiguration"

    name: str
    auto_delete: bool | None = None
    auto_delete_delay: int | None = None
    auto_delete_message_count: int | None = None
    max_hops: int = 0
    transformer_ref: str | None = None
    includes: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    enable_divert_bindings: bool = False


FEDERATION_ADDRESS_POLICY = DataclassAdapter(
    FederationAddressPolicy,
    Struct(
        "name" / Str,
        "auto_delete" / N1(Bool),
        "auto_delete_delay" / N1(I64),
        "auto_delete_message_count" / N1(I64),
        "max_hops" / I32,
        "transformer_ref" / N1(Str),
        "includes" / Counted(Str, 4),
        "excludes" / Counted(Str, 4),
        # Artemis's decode reads this only while bytes remain; inside the message bytes always remain.
        "enable_divert_bindings" / Bool,
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class FederationPolicySet:
    """``FederationPolicySet``: a name for other policies (``policy_refs``, a Java set)."""

    JAVA_CLASS: ClassVar[str] = _CONFIG + "FederationPolicySet"

    name: str
    policy_refs: tuple[str, ...] = ()


FEDERATION_POLICY_SET = DataclassAdapter(
    FederationPolicySet, Struct("name" / Str, "policy_refs" / Counted(Str, 4))
)

#: A policy of the message's policy map.
FederationPolicy = FederationQueuePolicy | FederationAddressPolicy | FederationPolicySet

#: The policy classes the codec knows, by the Java class name that precedes each policy on the wire.
FEDERATION_POLICY_FORMATS: dict[str, DataclassAdapter] = {
    FederationQueuePolicy.JAVA_CLASS: FEDERATION_QUEUE_POLICY,
    FederationAddressPolicy.JAVA_CLASS: FEDERATION_ADDRESS_POLICY,
    FederationPolicySet.JAVA_CLASS: FEDERATION_POLICY_SET,
}
_POLICY_CLASS_NAMES: dict[type, str] = {fmt.cls: name for name, fmt in FEDERATION_POLICY_FORMATS.items()}


class _Policy(Construct):  # type: ignore[misc]
    """One policy: ``writeString`` of its Java class name, then that class's encoding; a class name the codec does
    not know is refused at its offset (Artemis instantiates whatever class it names)."""

    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        at = stream.tell()
        class_name = Str._parse(stream, context, path)
        fmt = FEDERATION_POLICY_FORMATS.get(class_name)
        if fmt is None:
            raise FieldError(
                "unknown federation policy class",
                path=path,
                offset=at,
                expected=" or ".join(name.rsplit(".", 1)[1] for name in FEDERATION_POLICY_FORMATS),
                found=class_name,
            )
        return fmt._parsereport(stream, context, path)

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        class_name = _POLICY_CLASS_NAMES.get(type(obj))
        if class_name is None:
            raise FieldError(
                f"expected a federation policy ({', '.join(c.__name__ for c in _POLICY_CLASS_NAMES)}), "
                f"got {type(obj).__name__}",
                path=path,
                offset=None,
            )
        Str._build(class_name, stream, context, path)
        return FEDERATION_POLICY_FORMATS[class_name]._build(obj, stream, context, path)


# ------------------------------------------------------------------------------------------------ transformers


@dataclass(frozen=True, slots=True, kw_only=True)
class FederationTransformer:
    """``FederationTransformerConfiguration``: a transformer's name (what a policy's ``transformer_ref`` names), its
    class and its properties (a Java ``HashMap``: no order, no repeated keys; neither keys nor values null)."""

    name: str
    class_name: str
    properties: tuple[tuple[str, str], ...] = ()


class _StrPair(Adapter):  # type: ignore[misc]
    """A ``(key, value)`` pair of ``writeString``\\ s."""

    def _decode(self, obj: Any, context: Any, path: str) -> tuple[str, str]:
        return (obj[0], obj[1])

    def _encode(self, obj: Any, context: Any, path: str) -> list[Any]:
        if not isinstance(obj, tuple) or len(obj) != 2:
            raise FieldError(f"expected a (key, value) pair, got {obj!r}", path=path, offset=None)
        return list(obj)


FEDERATION_TRANSFORMER = DataclassAdapter(
    FederationTransformer,
    Struct("name" / Str, "class_name" / Str, "properties" / Counted(_StrPair(Sequence(Str, Str)), 8)),
)


# ------------------------------------------------------------------------------------------------ the packet


@dataclass(frozen=True, slots=True, kw_only=True)
class FederationDownstreamConnectMessage(Packet):
    """FEDERATION_DOWNSTREAM_CONNECT (channel 4, broker to broker): a broker's federation downstream asks the broker
    it connected to to create an upstream back to it, through ``upstream``.

    The message (``FederationStreamConnectMessage``) carries the federation's policies and transformer
    configurations (each a Java ``HashMap`` keyed by name: a receiver keeps one per name, in no order), then its
    ``FederationDownstreamConfiguration``: the stream's name, its ``FederationConnectionConfiguration``
    (``username`` .. ``call_failover_timeout``), its policy references and the upstream connector.
    """

    TYPE = PacketType.FEDERATION_DOWNSTREAM_CONNECT
    FORMAT = Struct(
        "name" / Str,
        # writeBoolean(credentials != null), then the credentials: the flag bytes (0xFF / 0x00) are a BufferHelper
        # nullable's.
        "credentials" / NB(FEDERATION_CREDENTIALS),
        # i32 count, then per policy its class name and the policy's own encoding.
        "policies" / Counted(_Policy(), 12),
        # i32 count, then per transformer its configuration.
        "transformers" / Counted(FEDERATION_TRANSFORMER, 12),
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
    policies: tuple[FederationPolicy, ...] = ()
    transformers: tuple[FederationTransformer, ...] = ()
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
