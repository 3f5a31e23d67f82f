"""python -m tests.sensitivity [--only NAME ...] [--smoke] [--out FILE]: run the mutants (docs/sensitivity.md).

Exit status 0 when every mutant run was killed, 1 when some survived (or were only detected as a missed
SHOULD), 2 when some could not be judged (a patch that does not apply, a baseline that does not conform, a run
with KIT_ERROR or INDETERMINATE and no FAIL, a run past its deadline).

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

from ._regenerate import EditError, regenerate
from ._runner import REPO_ROOT, Verdict, load_mutants, markdown, run_all, summary


def main(argv: list[str] | None = None) -> int:
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
    options = parser.parse_args(argv)
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
    if options.list:
        try:
            for m in mutants:
                print(f"{m.name:45} {m.clause:32} {m.selection}")
            sys.stdout.flush()
        except BrokenPipeError:  # `--list | head`: the reader has all it wants
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    started = time.monotonic()
    outcomes, baselines = run_all(mutants, progress=lambda line: print(line, flush=True))
    total = time.monotonic() - started
    baseline_s = sum(b.seconds for b in baselines.values())
    table = markdown(outcomes, baseline_s)
    print()
    print(table)
    print(f"total {total:.0f} s")
    out = options.out or REPO_ROOT / "evidence" / "sensitivity" / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "summary": {**summary(outcomes), "baseline_seconds": round(baseline_s, 1), "total_seconds": round(total, 1)},
        "baselines": {str(s): {"exit_status": b.exit_status, "seconds": round(b.seconds, 1), "verdicts": b.verdicts,
                               "timed_out": b.timed_out, "problem": b.problem} for s, b in baselines.items()},
        "mutants": [o.to_json() for o in outcomes],
    }, indent=2) + "\n")
    out.with_suffix(".md").write_text(table)
    print(f"results: {out} and {out.with_suffix('.md')}")
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
