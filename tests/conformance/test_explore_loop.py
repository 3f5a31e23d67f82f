"""The exploration loop with a stand-in runner (no broker): clean runs end at the example cap; a failing
example is shrunk to its minimal form, replayed to confirm, and written as evidence with its replay command, its
sequence diagram and the pytest case that replays it."""

from __future__ import annotations

import dataclasses
import io
import json
import tempfile
from pathlib import Path

import pytest

from cck.conformance.explore import (
    ClientConfig,
    CutAfterCommands,
    Example,
    ExploreConfig,
    FaultSchedule,
    FreshBroker,
    HistorySpool,
    Outcome,
    Send,
    Workload,
    explore,
    judge,
    load_example,
    regression_file_name,
    replay_until_found,
    write_outcome,
)
from cck.conformance.explore._explore import _confirm
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
    assert result.runs + result.repeats == 15  # an example drawn again is not run again
    assert result.failing is None
    assert result.exit_status == 0
    assert out.getvalue().count("\n") == result.runs
    assert "clean" in out.getvalue()


def test_the_same_seed_draws_the_same_examples() -> None:
    seen: list[list[str]] = [[], []]
    for run in seen:
        def record(example: Example, run: list[str] = run) -> Outcome:
            run.append(example.describe())
            return _clean(example)
        explore(record, ExploreConfig(budget_s=60, seed=7, max_examples=10), io.StringIO())
    assert seen[0] == seen[1]


def test_an_example_drawn_again_while_exploring_is_not_run_again_but_one_being_shrunk_is() -> None:
    ran: list[str] = []

    def record(example: Example) -> Outcome:
        ran.append(json.dumps(example.to_dict(), sort_keys=True))
        return _clean(example)

    out = io.StringIO()
    result = explore(record, ExploreConfig(budget_s=60, seed=1, max_examples=200), out)
    assert result.repeats > 0  # hypothesis draws some examples again (a draw the example does not use varies)
    assert len(ran) == len(set(ran)) == result.runs
    assert result.runs + result.repeats <= 200
    assert out.getvalue().count("\n") == result.runs  # a repeat prints no line
    # while shrinking, the same example is run again as often as it is drawn (the tries of an intermittent bug)
    shrunk: list[str] = []

    def failing(example: Example) -> Outcome:
        shrunk.append(json.dumps(example.to_dict(), sort_keys=True))
        return _bug(example)

    found = explore(failing, ExploreConfig(budget_s=60, seed=1, max_examples=200, tries=3), io.StringIO())
    assert found.failing is not None
    assert len(shrunk) > len(set(shrunk))


def test_workloads_have_at_most_one_idle_spell() -> None:
    from hypothesis import given, settings

    from cck.conformance.explore._model import Idle
    from cck.conformance.explore._strategies import workloads

    @settings(max_examples=200, database=None)
    @given(workloads(max_operations=12))
    def check(workload: Workload) -> None:
        assert sum(isinstance(op, Idle) for op in workload.operations) <= 1

    check()


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
    assert replay.endswith("example.json --tries 20")  # a race may need several runs to fail again
    assert (result.evidence / "examples.jsonl").read_text().count("\n") == result.runs
    # the sequence diagram, the anomaly's key in it
    assert (found / "sequence.svg").read_text().startswith("<svg ")
    assert "k1 LOST" in (found / "sequence.svg").read_text()
    assert "FINDING: 1 lost: confirmed, never received (k1)" in (found / "sequence.txt").read_text()
    assert (result.evidence / "confirmation" / "sequence.svg").is_file()
    # the pytest case replays the minimal example
    case = found / regression_file_name(minimal)
    namespace: dict[str, object] = {}
    exec(compile(case.read_text(), str(case), "exec"), namespace)  # the file under test
    assert namespace["EXAMPLE"] == minimal
    summary = json.loads((result.evidence / "summary.json").read_text())
    assert summary["regression_case"] == str(case.resolve())
    assert summary["diagram"] == str((found / "sequence.svg").resolve())


def test_an_intermittent_finding_is_still_shrunk_and_confirmed_by_running_each_candidate_again() -> None:
    # a race: every failing example fails only on every third run of it
    runs: dict[str, int] = {}

    def sometimes(example: Example) -> Outcome:
        runs[example.describe()] = runs.get(example.describe(), 0) + 1
        outcome = _bug(example)
        return outcome if runs[example.describe()] % 3 == 1 else _clean(example)

    out = io.StringIO()
    result = explore(sometimes, ExploreConfig(budget_s=60, seed=1, max_examples=300, tries=3), out)
    assert result.failing is not None
    assert result.failing.example.size == (1, 1)  # shrunk as far as the steady bug is
    assert result.confirmed
    assert "retry" in out.getvalue()
    assert "confirmed: it fails again (replay " in out.getvalue()


def test_with_one_try_an_intermittent_finding_stops_the_shrinking_at_the_first_clean_rerun() -> None:
    seen: set[str] = set()

    def first_time_only(example: Example) -> Outcome:
        fresh = example.describe() not in seen
        seen.add(example.describe())
        return _bug(example) if fresh else _clean(example)

    result = explore(first_time_only, ExploreConfig(budget_s=60, seed=1, max_examples=300, tries=1), io.StringIO())
    assert result.failing is not None
    assert not result.confirmed


def test_a_minimal_example_that_does_not_fail_again_falls_back_on_the_next_smallest_that_does() -> None:
    # the failures in the order shrinking met them (the smallest last): only a batch of three or more messages
    # fails again; the smallest failing example (two) never does twice
    def batch(count: int) -> Example:
        return Example(Workload(ClientConfig(), (Send(0, count),)), FaultSchedule((CutAfterCommands(0, "c2s"),)))

    failures = [_bug(batch(5)), _bug(batch(3)), _bug(batch(3)), _bug(batch(2))]
    replayed: list[int] = []

    def once(example: Example, phase: str) -> Outcome:
        assert phase == "confirm"
        [send] = example.workload.operations
        assert isinstance(send, Send)
        replayed.append(send.count)
        return _bug(example) if send.count >= 3 else _clean(example)

    out = io.StringIO()
    failing, confirmation = _confirm(failures, 2, once, out)
    assert failing.example == batch(3)
    assert confirmation.kind == "finding"
    assert replayed == [2, 2, 3]  # the smallest twice (the tries), then the next smallest, each example once
    assert "NOT confirmed" in out.getvalue()
    assert "next smallest failing example (2)" in out.getvalue()


def test_when_no_failing_example_fails_again_the_smallest_is_kept_unconfirmed() -> None:
    failures = [_bug(Example(Workload(ClientConfig(), (Send(0, n),)), FaultSchedule((CutAfterCommands(0, "c2s"),))))
                for n in (4, 3, 2)]
    failing, confirmation = _confirm(failures, 1, lambda example, phase: _clean(example), io.StringIO())
    assert failing is failures[-1]
    assert confirmation.kind == "clean"


def test_an_unconfirmed_finding_gets_a_diagram_but_no_regression_case(tmp_path: Path) -> None:
    runs: list[Example] = []

    def once(example: Example) -> Outcome:  # fails once, never again: shrinking finds nothing, the replay is clean
        runs.append(example)
        return _bug(example) if len(runs) == 1 else _clean(example)

    config = ExploreConfig(budget_s=60, seed=1, max_examples=20, evidence_dir=tmp_path)
    result = explore(lambda e: once(e) if any(isinstance(op, Send) and op.count >= 2 and op.durable
                                              for op in e.workload.operations) else _clean(e), config, io.StringIO())
    assert result.failing is not None
    assert not result.confirmed
    assert result.evidence is not None
    found = result.evidence / "minimal"
    assert (found / "sequence.svg").is_file()
    assert not list(found.glob("test_*.py"))


def test_one_runs_evidence_has_its_diagram_and_for_a_finding_its_case(tmp_path: Path) -> None:
    """What ``cck explore --replay FILE --evidence-dir D`` writes to ``D/replay``."""
    example = Example.from_dict({"workload": {"config": {"window": 1024, "connection_ttl_ms": 10000},
                                              "operations": [{"kind": "send", "queue": 0, "count": 2,
                                                              "durable": True, "blocking": True, "tx": False}]},
                                 "schedule": {"faults": []}})
    config = ExploreConfig(budget_s=1, seed=5, target_args=("--target", "reference"))
    write_outcome(tmp_path / "clean", _clean(example), config, title="replay")
    write_outcome(tmp_path / "replay", _bug(example), config, title="replay", regression_case_file=True)
    assert sorted(p.name for p in (tmp_path / "clean").iterdir()) == [
        "attempts.jsonl", "ends.jsonl", "example.json", "findings.json", "history.jsonl", "replay.txt",
        "sequence.svg", "sequence.txt", "timeline.jsonl", "wire.jsonl"]
    assert (tmp_path / "replay" / regression_file_name(example)).is_file()
    assert "cck explore: replay, finding" in (tmp_path / "replay" / "sequence.txt").read_text()


def test_a_replay_runs_until_the_first_finding_and_no_further() -> None:
    runs: list[int] = []

    def fails_on_the_third(example: Example) -> Outcome:
        runs.append(1)
        return _bug(example) if len(runs) == 3 else _clean(example)

    example = Example.from_dict({"workload": {"config": {"window": 65536, "connection_ttl_ms": 60000},
                                              "operations": [{"kind": "send", "queue": 0, "count": 2,
                                                              "durable": True, "blocking": True, "tx": False}]},
                                 "schedule": {"faults": [{"kind": "cut-after-commands", "n": 0,
                                                          "direction": "c2s", "at": 0}]}})
    out = io.StringIO()
    assert replay_until_found(fails_on_the_third, example, 5, out).kind == "finding"
    assert len(runs) == 3
    assert "run 3 of at most 5: finding" in out.getvalue()
    runs.clear()
    assert replay_until_found(fails_on_the_third, example, 2, io.StringIO()).kind == "clean"
    assert len(runs) == 2


def test_every_runs_history_is_written_to_histories_jsonl_with_its_run_number(tmp_path: Path) -> None:
    """What the report's Exploration page reads: each run's operations (``Op.to_dict()`` with ``run`` and ``index``),
    the run's op count and its checker's verdict in ``examples.jsonl``, the finding in ``summary.json``."""
    result = explore(_bug, ExploreConfig(budget_s=60, seed=1, max_examples=300, evidence_dir=tmp_path), io.StringIO())
    assert result.evidence is not None
    assert result.failing is not None
    examples = [json.loads(line) for line in (result.evidence / "examples.jsonl").read_text().splitlines()]
    rows = [json.loads(line) for line in (result.evidence / "histories.jsonl").read_text().splitlines()]
    by_run: dict[int, list[dict[str, object]]] = {}
    for row in rows:
        by_run.setdefault(row["run"], []).append(row)
    assert sorted(by_run) == [example["run"] for example in examples] == list(range(1, result.runs + 1))
    for example in examples:
        ops = by_run[example["run"]]
        assert [op["index"] for op in ops] == list(range(example["ops"]))
        received = [] if example["kind"] == "finding" else [("receive", "ok", "k1")]
        assert [(op["f"], op["type"], op["value"]) for op in ops] == [("send", "invoke", "k1"), ("send", "ok", "k1"),
                                                                      *received]
        assert example["checker"] == {"ok": example["kind"] == "clean", "final_drain_complete": True,
                                      "duplicates_allowed": True}
    # the rest of a row is the op itself
    assert History.from_dicts({k: v for k, v in row.items() if k not in ("run", "index")}
                              for row in by_run[1]).to_dicts() == [
        {k: v for k, v in row.items() if k not in ("run", "index")} for row in by_run[1]]
    summary = json.loads((result.evidence / "summary.json").read_text())
    assert summary["finding"] == result.failing.describe() == "finding: 1 lost: confirmed, never received (k1)"
    assert summary["example"] == result.failing.example.describe()
    assert summary["finished"].endswith("Z")


def test_without_an_evidence_directory_no_history_is_kept(tmp_path: Path) -> None:
    result = explore(_bug, ExploreConfig(budget_s=60, seed=1, max_examples=5), io.StringIO())
    assert result.evidence is None
    assert not list(tmp_path.iterdir())


def test_the_history_spool_goes_to_disk_past_its_size_and_keeps_every_row(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    rolled: list[bool] = []
    rollover = tempfile.SpooledTemporaryFile.rollover

    def spy(self: tempfile.SpooledTemporaryFile[str]) -> None:
        rolled.append(True)
        rollover(self)

    monkeypatch.setattr(tempfile.SpooledTemporaryFile, "rollover", spy)
    history = History()
    for n in range(40):
        history.send("plain", f"k{n}", producer="P", seq=n)
    with HistorySpool(max_bytes=2000) as spool:
        spool.add(1, history)
        assert rolled  # 80 ops are well over 2000 characters: on disk from here
        spool.add(2, list(history)[:1])
        spool.write_to(tmp_path / "histories.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "histories.jsonl").read_text().splitlines()]
    assert [(row["run"], row["index"]) for row in rows] == [(1, i) for i in range(80)] + [(2, 0)]
    assert rows[-1] == {"run": 2, "index": 0, **next(iter(history)).to_dict()}


def test_a_rare_race_is_still_shrunk_because_the_example_that_failed_is_replayed_up_to_confirm_tries() -> None:
    # every failing example fails on its first run and then only on every eighth: hypothesis replays the example
    # that failed before shrinking it, and with three tries that replay would pass (flaky: nothing shrunk)
    runs: dict[str, int] = {}

    def rare(example: Example) -> Outcome:
        runs[example.describe()] = runs.get(example.describe(), 0) + 1
        return _bug(example) if runs[example.describe()] % 8 == 1 else _clean(example)

    out = io.StringIO()
    result = explore(rare, ExploreConfig(budget_s=60, seed=1, max_examples=300, tries=3, confirm_tries=20), out)
    shrunk = Send(0, 2, durable=True, blocking=True, tx=False)  # as far as the bug lets it shrink (above)
    assert result.failing is not None
    assert result.failing.example.workload.operations == (shrunk,)
    assert result.confirmed
    runs.clear()
    fewer = explore(rare, ExploreConfig(budget_s=60, seed=1, max_examples=300, tries=3, confirm_tries=3),
                    io.StringIO())
    assert fewer.failing is not None
    assert fewer.failing.example.workload.operations != (shrunk,)  # replayed like any candidate: not shrunk


def test_a_race_seen_only_on_a_broker_just_started_is_confirmed_by_restarting_before_every_second_try() -> None:
    # as Artemis's reattach duplication: the bug shows on the first runs after the broker starts, not once warm
    restarts: list[int] = []
    since_start = [0]

    def restart() -> None:
        restarts.append(len(restarts) + 1)
        since_start[0] = 0

    def cold_only(example: Example) -> Outcome:
        since_start[0] += 1
        return _bug(example) if since_start[0] == 1 else _clean(example)

    since_start[0] = 5  # the broker has run a while when the example is found
    failures = [_bug(Example(Workload(ClientConfig(), (Send(0, 2),)), FaultSchedule((CutAfterCommands(0, "c2s"),))))]
    out = io.StringIO()
    failing, confirmation = _confirm(failures, 4, lambda example, phase: cold_only(example), out,
                                     FreshBroker(restart, out))
    assert failing is failures[0]
    assert confirmation.kind == "finding"
    assert restarts == [1]  # try 1 as the broker was (clean), try 2 on a broker just restarted (fails)
    assert "broker restarted before try 2" in out.getvalue()
    assert "confirmed: it fails again (replay 2 of at most 4)" in out.getvalue()
    # without a restartable target the same replays never fail again
    since_start[0] = 5
    _failing, unconfirmed = _confirm(failures, 4, lambda example, phase: cold_only(example), io.StringIO())
    assert unconfirmed.kind == "clean"


def test_a_replay_restarts_before_every_second_try_and_a_failed_restart_stops_the_restarts() -> None:
    calls: list[str] = []

    def failing_restart() -> None:
        calls.append("restart")
        raise RuntimeError("the JVM did not come back")

    def clean(example: Example) -> Outcome:
        calls.append("run")
        return _clean(example)

    example = Example(Workload(ClientConfig(), (Send(0, 1),)), FaultSchedule((CutAfterCommands(0, "c2s"),)))
    out = io.StringIO()
    assert replay_until_found(clean, example, 5, out, FreshBroker(failing_restart, out)).kind == "clean"
    assert calls == ["run", "restart", "run", "run", "run", "run"]  # one restart tried, then none
    assert "did not restart before try 2 (the JVM did not come back)" in out.getvalue()
    calls.clear()
    assert replay_until_found(clean, example, 3, io.StringIO(), FreshBroker(lambda: calls.append("restart"),
                                                                            io.StringIO())).kind == "clean"
    assert calls == ["run", "restart", "run", "run"]


def test_a_finding_that_cites_only_set_aside_clauses_is_known_and_exploring_goes_on() -> None:
    from cck.conformance.explore._explore import cites, set_aside

    def known_deviation(example: Example) -> Outcome:
        outcome = _bug(example)
        if outcome.judgement is None or outcome.kind != "finding":
            return outcome
        findings = ("window.zero: a session with confirmation window 0 was reattached on connection 2",)
        return Outcome(example, "finding", 0.0, dataclasses.replace(outcome.judgement, findings=findings))

    out = io.StringIO()
    result = explore(known_deviation, ExploreConfig(budget_s=60, seed=1, max_examples=40,
                                                    ignored_clauses=("window.zero",)), out)
    assert result.failing is None  # nothing shrunk: the loop went on to the example cap
    assert result.runs + result.repeats == 40
    assert result.kinds.get("known", 0) > 0
    assert result.exit_status == 0
    # without setting it aside the same runner's finding stops the loop
    assert explore(known_deviation, ExploreConfig(budget_s=60, seed=1, max_examples=40), io.StringIO()).failing
    # a finding with one line citing another clause (or none) is not set aside
    assert cites("client: attempt 3 came early [backoff.multiplier]", "backoff.multiplier")
    assert not cites("window.zeroes: x", "window.zero")
    failing = _bug(Example(Workload(ClientConfig(), (Send(0, 2),)), FaultSchedule((CutAfterCommands(0, "c2s"),))))
    assert failing.judgement is not None
    mixed = dataclasses.replace(failing, judgement=dataclasses.replace(
        failing.judgement, findings=("window.zero: a window-0 session reattached", *failing.judgement.findings)))
    assert set_aside(mixed, ("window.zero",)).kind == "finding"
    assert set_aside(mixed, ()).kind == "finding"
