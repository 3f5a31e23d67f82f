"""Network namespaces for multi-node topologies: each node its own network stack and address.

``Topology(network="netns")`` puts every node in a namespace of its own, joined to the kit's namespace
by a veth pair on one Linux bridge::

    kit (root namespace)  cckXXXXbr 10.231.S.1/24  (multicast snooping off: the bridge floods groups)
        |-- cckXXXXv0 <-> eth0 10.231.S.10  in namespace cckXXXX-node0
        |-- cckXXXXv1 <-> eth0 10.231.S.11  in namespace cckXXXX-node1
        ...

A node's acceptor, connectors and broadcast/discovery groups use its own address, so cluster traffic and
UDP discovery cross real interfaces (a bridge, not loopback); the kit reaches every node through the bridge.
Each namespace has a multicast route (224.0.0.0/4) on its interface, as a network where multicast works
would.  Needs root and iproute2 (``ip``); :func:`netns_unavailable` says why not when it cannot work.
Everything is removed when the target closes (and at interpreter exit if a run is interrupted).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import ipaddress
import os
import secrets
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from ._errors import TargetError
from ._topology import Topology

__all__ = ["NetnsNetwork", "NetnsPlan", "netns_unavailable", "plan_netns"]

#: the /16 the kit's bridges take a /24 from
_POOL = ipaddress.IPv4Network("10.231.0.0/16")
_IP_TIMEOUT_S = 10.0
_live: set[NetnsNetwork] = set()


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    ip = shutil.which("ip")
    if ip is None:
        raise TargetError("network namespaces need iproute2's ip command, which is not installed")
    done = subprocess.run([ip, *args], capture_output=True, text=True, timeout=_IP_TIMEOUT_S, check=False)
    if check and done.returncode != 0:
        raise TargetError(f"ip {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be used here, or ``None``."""
    if os.geteuid() != 0:
        return "network namespaces need root (this run is not root)"
    if shutil.which("ip") is None:
        return "network namespaces need iproute2's ip command"
    probe = f"cck{secrets.token_hex(2)}-probe"
    try:
        _ip("netns", "add", probe)
    except TargetError as exc:
        return f"cannot create a network namespace: {exc}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass(frozen=True)
class NetnsPlan:
    """The names and addresses of one target's namespaces."""

    tag: str  # cck + 4 hex digits: every interface name stays under Linux's 15 characters
    gateway: str  # the bridge's address: the kit's side
    prefix: int
    namespaces: tuple[tuple[str, str, str], ...]  # (node name, namespace, address)

    @property
    def bridge(self) -> str:
        return f"{self.tag}br"

    def namespace_of(self, node: str) -> str:
        return next(ns for name, ns, _ in self.namespaces if name == node)


def _free_subnet() -> ipaddress.IPv4Network:
    used = _ip("-o", "-4", "addr", "show").stdout
    for subnet in _POOL.subnets(new_prefix=24):
        if subnet.network_address == _POOL.network_address:
            continue
        if f" {subnet.network_address + 1}/" not in used:
            return subnet
    raise TargetError(f"no free /24 left in {_POOL} for a network of namespaces")


def plan_netns(topology: Topology) -> tuple[Topology, NetnsPlan]:
    """The topology with every node's host set to its namespace's address, and the plan to build."""
    tag = f"cck{secrets.token_hex(2)}"
    subnet = _free_subnet()
    hosts = list(subnet.hosts())
    namespaces = tuple((n.name, f"{tag}-{n.name}"[:64], str(hosts[9 + i])) for i, n in enumerate(topology.nodes))
    nodes = tuple(dataclasses.replace(n, host=address) for n, (_, _, address) in zip(topology.nodes, namespaces,
                                                                                      strict=True))
    plan = NetnsPlan(tag, str(hosts[0]), subnet.prefixlen, namespaces)
    return dataclasses.replace(topology, nodes=nodes), plan


class NetnsNetwork:
    """The bridge, veth pairs and namespaces of a plan: :meth:`create` once, :meth:`destroy` at the end."""

    def __init__(self, plan: NetnsPlan) -> None:
        self.plan = plan
        self.created = False

    def create(self) -> None:
        plan = self.plan
        _live.add(self)
        self.created = True
        try:
            _ip("link", "add", plan.bridge, "type", "bridge", "mcast_snooping", "0")
            _ip("addr", "add", f"{plan.gateway}/{plan.prefix}", "dev", plan.bridge)
            _ip("link", "set", plan.bridge, "up")
            for index, (_, namespace, address) in enumerate(plan.namespaces):
                outer = f"{plan.tag}v{index}"
                _ip("netns", "add", namespace)
                _ip("link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", namespace)
                _ip("link", "set", outer, "master", plan.bridge, "up")
                _ip("-n", namespace, "addr", "add", f"{address}/{plan.prefix}", "dev", "eth0")
                _ip("-n", namespace, "link", "set", "eth0", "up")
                _ip("-n", namespace, "link", "set", "lo", "up")
                _ip("-n", namespace, "route", "add", "default", "via", plan.gateway)
                _ip("-n", namespace, "route", "add", "224.0.0.0/4", "dev", "eth0")
        except BaseException:
            self.destroy()
            raise

    def wrap(self, node: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the node's namespace (``ip netns exec`` execs it: the pid is the broker's)."""
        ip = shutil.which("ip") or "ip"
        return [ip, "netns", "exec", self.plan.namespace_of(node), *argv]

    def destroy(self) -> None:
        if not self.created:
            return
        for _, namespace, _ in self.plan.namespaces:
            _ip("netns", "del", namespace, check=False)  # takes its veth pair with it
        _ip("link", "del", self.plan.bridge, check=False)
        self.created = False
        _live.discard(self)


@atexit.register
def _remove_leftovers() -> None:
    for network in list(_live):
        with contextlib.suppress(Exception):
            network.destroy()
