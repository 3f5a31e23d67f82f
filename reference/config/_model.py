"""The configuration model: typed, frozen dataclasses read from ``broker.xml``.

Names follow the broker.xml elements (``journal-min-files`` -> ``journal_min_files``).  Every
default is Artemis 2.44.0's; the comment beside it names where that default comes from:

* ``ADC``: ``ActiveMQDefaultConfiguration`` (artemis-core-client, ``api/config``);
* ``AS``: ``AddressSettings`` (artemis-server, ``core/settings/impl``);
* ``AMC``: ``ActiveMQClient`` (artemis-core-client, ``api/core/client``);
* ``TC``: netty ``TransportConstants`` (artemis-core-client);
* ``CI``: ``ConfigurationImpl`` (artemis-server, ``core/config/impl``);
* ``FCP``: ``FileConfigurationParser`` (artemis-server, ``core/deployers/impl``), where the parser
  itself supplies the value;
* ``XSD``: ``artemis-configuration.xsd``.

Where the Artemis code and its documentation disagree the code is used (what the broker does),
and the comment says so.
"""

from __future__ import annotations

import enum
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType

from .._tls import KeyStore, TrustStore, parse_protocols, server_context
from ._errors import ConfigWarning
from ._wildcard import matches_in_order

__all__ = [
    "Acceptor",
    "AcceptorTls",
    "AddressConfig",
    "AddressFullPolicy",
    "AddressSettings",
    "BroadcastGroup",
    "BrokerConfig",
    "ClusterConnection",
    "Connector",
    "DiscoveryGroup",
    "HAPolicy",
    "JournalConfig",
    "JournalType",
    "LoginConfig",
    "LoginFlag",
    "LoginModule",
    "MessageLoadBalancing",
    "Permission",
    "QueueConfig",
    "ResolvedAddressSettings",
    "Role",
    "RoutingType",
    "ScaleDown",
    "SecuritySetting",
    "UserEntry",
]



def _empty() -> Mapping[str, str]:
    return MappingProxyType({})


class RoutingType(enum.Enum):
    ANYCAST = "ANYCAST"
    MULTICAST = "MULTICAST"


class AddressFullPolicy(enum.Enum):
    PAGE = "PAGE"
    DROP = "DROP"
    BLOCK = "BLOCK"
    FAIL = "FAIL"


class JournalType(enum.Enum):
    NIO = "NIO"
    ASYNCIO = "ASYNCIO"
    MAPPED = "MAPPED"


class MessageLoadBalancing(enum.Enum):
    OFF = "OFF"
    STRICT = "STRICT"
    ON_DEMAND = "ON_DEMAND"
    OFF_WITH_REDISTRIBUTION = "OFF_WITH_REDISTRIBUTION"


class Permission(enum.Enum):
    """A ``<permission type="...">`` of a security setting (the Artemis names)."""

    SEND = "send"
    CONSUME = "consume"
    CREATE_ADDRESS = "createAddress"
    DELETE_ADDRESS = "deleteAddress"
    CREATE_DURABLE_QUEUE = "createDurableQueue"
    DELETE_DURABLE_QUEUE = "deleteDurableQueue"
    CREATE_NON_DURABLE_QUEUE = "createNonDurableQueue"
    DELETE_NON_DURABLE_QUEUE = "deleteNonDurableQueue"
    MANAGE = "manage"
    BROWSE = "browse"


# --------------------------------------------------------------------------- transports


@dataclass(frozen=True)
class AcceptorTls:
    """An acceptor's TLS: ``sslEnabled=true`` and the parameters Artemis's Netty acceptor reads with it (TC names:
    ``keyStorePath``, ``keyStorePassword``, ``keyStoreType``, ``trustStorePath``, ..., ``needClientAuth``,
    ``wantClientAuth``, ``enabledProtocols``).  Store paths are as resolved when read (see ``reference._tls`` for
    the store types)."""

    key_store_path: str
    key_store_password: str | None = field(default=None, repr=False)  # TC DEFAULT_KEYSTORE_PASSWORD (null)
    key_store_type: str | None = None  # None: TC DEFAULT_KEYSTORE_TYPE, "JKS" (a PKCS#12 file is read as one)
    trust_store_path: str | None = None  # TC DEFAULT_TRUSTSTORE_PATH (null): the system's authorities
    trust_store_password: str | None = field(default=None, repr=False)
    trust_store_type: str | None = None  # None: TC DEFAULT_TRUSTSTORE_TYPE, "JKS"
    need_client_auth: bool = False  # TC DEFAULT_NEED_CLIENT_AUTH
    want_client_auth: bool = False  # TC DEFAULT_WANT_CLIENT_AUTH
    enabled_protocols: str | None = None  # TC DEFAULT_ENABLED_PROTOCOLS (null): the defaults

    def context(self) -> ssl.SSLContext:
        """The server-side context; reads the stores (``reference._tls.TlsConfigError`` naming the parameter)."""
        trust = None if self.trust_store_path is None else TrustStore(
            self.trust_store_path, self.trust_store_password, self.trust_store_type)
        return server_context(KeyStore(self.key_store_path, self.key_store_password, self.key_store_type), trust,
                              need_client_auth=self.need_client_auth, want_client_auth=self.want_client_auth,
                              protocols=parse_protocols(self.enabled_protocols))


@dataclass(frozen=True)
class Acceptor:
    """``<acceptor name="...">tcp://host:port?key=value;...</acceptor>``."""

    name: str
    uri: str
    scheme: str
    host: str
    port: int
    # the URI query, decoded; Artemis splits it on ';' and '&'
    params: Mapping[str, str] = field(default_factory=_empty)
    # the ``protocols`` parameter split on ','; ``None``: absent, i.e. every protocol the broker has
    protocols: tuple[str, ...] | None = None
    # ``sslEnabled=true`` (TC DEFAULT_SSL_ENABLED false): the acceptor serves TLS only
    tls: AcceptorTls | None = None


@dataclass(frozen=True)
class Connector:
    """``<connector name="...">tcp://host:port?...</connector>``."""

    name: str
    uri: str
    scheme: str
    host: str
    port: int
    params: Mapping[str, str] = field(default_factory=_empty)


# --------------------------------------------------------------------------- security


@dataclass(frozen=True)
class Role:
    """The permissions one role has on the addresses a security setting matches."""

    name: str
    permissions: frozenset[Permission]


@dataclass(frozen=True)
class SecuritySetting:
    """``<security-setting match="...">``: roles and their permissions."""

    match: str
    roles: tuple[Role, ...]

    def roles_with(self, permission: Permission) -> frozenset[str]:
        return frozenset(r.name for r in self.roles if permission in r.permissions)


class LoginFlag(enum.Enum):
    """JAAS control flags of a ``login.config`` entry."""

    REQUIRED = "required"
    REQUISITE = "requisite"
    SUFFICIENT = "sufficient"
    OPTIONAL = "optional"


@dataclass(frozen=True)
class UserEntry:
    """A user of ``artemis-users.properties``.

    ``password`` is the plain-text password; ``None`` when the file holds a hashed ``ENC(...)``
    value, which the reference broker cannot check (that user cannot log in; a warning says so).
    """

    name: str
    password: str | None
    roles: frozenset[str]


@dataclass(frozen=True)
class LoginModule:
    """One entry of the JAAS domain in ``login.config``.

    ``kind`` is ``"properties"`` (PropertiesLoginModule: ``users``), ``"guest"`` (GuestLoginModule:
    ``guest_user`` / ``guest_role``), ``"certificate"`` (TextFileCertificateLoginModule:
    ``certificate_users``, and ``users`` for their roles, without passwords) or ``"unsupported"``
    (any other module: it never logs anyone in, and a warning names it).
    """

    class_name: str
    flag: LoginFlag
    kind: str
    options: Mapping[str, str] = field(default_factory=_empty)
    users: Mapping[str, UserEntry] = field(default_factory=lambda: MappingProxyType({}))
    # GuestLoginModule defaults: user "guest", role "guests" (GuestLoginModule fields)
    guest_user: str = "guest"
    guest_role: str = "guests"
    credentials_invalidate: bool = False
    #: TextFileCertificateLoginModule: ``(user, subject DN)`` in file order; a DN written ``/.../`` is a regular
    #: expression the whole DN must match
    certificate_users: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class LoginConfig:
    """Authentication as an Artemis instance has it: the JAAS domain of ``login.config``, and the certificate
    domain (``bootstrap.xml``'s ``<jaas-security certificate-domain="...">``) that authenticates a connection
    which presented a client certificate instead."""

    domain: str
    modules: tuple[LoginModule, ...]
    source: str = ""
    certificate_domain: str | None = None
    certificate_modules: tuple[LoginModule, ...] = ()

    @property
    def guest_module(self) -> LoginModule | None:
        return next((m for m in self.modules if m.kind == "guest"), None)


# --------------------------------------------------------------------------- addresses


@dataclass(frozen=True)
class QueueConfig:
    """``<queue name="...">`` inside ``<anycast>`` / ``<multicast>`` of an ``<address>``."""

    name: str
    address: str
    routing_type: RoutingType
    durable: bool = True  # FCP parseQueueConfiguration: durable = true
    filter: str | None = None
    # None: not set on the queue, the address-settings' default-max-consumers applies
    max_consumers: int | None = None
    purge_on_no_consumers: bool = False  # ADC DEFAULT_PURGE_ON_NO_CONSUMERS
    user: str | None = None


@dataclass(frozen=True)
class AddressConfig:
    """``<address name="...">`` with its routing types and queues."""

    name: str
    routing_types: frozenset[RoutingType]
    queues: tuple[QueueConfig, ...] = ()


@dataclass(frozen=True)
class AddressSettings:
    """``<address-setting match="...">`` as written: ``None`` means "not set here".

    Artemis merges every setting whose match applies to an address, most specific first, a field
    left unset taking the value of the next match; :meth:`BrokerConfig.address_settings_for`
    does that and fills the remaining gaps with the defaults (:class:`ResolvedAddressSettings`).
    """

    match: str
    dead_letter_address: str | None = None
    expiry_address: str | None = None
    expiry_delay: int | None = None
    redelivery_delay: int | None = None
    redelivery_delay_multiplier: float | None = None
    max_redelivery_delay: int | None = None
    max_delivery_attempts: int | None = None
    max_size_bytes: int | None = None
    max_size_messages: int | None = None
    page_size_bytes: int | None = None
    address_full_policy: AddressFullPolicy | None = None
    send_to_dla_on_no_route: bool | None = None
    auto_create_queues: bool | None = None
    auto_delete_queues: bool | None = None
    auto_delete_created_queues: bool | None = None
    auto_delete_queues_delay: int | None = None
    auto_delete_queues_message_count: int | None = None
    auto_create_addresses: bool | None = None
    auto_delete_addresses: bool | None = None
    auto_delete_addresses_delay: int | None = None
    default_queue_routing_type: RoutingType | None = None
    default_address_routing_type: RoutingType | None = None
    default_max_consumers: int | None = None
    default_purge_on_no_consumers: bool | None = None
    default_consumer_window_size: int | None = None
    redistribution_delay: int | None = None


@dataclass(frozen=True)
class ResolvedAddressSettings:
    """The settings in force for one address: matches merged, Artemis defaults filled in."""

    address: str
    dead_letter_address: str | None = None  # AS: no dead-letter address
    expiry_address: str | None = None  # AS: no expiry address
    expiry_delay: int = -1  # AS DEFAULT_EXPIRY_DELAY
    redelivery_delay: int = 0  # AS DEFAULT_REDELIVER_DELAY
    redelivery_delay_multiplier: float = 1.0  # AS DEFAULT_REDELIVER_MULTIPLIER
    max_redelivery_delay: int = 0  # AS getMaxRedeliveryDelay: redelivery-delay * 10 when unset
    max_delivery_attempts: int = 10  # AS DEFAULT_MAX_DELIVERY_ATTEMPTS
    max_size_bytes: int = -1  # AS DEFAULT_MAX_SIZE_BYTES
    max_size_messages: int = -1  # AS DEFAULT_MAX_SIZE_MESSAGES
    page_size_bytes: int = 10 * 1024 * 1024  # AS DEFAULT_PAGE_SIZE
    address_full_policy: AddressFullPolicy = AddressFullPolicy.PAGE  # AS DEFAULT_ADDRESS_FULL_MESSAGE_POLICY
    send_to_dla_on_no_route: bool = False  # AS DEFAULT_SEND_TO_DLA_ON_NO_ROUTE
    auto_create_queues: bool = True  # AS DEFAULT_AUTO_CREATE_QUEUES
    auto_delete_queues: bool = True  # AS DEFAULT_AUTO_DELETE_QUEUES
    auto_delete_created_queues: bool = False  # AS DEFAULT_AUTO_DELETE_CREATED_QUEUES
    auto_delete_queues_delay: int = 0  # AS DEFAULT_AUTO_DELETE_QUEUES_DELAY
    auto_delete_queues_message_count: int = 0  # AS DEFAULT_AUTO_DELETE_QUEUES_MESSAGE_COUNT
    auto_create_addresses: bool = True  # AS DEFAULT_AUTO_CREATE_ADDRESSES
    auto_delete_addresses: bool = True  # AS DEFAULT_AUTO_DELETE_ADDRESSES
    auto_delete_addresses_delay: int = 0  # AS DEFAULT_AUTO_DELETE_ADDRESSES_DELAY
    default_queue_routing_type: RoutingType = RoutingType.MULTICAST  # ADC DEFAULT_ROUTING_TYPE
    default_address_routing_type: RoutingType = RoutingType.MULTICAST  # ADC DEFAULT_ROUTING_TYPE
    default_max_consumers: int = -1  # ADC DEFAULT_MAX_QUEUE_CONSUMERS
    default_purge_on_no_consumers: bool = False  # ADC DEFAULT_PURGE_ON_NO_CONSUMERS
    default_consumer_window_size: int = 1024 * 1024  # AMC DEFAULT_CONSUMER_WINDOW_SIZE
    redistribution_delay: int = -1  # AS DEFAULT_REDISTRIBUTION_DELAY


def resolve_address_settings(address: str, settings: tuple[AddressSettings, ...]) -> ResolvedAddressSettings:
    """Merge the settings matching ``address`` (most specific first) over the Artemis defaults."""
    ordered = matches_in_order(address, [s.match for s in settings])
    by_match = {s.match: s for s in settings}
    chain = [by_match[m] for m in ordered]
    values: dict[str, object] = {}
    for f in fields(ResolvedAddressSettings):
        if f.name == "address":
            continue
        for s in chain:
            v = getattr(s, f.name)
            if v is not None:
                values[f.name] = v
                break
    if "max_redelivery_delay" not in values:
        redelivery_delay = values.get("redelivery_delay", 0)
        assert isinstance(redelivery_delay, int)
        values["max_redelivery_delay"] = redelivery_delay * 10
    return ResolvedAddressSettings(address, **values)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- journal


@dataclass(frozen=True)
class JournalConfig:
    """Persistence and journal elements of ``<core>``; directories as written (see
    :meth:`BrokerConfig.resolve_dir`)."""

    persistence_enabled: bool = True  # ADC DEFAULT_PERSISTENCE_ENABLED
    journal_type: JournalType = JournalType.ASYNCIO  # CI DEFAULT_JOURNAL_TYPE (XSD default too)
    journal_directory: str = "data/journal"  # ADC DEFAULT_JOURNAL_DIR
    bindings_directory: str = "data/bindings"  # ADC DEFAULT_BINDINGS_DIRECTORY
    paging_directory: str = "data/paging"  # ADC DEFAULT_PAGING_DIR
    large_messages_directory: str = "data/largemessages"  # ADC DEFAULT_LARGE_MESSAGES_DIR
    journal_file_size: int = 10485760  # ADC DEFAULT_JOURNAL_FILE_SIZE
    journal_min_files: int = 2  # ADC DEFAULT_JOURNAL_MIN_FILES
    journal_sync_transactional: bool = True  # ADC DEFAULT_JOURNAL_SYNC_TRANSACTIONAL
    journal_sync_non_transactional: bool = True  # ADC DEFAULT_JOURNAL_SYNC_NON_TRANSACTIONAL
    journal_datasync: bool = True  # ADC DEFAULT_JOURNAL_DATASYNC
    # nanoseconds; FCP: ArtemisConstants DEFAULT_JOURNAL_BUFFER_TIMEOUT_AIO (1e9/2000) for ASYNCIO,
    # DEFAULT_JOURNAL_BUFFER_TIMEOUT_NIO (1e9/300) otherwise -- the parser picks by journal-type
    journal_buffer_timeout: int = 500000
    journal_compact_min_files: int = 10  # ADC DEFAULT_JOURNAL_COMPACT_MIN_FILES
    journal_compact_percentage: int = 30  # ADC DEFAULT_JOURNAL_COMPACT_PERCENTAGE


# --------------------------------------------------------------------------- clustering


@dataclass(frozen=True)
class BroadcastGroup:
    """``<broadcast-group name="...">`` (UDP; a JGroups group is recognised and reported)."""

    name: str
    group_address: str | None = None  # mandatory for UDP (cluster doc); FCP default null
    group_port: int = -1  # FCP default -1
    local_bind_address: str | None = None  # FCP default null: wildcard address
    local_bind_port: int = -1  # FCP default -1: anonymous port
    broadcast_period: int = 2000  # ADC DEFAULT_BROADCAST_PERIOD
    connector_refs: tuple[str, ...] = ()
    jgroups_file: str | None = None
    jgroups_channel: str | None = None

    @property
    def is_jgroups(self) -> bool:
        return self.jgroups_file is not None


@dataclass(frozen=True)
class DiscoveryGroup:
    """``<discovery-group name="...">``."""

    name: str
    group_address: str | None = None
    group_port: int = -1  # FCP default -1
    local_bind_address: str | None = None
    local_bind_port: int = -1  # FCP default -1
    refresh_timeout: int = 10000  # ADC DEFAULT_BROADCAST_REFRESH_TIMEOUT
    initial_wait_timeout: int = 10000  # AMC DEFAULT_DISCOVERY_INITIAL_WAIT_TIMEOUT
    jgroups_file: str | None = None
    jgroups_channel: str | None = None

    @property
    def is_jgroups(self) -> bool:
        return self.jgroups_file is not None


@dataclass(frozen=True)
class ClusterConnection:
    """``<cluster-connection name="...">``; exactly one of ``discovery_group_ref`` and
    ``static_connectors`` says how the other nodes are found."""

    name: str
    connector_ref: str
    address: str = ""  # ADC DEFAULT_CLUSTER_ADDRESS (FCP: "")
    check_period: int = 30000  # ADC DEFAULT_CLUSTER_FAILURE_CHECK_PERIOD
    connection_ttl: int = 60000  # ADC DEFAULT_CLUSTER_CONNECTION_TTL
    min_large_message_size: int = 100 * 1024  # AMC DEFAULT_MIN_LARGE_MESSAGE_SIZE
    call_timeout: int = 30000  # ADC DEFAULT_CLUSTER_CALL_TIMEOUT
    retry_interval: int = 500  # ADC DEFAULT_CLUSTER_RETRY_INTERVAL
    retry_interval_multiplier: float = 1.0  # ADC DEFAULT_CLUSTER_RETRY_INTERVAL_MULTIPLIER
    max_retry_interval: int = 2000  # ADC DEFAULT_CLUSTER_MAX_RETRY_INTERVAL
    initial_connect_attempts: int = -1  # ADC DEFAULT_CLUSTER_INITIAL_CONNECT_ATTEMPTS
    reconnect_attempts: int = -1  # ADC DEFAULT_CLUSTER_RECONNECT_ATTEMPTS
    use_duplicate_detection: bool = True  # ADC DEFAULT_CLUSTER_DUPLICATE_DETECTION
    message_load_balancing: MessageLoadBalancing = MessageLoadBalancing.ON_DEMAND  # ADC ..._LOAD_BALANCING_TYPE
    max_hops: int = 1  # ADC DEFAULT_CLUSTER_MAX_HOPS
    # ADC DEFAULT_CLUSTER_CONFIRMATION_WINDOW_SIZE = 10 MiB is what the parser uses; the XSD and
    # the clusters chapter both say 1048576 -- they disagree with the code
    confirmation_window_size: int = 10 * 1024 * 1024
    # FCP uses ADC DEFAULT_BRIDGE_PRODUCER_WINDOW_SIZE (1 MiB, XSD agrees); the clusters chapter
    # says "disabled by default"
    producer_window_size: int = 1024 * 1024
    call_failover_timeout: int = -1  # ADC DEFAULT_CLUSTER_CALL_FAILOVER_TIMEOUT
    notification_interval: int = 1000  # ADC DEFAULT_CLUSTER_NOTIFICATION_INTERVAL
    notification_attempts: int = 2  # ADC DEFAULT_CLUSTER_NOTIFICATION_ATTEMPTS
    discovery_group_ref: str | None = None
    static_connectors: tuple[str, ...] = ()
    allow_direct_connections_only: bool = False  # FCP default false


@dataclass(frozen=True)
class ScaleDown:
    """``<ha-policy><live-only><scale-down>`` (``primary-only`` is the 2.x name, both read)."""

    enabled: bool = True  # ADC DEFAULT_SCALE_DOWN_ENABLED (XSD default true)
    group_name: str | None = None
    discovery_group_ref: str | None = None
    connectors: tuple[str, ...] = ()


#: The file-based lock managers Artemis ships (2.37+: artemis-lockmanager-ri; before: artemis-quorum-ri); the
#: reference broker implements their locks-folder semantics under either name.
FILE_LOCK_MANAGERS = (
    "org.apache.activemq.artemis.lockmanager.file.FileBasedLockManager",
    "org.apache.activemq.artemis.quorum.file.FileBasedPrimitiveManager",
)


@dataclass(frozen=True)
class LockManager:
    """``<manager>`` of a replication ``primary``/``backup`` (Artemis's pluggable lock manager): the server that
    holds the pair's lock, a file named by the coordination ID in ``locks_folder``, is the active one."""

    class_name: str
    locks_folder: str
    coordination_id: str | None = None


@dataclass(frozen=True)
class HAPolicy:
    """``<ha-policy>``: ``kind`` is ``live-only`` (``primary-only``), ``shared-store`` or ``replication``; ``role``
    is ``primary`` (``master``) or ``backup`` (``slave``), both spellings read.  ``scale_down`` is live-only's
    option.  Without ``<ha-policy>`` Artemis uses live-only without scale-down (FCP parseMainConfig).  The
    defaults are Artemis's (ADC DEFAULT_FAILOVER_ON_SERVER_SHUTDOWN false, DEFAULT_ALLOW_AUTO_FAILBACK true,
    DEFAULT_RESTART_BACKUP true, DEFAULT_WAIT_FOR_ACTIVATION true, DEFAULT_CHECK_FOR_ACTIVE_SERVER false,
    DEFAULT_INITIAL_REPLICATION_SYNC_TIMEOUT 30000)."""

    kind: str = "live-only"
    scale_down: ScaleDown | None = None
    role: str = "primary"
    failover_on_shutdown: bool = False
    allow_failback: bool = True
    restart_backup: bool = True
    wait_for_activation: bool = True
    # replication: a restarted primary asks the cluster whether its backup is active before it activates
    check_for_live_server: bool = False
    group_name: str | None = None
    cluster_name: str | None = None
    initial_replication_sync_timeout_ms: int = 30000
    # replication with a pluggable lock manager (``<manager>``): only the holder of its lock is active
    lock_manager: LockManager | None = None

    @property
    def is_backup(self) -> bool:
        return self.kind != "live-only" and self.role == "backup"


# --------------------------------------------------------------------------- root


@dataclass(frozen=True)
class BrokerConfig:
    """Everything the reference broker reads from ``broker.xml`` (and the security files beside it)."""

    name: str = "localhost"  # CI: name = "localhost"
    acceptors: tuple[Acceptor, ...] = ()
    connectors: tuple[Connector, ...] = ()
    security_enabled: bool = True  # ADC DEFAULT_SECURITY_ENABLED
    security_settings: tuple[SecuritySetting, ...] = ()
    addresses: tuple[AddressConfig, ...] = ()
    address_settings: tuple[AddressSettings, ...] = ()
    journal: JournalConfig = JournalConfig()
    connection_ttl_override: int = -1  # ADC DEFAULT_CONNECTION_TTL_OVERRIDE
    connection_ttl_check_interval: int = 2000  # ADC DEFAULT_CONNECTION_TTL_CHECK_INTERVAL (XSD agrees)
    transaction_timeout: int = 300000  # ADC DEFAULT_TRANSACTION_TIMEOUT
    transaction_timeout_scan_period: int = 1000  # ADC DEFAULT_TRANSACTION_TIMEOUT_SCAN_PERIOD
    id_cache_size: int = 20000  # ADC DEFAULT_ID_CACHE_SIZE
    persist_id_cache: bool = True  # ADC DEFAULT_PERSIST_ID_CACHE
    # The reference broker's own default: true, so that a message out for delivery at a kill -9 comes back marked
    # redelivered (the SHOULD of spec 003).  Artemis's default (ADC DEFAULT_PERSIST_DELIVERY_COUNT_BEFORE_DELIVERY)
    # is false; an explicit <persist-delivery-count-before-delivery>false</...> behaves as Artemis does.
    persist_delivery_count_before_delivery: bool = True
    cluster_user: str = "ACTIVEMQ.CLUSTER.ADMIN.USER"  # ADC DEFAULT_CLUSTER_USER
    cluster_password: str = "CHANGE ME!!"  # noqa: S105 -- ADC DEFAULT_CLUSTER_PASSWORD
    broadcast_groups: tuple[BroadcastGroup, ...] = ()
    discovery_groups: tuple[DiscoveryGroup, ...] = ()
    cluster_connections: tuple[ClusterConnection, ...] = ()
    ha_policy: HAPolicy = HAPolicy()
    # None: no login.config was read (parse_broker_xml alone, or the embedded default)
    login: LoginConfig | None = None
    # where relative directories are resolved (the Artemis instance directory); None: the cwd
    instance_dir: Path | None = None
    source: str = "<string>"
    warnings: tuple[ConfigWarning, ...] = ()

    def connector(self, name: str) -> Connector:
        for c in self.connectors:
            if c.name == name:
                return c
        raise KeyError(name)

    def discovery_group(self, name: str) -> DiscoveryGroup:
        for d in self.discovery_groups:
            if d.name == name:
                return d
        raise KeyError(name)

    def address_settings_for(self, address: str) -> ResolvedAddressSettings:
        return resolve_address_settings(address, self.address_settings)

    def resolve_dir(self, directory: str) -> Path:
        """A journal/bindings/paging directory as Artemis resolves it: relative to the instance."""
        p = Path(directory)
        if p.is_absolute() or self.instance_dir is None:
            return p
        return self.instance_dir / p
