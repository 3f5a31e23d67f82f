"""A shared-store pair of reference brokers as real processes, for the tests that fail over between them: the
two broker.xml files (one store, a cluster connection between the two, master and slave), the pair started
primary first, a kill -9 and a graceful stop (SIGTERM)."""

from __future__ import annotations

import re
import signal
import socket
from pathlib import Path

from .conftest import STOP_DEADLINE_S, Launched

__all__ = ["ANNOUNCED", "DEADLINE_S", "LISTENING", "WAITING", "kill", "pair", "stop", "write_configs"]

WAITING = re.compile(r"waiting for the shared store")
LISTENING = re.compile(r"listening")
ANNOUNCED = re.compile(r"backup announced")
DEADLINE_S = 30.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _broker_xml(name: str, role: str, own: int, peer: int, store: Path, failover_on_shutdown: bool) -> str:
    return f"""<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
  <name>{name}</name>
  <security-enabled>false</security-enabled>
  <journal-directory>{store}/journal</journal-directory>
  <bindings-directory>{store}/bindings</bindings-directory>
  <cluster-user>pair</cluster-user><cluster-password>pair-secret</cluster-password>
  <acceptors><acceptor name="core">tcp://127.0.0.1:{own}?protocols=CORE</acceptor></acceptors>
  <connectors>
    <connector name="self">tcp://127.0.0.1:{own}</connector>
    <connector name="peer">tcp://127.0.0.1:{peer}</connector>
  </connectors>
  <cluster-connections><cluster-connection name="pair">
    <connector-ref>self</connector-ref><retry-interval>200</retry-interval>
    <static-connectors><connector-ref>peer</connector-ref></static-connectors>
  </cluster-connection></cluster-connections>
  <ha-policy><shared-store><{role}>
    <failover-on-shutdown>{str(failover_on_shutdown).lower()}</failover-on-shutdown>
  </{role}></shared-store></ha-policy>
</core></configuration>"""


def write_configs(tmp_path: Path, *, failover_on_shutdown: bool = False) -> tuple[int, int]:
    store = tmp_path / "store"
    ports = _free_port(), _free_port()
    for name, role, own, peer in (("primary", "master", ports[0], ports[1]), ("backup", "slave", ports[1], ports[0])):
        xml = _broker_xml(name, role, own, peer, store, failover_on_shutdown)
        (tmp_path / f"{name}.xml").write_text(xml, encoding="utf-8")
    return ports


def pair(tmp_path: Path) -> tuple[Launched, Launched]:
    """The primary (serving) and its backup (waiting, announced: the primary has taken the announcement in)."""
    primary = Launched("--config", str(tmp_path / "primary.xml"))
    primary.wait_for(LISTENING)
    backup = Launched("--config", str(tmp_path / "backup.xml"))
    backup.wait_for(WAITING)
    primary.wait_for(ANNOUNCED)  # before the client connects: its first topology has the pair
    return primary, backup


def kill(*launched: Launched) -> None:
    for one in launched:
        one.process.kill()
        one.process.wait(timeout=STOP_DEADLINE_S)


def stop(launched: Launched) -> int:
    """A graceful stop (SIGTERM); the exit code."""
    launched.process.send_signal(signal.SIGTERM)
    return launched.process.wait(timeout=STOP_DEADLINE_S)
