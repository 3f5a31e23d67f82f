"""python -m tests.sensitivity [--only NAME ...] [--smoke] [--out FILE]: run the mutants (docs/sensitivity.md).

Exit status 0 when every mutant run was killed, 1 when some survived (or were only detected as a missed
SHOULD), 2 when some could not be judged (a patch that does not apply, a baseline that does not conform, a run
with KIT_ERROR or INDETERMINATE and no FAIL, a run past its deadline).

python -m tests.sensitivity --explore [--budget 90s] [--shrink-budget 2m] [--seed 1] [--only NAME ...]: judge each
mutant by fault exploration (cck explore --target reference) in its mutated copy instead of by its cases; the same
exit statuses (an error: exploration exited 2, 3 or 4, ran past its deadline, or found something on the unmutated tree).

python -m tests.sensitivity --regenerate [NAME ...]: write the mutants' patches from their edits (edits.toml)
applied to a copy of the current tree; runs nothing.  Exit status 2 when an edit no longer matches the tree."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cck.conformance.explore import parse_budget, parse_seed

from ._explore_mode import (
    DEADLINE_MARGIN_S,
    SHRINK_BUDGET_S,
    ExploreSettings,
    baseline_problem,
    explore_row,
    run_all_explore,
)
from ._regenerate import EditError, regenerate
from ._runner import REPO_ROOT, Mutant, Outcome, Verdict, load_mutants, markdown, run_all, summary

DEFAULT_BUDGET = "90s"
DEFAULT_SEED = 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.sensitivity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", default=[], help="run only these mutants")
    parser.add_argument("--smoke", action="store_true", help="run only the mutants marked smoke = true")
    parser.add_argument("--out", type=Path, metavar="FILE",
                        help="write the results as JSON to FILE and the table to FILE with suffix .md "
                             "(default evidence/sensitivity/<UTC time>.json)")
    parser.add_argument("--list", action="store_true", help="list the mutants and their selections, run nothing")
    parser.add_argument("--regenerate", nargs="*", metavar="NAME",
                        help="write mutants/NAME.patch (default: every mutant's) from edits.toml applied to a copy "
                             "of the current tree, run nothing")
    parser.add_argument("--explore", action="store_true",
                        help="judge each mutant by fault exploration (cck explore --target reference) in its copy "
                             "instead of by its cases (default output evidence/sensitivity/<UTC time>-explore.json)")
    # None: not given, so that giving either without --explore is an error rather than silently ignored
    parser.add_argument("--budget", type=parse_budget, metavar="DURATION",
                        help=f"--explore: each exploration's budget: 90s, 10m, 2m30s (default {DEFAULT_BUDGET}); "
                             f"its deadline is the budget plus the shrink budget plus {DEADLINE_MARGIN_S:.0f} s")
    parser.add_argument("--shrink-budget", type=parse_budget, metavar="DURATION",
                        help=f"--explore: each exploration's shrink budget (default {SHRINK_BUDGET_S:.0f}s): a kill "
                             "needs a finding confirmed on replay, not a minimal one, so a shorter one measures "
                             "the set sooner")
    parser.add_argument("--seed", type=parse_seed, metavar="S",
                        help=f"--explore: hypothesis's seed, the same for every run (default {DEFAULT_SEED})")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    options = parser.parse_args(argv)
    if not options.explore and (options.budget is not None or options.seed is not None
                                or options.shrink_budget is not None):
        parser.error("--budget, --shrink-budget and --seed are for --explore")
    mutants = load_mutants()
    if options.regenerate is not None:
        return _regenerate(parser, options.regenerate, {m.name for m in mutants})
    unknown = sorted(set(options.only) - {m.name for m in mutants})
    if unknown:
        parser.error(f"--only: no mutant named {', '.join(unknown)}")
    if options.only:
        mutants = [m for m in mutants if m.name in options.only]
    if options.smoke:
        mutants = [m for m in mutants if m.smoke]
    settings = ExploreSettings(options.budget or parse_budget(DEFAULT_BUDGET),
                               DEFAULT_SEED if options.seed is None else options.seed,
                               SHRINK_BUDGET_S if options.shrink_budget is None else options.shrink_budget)
    if options.list:
        try:
            for m in mutants:
                print(f"{m.name:45} {m.clause:32} {settings if options.explore else m.selection}")
            sys.stdout.flush()
        except BrokenPipeError:  # `--list | head`: the reader has all it wants
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    if options.explore:
        return _explore(mutants, settings, options.out)
    started = time.monotonic()
    outcomes, baselines = run_all(mutants, progress=lambda line: print(line, flush=True))
    total = time.monotonic() - started
    baseline_s = sum(b.seconds for b in baselines.values())
    table = markdown(outcomes, baseline_s)
    _report(table, total, options.out or _default_out(""), {
        "mode": "cases",
        "summary": {**summary(outcomes), "baseline_seconds": round(baseline_s, 1), "total_seconds": round(total, 1)},
        "baselines": {str(s): {"exit_status": b.exit_status, "seconds": round(b.seconds, 1), "verdicts": b.verdicts,
                               "timed_out": b.timed_out, "problem": b.problem} for s, b in baselines.items()},
        "mutants": [o.to_json() for o in outcomes],
    })
    return _exit_status(outcomes)


def _explore(mutants: list[Mutant], settings: ExploreSettings, out: Path | None) -> int:
    """Exploration mode: each mutant judged by ``cck explore`` in its copy; the evidence of the baseline and of
    every mutant not survived kept beside the results (``<FILE stem>.evidence/<mutant>/``)."""
    out = out or _default_out("-explore")
    keep = out.parent / f"{out.stem}.evidence"
    started = time.monotonic()
    results = run_all_explore(mutants, settings, progress=lambda line: print(line, flush=True), keep=keep)
    total = time.monotonic() - started
    base = results.baseline
    table = markdown(results.outcomes, base.seconds, column="finding")
    _report(table, total, out, {
        "mode": "explore", "budget_s": settings.budget_s, "seed": settings.seed, "command": str(settings),
        "deadline_s": settings.deadline_s,
        "summary": {**summary(results.outcomes), "baseline_seconds": round(base.seconds, 1),
                    "total_seconds": round(total, 1)},
        "baseline": {"exit_status": base.exit_status, "seconds": round(base.seconds, 1), "timed_out": base.timed_out,
                     "problem": baseline_problem(base, settings.deadline_s),
                     "runs": base.evidence.runs if base.evidence else 0,
                     "kinds": base.evidence.summary.get("kinds", {}) if base.evidence else {},
                     "evidence": str(results.baseline_kept) if results.baseline_kept else None},
        "mutants": [explore_row(o, r, settings, k) for o, r, k in zip(results.outcomes, results.runs, results.kept,
                                                                       strict=True)],
    })
    return _exit_status(results.outcomes)


def _default_out(suffix: str) -> Path:
    return REPO_ROOT / "evidence" / "sensitivity" / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}{suffix}.json"


def _report(table: str, total: float, out: Path, results: dict[str, Any]) -> None:
    """Print the table and write the results as JSON to ``out`` and the table beside it (``.md``)."""
    print()
    print(table)
    print(f"total {total:.0f} s")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    out.with_suffix(".md").write_text(table)
    print(f"results: {out} and {out.with_suffix('.md')}")


def _exit_status(outcomes: list[Outcome]) -> int:
    if any(o.verdict == Verdict.ERROR for o in outcomes):
        return 2
    return 0 if all(o.verdict == Verdict.KILLED for o in outcomes) else 1


def _regenerate(parser: argparse.ArgumentParser, names: list[str], known: set[str]) -> int:
    unknown = sorted(set(names) - known)
    if unknown:
        parser.error(f"--regenerate: no mutant named {', '.join(unknown)}")
    try:
        changed, errors = regenerate(names or sorted(known))
    except EditError as exc:
        print(exc, file=sys.stderr)
        return 2
    done = len(names or known) - len(errors)
    print(f"{done} patch(es) made, {len(changed)} changed" + (f": {', '.join(changed)}" if changed else ""))
    for name in sorted(errors):
        print(f"{name}: not made: {errors[name]}", file=sys.stderr)
    return 2 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
