"""``cck explore``: its options and what it does with them (wired into ``python -m cck.conformance``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import logging
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from cck.conformance.targets import TargetError, Topology, make_target

from ._explore import (
    ExploreConfig,
    FreshBroker,
    explore,
    load_example,
    replay_command,
    replay_until_found,
    write_outcome,
)
from ._model import Example, ExampleError
from ._regression import regression_file_name
from ._restart import restart_share, restarter_of
from ._runner import Outcome, run_example
from ._security_model import AnyExample, SecurityExample
from ._security_oracle import Realm
from ._security_runner import run_security
from ._security_targets import MANAGED, SecuredBrokers

__all__ = ["DESCRIPTION", "add_arguments", "parse_budget", "parse_seed", "run_explore"]

DESCRIPTION = """\
Explore: hypothesis draws a workload (producers and consumers on a few queues, durable or not, blocking or
asynchronous sends, receive + ack, local transactions; the client's confirmation window and connection-ttl) and
a schedule of protocol-aware faults over it (cut after the n-th confirmable command or frame of a type, drop,
delay, duplicate, reset during reattach, refuse connects), runs it with the kit's client (reconnecting, so
sessions reattach) through the fault proxy in front of the target, drains the queues and judges the history.
A failing example is shrunk, replayed once more to confirm, and written to --evidence-dir with the one-line
command that replays it, a sequence diagram of the run (sequence.svg) and, once confirmed, a pytest case that
replays it for a regression suite.  Beside these, unless --no-security, it draws security examples (logins with
drawn credentials, then sends, consumers, browsers and queue creations on a fixed name space) against two more
brokers of the target's kind, secured (strict and guest realms), judged by a model of their security settings.

Exit status: 0 nothing found, 1 a finding, 2 bad arguments, 3 the kit erred (no finding), 4 the target did
not start or a replay could not be judged.  docs/exploration.md says what is judged and what is not."""

EXPLORE_TARGETS = ("reference", "artemis")
_BUDGET = re.compile(r"^(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+(?:\.\d+)?)s?)?$")


def parse_budget(text: str) -> float:
    """``10m``, ``90s``, ``1h``, ``2m30s`` or plain seconds, as seconds (> 0)."""
    match = _BUDGET.match(text.strip())
    if not text.strip() or match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: use e.g. 90s, 10m, 1h or 2m30s")
    seconds = int(match["h"] or 0) * 3600 + int(match["m"] or 0) * 60 + float(match["s"] or 0)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"the budget must be more than 0 s, got {text!r}")
    return seconds


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


#: What a clause is: dotted lower-case words (``window.zero``, ``backoff.multiplier``).
_CLAUSE = re.compile(r"[a-z][a-z0-9-]*(\.[a-z0-9-]+)+")


def _clause(text: str) -> str:
    if not _CLAUSE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a clause (dotted words, such as window.zero)")
    return text


def parse_seed(text: str) -> int:
    """A hypothesis seed from the command line: a whole number, 0 or more (argparse's ``type``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", choices=EXPLORE_TARGETS, required=True,
                        help="the broker to explore, started by the kit: the reference broker or a pinned Artemis")
    parser.add_argument("--artemis-version", metavar="V", help="a pinned Artemis version (target artemis; default: "
                                                               "the pins' default)")
    parser.add_argument("--budget", type=parse_budget, default=parse_budget("10m"), metavar="DURATION",
                        help="how long to generate examples: 90s, 10m, 1h, 2m30s (default 10m); shrinking a "
                             "finding may take up to --shrink-budget more")
    parser.add_argument("--shrink-budget", type=parse_budget, default=parse_budget("2m"), metavar="DURATION",
                        help="time for shrinking once a failing example is found (default 2m)")
    parser.add_argument("--seed", type=parse_seed, default=0, metavar="S",
                        help="hypothesis's seed: the same seed draws the same examples (default 0)")
    parser.add_argument("--max-examples", type=_positive, default=1000, metavar="N",
                        help="at most N examples (default 1000)")
    parser.add_argument("--tries", type=_positive, default=3, metavar="N",
                        help="runs of one example while shrinking (and of the --replay example) before it counts "
                             "as clean: an intermittent bug fails only some runs of the same example; where the kit "
                             "runs the broker, every second run restarts it first (default 3)")
    parser.add_argument("--confirm-tries", type=_positive, default=20, metavar="N",
                        help="runs of the example that failed, before shrinking it, and replays of the minimal "
                             "example to confirm it, each stopping at the first that fails; the replay command "
                             "written for it uses this many --tries (default 20)")
    parser.add_argument("--evidence-dir", type=Path, metavar="DIR",
                        help="write every example's summary, and a failing example's minimal form, history, wire "
                             "log, findings, replay command, sequence diagram and (once confirmed) pytest case, "
                             "under DIR/explore-<time>-seed<S>/")
    parser.add_argument("--replay", type=Path, metavar="FILE",
                        help="run the example in FILE (an example.json the exploration wrote) and judge it: up to "
                             "--tries runs, stopping at the first finding")
    parser.add_argument("--ignore-clause", action="append", default=[], metavar="CLAUSE", type=_clause,
                        help="set aside findings that cite only CLAUSE (repeatable): a target's known deviation, "
                             "e.g. window.zero against Artemis 2.44.0 (its window.mode.6), is then recorded as a "
                             "'known' run and exploring goes on instead of stopping to shrink it")
    parser.add_argument("--no-security", action="store_true",
                        help="draw the reliability family only: do not start the two secured brokers the security "
                             "family's examples run against (docs/exploration.md, \"The security family\")")


def _target_args(options: argparse.Namespace) -> tuple[str, ...]:
    args: tuple[str, ...] = ("--target", options.target)
    if options.artemis_version is not None:
        args += ("--artemis-version", options.artemis_version)
    return args


def run_explore(options: argparse.Namespace, parser: argparse.ArgumentParser, out: TextIO | None = None,
                err: TextIO | None = None) -> int:
    """Carry out ``cck explore`` (argument errors end through ``parser.error``: exit status 2); progress and the
    result go to ``out`` (stdout), what is being started to ``err`` (stderr)."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    if options.artemis_version is not None and options.target != "artemis":
        parser.error("--artemis-version is for --target artemis")
    if options.ignore_clause and options.replay is not None:
        parser.error("--ignore-clause is for an exploration: a --replay judges its example as it is")
    example: AnyExample | None = None
    if options.replay is not None:
        try:
            example = load_example(options.replay)
        except ExampleError as exc:
            parser.error(f"--replay {options.replay}: {exc}")
    # every example cuts and resets the client on purpose: its "connection failed" warnings say nothing here
    logging.getLogger("cck.reference.client").setLevel(logging.ERROR)
    config = ExploreConfig(options.budget, options.seed, options.max_examples, options.shrink_budget,
                           options.evidence_dir, _target_args(options), tries=options.tries,
                           confirm_tries=options.confirm_tries, ignored_clauses=tuple(options.ignore_clause))
    with tempfile.TemporaryDirectory(prefix="cck-explore-") as workdir:
        try:
            target = make_target(options.target, version=options.artemis_version, workdir=Path(workdir),
                                 topology=Topology())
        except ValueError as exc:
            parser.error(str(exc))
        print(f"starting the {options.target} target ...", file=err, flush=True)
        try:
            target.start()
        except TargetError as exc:
            target.close()
            print(f"error: the {options.target} target did not start: {exc}", file=err)
            return 4
        # the security family's secured brokers: for an exploration (unless --no-security) or a security replay
        secure = options.target in MANAGED and (isinstance(example, SecurityExample)
                                                 or (example is None and not options.no_security))
        with target, contextlib.ExitStack() as stack:
            url, version = target.url, target.protocol_version
            restarter = restarter_of(target)
            config = dataclasses.replace(config, restart=restarter is not None)
            secured: dict[Realm, str] = {}
            if secure:
                try:
                    secured = dict(stack.enter_context(SecuredBrokers(options.target, options.artemis_version,
                                                                      Path(workdir), err)).urls)
                except TargetError as exc:
                    print(f"error: a secured {options.target} broker did not start: {exc}", file=err)
                    return 4
                config = dataclasses.replace(config, security=True)

            def run(candidate: AnyExample) -> Outcome:
                if isinstance(candidate, SecurityExample):
                    return asyncio.run(run_security(secured, candidate, protocol_version=version))
                return asyncio.run(run_example(url, candidate, protocol_version=version, restarter=restarter))

            restart = None if restarter is None else functools.partial(restarter, False)
            if example is not None:
                if isinstance(example, Example) and example.schedule.restarts and restarter is None:
                    print(f"error: the example restarts the broker, which the {options.target} target cannot do",
                          file=err)
                    return 2
                return _replay(run, example, config, out, FreshBroker(restart, out))
            if restarter is not None:
                # how often examples restart the broker follows how long a restart takes (measured once, here)
                began = time.monotonic()
                try:
                    restarter(False)
                except TargetError as exc:
                    print(f"error: the {options.target} target did not restart: {exc}", file=err)
                    return 4
                took = time.monotonic() - began
                config = dataclasses.replace(config, restart_one_in=restart_share(took))
                print(f"a restart of the broker took {took:.1f} s: one example in {config.restart_one_in} restarts "
                      "it", file=err, flush=True)
            print(f"exploring {options.target} {target.version} at {url}: seed {config.seed}, budget "
                  f"{config.budget_s:g} s, at most {config.max_examples} examples"
                  + (f"; findings citing only {', '.join(config.ignored_clauses)} set aside as known"
                     if config.ignored_clauses else ""), file=err, flush=True)
            result = explore(run, config, out, restart=restart)
    print(f"{result.runs} run(s): " + ", ".join(f"{n} {kind}" for kind, n in sorted(result.kinds.items()))
          + (f"; {result.repeats} example(s) drawn again and not run again" if result.repeats else ""), file=out)
    print(f"most exposed: {result.most_exposed.describe()}", file=out)
    if result.failing is None:
        print("nothing found" + (f" ({len(result.kit_errors)} kit error(s))" if result.kit_errors else ""), file=out)
    else:
        print(f"FOUND{' (confirmed)' if result.confirmed else ' (not confirmed on replay)'}: "
              f"{result.failing.describe()}", file=out)
    if result.evidence is not None:
        print(f"evidence: {result.evidence}", file=out)
        if result.failing is not None:
            example_file = result.evidence / "minimal" / "example.json"
            print("replay: " + replay_command(config.target_args, example_file, config.confirm_tries), file=out)
            print(f"diagram: {example_file.parent / 'sequence.svg'}", file=out)
            case_file = example_file.parent / regression_file_name(result.failing.example)
            if case_file.is_file():
                print(f"regression case: {case_file}", file=out)
    return result.exit_status


def _replay(run: Callable[[AnyExample], Outcome], example: AnyExample, config: ExploreConfig, out: TextIO,
            fresh: FreshBroker) -> int:
    print(f"replaying: {example.describe()}", file=out)
    outcome = replay_until_found(run, example, config.tries, out, fresh)
    for note in outcome.judgement.notes if outcome.judgement is not None else ():
        print(f"  note: {note}", file=out)
    if config.evidence_dir is not None:
        example_file = write_outcome(config.evidence_dir / "replay", outcome, config, title="replay",
                                     regression_case_file=outcome.kind == "finding")
        print(f"evidence: {example_file.parent} (diagram: sequence.svg)", file=out)
    return {"clean": 0, "finding": 1, "kit-error": 3}.get(outcome.kind, 4)
