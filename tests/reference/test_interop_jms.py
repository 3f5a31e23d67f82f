"""A JMS program on the stock artemis-jms-client (``fixtures/java/jms``) against the reference broker
and, to prove the program itself, against a real Apache Artemis broker of the pinned distribution:
a transacted session (commit and rollback), CLIENT_ACKNOWLEDGE with redelivery after recover, and
XA start/end/prepare, a broker restart (SIGTERM or SIGKILL), then recover and commit."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from conformance.artemis.distribution import Distribution, ensure_distribution

from .conftest import STOP_DEADLINE_S, RunningBroker, artemis_cli, start_reference_broker, stop_reference_broker
from .jms_tool import JmsRun, build_jms, run_jms

pytestmark = pytest.mark.artemis

ARTEMIS_START_DEADLINE_S = 90.0
ARTEMIS_STOP_DEADLINE_S = 60.0
ARTEMIS_ACTIVE = "AMQ221007"  # "Server is now active"

# Every check each scenario must report: a program that silently skips one does not pass.
EXPECTED_CHECKS: dict[str, set[str]] = {
    "transacted": {
        "rolled-back-sends-invisible", "committed-sends-delivered", "first-delivery-flags",
        "rollback-redelivers-same", "redelivered-flags", "nothing-after-commit", "queue-empty-fresh-consumer",
    },
    "client-ack": {
        "first-delivery", "first-delivery-flags", "recover-redelivers-same", "redelivered-flag",
        "nothing-after-ack", "acked-gone-fresh-consumer",
    },
    "xa-prepare": {"xid", "prepare", "prepared-sends-invisible"},
    "xa-recover-commit": {
        "recover-finds-prepared", "commit", "committed-messages-delivered", "messages-durable", "nothing-more",
        "no-longer-in-doubt",
    },
}  # fmt: skip


class Broker(Protocol):
    """A broker under test that keeps its data across a restart."""

    @property
    def url(self) -> str: ...

    def stop(self, sig: signal.Signals) -> None: ...

    def start(self) -> None: ...

    def diagnostics(self) -> str: ...


class ReferenceTarget:
    def __init__(self, data: Path) -> None:
        self._data = data
        self._broker: RunningBroker | None = None
        self._logs: list[str] = []

    @property
    def url(self) -> str:
        assert self._broker is not None, "reference broker not running"
        return self._broker.url

    def start(self) -> None:
        self._broker = start_reference_broker(self._data)
        self._logs.append(f"--- reference broker on {self._broker.url}\n")

    def stop(self, sig: signal.Signals) -> None:
        broker, self._broker = self._broker, None
        if broker is None:
            return
        self._logs.extend(broker.log)
        if sig == signal.SIGKILL:
            broker.process.kill()
            broker.process.wait(timeout=STOP_DEADLINE_S)
        else:
            code = stop_reference_broker(broker)
            assert code == 0, f"reference broker exited with {code} on SIGTERM:\n{''.join(broker.log)[-4000:]}"

    def diagnostics(self) -> str:
        current = self._broker.log if self._broker is not None else []
        return "".join([*self._logs, *current])[-6000:]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ArtemisTarget:
    """A real broker instance made by ``artemis create`` and started with ``artemis run``."""

    def __init__(self, home: Path, instance: Path) -> None:
        self._instance = instance
        self._port = _free_port()
        created = artemis_cli(
            home, "create", str(instance), "--user", "admin", "--password", "admin", "--allow-anonymous",
            "--silent", "--no-web", "--nio", "--no-autotune", "--no-amqp-acceptor", "--no-mqtt-acceptor",
            "--no-stomp-acceptor", "--no-hornetq-acceptor", f"--default-port={self._port}",
        )  # fmt: skip
        assert created.returncode == 0, f"artemis create failed:\n{created.stdout}\n{created.stderr}"
        self._process: subprocess.Popen[str] | None = None
        self._log: list[str] = []

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self._port}"

    def start(self) -> None:
        env = dict(os.environ, JAVA_ARGS="-Xms64m -Xmx512m")
        process = subprocess.Popen(
            [str(self._instance / "bin" / "artemis"), "run"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, env=env,
        )  # fmt: skip
        self._process = process
        lines: queue.Queue[str | None] = queue.Queue()
        self._log.append(f"--- artemis run on port {self._port}\n")

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                self._log.append(line)
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=ARTEMIS_START_DEADLINE_S)
            except queue.Empty:
                process.kill()
                process.wait(timeout=ARTEMIS_STOP_DEADLINE_S)
                raise AssertionError(
                    f"Artemis did not start within {ARTEMIS_START_DEADLINE_S}s:\n{self.diagnostics()}"
                ) from None
            if line is None:
                process.wait(timeout=ARTEMIS_STOP_DEADLINE_S)
                raise AssertionError(f"Artemis exited at start ({process.returncode}):\n{self.diagnostics()}")
            if ARTEMIS_ACTIVE in line:
                return

    def stop(self, sig: signal.Signals) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(sig)
        try:
            process.wait(timeout=ARTEMIS_STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=ARTEMIS_STOP_DEADLINE_S)
            raise AssertionError(f"Artemis ignored {sig.name} for {ARTEMIS_STOP_DEADLINE_S}s") from None

    def diagnostics(self) -> str:
        return "".join(self._log)[-6000:]


@pytest.fixture(scope="module")
def dist() -> Distribution:
    return ensure_distribution()


@pytest.fixture(scope="module")
def jms_classes(dist: Distribution) -> Path:
    return build_jms(dist)


@pytest.fixture(params=["reference", "artemis"])
def broker(request: pytest.FixtureRequest, tmp_path: Path, dist: Distribution) -> Iterator[Broker]:
    target: ReferenceTarget | ArtemisTarget
    if request.param == "reference":
        target = ReferenceTarget(tmp_path / "data")
    else:
        target = ArtemisTarget(dist.home, tmp_path / "artemis-instance")
    target.start()
    try:
        yield target
    finally:
        target.stop(signal.SIGKILL)


def _queue_name() -> str:
    return f"jms.interop.{uuid.uuid4().hex[:10]}"


def assert_all_ok(run: JmsRun, broker: Broker, *scenarios: str) -> None:
    """Every check ok, none missing, exit status 0; the message lists the failing lines first."""
    message = f"{' '.join(scenarios)} against {broker.url}\n{run.report()}\nbroker log (tail):\n{broker.diagnostics()}"
    assert not run.failed(), message
    for scenario in scenarios:
        reported = {c.check for c in run.checks if c.scenario == scenario}
        missing = EXPECTED_CHECKS[scenario] - reported
        assert not missing, f"{scenario}: checks never reported: {sorted(missing)}\n{message}"
    assert run.returncode == 0, message


@pytest.mark.parametrize("scenario", ["transacted", "client-ack"])
def test_jms_local_scenarios(broker: Broker, dist: Distribution, jms_classes: Path, scenario: str) -> None:
    run = run_jms(dist, jms_classes, broker.url, _queue_name(), scenario)
    assert_all_ok(run, broker, scenario)


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_jms_xa_prepare_restart_recover_commit(
    broker: Broker, dist: Distribution, jms_classes: Path, stop_signal: signal.Signals
) -> None:
    destination = _queue_name()
    prepared = run_jms(dist, jms_classes, broker.url, destination, "xa-prepare")
    assert_all_ok(prepared, broker, "xa-prepare")
    xid = prepared.check("xa-prepare", "xid")
    assert xid is not None, prepared.report()

    broker.stop(stop_signal)
    broker.start()

    recovered = run_jms(dist, jms_classes, broker.url, destination, "xa-recover-commit", xid=xid.detail)
    assert_all_ok(recovered, broker, "xa-recover-commit")
