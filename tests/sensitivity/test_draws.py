"""The draw counter (python -m tests.sensitivity.draws): what it counts, on hand-made examples, and a short run of
the exploration loop with a runner that runs nothing."""

from __future__ import annotations

from cck.conformance.explore import ClientConfig, CutAfterCommands, Example, FaultSchedule, Receive, Send, Workload
from cck.conformance.explore._model import Commit, Rollback, Xa

from .draws import COUNTED, draws, main


def _example(*operations: object) -> Example:
    return Example(Workload(ClientConfig(), tuple(operations)), FaultSchedule((CutAfterCommands(0),)))  # type: ignore[arg-type]


def test_it_counts_a_rolled_back_round_and_a_forget_right_after_a_completion_of_the_same_xid() -> None:
    rolled_back, forgotten = COUNTED["rolled-back round"], COUNTED["forget after completion"]
    assert rolled_back(_example(Send(0, 1), Receive(0, 1, tx=True), Rollback()))
    assert not rolled_back(_example(Send(0, 1), Receive(0, 1, tx=False), Rollback()))
    assert not rolled_back(_example(Send(0, 1), Receive(0, 1, tx=True), Commit()))
    assert forgotten(_example(Xa("send", 1, 0, 1), Xa("commit", 1), Xa("forget", 1)))
    assert not forgotten(_example(Xa("send", 1, 0, 1), Xa("commit", 1), Xa("forget", 2)))
    assert not forgotten(_example(Xa("send", 1, 0, 1), Xa("forget", 1)))


def test_a_short_run_counts_every_run_and_prints_a_row_per_slice() -> None:
    drawn = draws(seed=1, examples=40)
    assert 30 <= len(drawn.runs) <= 40  # an example drawn twice is not run twice
    rows = drawn.table(per=10).splitlines()
    assert rows[0].startswith("| runs | reliability | rolled-back round | forget after completion |")
    assert rows[-1].startswith(f"| all {len(drawn.runs)} |")
    assert len(rows) == 2 + -(-len(drawn.runs) // 10) + 1
    assert main(["--examples", "20", "--per", "10"]) == 0
