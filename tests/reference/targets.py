"""Brokers the tests run against and control: the reference broker as a process, and a real Apache
Artemis instance of the pinned distribution (``artemis create`` + ``artemis run``).  Both keep their
data across stop/start, so restart tests work on either.  Every wait has a deadline."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import threading
from pathlib import Path
from typing import Protocol

from .conftest import STOP_DEADLINE_S, RunningBroker, artemis_cli, start_reference_broker, stop_reference_broker

__all__ = ["ARTEMIS_ACTIVE", "ArtemisTarget", "Broker", "ReferenceTarget"]

ARTEMIS_START_DEADLINE_S = 90.0
ARTEMIS_STOP_DEADLINE_S = 60.0
ARTEMIS_ACTIVE = "AMQ221007"  # "Server is now active"


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
