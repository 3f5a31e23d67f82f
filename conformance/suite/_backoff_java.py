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
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from conformance.artemis.distribution import Distribution
from conformance.artemis.java_tools import JAVAC_TIMEOUT_S, ToolError, classpath, java_command

__all__ = ["MAIN", "JavaEvent", "StockClient", "build_backoff_client", "backoff_sources"]

MAIN = "cck.backoff.BackoffClient"
_REPO_ROOT = Path(__file__).resolve().parents[2]


def backoff_sources() -> Path:
    return _REPO_ROOT / "fixtures" / "java" / "backoff" / "src"


def _stamp(dist: Distribution, src: Path, javac: str) -> dict[str, object]:
    try:
        version = subprocess.run([javac, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        raise ToolError("javac -version did not answer within 60s") from None
    sources = sorted(src.rglob("*.java"))
    if not sources:
        raise ToolError(f"no Java sources under {src}")
    return {
        "javac": (version.stdout + version.stderr).strip(),
        "artemis": dist.version,
        "jars": sorted(p.name for p in dist.lib.glob("*.jar")),
        "sources": {str(p.relative_to(src)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sources},
    }


@contextlib.contextmanager
def _lock(path: Path, timeout_s: float = JAVAC_TIMEOUT_S + 60.0) -> Iterator[None]:
    """Serialise compiles of concurrent processes (bounded)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()  # never set: a bounded pause between tries
    with path.open("a+") as handle:
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ToolError(f"timed out after {timeout_s:.0f}s waiting for {path}") from None
                pause.wait(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def build_backoff_client(dist: Distribution) -> Path:
    """Compile the program when a source, javac or the jar list changed; return the classes directory."""
    javac = shutil.which("javac")
    if javac is None:
        raise ToolError("javac was not found on PATH: install a JDK 17 or newer")
    src = backoff_sources()
    out = dist.root / "backoff-classes"
    stamp_path = dist.root / "backoff-classes.stamp.json"
    with _lock(dist.root / "backoff-classes.lock"):
        wanted = _stamp(dist, src, javac)
        if out.is_dir() and stamp_path.is_file():
            with contextlib.suppress(json.JSONDecodeError):
                if json.loads(stamp_path.read_text(encoding="utf-8")) == wanted:
                    return out
        staging = Path(tempfile.mkdtemp(prefix="backoff-classes.", dir=dist.root))
        command = [javac, "--release", "17", "-encoding", "UTF-8", "-Xlint:all,-serial,-processing,-options",
                   "-d", str(staging), "-cp", classpath(dist), *[str(p) for p in sorted(src.rglob("*.java"))]]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=JAVAC_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            shutil.rmtree(staging, ignore_errors=True)
            raise ToolError(f"javac did not finish within {JAVAC_TIMEOUT_S:.0f}s") from None
        if result.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise ToolError("javac failed:\n" + (result.stdout + result.stderr).strip())
        shutil.rmtree(out, ignore_errors=True)
        os.replace(staging, out)
        stamp_path.write_text(json.dumps(wanted, indent=2) + "\n", encoding="utf-8")
        return out


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
        """The first event named one of ``names`` read after ``after_ns``; TimeoutError after ``timeout`` s,
        ToolError if the JVM ends first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            found = self.first(*names, after_ns=after_ns)
            if found is not None:
                return found
            if self._reader is not None and self._reader.done():
                raise ToolError(f"the stock client ended before {'/'.join(names)}: {self.transcript()}")
            self._changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"no {'/'.join(names)} from the stock client within {timeout:.1f}s: "
                                   f"{self.transcript()}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

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
