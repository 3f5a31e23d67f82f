"""The mutant runner: each mutant's patch applied to a throw-away copy of the working tree, the selection of
conformance cases that should catch it run there, judged against the same selection run on an unmutated copy.

A mutant is *killed* when a case of its selection gives FAIL where the baseline run did not.  A SHOULD-case
turning PASS_LENIENT where the baseline gave PASS is *detected (SHOULD)*: reported on its own line, not a kill.
KIT_ERROR and INDETERMINATE under a mutant are *errors* (the kit could not judge), never kills; so are a patch
that does not apply, a copy that does not import its own code, a run past the mutant's deadline without a FAIL,
and a baseline that does not conform (the kit's error, not the mutant's).

``_explore_mode`` judges the same mutants, in the same copies, by fault exploration instead of by cases.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

__all__ = [
    "HERE", "MANIFEST", "REPO_ROOT", "Mutant", "Outcome", "Ran", "RunResult", "Selection", "Verdict",
    "apply_patch", "baseline_problem", "child_env", "classify", "copy_tree", "fresh_evidence_dir", "imports_from",
    "load_mutants", "markdown", "run_all", "run_command", "run_selection", "summary", "tree_files",
]

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "mutants.toml"
REPO_ROOT = HERE.parents[1]
#: Top-level names never copied (environments, caches, evidence of earlier runs).
SKIPPED_TOP = frozenset({".venv", ".tox", "evidence", "report", ".git"})
#: Verdicts a conforming case may give (a baseline with any other is the kit's error).
CONFORMING = frozenset({"PASS", "PASS_LENIENT", "UNSUPPORTED"})
#: Grace after the deadline for the run's process group to go once told to.
KILL_GRACE_S = 10.0


class Verdict(StrEnum):
    KILLED = "killed"
    DETECTED_SHOULD = "detected (SHOULD)"
    SURVIVED = "survived"
    ERROR = "error"


@dataclasses.dataclass(frozen=True)
class Selection:
    """What one conformance run judges: the broker (``--target reference``) or the kit's client (``--client
    kit``), and the case globs."""

    subject: str
    cases: tuple[str, ...]

    def argv(self) -> list[str]:
        who = ["--target", "reference"] if self.subject == "broker" else ["--client", "kit"]
        return [*who, *(arg for glob in self.cases for arg in ("--case", glob))]

    def __str__(self) -> str:
        return " ".join(self.argv())


@dataclasses.dataclass(frozen=True)
class Mutant:
    name: str
    patch: Path
    area: str
    breaks: str
    clause: str
    selection: Selection
    timeout_s: float
    smoke: bool = False


@dataclasses.dataclass
class RunResult:
    """One conformance run: its verdict per case, exit status, seconds, and whether it ran out of time."""

    verdicts: dict[str, str]
    exit_status: int | None
    seconds: float
    timed_out: bool = False
    problem: str | None = None  # the run could not be made (a patch, the copy's imports)


@dataclasses.dataclass
class Outcome:
    mutant: Mutant
    verdict: Verdict
    killing_cases: list[str]
    seconds: float
    detail: str = ""
    verdicts: dict[str, str] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "mutant": self.mutant.name, "area": self.mutant.area, "clause": self.mutant.clause,
            "breaks": self.mutant.breaks, "selection": str(self.mutant.selection), "verdict": str(self.verdict),
            "killing_cases": self.killing_cases, "seconds": round(self.seconds, 1), "detail": self.detail,
            "verdicts": self.verdicts,
        }  # fmt: skip


# ------------------------------------------------------------------------------------------------ the manifest

_FIELDS = {"name", "patch", "area", "breaks", "clause", "subject", "cases", "timeout_s", "smoke"}


def load_mutants(path: Path = MANIFEST) -> list[Mutant]:
    """The mutants of ``mutants.toml``; a bad entry is a ``ValueError`` naming it."""
    with path.open("rb") as f:
        data = tomllib.load(f)
    mutants: list[Mutant] = []
    for i, entry in enumerate(data.get("mutant", [])):
        where = f"{path.name}: mutant {i + 1} ({entry.get('name', '?')})"
        unknown = set(entry) - _FIELDS
        missing = _FIELDS - {"smoke"} - set(entry)
        if unknown or missing:
            raise ValueError(f"{where}: unknown fields {sorted(unknown)}, missing fields {sorted(missing)}")
        if entry["subject"] not in ("broker", "client"):
            raise ValueError(f"{where}: subject must be 'broker' or 'client', not {entry['subject']!r}")
        cases = entry["cases"]
        if not isinstance(cases, list) or not cases or not all(isinstance(c, str) for c in cases):
            raise ValueError(f"{where}: cases must be a non-empty list of case globs")
        mutants.append(Mutant(
            name=str(entry["name"]), patch=path.parent / str(entry["patch"]), area=str(entry["area"]),
            breaks=str(entry["breaks"]), clause=str(entry["clause"]),
            selection=Selection(str(entry["subject"]), tuple(cases)), timeout_s=float(entry["timeout_s"]),
            smoke=bool(entry.get("smoke", False)),
        ))  # fmt: skip
    names = [m.name for m in mutants]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{path.name}: mutants listed twice: {duplicates}")
    return mutants


# ------------------------------------------------------------------------------------------------ copies

def tree_files(root: Path = REPO_ROOT) -> list[str]:
    """The working tree's tracked files and its untracked files git does not ignore (paths relative to
    ``root``), without environments, caches and evidence; symlinks (``cck/codec -> ../codec``, ...) included."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, check=True).stdout.decode()
    files = sorted({p for p in listed.split("\0") if p})
    return [p for p in files if p.split("/", 1)[0] not in SKIPPED_TOP
            and ((root / p).is_symlink() or (root / p).is_file())]


def copy_tree(dest: Path, files: Sequence[str], root: Path = REPO_ROOT) -> Path:
    """Copy ``files`` from ``root`` into ``dest`` (created), keeping their relative paths; a symlink is copied as
    the link (``cck/reference -> ../reference`` then imports the copy's own ``reference``)."""
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target, follow_symlinks=False)
    return dest


def apply_patch(patch: Path, tree: Path, *, check_only: bool = False) -> str | None:
    """Apply ``patch`` to ``tree`` with ``git apply`` (``--check``: only see whether it would); returns the
    error text when it does not apply."""
    argv = ["git", "apply", "--whitespace=nowarn", *(["--check"] if check_only else []), str(patch)]
    done = subprocess.run(argv, cwd=tree, capture_output=True, text=True, check=False)
    return None if done.returncode == 0 else f"{patch.name} does not apply: {done.stderr.strip()}"


def child_env(tree: Path) -> dict[str, str]:
    """The environment of a run in ``tree``: the copy first on the import path (before the editable install of
    the working tree), no bytecode written, no inherited conformance settings."""
    dropped = ("PYTHONPATH", "PYTHONSAFEPATH", "PYTHONHOME")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CCK_") and k not in dropped}
    env.update(PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    return env


def imports_from(tree: Path) -> str | None:
    """``None`` when ``python`` run in ``tree`` imports the kit's packages from ``tree``, else what it imports."""
    code = "from cck import codec, conformance, reference; print(conformance.__file__); print(reference.__file__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=child_env(tree), capture_output=True,
                          text=True, check=False, timeout=60)
    files = done.stdout.split()
    resolved = tree.resolve()
    if done.returncode != 0 or len(files) != 2 or not all(Path(f).resolve().is_relative_to(resolved) for f in files):
        return f"the copy in {tree} imports {files or done.stderr.strip()[-300:]}, not its own code"
    return None


# ------------------------------------------------------------------------------------------------ runs

def _read_verdicts(evidence_dir: Path) -> dict[str, str]:
    verdicts: dict[str, str] = {}
    for cases in sorted(evidence_dir.glob("*/cases.jsonl")):
        for line in cases.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                verdicts[str(row["case_id"])] = str(row["verdict"])
    return verdicts


def fresh_evidence_dir(tree: Path, prefix: str = "run-") -> Path:
    """A new, empty evidence directory for one run in ``tree``."""
    # a directory of its own: the baseline copy runs every selection, and a run's evidence is all it holds
    (tree / ".sensitivity-evidence").mkdir(exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=tree / ".sensitivity-evidence"))


@dataclasses.dataclass(frozen=True)
class Ran:
    """How a command run in a copy ended: its exit status (``None`` when it was ended at its deadline), its
    seconds, and whether it ran out of time."""

    exit_status: int | None
    seconds: float
    timed_out: bool


def run_command(tree: Path, argv: Sequence[str], timeout_s: float, log: Path) -> Ran:
    """Run ``argv`` in ``tree`` with the copy's own code (:func:`child_env`), its output to ``log``, at most
    ``timeout_s``; its process group is ended at the deadline."""
    started = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen(argv, cwd=tree, env=child_env(tree), stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            status: int | None = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _end_group(process)
            return Ran(None, time.monotonic() - started, timed_out=True)
    return Ran(status, time.monotonic() - started, timed_out=False)


def run_selection(tree: Path, selection: Selection, timeout_s: float) -> RunResult:
    """Run ``cck run`` with ``selection`` in ``tree`` (its own code), at most ``timeout_s``;
    its process group is ended at the deadline."""
    problem = imports_from(tree)
    if problem is not None:
        return RunResult({}, None, 0.0, problem=problem)
    evidence = fresh_evidence_dir(tree)
    argv = [sys.executable, "-m", "cck.conformance", "run", *selection.argv(), "--evidence-dir", str(evidence),
            "--", "-q", "-p", "no:cacheprovider"]
    ran = run_command(tree, argv, timeout_s, tree / ".sensitivity-run.log")
    return RunResult(_read_verdicts(evidence), ran.exit_status, ran.seconds, timed_out=ran.timed_out)


def _end_group(process: subprocess.Popen[bytes]) -> None:
    """End the run this runner started (its own process group, by its id)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=KILL_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue


# ------------------------------------------------------------------------------------------------ judging

def baseline_problem(baseline: RunResult) -> str | None:
    """Why a baseline run cannot be judged against (the kit's error), or ``None``."""
    if baseline.problem is not None:
        return baseline.problem
    if baseline.timed_out:
        return f"the baseline ran out of its deadline after {baseline.seconds:.0f} s"
    if not baseline.verdicts:
        return f"the baseline ran no case (exit status {baseline.exit_status})"
    bad = {c: v for c, v in baseline.verdicts.items() if v not in CONFORMING}
    if bad:
        return "the baseline does not conform: " + ", ".join(f"{c} {v}" for c, v in sorted(bad.items()))
    return None


def classify(mutant: Mutant, baseline: RunResult, run: RunResult) -> Outcome:
    """A mutant's verdict from its run and its selection's baseline."""

    def outcome(verdict: Verdict, killing: list[str], detail: str) -> Outcome:
        return Outcome(mutant, verdict, killing, run.seconds, detail, dict(run.verdicts))

    problem = baseline_problem(baseline)
    if problem is not None:
        return outcome(Verdict.ERROR, [], f"baseline: {problem}")
    if run.problem is not None:
        return outcome(Verdict.ERROR, [], run.problem)
    failed = sorted(c for c, v in run.verdicts.items() if v == "FAIL" and baseline.verdicts.get(c) != "FAIL")
    if failed:
        late = f" (then ran out of its {mutant.timeout_s:.0f} s deadline)" if run.timed_out else ""
        return outcome(Verdict.KILLED, failed, f"FAIL: {', '.join(failed)}{late}")
    if run.timed_out:
        return outcome(Verdict.ERROR, [], f"no FAIL within the deadline of {mutant.timeout_s:.0f} s")
    if not run.verdicts:
        return outcome(Verdict.ERROR, [], f"the run judged no case (exit status {run.exit_status})")
    unjudged = sorted(f"{c} {v}" for c, v in run.verdicts.items() if v in ("KIT_ERROR", "INDETERMINATE"))
    lenient = sorted(c for c, v in run.verdicts.items()
                     if v == "PASS_LENIENT" and baseline.verdicts.get(c) == "PASS")  # fmt: skip
    if lenient:
        more = f"; also {', '.join(unjudged)}" if unjudged else ""
        return outcome(Verdict.DETECTED_SHOULD, lenient, f"PASS_LENIENT (was PASS): {', '.join(lenient)}{more}")
    if unjudged:
        return outcome(Verdict.ERROR, [], f"not judged: {', '.join(unjudged)}")
    return outcome(Verdict.SURVIVED, [], f"{len(run.verdicts)} cases conform")


# ------------------------------------------------------------------------------------------------ the whole set

Progress = Callable[[str], None]


def run_all(mutants: Sequence[Mutant], *, progress: Progress = print, root: Path = REPO_ROOT,
            baseline_timeout_s: float | None = None) -> tuple[list[Outcome], dict[Selection, RunResult]]:
    """Run each distinct selection once on an unmutated copy, then each mutant on a fresh mutated copy."""
    files = tree_files(root)
    baselines: dict[Selection, RunResult] = {}
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="cck-sensitivity-") as scratch:
        base_tree = copy_tree(Path(scratch) / "baseline", files, root)
        for selection in _distinct(m.selection for m in mutants):
            limit = baseline_timeout_s or max(m.timeout_s for m in mutants if m.selection == selection)
            progress(f"baseline  {selection} ...")
            result = run_selection(base_tree, selection, limit)
            problem = baseline_problem(result)
            if problem is not None and not result.problem:  # one more try: a loaded machine, a timing case
                progress(f"baseline  {selection}: {problem}; once more")
                result = run_selection(base_tree, selection, limit)
                problem = baseline_problem(result)
            baselines[selection] = result
            progress(f"baseline  {selection}: {problem or 'conforms'} ({result.seconds:.0f} s)")
        for i, mutant in enumerate(mutants, 1):
            tree = copy_tree(Path(scratch) / f"m{i:02d}-{mutant.name}", files, root)
            error = apply_patch(mutant.patch, tree)
            run = RunResult({}, None, 0.0, problem=error) if error else run_selection(tree, mutant.selection,
                                                                                      mutant.timeout_s)
            judged = classify(mutant, baselines[mutant.selection], run)
            outcomes.append(judged)
            progress(f"[{i}/{len(mutants)}] {mutant.name}: {judged.verdict} ({judged.seconds:.0f} s) {judged.detail}")
            shutil.rmtree(tree, ignore_errors=True)
    return outcomes, baselines


def _distinct(selections: Iterable[Selection]) -> list[Selection]:
    return list(dict.fromkeys(selections))


def summary(outcomes: Sequence[Outcome]) -> Mapping[str, Any]:
    counts = {str(v): sum(o.verdict == v for o in outcomes) for v in Verdict}
    killed = counts[str(Verdict.KILLED)]
    return {"mutants": len(outcomes), **counts,
            "kill_rate": round(killed / len(outcomes), 4) if outcomes else 0.0,
            "seconds": round(sum(o.seconds for o in outcomes), 1)}  # fmt: skip


def markdown(outcomes: Sequence[Outcome], baseline_seconds: float, *, column: str = "killing cases") -> str:
    """The table (mutant, clause, verdict, killing cases or ``column``, seconds) and the totals."""
    s = summary(outcomes)
    lines = [f"| mutant | clause | verdict | {column} | s |", "|---|---|---|---|---|"]
    for o in outcomes:
        cases = ", ".join(f"`{c}`" for c in o.killing_cases) or (o.detail if o.verdict != Verdict.SURVIVED else "")
        cases = cases.replace("|", "\\|")  # an exploration example is described as "workload | faults"
        lines.append(f"| `{o.mutant.name}` | `{o.mutant.clause}` | {o.verdict} | {cases} | {o.seconds:.0f} |")
    lines.append("")
    lines.append(f"Killed {s['killed']} of {s['mutants']} ({100 * float(s['kill_rate']):.0f} %); detected only as a "
                 f"missed SHOULD {s[str(Verdict.DETECTED_SHOULD)]}, survived {s['survived']}, errors {s['error']}. "
                 f"Mutant runs {s['seconds']:.0f} s, baselines {baseline_seconds:.0f} s.")
    return "\n".join(lines) + "\n"
