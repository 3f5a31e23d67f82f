"""How a mutant's run is judged against its selection's baseline."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sensitivity._runner import Mutant, Outcome, RunResult, Selection, Verdict, classify, markdown

MUTANT = Mutant("m", Path("m.patch"), "area", "breaks something", "some.clause", Selection("broker", ("g.*",)), 60.0)
BASE = RunResult({"g.1": "PASS", "g.2": "PASS", "g.3": "UNSUPPORTED"}, 0, 5.0)


def judged(verdicts: dict[str, str], *, baseline: RunResult = BASE, timed_out: bool = False,
           problem: str | None = None) -> Outcome:
    return classify(MUTANT, baseline, RunResult(verdicts, 1, 7.0, timed_out=timed_out, problem=problem))


def test_a_fail_kills() -> None:
    outcome = judged({"g.1": "FAIL", "g.2": "PASS", "g.3": "UNSUPPORTED"})
    assert outcome.verdict == Verdict.KILLED
    assert outcome.killing_cases == ["g.1"]
    assert outcome.seconds == 7.0


def test_a_fail_kills_even_beside_kit_errors_and_after_the_deadline() -> None:
    outcome = judged({"g.1": "KIT_ERROR", "g.2": "FAIL"}, timed_out=True)
    assert outcome.verdict == Verdict.KILLED
    assert outcome.killing_cases == ["g.2"]


def test_all_conforming_survives() -> None:
    assert judged(dict(BASE.verdicts)).verdict == Verdict.SURVIVED


def test_pass_lenient_where_the_baseline_passed_is_detected_not_killed() -> None:
    outcome = judged({"g.1": "PASS_LENIENT", "g.2": "PASS"})
    assert outcome.verdict == Verdict.DETECTED_SHOULD
    assert outcome.killing_cases == ["g.1"]


def test_pass_lenient_already_in_the_baseline_is_not_detection() -> None:
    baseline = RunResult({"g.1": "PASS_LENIENT"}, 0, 1.0)
    assert judged({"g.1": "PASS_LENIENT"}, baseline=baseline).verdict == Verdict.SURVIVED


@pytest.mark.parametrize("verdict", ["KIT_ERROR", "INDETERMINATE"])
def test_unjudged_cases_are_errors_not_kills(verdict: str) -> None:
    outcome = judged({"g.1": verdict, "g.2": "PASS"})
    assert outcome.verdict == Verdict.ERROR
    assert f"g.1 {verdict}" in outcome.detail


def test_a_deadline_without_a_fail_is_an_error() -> None:
    outcome = judged({"g.1": "PASS"}, timed_out=True)
    assert outcome.verdict == Verdict.ERROR
    assert "deadline" in outcome.detail


def test_a_patch_that_did_not_apply_is_an_error() -> None:
    outcome = judged({}, problem="m.patch does not apply: ...")
    assert outcome.verdict == Verdict.ERROR
    assert "does not apply" in outcome.detail


@pytest.mark.parametrize(("baseline", "why"), [
    (RunResult({"g.1": "FAIL"}, 1, 1.0), "does not conform: g.1 FAIL"),
    (RunResult({"g.1": "KIT_ERROR"}, 3, 1.0), "does not conform: g.1 KIT_ERROR"),
    (RunResult({}, 4, 1.0), "ran no case"),
    (RunResult({"g.1": "PASS"}, None, 1.0, timed_out=True), "deadline"),
])  # fmt: skip
def test_a_baseline_that_does_not_conform_is_the_kits_error(baseline: RunResult, why: str) -> None:
    outcome = judged({"g.1": "FAIL"}, baseline=baseline)
    assert outcome.verdict == Verdict.ERROR
    assert why in outcome.detail


def test_a_case_failing_in_the_baseline_too_does_not_kill() -> None:
    # only reachable when the baseline's FAIL is tolerated (it is not: see above); the rule still holds
    outcome = judged({"g.1": "FAIL"}, baseline=RunResult({"g.1": "FAIL"}, 1, 1.0))
    assert outcome.verdict == Verdict.ERROR


def test_markdown_table_and_rate() -> None:
    outcomes = [judged({"g.1": "FAIL"}), judged({"g.1": "PASS"})]
    text = markdown(outcomes, 5.0)
    assert "| `m` | `some.clause` | killed | `g.1` | 7 |" in text
    assert "Killed 1 of 2 (50 %)" in text
