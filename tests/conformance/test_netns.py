"""Network namespaces for multi-node topologies (conformance/targets/_netns.py)."""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cck.conformance.targets import Topology
from cck.conformance.targets._errors import TargetError
from cck.conformance.targets._netns import NetnsNetwork, netns_unavailable, plan_netns
from cck.conformance.targets._reference import ReferenceTarget

UNAVAILABLE = netns_unavailable()
LISTENER = ("import socket, sys; s = socket.create_server((sys.argv[1], 0)); print(s.getsockname()[1], flush=True); "
            "c, _ = s.accept(); c.sendall(b'ok'); c.close()")


def _greeting(network: NetnsNetwork, node: str, address: str) -> bytes:
    """Connect from the kit's namespace to a one-shot listener started in ``node``'s namespace."""
    with subprocess.Popen(network.wrap(node, [sys.executable, "-c", LISTENER, address]), stdout=subprocess.PIPE,
                          text=True) as listener:
        try:
            assert listener.stdout is not None
            port = int(listener.stdout.readline())
            with socket.create_connection((address, port), timeout=5.0) as connection:
                return connection.recv(2)
        finally:
            listener.wait(timeout=10.0)


def test_a_plan_gives_each_node_an_address_and_a_namespace_on_one_subnet() -> None:
    topology, plan = plan_netns(Topology.cluster_of(3))
    subnet = ipaddress.ip_network(f"{plan.gateway}/{plan.prefix}", strict=False)
    hosts = [n.host for n in topology.nodes]
    assert len(set(hosts)) == 3
    assert all(ipaddress.ip_address(h) in subnet for h in hosts)
    assert plan.gateway not in hosts
    assert [name for name, _, _ in plan.namespaces] == ["node0", "node1", "node2"]
    assert all(len(f"{plan.tag}v{i}") <= 15 and len(plan.bridge) <= 15 for i in range(3))
    assert plan.namespace_of("node1") != plan.namespace_of("node2")


def test_an_unknown_network_is_refused() -> None:
    with pytest.raises(ValueError, match="'wifi' is not 'loopback' or 'netns'"):
        Topology(network="wifi")  # type: ignore[arg-type]


def test_a_target_refuses_namespaces_it_cannot_make_with_the_reason(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(TargetError, match="network 'netns': network namespaces need root"):
        ReferenceTarget(dataclasses.replace(Topology.cluster_of(2), network="netns"), tmp_path)


@pytest.mark.skipif(UNAVAILABLE is not None, reason=f"network namespaces unavailable: {UNAVAILABLE}")
def test_the_network_is_built_and_removed_and_reaches_each_namespace() -> None:
    _, plan = plan_netns(Topology.cluster_of(2))
    network = NetnsNetwork(plan)
    network.create()
    try:
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
        assert all(ns in listed for _, ns, _ in plan.namespaces)
        for node, _, address in plan.namespaces:  # the kit reaches a listener inside every namespace
            assert _greeting(network, node, address) == b"ok"
        assert network.wrap("node0", ["true"])[-4:] == ["netns", "exec", plan.namespace_of("node0"), "true"]
    finally:
        network.destroy()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert not any(ns in listed for _, ns, _ in plan.namespaces)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    assert plan.bridge not in links
