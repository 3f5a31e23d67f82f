"""Build and run the JMS interop program (``fixtures/java/jms/src``) on the stock artemis-jms-client.

The classes are compiled with ``javac --release 17`` against ``<dist>/lib/*`` into
``<cache>/artemis/<version>/jms-classes``; a stamp beside them (SHA-256 of every source, the javac
version and the jar list) decides whether a recompile is needed.  The program prints one JSON line
per check: ``{"scenario": ..., "check": ..., "ok": ..., "detail": ...}``.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cck.conformance.artemis.distribution import Distribution
from cck.conformance.artemis.java_tools import compile_java, java_command

__all__ = ["JMS_MAIN", "Check", "JmsRun", "build_jms", "jms_command", "jms_sources", "parse_check", "run_jms"]

JMS_MAIN = "cck.jms.JmsInterop"
_STAMP = "stamp.json"
_REPO_ROOT = Path(__file__).resolve().parents[2]


def jms_sources() -> Path:
    return _REPO_ROOT / "fixtures" / "java" / "jms" / "src"


@dataclass(frozen=True)
class Check:
    scenario: str
    check: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class JmsRun:
    """One run of the program: its exit status, its checks and whatever else it wrote."""

    command: list[str]
    returncode: int
    checks: list[Check]
    noise: list[str]  # stdout lines that are not check lines
    stderr: str

    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def check(self, scenario: str, name: str) -> Check | None:
        return next((c for c in self.checks if c.scenario == scenario and c.check == name), None)

    def report(self) -> str:
        """Everything a failing assertion should show: the failing checks first."""
        lines = [f"exit status {self.returncode}; failing checks:"]
        lines += [f"  {c.scenario}/{c.check}: {c.detail}" for c in self.failed()] or ["  (none)"]
        lines.append("all checks:")
        lines += [f"  [{'ok' if c.ok else 'FAIL'}] {c.scenario}/{c.check}: {c.detail}" for c in self.checks]
        if self.noise:
            lines.append("other output:\n" + "\n".join(self.noise[-40:]))
        if self.stderr.strip():
            lines.append("stderr (tail):\n" + self.stderr.strip()[-4000:])
        return "\n".join(lines)


def build_jms(dist: Distribution, *, src: Path | None = None) -> Path:
    """Compile the program when a source (or javac, or the jar list) changed; return the classes dir."""
    return compile_java(dist, src or jms_sources(), dist.root / "jms-classes")


def _parse(stdout: str) -> tuple[list[Check], list[str]]:
    checks: list[Check] = []
    noise: list[str] = []
    for line in stdout.splitlines():
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            if line.strip():
                noise.append(line)
            continue
        if isinstance(raw, dict) and {"scenario", "check", "ok", "detail"} <= raw.keys():
            checks.append(Check(str(raw["scenario"]), str(raw["check"]), raw["ok"] is True, str(raw["detail"])))
        else:
            noise.append(line)
    return checks, noise


def jms_command(dist: Distribution, classes: Path, url: str, queue: str, *scenarios: str, xid: str | None = None,
                user: str | None = None, password: str | None = None, scenario_deadline_s: float = 60.0,
                count: int | None = None) -> list[str]:
    """The program's command line (``count``: how many messages the ha-* scenarios send or expect)."""
    args = ["--url", url, "--queue", queue, "--deadline-ms", str(int(scenario_deadline_s * 1000))]
    if xid is not None:
        args += ["--xid", xid]
    if user is not None:
        args += ["--user", user, "--password", password or ""]
    if count is not None:
        args += ["--count", str(count)]
    return java_command(dist, classes, [*args, *scenarios], main=JMS_MAIN)


def parse_check(line: str) -> Check | None:
    """One check line of the program's output, or None for any other line."""
    checks, _ = _parse(line)
    return checks[0] if checks else None


def run_jms(
    dist: Distribution,
    classes: Path,
    url: str,
    queue: str,
    *scenarios: str,
    xid: str | None = None,
    user: str | None = None,
    password: str | None = None,
    scenario_deadline_s: float = 60.0,
    timeout_s: float = 180.0,
    count: int | None = None,
) -> JmsRun:
    """Run scenarios in one JVM; never raises on failing checks (see ``JmsRun.failed``).

    ``scenario_deadline_s`` is enforced inside the program (it halts with status 3);
    ``timeout_s`` bounds the whole JVM from outside.
    """
    command = jms_command(dist, classes, url, queue, *scenarios, xid=xid, user=user, password=password,
                          scenario_deadline_s=scenario_deadline_s, count=count)
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        checks, noise = _parse(out)
        timeout = Check(",".join(scenarios), "jvm-timeout", False, f"the JVM did not exit within {timeout_s:.0f}s")
        return JmsRun(command, -1, [*checks, timeout], noise, "")
    checks, noise = _parse(result.stdout)
    return JmsRun(command, result.returncode, checks, noise, result.stderr)
