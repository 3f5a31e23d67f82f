"""The draw counter (python -m tests.sensitivity.draws): what it counts, on hand-made examples, and a short run of
the exploration loop with a runner that runs nothing."""

from __future__ import annotations

import dataclasses

from cck.conformance.explore import (
    ClientConfig,
    CutAfterCommands,
    CutHalfOpen,
    Example,
    FaultSchedule,
    Receive,
    Send,
    Workload,
)
from cck.conformance.explore._model import Commit, Rollback, Xa

from .draws import COUNTED, draws, main


def _example(*operations: object) -> Example:
    return Example(Workload(ClientConfig(), tuple(operations)), FaultSchedule((CutAfterCommands(0),)))  # type: ignore[arg-type]


def test_it_counts_a_rollback_after_a_transacted_receive_any_forget_and_a_half_open_cut_without_a_window() -> None:
    rolled_back, forgotten = COUNTED["rolled back after a tx receive"], COUNTED["forget"]
    half_open = COUNTED["half-open cut, no window"]
    assert rolled_back(_example(Receive(0, 1, tx=True), Send(1, 1), Rollback()))
    assert not rolled_back(_example(Send(0, 1), Receive(0, 1, tx=False), Rollback()))
    assert not rolled_back(_example(Receive(0, 1, tx=True, ack=False), Rollback()))
    assert not rolled_back(_example(Send(0, 1), Receive(0, 1, tx=True), Commit(), Rollback()))
    assert forgotten(_example(Xa("send", 1, 0, 1), Xa("commit", 1), Xa("forget", 1)))
    assert forgotten(_example(Xa("forget", 2)))
    assert not forgotten(_example(Xa("send", 1, 0, 1), Xa("commit", 1)))
    windowless = Example(Workload(ClientConfig(window=-1), (Send(0, 1),)), FaultSchedule((CutHalfOpen(0),)))
    assert half_open(windowless)
    assert not half_open(dataclasses.replace(windowless, workload=Workload(ClientConfig(window=1024), (Send(0, 1),))))
    assert not half_open(_example(Send(0, 1)))


def test_a_short_run_counts_every_run_and_prints_a_row_per_slice() -> None:
    drawn = draws(seed=1, examples=40)
    assert 30 <= len(drawn.runs) <= 40  # an example drawn twice is not run twice
    rows = drawn.table(per=10).splitlines()
    assert rows[0].startswith("| runs | reliability | rolled back after a tx receive | forget | half-open cut, "
                              "no window |")
    assert rows[-1].startswith(f"| all {len(drawn.runs)} |")
    assert len(rows) == 2 + -(-len(drawn.runs) // 10) + 1
    assert main(["--examples", "20", "--per", "10"]) == 0
