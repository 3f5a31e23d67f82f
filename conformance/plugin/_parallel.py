"""Cases on several processes (``cck run --jobs N``, pytest-xdist's ``-n N``): one run, one verdict table.

Under xdist the controller collects nothing and runs nothing; its workers do.  So that the run still reads as
one run:

* the controller's run ID goes to every worker (``workerinput``): they append to one evidence directory (the
  writer locks each record) and one allure results directory;
* each judged case travels to the controller on its teardown report (a property the controller takes off), so
  the verdict summary, the exit status and ``run.json`` are the controller's, over every worker's cases; a case
  collected whose end no report told (its worker died) is the kit's error, never a verdict of the broker;
* a case marked ``cck_alone`` runs with no other case in progress (:class:`CaseGate`): its verdict compares
  measured times with the run's tolerance, and another case's brokers starting beside it on a small machine
  would be measured with it; ``--dist worksteal`` (what ``cck run --jobs`` asks for) hands them out last, once
  no process has another case to give up (:mod:`._schedule`).
"""

from __future__ import annotations

import base64
import fcntl
import pickle
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import pytest

from cck.conformance.targets import PortBlock, PortSource, free_ports, launch_counts

from ._run import RUN_KEY, CaseResult, RunState
from ._schedule import AloneLastScheduling, write_alone

__all__ = ["ALONE_MARKER", "PARALLEL_CONTROLLER", "RESULT_PROPERTY", "CaseGate", "GateTimeout", "ParallelController",
           "ParallelWorker", "port_source", "register_parallel", "result_property", "worker_input"]

ALONE_MARKER = "cck_alone"
#: The teardown report's property a worker carries a judged case in (the controller takes it off).
RESULT_PROPERTY = "cck_result"
#: The name the controller's side is registered under with pytest's plugin manager.
PARALLEL_CONTROLLER = "cck-parallel-controller"

#: How long a case waits for its turn before the run calls it the kit's error: far beyond the longest case
#: (the suite's longest takes under a minute), short of a hung run.
GATE_DEADLINE_S = 1800.0
#: flock has no timed form: a waiter tries again this often until the deadline.
_GATE_POLL_S = 0.02


class GateTimeout(RuntimeError):
    """A case waited past the gate's deadline for the other workers' cases to end."""


def worker_input(config: pytest.Config) -> dict[str, Any] | None:
    """The controller's input to this process when it is an xdist worker, else None."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput if isinstance(workerinput, dict) else None


def port_source(config: pytest.Config) -> PortSource:
    """Where this process's brokers take their ports: an xdist worker (``gw<N>``) its own block of ports, so no
    port one worker was given (a passive backup's, bound by nobody) is handed to another; one process, the
    kernel's free ports."""
    workerinput = worker_input(config)
    if workerinput is None:
        return free_ports
    return PortBlock.for_worker(int(str(workerinput["workerid"]).removeprefix("gw")))


def _lock(file: IO[bytes], operation: int, deadline: float, waited_s: float, what: str) -> None:
    while True:
        try:
            fcntl.flock(file, operation | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise GateTimeout(f"waited {waited_s:g} s for {what}") from None
            time.sleep(_GATE_POLL_S)


class CaseGate:
    """A readers-writer lock across the workers' processes, on two files in a directory they share.

    An ordinary case holds ``cases`` shared; a ``cck_alone`` case holds it exclusively, so it starts once the
    cases in progress end and none starts until it ends.  ``turn`` queues them: whoever waits for ``cases``
    holds ``turn``, so an alone case that is waiting is not overtaken by ordinary cases starting after it."""

    def __init__(self, directory: Path, deadline_s: float = GATE_DEADLINE_S) -> None:
        self._deadline_s = deadline_s
        self._turn = directory / "turn"
        self._cases = directory / "cases"
        for path in (self._turn, self._cases):
            path.touch(exist_ok=True)

    @contextmanager
    def hold(self, alone: bool, what: str) -> Iterator[None]:
        deadline = time.monotonic() + self._deadline_s
        with self._turn.open("rb") as turn, self._cases.open("rb") as cases:
            _lock(turn, fcntl.LOCK_EX, deadline, self._deadline_s, f"its turn to run {what}")
            try:
                _lock(cases, fcntl.LOCK_EX if alone else fcntl.LOCK_SH, deadline, self._deadline_s,
                      f"the cases in progress to end before {what}" if alone else f"a case running alone ({what})")
            finally:
                fcntl.flock(turn, fcntl.LOCK_UN)
            try:
                yield
            finally:
                fcntl.flock(cases, fcntl.LOCK_UN)


def result_property(result: CaseResult) -> tuple[str, str]:
    """A judged case as a property of its teardown report, which xdist carries to the controller as it ends (so
    a worker that dies later loses no verdict it gave)."""
    # a case's params may hold anything (topologies, callables): the controller needs only its identity
    light = CaseResult(replace(result.case, params={}), result.nodeid, result.judgement)
    return RESULT_PROPERTY, base64.b64encode(pickle.dumps(light)).decode("ascii")


def _result_from(value: object) -> CaseResult:
    assert isinstance(value, str)
    result = pickle.loads(base64.b64decode(value))  # noqa: S301  (our own worker's, over xdist's channel)
    assert isinstance(result, CaseResult)
    return result


class ParallelController:
    """The controller's side: give every worker the run, take each judged case from its report, and notice
    cases that never ended (a worker that died, the maximum of restarted workers reached)."""

    def __init__(self, state: RunState, gate_dir: Path) -> None:
        self._state = state
        self._gate_dir = gate_dir
        self.launches: Counter[str] = Counter()
        self._collected: set[str] = set()
        self._ended: set[str] = set()
        self.crashed: list[str] = []

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["cck_run_id"] = self._state.run_id
        node.workerinput["cck_started"] = self._state.started.isoformat()
        node.workerinput["cck_gate_dir"] = str(self._gate_dir)

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._collected.update(ids)

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> AloneLastScheduling | None:
        """``--dist worksteal`` with the alone cases held back to the end; any other ``--dist`` is xdist's own."""
        return AloneLastScheduling(config, log, self._gate_dir) if config.getoption("dist") == "worksteal" else None

    @pytest.hookimpl(tryfirst=True)  # before junitxml and others see the report: the property is ours alone
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self._ended.add(report.nodeid)
        for entry in [e for e in report.user_properties if e[0] == RESULT_PROPERTY]:
            report.user_properties.remove(entry)
            self._state.results.append(_result_from(entry[1]))

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        if error is not None:
            self.crashed.append(f"{getattr(node.gateway, 'id', node)}: {error}")
        output = getattr(node, "workeroutput", None) or {}
        self._state.other_failures += int(output.get("cck_other_failures", 0))
        self.launches.update(output.get("cck_launches", {}))

    def lost(self) -> list[str]:
        """Items collected whose end no report told (their process died, or was never given them)."""
        return sorted(self._collected - self._ended)


class ParallelWorker:
    """A worker's side: hold the gate around each case, cases marked alone last, counts at the end."""

    def __init__(self, state: RunState, gate: CaseGate, gate_dir: Path, workeroutput: dict[str, Any]) -> None:
        self._state = state
        self._gate = gate
        self._gate_dir = gate_dir
        self._output = workeroutput

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Alone cases last, and named for the controller's scheduler: run one after another at the end, they wait
        for the other processes' cases once, not once each (every worker collects the same order, and xdist's
        ``load`` hands items out in it)."""
        items.sort(key=lambda item: item.get_closest_marker(ALONE_MARKER) is not None)
        write_alone(self._gate_dir, [item.nodeid for item in items if item.get_closest_marker(ALONE_MARKER)])

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object,
                                                                                                    object]:
        alone = item.get_closest_marker(ALONE_MARKER) is not None
        with self._gate.hold(alone, item.nodeid):
            return (yield)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        state = session.config.stash[RUN_KEY]
        self._output["cck_other_failures"] = state.other_failures
        self._output["cck_launches"] = launch_counts()


def register_parallel(config: pytest.Config, state: RunState) -> None:
    """Wire this process's side of a run on several processes: a worker's, or the controller's when ``-n`` is
    given; in a run of one process, nothing."""
    workerinput = worker_input(config)
    if workerinput is not None:
        gate_dir = Path(workerinput["cck_gate_dir"])
        output = config.workeroutput  # type: ignore[attr-defined]  # (xdist's, on a worker's config)
        worker = ParallelWorker(state, CaseGate(gate_dir), gate_dir, output)
        config.pluginmanager.register(worker, "cck-parallel-worker")
        return
    if config.getoption("dist", "no") == "no":
        return
    if state.settings.target in ("url", "command"):  # every process would start, kill and fill the same brokers
        raise pytest.UsageError(f"--jobs / -n: a {state.settings.target} target's brokers are yours, one set for the "
                                "whole run, and cases on several processes would disturb each other's; run them in "
                                "one process")
    gate_dir = Path(tempfile.mkdtemp(prefix="cck-gate-"))
    config.add_cleanup(lambda: shutil.rmtree(gate_dir, ignore_errors=True))
    config.pluginmanager.register(ParallelController(state, gate_dir), PARALLEL_CONTROLLER)
