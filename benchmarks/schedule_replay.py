"""A run on several processes, replayed: a finished run's case durations handed out by xdist's ``load`` and by the
kit's scheduler (``conformance/plugin/_schedule.py``) to fake worker processes behind the run's gate, and when the
last case would end under each.

The model: a worker starts a case once it holds the next one or has been told to shut down (as xdist's workers
do), answers a steal request with the cases it has not started, and passes the gate (a ``cck_alone`` case starts
with nothing else in progress, and nothing starts beside it).  Each case takes what it took in the run; what a
case's time would be on another process (a kept broker it would not find there) is not modelled.

    python -m benchmarks.schedule_replay EVIDENCE_DIR/RUN_ID [--processes 3]

The order is the suite's collection order (collected here, alone cases last, as the workers order them).  See
docs/benchmarks.md ("Conformance suite run time").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python benchmarks/schedule_replay.py`: the checkout's packages
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xdist.scheduler import LoadScheduling  # type: ignore[import-untyped]  # (xdist ships no types)

from cck.conformance.plugin._schedule import AloneLastScheduling, write_alone

__all__ = ["Replay", "main"]

SUITE = Path(__file__).resolve().parent.parent / "conformance" / "suite"


class _Config:
    def __init__(self, processes: int) -> None:
        self._values: dict[str, Any] = {"tx": [f"{processes}*popen"], "maxschedchunk": None}

    def getvalue(self, name: str) -> Any:
        return self._values[name]

    def getoption(self, name: str) -> Any:
        return self._values[name]


class _Gateway:
    def __init__(self, name: str) -> None:
        self.id = name


class _Process:
    """What a scheduler sees of an xdist worker."""

    def __init__(self, name: str, replay: Replay) -> None:
        self.gateway = _Gateway(name)
        self.shutting_down = False
        self.queue: list[int] = []
        self.running: tuple[float, int] | None = None  # (ends at, case)
        self._replay = replay

    def send_runtest_some(self, indices: list[int]) -> None:
        self._replay.sent(indices)
        self.queue.extend(indices)

    def send_steal(self, indices: list[int]) -> None:
        self._replay.steals.append((self, indices))

    def shutdown(self) -> None:
        self.shutting_down = True


class Replay:
    """Cases of the given lengths, those at ``alone`` marked alone, handed out by ``scheduler`` (``"kit"`` or
    ``"load"``) to ``processes`` fake workers.  ``directory`` is where the workers' list of alone cases goes (the
    kit's scheduler reads it from there)."""

    def __init__(self, directory: Path, seconds: Sequence[float], alone: set[int], *, scheduler: str = "kit",
                 processes: int = 3, name_alone: bool = True) -> None:
        self.seconds = list(seconds)
        self.alone = set(alone)
        names = [f"case{i}" for i in range(len(seconds))]
        if name_alone:
            write_alone(directory, [names[i] for i in sorted(self.alone)])
        self.steals: list[tuple[_Process, list[int]]] = []
        #: for each batch with an alone case in it: the most ordinary cases a process held as it went out
        self.alone_sent_beside: list[int] = []
        self.started: dict[int, float] = {}
        config = _Config(processes)
        self.scheduler = AloneLastScheduling(config, None, directory) if scheduler == "kit" else \
            LoadScheduling(config, _Quiet())
        self.nodes = [_Process(f"gw{i}", self) for i in range(processes)]
        for node in self.nodes:
            self.scheduler.add_node(node)
            self.scheduler.add_node_collection(node, names)
        self.scheduler.schedule()

    def sent(self, indices: list[int]) -> None:
        if any(i in self.alone for i in indices):
            self.alone_sent_beside.append(max(len([i for i in n.queue if i not in self.alone]) for n in self.nodes))

    def _answer_steals(self) -> None:
        while self.steals:
            node, asked = self.steals.pop(0)
            running = node.running[1] if node.running else None
            given = [i for i in asked if i in node.queue and i != running]
            node.queue = [i for i in node.queue if i not in given]
            self.scheduler.remove_pending_tests_from_node(node, given)

    def makespan(self) -> float:
        """Run every case; when the last one ends (seconds from the start)."""
        now = 0.0
        while True:
            self._answer_steals()
            for node in self.nodes:  # start what the worker and the gate let start
                if node.running is None and (len(node.queue) >= 2 or (node.shutting_down and node.queue)):
                    case = node.queue[0]
                    busy = [n.running[1] for n in self.nodes if n.running is not None]
                    if (case in self.alone and busy) or any(b in self.alone for b in busy):
                        continue
                    node.running = (now + self.seconds[case], case)
                    self.started[case] = now
            active = [n for n in self.nodes if n.running is not None]
            if not active:
                if len(self.started) != len(self.seconds):
                    raise RuntimeError(f"{len(self.seconds) - len(self.started)} cases never started")
                return now
            ending = min(active, key=lambda n: n.running[0] if n.running else 0.0)
            assert ending.running is not None
            now, case = ending.running
            ending.running = None
            ending.queue.remove(case)
            self.scheduler.mark_test_complete(ending, case, self.seconds[case])


class _Quiet:
    """A log that says nothing (``load`` logs every refill)."""

    def __getattr__(self, name: str) -> _Quiet:
        return self

    def __call__(self, *args: object) -> None:
        return None


def _collected(*selection: str) -> list[str]:
    """The suite's test IDs in collection order; a collection that fails is raised, with pytest's last words."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          *selection, str(SUITE)], capture_output=True, text=True, check=False)
    if out.returncode not in (0, 5):  # 5: nothing selected
        last = (out.stdout + out.stderr).strip().splitlines()[-3:]
        raise RuntimeError(f"collecting {SUITE} failed (pytest exit {out.returncode}): {' / '.join(last)}")
    return [line for line in out.stdout.splitlines() if "::" in line]


def _ids(nodeids: Sequence[str]) -> list[str]:
    return [n.rsplit("[", 1)[-1].rstrip("]") for n in nodeids]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.schedule_replay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="a run's evidence directory (holding cases.jsonl)")
    parser.add_argument("--processes", type=int, default=3, help="worker processes (cck run --jobs), default 3")
    options = parser.parse_args(argv)
    cases_file = options.run_dir / "cases.jsonl"
    if not cases_file.is_file():
        parser.error(f"{cases_file}: no such file (give a run's directory inside the evidence directory)")
    took = {row["case_id"]: float(row["duration_s"])
            for row in map(json.loads, cases_file.read_text(encoding="utf-8").splitlines()) if "duration_s" in row}
    try:
        alone_ids = set(_ids(_collected("-m", "cck_alone")))
        order = [case for case in _ids(_collected()) if case in took]
    except RuntimeError as exc:
        parser.error(str(exc))
    order.sort(key=lambda case: case in alone_ids)  # as the workers order them
    missing = sorted(set(took) - set(order))
    if missing:
        parser.error(f"{len(missing)} cases of the run are not in this checkout's suite, e.g. {missing[0]}")
    seconds = [took[case] for case in order]
    alone = {i for i, case in enumerate(order) if case in alone_ids}
    ordinary = sum(s for i, s in enumerate(seconds) if i not in alone)
    print(f"{len(order)} cases, {sum(seconds):.0f} s summed, {len(alone)} alone ({sum(seconds) - ordinary:.0f} s)")
    even = ordinary / options.processes + sum(seconds) - ordinary
    print(f"  ordinary cases shared evenly, then the alone ones: {even:.0f} s")
    for name in ("load", "kit"):
        with tempfile.TemporaryDirectory() as directory:
            ended = Replay(Path(directory), seconds, alone, scheduler=name, processes=options.processes).makespan()
        print(f"  {'xdist load' if name == 'load' else 'the kit (worksteal, alone held back)'}: {ended:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
