"""From what happened in a case's setup, call and teardown to its verdict: pure functions, no pytest objects.

* setup or call raised :class:`Unsupported` / ``UnsupportedByTarget`` (or ``pytest.skip``) -> UNSUPPORTED
* setup or call raised :class:`Indeterminate` -> INDETERMINATE
* the call failed -> FAIL; PASS_LENIENT instead when the clause is SHOULD or MAY and the run is not strict
* the call passed -> PASS; PASS_LENIENT when the case recorded a SHOULD miss (FAIL when strict)
* setup failed otherwise -> FAIL (the case could not even get its broker into the state it checks)
* teardown failed after a passing case -> INDETERMINATE (cleaning up went wrong; the check itself passed)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from conformance.targets import UnsupportedByTarget
from conformance.verdicts import Indeterminate, Unsupported, Verdict

from ._deviations import Deviation

__all__ = ["Judgement", "judge_phase", "judge_teardown", "CONFORMING", "first_line"]

#: Verdicts that keep the exit status 0.
CONFORMING = frozenset({Verdict.PASS, Verdict.PASS_LENIENT, Verdict.UNSUPPORTED})


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    reason: str | None = None
    #: The known deviation this verdict matches (then it counts as conforming).
    deviation: Deviation | None = None
    #: A known deviation listed this case with another verdict: it no longer reproduces.
    stale: Deviation | None = None

    @property
    def conforms(self) -> bool:
        return self.verdict in CONFORMING or self.deviation is not None

    def describe(self) -> str:
        if self.deviation is not None:
            return f"{self.verdict} (known deviation: {self.deviation.reason})"
        return str(self.verdict)


def first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def judge_phase(
    when: str,
    outcome: str,
    exc: BaseException | None,
    message: str | None,
    *,
    lenient_clause: bool,
    strict: bool,
    should_misses: Sequence[str],
    skip_reason: str | None = None,
) -> Judgement | None:
    """The verdict decided by a setup or call phase, or None when the phase decided nothing (a passing setup).

    ``outcome`` is pytest's ("passed", "failed", "skipped"); ``message`` the failure's text."""
    if isinstance(exc, Unsupported | UnsupportedByTarget):
        return Judgement(Verdict.UNSUPPORTED, str(exc) or type(exc).__name__)
    if isinstance(exc, Indeterminate):
        return Judgement(Verdict.INDETERMINATE, str(exc) or "Indeterminate")
    if outcome == "skipped":
        return Judgement(Verdict.UNSUPPORTED, skip_reason or "skipped")
    if outcome == "failed":
        if when == "call" and lenient_clause and not strict:
            return Judgement(Verdict.PASS_LENIENT, f"SHOULD not met: {first_line(message)}")
        return Judgement(Verdict.FAIL, message or "failed")
    if when == "setup":
        return None
    if should_misses:
        text = "; ".join(should_misses)
        if strict:
            return Judgement(Verdict.FAIL, f"SHOULD missed (strict): {text}")
        return Judgement(Verdict.PASS_LENIENT, f"SHOULD missed: {text}")
    return Judgement(Verdict.PASS)


def judge_teardown(before: Judgement | None, outcome: str, message: str | None) -> Judgement:
    """The final verdict once teardown has run."""
    if before is None:  # nothing decided (cannot happen in a normal run); say so rather than guess
        return Judgement(Verdict.INDETERMINATE, "the case reported no setup or call result")
    if outcome == "failed" and before.verdict in (Verdict.PASS, Verdict.PASS_LENIENT):
        return Judgement(Verdict.INDETERMINATE, f"teardown failed: {first_line(message)}")
    return before
