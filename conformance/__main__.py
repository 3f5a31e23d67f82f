"""``python -m cck.conformance``: run the conformance suite, list its cases, or print the clause table.

    cck run --broker-url tcp://broker:61616
    cck run --target-file my-brokers.toml
    cck run --target reference --evidence-dir evidence -- -x -k window
    cck run --target artemis --artemis-version 2.28.0 --case 'reattach.*'
    cck run --client artemis@2.44.0 --case 'backoff.*'
    cck cases
    cck timing-check --client kit --repeat 20
    cck clauses --level SHOULD
    cck explore --target reference --budget 10m --seed 1

``run`` is pytest over the kit's suite with the plugin's options (docs/conformance.md); anything it does not
know is passed on to pytest, and its exit status is pytest's: 0 every case conforms, 1 a case failed,
2 none failed but some were indeterminate (or pytest was interrupted), 3 none failed but the kit itself erred
in some (KIT_ERROR; also pytest's internal error), 4-5 pytest's own.  A run judges one subject: the broker
(the target), or with --client the client under test (client cases only).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from cck.conformance.cases import Case
from cck.conformance.clauses import LEVELS, ClauseError, load_clauses
from cck.conformance.explore import DESCRIPTION as EXPLORE_DESCRIPTION
from cck.conformance.explore import add_arguments as add_explore_arguments
from cck.conformance.explore import run_explore
from cck.conformance.plugin import SUITE_DIR, case_of
from cck.conformance.targets import TARGET_KINDS


def _run_args(options: argparse.Namespace, extra: Sequence[str]) -> list[str]:
    args: list[str] = []
    for flag, value in (("--target", options.target), ("--client", options.client),
                        ("--artemis-version", options.artemis_version),
                        ("--broker-url", options.broker_url), ("--target-file", options.target_file),
                        ("--broker-user", options.broker_user),
                        ("--broker-password", options.broker_password), ("--timing-scale", options.timing_scale),
                        ("--timing-tolerance", options.timing_tolerance), ("--evidence-dir", options.evidence_dir),
                        ("--deviations", options.deviations)):
        if value is not None:
            args += [flag, str(value)]
    if options.jobs > 1:  # pytest-xdist; worksteal: the kit's scheduler (alone cases last, plugin/_schedule.py)
        args += ["-n", str(options.jobs), "--dist", "worksteal"]
    for glob in options.case or ():
        args += ["--case", glob]
    for clause in options.clause or ():
        args += ["--clause", clause]
    if options.strict:
        args.append("--strict-should")
    if options.skip_preflight:
        args.append("--skip-preflight")
    extra = [a for a in extra if a != "--"]
    # the suite unless the caller named tests of their own (a path among the extra arguments)
    if not any(not a.startswith("-") and Path(a.split("::")[0]).exists() for a in extra):
        args.append(str(SUITE_DIR))
    return args + extra


def _cmd_run(options: argparse.Namespace, extra: Sequence[str]) -> int:
    if options.repeat < 1:
        print(f"error: --repeat {options.repeat}: the number of runs must be at least 1", file=sys.stderr)
        return 4
    if options.jobs < 1:
        print(f"error: --jobs {options.jobs}: the number of processes must be at least 1", file=sys.stderr)
        return 4
    if options.repeat > 1:
        return _repeat(options.repeat, options.argv)
    return int(pytest.main(_run_args(options, extra)))


def _repeat(times: int, argv: Sequence[str]) -> int:
    """Run the same selection ``times`` times in a row, each in a fresh process, stopping at the first run
    that does not conform: how a timing case shows it passes run after run, not once."""
    again: list[str] = []
    skip = False
    for arg in argv:  # the same command line without --repeat
        if skip:
            skip = False
            continue
        if arg == "--repeat":
            skip = True
            continue
        if not arg.startswith("--repeat="):
            again.append(arg)
    started = time.monotonic()
    for run in range(1, times + 1):
        began = time.monotonic()
        status = subprocess.run([sys.executable, "-m", "cck.conformance", *again], check=False).returncode
        print(f"run {run}/{times}: exit status {status} ({time.monotonic() - began:.0f} s)", file=sys.stderr,
              flush=True)
        if status != 0:
            print(f"stopped: run {run} of {times} did not conform ({run - 1} in a row conformed)", file=sys.stderr)
            return status
    print(f"{times} runs in a row conformed ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    return 0


class _CaseCollector:
    """A pytest plugin that keeps the cases pytest collected."""

    def __init__(self) -> None:
        self.cases: list[Case] = []

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.cases = [case for case in map(case_of, items) if case is not None]


def _cmd_cases(options: argparse.Namespace, extra: Sequence[str]) -> int:
    collector = _CaseCollector()
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        status = pytest.main([str(SUITE_DIR), "--collect-only", "-q", "-p", "no:cacheprovider", *extra],
                             plugins=[collector])
    if status not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        print(output.getvalue(), end="")
        return int(status)
    width = max((len(c.id) for c in collector.cases), default=0)
    for case in collector.cases:
        print(f"{case.id:<{width}}  {case.subject:<6}  {case.clause}  {case.description}")
    print(f"{len(collector.cases)} cases", file=sys.stderr)
    return 0


def _cmd_timing_check(options: argparse.Namespace, extra: Sequence[str]) -> int:
    """Give the client a schedule 20 % off and see the backoff oracle fail it, every repetition."""
    # imported here: the suite's modules are loaded by this command only
    from cck.conformance.plugin import resolve_settings
    from cck.conformance.suite import summary, timing_check
    from cck.conformance.suite.test_backoff import TIMED

    cli = {"client": options.client, "timing_scale": options.timing_scale, "timing_tolerance": options.timing_tolerance}
    try:
        settings = resolve_settings(cli, {}, {})
    except pytest.UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 4
    assert settings.client is not None
    if options.repeat < 1 or options.rows < 1 or not 0 < options.skew < 1:
        print("error: --repeat and --rows must be at least 1, --skew between 0 and 1", file=sys.stderr)
        return 4
    tolerance = settings.tolerance  # the default, or the one given, widened by --timing-scale
    print(f"timing check of {settings.client.describe()}: a schedule {options.skew:.0%} off, tolerance "
          f"{tolerance.describe()}, {options.repeat} repetition(s)", file=sys.stderr, flush=True)
    # every run cuts or refuses the client on purpose: its "connection failed" warnings say nothing here
    logging.getLogger("cck.reference.client").setLevel(logging.ERROR)
    runs = timing_check(settings.client, TIMED, tolerance, fraction=options.skew, repeat=options.repeat,
                        rows=options.rows)
    every, lines = summary(runs, options.repeat)
    for line in lines:
        print(line)
    print("every wrong schedule was caught in every repetition" if every else
          "some wrong schedule went unnoticed in some repetition", file=sys.stderr)
    return 0 if every else 1


def _cmd_clauses(options: argparse.Namespace, extra: Sequence[str]) -> int:
    try:
        table = load_clauses(options.table)
    except ClauseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    shown = [c for c in table.values() if options.level is None or c.level == options.level]
    for clause in shown:
        print(f"{clause.id}  [{clause.level}]  {clause.source}")
        if options.verbose:
            print(f"    {clause.text}")
            if clause.implementation:
                print(f"    implementation: {clause.implementation}")
    print(f"{len(shown)} clauses", file=sys.stderr)
    return 0


def _cmd_explore(options: argparse.Namespace, extra: Sequence[str]) -> int:
    return run_explore(options, options.explore_parser)


def _parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog or "python -m cck.conformance", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the conformance suite (pytest with the kit's plugin)",
                              description="Run the conformance suite. Options not listed here go to pytest "
                                          "(put them after --).")
    run.add_argument("--target", choices=TARGET_KINDS, help="the broker under test (url is implied by --broker-url, "
                                                             "command by --target-file, reference by --client)")
    run.add_argument("--client", metavar="CLIENT", help="judge a client instead of the broker: kit, or artemis[@V] "
                                                        "(the stock client of a pinned version); client cases only")
    run.add_argument("--artemis-version", metavar="V", help="a pinned Artemis version (target artemis), or the "
                                                             "declared version of a url target")
    run.add_argument("--broker-url", metavar="URL", help="tcp://host:port of a broker the kit does not run")
    run.add_argument("--target-file", metavar="FILE", help="a TOML file naming brokers you run and the commands that "
                                                           "start, stop, kill, configure them and follow their log "
                                                           "(docs/targets.md)")
    run.add_argument("--skip-preflight", action="store_true", help="do not check, before the first case, that the "
                                                                   "brokers named answer (url, command targets)")
    run.add_argument("--broker-user", metavar="USER")
    run.add_argument("--broker-password", metavar="PASSWORD")
    run.add_argument("--timing-scale", metavar="F", help="multiply deadlines and timing tolerances by F")
    run.add_argument("--timing-tolerance", metavar="ABS_MS,REL", help="e.g. 100,0.1")
    run.add_argument("--evidence-dir", metavar="DIR", help="write evidence and allure results under DIR/<run-id>/")
    run.add_argument("--deviations", metavar="FILE", help="a known-deviations file instead of the kit's")
    run.add_argument("--case", action="append", metavar="GLOB", help="only cases whose ID matches (repeatable)")
    run.add_argument("--clause", action="append", metavar="ID_OR_GLOB", help="only cases of these clauses "
                                                                             "(repeatable)")
    run.add_argument("--strict", action="store_true", help="a missed SHOULD is FAIL (pytest: --strict-should)")
    run.add_argument("--repeat", type=int, default=1, metavar="N",
                     help="run the selection N times in a row, each in a fresh process; stop at the first run that "
                          "does not conform (for timing cases)")
    run.add_argument("--jobs", type=int, default=1, metavar="N",
                     help="run the cases on N processes, each with brokers of its own (default 1); a case whose "
                          "verdict compares measured times runs while no other case does (docs/conformance.md)")
    run.set_defaults(handler=_cmd_run)
    check = commands.add_parser("timing-check", help="give a client a schedule 20%% off and check the backoff oracle "
                                                     "fails it (the timing tolerance's sensitivity on this machine)")
    check.add_argument("--client", default="kit", metavar="CLIENT", help="kit (default) or artemis[@V]")
    check.add_argument("--repeat", type=int, default=1, metavar="N", help="repetitions (default 1)")
    check.add_argument("--skew", type=float, default=0.2, metavar="F",
                       help="how far off each parameter is set, both ways (default 0.2: 20%%)")
    check.add_argument("--rows", type=int, default=3, metavar="N",
                       help="rows per wrong parameter: those it moves furthest out of their band (default 3)")
    check.add_argument("--timing-scale", metavar="F", help="as for run")
    check.add_argument("--timing-tolerance", metavar="ABS_MS,REL", help="as for run")
    check.set_defaults(handler=_cmd_timing_check)
    cases = commands.add_parser("cases", help="list the suite's case IDs (pytest --collect-only)")
    cases.set_defaults(handler=_cmd_cases)
    clauses = commands.add_parser("clauses", help="print the clause table")
    clauses.add_argument("--level", choices=LEVELS, help="only clauses of this level")
    clauses.add_argument("--table", type=Path, metavar="DIR", help="a clause table directory instead of the kit's")
    clauses.add_argument("-v", "--verbose", action="store_true", help="print each clause's text too")
    clauses.set_defaults(handler=_cmd_clauses)
    explore = commands.add_parser("explore", help="hypothesis-driven fault exploration: random workloads and fault "
                                                  "schedules, a failing one shrunk and written with its replay",
                                  description=EXPLORE_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_explore_arguments(explore)
    explore.set_defaults(handler=_cmd_explore, explore_parser=explore)
    return parser


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``prog``: the name usage lines give (``cck`` when the ``cck`` command runs this)."""
    parser = _parser(prog)
    options, extra = parser.parse_known_args(argv)
    options.argv = list(sys.argv[1:] if argv is None else argv)  # what --repeat runs again
    if extra and options.command in ("clauses", "timing-check", "explore"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return int(options.handler(options, extra))


if __name__ == "__main__":
    sys.exit(main())
