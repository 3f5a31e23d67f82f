"""A broker as an operating-system process: start it, watch its log for the ready line, signal it.

Each broker runs in its own session (process group) so a kill reaches the JVM and anything it
spawned, and every process still running when the interpreter exits is killed (atexit), so an
aborted test run leaves no broker holding a port.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from ._forkserver import ForkedProcess, ForkServer

__all__ = ["BrokerProcess", "ExitedEarly", "NotReady", "count_launch", "launch_counts"]

LOG_LINES_KEPT = 5000

_running: set[BrokerProcess] = set()
_running_lock = threading.Lock()
# processes launched in this interpreter, by label: what a run spends most of its time on is starting
# brokers (a JVM takes seconds), so the run reports how many it started
_launched: collections.Counter[str] = collections.Counter()


def launch_counts() -> dict[str, int]:
    """How many broker processes (and helper runs such as ``artemis create``) this interpreter launched, by label."""
    with _running_lock:
        return dict(_launched)


def count_launch(label: str) -> None:
    """Count one launch of ``label`` (for processes not run as a :class:`BrokerProcess`)."""
    with _running_lock:
        _launched[label] += 1


class NotReady(Exception):
    """The ready line did not appear within the deadline."""


class ExitedEarly(Exception):
    def __init__(self, returncode: int) -> None:
        self.returncode = returncode
        super().__init__(f"exited with code {returncode} before it was ready")


class BrokerProcess:
    """One run of a broker: its Popen, a thread copying its output to a log file and a bounded
    in-memory tail, and an event set when a line matches ``ready``."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        ready: re.Pattern[str],
        log_file: Path,
        tail: collections.deque[str],
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        label: str = "broker",
        fork_server: ForkServer | None = None,
    ) -> None:
        self.argv = tuple(argv)
        self._ready_pattern = ready
        self._tail = tail
        self.ready_match: re.Match[str] | None = None
        self.startup: list[str] = []  # this run's lines up to the ready line
        self._ready = threading.Event()
        #: this run's lines after the ready line, for :meth:`wait_line` (a backup that becomes active later)
        self._later: list[str] = []
        self._more = threading.Condition()
        self._ended = threading.Event()
        self._finished = False
        log_file.parent.mkdir(parents=True, exist_ok=True)
        self._log: IO[str] = log_file.open("a", encoding="utf-8")
        self._note(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} start: {' '.join(self.argv)}\n")
        self.popen: subprocess.Popen[str] | ForkedProcess
        try:
            forked = self._fork(fork_server, cwd, env)
            if forked is not None:
                self.popen = forked
            else:
                self.popen = subprocess.Popen(
                    list(self.argv), cwd=cwd, env=None if env is None else dict(env),
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    text=True, encoding="utf-8", errors="replace", bufsize=1,
                    start_new_session=True,  # own process group: killpg reaches the JVM behind a launcher script
                )  # fmt: skip
        except OSError:
            self._log.close()
            raise
        with _running_lock:
            _running.add(self)
            _launched[label] += 1
        self._pump = threading.Thread(target=self._copy_output, name=f"log {self.argv[0]}", daemon=True)
        self._pump.start()

    def _fork(self, server: ForkServer | None, cwd: Path | None, env: Mapping[str, str] | None) -> ForkedProcess | None:
        """The broker forked by ``server`` when it runs this command line; None to launch it as a process of its own
        (also when the server failed: the broker then starts the slow way, not at all is worse)."""
        if server is None or not server.handles(self.argv):
            return None
        try:
            return server.spawn(self.argv, cwd=cwd, env=env)
        except OSError as exc:
            self._note(f"--- the fork server failed ({exc}); starting the broker as a process of its own\n")
            return None

    def _note(self, line: str) -> None:
        self._tail.append(line)
        with contextlib.suppress(ValueError):  # closed after the process ended
            self._log.write(line)
            self._log.flush()

    def _copy_output(self) -> None:
        stream = self.popen.stdout
        assert stream is not None
        try:
            for line in stream:
                self._note(line)
                if self.ready_match is None:
                    self.startup.append(line)
                    match = self._ready_pattern.search(line)
                    if match:
                        self.ready_match = match
                        self._ready.set()
                else:
                    with self._more:
                        self._later.append(line)
                        self._more.notify_all()
        finally:
            self._ended.set()
            with self._more:
                self._more.notify_all()

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def wait_ready(self, deadline_s: float) -> re.Match[str]:
        """Block until the ready line, raising ExitedEarly or NotReady (the process is left as is)."""
        end = time.monotonic() + deadline_s
        while True:
            if self._ready.wait(timeout=0.05):
                assert self.ready_match is not None
                return self.ready_match
            code = self.popen.poll()
            if code is not None and self._ended.wait(timeout=1.0):
                raise ExitedEarly(code)
            if time.monotonic() >= end:
                raise NotReady(f"no line matching {self._ready_pattern.pattern!r} within {deadline_s:.0f}s")

    def later_lines(self) -> list[str]:
        """The lines after the ready line so far."""
        with self._more:
            return list(self._later)

    def wait_line(self, pattern: re.Pattern[str], deadline_s: float, *, since: int = 0) -> re.Match[str]:
        """The first line after the ready line (from its ``since``-th on) that matches ``pattern``, waiting up to
        ``deadline_s`` (woken by each new line, no poll); ExitedEarly if the process ends first, NotReady when the
        deadline passes."""
        end = time.monotonic() + deadline_s
        seen = since
        with self._more:
            while True:
                for line in self._later[seen:]:
                    match = pattern.search(line)
                    if match:
                        return match
                seen = len(self._later)
                if self._ended.is_set():
                    raise ExitedEarly(self.popen.poll() or 0)
                left = end - time.monotonic()
                if left <= 0:
                    raise NotReady(f"no line matching {pattern.pattern!r} within {deadline_s:.0f}s")
                self._more.wait(left)

    def signal_group(self, sig: signal.Signals) -> None:
        if self.popen.poll() is not None:
            return  # reaped: its pid (and group id) may already belong to someone else
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)

    def wait(self, deadline_s: float) -> int | None:
        """The exit code, or None if still running after ``deadline_s``."""
        try:
            code = self.popen.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            return None
        self._finish()
        return code

    def kill(self, deadline_s: float) -> int | None:
        self.signal_group(signal.SIGKILL)
        return self.wait(deadline_s)

    def _finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        # let the pump drain what the process wrote last (its stdout is closed once it exits, unless
        # a grandchild still holds it; the deadline keeps that case from hanging us)
        self._pump.join(timeout=5.0)
        with _running_lock:
            _running.discard(self)
        self._note(f"--- exited with code {self.popen.returncode}\n")
        self._log.close()


@atexit.register
def _kill_leftovers() -> None:
    with _running_lock:
        leftovers = list(_running)
    for process in leftovers:
        process.signal_group(signal.SIGKILL)
    for process in leftovers:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.popen.wait(timeout=5.0)
