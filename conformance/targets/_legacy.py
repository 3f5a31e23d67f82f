"""Older core-protocol servers as targets: HornetQ 2.4.7.Final (``hornetq``) and Apache Artemis 1.5.6 (``artemis1``),
each node an embedded server started by the kit's launcher (``_legacy_launch``) from a JSON configuration rendered
from the topology node.

Only what both old servers can be told without XML is rendered: the acceptor (TLS too), the data directory,
persistence, security (users, the security settings with the permissions the server has, a guest, certificate users
on Artemis 1.5.6), the connection-TTL override and check period, the transaction timeout, the ID cache, the declared
queues, the dead-letter, expiry and redelivery settings, and a cluster (connectors, a cluster connection over static
connectors or UDP discovery) with HA pairs on a shared store or by replication.  A topology asking for more
(scale-down, a lock manager, elements or settings the old servers do not have) is UNSUPPORTED, naming what;
auto-create and auto-delete settings are left out (neither server creates core queues on demand: cases create
theirs), and so are grants of permissions the server does not have (``LegacyServer.permissions``: it checks none of
them; the target's ``permissions`` tells the cases).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, ClassVar

from ._base import ALL_CAPABILITIES, CONFIG, STOP_DEADLINE_S, ManagedTarget, ProcessNode
from ._errors import NodeStartError, UnsupportedByTarget
from ._legacy_launch import LEGACY_SERVERS, READY_PREFIX, LegacyError, LegacyLaunch, ensure_legacy, legacy_argv
from ._ports import PortSource, free_ports
from ._topology import NodeSpec, Topology

__all__ = ["LEGACY_START_DEADLINE_S", "LEGACY_TARGETS", "Artemis1Target", "HornetQTarget", "LegacyNode", "LegacyTarget",
           "legacy_config"]

LEGACY_START_DEADLINE_S = 60.0
#: address-setting elements and the launcher's keys for them (the values: milliseconds where the key says so)
_SETTINGS = {
    "dead-letter-address": "dead_letter_address",
    "expiry-address": "expiry_address",
    "max-delivery-attempts": "max_delivery_attempts",
    "redelivery-delay": "redelivery_delay_ms",
    "expiry-delay": "expiry_delay_ms",
    "send-to-dla-on-no-route": "send_to_dla_on_no_route",
    "redistribution-delay": "redistribution_delay_ms",
}
#: settings the old servers lack that change nothing for a case that creates its queues itself
_IGNORED = {"auto-create-queues", "auto-create-addresses", "auto-delete-queues", "auto-delete-addresses"}
_NUMERIC = {"max_delivery_attempts", "redelivery_delay_ms", "expiry_delay_ms", "redistribution_delay_ms"}
#: HornetQ 2.4.7 checks connection TTLs every 2 s, fixed (RemotingServiceImpl); the topology's default is the same
HORNETQ_TTL_CHECK_MS = 2000


def _refuse(kind: str, what: str) -> UnsupportedByTarget:
    return UnsupportedByTarget(kind, CONFIG, ALL_CAPABILITIES - {CONFIG}, f"configure {what} (the kit's launcher "
                               f"for {LEGACY_SERVERS[kind].coordinates} has no such setting)")


def _lacks(kind: str, what: str, why: str) -> UnsupportedByTarget:
    """What the server itself does not have (not a gap of the launcher)."""
    return UnsupportedByTarget(kind, CONFIG, ALL_CAPABILITIES - {CONFIG},
                               f"configure {what}: {LEGACY_SERVERS[kind].coordinates} has none ({why})")


def legacy_config(kind: str, topology: Topology, node: str) -> dict[str, Any]:
    """The launcher's JSON configuration for ``node`` of a resolved topology; UnsupportedByTarget for what the old
    server cannot be told."""
    spec = topology.node(node)
    # the cluster first: what a clustered case is about (its load balancing, its HA policy) is what to name
    clustered = _cluster(kind, topology, node) if topology.cluster is not None else {}
    if kind == "hornetq" and spec.connection_ttl_check_interval_ms != HORNETQ_TTL_CHECK_MS:
        raise _refuse(kind, f"a connection-TTL check every {spec.connection_ttl_check_interval_ms} ms (HornetQ "
                            f"checks every {HORNETQ_TTL_CHECK_MS} ms)")
    extra = dict(spec.extra)
    persist_count = extra.pop("persist-delivery-count-before-delivery", "false")
    if extra:
        raise _refuse(kind, f"<{next(iter(extra))}>")
    security = topology.security
    settings: dict[str, dict[str, Any]] = {}
    for setting in topology.address_settings:
        values: dict[str, Any] = {}
        for element, text in setting.values:
            if element in _IGNORED:
                continue
            key = _SETTINGS.get(element)
            if key is None:
                raise _refuse(kind, f"address setting <{element}>")
            values[key] = int(text) if key in _NUMERIC else text == "true" if key == "send_to_dla_on_no_route" \
                else text
        settings[setting.match] = values
    queues = [{"address": address.name, "name": queue.name, "durable": queue.durable, "filter": queue.filter}
              for address in topology.addresses for queue in address.queues]
    config: dict[str, Any] = {
        "name": node, "host": spec.host, "port": spec.port, "data_dir": str(spec.data_dir),
        "persistence": spec.persistence,
        "security_enabled": security.enabled,
        "users": [{"name": u.name, "password": u.password, "roles": list(u.roles)} for u in security.users],
        "connection_ttl_override_ms": spec.connection_ttl_override_ms,
        "connection_ttl_check_interval_ms": spec.connection_ttl_check_interval_ms,
        "transaction_timeout_ms": spec.transaction_timeout_ms, "id_cache_size": spec.id_cache_size,
        "persist_delivery_count_before_delivery": persist_count == "true",
        "queues": queues, "address_settings": settings,
    }
    return config | _security(kind, topology) | clustered


def _security(kind: str, topology: Topology) -> dict[str, Any]:
    """The security settings (match -> role -> the permissions granted that the server has), the guest role, TLS
    and the certificate users (keys ``security_settings``, ``guest_role``, ``tls``, ``certificate_users``)."""
    security, tls = topology.security, topology.tls
    if security.certificate_users and kind == "hornetq":
        raise _lacks(kind, "certificate login", "SecurityStoreImpl.authenticate takes a user name and password only; "
                                                "the CertificateLoginModule came with Artemis 1.2.0, ARTEMIS-261")
    patterns = [u.name for u in security.certificate_users if len(u.dn) > 1 and u.dn[0] == u.dn[-1] == "/"]
    if patterns:
        raise _lacks(kind, f"certificate users matched by a regular expression ({', '.join(patterns)})",
                     "its TextFileCertificateLoginModule matches the subject exactly; /regex/ came with Artemis "
                     "2.6.0, ARTEMIS-1740")
    queues = sorted({rule.match for rule in security.effective_rules() if "::" in rule.match})
    if queues:
        checked = "the address only" if kind == "hornetq" else "the address, then <address>.<queue>"
        raise _lacks(kind, f"security settings on a fully qualified queue name ({', '.join(queues)})",
                     f"ServerSessionImpl.createConsumer checks {checked}; address::queue matches came with Artemis "
                     f"2.15.0, ARTEMIS-2872")
    has = LEGACY_SERVERS[kind].permissions
    settings: dict[str, dict[str, list[str]]] = {}
    for rule in security.effective_rules():
        # every role of a rule keeps its place in the match, granted nothing when the server lacks the permission:
        # the match still decides for its addresses (nothing is inherited from a less specific one)
        roles = settings.setdefault(rule.match, {})
        for role in rule.roles:
            granted = roles.setdefault(role, [])
            if rule.permission in has and rule.permission not in granted:
                granted.append(rule.permission)
    return {
        "security_settings": settings, "guest_role": security.guest_role,
        "tls": None if tls is None else {
            "keystore": str(tls.keystore), "password": tls.password,
            "truststore": None if tls.client_truststore is None else str(tls.client_truststore)},
        "certificate_users": [{"name": u.name, "dn": u.dn, "roles": list(u.roles)}
                              for u in security.certificate_users],
    }


def _cluster(kind: str, topology: Topology, node: str) -> dict[str, Any]:
    """The connectors, cluster connection and HA policy of ``node`` (keys ``connectors``, ``cluster``, ``ha``)."""
    cluster = topology.cluster
    assert cluster is not None
    if cluster.scale_down and kind == "hornetq":
        raise _refuse(kind, "scale-down (Artemis 1.0.0+)")
    if cluster.message_load_balancing == "OFF_WITH_REDISTRIBUTION":
        raise _refuse(kind, "message-load-balancing OFF_WITH_REDISTRIBUTION (added in Artemis 2.x)")
    if kind == "hornetq" and cluster.message_load_balancing == "OFF":
        raise _refuse(kind, "message-load-balancing OFF (HornetQ 2.4.7 only has forward-when-no-consumers, and "
                            "its cluster connection always binds remote queues)")
    if cluster.topology_scanner_attempts not in (None, 0):
        raise _refuse(kind, "a topology scanner (Artemis 2.41.0+)")
    names = tuple(n.name for n in topology.nodes)
    via = {peer: url for owner, peer, url in cluster.via if owner == node}
    connectors: dict[str, dict[str, Any]] = {}
    for other in topology.nodes:
        host, port = other.host, other.port
        if other.name in via:
            host, _, port_text = via[other.name].removeprefix("tcp://").rpartition(":")
            port = int(port_text)
        connectors[other.name] = {"host": host.strip("[]"), "port": port}
    discovery = None
    if cluster.discovery == "udp":
        discovery = {"group_address": cluster.group_address, "group_port": cluster.group_port,
                     "local_bind_address": topology.node(node).host,
                     "broadcast_period_ms": cluster.broadcast_period_ms,
                     "refresh_timeout_ms": cluster.refresh_timeout_ms}
    rendered: dict[str, Any] = {"connectors": connectors, "cluster": {
        "name": cluster.name, "connector": node,
        "static_connectors": list(cluster.static_targets(node, names)) if discovery is None else None,
        "discovery": discovery, "message_load_balancing": cluster.message_load_balancing,
        "max_hops": cluster.max_hops, "retry_interval_ms": cluster.retry_interval_ms,
        "retry_interval_multiplier": cluster.retry_interval_multiplier,
        "max_retry_interval_ms": cluster.max_retry_interval_ms, "reconnect_attempts": cluster.reconnect_attempts,
        "initial_connect_attempts": cluster.initial_connect_attempts, "user": cluster.user,
        "password": cluster.password_of(node), "check_period_ms": cluster.check_period_ms,
        "connection_ttl_ms": cluster.connection_ttl_ms,
        "allow_direct_connections_only": cluster.allow_direct_connections_only,
    }}
    scale_down = cluster.scale_down_of(node)
    if scale_down is not None:  # a live-only policy with <scale-down>, as broker.xml.j2 renders it
        rendered["scale_down"] = {"enabled": scale_down.enabled, "group_name": scale_down.group_name,
                                  "connectors": list(scale_down.connectors(names, cluster.discovery)),
                                  "discovery": scale_down.uses_discovery(cluster.discovery)}
    ha = topology.ha
    role = ha.role_of(node) if ha is not None else None
    if ha is not None and role is not None:
        if ha.lock_manager:
            raise _refuse(kind, "a pluggable lock manager (Artemis 2.x)")
        if ha.transparent_resume:
            raise _refuse(kind, "transparent resume (the reference broker's)")
        rendered["ha"] = {"policy": ha.policy, "role": role[0], "allow_failback": ha.allow_failback,
                          "failover_on_shutdown": ha.failover_on_shutdown,
                          "check_for_live_server": ha.check_for_live_server}
    return rendered


class LegacyNode(ProcessNode):
    ready = re.compile(rf"{re.escape(READY_PREFIX)}(\S+):(\d+)")
    # an HA backup, passive (shared store: waiting for the lock; replication: announced to its primary), and a
    # replication backup that holds its primary's state: the launcher's own lines
    passive = re.compile(r"cck legacy server waiting as backup")
    synced = re.compile(r"cck legacy server backup synchronised")
    launch_label = "legacy server"

    def __init__(self, spec: NodeSpec, topology: Topology, node_dir: Path, *, kind: str, start_deadline_s: float,
                 stop_deadline_s: float) -> None:
        super().__init__(spec, topology, node_dir, start_deadline_s=start_deadline_s, stop_deadline_s=stop_deadline_s)
        self.kind = kind
        self.config_file = node_dir / "server.json"
        self._launch: LegacyLaunch | None = None

    def _prepare(self) -> None:
        try:
            self._launch = ensure_legacy(self.kind)
        except LegacyError as exc:
            raise NodeStartError(self.name, f"{LEGACY_SERVERS[self.kind].coordinates} is not available: {exc}",
                                 "") from exc
        self.config_file.write_text(json.dumps(legacy_config(self.kind, self.topology, self.name), indent=2),
                                    encoding="utf-8")

    def _argv(self) -> list[str]:
        assert self._launch is not None, "prepared before the first start"
        return legacy_argv(self._launch, self.config_file)

    def _check_ready(self, match: re.Match[str], startup: str) -> None:
        if int(match.group(2)) != self.spec.port:
            raise NodeStartError(self.name, f"listens on port {match.group(2)}, not {self.spec.port}", startup)


class LegacyTarget(ManagedTarget):
    """Every node of the topology as an embedded server of ``kind`` under ``workdir/<node>``."""

    kind: ClassVar[str]

    def __init__(self, topology: Topology | None = None, workdir: Path | str = ".", *,
                 start_deadline_s: float = LEGACY_START_DEADLINE_S,
                 stop_deadline_s: float = STOP_DEADLINE_S, ports: PortSource = free_ports) -> None:
        self._start_deadline_s = start_deadline_s
        self._stop_deadline_s = stop_deadline_s
        server = LEGACY_SERVERS[self.kind]
        super().__init__(server.version, server.protocol_version, topology or Topology(), Path(workdir), ports=ports)
        for spec in self.topology.nodes:  # refused before any process starts: UNSUPPORTED, not a failed start
            legacy_config(self.kind, self.topology, spec.name)

    def _make_node(self, spec: NodeSpec, node_dir: Path) -> LegacyNode:
        return LegacyNode(spec, self.topology, node_dir, kind=self.kind, start_deadline_s=self._start_deadline_s,
                          stop_deadline_s=self._stop_deadline_s)


class HornetQTarget(LegacyTarget):
    """HornetQ 2.4.7.Final (core protocol 124)."""

    name = kind = "hornetq"
    permissions = LEGACY_SERVERS["hornetq"].permissions


class Artemis1Target(LegacyTarget):
    """Apache Artemis 1.5.6 (core protocol 128)."""

    name = kind = "artemis1"
    permissions = LEGACY_SERVERS["artemis1"].permissions


LEGACY_TARGETS: dict[str, type[LegacyTarget]] = {t.kind: t for t in (HornetQTarget, Artemis1Target)}
