"""The scheduler of a run on several processes (``plugin/_schedule.py``), driven with fake processes that behave as
xdist's workers do (a worker runs a case only once it holds the next one or is told to shut down; it answers a
steal request with the cases it has not started) and the run's gate (an alone case runs with nothing else in
progress).  No xdist worker is started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cck.conformance.plugin._schedule import AloneLastScheduling, read_alone, write_alone


class _Config:
    def __init__(self, processes: int) -> None:
        self._values: dict[str, Any] = {"tx": [f"{processes}*popen"]}

    def getvalue(self, name: str) -> Any:
        return self._values[name]

    def getoption(self, name: str) -> Any:
        return self._values[name]


class _Gateway:
    def __init__(self, name: str) -> None:
        self.id = name


class _Process:
    def __init__(self, name: str, run: _Run) -> None:
        self.gateway = _Gateway(name)
        self.shutting_down = False
        self.queue: list[int] = []
        self.running: tuple[float, int] | None = None  # (ends at, case)
        self._run = run

    def send_runtest_some(self, indices: list[int]) -> None:
        self._run.sent(self, indices)
        self.queue.extend(indices)

    def send_steal(self, indices: list[int]) -> None:
        self._run.steals.append((self, indices))

    def shutdown(self) -> None:
        self.shutting_down = True


class _Run:
    """Cases of the given lengths, the last ``alone`` of them marked alone, on fake processes."""

    def __init__(self, tmp_path: Path, seconds: list[float], alone: int, processes: int = 3,
                 name_alone: bool = True) -> None:
        self.seconds = seconds
        self.alone = set(range(len(seconds) - alone, len(seconds)))
        names = [f"case{i}" for i in range(len(seconds))]
        if name_alone:
            write_alone(tmp_path, [names[i] for i in sorted(self.alone)])
        self.steals: list[tuple[_Process, list[int]]] = []
        self.alone_sent_beside: list[int] = []  # the most ordinary cases a process held when an alone one went out
        self.started: dict[int, float] = {}
        self.scheduler = AloneLastScheduling(_Config(processes), None, tmp_path)
        self.nodes = [_Process(f"gw{i}", self) for i in range(processes)]
        for node in self.nodes:
            self.scheduler.add_node(node)
            self.scheduler.add_node_collection(node, names)
        self.scheduler.schedule()

    def sent(self, node: _Process, indices: list[int]) -> None:
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
                assert not self.scheduler.has_pending
                assert self.scheduler.tests_finished
                assert len(self.started) == len(self.seconds)
                return now
            ending = min(active, key=lambda n: n.running[0] if n.running else 0.0)
            assert ending.running is not None
            now, case = ending.running
            ending.running = None
            ending.queue.remove(case)
            self.scheduler.mark_test_complete(ending, case)


def _suite_shape() -> list[float]:
    """342 cases of 1 to 5 s, the 20 before the alone ones 3 s each (a module of HA cases), the last 16 alone."""
    return [1.0 + (i * 7 % 5) for i in range(306)] + [3.0] * 20 + [5.0 + i % 4 for i in range(16)]


def test_the_alone_cases_go_out_once_no_process_has_a_case_to_give_up(tmp_path: Path) -> None:
    run = _Run(tmp_path, _suite_shape(), alone=16)
    ended = run.makespan()
    # every process did its share of the ordinary cases before the alone ones ran one after another
    ordinary = sum(run.seconds[:-16])
    assert ended <= ordinary / 3 + sum(run.seconds[-16:]) + max(run.seconds)  # (431 s; 447 s if not held back)
    assert run.alone_sent_beside
    assert max(run.alone_sent_beside) <= 2
    first_alone = min(run.started[i] for i in run.alone)
    late = [i for i in range(len(run.seconds) - 16) if run.started[i] > first_alone]
    assert len(late) <= len(run.nodes)  # at most the one next case a process still held


def test_a_process_starts_with_a_run_of_consecutive_cases(tmp_path: Path) -> None:
    run = _Run(tmp_path, _suite_shape(), alone=16)
    queues = [node.queue for node in run.nodes]
    assert [len(q) for q in queues] == [108, 109, 109]  # the 326 ordinary cases, shared out
    for queue in queues:
        assert queue == list(range(queue[0], queue[0] + len(queue)))  # a module's cases stay together
    assert not run.alone & {i for q in queues for i in q}


def test_with_no_case_named_alone_nothing_is_held_back(tmp_path: Path) -> None:
    run = _Run(tmp_path, [1.0] * 30, alone=3, name_alone=False)
    assert sorted(i for node in run.nodes for i in node.queue) == list(range(30))
    run.makespan()  # the gate alone keeps the alone cases apart


def test_a_short_run_hands_its_alone_cases_out_at_once(tmp_path: Path) -> None:
    run = _Run(tmp_path, [1.0] * 6, alone=2)  # two ordinary cases each is nothing to give up
    assert sorted(i for node in run.nodes for i in node.queue) == list(range(6))
    assert run.makespan() <= 4.0


@pytest.mark.parametrize("nodeids", [[], ["a.py::t[x.1]", "b.py::t[y.2]"]])
def test_the_alone_cases_are_read_as_written(tmp_path: Path, nodeids: list[str]) -> None:
    assert read_alone(tmp_path) == frozenset()
    write_alone(tmp_path, nodeids)
    assert read_alone(tmp_path) == frozenset(nodeids)
    assert [p.name for p in tmp_path.iterdir()] == ["alone-cases"]
