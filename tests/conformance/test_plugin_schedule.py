"""The scheduler of a run on several processes (``plugin/_schedule.py``), driven with the fake processes of
``benchmarks/schedule_replay.py``, which behave as xdist's workers do (a worker runs a case only once it holds the
next one or is told to shut down; it answers a steal request with the cases it has not started), behind the run's
gate (an alone case runs with nothing else in progress).  No xdist worker is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.schedule_replay import Replay
from cck.conformance.plugin._schedule import read_alone, write_alone


def _run(tmp_path: Path, seconds: list[float], alone: int, name_alone: bool = True) -> Replay:
    """The last ``alone`` of the cases marked alone, on three fake processes."""
    return Replay(tmp_path, seconds, set(range(len(seconds) - alone, len(seconds))), name_alone=name_alone)


def _suite_shape() -> list[float]:
    """342 cases of 1 to 5 s, the 20 before the alone ones 3 s each (a module of HA cases), the last 16 alone."""
    return [1.0 + (i * 7 % 5) for i in range(306)] + [3.0] * 20 + [5.0 + i % 4 for i in range(16)]


def test_the_alone_cases_go_out_once_no_process_has_a_case_to_give_up(tmp_path: Path) -> None:
    run = _run(tmp_path, _suite_shape(), alone=16)
    ended = run.makespan()
    assert not run.scheduler.has_pending
    assert run.scheduler.tests_finished
    # every process did its share of the ordinary cases before the alone ones ran one after another
    ordinary = sum(run.seconds[:-16])
    assert ended <= ordinary / 3 + sum(run.seconds[-16:]) + max(run.seconds)  # (431 s; 447 s if not held back)
    assert run.alone_sent_beside
    assert max(run.alone_sent_beside) <= 2
    first_alone = min(run.started[i] for i in run.alone)
    late = [i for i in range(len(run.seconds) - 16) if run.started[i] > first_alone]
    assert len(late) <= len(run.nodes)  # at most the one next case a process still held


def test_a_process_starts_with_a_run_of_consecutive_cases(tmp_path: Path) -> None:
    run = _run(tmp_path, _suite_shape(), alone=16)
    queues = [node.queue for node in run.nodes]
    assert [len(q) for q in queues] == [108, 109, 109]  # the 326 ordinary cases, shared out
    for queue in queues:
        assert queue == list(range(queue[0], queue[0] + len(queue)))  # a module's cases stay together
    assert not run.alone & {i for q in queues for i in q}


def test_with_no_case_named_alone_nothing_is_held_back(tmp_path: Path) -> None:
    run = _run(tmp_path, [1.0] * 30, alone=3, name_alone=False)
    assert sorted(i for node in run.nodes for i in node.queue) == list(range(30))
    run.makespan()  # the gate alone keeps the alone cases apart


def test_a_short_run_hands_its_alone_cases_out_at_once(tmp_path: Path) -> None:
    run = _run(tmp_path, [1.0] * 6, alone=2)  # two ordinary cases each is nothing to give up
    assert sorted(i for node in run.nodes for i in node.queue) == list(range(6))
    assert run.makespan() <= 4.0


@pytest.mark.parametrize("nodeids", [[], ["a.py::t[x.1]", "b.py::t[y.2]"]])
def test_the_alone_cases_are_read_as_written(tmp_path: Path, nodeids: list[str]) -> None:
    assert read_alone(tmp_path) == frozenset()
    write_alone(tmp_path, nodeids)
    assert read_alone(tmp_path) == frozenset(nodeids)
    assert [p.name for p in tmp_path.iterdir()] == ["alone-cases"]
