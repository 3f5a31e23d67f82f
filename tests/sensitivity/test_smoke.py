"""The smoke subset of the mutant set (mutants.toml ``smoke = true``): three fast mutants really run, each on a
throw-away copy against an unmutated baseline, and each must be killed.  The whole set takes too long for
``make test``; ``python -m tests.sensitivity`` runs it (docs/sensitivity.md)."""

from __future__ import annotations

import pytest

from tests.sensitivity._runner import Verdict, baseline_problem, load_mutants, run_all

pytestmark = pytest.mark.sensitivity


def test_smoke_mutants_are_killed() -> None:
    mutants = [m for m in load_mutants() if m.smoke]
    assert len(mutants) == 3
    lines: list[str] = []
    outcomes, baselines = run_all(mutants, progress=lines.append)
    report = "\n".join(lines)
    for baseline in baselines.values():
        assert baseline_problem(baseline) is None, report
    assert all(o.verdict == Verdict.KILLED for o in outcomes), report
    assert all(o.killing_cases for o in outcomes), report
