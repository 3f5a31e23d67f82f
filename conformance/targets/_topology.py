"""The topology descriptor: which brokers a managed target runs and how each is configured.

Everything is a frozen dataclass so a topology can be shared between cases, compared and put in
evidence.  A topology is written once and rendered for either broker (see ``_config``); ports left
at 0 and data directories left unset are filled in by :meth:`Topology.resolve` when a target is
made, because every node of a cluster must know the others' ports before any of them starts.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = [
    "PERMISSIONS",
    "AddressSetting",
    "AddressSpec",
    "CertificateUser",
    "ClusterSpec",
    "HASpec",
    "NodeSpec",
    "QueueSpec",
    "ScaleDownSpec",
    "SecurityRule",
    "SecuritySpec",
    "TlsSpec",
    "Topology",
    "User",
]

RoutingName = Literal["anycast", "multicast"]

#: the ``<permission type>`` names of Artemis's security settings (what a default rule grants)
PERMISSIONS: tuple[str, ...] = (
    "createNonDurableQueue", "deleteNonDurableQueue", "createDurableQueue", "deleteDurableQueue",
    "createAddress", "deleteAddress", "consume", "browse", "send", "manage",
)  # fmt: skip

# node names become directory names and <name>; XML element names of ``extra`` go into the template
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_XML_NAME = re.compile(r"[A-Za-z][A-Za-z0-9.-]*")


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _plain(value: str, what: str) -> None:
    # users and roles go into Java properties files where ',' separates roles and a newline ends an entry
    _check(bool(value) and not any(c in value for c in ",\n\r"), f"{what} {value!r}: empty, or holds ',' or a newline")


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class User:
    """A user both brokers know (``artemis-users.properties`` / ``artemis-roles.properties``)."""

    name: str
    password: str
    roles: tuple[str, ...] = ("amq",)

    def __post_init__(self) -> None:
        _plain(self.name, "user name")
        _check("\n" not in self.password and "\r" not in self.password, "a password cannot hold a newline")
        for role in self.roles:
            _plain(role, "role")


@dataclass(frozen=True)
class CertificateUser:
    """A user who logs in by the client certificate a TLS connection presents (Artemis's
    TextFileCertificateLoginModule): ``dn`` is the certificate's subject exactly as Artemis prints it
    (``CN=cck client, O=Core Conformance Kit``: Java's ``X500Name.toString``, not RFC 2253), or ``/regex/``
    that the whole subject must match."""

    name: str
    dn: str
    roles: tuple[str, ...] = ("amq",)

    def __post_init__(self) -> None:
        _plain(self.name, "certificate user name")
        _check(bool(self.dn.strip()) and "\n" not in self.dn and "\r" not in self.dn,
               f"certificate user {self.name!r}: the DN {self.dn!r} is empty or holds a newline")
        for role in self.roles:
            _plain(role, "role")


@dataclass(frozen=True)
class SecurityRule:
    """One ``<permission type=... roles=...>`` of the ``<security-setting match=...>``."""

    match: str
    permission: str
    roles: tuple[str, ...]

    def __post_init__(self) -> None:
        _check(self.permission in PERMISSIONS,
               f"unknown permission {self.permission!r} (one of {', '.join(PERMISSIONS)})")
        _check(bool(self.roles), f"security rule {self.match}/{self.permission} grants to no role")


@dataclass(frozen=True)
class SecuritySpec:
    """Who may log in.  ``enabled=False`` (the default) lets everyone do everything, as
    ``<security-enabled>false</security-enabled>`` does on Artemis.  ``guest_role`` lets a
    connection without credentials in as user ``guest`` with that role (Artemis's
    GuestLoginModule, what ``artemis create --allow-anonymous`` sets up).  ``rules=None`` grants
    every permission on ``#`` to every role that appears in ``users``, ``certificate_users`` or ``guest_role``.

    ``certificate_users`` turn on certificate login: a connection that presented a client certificate is
    authenticated by its subject alone (a JAAS certificate domain, ``<jaas-security certificate-domain>``), one
    without by ``users`` and the guest; it needs a TLS acceptor that asks for client certificates."""

    enabled: bool = False
    users: tuple[User, ...] = ()
    guest_role: str | None = None
    rules: tuple[SecurityRule, ...] | None = None
    certificate_users: tuple[CertificateUser, ...] = ()

    def __post_init__(self) -> None:
        names = [u.name for u in self.users]
        _check(len(names) == len(set(names)), f"duplicate user in {names}")
        certified = [u.name for u in self.certificate_users]
        _check(len(certified) == len(set(certified)), f"duplicate certificate user in {certified}")
        if self.guest_role is not None:
            _plain(self.guest_role, "guest role")
        if self.enabled:
            _check(bool(self.users or self.certificate_users) or self.guest_role is not None,
                   "security is enabled but there are no users and no guest role: nobody could log in")

    @property
    def roles(self) -> tuple[str, ...]:
        """Every role named by a user or the guest role, in first-seen order."""
        seen = [r for u in self.users for r in u.roles] + [r for u in self.certificate_users for r in u.roles]
        seen += [self.guest_role] if self.guest_role else []
        return tuple(dict.fromkeys(seen))

    def effective_rules(self) -> tuple[SecurityRule, ...]:
        if self.rules is not None:
            return self.rules
        roles = self.roles
        return tuple(SecurityRule("#", p, roles) for p in PERMISSIONS) if roles else ()


@dataclass(frozen=True)
class QueueSpec:
    name: str
    routing: RoutingName = "anycast"
    durable: bool = True
    filter: str | None = None
    max_consumers: int | None = None
    purge_on_no_consumers: bool = False


@dataclass(frozen=True)
class AddressSpec:
    """An ``<address>`` with its routing types and declared queues."""

    name: str
    routing_types: tuple[RoutingName, ...] = ("anycast",)
    queues: tuple[QueueSpec, ...] = ()

    def __post_init__(self) -> None:
        _check(bool(self.routing_types), f"address {self.name!r} needs at least one routing type")
        for queue in self.queues:
            _check(queue.routing in self.routing_types,
                   f"queue {queue.name!r} is {queue.routing}; address {self.name!r} is {'/'.join(self.routing_types)}")

    @classmethod
    def anycast(cls, name: str, *queues: str) -> AddressSpec:
        """An anycast address with durable queues (by default one queue named like the address)."""
        return cls(name, ("anycast",), tuple(QueueSpec(q) for q in (queues or (name,))))


@dataclass(frozen=True)
class AddressSetting:
    """An ``<address-setting match=...>``: ``(element, text)`` pairs in document order."""

    match: str
    values: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for element, _ in self.values:
            _check(bool(_XML_NAME.fullmatch(element)), f"address-setting element {element!r} is not an XML name")

    @classmethod
    def of(cls, match: str, **values: object) -> AddressSetting:
        """``AddressSetting.of("#", max_delivery_attempts=3, auto_create_queues=True)``."""
        return cls(match, tuple((k.replace("_", "-"), _text(v)) for k, v in values.items()))


@dataclass(frozen=True)
class TlsSpec:
    """Every node's acceptor serves TLS (Artemis's ``sslEnabled``) with ``keystore``, a PKCS#12 key store; with
    ``client_truststore`` (PKCS#12, certificates only) it also needs a client certificate issued by one of the
    authorities in it (``needClientAuth``).  The kit does not make the stores: the case that wants TLS does."""

    keystore: Path
    password: str
    client_truststore: Path | None = None

    def __post_init__(self) -> None:
        for value in (str(self.keystore), self.password, str(self.client_truststore or "")):
            # the values go into an acceptor URI, whose parameters ';' and '&' separate
            _check(not any(c in value for c in ";&\n"), f"TLS parameter {value!r} holds ';', '&' or a newline")

    def acceptor_params(self) -> str:
        """The acceptor URI's TLS parameters, in Artemis's names (2.28.0 and 2.44.0 read them alike)."""
        params = [("sslEnabled", "true"), ("keyStorePath", str(self.keystore)),
                  ("keyStorePassword", self.password), ("keyStoreType", "PKCS12")]
        if self.client_truststore is not None:
            params += [("needClientAuth", "true"), ("trustStorePath", str(self.client_truststore)),
                       ("trustStorePassword", self.password), ("trustStoreType", "PKCS12")]
        return ";".join(f"{key}={value}" for key, value in params)


@dataclass(frozen=True)
class HASpec:
    """High-availability pairs (``<ha-policy>``): each ``(primary, backup)`` of ``pairs`` names two nodes of the
    topology, rendered ``<master>`` and ``<slave>`` under ``<shared-store>`` or ``<replication>`` (the only
    spellings both Artemis 2.28.0 and 2.44.0 read).  Under ``shared-store`` the backup's data directory is the
    primary's (one journal on one store).  ``allow_failback``: the backup's; ``failover_on_shutdown``: both
    shared-store servers'; ``check_for_live_server``: the replication primary's (ask the cluster whether its
    backup took over before activating on a restart)."""

    policy: Literal["shared-store", "replication"] = "shared-store"
    pairs: tuple[tuple[str, str], ...] = (("node0", "node1"),)
    allow_failback: bool = True
    failover_on_shutdown: bool = False
    check_for_live_server: bool = False
    #: replication under a pluggable lock manager (Artemis's file-based one, ``locks-folder`` shared by the pair):
    #: only the server that holds the pair's lock is active.  Rendered ``<primary>``/``<backup>`` with
    #: ``<manager>`` (both 2.28.0 and 2.44.0 read that as the lock-manager policy); check-for-live-server does
    #: not apply to it.
    lock_manager: bool = False
    #: replication: the reference broker's transparent resume (its primary mirrors its sessions to the backup;
    #: ``--transparent-resume``).  A reference-broker extension that nothing in broker.xml says: a broker without
    #: it (Artemis) runs the same pair, and its clients recreate their sessions on the backup.
    transparent_resume: bool = False

    def __post_init__(self) -> None:
        _check(self.policy in ("shared-store", "replication"),
               f"HA policy {self.policy!r} is not 'shared-store' or 'replication'")
        _check(not self.lock_manager or self.policy == "replication",
               "a lock manager is a replication setting (a shared store's lock is the store's own)")
        _check(not self.transparent_resume or self.policy == "replication",
               "transparent resume is a replication setting (the backup mirrors its primary over the network)")
        _check(not (self.lock_manager and self.check_for_live_server),
               "check-for-live-server is not a setting of a replication pair under a lock manager")
        _check(bool(self.pairs), "an HA spec needs at least one (primary, backup) pair")
        named = [n for pair in self.pairs for n in pair]
        _check(len(named) == len(set(named)), f"a node is in more than one HA pair, or paired with itself: {named}")

    def role_of(self, node: str) -> tuple[Literal["primary", "backup"], str] | None:
        """``("primary", its backup)``, ``("backup", its primary)``, or None for a node in no pair."""
        for primary, backup in self.pairs:
            if node == primary:
                return "primary", backup
            if node == backup:
                return "backup", primary
        return None


@dataclass(frozen=True)
class ScaleDownSpec:
    """One node's ``<ha-policy><live-only><scale-down>`` (spec 002 "Scaling Down"; notes cluster-wire §5.2).

    ``enabled=True``: the node scales down when stopped gracefully, to the first node reachable through
    ``targets`` (connector names = node names; ``None``: every other node in topology order, or the
    cluster's discovery group under ``discovery='udp'``).  ``group_name`` is both what the node advertises
    in its topology (``TopologyMember.scaleDownGroupName``, what other nodes match against) and, when it
    scales down, the only group it scales down to.  ``enabled=False`` with a ``group_name``: a node that
    only advertises a group, to receive messages (the XSD's "partake in scale down as a receiver");
    ``targets`` are rendered for it only when given.  Rendered as ``<live-only>``: Artemis 2.28.0 knows
    only that name, 2.44.0 reads it as ``primary-only`` (deprecated name, same policy).
    """

    node: str
    enabled: bool = True
    group_name: str | None = None
    targets: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        _check(bool(_NODE_NAME.fullmatch(self.node)), f"scale-down node name {self.node!r} is not a node name")
        if self.group_name is not None:
            _check(bool(self.group_name.strip()) and "\n" not in self.group_name and "\r" not in self.group_name,
                   f"scale-down group name {self.group_name!r} of node {self.node!r} is empty or holds a newline")
        _check(self.enabled or self.group_name is not None,
               f"node {self.node!r}: a scale-down that is disabled and names no group-name does nothing")
        if self.targets is not None:
            _check(bool(self.targets), f"node {self.node!r}: scale-down targets, when given, name at least one node "
                                       "(None: every other node)")
            _check(self.node not in self.targets, f"node {self.node!r} cannot scale down to itself")
            _check(len(self.targets) == len(set(self.targets)),
                   f"node {self.node!r}: duplicate scale-down targets in {list(self.targets)}")

    def connectors(self, nodes: tuple[str, ...], discovery: str) -> tuple[str, ...]:
        """The connector names rendered in ``<connectors>``: ``targets``, or (enabled, static discovery) every
        other node of ``nodes``; empty when the discovery group is used or nothing is rendered."""
        if self.targets is not None:
            return self.targets
        if not self.enabled or discovery == "udp":
            return ()
        return tuple(n for n in nodes if n != self.node)

    def uses_discovery(self, discovery: str) -> bool:
        """Whether ``<discovery-group-ref>`` is rendered (enabled, no targets given, UDP discovery)."""
        return self.enabled and self.targets is None and discovery == "udp"


@dataclass(frozen=True)
class ClusterSpec:
    """A cluster of every node: one ``<cluster-connection>`` per node reaching the others through
    static connectors or through UDP discovery (broadcast + discovery groups).
    A ``group_port`` of 0 is replaced by a free UDP port when the topology is resolved.

    ``links=None`` is the symmetric cluster: every node's static connectors name every other node.
    Otherwise node A's static connectors name only the B of each ``(A, B)`` link (a node with no
    link of its own gets no ``<static-connectors>``), e.g. a chain ``(("node0", "node1"), ("node1",
    "node2"))``; ``allow_direct_connections_only`` then keeps a node's bridges to those it names
    (``<static-connectors allow-direct-connections-only="true">``), not to every node it learns
    from the topology.  ``passwords`` gives some nodes a cluster password of their own
    (``(node, password)`` pairs; the others use ``password``), for cases on mismatched credentials.
    """

    name: str = "cluster"
    discovery: Literal["static", "udp"] = "static"
    message_load_balancing: Literal["OFF", "STRICT", "ON_DEMAND", "OFF_WITH_REDISTRIBUTION"] = "ON_DEMAND"
    max_hops: int = 1
    retry_interval_ms: int = 500
    reconnect_attempts: int = -1
    user: str = "cluster-admin"
    password: str = "cluster-secret"  # noqa: S105 - a test broker's cluster password, not a secret
    group_address: str = "231.7.7.7"
    group_port: int = 0
    broadcast_period_ms: int = 1000
    refresh_timeout_ms: int = 10000
    links: tuple[tuple[str, str], ...] | None = None
    allow_direct_connections_only: bool = False
    passwords: tuple[tuple[str, str], ...] = ()
    retry_interval_multiplier: float = 1.0
    max_retry_interval_ms: int = 2000
    initial_connect_attempts: int = -1
    scale_down: tuple[ScaleDownSpec, ...] = ()
    #: Artemis 2.41.0+'s topology scanner (``<topology-scanner-attempts>``): after each new outgoing connection
    #: it retries connectors missing from the topology every retry-interval, without the multiplier, this many
    #: times (-1 until none is missing, 0 off).  None leaves the broker's default (30); brokers without a scanner
    #: (older Artemis, the reference broker) only take None or 0.
    topology_scanner_attempts: int | None = None
    #: the cluster connection's failure detection (``<check-period>``, ``<connection-ttl>``); None: the broker's
    #: defaults (30 s and 60 s).  A replication backup judges its primary lost by the same TTL.
    check_period_ms: int | None = None
    connection_ttl_ms: int | None = None
    #: ``(node, peer, url)``: ``node`` reaches ``peer`` through ``url`` instead of the peer's acceptor (a fault
    #: proxy standing on that link, so a case can partition the servers while it still reaches each of them)
    via: tuple[tuple[str, str, str], ...] = ()

    def __post_init__(self) -> None:
        _check(self.max_hops >= 0, "max_hops must be >= 0")
        for what, value in (("check_period_ms", self.check_period_ms), ("connection_ttl_ms", self.connection_ttl_ms)):
            _check(value is None or value > 0, f"{what} must be > 0 (or None: the broker's default), not {value}")
        links = [(node, peer) for node, peer, _ in self.via]
        _check(len(links) == len(set(links)), f"a link is given twice in via: {links}")
        _check(all(node != peer for node, peer in links), f"a node cannot reach itself through via: {links}")
        _check(isinstance(self.retry_interval_multiplier, int | float)
               and math.isfinite(self.retry_interval_multiplier) and self.retry_interval_multiplier > 0,
               f"retry_interval_multiplier must be a finite number > 0, not {self.retry_interval_multiplier!r}")
        _check(self.max_retry_interval_ms > 0, f"max_retry_interval_ms must be > 0, not {self.max_retry_interval_ms}")
        _check(self.initial_connect_attempts == -1 or self.initial_connect_attempts >= 0,
               f"initial_connect_attempts must be -1 (unlimited) or >= 0, not {self.initial_connect_attempts}")
        _check(self.topology_scanner_attempts is None or self.topology_scanner_attempts >= -1,
               f"topology_scanner_attempts must be -1 (until none is missing), 0 (off) or more, "
               f"not {self.topology_scanner_attempts}")
        scaled = [s.node for s in self.scale_down]
        _check(len(scaled) == len(set(scaled)), f"a node is given two scale-down policies in {scaled}")
        _check(self.retry_interval_ms > 0 and self.broadcast_period_ms > 0 and self.refresh_timeout_ms > 0,
               "cluster intervals must be > 0")
        _check(0 <= self.group_port <= 65535, f"group_port {self.group_port} is not a port")
        if self.links is not None:
            _check(self.discovery == "static",
                   "cluster links name static connectors: they need discovery='static', not 'udp'")
            for link in self.links:
                _check(len(link) == 2 and link[0] != link[1],
                       f"cluster link {link!r} must be two different node names (from, to)")
            _check(len(self.links) == len(set(self.links)), f"duplicate cluster links in {list(self.links)}")
        if self.allow_direct_connections_only:
            _check(self.discovery == "static",
                   "allow_direct_connections_only restricts static connectors: it needs discovery='static'")
        names = [name for name, _ in self.passwords]
        _check(len(names) == len(set(names)), f"a node is given two cluster passwords in {names}")
        for name, password in self.passwords:
            _check("\n" not in password and "\r" not in password,
                   f"the cluster password of node {name!r} holds a newline")

    def static_targets(self, node: str, nodes: tuple[str, ...]) -> tuple[str, ...]:
        """The nodes ``node``'s static connectors name, in topology order: every other node of
        ``nodes`` without links, else the targets of its own links."""
        if self.links is None:
            return tuple(n for n in nodes if n != node)
        targets = {b for a, b in self.links if a == node}
        return tuple(n for n in nodes if n in targets)

    def password_of(self, node: str) -> str:
        """The cluster password ``node`` is configured with."""
        return dict(self.passwords).get(node, self.password)

    def scale_down_of(self, node: str) -> ScaleDownSpec | None:
        """``node``'s scale-down policy, if it has one."""
        return next((s for s in self.scale_down if s.node == node), None)


@dataclass(frozen=True)
class NodeSpec:
    """One broker.  ``port=0`` and ``data_dir=None`` are chosen when the target is made.

    ``extra`` adds plain ``<core>`` elements (name, text) the descriptor does not model; the
    reference broker reports those it does not implement, so keep them to what a case needs.
    """

    name: str = "node0"
    host: str = "127.0.0.1"
    port: int = 0
    data_dir: Path | None = None
    persistence: bool = True
    connection_ttl_override_ms: int = -1
    connection_ttl_check_interval_ms: int = 2000
    transaction_timeout_ms: int = 300000
    id_cache_size: int = 20000
    extra: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _check(bool(_NODE_NAME.fullmatch(self.name)), f"node name {self.name!r} must match {_NODE_NAME.pattern}")
        _check(0 <= self.port <= 65535, f"node {self.name!r}: port {self.port} is not a port")
        _check(self.connection_ttl_override_ms == -1 or self.connection_ttl_override_ms > 0,
               f"node {self.name!r}: connection_ttl_override_ms must be -1 or > 0")
        _check(self.connection_ttl_check_interval_ms > 0, f"node {self.name!r}: ttl check interval must be > 0")
        _check(self.transaction_timeout_ms > 0, f"node {self.name!r}: transaction timeout must be > 0")
        _check(self.id_cache_size >= 0, f"node {self.name!r}: id_cache_size must be >= 0")
        for element, _ in self.extra:
            _check(bool(_XML_NAME.fullmatch(element)), f"node {self.name!r}: {element!r} is not an XML name")

    @property
    def resolved(self) -> bool:
        return self.port != 0 and self.data_dir is not None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp://{host}:{self.port}"


def _default_addresses() -> tuple[AddressSpec, ...]:
    # the two queues ``artemis create`` declares, so dead-lettered and expired messages stay observable
    return (AddressSpec.anycast("DLQ"), AddressSpec.anycast("ExpiryQueue"))


def _default_settings() -> tuple[AddressSetting, ...]:
    # auto-delete off: Artemis deletes an emptied auto-created queue by default, the reference broker
    # would have to match that timing; cases that need it turn it on explicitly
    return (AddressSetting.of(
        "#", dead_letter_address="DLQ", expiry_address="ExpiryQueue", auto_create_queues=True,
        auto_create_addresses=True, auto_delete_queues=False, auto_delete_addresses=False,
    ),)  # fmt: skip


@dataclass(frozen=True)
class Topology:
    """The brokers of a managed target and what they share (security, addresses, settings, cluster)."""

    nodes: tuple[NodeSpec, ...] = (NodeSpec(),)
    security: SecuritySpec = field(default_factory=SecuritySpec)
    addresses: tuple[AddressSpec, ...] = field(default_factory=_default_addresses)
    address_settings: tuple[AddressSetting, ...] = field(default_factory=_default_settings)
    cluster: ClusterSpec | None = None
    ha: HASpec | None = None
    #: TLS on every node's acceptor (None: plain TCP)
    tls: TlsSpec | None = None
    #: ``loopback``: every node on 127.0.0.1 (its own port); ``netns``: every node in a network namespace of its
    #: own with its own address on a bridge (root only; ``_netns``), hosts chosen when the target is made
    network: Literal["loopback", "netns"] = "loopback"

    def __post_init__(self) -> None:
        _check(bool(self.nodes), "a topology needs at least one node")
        _check(self.network in ("loopback", "netns"), f"network {self.network!r} is not 'loopback' or 'netns'")
        names = [n.name for n in self.nodes]
        _check(len(names) == len(set(names)), f"duplicate node names in {names}")
        ports = [n.port for n in self.nodes if n.port]
        _check(len(ports) == len(set(ports)), f"two nodes share a port in {ports}")
        addresses = [a.name for a in self.addresses]
        _check(len(addresses) == len(set(addresses)), f"duplicate addresses in {addresses}")
        _check(not self.security.certificate_users or (self.tls is not None and self.tls.client_truststore is not None),
               "certificate users log in by the client certificate of a TLS connection: they need tls with a "
               "client_truststore (needClientAuth)")
        if self.cluster is not None:
            known = set(names)
            named = [n for link in self.cluster.links or () for n in link]
            named += [n for n, _ in self.cluster.passwords]
            named += [n for s in self.cluster.scale_down for n in (s.node, *(s.targets or ()))]
            named += [n for node, peer, _ in self.cluster.via for n in (node, peer)]
            unknown = sorted({n for n in named if n not in known})
            _check(not unknown, f"the cluster names node(s) {', '.join(unknown)} that the topology does not have "
                                f"(nodes: {', '.join(names)})")
        if self.ha is not None:
            # the pair finds each other, and its clients learn the backup, through the cluster connection
            _check(self.cluster is not None, "HA pairs need a cluster (the pair's cluster connection)")
            unknown = sorted({n for pair in self.ha.pairs for n in pair} - set(names))
            _check(not unknown, f"the HA pairs name node(s) {', '.join(unknown)} that the topology does not have")
            _check(self.cluster is None or not self.cluster.scale_down, "a node has one ha-policy: HA pairs and "
                   "scale-down cannot be combined")

    @classmethod
    def single(
        cls,
        node: NodeSpec | None = None,
        *,
        security: SecuritySpec | None = None,
        addresses: tuple[AddressSpec, ...] | None = None,
        address_settings: tuple[AddressSetting, ...] | None = None,
    ) -> Topology:
        """One node; anything not given keeps the defaults."""
        return cls(
            (node or NodeSpec(),),
            security=security or SecuritySpec(),
            addresses=_default_addresses() if addresses is None else addresses,
            address_settings=_default_settings() if address_settings is None else address_settings,
        )

    @classmethod
    def ha_pair(cls, ha: HASpec | None = None, cluster: ClusterSpec | None = None, *,
                like: NodeSpec | None = None) -> Topology:
        """A primary ``node0`` and its backup ``node1`` under ``ha`` (shared store by default), in a cluster of
        the two (static connectors: each names the other), both configured like ``like``."""
        ha = ha or HASpec()
        _check(len(ha.pairs) == 1, "ha_pair makes one pair; build a Topology for more")
        return dataclasses.replace(cls.cluster_of(2, cluster, like=like), ha=ha)

    @classmethod
    def cluster_of(cls, count: int, cluster: ClusterSpec | None = None, *, like: NodeSpec | None = None) -> Topology:
        """``count`` nodes ``node0, node1, ...`` configured like ``like``, in one symmetric cluster."""
        _check(count >= 1, "a cluster needs at least one node")
        template = like or NodeSpec()
        _check(template.port == 0 or count == 1, "nodes of a cluster cannot share the template's fixed port")
        specs = tuple(dataclasses.replace(template, name=f"node{i}", data_dir=None) for i in range(count))
        return cls(specs, cluster=cluster or ClusterSpec())

    @classmethod
    def chain_of(cls, count: int, cluster: ClusterSpec | None = None, *, like: NodeSpec | None = None) -> Topology:
        """``count`` nodes in a chain ``node0 -> node1 -> ...``: each node's static connector names the
        next node only, with allow-direct-connections-only, so bridges run one way along the chain (the
        clusters chapter's "Chain cluster").  ``cluster`` gives everything else (max-hops, balancing)."""
        _check(count >= 2, "a chain needs at least two nodes")
        links = tuple((f"node{i}", f"node{i + 1}") for i in range(count - 1))
        spec = dataclasses.replace(cluster or ClusterSpec(), discovery="static", links=links,
                                   allow_direct_connections_only=True)
        return cls.cluster_of(count, spec, like=like)

    def node(self, name: str) -> NodeSpec:
        for spec in self.nodes:
            if spec.name == name:
                return spec
        raise KeyError(f"no node {name!r} in the topology (nodes: {', '.join(n.name for n in self.nodes)})")

    @property
    def resolved(self) -> bool:
        return all(n.resolved for n in self.nodes) and (self.cluster is None or self.cluster.group_port != 0)

    def resolve(
        self, workdir: Path, tcp_ports: Callable[[int], list[int]], udp_ports: Callable[[int], list[int]]
    ) -> Topology:
        """A copy with every free port picked and every data directory set (``workdir/<node>/data``).

        ``tcp_ports(n)`` must return n distinct free ports (see ``_process.free_ports``)."""
        fresh = iter(tcp_ports(sum(1 for n in self.nodes if n.port == 0)))
        nodes = tuple(
            dataclasses.replace(
                n,
                port=n.port or next(fresh),
                data_dir=(n.data_dir or workdir / n.name / "data").absolute(),
            )
            for n in self.nodes
        )
        if self.ha is not None and self.ha.policy == "shared-store":
            # one store per pair: the backup's journal, bindings and paging are the primary's
            by_name = {n.name: n for n in nodes}
            shared = {backup: by_name[primary].data_dir for primary, backup in self.ha.pairs}
            nodes = tuple(dataclasses.replace(n, data_dir=shared[n.name]) if n.name in shared else n for n in nodes)
        cluster = self.cluster
        if cluster is not None and cluster.group_port == 0:
            cluster = dataclasses.replace(cluster, group_port=udp_ports(1)[0])
        return dataclasses.replace(self, nodes=nodes, cluster=cluster)
