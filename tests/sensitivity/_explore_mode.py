"""Exploration mode of the mutant runner: each mutant judged by fault exploration (``cck explore --target
reference``) run in its mutated copy instead of by its selection of cases.

Exploration drives the kit's own client against the reference broker, so the one command judges broker and
client mutants alike.  Its exit status says what it came to (``conformance/explore/_cli.py``): 0 nothing found,
1 a finding, 2 bad arguments, 3 the kit erred and nothing was found, 4 the target did not start.  A mutant is
*killed* when the run exits 1 and its ``summary.json`` records the finding (a crash of the kit's own process
also exits 1, and must not count as a kill); it *survived* when the run exits 0 after at least one example; any
other end (2, 3, 4, a run past its deadline, a patch that does not apply, a copy that does not import its own
code, a baseline that found something or did not run clean) is an *error*.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cck.conformance.explore import ExampleError, example_from_dict

from ._runner import (
    REPO_ROOT,
    Mutant,
    Outcome,
    Progress,
    Verdict,
    apply_patch,
    copy_tree,
    fresh_evidence_dir,
    imports_from,
    run_command,
    tree_files,
)

__all__ = [
    "DEADLINE_MARGIN_S", "SHRINK_BUDGET_S", "Evidence", "ExploreResults", "ExploreRun", "ExploreSettings",
    "baseline_problem", "classify", "duration", "explore_row", "judge", "read_evidence", "run_all_explore",
    "run_explore",
]

#: The shrink budget passed to exploration (its own default), stated so that the deadline below agrees with it.
SHRINK_BUDGET_S = 120.0
#: Beyond the budget and the shrink budget: starting the broker, the example running when the budget ran out, the
#: confirmation replays of the minimal example and writing the evidence.
DEADLINE_MARGIN_S = 120.0
#: What exploration's exit statuses other than 0 and 1 mean (``conformance/explore/_cli.py``).
EXIT_MEANINGS = {
    2: "bad arguments",
    3: "the kit erred and nothing was found",
    4: "the target did not start or a replay could not be judged",
}
#: How much of a finding line goes into a detail: a lost-message line lists every key the checker kept.
MAX_LINE = 300
#: How much of the run's output is kept to say why it did not end as it should.
OUTPUT_TAIL = 4000
#: What exploration prints once an example fails, before it shrinks it (``conformance/explore/_explore.py``).
FOUND_LINE = "found a failing example after"


def duration(seconds: float) -> str:
    """``seconds`` as exploration's ``--budget`` reads it (``90s``, ``2.5s``; never ``1e+06``)."""
    return f"{int(seconds)}s" if float(seconds).is_integer() else f"{seconds!r}s"


@dataclasses.dataclass(frozen=True)
class ExploreSettings:
    """How long each exploration runs and from which seed (the same for the baseline and every mutant)."""

    budget_s: float = 90.0
    seed: int = 1
    shrink_s: float = SHRINK_BUDGET_S

    @property
    def deadline_s(self) -> float:
        return self.budget_s + self.shrink_s + DEADLINE_MARGIN_S

    def args(self) -> list[str]:
        """The arguments of ``python -m cck.conformance`` short of the evidence directory."""
        return ["explore", "--target", "reference", "--budget", duration(self.budget_s),
                "--shrink-budget", duration(self.shrink_s), "--seed", str(self.seed)]  # fmt: skip

    def argv(self, evidence_dir: Path) -> list[str]:
        return [sys.executable, "-m", "cck.conformance", *self.args(), "--evidence-dir", str(evidence_dir)]

    def __str__(self) -> str:
        return " ".join(self.args())


# ------------------------------------------------------------------------------------------------ evidence

@dataclasses.dataclass(frozen=True)
class Evidence:
    """What one exploration wrote under its ``--evidence-dir``: its ``explore-*/`` directory, ``summary.json``,
    and for a finding the minimal example's counted findings (the oracle's lines) and the example, described."""

    directory: Path
    summary: dict[str, Any]
    findings: tuple[str, ...] = ()
    example: str = ""
    kit_error: str = ""

    @property
    def found(self) -> bool:
        return self.summary.get("found") is True

    @property
    def runs(self) -> int:
        runs = self.summary.get("runs")
        return runs if isinstance(runs, int) else 0

    def kinds(self) -> str:
        """``150 clean, 3 indeterminate``: how the runs came out."""
        kinds = self.summary.get("kinds")
        if not isinstance(kinds, dict) or not kinds:
            return "no runs"
        return ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _last_line(text: object) -> str:
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 3] + "..."


def _described(example: object) -> str:
    """The example as exploration prints it (read with the working tree's model, which no mutant touches)."""
    try:
        return example_from_dict(example).describe()
    except ExampleError:
        return "an example this tree's model cannot read"


def read_evidence(evidence_dir: Path) -> Evidence | None:
    """The exploration's evidence under ``evidence_dir`` (the newest ``explore-*/summary.json``), or ``None``
    when there is none or it is not JSON."""
    summaries = sorted(evidence_dir.glob("explore-*/summary.json"))
    summary = _json(summaries[-1]) if summaries else None
    if summary is None:
        return None
    directory = summaries[-1].parent
    minimal = _json(directory / "minimal" / "findings.json") or {}
    judgement = minimal.get("judgement")
    findings = judgement.get("findings") if isinstance(judgement, dict) else None
    lines = tuple(_clip(str(f)) for f in findings) if isinstance(findings, list) else ()
    if not lines and minimal.get("reason"):
        lines = (_clip(_last_line(minimal["reason"])),)
    example = _described(minimal["example"]) if "example" in minimal else ""
    kit_error = _clip(_last_line((_json(directory / "kit-error-1" / "findings.json") or {}).get("reason")))
    return Evidence(directory, summary, lines, example, kit_error)


# ------------------------------------------------------------------------------------------------ runs

@dataclasses.dataclass(frozen=True)
class ExploreRun:
    """One exploration in a copy: its exit status (``None``: not run, or ended at its deadline), seconds, what it
    wrote, and the tail of its output."""

    exit_status: int | None
    seconds: float
    timed_out: bool = False
    problem: str | None = None  # the run could not be made (a patch, the copy's imports)
    evidence: Evidence | None = None
    output: str = ""
    #: its output says it found a failing example (kept apart from ``output``: shrinking prints past the tail)
    found_one: bool = False


def run_explore(tree: Path, settings: ExploreSettings) -> ExploreRun:
    """Explore the reference broker with ``tree``'s own code, at most ``settings.deadline_s``."""
    problem = imports_from(tree)
    if problem is not None:
        return ExploreRun(None, 0.0, problem=problem)
    evidence = fresh_evidence_dir(tree, prefix="explore-run-")
    log = tree / ".sensitivity-run.log"
    ran = run_command(tree, settings.argv(evidence), settings.deadline_s, log)
    output = log.read_text(encoding="utf-8", errors="replace")
    return ExploreRun(ran.exit_status, ran.seconds, ran.timed_out, evidence=read_evidence(evidence),
                      output=output[-OUTPUT_TAIL:], found_one=FOUND_LINE in output)


# ------------------------------------------------------------------------------------------------ judging

def _finding(evidence: Evidence) -> str:
    confirmed = "confirmed" if evidence.summary.get("confirmed") is True else "not confirmed on replay"
    lines = "; ".join(evidence.findings) or "(no finding lines recorded)"
    example = f"; minimal example: {evidence.example}" if evidence.example else ""
    return f"finding ({confirmed}, after {evidence.runs} run(s)): {lines}{example}"


def judge(run: ExploreRun, deadline_s: float) -> tuple[Verdict, str]:
    """What one exploration came to, as a verdict and why (the baseline's and a mutant's alike)."""
    evidence = run.evidence
    if run.problem is not None:
        return Verdict.ERROR, run.problem
    if run.timed_out:
        found = " (it had found a failing example)" if run.found_one else ""
        return Verdict.ERROR, f"past its deadline of {deadline_s:.0f} s{found}"
    if run.exit_status == 1 and evidence is not None and evidence.found:
        return Verdict.KILLED, _finding(evidence)
    if run.exit_status == 0 and evidence is not None and evidence.runs > 0:
        return Verdict.SURVIVED, f"nothing found in {evidence.runs} run(s): {evidence.kinds()}"
    return Verdict.ERROR, _why_not_judged(run)


def _why_not_judged(run: ExploreRun) -> str:
    status, evidence = run.exit_status, run.evidence
    said = _clip(_last_line(run.output)) or "no output"
    if status == 3:
        error = evidence.kit_error if evidence is not None and evidence.kit_error else said
        kinds = f" ({evidence.kinds()})" if evidence is not None else ""
        return f"exit status 3, {EXIT_MEANINGS[3]}{kinds}: {error}"
    if status in EXIT_MEANINGS:
        return f"exit status {status}, {EXIT_MEANINGS[status]}: {said}"
    if evidence is None:
        return f"exit status {status} and no summary.json: {said}"
    if status == 0:
        return "exit status 0 but exploration ran no example"
    if status == 1:  # a crash of the kit's own process exits 1 too
        return f"exit status 1 but summary.json records no finding: {said}"
    return f"exit status {status}: {said}"


def baseline_problem(baseline: ExploreRun, deadline_s: float) -> str | None:
    """Why the unmutated copy's exploration cannot be judged against (it must find nothing), or ``None``."""
    verdict, detail = judge(baseline, deadline_s)
    if verdict == Verdict.SURVIVED:
        return None
    if verdict == Verdict.KILLED:
        return f"exploration finds something on the unmutated tree: {detail}"
    return detail


def classify(mutant: Mutant, baseline: ExploreRun, run: ExploreRun, deadline_s: float) -> Outcome:
    """A mutant's verdict from its exploration and the baseline's."""
    problem = baseline_problem(baseline, deadline_s)
    if problem is not None:
        return Outcome(mutant, Verdict.ERROR, [], run.seconds, f"baseline: {problem}")
    verdict, detail = judge(run, deadline_s)
    return Outcome(mutant, verdict, [], run.seconds, detail)


def explore_row(outcome: Outcome, run: ExploreRun, settings: ExploreSettings, kept: Path | None) -> dict[str, Any]:
    """A mutant's row of the JSON results: the runner's own, with what exploration ran and recorded."""
    evidence = run.evidence
    return {
        **outcome.to_json(), "selection": str(settings), "exit_status": run.exit_status, "timed_out": run.timed_out,
        "runs": evidence.runs if evidence else 0, "kinds": evidence.summary.get("kinds", {}) if evidence else {},
        "findings": list(evidence.findings) if evidence else [],
        "minimal_example": evidence.example if evidence else "",
        "confirmed": bool(evidence and evidence.summary.get("confirmed") is True),
        "evidence": str(kept) if kept else None,
    }  # fmt: skip


# ------------------------------------------------------------------------------------------------ the whole set

@dataclasses.dataclass
class ExploreResults:
    """Every mutant's outcome with its run and where its evidence was kept, and the baseline's."""

    outcomes: list[Outcome]
    runs: list[ExploreRun]
    kept: list[Path | None]
    baseline: ExploreRun
    baseline_kept: Path | None


def _keep(run: ExploreRun, tree: Path, keep: Path | None, name: str) -> Path | None:
    """Copy a run's exploration evidence and output out of its throw-away copy (into ``keep/name``)."""
    log = tree / ".sensitivity-run.log"
    if keep is None or (run.evidence is None and not log.is_file()):  # nothing ran: a patch, the imports
        return None
    dest = keep / name
    dest.mkdir(parents=True, exist_ok=True)
    if log.is_file():
        shutil.copy2(log, dest / "output.log")
    if run.evidence is not None:
        shutil.copytree(run.evidence.directory, dest / run.evidence.directory.name, dirs_exist_ok=True)
    return dest


def run_all_explore(mutants: Sequence[Mutant], settings: ExploreSettings, *, progress: Progress = print,
                    root: Path = REPO_ROOT, keep: Path | None = None) -> ExploreResults:
    """Explore once on an unmutated copy, then on a fresh mutated copy per mutant (none when the baseline did not
    run clean: each verdict is then its error); the evidence of the baseline and of every mutant not survived is
    copied to ``keep`` (the copies are deleted)."""
    files = tree_files(root)
    deadline = settings.deadline_s
    outcomes: list[Outcome] = []
    runs: list[ExploreRun] = []
    kept: list[Path | None] = []
    with tempfile.TemporaryDirectory(prefix="cck-sensitivity-explore-") as scratch:
        base_tree = copy_tree(Path(scratch) / "baseline", files, root)
        progress(f"baseline  {settings} ...")
        baseline = run_explore(base_tree, settings)
        problem = baseline_problem(baseline, deadline)
        if problem is not None and not baseline.problem:  # one more try: a loaded machine
            progress(f"baseline  {settings}: {problem}; once more")
            baseline = run_explore(base_tree, settings)
            problem = baseline_problem(baseline, deadline)
        progress(f"baseline  {settings}: {problem or 'nothing found'} ({baseline.seconds:.0f} s)")
        baseline_kept = _keep(baseline, base_tree, keep, "baseline")
        for i, mutant in enumerate(mutants, 1):
            if problem is not None:  # every verdict is the baseline's error: exploring the mutant would only cost
                judged = classify(mutant, baseline, ExploreRun(None, 0.0), deadline)
                outcomes.append(judged)
                runs.append(ExploreRun(None, 0.0))
                kept.append(None)
                progress(f"[{i}/{len(mutants)}] {mutant.name}: {judged.verdict} (not run) {judged.detail}")
                continue
            tree = copy_tree(Path(scratch) / f"m{i:02d}-{mutant.name}", files, root)
            error = apply_patch(mutant.patch, tree)
            run = ExploreRun(None, 0.0, problem=error) if error else run_explore(tree, settings)
            judged = classify(mutant, baseline, run, deadline)
            outcomes.append(judged)
            runs.append(run)
            kept.append(_keep(run, tree, keep, mutant.name) if judged.verdict != Verdict.SURVIVED else None)
            progress(f"[{i}/{len(mutants)}] {mutant.name}: {judged.verdict} ({judged.seconds:.0f} s) {judged.detail}")
            shutil.rmtree(tree, ignore_errors=True)
    return ExploreResults(outcomes, runs, kept, baseline, baseline_kept)
