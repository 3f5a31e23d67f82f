"""The stock Artemis client for the backoff cases: ``fixtures/java/backoff/src`` compiled against a pinned
distribution's client jars, run as a child process the case talks to over stdin/stdout.

The program measures nothing.  It prints one JSON line per thing it saw (``started``, ``connected``,
``gave-up``, ``ready``, ``before-reconnect``, ``connection-failed``, ``failover-*``, ``closed``); the kit
stamps each line with ``time.monotonic_ns()`` when it reads it and times the connection attempts itself
where they arrive (the fault proxy, or the SYN watcher for refusals at the TCP level).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from cck.conformance._data import fixture
from cck.conformance.artemis.distribution import Distribution
from cck.conformance.artemis.java_tools import ToolError, compile_java, java_command
from cck.conformance.verdicts import KitError, NotObserved

from ._kit import signalled

__all__ = ["MAIN", "JavaEvent", "StockClient", "build_backoff_client", "backoff_sources"]

MAIN = "cck.backoff.BackoffClient"
#: Lines the program prints about itself, not about the client it drives: not seeing them in time is the kit's
#: problem (a JVM that did not start), not the client's.
_HARNESS_EVENTS = frozenset({"started", "ready", "closed", "warmed-up"})


def backoff_sources() -> Path:
    return fixture("java", "backoff", "src")  # package data


def build_backoff_client(dist: Distribution) -> Path:
    """Compile the program when a source, javac or the jar list changed; return the classes directory."""
    return compile_java(dist, backoff_sources(), dist.root / "backoff-classes")


@dataclass(frozen=True)
class JavaEvent:
    event: str
    detail: str
    #: monotonic_ns() when the kit read the line.
    ts_ns: int

    def to_dict(self) -> dict[str, object]:
        return {"event": self.event, "detail": self.detail, "ts_ns": self.ts_ns}


@dataclass
class StockClient:
    """One run of the program: ``mode`` is ``initial`` or ``reconnect``."""

    dist: Distribution
    classes: Path
    mode: str
    url: str
    deadline_s: float
    #: initial mode: first fail to connect here twice (nothing listening), so the JVM has loaded its retry path
    warmup_url: str | None = None
    events: list[JavaEvent] = field(default_factory=list)
    noise: list[str] = field(default_factory=list)
    _process: asyncio.subprocess.Process | None = None
    _reader: asyncio.Task[None] | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        args = [self.mode, self.url, str(int(self.deadline_s * 1000))]
        if self.warmup_url is not None:
            args.append(self.warmup_url)
        command = java_command(self.dist, self.classes, args, main=MAIN)
        self._process = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self._process is not None
        assert self._process.stdout is not None
        async for raw in self._process.stdout:
            now = time.monotonic_ns()
            line = raw.decode("utf-8", "replace").strip()
            try:
                data = json.loads(line)
                self.events.append(JavaEvent(str(data["event"]), str(data.get("detail", "")), now))
            except (json.JSONDecodeError, KeyError, TypeError):
                if line:
                    self.noise.append(line)
            self._changed.set()
        self._changed.set()

    def first(self, *names: str, after_ns: int = 0) -> JavaEvent | None:
        return next((e for e in self.events if e.event in names and e.ts_ns > after_ns), None)

    async def wait_for(self, *names: str, timeout: float, after_ns: int = 0) -> JavaEvent:
        """The first event named one of ``names`` read after ``after_ns``.  After ``timeout`` s: the program's own
        lines (``ready``, ...) missing are the kit's error (:class:`KitError`), the client's are a failed check
        (:class:`NotObserved`); ToolError if the JVM ends first."""
        def ended() -> bool:
            return self._reader is not None and self._reader.done()

        await signalled(self._changed, lambda: self.first(*names, after_ns=after_ns) is not None or ended(), timeout)
        found = self.first(*names, after_ns=after_ns)
        if found is not None:
            return found
        if ended():
            raise ToolError(f"the stock client ended before {'/'.join(names)}: {self.transcript()}")
        problem = KitError if set(names) <= _HARNESS_EVENTS else NotObserved
        raise problem(f"no {'/'.join(names)} from the stock client within {timeout:.1f}s: {self.transcript()}")

    def transcript(self) -> str:
        lines = [f"{e.event}: {e.detail}" for e in self.events] + self.noise[-10:]
        return "; ".join(lines) or "(no output)"

    async def close(self, timeout: float = 10.0) -> str:
        """Ask the program to close its locator, wait for it (kill it after ``timeout``); return stderr's tail."""
        process = self._process
        if process is None:
            return ""
        if process.returncode is None and process.stdin is not None:
            with contextlib.suppress(ConnectionError, OSError):
                process.stdin.write(b"close\n")
                await process.stdin.drain()
                process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await asyncio.wait_for(process.wait(), 10.0)
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._reader, 5.0)
        stderr = b""
        if process.stderr is not None:
            with contextlib.suppress(TimeoutError):
                stderr = await asyncio.wait_for(process.stderr.read(), 5.0)
        return stderr.decode("utf-8", "replace")[-2000:]
