"""``broker.xml`` -> :class:`BrokerConfig`, reading the elements as Artemis's
``FileConfigurationParser`` reads them (names, defaults, validators), with two differences made
on purpose: a value Artemis would silently take as something else (``<persistence-enabled>yes``
read as false, a dangling ``connector-ref`` skipped with a log line) is a :class:`ConfigError`
here, and every element the reference broker does not implement becomes a :class:`ConfigWarning`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from lxml import etree

from .._tls import TlsConfigError
from ._errors import ConfigError, ConfigWarning
from ._login import load_login_config
from ._model import (
    FILE_LOCK_MANAGERS,
    Acceptor,
    AcceptorTls,
    AddressConfig,
    AddressFullPolicy,
    AddressSettings,
    BroadcastGroup,
    BrokerConfig,
    ClusterConnection,
    Connector,
    DiscoveryGroup,
    HAPolicy,
    JournalConfig,
    JournalType,
    LockManager,
    MessageLoadBalancing,
    Permission,
    QueueConfig,
    Role,
    RoutingType,
    ScaleDown,
    SecuritySetting,
)
from ._schema import ARTEMIS_CORE_ELEMENTS
from ._uri import URIError, parse_transport_uri
from ._wildcard import invalid_match_reason
from ._xml import Context, Node

__all__ = ["default_config", "load_config", "parse_broker_xml"]

# journal-buffer-timeout defaults, nanoseconds (ArtemisConstants): 1e9/2000 for ASYNCIO, 1e9/300 otherwise
_BUFFER_TIMEOUT_AIO = 500000
_BUFFER_TIMEOUT_NIO = 3333333

SUPPORTED_PROTOCOLS = frozenset({"CORE"})
# acceptor/connector URI parameters the reference broker reads; others are reported per acceptor
_KNOWN_PARAMS = frozenset({"host", "port", "protocols", "name"})
# an acceptor's TLS parameters it reads (TransportConstants names)
_TLS_PARAMS = frozenset({
    "sslEnabled", "keyStorePath", "keyStorePassword", "keyStoreType", "trustStorePath", "trustStorePassword",
    "trustStoreType", "needClientAuth", "wantClientAuth", "enabledProtocols",
})
# TLS parameters of Artemis's acceptor the reference broker does not implement, with what it does instead
_TLS_UNSUPPORTED = {
    "enabledCipherSuites": "OpenSSL's default cipher suites are enabled (Java's suite names have no simple mapping "
                           "to OpenSSL's)",
    "keyStoreProvider": "the stores are read by the reference broker itself (PKCS12, PEM)",
    "trustStoreProvider": "the stores are read by the reference broker itself (PKCS12, PEM)",
    "keyStoreAlias": "the key store's one private key is used",
    "crlPath": "client certificates are not checked for revocation",
    "verifyHost": "a client certificate is not matched against the client's host",
    "sslProvider": "Python's ssl module (OpenSSL) is the provider",
    "sniHost": "the server name a client sends is not checked",
    "sslAutoReload": "the stores are read once, at start",
    "trustManagerFactoryPlugin": "the trust store (or the system's authorities) decides",
    "sslContext": "each acceptor has its own context",
    "forceSSLParameters": "a connector's parameter",
}
_ACCEPTOR_PARAMS = _KNOWN_PARAMS | _TLS_PARAMS | frozenset(_TLS_UNSUPPORTED)

# <permission type=...>: Artemis names, with the two legacy aliases it still accepts
_PERMISSIONS: dict[str, Permission] = {p.value: p for p in Permission}
_PERMISSIONS["createTempQueue"] = Permission.CREATE_NON_DURABLE_QUEUE
_PERMISSIONS["deleteTempQueue"] = Permission.DELETE_NON_DURABLE_QUEUE
_UNSUPPORTED_PERMISSIONS = frozenset({"view", "edit"})  # management RBAC (management-message-rbac)


def _flag(node: Node, name: str, params: Mapping[str, str], key: str, default: bool = False) -> bool:
    """A boolean URI parameter; Artemis takes anything but ``true`` as false, the reference broker refuses it."""
    text = params.get(key)
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise node.error(f"acceptor '{name}': {key} must be true or false", text)
    return text.strip().lower() == "true"


# --------------------------------------------------------------------------- entry points


def parse_broker_xml(
    source: str | bytes | Path,
    *,
    properties: Mapping[str, str] | None = None,
    file: str | None = None,
    instance_dir: Path | None = None,
) -> BrokerConfig:
    """Parse ``broker.xml`` given as text, bytes or a path.

    ``properties`` is the mapping ``${name}`` / ``${name:default}`` are looked up in (Artemis's
    system properties).  The security files beside the file are not read (see
    :func:`load_config`), so the result's ``login`` is ``None``.
    """
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
    try:
        if isinstance(source, Path):
            file = file or str(source)
            try:
                tree = etree.parse(str(source), parser)
            except OSError as exc:
                raise ConfigError(f"cannot read the file: {exc}", file=file) from None
            tree.xinclude()
            root = tree.getroot()
        else:
            file = file or "<string>"
            data = source.encode("utf-8") if isinstance(source, str) else source
            root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        raise ConfigError(f"malformed XML: {exc.msg}", file=file or "<string>", line=exc.lineno) from None
    except etree.XIncludeError as exc:
        raise ConfigError(f"cannot include: {exc}", file=file or "<string>") from None
    ctx = Context(file, properties or {})
    return _Parser(ctx).parse(root, instance_dir)


def load_config(
    path: str | Path,
    *,
    properties: Mapping[str, str] | None = None,
    instance_dir: Path | None = None,
    domain: str | None = None,
) -> BrokerConfig:
    """Read an Artemis instance's configuration: ``broker.xml`` at ``path`` and, beside it,
    ``login.config`` with the users and roles files it names (and ``bootstrap.xml`` for the JAAS
    domain).  Relative directories resolve against ``instance_dir``, by default the parent of
    ``etc/`` when broker.xml sits in a directory of that name, else broker.xml's directory."""
    path = Path(path)
    etc = path.parent
    if instance_dir is None:
        instance_dir = etc.parent if etc.name == "etc" else etc
    config = parse_broker_xml(path, properties=properties, instance_dir=instance_dir)
    warnings = list(config.warnings)
    login = load_login_config(etc, warnings, domain=domain)
    if login is None and config.security_enabled:
        warnings.append(ConfigWarning(
            "login.config", "login.config",
            "security is enabled but there is no login.config beside broker.xml: only the cluster user can log in",
            str(etc / "login.config"),
        ))
    return _replace(config, login=login, warnings=tuple(warnings))


def default_config(data_dir: str | Path) -> BrokerConfig:
    """The embedded default: a CORE acceptor on 127.0.0.1:61616, security disabled, persistence
    on with every directory under ``data_dir``, addresses and queues auto-created."""
    data = Path(data_dir)
    uri = "tcp://127.0.0.1:61616?protocols=CORE"
    acceptor = Acceptor("default", uri, "tcp", "127.0.0.1", 61616, MappingProxyType({"protocols": "CORE"}), ("CORE",))
    journal = JournalConfig(
        persistence_enabled=True,
        journal_type=JournalType.NIO,
        journal_directory=str(data / "journal"),
        bindings_directory=str(data / "bindings"),
        paging_directory=str(data / "paging"),
        large_messages_directory=str(data / "large-messages"),
        journal_buffer_timeout=_BUFFER_TIMEOUT_NIO,
    )
    settings = AddressSettings("#", auto_create_queues=True, auto_create_addresses=True)
    return BrokerConfig(
        name="reference",
        acceptors=(acceptor,),
        security_enabled=False,
        address_settings=(settings,),
        journal=journal,
        instance_dir=data,
        source="<embedded default>",
    )


def _replace(config: BrokerConfig, **changes: Any) -> BrokerConfig:
    return dataclasses.replace(config, **changes)


# --------------------------------------------------------------------------- the parser


def _core_leftover(name: str) -> str:
    if name in ARTEMIS_CORE_ELEMENTS:
        return f"unsupported element '{name}': ignored by the reference broker"
    return f"unknown element '{name}' (not an Artemis 2.44.0 <core> element; a typo?): ignored"


class _Parser:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def parse(self, root: etree._Element, instance_dir: Path | None) -> BrokerConfig:
        top = Node(root, etree.QName(root).localname, self.ctx)
        if top.name == "configuration":
            core = top.child("core")
            if core is None:
                raise top.error("no <core> element in <configuration>")
            top.finish()
        elif top.name == "core":
            core = top
        else:
            raise top.error("the root element must be <configuration> (or <core>)", top.name)
        core.path = "core"
        config = self._core(core, instance_dir)
        core.finish(_core_leftover)
        ordered = sorted(self.ctx.warnings, key=lambda w: (w.line is None, w.line or 0))
        return _replace(config, warnings=tuple(ordered))

    # ------------------------------------------------------------------ <core>

    def _core(self, core: Node, instance_dir: Path | None) -> BrokerConfig:
        connectors = self._connectors(core)
        names = {c.name for c in connectors}
        discovery = self._discovery_groups(core)
        return BrokerConfig(
            name=core.str_of("name", "localhost"),
            acceptors=self._acceptors(core),
            connectors=connectors,
            security_enabled=core.bool_of("security-enabled", True),
            security_settings=self._security_settings(core),
            addresses=self._addresses(core),
            address_settings=self._address_settings(core),
            journal=self._journal(core),
            connection_ttl_override=core.long_of("connection-ttl-override", -1, "-1|gt0"),
            connection_ttl_check_interval=core.long_of("connection-ttl-check-interval", 2000, "gt0"),
            transaction_timeout=core.long_of("transaction-timeout", 300000, "gt0"),
            transaction_timeout_scan_period=core.long_of("transaction-timeout-scan-period", 1000, "gt0"),
            id_cache_size=core.int_of("id-cache-size", 20000, "ge0"),
            persist_id_cache=core.bool_of("persist-id-cache", True),
            persist_delivery_count_before_delivery=core.bool_of("persist-delivery-count-before-delivery", True),
            cluster_user=core.str_of("cluster-user", "ACTIVEMQ.CLUSTER.ADMIN.USER"),
            cluster_password=core.str_of("cluster-password", "CHANGE ME!!"),
            broadcast_groups=self._broadcast_groups(core, names),
            discovery_groups=discovery,
            cluster_connections=self._cluster_connections(core, names, {d.name for d in discovery}),
            ha_policy=self._ha_policy(core, names, {d.name for d in discovery}),
            instance_dir=instance_dir,
            source=self.ctx.file,
        )

    def _journal(self, core: Node) -> JournalConfig:
        journal_type = JournalType.ASYNCIO
        jt = core.child("journal-type")
        if jt is not None:
            journal_type = jt.as_enum(JournalType)
        default_timeout = _BUFFER_TIMEOUT_AIO if journal_type is JournalType.ASYNCIO else _BUFFER_TIMEOUT_NIO
        return JournalConfig(
            persistence_enabled=core.bool_of("persistence-enabled", True),
            journal_type=journal_type,
            journal_directory=core.str_of("journal-directory", "data/journal", non_empty=True),
            bindings_directory=core.str_of("bindings-directory", "data/bindings", non_empty=True),
            paging_directory=core.str_of("paging-directory", "data/paging", non_empty=True),
            large_messages_directory=core.str_of("large-messages-directory", "data/largemessages", non_empty=True),
            journal_file_size=core.bytes_of("journal-file-size", 10485760, "gt0"),
            journal_min_files=core.int_of("journal-min-files", 2, "gt0"),
            journal_sync_transactional=core.bool_of("journal-sync-transactional", True),
            journal_sync_non_transactional=core.bool_of("journal-sync-non-transactional", True),
            journal_datasync=core.bool_of("journal-datasync", True),
            journal_buffer_timeout=core.int_of("journal-buffer-timeout", default_timeout, "ge0"),
            journal_compact_min_files=core.int_of("journal-compact-min-files", 10, "ge0"),
            journal_compact_percentage=core.int_of("journal-compact-percentage", 30, "percent"),
        )

    # ------------------------------------------------------------------ transports

    def _transport(
        self, node: Node, known: frozenset[str] = _KNOWN_PARAMS
    ) -> tuple[str, str, str, int, dict[str, str]]:
        uri = node.text()
        try:
            parsed = parse_transport_uri(uri)
        except URIError as exc:
            raise node.error(exc.reason, exc.found) from None
        if parsed.fragment:
            node.warn(f"'{node.name}' lists extra transports after '#' ({parsed.fragment}); only the first is used")
        if parsed.scheme == "vm":
            node.warn(f"in-VM transport '{uri}' is not supported by the reference broker (it has no JVM): ignored")
        unknown = sorted(set(parsed.params) - known)
        if unknown:
            node.warn(f"URI parameters ignored by the reference broker: {', '.join(unknown)}")
        return uri, parsed.scheme, parsed.host, parsed.port, parsed.params

    def _acceptors(self, core: Node) -> tuple[Acceptor, ...]:
        section = core.child("acceptors")
        if section is None:
            return ()
        out = []
        for node in section.children("acceptor"):
            name = node.attr("name") or ""
            uri, scheme, host, port, params = self._transport(node, _ACCEPTOR_PARAMS)
            tls = self._acceptor_tls(node, name, params)
            protocols: tuple[str, ...] | None = None
            if "protocols" in params:
                protocols = tuple(p.strip().upper() for p in params["protocols"].split(",") if p.strip())
                others = [p for p in protocols if p not in SUPPORTED_PROTOCOLS]
                if others:
                    node.warn(
                        f"acceptor '{name}': protocols {', '.join(others)} are not supported (the reference broker "
                        "speaks CORE only)" + ("" if "CORE" in protocols else "; this acceptor serves nothing"),
                        "protocols",
                    )
            out.append(Acceptor(name, uri, scheme, host, port, MappingProxyType(params), protocols, tls))
            node.finish()
        section.finish()
        return tuple(out)

    def _acceptor_tls(self, node: Node, name: str, params: dict[str, str]) -> AcceptorTls | None:
        """``sslEnabled=true``: the TLS settings, with the stores read now, so that a missing or unreadable store or
        a wrong password stops the broker at start (naming the acceptor and the parameter), not at a handshake."""
        tls_params = sorted(k for k in params if k in _TLS_PARAMS or k in _TLS_UNSUPPORTED)
        if not _flag(node, name, params, "sslEnabled"):
            others = [k for k in tls_params if k != "sslEnabled"]
            if others:
                node.warn(f"acceptor '{name}': TLS parameters without sslEnabled=true are not used (as in Artemis): "
                          f"{', '.join(others)}")
            return None
        for key in tls_params:
            # a switch left at false asks for nothing the broker lacks (verifyHost=false, sslAutoReload=false)
            if key in _TLS_UNSUPPORTED and params[key].strip().lower() != "false":
                node.warn(f"acceptor '{name}': {key} is not supported by the reference broker: ignored; "
                          f"{_TLS_UNSUPPORTED[key]}", key)
        if not params.get("keyStorePath"):
            # NettyAcceptor.checkSSLConfiguration refuses the same
            raise node.error(f"acceptor '{name}': keyStorePath: sslEnabled=true needs a key store (keyStorePath)")
        trust = params.get("trustStorePath") or None
        tls = AcceptorTls(
            key_store_path=self._store_path(params["keyStorePath"]),
            key_store_password=params.get("keyStorePassword"),
            key_store_type=params.get("keyStoreType") or None,
            trust_store_path=None if trust is None else self._store_path(trust),
            trust_store_password=params.get("trustStorePassword"),
            trust_store_type=params.get("trustStoreType") or None,
            need_client_auth=_flag(node, name, params, "needClientAuth"),
            want_client_auth=_flag(node, name, params, "wantClientAuth"),
            enabled_protocols=params.get("enabledProtocols") or None,
        )
        if trust is not None and not (tls.need_client_auth or tls.want_client_auth):
            node.warn(f"acceptor '{name}': trustStorePath is not used without needClientAuth or wantClientAuth "
                      "(no client certificate is asked for)", "trustStorePath")
        try:
            tls.context()
        except TlsConfigError as exc:
            raise node.error(f"acceptor '{name}': {exc.parameter}: {exc.reason}") from None
        return tls

    def _store_path(self, text: str) -> str:
        """A relative store path as Artemis finds it: in the working directory (Java's ``File``), else on the
        broker's class path, whose first entry is the instance's ``etc/``, i.e. beside broker.xml."""
        path = Path(text)
        if text.startswith("file:") or path.is_absolute() or path.exists() or self.ctx.file == "<string>":
            return text
        beside = Path(self.ctx.file).parent / path
        return str(beside) if beside.exists() else text

    def _connectors(self, core: Node) -> tuple[Connector, ...]:
        section = core.child("connectors")
        if section is None:
            return ()
        out: dict[str, Connector] = {}
        for node in section.children("connector"):
            name = node.attr("name")
            if not name:
                raise node.error("a connector needs a name attribute")
            uri, scheme, host, port, params = self._transport(node)
            if name in out:
                node.warn(f"connector '{name}' is defined twice; the first is used (as Artemis)")
            else:
                out[name] = Connector(name, uri, scheme, host, port, MappingProxyType(params))
            node.finish()
        section.finish()
        return tuple(out.values())

    # ------------------------------------------------------------------ security

    def _security_settings(self, core: Node) -> tuple[SecuritySetting, ...]:
        section = core.child("security-settings")
        if section is None:
            return ()
        out: dict[str, SecuritySetting] = {}
        for node in section.children("security-setting"):
            match = node.required_attr("match")
            reason = invalid_match_reason(match)
            if reason:
                raise node.error(f"invalid match: {reason}", match)
            grants: dict[str, set[Permission]] = {}
            for perm in node.children("permission"):
                kind = perm.required_attr("type")
                roles = [r.strip() for r in perm.required_attr("roles").split(",") if r.strip()]
                if kind in _UNSUPPORTED_PERMISSIONS:
                    perm.warn(f"permission type '{kind}' (management RBAC) is not supported: ignored", kind)
                    perm.finish()
                    continue
                if kind not in _PERMISSIONS:
                    raise perm.error(f"unknown permission type (one of {', '.join(_PERMISSIONS)})", kind)
                for role in roles:
                    grants.setdefault(role, set()).add(_PERMISSIONS[kind])
                perm.finish()
            if match in out:
                node.warn(f"security-setting '{match}' is defined twice; the last is used (as Artemis)")
            out[match] = SecuritySetting(match, tuple(Role(r, frozenset(p)) for r, p in grants.items()))
            node.finish()
        section.finish()
        return tuple(out.values())

    # ------------------------------------------------------------------ addresses and their settings

    def _addresses(self, core: Node) -> tuple[AddressConfig, ...]:
        section = core.child("addresses")
        if section is None:
            return ()
        out: dict[str, AddressConfig] = {}
        for node in section.children("address"):
            name = node.required_attr("name")
            routing: set[RoutingType] = set()
            queues: list[QueueConfig] = []
            for rt in RoutingType:
                for group in node.children(rt.value.lower()):
                    routing.add(rt)
                    queues.extend(self._queue(q, name, rt) for q in group.children("queue"))
                    group.finish()
            if not routing:
                raise node.error("an address needs <anycast> or <multicast>")
            seen: set[str] = set()
            for q in queues:
                if q.name in seen:
                    raise node.error("queue defined twice", q.name)
                seen.add(q.name)
            if name in out:
                node.warn(f"address '{name}' is defined twice; the last is used")
            out[name] = AddressConfig(name, frozenset(routing), tuple(queues))
            node.finish()
        section.finish()
        return tuple(out.values())

    def _queue(self, node: Node, address: str, routing_type: RoutingType) -> QueueConfig:
        name = node.required_attr("name")
        max_consumers: int | None = None
        text = node.attr("max-consumers")
        if text is not None:
            max_consumers = _int_attr(node, "max-consumers", text, lambda v: v >= -1, "must be -1 or >= 0")
        purge = _bool_attr(node, "purge-on-no-consumers", node.attr("purge-on-no-consumers"), False)
        filt = node.child("filter")
        queue = QueueConfig(
            name=name,
            address=address,
            routing_type=routing_type,
            durable=node.bool_of("durable", True),
            filter=None if filt is None else filt.required_attr("string"),
            max_consumers=max_consumers,
            purge_on_no_consumers=purge,
            user=node.opt_str_of("user"),
        )
        if filt is not None:
            filt.finish()
        node.finish()
        return queue

    def _address_settings(self, core: Node) -> tuple[AddressSettings, ...]:
        section = core.child("address-settings")
        if section is None:
            return ()
        out: dict[str, AddressSettings] = {}
        for node in section.children("address-setting"):
            match = node.required_attr("match")
            reason = invalid_match_reason(match)
            if reason:
                raise node.error(f"invalid match: {reason}", match)
            values: dict[str, object] = {}
            for child in node.all_children():
                reader = _ADDRESS_SETTING_READERS.get(child.name)
                if reader is None:
                    child.warn(f"unsupported address-setting '{child.name}': ignored by the reference broker")
                    continue
                values[child.name.replace("-", "_")] = reader(child)
                child.finish()
            if match in out:
                node.warn(f"address-setting '{match}' is defined twice; the first is used (as Artemis)")
            else:
                out[match] = AddressSettings(match, **values)  # type: ignore[arg-type]
            node.finish()
        section.finish()
        return tuple(out.values())

    # ------------------------------------------------------------------ clustering

    def _udp_endpoint(self, node: Node, what: str) -> dict[str, Any]:
        values: dict[str, Any] = {
            "local_bind_address": node.opt_str_of("local-bind-address"),
            "local_bind_port": node.int_of("local-bind-port", -1, "-1|port"),
            "group_address": node.opt_str_of("group-address"),
            "group_port": node.int_of("group-port", -1, "-1|port"),
            "jgroups_file": node.opt_str_of("jgroups-file"),
            "jgroups_channel": node.opt_str_of("jgroups-channel"),
        }
        if values["jgroups_file"] is not None:
            node.warn(f"{what} '{node.attr('name')}' uses JGroups, which the reference broker does not support: "
                      "it is not started", "jgroups-file")
        elif values["group_address"] is None or values["group_port"] == -1:
            raise node.error(f"a UDP {what} needs <group-address> and <group-port>")
        return values

    def _broadcast_groups(self, core: Node, connectors: set[str]) -> tuple[BroadcastGroup, ...]:
        section = core.child("broadcast-groups")
        if section is None:
            return ()
        out: list[BroadcastGroup] = []
        for node in section.children("broadcast-group"):
            name = node.required_attr("name")
            refs = []
            for ref in node.children("connector-ref"):
                refs.append(_known(ref, ref.text(), connectors, "connector"))
                ref.finish()
            group = BroadcastGroup(
                name=name,
                broadcast_period=node.long_of("broadcast-period", 2000, "gt0"),
                connector_refs=tuple(refs),
                **self._udp_endpoint(node, "broadcast-group"),
            )
            out.append(group)
            node.finish()
        section.finish()
        return tuple(out)

    def _discovery_groups(self, core: Node) -> tuple[DiscoveryGroup, ...]:
        section = core.child("discovery-groups")
        if section is None:
            return ()
        out: dict[str, DiscoveryGroup] = {}
        for node in section.children("discovery-group"):
            name = node.required_attr("name")
            group = DiscoveryGroup(
                name=name,
                refresh_timeout=node.long_of("refresh-timeout", 10000, "gt0"),
                initial_wait_timeout=node.long_of("initial-wait-timeout", 10000, "gt0"),
                **self._udp_endpoint(node, "discovery-group"),
            )
            if name in out:
                node.warn(f"discovery-group '{name}' is defined twice; the first is used (as Artemis)")
            else:
                out[name] = group
            node.finish()
        section.finish()
        return tuple(out.values())

    def _cluster_connections(
        self, core: Node, connectors: set[str], discovery: set[str]
    ) -> tuple[ClusterConnection, ...]:
        section = core.child("cluster-connections")
        if section is None:
            return ()
        out: list[ClusterConnection] = []
        for node in section.children("cluster-connection"):
            out.append(self._cluster_connection(node, connectors, discovery))
            node.finish()
        section.finish()
        return tuple(out)

    def _cluster_connection(self, node: Node, connectors: set[str], discovery: set[str]) -> ClusterConnection:
        name = node.required_attr("name")
        ref = node.child("connector-ref")
        if ref is None:
            raise node.error("a cluster-connection needs a <connector-ref>")
        connector_ref = _known(ref, ref.text(), connectors, "connector")
        legacy = node.child("forward-when-no-consumers")
        mlb = node.child("message-load-balancing")
        if legacy is not None:
            # FCP: the deprecated element wins when present: true -> STRICT, false -> ON_DEMAND
            balancing = MessageLoadBalancing.STRICT if legacy.as_bool() else MessageLoadBalancing.ON_DEMAND
        elif mlb is not None:
            balancing = mlb.as_enum(MessageLoadBalancing)
        else:
            balancing = MessageLoadBalancing.ON_DEMAND
        discovery_ref: str | None = None
        dref = node.child("discovery-group-ref")
        if dref is not None:
            discovery_ref = _known(dref, dref.required_attr("discovery-group-name"), discovery, "discovery-group")
            dref.finish()
        static: list[str] = []
        direct_only = False
        sc = node.child("static-connectors")
        if sc is not None:
            direct_only = _bool_attr(sc, "allow-direct-connections-only", sc.attr("allow-direct-connections-only"),
                                     False)
            for c in sc.children("connector-ref"):
                static.append(_known(c, c.text(), connectors, "connector"))
                c.finish()
            sc.finish()
            if discovery_ref is not None:
                sc.warn("both discovery-group-ref and static-connectors: the discovery group is used (as Artemis)")
                static = []
        return ClusterConnection(
            name=name,
            connector_ref=connector_ref,
            address=node.str_of("address", ""),
            check_period=node.long_of("check-period", 30000, "gt0"),
            connection_ttl=node.long_of("connection-ttl", 60000, "gt0"),
            min_large_message_size=node.bytes_of("min-large-message-size", 100 * 1024, "gt0"),
            call_timeout=node.long_of("call-timeout", 30000, "gt0"),
            retry_interval=node.long_of("retry-interval", 500, "gt0"),
            retry_interval_multiplier=node.float_of("retry-interval-multiplier", 1.0, "gt0"),
            max_retry_interval=node.long_of("max-retry-interval", 2000, "gt0"),
            initial_connect_attempts=node.int_of("initial-connect-attempts", -1, "-1|ge0"),
            reconnect_attempts=node.int_of("reconnect-attempts", -1, "-1|ge0"),
            use_duplicate_detection=node.bool_of("use-duplicate-detection", True),
            message_load_balancing=balancing,
            max_hops=node.int_of("max-hops", 1, "ge0"),
            confirmation_window_size=node.bytes_of("confirmation-window-size", 10 * 1024 * 1024, "gt0"),
            producer_window_size=node.bytes_of("producer-window-size", 1024 * 1024, "-1|gt0"),
            call_failover_timeout=node.long_of("call-failover-timeout", -1, "-1|gt0"),
            notification_interval=node.long_of("notification-interval", 1000, "gt0"),
            notification_attempts=node.int_of("notification-attempts", 2, "gt0"),
            discovery_group_ref=discovery_ref,
            static_connectors=tuple(static),
            allow_direct_connections_only=direct_only,
        )

    def _ha_policy(self, core: Node, connectors: set[str], discovery: set[str]) -> HAPolicy:
        ha = core.child("ha-policy")
        if ha is None:
            return HAPolicy()
        policy = HAPolicy()
        for kind in ha.all_children():
            if kind.name in ("live-only", "primary-only"):
                policy = HAPolicy("live-only", self._scale_down(kind, connectors, discovery))
            elif kind.name in ("shared-store", "replication"):
                policy = self._paired_policy(kind) or policy
            else:
                kind.warn(f"HA policy '{kind.name}' is not supported: the reference broker runs live-only")
                continue
            kind.finish()
        ha.finish()
        return policy

    def _paired_policy(self, kind: Node) -> HAPolicy | None:
        """``<shared-store>`` or ``<replication>`` with one role: ``master``/``primary`` or ``slave``/``backup``
        (2.32 renamed them; both are read).  ``colocated`` is not supported (warned, ignored)."""
        roles: list[tuple[Node, str]] = []
        for c in kind.all_children():
            if c.name in ("master", "primary", "slave", "backup"):
                roles.append((c, "primary" if c.name in ("master", "primary") else "backup"))
            else:
                c.warn(f"unsupported element '{c.name}' of '{kind.name}': ignored by the reference broker (colocated "
                       "backups are not implemented)" if c.name == "colocated" else
                       f"unsupported element '{c.name}' of '{kind.name}': ignored by the reference broker")
        if not roles:
            kind.warn(f"'{kind.name}' names no role (master/primary or slave/backup): the broker runs live-only")
            return None
        if len(roles) > 1:
            raise kind.error("names more than one role; a broker is either the primary or the backup",
                             ", ".join(c.name for c, _ in roles))
        node, role = roles[0]
        primary, backup = role == "primary", role == "backup"
        if kind.name == "shared-store":
            policy = HAPolicy(
                "shared-store", None, role,
                failover_on_shutdown=node.bool_of("failover-on-shutdown", False),
                allow_failback=node.bool_of("allow-failback", True) if backup else True,
                restart_backup=node.bool_of("restart-backup", True) if backup else True,
                wait_for_activation=node.bool_of("wait-for-activation", True) if primary else True,
            )
        else:
            # 2.32 renamed check-for-live-server to check-for-active-server: either one asks for the check
            checks = (node.bool_of("check-for-live-server", False), node.bool_of("check-for-active-server", False))
            policy = HAPolicy(
                "replication", None, role,
                allow_failback=node.bool_of("allow-failback", True) if backup else True,
                restart_backup=node.bool_of("restart-backup", True) if backup else True,
                check_for_live_server=any(checks) if primary else False,
                group_name=node.opt_str_of("group-name"),
                cluster_name=node.opt_str_of("cluster-name"),
                initial_replication_sync_timeout_ms=node.long_of("initial-replication-sync-timeout", 30000, "gt0"),
                lock_manager=self._lock_manager(node),
            )
        node.finish()
        return policy

    def _lock_manager(self, role: Node) -> LockManager | None:
        """``<manager>``: Artemis's file-based lock manager (either class name) with its ``locks-folder``
        property; ``<coordination-id>`` (the primary's) names the lock."""
        manager = role.child("manager")
        if manager is None:
            return None
        class_name = manager.str_of("class-name", FILE_LOCK_MANAGERS[0], non_empty=True)
        if class_name not in FILE_LOCK_MANAGERS:
            raise manager.error("is not a lock manager the reference broker has (it has the file-based one: "
                                + " or ".join(FILE_LOCK_MANAGERS) + ")", class_name)
        folder: str | None = None
        properties = manager.child("properties")
        if properties is not None:
            for prop in properties.children("property"):
                key, value = prop.required_attr("key"), prop.required_attr("value")
                if key == "locks-folder":
                    folder = value
                else:
                    prop.warn(f"lock manager property {key!r} is not used by the reference broker")
                prop.finish()
            properties.finish()
        if not folder:
            raise manager.error("the file-based lock manager needs the property locks-folder", class_name)
        manager.finish()
        return LockManager(class_name, folder, role.opt_str_of("coordination-id"))

    def _scale_down(self, kind: Node, connectors: set[str], discovery: set[str]) -> ScaleDown | None:
        sd = kind.child("scale-down")
        if sd is None:
            return None
        dref = sd.child("discovery-group-ref")
        dg = None
        if dref is not None:
            dg = _known(dref, dref.required_attr("discovery-group-name"), discovery, "discovery-group")
            dref.finish()
        refs: list[str] = []
        cons = sd.child("connectors")
        if cons is not None:
            for c in cons.children("connector-ref"):
                refs.append(_known(c, c.text(), connectors, "connector"))
                c.finish()
            cons.finish()
        scale_down = ScaleDown(
            enabled=sd.bool_of("enabled", True),
            group_name=sd.opt_str_of("group-name"),
            discovery_group_ref=dg,
            connectors=tuple(refs),
        )
        sd.finish()
        return scale_down


# --------------------------------------------------------------------------- helpers


def _known(node: Node, name: str, known: set[str], what: str) -> str:
    if name not in known:
        raise node.error(f"refers to an undefined {what} (defined: {', '.join(sorted(known)) or 'none'})", name)
    return name


def _int_attr(node: Node, attr: str, text: str, ok: Callable[[int], bool], what: str) -> int:
    text = text.strip()
    try:
        value = int(text)
    except ValueError:
        raise node.error(f"attribute '{attr}' must be an integer", text) from None
    if not ok(value):
        raise node.error(f"attribute '{attr}' {what}", text)
    return value


def _bool_attr(node: Node, attr: str, text: str | None, default: bool) -> bool:
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise node.error(f"attribute '{attr}' must be true or false", text)
    return text.strip().lower() == "true"


# <address-setting> children the reference broker reads, with Artemis's readers and validators
_ADDRESS_SETTING_READERS: dict[str, Callable[[Node], object]] = {
    "dead-letter-address": Node.text,
    "expiry-address": Node.text,
    "expiry-delay": lambda n: n.as_long(),
    "redelivery-delay": lambda n: n.as_long(),
    "redelivery-delay-multiplier": lambda n: n.as_float(),
    "max-redelivery-delay": lambda n: n.as_long(),
    "max-delivery-attempts": lambda n: n.as_int(),
    "max-size-bytes": lambda n: n.as_bytes(kind="long"),
    "max-size-messages": lambda n: n.as_long(),
    "page-size-bytes": lambda n: n.as_bytes("gt0"),
    "address-full-policy": lambda n: n.as_enum(AddressFullPolicy),
    "send-to-dla-on-no-route": Node.as_bool,
    "auto-create-queues": Node.as_bool,
    "auto-delete-queues": Node.as_bool,
    "auto-delete-created-queues": Node.as_bool,
    "auto-delete-queues-delay": lambda n: n.as_long("ge0"),
    "auto-delete-queues-message-count": lambda n: n.as_long("-1|ge0"),
    "auto-create-addresses": Node.as_bool,
    "auto-delete-addresses": Node.as_bool,
    "auto-delete-addresses-delay": lambda n: n.as_long("ge0"),
    "default-queue-routing-type": lambda n: n.as_enum(RoutingType),
    "default-address-routing-type": lambda n: n.as_enum(RoutingType),
    "default-max-consumers": lambda n: n.as_int(),
    "default-purge-on-no-consumers": Node.as_bool,
    "default-consumer-window-size": lambda n: n.as_int(),
    "redistribution-delay": lambda n: n.as_long(),
}
