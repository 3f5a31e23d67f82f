"""Broker throughput: the reference broker against Apache Artemis, same machine, same run, same client.

The client is Artemis's own ``artemis perf client`` from the pinned distribution: one producer
and one consumer on one queue, ``--message-size`` bytes (1 KiB), durable (``--persistent``) and
non-durable messages.  It runs with *identical* arguments against

* ``reference``: ``cck broker --port 0 --data DIR`` (its journal, group commit);
* ``artemis``: an instance made by ``artemis create`` (default journal type, autotuned buffer
  timeout, both recorded) and started with ``artemis run``.

Each (repetition, mode, broker) run gets a freshly started broker with an empty data directory;
repetitions are interleaved (reference, artemis, artemis, reference, ...).  The throughput of a
run is the mean of the perf client's non-warmup per-interval ``received`` rates (msg/s, end to
end); ``sent`` is kept too.  Reported: the median over the repetitions and the ratios
reference/Artemis.  Every wait has a deadline; every process started is killed in ``finally``.

The same runs are made with the kit's own Python client (``benchmarks/kit_perf_client.py``: a
producer process and a consumer process on ``reference.client``, the same queue, message size,
max-pending and URL options), which prints the perf client's output format; ``--client`` picks
``artemis``, ``kit`` or ``both`` (default).

    python benchmarks/broker_bench.py --quick                        # ~1.5 min smoke run
    python benchmarks/broker_bench.py --json docs/benchmarks-broker.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import queue
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_REPO_ROOT = Path(__file__).resolve().parents[1]
if str(_REPO_ROOT) not in sys.path:  # run as a script: make `conformance` importable
    sys.path.insert(0, str(_REPO_ROOT))

BROKERS = ("reference", "artemis")
#: With --baseline-tree: the reference broker of another checkout (an earlier build), run in the same rotation.
BASELINE = "baseline"
MODES = ("non-durable", "durable")
CLIENTS = ("artemis", "kit")  # artemis perf client / the kit's Python client
GOALS = {"non-durable": 0.5, "durable": 0.8}  # issue 3: reference/Artemis at least this

REFERENCE_START_DEADLINE_S = 30.0
ARTEMIS_CREATE_DEADLINE_S = 120.0
ARTEMIS_START_DEADLINE_S = 90.0
STOP_DEADLINE_S = 30.0
CLIENT_SLACK_S = 90.0  # on top of warmup + duration: JVM start, connect, drain, close
CLIENT_JAVA_ARGS = "-Xms512m -Xmx1g"
ARTEMIS_ACTIVE = "AMQ221007"  # "Server is now active"
REFERENCE_LISTENING = re.compile(r"reference broker listening on ([\d.]+):(\d+)")


# ---------------------------------------------------------------------------------------------- parsing


class PerfOutputError(ValueError):
    """The ``artemis perf client`` output lacks what a result needs."""


@dataclass(frozen=True)
class PerfInterval:
    warmup: bool
    sent: int
    completed: int
    received: int


@dataclass(frozen=True)
class PerfResult:
    """One ``artemis perf client`` run, parsed from its standard output."""

    success: bool
    intervals: tuple[PerfInterval, ...]
    total_sent: int
    total_completed: int
    total_received: int

    @property
    def measured(self) -> tuple[PerfInterval, ...]:
        return tuple(i for i in self.intervals if not i.warmup)

    @property
    def received_rate(self) -> float:
        """msg/s received: the mean of the non-warmup intervals' rates."""
        measured = self.measured
        if not measured:
            raise PerfOutputError("no non-warmup interval in the perf client output")
        return statistics.fmean(i.received for i in measured)

    @property
    def sent_rate(self) -> float:
        measured = self.measured
        if not measured:
            raise PerfOutputError("no non-warmup interval in the perf client output")
        return statistics.fmean(i.sent for i in measured)


_WARMUP = re.compile(r"^--- warmup (true|false)\b")
_RATE = re.compile(r"^--- (sent|blocked|completed|received):\s+(\d+) msg/sec")
_TOTAL = re.compile(r"^--- total (sent|blocked|completed|received):\s+(\d+)")
_RESULT = re.compile(r"^--- result:\s+(\S+)")


def parse_perf_output(text: str) -> PerfResult:
    """Parse the per-interval blocks and the ``--- SUMMARY`` of ``artemis perf client``.

    Latency lines (``--show-latency``) and anything else are ignored.
    """
    intervals: list[PerfInterval] = []
    current: dict[str, int] | None = None
    warmup = False
    totals: dict[str, int] = {}
    result: str | None = None
    in_summary = False

    def close_interval() -> None:
        nonlocal current
        if current is not None:
            missing = {"sent", "completed", "received"} - current.keys()
            if missing:
                raise PerfOutputError(f"interval without {', '.join(sorted(missing))}")
            intervals.append(PerfInterval(warmup, current["sent"], current["completed"], current["received"]))
        current = None

    for raw in text.splitlines():
        line = raw.strip()
        if match := _WARMUP.match(line):
            close_interval()
            warmup, current = match.group(1) == "true", {}
        elif line.startswith("--- SUMMARY"):
            close_interval()
            in_summary = True
        elif (match := _RATE.match(line)) and current is not None and not in_summary:
            current[match.group(1)] = int(match.group(2))
        elif (match := _TOTAL.match(line)) and in_summary:
            totals[match.group(1)] = int(match.group(2))
        elif (match := _RESULT.match(line)) and in_summary:
            result = match.group(1)
    close_interval()
    if not in_summary or result is None:
        raise PerfOutputError("no '--- SUMMARY' with a result line in the perf client output")
    missing = {"sent", "completed", "received"} - totals.keys()
    if missing:
        raise PerfOutputError(f"summary without total {', '.join(sorted(missing))}")
    return PerfResult(result == "success", tuple(intervals), totals["sent"], totals["completed"], totals["received"])


# ---------------------------------------------------------------------------------------------- processes


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _without_user_home(path: Path) -> str:
    """``path`` with the user's home written ``~``: the record is committed, the machine's paths are not."""
    try:
        return "~/" + path.resolve().relative_to(Path.home().resolve()).as_posix()
    except ValueError:
        return path.name


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class _Pump:
    """Reads a process's output in a thread; ``wait_for`` waits for a line with a deadline."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line)
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, accept: Callable[[str], re.Match[str] | bool | None], deadline_s: float, what: str) -> str:
        end = time.monotonic() + deadline_s
        while True:
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{what}: nothing within {deadline_s:g}s; output tail:\n{self.tail()}")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"{what}: the process exited; output tail:\n{self.tail()}")
            if accept(line):
                return line

    def tail(self, lines: int = 30) -> str:
        return "".join(self.lines[-lines:])


def _kill(process: subprocess.Popen[str], *, graceful: bool) -> None:
    """Stop a process we started: SIGTERM (if ``graceful``) then SIGKILL, each wait bounded."""
    if process.poll() is not None:
        return
    if graceful:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_DEADLINE_S)
            return
        except subprocess.TimeoutExpired:
            _log(f"pid {process.pid} ignored SIGTERM for {STOP_DEADLINE_S:g}s; killing it")
    process.kill()
    process.wait(timeout=STOP_DEADLINE_S)


def _java_env(java_args: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_ARGS"}
    if java_args is not None:
        env["JAVA_ARGS"] = java_args
    return env


@contextmanager
def reference_broker(data: Path, tree: Path = _REPO_ROOT) -> Iterator[str]:
    """A fresh reference broker (journal in ``data``) of the checkout ``tree``; yields its ``tcp://host:port``."""
    # PYTHONPATH=tree comes before the editable install's finder, so the tree's own code runs.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    # a checkout from before the cck namespace (a --baseline-tree) has the broker as the bare ``reference``
    module = "cck.reference" if (tree / "cck" / "__init__.py").is_file() else "reference"
    process = subprocess.Popen(
        [sys.executable, "-m", module, "broker", "--port", "0", "--data", str(data), "--log-level", "warning"],
        cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        pump = _Pump(process.stderr)
        line = pump.wait_for(REFERENCE_LISTENING.search, REFERENCE_START_DEADLINE_S, "reference broker start")
        match = REFERENCE_LISTENING.search(line)
        assert match is not None
        yield f"tcp://{match.group(1)}:{match.group(2)}"
    finally:
        _kill(process, graceful=True)


@dataclass(frozen=True)
class ArtemisInstance:
    path: Path
    port: int
    journal_type: str
    journal_buffer_timeout_ns: int | None
    journal_datasync: str | None


def create_artemis_instance(home: Path, instance: Path) -> ArtemisInstance:
    """``artemis create`` with defaults for the journal (type and autotuning), CORE only, anonymous allowed."""
    port = _free_port()
    created = subprocess.run(
        [str(home / "bin" / "artemis"), "create", str(instance), "--user", "admin", "--password", "admin",
         "--allow-anonymous", "--silent", "--no-web", "--no-amqp-acceptor", "--no-mqtt-acceptor",
         "--no-stomp-acceptor", "--no-hornetq-acceptor", f"--default-port={port}"],
        capture_output=True, text=True, timeout=ARTEMIS_CREATE_DEADLINE_S, check=False, env=_java_env(None),
    )  # fmt: skip
    if created.returncode != 0:
        raise RuntimeError(f"artemis create failed ({created.returncode}):\n{created.stdout}\n{created.stderr}")
    xml = (instance / "etc" / "broker.xml").read_text(encoding="utf-8")

    def element(name: str) -> str | None:
        match = re.search(rf"<{name}>\s*([^<\s]+)\s*</{name}>", xml)
        return match.group(1) if match else None

    timeout = element("journal-buffer-timeout")
    return ArtemisInstance(
        path=instance, port=port, journal_type=element("journal-type") or "?",
        journal_buffer_timeout_ns=int(timeout) if timeout is not None else None,
        journal_datasync=element("journal-datasync"),
    )  # fmt: skip


@contextmanager
def artemis_broker(instance: ArtemisInstance) -> Iterator[str]:
    """``artemis run`` on an emptied data directory (the instance's own JVM settings); yields its URL."""
    shutil.rmtree(instance.path / "data", ignore_errors=True)
    process = subprocess.Popen(
        [str(instance.path / "bin" / "artemis"), "run"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, env=_java_env(None),
    )  # fmt: skip
    try:
        assert process.stdout is not None
        pump = _Pump(process.stdout)
        pump.wait_for(lambda line: ARTEMIS_ACTIVE in line, ARTEMIS_START_DEADLINE_S, "Artemis start")
        yield f"tcp://127.0.0.1:{instance.port}"
    finally:
        _kill(process, graceful=True)


def perf_client_args(url: str, *, durable: bool, settings: Settings) -> list[str]:
    """The ``artemis perf client`` arguments: the same for both brokers apart from host:port."""
    args = [
        "perf", "client", f"--url={url}{settings.url_options}", f"--message-size={settings.message_size}",
        f"--duration={settings.duration}", f"--warmup={settings.warmup}", f"--max-pending={settings.max_pending}",
        "--producers=1", "--consumers=1", "--threads=1",
    ]  # fmt: skip
    if durable:
        args.append("--persistent")
    args.append(f"queue://{settings.queue}")
    return args


def run_kit_client(url: str, *, durable: bool, settings: Settings) -> tuple[PerfResult, str]:
    """The kit's Python client with the same plan; its output has the perf client's format."""
    from benchmarks.kit_perf_client import Plan, run_client

    plan = Plan(f"{url}{settings.url_options}", settings.queue, settings.message_size, settings.max_pending,
                durable, settings.warmup, settings.duration)  # fmt: skip
    output = run_client(plan)
    return parse_perf_output(output), output


def run_perf_client(home: Path, url: str, *, durable: bool, settings: Settings) -> tuple[PerfResult, str]:
    argv = [str(home / "bin" / "artemis"), *perf_client_args(url, durable=durable, settings=settings)]
    deadline = settings.warmup + settings.duration + CLIENT_SLACK_S
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
        env=_java_env(CLIENT_JAVA_ARGS), start_new_session=True,
    )  # fmt: skip
    try:
        try:
            output, _ = process.communicate(timeout=deadline)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"artemis perf client did not finish within {deadline:g}s") from None
    finally:
        _kill(process, graceful=False)
    if process.returncode != 0:
        raise RuntimeError(f"artemis perf client exited {process.returncode}:\n{output[-3000:]}")
    return parse_perf_output(output), output


# ---------------------------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class Settings:
    repetitions: int
    duration: int
    warmup: int
    message_size: int
    max_pending: int
    url_options: str
    queue: str = "BENCH"


@dataclass
class RunRecord:
    repetition: int
    mode: str
    broker: str
    client: str
    received_per_s: float
    sent_per_s: float
    intervals: int
    total_sent: int
    total_received: int
    success: bool
    loadavg_1min_after: float


@dataclass
class Report:
    settings: dict[str, Any]
    machine: dict[str, Any]
    artemis: dict[str, Any]
    runs: list[RunRecord] = field(default_factory=list)

    def _rates(self, mode: str, broker: str, client: str) -> list[float]:
        return [r.received_per_s for r in self.runs
                if (r.mode, r.broker, r.client) == (mode, broker, client) and r.success]  # fmt: skip

    def median(self, mode: str, broker: str, client: str = "artemis") -> float | None:
        rates = self._rates(mode, broker, client)
        return statistics.median(rates) if rates else None

    def spread(self, mode: str, broker: str, client: str = "artemis") -> float | None:
        rates = self._rates(mode, broker, client)
        if not rates or not statistics.median(rates):
            return None
        return (max(rates) - min(rates)) / statistics.median(rates)

    def ratio(self, mode: str, client: str = "artemis", *, of: str = "reference") -> float | None:
        ref, art = self.median(mode, of, client), self.median(mode, "artemis", client)
        return ref / art if ref is not None and art else None

    def brokers(self) -> tuple[str, ...]:
        return BROKERS + ((BASELINE,) if any(r.broker == BASELINE for r in self.runs) else ())

    def summary(self) -> dict[str, Any]:
        return {
            client: {
                mode: {
                    "reference_msgs_per_s": self.median(mode, "reference", client),
                    "artemis_msgs_per_s": self.median(mode, "artemis", client),
                    "ratio_reference_over_artemis": self.ratio(mode, client),
                    "goal": GOALS[mode],
                } | ({"baseline_msgs_per_s": self.median(mode, BASELINE, client),
                      "ratio_baseline_over_artemis": self.ratio(mode, client, of=BASELINE)}
                     if BASELINE in self.brokers() else {})
                for mode in self.modes()
            }
            for client in self.clients()
        }

    def modes(self) -> list[str]:
        return [m for m in MODES if any(r.mode == m for r in self.runs)]

    def clients(self) -> list[str]:
        return [c for c in CLIENTS if any(r.client == c for r in self.runs)]


def _machine() -> dict[str, Any]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30, check=False)
    return {
        "cpus": os.cpu_count(), "cpu": cpu, "python": platform.python_version(), "platform": platform.platform(),
        "java": (java.stderr.splitlines() or ["?"])[0], "loadavg_at_start": os.getloadavg(),
    }  # fmt: skip


def _order(repetition: int, brokers: tuple[str, ...]) -> tuple[str, ...]:
    return brokers if repetition % 2 == 0 else tuple(reversed(brokers))


def run_benchmark(
    settings: Settings, modes: Sequence[str], scratch: Path, *, keep_output: Path | None,
    clients: Sequence[str] = CLIENTS, baseline_tree: Path | None = None,
) -> Report:
    from cck.conformance.artemis.distribution import ensure_distribution

    dist = ensure_distribution()
    home = dist.home
    _log(f"creating an Artemis instance with `artemis create` (defaults for the journal) in {scratch}")
    instance = create_artemis_instance(home, scratch / "artemis-instance")
    _log(
        f"Artemis journal: {instance.journal_type}, journal-buffer-timeout {instance.journal_buffer_timeout_ns} ns, "
        f"datasync {instance.journal_datasync}"
    )
    report = Report(
        settings=asdict(settings) | {"modes": list(modes), "client_java_args": CLIENT_JAVA_ARGS,
                                     "client_args_example": perf_client_args("tcp://HOST:PORT", durable=True,
                                                                             settings=settings)},
        machine=_machine(),
        artemis={"version": "2.44.0", "home": _without_user_home(home), "journal_type": instance.journal_type,
                 "journal_buffer_timeout_ns": instance.journal_buffer_timeout_ns,
                 "journal_datasync": instance.journal_datasync},
    )  # fmt: skip
    brokers = BROKERS + ((BASELINE,) if baseline_tree is not None else ())
    if baseline_tree is not None:
        report.settings["baseline_tree"] = str(baseline_tree)
    total = settings.repetitions * len(modes) * len(brokers) * len(clients)
    done = 0
    for repetition in range(settings.repetitions):
        for client, mode in itertools.product(clients, modes):
            for broker in _order(repetition, brokers):
                done += 1
                _log(f"run {done}/{total}: repetition {repetition + 1}, {client} client, {mode}, {broker} ...")
                data = scratch / f"reference-data-{repetition}-{mode}"
                started = time.monotonic()
                durable = mode == "durable"
                with (artemis_broker(instance) if broker == "artemis"
                      else reference_broker(data, baseline_tree if broker == BASELINE and baseline_tree else _REPO_ROOT)
                      ) as url:
                    if client == "artemis":
                        result, output = run_perf_client(home, url, durable=durable, settings=settings)
                    else:
                        result, output = run_kit_client(url, durable=durable, settings=settings)
                shutil.rmtree(data, ignore_errors=True)
                if keep_output is not None:
                    keep_output.mkdir(parents=True, exist_ok=True)
                    name = f"{repetition}-{client}-{mode}-{broker}.txt"
                    (keep_output / name).write_text(output, encoding="utf-8")
                record = RunRecord(
                    repetition=repetition, mode=mode, broker=broker, client=client,
                    received_per_s=result.received_rate,
                    sent_per_s=result.sent_rate, intervals=len(result.measured), total_sent=result.total_sent,
                    total_received=result.total_received, success=result.success,
                    loadavg_1min_after=os.getloadavg()[0],
                )  # fmt: skip
                report.runs.append(record)
                _log(
                    f"run {done}/{total}: {client} client, {broker} {mode}: {record.received_per_s:,.0f} msg/s in, "
                    f"{record.sent_per_s:,.0f} sent ({record.intervals} intervals, result "
                    f"{'success' if result.success else 'FAIL'}) in {time.monotonic() - started:.0f}s, "
                    f"load {record.loadavg_1min_after:.2f}"
                )
    return report


def format_table(report: Report) -> str:
    lines = [
        f"broker throughput, msg/s received (median of {report.settings['repetitions']}; "
        f"± = (max-min)/median), {report.settings['message_size']}-byte messages, 1 producer + 1 consumer",
        f"{'client':<8} {'mode':<12} {'reference':>16} {'artemis':>16} {'ref/artemis':>12} {'goal':>6}"
        + (f" {'baseline':>16} {'base/artemis':>12}" if BASELINE in report.brokers() else ""),
    ]
    for client in report.clients():
        for mode in report.modes():
            cells = []
            for broker in report.brokers():
                median, spread = report.median(mode, broker, client), report.spread(mode, broker, client)
                cells.append("-" if median is None else f"{median:,.0f} ±{(spread or 0) * 100:.0f}%")
            ratio = report.ratio(mode, client)
            ratio_text = "-" if ratio is None else f"{ratio:.2f}x"
            line = f"{client:<8} {mode:<12} {cells[0]:>16} {cells[1]:>16} {ratio_text:>12} {GOALS[mode]:>5}x"
            if BASELINE in report.brokers():
                base = report.ratio(mode, client, of=BASELINE)
                line += f" {cells[2]:>16} {'-' if base is None else f'{base:.2f}x':>12}"
            lines.append(line)
    lines.append(
        f"Artemis journal: {report.artemis['journal_type']} "
        f"(journal-buffer-timeout {report.artemis['journal_buffer_timeout_ns']} ns); "
        "reference: its own journal (group-commit fsync)"
    )
    lines.append("clients: artemis = `artemis perf client` (Java); kit = benchmarks/kit_perf_client.py")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0], epilog="Progress goes to stderr, the table to stdout.",
    )  # fmt: skip
    parser.add_argument("--repetitions", type=int, default=3, help="runs per (mode, broker); median (default 3)")
    parser.add_argument("--duration", type=int, default=15, help="perf client --duration, seconds (default 15)")
    parser.add_argument("--warmup", type=int, default=5, help="perf client --warmup, seconds (default 5)")
    parser.add_argument("--message-size", type=int, default=1024, help="bytes (default 1024)")
    parser.add_argument(
        "--max-pending", type=int, default=100, help="perf client --max-pending: sends not yet confirmed (default 100)"
    )
    parser.add_argument(
        "--url-options",
        default="?confirmationWindowSize=1048576",
        help="appended to both brokers' URLs (default '?confirmationWindowSize=1048576', so "
        "durable sends are asynchronous and confirmed; '' for blocking durable sends)",
    )
    parser.add_argument("--mode", choices=[*MODES, "both"], default="both", help="which messages (default both)")
    parser.add_argument("--client", choices=[*CLIENTS, "both"], default="both",
                        help="artemis perf client, the kit's Python client, or both (default both)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 repetition, --duration 4 --warmup 2")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the scratch folder (data dirs, instance)")
    parser.add_argument("--keep-output", type=Path, default=None, help="save each perf client output in this folder")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--baseline-tree", type=Path, default=None, metavar="DIR",
                        help="also run the reference broker of this checkout (e.g. `git worktree add DIR REV`) in the "
                             "same rotation: before/after builds side by side against the same Artemis runs")
    args = parser.parse_args(argv)
    if args.baseline_tree is not None and not (args.baseline_tree / "reference" / "__main__.py").is_file():
        parser.error(f"--baseline-tree {args.baseline_tree}: no reference/__main__.py there (not a kit checkout)")
    if args.quick:
        args.repetitions, args.duration, args.warmup = 1, 4, 2
    settings = Settings(
        repetitions=args.repetitions, duration=args.duration, warmup=args.warmup, message_size=args.message_size,
        max_pending=args.max_pending, url_options=args.url_options,
    )  # fmt: skip
    modes = list(MODES) if args.mode == "both" else [args.mode]
    scratch = Path(tempfile.mkdtemp(prefix="broker-bench-", dir=args.dir))
    try:
        clients = list(CLIENTS) if args.client == "both" else [args.client]
        report = run_benchmark(settings, modes, scratch, keep_output=args.keep_output, clients=clients,
                               baseline_tree=args.baseline_tree.resolve() if args.baseline_tree else None)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(format_table(report))
    if args.json is not None:
        payload = {
            "settings": report.settings, "machine": report.machine, "artemis": report.artemis,
            "summary": report.summary(), "runs": [asdict(r) for r in report.runs],
        }  # fmt: skip
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
