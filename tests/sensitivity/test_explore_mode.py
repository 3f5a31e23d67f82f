"""Exploration mode of the mutant runner: how an exploration's exit status and evidence judge a mutant, the
command it runs, and its options.  No exploration runs: the evidence directories are built here."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cck.conformance.explore import (
    CONNECTION_TTLS_MS,
    WINDOWS,
    ClientConfig,
    CutAfterCommands,
    Example,
    FaultSchedule,
    Send,
    Workload,
    add_arguments,
    parse_budget,
)
from tests.sensitivity import _explore_mode
from tests.sensitivity.__main__ import build_parser, main
from tests.sensitivity._explore_mode import (
    ExploreRun,
    ExploreSettings,
    baseline_problem,
    classify,
    duration,
    read_evidence,
    run_all_explore,
)
from tests.sensitivity._runner import Mutant, Ran, Selection, Verdict, markdown

MUTANT = Mutant("m", Path("m.patch"), "area", "breaks something", "some.clause", Selection("broker", ("g.*",)), 60.0)
SETTINGS = ExploreSettings(90.0, 1)
DEADLINE = SETTINGS.deadline_s
EXAMPLE = Example(Workload(ClientConfig(WINDOWS[1], CONNECTION_TTLS_MS[0]), (Send(0),)),
                  FaultSchedule((CutAfterCommands(1, "s2c"),)))  # fmt: skip
FINDING = "1 lost: confirmed, never received (q0-0)"


def evidence_dir(root: Path, *, runs: int = 12, kinds: dict[str, int] | None = None, found: bool = False,
                 confirmed: bool = False, findings: tuple[str, ...] = (FINDING,),
                 kit_error: str | None = None) -> Path:
    """What ``cck explore --evidence-dir root`` writes, as far as the runner reads it."""
    run_dir = root / "explore-20250101-000000-seed1"
    run_dir.mkdir(parents=True)
    summary: dict[str, Any] = {"seed": 1, "target": ["--target", "reference"], "budget_s": 90.0,
                               "max_examples": 1000, "runs": runs, "kinds": kinds or {"clean": runs},
                               "found": found, "confirmed": confirmed}  # fmt: skip
    if found:
        minimal = run_dir / "minimal"
        minimal.mkdir()
        judgement = {"kind": "finding", "findings": list(findings), "notes": [], "anomalies": [], "checker": {}}
        (minimal / "findings.json").write_text(json.dumps({"kind": "finding", "elapsed_s": 1.5,
                                                           "example": EXAMPLE.to_dict(), "judgement": judgement,
                                                           "events": [], "reason": "", "confirmed": confirmed}))
        summary["replay"] = f"cck explore --target reference --replay {minimal / 'example.json'}"
    if kit_error is not None:
        (run_dir / "kit-error-1").mkdir()
        (run_dir / "kit-error-1" / "findings.json").write_text(json.dumps({"kind": "kit-error", "reason": kit_error}))
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return root


def explored(status: int | None, root: Path | None = None, *, timed_out: bool = False, problem: str | None = None,
             output: str = "", found_one: bool = False) -> ExploreRun:
    evidence = read_evidence(root) if root is not None else None
    return ExploreRun(status, 95.0, timed_out, problem, evidence, output, found_one)


@pytest.fixture
def clean_baseline(tmp_path: Path) -> ExploreRun:
    return explored(0, evidence_dir(tmp_path / "baseline", runs=40))


def judged(run: ExploreRun, baseline: ExploreRun) -> tuple[Verdict, str]:
    outcome = classify(MUTANT, baseline, run, DEADLINE)
    assert outcome.killing_cases == []
    return outcome.verdict, outcome.detail


# ------------------------------------------------------------------------------------------------ evidence

def test_no_summary_is_no_evidence(tmp_path: Path) -> None:
    assert read_evidence(tmp_path) is None
    (tmp_path / "explore-x").mkdir()
    (tmp_path / "explore-x" / "summary.json").write_text("{not json")
    assert read_evidence(tmp_path) is None


def test_a_findings_lines_and_minimal_example_are_read(tmp_path: Path) -> None:
    evidence = read_evidence(evidence_dir(tmp_path, found=True, confirmed=True))
    assert evidence is not None
    assert evidence.found
    assert evidence.findings == (FINDING,)
    assert evidence.example == EXAMPLE.describe()


def test_a_long_finding_line_is_clipped(tmp_path: Path) -> None:
    long_line = "1000 lost: confirmed, never received (" + ", ".join(f"q0-{i}" for i in range(1000)) + ")"
    evidence = read_evidence(evidence_dir(tmp_path, found=True, findings=(long_line,)))
    assert evidence is not None
    assert len(evidence.findings[0]) == _explore_mode.MAX_LINE
    assert evidence.findings[0].endswith("...")


# ------------------------------------------------------------------------------------------------ verdicts

def test_a_confirmed_finding_kills(tmp_path: Path, clean_baseline: ExploreRun) -> None:
    verdict, detail = judged(explored(1, evidence_dir(tmp_path / "m", found=True, confirmed=True, runs=7)),
                             clean_baseline)
    assert verdict == Verdict.KILLED
    assert detail == f"finding (confirmed, after 7 run(s)): {FINDING}; minimal example: {EXAMPLE.describe()}"


def test_a_finding_not_confirmed_on_replay_still_kills_and_says_so(tmp_path: Path,
                                                                   clean_baseline: ExploreRun) -> None:
    # exploration's own exit status counts it (1): an intermittent bug fails only some replays
    verdict, detail = judged(explored(1, evidence_dir(tmp_path / "m", found=True)), clean_baseline)
    assert verdict == Verdict.KILLED
    assert "not confirmed on replay" in detail


def test_nothing_found_survives(tmp_path: Path, clean_baseline: ExploreRun) -> None:
    run = explored(0, evidence_dir(tmp_path / "m", runs=12, kinds={"clean": 10, "indeterminate": 2}))
    assert judged(run, clean_baseline) == (Verdict.SURVIVED, "nothing found in 12 run(s): 10 clean, 2 indeterminate")


def test_no_example_run_is_an_error_not_a_survival(tmp_path: Path, clean_baseline: ExploreRun) -> None:
    verdict, detail = judged(explored(0, evidence_dir(tmp_path / "m", runs=0, kinds={})), clean_baseline)
    assert verdict == Verdict.ERROR
    assert "ran no example" in detail


def test_exit_1_without_a_recorded_finding_is_a_crash_not_a_kill(tmp_path: Path,
                                                                 clean_baseline: ExploreRun) -> None:
    crash = "Traceback (most recent call last):\n  ...\nImportError: cannot import name 'x'\n"
    verdict, detail = judged(explored(1, tmp_path / "empty", output=crash), clean_baseline)
    assert verdict == Verdict.ERROR
    assert detail == "exit status 1 and no summary.json: ImportError: cannot import name 'x'"
    verdict, detail = judged(explored(1, evidence_dir(tmp_path / "m"), output=crash), clean_baseline)
    assert verdict == Verdict.ERROR
    assert "records no finding" in detail


def test_a_kit_error_is_an_error_with_its_reason(tmp_path: Path, clean_baseline: ExploreRun) -> None:
    root = evidence_dir(tmp_path / "m", runs=3, kinds={"clean": 2, "kit-error": 1},
                        kit_error="Traceback ...\nAssertionError: the history is malformed\n")
    verdict, detail = judged(explored(3, root), clean_baseline)
    assert verdict == Verdict.ERROR
    assert detail == ("exit status 3, the kit erred and nothing was found (2 clean, 1 kit-error): "
                      "AssertionError: the history is malformed")


@pytest.mark.parametrize(("status", "meaning"), [
    (2, "bad arguments"),
    (4, "the target did not start or a replay could not be judged"),
    (-9, "exit status -9"),
])  # fmt: skip
def test_other_exit_statuses_are_errors(tmp_path: Path, clean_baseline: ExploreRun, status: int,
                                        meaning: str) -> None:
    output = "starting the reference target ...\nerror: the reference target did not start: port in use\n"
    verdict, detail = judged(explored(status, tmp_path / "none", output=output), clean_baseline)
    assert verdict == Verdict.ERROR
    assert meaning in detail
    assert detail.endswith("error: the reference target did not start: port in use")


def test_a_run_past_its_deadline_is_an_error(clean_baseline: ExploreRun) -> None:
    verdict, detail = judged(explored(None, timed_out=True, output="#1 ...\n"), clean_baseline)
    assert (verdict, detail) == (Verdict.ERROR, "past its deadline of 330 s")
    verdict, detail = judged(explored(None, timed_out=True, found_one=True), clean_baseline)
    assert verdict == Verdict.ERROR
    assert "(it had found a failing example)" in detail


def test_a_patch_that_does_not_apply_is_an_error(clean_baseline: ExploreRun) -> None:
    assert judged(explored(None, problem="m.patch does not apply: ..."), clean_baseline) == (
        Verdict.ERROR, "m.patch does not apply: ...")


# ------------------------------------------------------------------------------------------------ the baseline

def test_a_clean_baseline_has_no_problem(clean_baseline: ExploreRun) -> None:
    assert baseline_problem(clean_baseline, DEADLINE) is None


def test_a_baseline_that_finds_something_makes_every_verdict_an_error(tmp_path: Path) -> None:
    baseline = explored(1, evidence_dir(tmp_path / "b", found=True))
    killing = explored(1, evidence_dir(tmp_path / "m", found=True))
    verdict, detail = judged(killing, baseline)
    assert verdict == Verdict.ERROR
    assert detail.startswith(f"baseline: exploration finds something on the unmutated tree: finding (not "
                             f"confirmed on replay, after 12 run(s)): {FINDING}")


@pytest.mark.parametrize(("baseline", "why"), [
    (ExploreRun(4, 3.0, output="error: the reference target did not start: no port"), "baseline: exit status 4"),
    (ExploreRun(None, 330.0, timed_out=True), "baseline: past its deadline"),
    (ExploreRun(None, 0.0, problem="the copy imports ..."), "baseline: the copy imports"),
])  # fmt: skip
def test_a_baseline_that_did_not_run_clean_is_the_kits_error(tmp_path: Path, baseline: ExploreRun, why: str) -> None:
    verdict, detail = judged(explored(0, evidence_dir(tmp_path / "m")), baseline)
    assert verdict == Verdict.ERROR
    assert detail.startswith(why)


# ------------------------------------------------------------------------------------------------ the command

def test_the_command_run_in_the_copy(tmp_path: Path) -> None:
    settings = ExploreSettings(150.0, 7)
    assert settings.argv(tmp_path) == [
        sys.executable, "-m", "cck.conformance", "explore", "--target", "reference", "--budget", "150s",
        "--shrink-budget", "120s", "--seed", "7", "--evidence-dir", str(tmp_path)]
    assert str(settings) == "explore --target reference --budget 150s --shrink-budget 120s --seed 7"
    assert settings.deadline_s == 150.0 + 120.0 + _explore_mode.DEADLINE_MARGIN_S


def test_the_command_is_what_explores_own_parser_reads(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = parser.parse_args(ExploreSettings(2.5, 0).argv(tmp_path)[4:])
    assert (options.target, options.budget, options.shrink_budget, options.seed, options.evidence_dir) == (
        "reference", 2.5, 120.0, 0, tmp_path)


@pytest.mark.parametrize("seconds", [90.0, 2.5, 150.0, 3600.0, 1e6, 0.1])
def test_durations_round_trip_through_explores_budget_parser(seconds: float) -> None:
    assert parse_budget(duration(seconds)) == seconds
    assert "e" not in duration(seconds)


def test_markdown_names_the_finding_and_escapes_the_examples_bar(tmp_path: Path,
                                                                 clean_baseline: ExploreRun) -> None:
    outcome = classify(MUTANT, clean_baseline, explored(1, evidence_dir(tmp_path / "m", found=True)), DEADLINE)
    text = markdown([outcome], 90.0, column="finding")
    assert "| mutant | clause | verdict | finding | s |" in text
    row = next(line for line in text.splitlines() if line.startswith("| `m`"))
    assert row.count(" | ") == 4  # the example's own "|" does not split the row
    assert "\\|" in row


# ------------------------------------------------------------------------------------------------ options

@pytest.mark.parametrize(("text", "seconds"), [("90s", 90.0), ("2m", 120.0), ("2m30s", 150.0), ("45", 45.0)])
def test_budget_parses_like_explores(text: str, seconds: float) -> None:
    options = build_parser().parse_args(["--explore", "--budget", text, "--seed", "3"])
    assert (options.explore, options.budget, options.seed) == (True, seconds, 3)


@pytest.mark.parametrize(("argv", "message"), [
    (["--explore", "--budget", "soon"], "is not a duration"),
    (["--explore", "--budget", "0s"], "must be more than 0 s"),
    (["--explore", "--seed", "-1"], "must be 0 or more"),
    (["--explore", "--seed", "one"], "is not a whole number"),
    (["--budget", "90s"], "--budget, --shrink-budget and --seed are for --explore"),
    (["--seed", "1"], "--budget, --shrink-budget and --seed are for --explore"),
    (["--shrink-budget", "30s"], "--budget, --shrink-budget and --seed are for --explore"),
])  # fmt: skip
def test_bad_options_are_parser_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_list_shows_the_exploration_each_mutant_gets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--explore", "--budget", "2m", "--seed", "5", "--list", "--smoke"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert all(line.endswith("explore --target reference --budget 120s --shrink-budget 120s --seed 5")
               for line in lines)


def test_run_explore_reads_what_the_run_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command is run in the copy with an evidence directory there; the output's tail is kept, and a finding
    printed before the deadline is noticed however much shrinking printed after it."""
    seen: list[tuple[list[str], float]] = []

    def fake_run(tree: Path, argv: list[str], timeout_s: float, log: Path) -> Ran:
        seen.append((argv, timeout_s))
        evidence = Path(argv[argv.index("--evidence-dir") + 1])
        assert evidence.parent == tree / ".sensitivity-evidence"
        log.write_text("found a failing example after 3 run(s); shrinking\n" + "#9 shrink clean\n" * 1000)
        return Ran(None, 331.0, timed_out=True)

    monkeypatch.setattr(_explore_mode, "imports_from", lambda tree: None)
    monkeypatch.setattr(_explore_mode, "run_command", fake_run)
    run = _explore_mode.run_explore(tmp_path, SETTINGS)
    assert seen[0][1] == DEADLINE
    assert seen[0][0][:4] == [sys.executable, "-m", "cck.conformance", "explore"]
    assert (run.exit_status, run.timed_out, run.evidence, run.found_one) == (None, True, None, True)
    assert len(run.output) == _explore_mode.OUTPUT_TAIL
    assert judged(run, explored(0, evidence_dir(tmp_path / "b")))[1] == (
        "past its deadline of 330 s (it had found a failing example)")


# ------------------------------------------------------------------------------------------------ the whole set

def _one_file_tree(tmp_path: Path) -> Path:
    """A git work tree holding one file, ``a.txt`` ("one")."""
    root = tmp_path / "tree"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def test_run_all_retries_the_baseline_once_and_keeps_the_evidence(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The orchestration on a one-file tree, exploration replaced by a script of exit statuses."""
    root = _one_file_tree(tmp_path)
    patch = tmp_path / "m.patch"
    patch.write_text("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n")
    mutants = [Mutant(name, patch, "area", "breaks", "c", Selection("broker", ("g.*",)), 60.0)
               for name in ("killed-one", "survivor")]  # fmt: skip
    # baseline: a finding, then clean on the retry; then one mutant killed, one survived
    script = iter([(1, True), (0, False), (1, True), (0, False)])

    def fake_explore(tree: Path, settings: ExploreSettings) -> ExploreRun:
        assert (tree / "a.txt").read_text() == ("one\n" if tree.name == "baseline" else "two\n")
        status, found = next(script)
        evidence = tree / ".sensitivity-evidence" / f"explore-run-{status}-{found}"
        evidence_dir(evidence, found=found, confirmed=found)
        (tree / ".sensitivity-run.log").write_text("FOUND\n" if found else "nothing found\n")
        return ExploreRun(status, 1.0, evidence=read_evidence(evidence))

    monkeypatch.setattr(_explore_mode, "run_explore", fake_explore)
    lines: list[str] = []
    keep = tmp_path / "kept"
    results = run_all_explore(mutants, SETTINGS, progress=lines.append, root=root, keep=keep)
    assert [o.verdict for o in results.outcomes] == [Verdict.KILLED, Verdict.SURVIVED]
    assert lines[0] == f"baseline  {SETTINGS} ..."
    assert "once more" in lines[1]
    assert lines[2].startswith(f"baseline  {SETTINGS}: nothing found")
    assert lines[3].startswith("[1/2] killed-one: killed (1 s) finding (confirmed")
    assert lines[4].startswith("[2/2] survivor: survived (1 s) nothing found in 12 run(s)")
    assert results.kept == [keep / "killed-one", None]
    assert (keep / "killed-one" / "output.log").read_text() == "FOUND\n"
    assert (keep / "killed-one" / "explore-20250101-000000-seed1" / "minimal" / "findings.json").is_file()
    assert results.baseline_kept == keep / "baseline"


def test_a_baseline_that_finds_something_twice_runs_no_mutant(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    root = _one_file_tree(tmp_path)
    trees: list[str] = []

    def fake_explore(tree: Path, settings: ExploreSettings) -> ExploreRun:
        trees.append(tree.name)
        return ExploreRun(1, 1.0, evidence=read_evidence(evidence_dir(tree / f"e{len(trees)}", found=True)))

    monkeypatch.setattr(_explore_mode, "run_explore", fake_explore)
    lines: list[str] = []
    results = run_all_explore([MUTANT], SETTINGS, progress=lines.append, root=root)
    assert trees == ["baseline", "baseline"]
    assert [o.verdict for o in results.outcomes] == [Verdict.ERROR]
    assert results.outcomes[0].detail.startswith("baseline: exploration finds something on the unmutated tree")
    assert lines[-1].startswith("[1/1] m: error (not run) baseline: ")
