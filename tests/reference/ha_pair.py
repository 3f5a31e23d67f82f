"""A pair of reference brokers as real processes, for the tests that fail over between them: the two broker.xml
files (a cluster connection between the two, master and slave; one store, or with replication one each), the pair
started primary first, a kill -9 and a graceful stop (SIGTERM)."""

from __future__ import annotations

import re
import signal
import socket
from pathlib import Path

from cck.reference.client import Session

from .conftest import STOP_DEADLINE_S, Launched

__all__ = ["ANNOUNCED", "DEADLINE_S", "LISTENING", "WAITING", "kill", "pair", "received", "stop", "write_configs"]

WAITING = re.compile(r"waiting for the shared store|waiting as the replication backup")
LISTENING = re.compile(r"listening")
ANNOUNCED = re.compile(r"backup announced")
DEADLINE_S = 30.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _policy(policy: str, role: str, failover_on_shutdown: bool) -> str:
    if policy == "shared-store":
        return (f"<shared-store><{role}><failover-on-shutdown>{str(failover_on_shutdown).lower()}"
                f"</failover-on-shutdown></{role}></shared-store>")
    inner = "<check-for-live-server>true</check-for-live-server>" if role == "master" else \
        "<allow-failback>true</allow-failback>"
    return f"<replication><{role}>{inner}</{role}></replication>"


def _broker_xml(name: str, role: str, own: int, peer: int, store: Path, failover_on_shutdown: bool,
                policy: str) -> str:
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
  <ha-policy>{_policy(policy, role, failover_on_shutdown)}</ha-policy>
</core></configuration>"""


def write_configs(tmp_path: Path, *, failover_on_shutdown: bool = False,
                  policy: str = "shared-store") -> tuple[int, int]:
    """``policy``: ``shared-store`` (one store) or ``replication`` (a store each; check-for-live-server on the
    primary, allow-failback on the backup)."""
    ports = _free_port(), _free_port()
    for name, role, own, peer in (("primary", "master", ports[0], ports[1]), ("backup", "slave", ports[1], ports[0])):
        store = tmp_path / ("store" if policy == "shared-store" else f"store-{name}")
        xml = _broker_xml(name, role, own, peer, store, failover_on_shutdown, policy)
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


async def received(session: Session, count: int) -> list[int]:
    """The ``seq`` of every message on queue ``ha`` (each acknowledged): ``count`` of them, each within
    DEADLINE_S, then whatever more comes before 0.5 s of quiet; the consumer is closed again."""
    consumer = await session.create_consumer("ha")
    session.start()
    got: list[int] = []
    while (delivery := await consumer.receive(DEADLINE_S if len(got) < count else 0.5)) is not None:
        got.append(int(str(delivery.message.properties.get("seq"))))
        await consumer.acknowledge(delivery)
    await consumer.close()
    return got
