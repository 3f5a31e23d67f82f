"""What the run prints: the report header and the "conformance verdicts" summary section."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from cck.conformance.cases import Case
from cck.conformance.targets import ALL_CAPABILITIES, COMMANDS, TargetFile, capabilities_of, unlocking_commands
from cck.conformance.verdicts import Verdict

from ._judge import first_line
from ._run import RunState, subject_description

__all__ = ["header_lines", "reach_lines", "summary_lines", "target_capabilities", "EXIT_MEANING"]

EXIT_MEANING = {
    0: "every case conforms",
    1: "a case failed",
    2: "no case failed, but some were indeterminate",
    3: "no case failed, but the kit itself erred in some (KIT_ERROR: a defect of the kit, not of the subject)",
}


def header_lines(state: RunState) -> list[str]:
    settings = state.settings
    lines = [f"core conformance: {subject_description(state)}; run {state.run_id}"]
    mode = "strict (a missed SHOULD is FAIL)" if settings.strict else "lenient (a missed SHOULD is PASS_LENIENT)"
    blind = settings.tolerance.blind_below_ms()
    lines.append(f"core conformance: {mode}; timing scale x{settings.timing_scale:g}, "
                 f"tolerance {settings.tolerance.describe()} (an expected interval under {blind:.0f} ms cannot be told "
                 "from no wait at all)")
    deviations = state.deviations_file
    known = f"{len(state.deviations)} known deviations ({deviations})" if deviations else "no known-deviations file"
    evidence = f"evidence {state.writer.directory}" if state.writer is not None else "no evidence (--evidence-dir)"
    lines.append(f"core conformance: {evidence}; {known}")
    if settings.case_globs or settings.clauses:
        lines.append(f"core conformance: selected cases {', '.join(settings.case_globs) or '*'}; "
                     f"clauses {', '.join(settings.clauses) or '*'}")
    return lines


def target_capabilities(target: str, target_file: TargetFile | None) -> frozenset[str]:
    """What a run's target lets the kit do: everything for the brokers it runs, what the file's commands allow."""
    if target == "url":
        return frozenset()
    if target_file is not None:
        return capabilities_of(target_file)
    return ALL_CAPABILITIES


def _unlock(capability: str, target_file: TargetFile | None) -> str:
    if target_file is None:
        commands = ", ".join(unlocking_commands(capability, frozenset()))
        return f"a target file (--target-file) with {commands} commands"
    offered = frozenset.intersection(*(n.commands.offered() for n in target_file.nodes))
    missing = unlocking_commands(capability, offered)
    return f"{' and '.join(missing)} command{'s' if len(missing) > 1 else ''} in {target_file.path.name}" + (
        f" ({COMMANDS[missing[0]]})" if len(missing) == 1 else "")


def reach_lines(cases: Sequence[Case], capabilities: frozenset[str], target_file: TargetFile | None) -> list[str]:
    """How many of the selected cases can give a verdict with the capabilities offered, and what would unlock the
    rest (the first capability each lacks, most needed first)."""
    lacking = Counter(next(n for n in case.needs if n not in capabilities) for case in cases
                      if not set(case.needs) <= capabilities)
    reachable = len(cases) - sum(lacking.values())
    offered = ", ".join(sorted(capabilities)) or "none (black box)"
    lines = [f"core conformance: {reachable} of {len(cases)} cases can give a verdict with what the target offers "
             f"({offered})"]
    for capability, count in lacking.most_common():
        lines.append(f"core conformance:   {count} more need {capability}: {_unlock(capability, target_file)}")
    return lines


def summary_lines(state: RunState) -> list[str]:
    counts = state.counts()
    known = sum(1 for r in state.results if r.judgement.deviation is not None)
    parts = [f"{verdict} {counts[verdict]}" for verdict in Verdict if counts[verdict]]
    total = sum(counts.values())
    lines = [f"{total} {subject_description(state)}: {', '.join(parts) or 'none ran'}"
             + (f" ({known} known deviations)" if known else "")]
    width = max((len(r.case.id) for r in state.results), default=0)
    for result in state.results:
        judgement = result.judgement
        if judgement.verdict is Verdict.PASS:
            continue
        reason = "" if judgement.deviation is not None else first_line(judgement.reason)
        lines.append(f"  {result.case.id:<{width}}  {judgement.describe()}" + (f"  {reason}" if reason else ""))
    stale = [r for r in state.results if r.judgement.stale is not None]
    if stale:
        lines.append("known deviations that did not reproduce (remove or correct them):")
        for result in stale:
            deviation = result.judgement.stale
            assert deviation is not None
            lines.append(f"  {result.case.id}: expected {deviation.verdict}, got {result.judgement.verdict} "
                         f"({deviation.describe()})")
    if state.other_failures:
        lines.append(f"{state.other_failures} failed tests that are not conformance cases")
    for crash in state.crashed:
        lines.append(f"a worker process died (the kit's error, no verdict): {crash}")
    if state.lost:
        lines.append(f"{len(state.lost)} collected items ended in no report (their worker died; the kit's error, "
                     f"no verdict): {', '.join(state.lost)}")
    if state.exit_status is not None:
        lines.append(f"exit status {state.exit_status}: {EXIT_MEANING.get(state.exit_status, 'see pytest')}")
    return lines
