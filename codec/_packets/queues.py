"""Address and queue management and the queue/binding queries (notes §5.2)."""

from __future__ import annotations

from dataclasses import dataclass

from construct import Struct

from .._constants import PacketType
from .._format import Tail
from .._primitives import I8, I32, I64, N1, NB, Bool, Counted, NullableByte, SimpleStr
from ._base import Packet, extend

# The optional queue attributes shared by CREATE_QUEUE_V2 and CREATE_SHARED_QUEUE_V2.
# Decoders read them only while bytes remain (older clients stop early).
_QUEUE_ATTRIBUTES = (
    "exclusive" / Tail(NB(Bool)),
    "last_value" / Tail(NB(Bool)),
    "last_value_key" / Tail(N1(SimpleStr)),
    "non_destructive" / Tail(NB(Bool)),
    "consumers_before_dispatch" / Tail(NB(I32)),
    "delay_before_dispatch" / Tail(NB(I64)),
    "group_rebalance" / Tail(NB(Bool)),
    "group_buckets" / Tail(NB(I32)),
    "auto_delete" / Tail(NB(Bool)),
    "auto_delete_delay" / Tail(NB(I64)),
    "auto_delete_message_count" / Tail(NB(I64)),
    "group_first_key" / Tail(N1(SimpleStr)),
    "ring_size" / Tail(NB(I64)),
    "enabled" / Tail(NB(Bool)),
    "group_rebalance_pause_dispatch" / Tail(NB(Bool)),
)


@dataclass(frozen=True, slots=True)
class CreateAddressMessage(Packet):
    """CREATE_ADDRESS with the routing types it supports."""

    TYPE = PacketType.CREATE_ADDRESS
    FORMAT = Struct(
        "address" / SimpleStr,
        "routing_types" / Counted(I8, 1),
        "requires_response" / Bool,
        "auto_created" / Bool,
    )

    address: str
    routing_types: tuple[int, ...] = ()
    requires_response: bool = True
    auto_created: bool = False


@dataclass(frozen=True, slots=True)
class CreateQueueMessage(Packet):
    """CREATE_QUEUE (legacy, before 2.0)."""

    TYPE = PacketType.CREATE_QUEUE
    FORMAT = Struct(
        "address" / SimpleStr,
        "queue_name" / SimpleStr,
        "filter_string" / N1(SimpleStr),
        "durable" / Bool,
        "temporary" / Bool,
        "requires_response" / Bool,
    )

    address: str
    queue_name: str
    filter_string: str | None = None
    durable: bool = True
    temporary: bool = False
    requires_response: bool = True


@dataclass(frozen=True, slots=True)
class CreateQueueMessage_V2(Packet):
    """CREATE_QUEUE_V2: the 2.x queue creation with routing type and attributes."""

    TYPE = PacketType.CREATE_QUEUE_V2
    FORMAT = extend(
        CreateQueueMessage,
        "auto_created" / Bool,
        "routing_type" / NullableByte,
        "max_consumers" / I32,
        "purge_on_no_consumers" / Bool,
        *_QUEUE_ATTRIBUTES,
    )

    address: str
    queue_name: str
    filter_string: str | None = None
    durable: bool = True
    temporary: bool = False
    requires_response: bool = True
    auto_created: bool = False
    routing_type: int | None = None
    max_consumers: int = -1
    purge_on_no_consumers: bool = False
    exclusive: bool | None = None
    last_value: bool | None = None
    last_value_key: str | None = None
    non_destructive: bool | None = None
    consumers_before_dispatch: int | None = None
    delay_before_dispatch: int | None = None
    group_rebalance: bool | None = None
    group_buckets: int | None = None
    auto_delete: bool | None = None
    auto_delete_delay: int | None = None
    auto_delete_message_count: int | None = None
    group_first_key: str | None = None
    ring_size: int | None = None
    enabled: bool | None = None
    group_rebalance_pause_dispatch: bool | None = None


@dataclass(frozen=True, slots=True)
class CreateSharedQueueMessage(Packet):
    """CREATE_SHARED_QUEUE (legacy)."""

    TYPE = PacketType.CREATE_SHARED_QUEUE
    FORMAT = Struct(
        "address" / SimpleStr,
        "queue_name" / SimpleStr,
        "filter_string" / N1(SimpleStr),
        "durable" / Bool,
        "requires_response" / Bool,
    )

    address: str
    queue_name: str
    filter_string: str | None = None
    durable: bool = True
    requires_response: bool = True


@dataclass(frozen=True, slots=True)
class CreateSharedQueueMessage_V2(Packet):
    """CREATE_SHARED_QUEUE_V2: a no-op when the same queue already exists."""

    TYPE = PacketType.CREATE_SHARED_QUEUE_V2
    FORMAT = Struct(
        "address" / SimpleStr,
        "queue_name" / SimpleStr,
        "filter_string" / N1(SimpleStr),
        "durable" / Bool,
        "routing_type" / NullableByte,
        "requires_response" / Bool,
        "max_consumers" / Tail(NB(I32)),
        "purge_on_no_consumers" / Tail(NB(Bool)),
        *_QUEUE_ATTRIBUTES,
    )

    address: str
    queue_name: str
    filter_string: str | None = None
    durable: bool = True
    routing_type: int | None = None
    requires_response: bool = True
    max_consumers: int | None = None
    purge_on_no_consumers: bool | None = None
    exclusive: bool | None = None
    last_value: bool | None = None
    last_value_key: str | None = None
    non_destructive: bool | None = None
    consumers_before_dispatch: int | None = None
    delay_before_dispatch: int | None = None
    group_rebalance: bool | None = None
    group_buckets: int | None = None
    auto_delete: bool | None = None
    auto_delete_delay: int | None = None
    auto_delete_message_count: int | None = None
    group_first_key: str | None = None
    ring_size: int | None = None
    enabled: bool | None = None
    group_rebalance_pause_dispatch: bool | None = None


@dataclass(frozen=True, slots=True)
class SessionDeleteQueueMessage(Packet):
    """DELETE_QUEUE (always answered with NULL_RESPONSE)."""

    TYPE = PacketType.DELETE_QUEUE
    FORMAT = Struct("queue_name" / SimpleStr)

    queue_name: str


@dataclass(frozen=True, slots=True)
class SessionQueueQueryMessage(Packet):
    """SESS_QUEUEQUERY."""

    TYPE = PacketType.SESS_QUEUEQUERY
    FORMAT = Struct("queue_name" / SimpleStr)

    queue_name: str


@dataclass(frozen=True, slots=True)
class SessionQueueQueryResponseMessage(Packet):
    """SESS_QUEUEQUERY_RESP (version < 126)."""

    TYPE = PacketType.SESS_QUEUEQUERY_RESP
    IS_RESPONSE = True
    FORMAT = Struct(
        "exists" / Bool,
        "durable" / Bool,
        "temporary" / Bool,
        "consumer_count" / I32,
        "message_count" / I64,
        "filter_string" / N1(SimpleStr),
        "address" / N1(SimpleStr),
        "name" / N1(SimpleStr),
    )

    exists: bool
    durable: bool = False
    temporary: bool = False
    consumer_count: int = 0
    message_count: int = 0
    filter_string: str | None = None
    address: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class SessionQueueQueryResponseMessage_V2(Packet):
    """SESS_QUEUEQUERY_RESP_V2 (126..128): adds ``auto_create_queues``."""

    TYPE = PacketType.SESS_QUEUEQUERY_RESP_V2
    IS_RESPONSE = True
    FORMAT = extend(SessionQueueQueryResponseMessage, "auto_create_queues" / Bool)

    exists: bool
    durable: bool = False
    temporary: bool = False
    consumer_count: int = 0
    message_count: int = 0
    filter_string: str | None = None
    address: str | None = None
    name: str | None = None
    auto_create_queues: bool = False


@dataclass(frozen=True, slots=True)
class SessionQueueQueryResponseMessage_V3(Packet):
    """SESS_QUEUEQUERY_RESP_V3 (>= 129): what a Java client waits for after
    SESS_QUEUEQUERY and SESS_CREATECONSUMER.  ``routing_type`` must not be null."""

    TYPE = PacketType.SESS_QUEUEQUERY_RESP_V3
    IS_RESPONSE = True
    FORMAT = extend(
        SessionQueueQueryResponseMessage_V2,
        "auto_created" / Bool,
        "purge_on_no_consumers" / Bool,
        "routing_type" / I8,
        "max_consumers" / I32,
        "exclusive" / Tail(NB(Bool)),
        "last_value" / Tail(NB(Bool)),
        "default_consumer_window_size" / Tail(NB(I32)),
        "last_value_key" / Tail(N1(SimpleStr)),
        "non_destructive" / Tail(NB(Bool)),
        "consumers_before_dispatch" / Tail(NB(I32)),
        "delay_before_dispatch" / Tail(NB(I64)),
        "group_rebalance" / Tail(NB(Bool)),
        "group_buckets" / Tail(NB(I32)),
        "auto_delete" / Tail(NB(Bool)),
        "auto_delete_delay" / Tail(NB(I64)),
        "auto_delete_message_count" / Tail(NB(I64)),
        "group_first_key" / Tail(N1(SimpleStr)),
        "ring_size" / Tail(NB(I64)),
        "enabled" / Tail(NB(Bool)),
        "group_rebalance_pause_dispatch" / Tail(NB(Bool)),
        "configuration_managed" / Tail(NB(Bool)),
    )

    exists: bool
    durable: bool = False
    temporary: bool = False
    consumer_count: int = 0
    message_count: int = 0
    filter_string: str | None = None
    address: str | None = None
    name: str | None = None
    auto_create_queues: bool = False
    auto_created: bool = False
    purge_on_no_consumers: bool = False
    routing_type: int = 0
    max_consumers: int = -1
    exclusive: bool | None = None
    last_value: bool | None = None
    default_consumer_window_size: int | None = None
    last_value_key: str | None = None
    non_destructive: bool | None = None
    consumers_before_dispatch: int | None = None
    delay_before_dispatch: int | None = None
    group_rebalance: bool | None = None
    group_buckets: int | None = None
    auto_delete: bool | None = None
    auto_delete_delay: int | None = None
    auto_delete_message_count: int | None = None
    group_first_key: str | None = None
    ring_size: int | None = None
    enabled: bool | None = None
    group_rebalance_pause_dispatch: bool | None = None
    configuration_managed: bool | None = None


@dataclass(frozen=True, slots=True)
class SessionBindingQueryMessage(Packet):
    """SESS_BINDINGQUERY."""

    TYPE = PacketType.SESS_BINDINGQUERY
    FORMAT = Struct("address" / SimpleStr)

    address: str


@dataclass(frozen=True, slots=True)
class SessionBindingQueryResponseMessage(Packet):
    """SESS_BINDINGQUERY_RESP (version < 126)."""

    TYPE = PacketType.SESS_BINDINGQUERY_RESP
    IS_RESPONSE = True
    FORMAT = Struct("exists" / Bool, "queue_names" / Counted(SimpleStr, 4))

    exists: bool
    queue_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionBindingQueryResponseMessage_V2(Packet):
    """SESS_BINDINGQUERY_RESP_V2 (126): adds ``auto_create_queues``."""

    TYPE = PacketType.SESS_BINDINGQUERY_RESP_V2
    IS_RESPONSE = True
    FORMAT = extend(SessionBindingQueryResponseMessage, "auto_create_queues" / Bool)

    exists: bool
    queue_names: tuple[str, ...] = ()
    auto_create_queues: bool = False


@dataclass(frozen=True, slots=True)
class SessionBindingQueryResponseMessage_V3(Packet):
    """SESS_BINDINGQUERY_RESP_V3 (127, 128): adds ``auto_create_addresses``."""

    TYPE = PacketType.SESS_BINDINGQUERY_RESP_V3
    IS_RESPONSE = True
    FORMAT = extend(SessionBindingQueryResponseMessage_V2, "auto_create_addresses" / Bool)

    exists: bool
    queue_names: tuple[str, ...] = ()
    auto_create_queues: bool = False
    auto_create_addresses: bool = False


@dataclass(frozen=True, slots=True)
class SessionBindingQueryResponseMessage_V4(Packet):
    """SESS_BINDINGQUERY_RESP_V4 (129..134): adds the address's queue defaults."""

    TYPE = PacketType.SESS_BINDINGQUERY_RESP_V4
    IS_RESPONSE = True
    FORMAT = extend(
        SessionBindingQueryResponseMessage_V3,
        "default_purge_on_no_consumers" / Bool,
        "default_max_consumers" / I32,
        "default_exclusive" / NB(Bool),
        "default_last_value" / NB(Bool),
        "default_last_value_key" / N1(SimpleStr),
        "default_non_destructive" / NB(Bool),
        "default_consumers_before_dispatch" / NB(I32),
        "default_delay_before_dispatch" / NB(I64),
    )

    exists: bool
    queue_names: tuple[str, ...] = ()
    auto_create_queues: bool = False
    auto_create_addresses: bool = False
    default_purge_on_no_consumers: bool = False
    default_max_consumers: int = -1
    default_exclusive: bool | None = None
    default_last_value: bool | None = None
    default_last_value_key: str | None = None
    default_non_destructive: bool | None = None
    default_consumers_before_dispatch: int | None = None
    default_delay_before_dispatch: int | None = None


@dataclass(frozen=True, slots=True)
class SessionBindingQueryResponseMessage_V5(Packet):
    """SESS_BINDINGQUERY_RESP_V5 (>= 135): adds which routing types the address supports."""

    TYPE = PacketType.SESS_BINDINGQUERY_RESP_V5
    IS_RESPONSE = True
    FORMAT = extend(
        SessionBindingQueryResponseMessage_V4,
        "supports_multicast" / Bool,
        "supports_anycast" / Bool,
    )

    exists: bool
    queue_names: tuple[str, ...] = ()
    auto_create_queues: bool = False
    auto_create_addresses: bool = False
    default_purge_on_no_consumers: bool = False
    default_max_consumers: int = -1
    default_exclusive: bool | None = None
    default_last_value: bool | None = None
    default_last_value_key: str | None = None
    default_non_destructive: bool | None = None
    default_consumers_before_dispatch: int | None = None
    default_delay_before_dispatch: int | None = None
    supports_multicast: bool = False
    supports_anycast: bool = False
