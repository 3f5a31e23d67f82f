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


class Launched:
    """A reference broker process whose stderr lines are kept (``log``) and can be waited for."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cck.reference", "broker", *args],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self.log: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, pattern: re.Pattern[str], deadline_s: float = START_DEADLINE_S) -> re.Match[str]:
        """The first line from now on that matches ``pattern``; a process that exits or stays silent past the
        deadline fails the test with its log."""
        while True:
            try:
                line = self._lines.get(timeout=deadline_s)
            except queue.Empty:
                self.process.kill()
                raise AssertionError(f"reference broker printed no {pattern.pattern!r} within {deadline_s}s: "
                                     f"{''.join(self.log)}") from None
            if line is None:
                raise AssertionError(f"reference broker exited waiting for {pattern.pattern!r}: {''.join(self.log)}")
            match = pattern.search(line)
            if match:
                return match

    def running(self) -> RunningBroker:
        """Once it listens: its address."""
        match = self.wait_for(LISTENING)
        return RunningBroker(self.process, match.group(1), int(match.group(2)), self.log)


def start_reference_broker(data: Path, *extra: str) -> RunningBroker:
    return Launched("--port", "0", "--data", str(data), *extra).running()


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
