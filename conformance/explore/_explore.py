"""The exploration loop: hypothesis draws examples, a runner runs each; on a finding hypothesis shrinks it, the
minimal example is replayed once more to confirm, and the evidence is written.

The runner is injected (example -> :class:`Outcome`), and so is the clock, so the loop is tested without a
broker.  hypothesis runs without its database, with its own per-example deadline off, seeded from ``seed``; the
time budget is the loop's: once it is spent the property stops hypothesis (a budget spent while shrinking ends
the shrinking, with the smallest failing example found so far).  While it generates, each run's exposure (how
much confirmable work the broker held unconfirmed when a connection broke, :mod:`._guidance`) is a hypothesis
target, so hypothesis's optimiser spends part of the examples on mutating the most exposed ones.
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import shutil
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings, target
from hypothesis.errors import Flaky

from cck.conformance.oracles import Op

from ..sequence import RunRecords, render_svg, render_text
from ._diagram import diagram
from ._guidance import Exposure, exposure
from ._model import Example, ExampleError
from ._regression import regression_case, regression_file_name
from ._restart import RESTART_ONE_IN
from ._runner import Outcome
from ._security_model import AnyExample, SecurityExample, example_from_dict
from ._security_strategies import family_examples

__all__ = ["ExploreConfig", "ExploreResult", "FreshBroker", "HistorySpool", "explore", "load_example", "records_of",
           "replay_command", "replay_until_found", "write_evidence", "write_outcome"]

Runner = Callable[[AnyExample], Outcome]


class FreshBroker:
    """Restarts the target's broker before every second try of one example (the 2nd, 4th, ...), so that the tries
    of an example being shrunk, confirmed or replayed alternate between the broker as it is and one just started.

    Why: a race can depend on how warm the broker is.  Artemis's reattach duplication fails about one run in
    three on a JVM just started and one in thirty or fewer once it is warm (docs/exploration.md, "Measured"), so
    an example found early in an exploration would not fail again later on the same broker.  Only reliability
    examples restart it (a security example runs against the secured brokers); without ``restart`` (the target
    cannot restart its broker) nothing happens.  A restart that fails is reported once, and the tries go on
    without restarts: the runs after it say what state the broker is in."""

    def __init__(self, restart: Callable[[], None] | None, out: TextIO,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._restart = restart
        self._out = out
        self._clock = clock

    def before(self, attempt: int, example: AnyExample) -> None:
        """Called before the ``attempt``-th try (from 1) of ``example``."""
        if self._restart is None or attempt % 2 or isinstance(example, SecurityExample):
            return
        began = self._clock()
        try:
            self._restart()
        except Exception as exc:  # noqa: BLE001 - any failure of the target's restart ends the restarts alike
            print(f"      the broker did not restart before try {attempt} ({exc}); the tries go on without "
                  "restarts", file=self._out, flush=True)
            self._restart = None
            return
        print(f"      broker restarted before try {attempt} ({self._clock() - began:.1f} s)", file=self._out,
              flush=True)


#: What a loop without a restartable target uses.
NO_RESTARTS = FreshBroker(None, io.StringIO())


@dataclass(frozen=True, slots=True)
class ExploreConfig:
    """How long and how much to explore, and where the evidence goes."""

    budget_s: float
    seed: int = 0
    max_examples: int = 1000
    #: Time for shrinking once a failing example is found, beyond what is left of the budget.
    shrink_s: float = 120.0
    evidence_dir: Path | None = None
    #: The command-line arguments naming the target (``--target reference``), for the replay command.
    target_args: tuple[str, ...] = ("--target", "reference")
    max_operations: int = 8
    max_faults: int = 3
    #: Runs of one example while shrinking and confirming before it counts as clean: an intermittent bug (a race
    #: with the broker's journal, say) fails only some runs of the same example, and one clean run would end the
    #: shrinking (hypothesis calls an example that fails once and then passes flaky).
    tries: int = 3
    #: Replays of a minimal example to confirm it, stopping at the first that fails (and the ``--tries`` of the
    #: replay command written for it): a race that fails one run in eight is confirmed nine times in ten.
    confirm_tries: int = 20
    #: Whether the target can restart its broker: only then do examples restart it (and make queues non-durable).
    restart: bool = False
    #: One example in this many restarts it (``_restart.restart_share`` of a restart's measured length).
    restart_one_in: int = RESTART_ONE_IN
    #: Draw the security family's examples beside the reliability family's (the target has the secured brokers).
    security: bool = False
    #: Clauses set aside (a target's known deviations): a finding whose every line cites one of them is recorded
    #: as ``known`` and exploring goes on.
    ignored_clauses: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExploreResult:
    """What an exploration came to."""

    runs: int
    kinds: dict[str, int]
    #: The minimal failing example's run (None: nothing found).
    failing: Outcome | None = None
    #: Its confirmation run (the same example once more).
    confirmation: Outcome | None = None
    kit_errors: tuple[Outcome, ...] = ()
    evidence: Path | None = None
    #: The most exposed run's counts, each the highest seen (what the optimiser reached).
    most_exposed: Exposure = field(default_factory=Exposure)
    #: Examples hypothesis drew again while exploring, each not run a second time (see :func:`_explore`).
    repeats: int = 0

    @property
    def confirmed(self) -> bool:
        return self.confirmation is not None and self.confirmation.kind == "finding"

    @property
    def exit_status(self) -> int:
        """0 nothing found, 1 a finding, 3 none but the kit erred."""
        if self.failing is not None:
            return 1
        return 3 if self.kit_errors else 0


class _Found(Exception):
    """Raised inside the property so that hypothesis shrinks the example."""


class _BudgetSpent(BaseException):
    """Raised inside the property once the time is up: not an ``Exception``, so hypothesis does not take it for
    a failure to shrink but stops at once, as on an interrupt."""


@dataclass
class _State:
    runs: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    failing: Outcome | None = None
    shrink_started: float = 0.0
    kit_errors: list[Outcome] = field(default_factory=list)
    most_exposed: Exposure = field(default_factory=Exposure)
    log: list[dict[str, Any]] = field(default_factory=list)
    #: every failing run, from the first finding to the smallest
    failures: list[Outcome] = field(default_factory=list)
    #: the exposure of every example run while exploring, by its JSON (:func:`_example_key`)
    explored: dict[str, Exposure] = field(default_factory=dict)
    repeats: int = 0


#: What of every run's history is kept in memory before the rest goes to a temporary file (a run's history is a
#: few hundred operations at most, so 1,000 runs usually stay below it).
SPOOL_BYTES = 8 * 1024 * 1024


class HistorySpool:
    """Every run's history as the JSON Lines of ``histories.jsonl``, kept while the exploration runs: in memory up
    to :data:`SPOOL_BYTES`, on disk beyond (so memory stays bounded however long the histories), copied into the
    evidence at the end.  A row is the operation's ``Op.to_dict()`` with ``run`` (the run's number, as in
    ``examples.jsonl``) and ``index`` (its position in that run's history)."""

    def __init__(self, max_bytes: int = SPOOL_BYTES) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=max_bytes, mode="w+", encoding="utf-8")  # noqa: SIM115

    def add(self, run: int, history: Iterable[Op]) -> None:
        for index, op in enumerate(history):
            self._file.write(json.dumps({"run": run, "index": index, **op.to_dict()}, sort_keys=True) + "\n")

    def write_to(self, path: Path) -> None:
        self._file.flush()
        self._file.seek(0)
        with path.open("w", encoding="utf-8") as out:
            shutil.copyfileobj(self._file, out)
        self._file.seek(0, 2)  # back to the end: more runs may still be added

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> HistorySpool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _checker(outcome: Outcome) -> dict[str, Any] | None:
    """What the history checker recorded of a run's history that a delivery audit of it needs (None: not judged)."""
    if outcome.judgement is None:
        return None
    result = outcome.judgement.result
    return {"ok": result.ok, "final_drain_complete": result.final_drain_complete,
            "duplicates_allowed": result.duplicates_allowed}


def _line(index: int, now: float, phase: str, outcome: Outcome) -> str:
    return (f"#{index:<4} {now:7.1f}s {phase:<8} {outcome.kind:<13} ({outcome.elapsed_s:4.1f}s) "
            f"{outcome.example.describe()}" + (f"\n      -> {outcome.describe()}" if outcome.kind != "clean" else ""))


def explore(run: Runner, config: ExploreConfig, out: TextIO, *,
            clock: Callable[[], float] = time.monotonic, restart: Callable[[], None] | None = None) -> ExploreResult:
    """Explore until the budget or ``max_examples`` is spent or a finding is shrunk; print a line per example.
    With ``restart`` (it restarts the target's broker), every second try of an example while shrinking and
    confirming runs against a broker just restarted (:class:`FreshBroker`)."""
    with contextlib.ExitStack() as stack:
        spool = stack.enter_context(HistorySpool()) if config.evidence_dir is not None else None
        return _explore(run, config, out, clock, spool, FreshBroker(restart, out, clock))


def _explore(run: Runner, config: ExploreConfig, out: TextIO, clock: Callable[[], float],
             spool: HistorySpool | None, fresh: FreshBroker) -> ExploreResult:
    began = clock()
    generate_until = began + config.budget_s
    state = _State()

    def elapsed() -> float:
        return clock() - began

    def once(example: AnyExample, phase: str) -> Outcome:
        outcome = set_aside(run(example), config.ignored_clauses)
        state.runs += 1
        state.kinds[outcome.kind] += 1
        seen = exposure(outcome.wire)
        state.log.append({"run": state.runs, "phase": phase, "at_s": round(elapsed(), 3), "kind": outcome.kind,
                          "elapsed_s": round(outcome.elapsed_s, 3), "example": example.to_dict(),
                          "summary": outcome.describe(),
                          "exposure": {"unconfirmed": seen.unconfirmed, "durable_sends": seen.durable_sends,
                                       "recent_durable_sends": seen.recent_durable_sends},
                          "ops": len(outcome.history), "checker": _checker(outcome)})
        if spool is not None:
            spool.add(state.runs, outcome.history)
        if phase == "explore":
            state.explored[_example_key(example)] = seen
            if _can_reattach(example):
                _aim(state, seen)
        print(_line(state.runs, elapsed(), phase, outcome), file=out, flush=True)
        if outcome.kind == "kit-error":
            state.kit_errors.append(outcome)
        return outcome

    @seed(config.seed)
    @settings(database=None, deadline=None, derandomize=False, max_examples=config.max_examples,
              phases=(Phase.explicit, Phase.generate, Phase.target, Phase.shrink), verbosity=Verbosity.quiet,
              report_multiple_bugs=False, suppress_health_check=list(HealthCheck), print_blob=False)
    @given(family_examples(config.max_operations, config.max_faults, restart=config.restart,
                           restart_one_in=config.restart_one_in,
                           security=config.security))
    def prop(example: AnyExample) -> None:
        shrinking = state.failing is not None
        until = generate_until if not shrinking else max(generate_until, state.shrink_started + config.shrink_s)
        if clock() >= until:
            raise _BudgetSpent
        if not shrinking and _repeated(state, example):
            return
        outcome = once(example, "shrink" if shrinking else "explore")
        for attempt in range(2, _tries(config, state, example) + 1):
            if outcome.kind == "finding" or clock() >= until:
                break
            fresh.before(attempt, example)
            outcome = once(example, "retry")
        if outcome.kind == "finding":
            if state.failing is None:
                state.shrink_started = clock()
                print(f"found a failing example after {state.runs} run(s); shrinking", file=out, flush=True)
            state.failing = outcome  # hypothesis only tries smaller ones from here: the last is the smallest
            state.failures.append(outcome)
            raise _Found(outcome.describe())

    # the minimal failing example is state.failing, whatever hypothesis made of its last replay
    with contextlib.suppress(_Found, Flaky, _BudgetSpent):
        prop()
    confirmation: Outcome | None = None
    if state.failing is not None:
        state.failing, confirmation = _confirm(state.failures, config.confirm_tries, once, out, fresh)
    result = ExploreResult(state.runs, dict(state.kinds), state.failing, confirmation, tuple(state.kit_errors),
                           most_exposed=state.most_exposed, repeats=state.repeats)
    if config.evidence_dir is not None:
        result = replace(result, evidence=write_evidence(config.evidence_dir, config, result, state.log,
                                                         histories=spool))
    return result


def cites(line: str, clause: str) -> bool:
    """Whether a finding's line cites ``clause``: the oracles write it first (``window.zero: ...``) or last in
    brackets (``... [backoff.multiplier]``)."""
    return line.startswith(f"{clause}:") or line.rstrip().endswith(f"[{clause}]")


def set_aside(outcome: Outcome, clauses: Sequence[str]) -> Outcome:
    """``outcome`` as ``known`` when it is a finding whose every line cites one of ``clauses``."""
    findings = outcome.judgement.findings if outcome.judgement is not None else ()
    if outcome.kind != "finding" or not clauses or not findings:
        return outcome
    if all(any(cites(line, clause) for clause in clauses) for line in findings):
        return replace(outcome, kind="known")
    return outcome


def _tries(config: ExploreConfig, state: _State, example: AnyExample) -> int:
    """Runs of one example before it counts as clean: one while exploring; while shrinking ``tries``, except for
    the example that failed last, which hypothesis runs again first: if that run passes, hypothesis calls the
    failure flaky and shrinks nothing, so a rare race gets ``confirm_tries`` runs there."""
    if state.failing is None:
        return 1
    return config.confirm_tries if example == state.failing.example else config.tries


#: the hypothesis target labels of the two exposure counts
UNCONFIRMED_TARGET = "unconfirmed commands at a break"
DURABLE_TARGET = "unconfirmed durable sends at a break"
RECENT_TARGET = "durable sends just before a break"


def _example_key(example: AnyExample) -> str:
    return json.dumps(example.to_dict(), sort_keys=True)


def _repeated(state: _State, example: AnyExample) -> bool:
    """Whether ``example`` was run already while exploring; if so its exposure is reported to hypothesis again, as
    if it had run.  Hypothesis often draws an example it has already made (its target phase varies a draw the
    example does not use): against Artemis 2.44.0 a 10-minute exploration spent 41 % of its time running 101 such
    repeats.  A repeat may still meet a race the first run missed, but a new example is likelier to, and the
    shrinking and confirming runs try each example several times."""
    seen = state.explored.get(_example_key(example))
    if seen is None:
        return False
    state.repeats += 1
    if _can_reattach(example):
        _aim(state, seen)
    return True


def _can_reattach(example: AnyExample) -> bool:
    """Whether a break in ``example`` can meet a reattach: a reliability example with a confirmation window (without
    one, or with window 0, the session is recreated, and everything the broker received counts as unconfirmed on
    the wire: aiming at that would steer hypothesis away from the reattach, as a 10-minute Artemis exploration
    showed, its most exposed runs all without a window)."""
    return isinstance(example, Example) and example.workload.config.window > 0


def _aim(state: _State, seen: Exposure) -> None:
    """Report a generated run's exposure to hypothesis (only counts above zero: a run without a break says
    nothing about where the exposed examples are) and keep the highest of each."""
    if seen.unconfirmed:
        target(seen.unconfirmed, label=UNCONFIRMED_TARGET)
    if seen.durable_sends:
        target(seen.durable_sends, label=DURABLE_TARGET)
    if seen.recent_durable_sends:
        target(seen.recent_durable_sends, label=RECENT_TARGET)
    best = state.most_exposed
    state.most_exposed = Exposure(max(best.unconfirmed, seen.unconfirmed), max(best.durable_sends, seen.durable_sends),
                                  max(best.recent_durable_sends, seen.recent_durable_sends))


#: how many of the failing examples, smallest first, a finding that does not fail again may fall back on
CONFIRM_CANDIDATES = 5


def _confirm(failures: Sequence[Outcome], tries: int, once: Callable[[AnyExample, str], Outcome],
             out: TextIO, fresh: FreshBroker = NO_RESTARTS) -> tuple[Outcome, Outcome]:
    """The smallest failing example that fails again within ``tries`` replays, and that replay; if none of the
    smallest :data:`CONFIRM_CANDIDATES` does, the smallest and its last replay.  Shrinking an intermittent bug can
    end at an example that fails only rarely (one message in flight instead of many); a larger example found on
    the way may fail on nearly every run."""
    candidates: list[Outcome] = []
    for outcome in reversed(failures):  # the smallest first, each example once
        if all(c.example != outcome.example for c in candidates):
            candidates.append(outcome)
    smallest = candidates[0]
    last: Outcome | None = None
    for rank, failing in enumerate(candidates[:CONFIRM_CANDIDATES]):
        faults, operations = failing.example.size
        which = "minimal example" if rank == 0 else f"next smallest failing example ({rank + 1})"
        print(f"{which}: {faults} fault(s), {operations} operation(s): {failing.example.describe()}", file=out)
        for replay in range(1, tries + 1):
            fresh.before(replay, failing.example)
            last = once(failing.example, "confirm")
            if last.kind == "finding":
                print(f"confirmed: it fails again (replay {replay} of at most {tries})", file=out, flush=True)
                return failing, last
        print(f"NOT confirmed: {tries} replay(s), the last came out {last.kind if last else '-'}", file=out,
              flush=True)
    assert last is not None
    return smallest, last


def replay_until_found(run: Runner, example: AnyExample, tries: int, out: TextIO,
                       fresh: FreshBroker = NO_RESTARTS) -> Outcome:
    """Run ``example`` up to ``tries`` times, stopping at the first run that is not clean; that run, or the last
    (every second try against a broker just restarted, when ``fresh`` can restart it)."""
    for attempt in range(1, tries + 1):
        fresh.before(attempt, example)
        outcome = run(example)
        print(f"run {attempt} of at most {tries}: {outcome.describe()}", file=out, flush=True)
        if outcome.kind != "clean":
            break
    return outcome


def replay_command(target_args: Sequence[str], example_file: Path, tries: int = 1) -> str:
    """The one line that replays an example exactly (up to ``tries`` times, stopping at a finding: a race does not
    fail every run)."""
    return shlex.join(["cck", "explore", *target_args, "--replay", str(example_file),
                       *(("--tries", str(tries)) if tries > 1 else ())])


def _jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, sort_keys=True, default=str) + "\n")


def records_of(outcome: Outcome, title: str, **extra: Any) -> RunRecords:
    """A run's evidence records, as the evidence files hold them (what its sequence diagram is drawn from)."""
    return RunRecords(outcome.example.to_dict(), outcome.wire, outcome.attempts,
                      [op.to_dict() for op in outcome.history], outcome.timeline,
                      json.loads(json.dumps({**outcome.to_dict(), **extra}, default=str)), title,
                      ends=outcome.ends)


def _write_diagrams(directory: Path, records: RunRecords) -> None:
    """``sequence.svg`` and ``sequence.txt``; a diagram that cannot be drawn leaves the rest of the evidence be,
    and says why in ``sequence.txt``."""
    try:
        drawn = diagram(records)
        svg, text = render_svg(drawn), render_text(drawn)
    except Exception:  # noqa: BLE001 - the kit's bug, but the run's other evidence matters more
        (directory / "sequence.txt").write_text("the sequence diagram could not be drawn:\n" + traceback.format_exc(),
                                                encoding="utf-8")
        return
    (directory / "sequence.svg").write_text(svg, encoding="utf-8")
    (directory / "sequence.txt").write_text(text, encoding="utf-8")


def write_outcome(directory: Path, outcome: Outcome, config: ExploreConfig, *, title: str | None = None,
                  regression_case_file: bool = False, **extra: Any) -> Path:
    """One run's evidence in ``directory``: the example (replayable), its history, wire log, connection attempts
    and ends, and timeline (JSON Lines), the findings, the replay command, the sequence diagram (``sequence.svg``,
    ``sequence.txt``) and, with ``regression_case_file``, a pytest case that replays the example
    (``test_explore_<digest>.py``); the example file's path."""
    directory.mkdir(parents=True, exist_ok=True)
    example_file = directory / "example.json"
    example_file.write_text(json.dumps({"seed": config.seed, "target": list(config.target_args),
                                        "example": outcome.example.to_dict()}, indent=2) + "\n", encoding="utf-8")
    _jsonl(directory / "history.jsonl", (op.to_dict() for op in outcome.history))
    _jsonl(directory / "wire.jsonl", outcome.wire)
    _jsonl(directory / "attempts.jsonl", outcome.attempts)
    _jsonl(directory / "ends.jsonl", outcome.ends)
    _jsonl(directory / "timeline.jsonl", outcome.timeline)
    (directory / "findings.json").write_text(json.dumps({**outcome.to_dict(), **extra}, indent=2, default=str) + "\n",
                                             encoding="utf-8")
    replay = replay_command(config.target_args, example_file.resolve(), config.confirm_tries)
    (directory / "replay.txt").write_text(replay + "\n", encoding="utf-8")
    _write_diagrams(directory, records_of(outcome, title or f"{directory.name} run", **extra))
    # a security example's case would need the secured brokers, which the plugin's target does not have
    if regression_case_file and not isinstance(outcome.example, SecurityExample):
        findings = outcome.judgement.findings if outcome.judgement is not None else ()
        (directory / regression_file_name(outcome.example)).write_text(
            regression_case(outcome.example, findings=findings, target_args=config.target_args, seed=config.seed),
            encoding="utf-8")
    return example_file


def write_evidence(root: Path, config: ExploreConfig, result: ExploreResult, log: Sequence[dict[str, Any]], *,
                   histories: HistorySpool | None = None) -> Path:
    """The exploration's evidence under ``root/explore-<time>-seed<S>/``: every run's summary
    (``examples.jsonl``), every run's history (``histories.jsonl``, from ``histories``), for a failing example
    ``minimal/`` and, if it ran, ``confirmation/``, and last the summary (``summary.json``: a directory without it
    is an exploration that did not finish writing)."""
    directory = root / f"explore-{time.strftime('%Y%m%d-%H%M%S')}-seed{config.seed}"
    directory.mkdir(parents=True, exist_ok=True)
    _jsonl(directory / "examples.jsonl", log)
    if histories is not None:
        histories.write_to(directory / "histories.jsonl")
    summary: dict[str, Any] = {"seed": config.seed, "target": list(config.target_args), "budget_s": config.budget_s,
                               "max_examples": config.max_examples, "runs": result.runs, "kinds": result.kinds,
                               "found": result.failing is not None, "confirmed": result.confirmed,
                               "ignored_clauses": list(config.ignored_clauses),
                               "repeats": result.repeats,
                               "most_exposed": {"unconfirmed": result.most_exposed.unconfirmed,
                                                "durable_sends": result.most_exposed.durable_sends,
                                                "recent_durable_sends": result.most_exposed.recent_durable_sends},
                               "finished": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
    if result.failing is not None:
        summary["finding"] = result.failing.describe()
        summary["example"] = result.failing.example.describe()
        example_file = write_outcome(directory / "minimal", result.failing, config, title="minimal run",
                                     regression_case_file=result.confirmed, confirmed=result.confirmed)
        summary["replay"] = replay_command(config.target_args, example_file.resolve(), config.confirm_tries)
        summary["diagram"] = str((example_file.parent / "sequence.svg").resolve())
        if result.confirmed and not isinstance(result.failing.example, SecurityExample):
            summary["regression_case"] = str((example_file.parent / regression_file_name(result.failing.example))
                                             .resolve())
        if result.confirmation is not None:
            write_outcome(directory / "confirmation", result.confirmation, config, title="confirmation run")
    for index, outcome in enumerate(result.kit_errors[:5], start=1):
        write_outcome(directory / f"kit-error-{index}", outcome, config, title=f"kit error {index}")
    (directory / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return directory


def load_example(path: Path) -> AnyExample:
    """The example in a file :func:`write_outcome` wrote (or a bare example object); :class:`ExampleError` when
    the file is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ExampleError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ExampleError(f"{path} is not JSON: {exc}") from None
    if isinstance(data, dict) and "example" in data:
        data = data["example"]
    return example_from_dict(data)
