"""The exploration loop with a stand-in runner (no broker): clean runs end at the example cap; a failing
example is shrunk to its minimal form, replayed to confirm, and written as evidence with its replay command."""

from __future__ import annotations

import io
import json
from pathlib import Path

from cck.conformance.explore import (
    Example,
    ExploreConfig,
    Outcome,
    Send,
    explore,
    judge,
    load_example,
)
from cck.conformance.oracles import History


def _clean(example: Example) -> Outcome:
    history = History()
    return Outcome(example, "clean", 0.0, judge(history, drain_complete=True, desynchronised=False))


def _bug(example: Example) -> Outcome:
    """"Loses" a message whenever a durable send of two or more messages meets any fault."""
    history = History()
    history.send("plain", "k1", producer="P", seq=0)
    fails = any(isinstance(op, Send) and op.count >= 2 and op.durable for op in example.workload.operations)
    if not fails:
        history.received("drain", "k1", delivery_count=1, redelivered=False)
    verdict = judge(history, drain_complete=True, desynchronised=False)
    return Outcome(example, verdict.kind, 0.0, verdict, tuple(history))


def test_clean_runs_stop_at_the_example_cap() -> None:
    out = io.StringIO()
    result = explore(_clean, ExploreConfig(budget_s=60, seed=3, max_examples=15), out)
    assert result.runs == 15
    assert result.failing is None
    assert result.exit_status == 0
    assert out.getvalue().count("\n") == 15
    assert "clean" in out.getvalue()


def test_the_same_seed_draws_the_same_examples() -> None:
    seen: list[list[str]] = [[], []]
    for run in seen:
        def record(example: Example, run: list[str] = run) -> Outcome:
            run.append(example.describe())
            return _clean(example)
        explore(record, ExploreConfig(budget_s=60, seed=7, max_examples=10), io.StringIO())
    assert seen[0] == seen[1]


def test_a_spent_budget_stops_the_loop() -> None:
    ticks = iter(range(0, 1000, 10))  # every look at the clock is 10 s later
    result = explore(_clean, ExploreConfig(budget_s=25, max_examples=500), io.StringIO(), clock=lambda: next(ticks))
    assert 1 <= result.runs <= 3


def test_a_failing_example_is_shrunk_confirmed_and_written(tmp_path: Path) -> None:
    out = io.StringIO()
    config = ExploreConfig(budget_s=60, seed=1, max_examples=300, evidence_dir=tmp_path,
                           target_args=("--target", "reference"))
    result = explore(_bug, config, out)
    assert result.failing is not None
    assert result.confirmed
    assert result.exit_status == 1
    minimal = result.failing.example
    assert minimal.size == (1, 1)  # one fault, one operation
    (op,) = minimal.workload.operations
    assert op == Send(0, 2, durable=True, blocking=True, tx=False)
    assert "shrinking" in out.getvalue()
    assert "confirmed" in out.getvalue()
    assert result.evidence is not None
    found = result.evidence / "minimal"
    assert load_example(found / "example.json") == minimal
    assert json.loads((found / "findings.json").read_text())["kind"] == "finding"
    assert [json.loads(line)["f"] for line in (found / "history.jsonl").read_text().splitlines()] == ["send", "send"]
    replay = (found / "replay.txt").read_text().strip()
    assert replay.startswith("cck explore --target reference --replay ")
    assert replay.endswith("example.json")
    assert (result.evidence / "examples.jsonl").read_text().count("\n") == result.runs
