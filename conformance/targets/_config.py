"""Render a topology node into the files an Artemis instance keeps in ``etc/``.

One template (``fixtures/brokers/broker.xml.j2``) serves both brokers; the security files are
small enough to write here.  Both brokers then read the same ``broker.xml``, ``login.config``,
``artemis-users.properties`` and ``artemis-roles.properties``; with certificate users also
``cert-users.properties`` and ``cert-roles.properties``, and ``bootstrap.xml``'s
``<jaas-security>`` names the certificate domain (an Artemis instance's own file is amended, the
reference broker gets one of its own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jinja2
from lxml import etree

from cck.conformance._data import fixture

from ._topology import NodeSpec, SecuritySpec, Topology

__all__ = [
    "LEGACY_LOCK_MANAGER_CLASS",
    "LOCK_MANAGER_CLASS",
    "TEMPLATE_DIR",
    "EtcFiles",
    "locks_folder",
    "render_bootstrap",
    "render_broker_xml",
    "render_etc",
    "render_login_config",
    "render_roles",
    "render_users",
    "write_etc",
]

#: fixtures/brokers: package data, so an installed kit renders the same template
TEMPLATE_DIR = fixture("brokers")
BROKER_TEMPLATE = "broker.xml.j2"
#: Artemis's file-based lock manager from 2.37.0 (artemis-lockmanager-ri); before, artemis-quorum-ri's
LOCK_MANAGER_CLASS = "org.apache.activemq.artemis.lockmanager.file.FileBasedLockManager"
#: Artemis blocks every producer once the filesystem holding its data is fuller than this (90 % by default, of the
#: whole filesystem: on a shared machine the kit's nodes would stall for what others wrote); a kit node's journal is
#: a few megabytes, so it blocks only on a disk that is really full
MAX_DISK_USAGE = 100
LEGACY_LOCK_MANAGER_CLASS = "org.apache.activemq.artemis.quorum.file.FileBasedPrimitiveManager"
USERS_FILE = "artemis-users.properties"
ROLES_FILE = "artemis-roles.properties"
CERT_USERS_FILE = "cert-users.properties"
CERT_ROLES_FILE = "cert-roles.properties"
#: the JAAS domain of login.config that authenticates a connection by its client certificate
CERTIFICATE_DOMAIN = "cck-certificate"
BOOTSTRAP_FILE = "bootstrap.xml"
_JAAS_SECURITY = re.compile(r"<jaas-security\b[^>]*?/>")
_JAAS = "org.apache.activemq.artemis.spi.core.security.jaas."


@dataclass(frozen=True)
class EtcFiles:
    """File name -> text of everything a node's ``etc/`` needs from the topology."""

    broker_xml: str
    login_config: str
    users: str
    roles: str
    #: TextFileCertificateLoginModule's files (None: no certificate users)
    certificate_users: str | None = None
    certificate_roles: str | None = None

    def items(self) -> list[tuple[str, str]]:
        files = [("broker.xml", self.broker_xml), ("login.config", self.login_config),
                 (USERS_FILE, self.users), (ROLES_FILE, self.roles)]
        if self.certificate_users is not None and self.certificate_roles is not None:
            files += [(CERT_USERS_FILE, self.certificate_users), (CERT_ROLES_FILE, self.certificate_roles)]
        return files


def _environment(template_dir: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir)),
        autoescape=True,  # every value lands in XML text or an attribute
        undefined=jinja2.StrictUndefined,  # a misspelt field must fail, not render empty
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["xmlbool"] = lambda value: "true" if value else "false"
    return env


def _grouped_rules(security: SecuritySpec) -> list[tuple[str, list[tuple[str, str]]]]:
    groups: dict[str, list[tuple[str, str]]] = {}
    for rule in security.effective_rules():
        groups.setdefault(rule.match, []).append((rule.permission, ",".join(rule.roles)))
    return list(groups.items())


def _scanner_attempts(topology: Topology, topology_scanner: bool) -> int | None:
    """The ``<topology-scanner-attempts>`` to render: None leaves it out (the default, or a broker without one)."""
    cluster = topology.cluster
    wanted = cluster.topology_scanner_attempts if cluster else None
    if wanted is None or topology_scanner:
        return wanted
    if wanted != 0:
        raise ValueError(f"topology_scanner_attempts={wanted}: this broker has no topology scanner "
                         "(Artemis has one from 2.41.0); only None or 0 fit it")
    return None


def _locks_folder_of(topology: Topology, node: str) -> Path | None:
    """The locks folder of ``node``'s pair when it has a lock manager."""
    if topology.ha is None or not topology.ha.lock_manager:
        return None
    role = topology.ha.role_of(node)
    if role is None:
        return None
    return locks_folder(topology, node if role[0] == "primary" else role[1])


def _ha_role(topology: Topology, node: str) -> str | None:
    """``primary``, ``backup``, or None for a node in no HA pair."""
    role = topology.ha.role_of(node) if topology.ha is not None else None
    return role[0] if role is not None else None


def locks_folder(topology: Topology, primary: str) -> Path:
    """The locks folder of the pair whose primary is ``primary`` under a lock manager: beside the primary's data
    directory (both servers of a managed pair share the machine, as the file-based lock manager needs)."""
    data = topology.node(primary).data_dir
    assert data is not None, "a resolved topology"
    return data.parent / "locks"


def render_broker_xml(topology: Topology, node: str, *, template_dir: Path = TEMPLATE_DIR,
                      topology_scanner: bool = True, lock_manager_class: str = LOCK_MANAGER_CLASS,
                      max_disk_usage: int | None = MAX_DISK_USAGE) -> str:
    """broker.xml for ``node`` of a resolved topology (ports and data directories set).

    ``topology_scanner``: whether the broker has Artemis's topology scanner (2.41.0+); without it, its
    element is left out (the XSD of older versions does not have it).  ``lock_manager_class``: the
    broker's file-based lock manager (renamed in 2.37.0), for an HA pair under a lock manager.
    ``max_disk_usage``: the ``<max-disk-usage>`` to render (None leaves it out: the reference broker has no disk
    monitor and would warn about the element).

    The result is parsed once with lxml, so a template error surfaces here as a ValueError
    naming the line rather than as a broker that will not start."""
    spec = topology.node(node)
    if not topology.resolved:
        raise ValueError("render a resolved topology (Topology.resolve): ports and data directories must be set")
    assert spec.data_dir is not None
    data = spec.data_dir
    dirs = {"journal": data / "journal", "bindings": data / "bindings", "paging": data / "paging",
            "large_messages": data / "large-messages"}
    peers: list[NodeSpec] = [n for n in topology.nodes if n.name != node]
    cluster = topology.cluster
    names = tuple(n.name for n in topology.nodes)
    static_peers = list(cluster.static_targets(node, names)) if cluster else []
    scale_down = cluster.scale_down_of(node) if cluster else None
    text = _environment(template_dir).get_template(BROKER_TEMPLATE).render(
        node=spec, topology=topology, dirs=dirs, peers=peers, static_peers=static_peers,
        cluster_password=cluster.password_of(node) if cluster else None, rules=_grouped_rules(topology.security),
        scale_down=scale_down,
        scale_down_connectors=scale_down.connectors(names, cluster.discovery) if scale_down and cluster else (),
        scale_down_discovery=scale_down.uses_discovery(cluster.discovery) if scale_down and cluster else False,
        topology_scanner_attempts=_scanner_attempts(topology, topology_scanner),
        ha=topology.ha, ha_role=_ha_role(topology, node),
        peer_urls={peer: url for name, peer, url in cluster.via if name == node} if cluster else {},
        lock_manager_class=lock_manager_class, locks_folder=_locks_folder_of(topology, node),
        max_disk_usage=max_disk_usage,
    )
    try:
        etree.fromstring(text.encode("utf-8"), etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"the rendered broker.xml of node {node!r} is not well-formed: {exc}") from None
    return text


def render_login_config(security: SecuritySpec) -> str:
    """The JAAS ``activemq`` domain: users from the properties files, plus a guest if allowed; with
    certificate users also the certificate domain (TextFileCertificateLoginModule, its own files).

    Written even with security off: Artemis's launcher points JAAS at this file regardless, and
    the users still exist for a case that turns security on in ``extra``."""
    # "sufficient" for both modules when a guest is allowed, so a wrong password still fails
    # over to the guest as on an ``artemis create --allow-anonymous`` instance
    flag = "sufficient" if security.guest_role else "required"
    lines = [
        "activemq {",
        f"   {_JAAS}PropertiesLoginModule {flag}",
        "       reload=false",
        f'       org.apache.activemq.jaas.properties.user="{USERS_FILE}"',
        f'       org.apache.activemq.jaas.properties.role="{ROLES_FILE}";',
    ]
    if security.guest_role:
        lines += [
            f"   {_JAAS}GuestLoginModule sufficient",
            '       org.apache.activemq.jaas.guest.user="guest"',
            f'       org.apache.activemq.jaas.guest.role="{security.guest_role}";',
        ]
    lines.append("};")
    if security.certificate_users:
        lines += [
            f"{CERTIFICATE_DOMAIN} {{",
            f"   {_JAAS}TextFileCertificateLoginModule required",
            "       reload=false",
            f'       org.apache.activemq.jaas.textfiledn.user="{CERT_USERS_FILE}"',
            f'       org.apache.activemq.jaas.textfiledn.role="{CERT_ROLES_FILE}";',
            "};",
        ]
    return "\n".join(["/* Generated by the Core Conformance Kit. */", *lines, ""])


def _escape(text: str, *, key: bool) -> str:
    """java.util.Properties escaping, ASCII only: Artemis loads the files as ISO-8859-1 and the
    reference broker as UTF-8, so \\uXXXX is the one spelling both read the same."""
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif (ch in "=:#!" and key) or (ch == " " and (key or i == 0)):
            out.append("\\" + ch)
        elif ord(ch) > 0x7E or ord(ch) < 0x20:
            data = ch.encode("utf-16-be")
            out.extend(f"\\u{int.from_bytes(data[j:j + 2], 'big'):04x}" for j in range(0, len(data), 2))
        else:
            out.append(ch)
    return "".join(out)


def render_users(security: SecuritySpec) -> str:
    lines = [f"{_escape(u.name, key=True)} = {_escape(u.password, key=False)}" for u in security.users]
    return "\n".join(["# Generated by the Core Conformance Kit: user = password", *lines, ""])


def render_certificate_users(security: SecuritySpec) -> str:
    """TextFileCertificateLoginModule's users file: ``user = subject DN`` (or ``/regex/``)."""
    lines = [f"{_escape(u.name, key=True)} = {_escape(u.dn, key=False)}" for u in security.certificate_users]
    return "\n".join(["# Generated by the Core Conformance Kit: user = certificate subject DN", *lines, ""])


def render_roles(security: SecuritySpec, *, certificate: bool = False) -> str:
    """``role = user,user`` of the users (``certificate``: of the certificate users)."""
    members: dict[str, list[str]] = {}
    for user in security.certificate_users if certificate else security.users:
        for role in user.roles:
            members.setdefault(role, []).append(user.name)
    lines = [f"{_escape(role, key=True)} = {_escape(','.join(names), key=False)}" for role, names in members.items()]
    return "\n".join(["# Generated by the Core Conformance Kit: role = user,user", *lines, ""])


def render_bootstrap(security: SecuritySpec, existing: str | None) -> str | None:
    """``bootstrap.xml`` with the ``<jaas-security>`` the security needs: ``existing`` (an Artemis instance's own)
    with its element replaced, else a file holding that element alone (all the reference broker reads of it).
    None: nothing to write (no certificate users, and no existing file naming a certificate domain)."""
    element = '<jaas-security domain="activemq"/>'
    if security.certificate_users:
        element = f'<jaas-security domain="activemq" certificate-domain="{CERTIFICATE_DOMAIN}"/>'
    if existing is None:
        if not security.certificate_users:
            return None
        return ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
                f'<broker xmlns="http://activemq.apache.org/schema">\n   {element}\n</broker>\n')
    found = _JAAS_SECURITY.search(existing)
    if found is None:
        if security.certificate_users:
            raise ValueError("bootstrap.xml has no <jaas-security .../> element to name the certificate domain in")
        return None
    if not security.certificate_users and "certificate-domain" not in found.group(0):
        return None
    return existing[:found.start()] + element + existing[found.end():]


def render_etc(topology: Topology, node: str, *, template_dir: Path = TEMPLATE_DIR,
               topology_scanner: bool = True, lock_manager_class: str = LOCK_MANAGER_CLASS,
               max_disk_usage: int | None = MAX_DISK_USAGE) -> EtcFiles:
    security = topology.security
    return EtcFiles(
        broker_xml=render_broker_xml(topology, node, template_dir=template_dir, topology_scanner=topology_scanner,
                                     lock_manager_class=lock_manager_class, max_disk_usage=max_disk_usage),
        login_config=render_login_config(security),
        users=render_users(security),
        roles=render_roles(security),
        certificate_users=render_certificate_users(security) if security.certificate_users else None,
        certificate_roles=render_roles(security, certificate=True) if security.certificate_users else None,
    )


def write_etc(topology: Topology, node: str, etc: Path, *, template_dir: Path = TEMPLATE_DIR,
              topology_scanner: bool = True, lock_manager_class: str = LOCK_MANAGER_CLASS,
              max_disk_usage: int | None = MAX_DISK_USAGE) -> Path:
    """Write (replace) the node's configuration files in ``etc``; return the broker.xml path.

    The security files are replaced too, so an instance's own generated users (with hashed
    passwords the reference broker cannot check) never differ from the topology's."""
    etc.mkdir(parents=True, exist_ok=True)
    locks = _locks_folder_of(topology, node)
    if locks is not None:
        locks.mkdir(parents=True, exist_ok=True)  # Artemis's file-based lock manager expects it to exist
    files = render_etc(topology, node, template_dir=template_dir, topology_scanner=topology_scanner,
                       lock_manager_class=lock_manager_class, max_disk_usage=max_disk_usage)
    for name, text in files.items():
        (etc / name).write_text(text, encoding="utf-8")
    bootstrap = etc / BOOTSTRAP_FILE
    amended = render_bootstrap(topology.security,
                               bootstrap.read_text(encoding="utf-8") if bootstrap.exists() else None)
    if amended is not None:
        bootstrap.write_text(amended, encoding="utf-8")
    return etc / "broker.xml"
