"""Fixtures that run the reference broker as a real process and the stock
Artemis CLI against it (every wait has a deadline)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

START_DEADLINE_S = 30.0
STOP_DEADLINE_S = 15.0
CLI_DEADLINE_S = 180.0
LISTENING = re.compile(r"listening on ([\d.]+):(\d+)")


@dataclass
class RunningBroker:
    process: subprocess.Popen[str]
    host: str
    port: int
    log: list[str]

    @property
    def url(self) -> str:
        return f"tcp://{self.host}:{self.port}"


def start_reference_broker(data: Path, *extra: str) -> RunningBroker:
    process = subprocess.Popen(
        [sys.executable, "-m", "cck.reference", "broker", "--port", "0", "--data", str(data), *extra],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    lines: queue.Queue[str | None] = queue.Queue()
    log: list[str] = []

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            log.append(line)
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=START_DEADLINE_S)
        except queue.Empty:
            process.kill()
            raise AssertionError(f"reference broker did not start within {START_DEADLINE_S}s: {''.join(log)}") from None
        if line is None:
            raise AssertionError(f"reference broker exited at start: {''.join(log)}")
        match = LISTENING.search(line)
        if match:
            return RunningBroker(process, match.group(1), int(match.group(2)), log)


def stop_reference_broker(broker: RunningBroker) -> int:
    if broker.process.poll() is None:
        broker.process.send_signal(signal.SIGTERM)
        try:
            return broker.process.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            broker.process.kill()
            broker.process.wait(timeout=STOP_DEADLINE_S)
            raise AssertionError("reference broker ignored SIGTERM") from None
    return broker.process.returncode


@pytest.fixture
def reference_broker(tmp_path: Path) -> Iterator[RunningBroker]:
    broker = start_reference_broker(tmp_path / "data")
    try:
        yield broker
    finally:
        stop_reference_broker(broker)


@pytest.fixture(scope="session")
def artemis_home() -> Path:
    from cck.conformance.artemis.distribution import ensure_distribution

    return ensure_distribution().home


def artemis_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the stock ``artemis`` CLI of the pinned distribution."""
    env = dict(os.environ, JAVA_ARGS="-Xmx256m")
    return subprocess.run(
        [str(home / "bin" / "artemis"), *args],
        capture_output=True, text=True, timeout=CLI_DEADLINE_S, check=False, env=env,
    )  # fmt: skip
