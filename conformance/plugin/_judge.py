"""From what happened in a case's setup, call and teardown to its verdict: pure functions, no pytest objects.

The cause of what ended a phase decides (``conformance.verdicts`` says what each verdict means):

* :class:`Unsupported` / ``UnsupportedByTarget`` (or ``pytest.skip``) in setup or call -> UNSUPPORTED
* :class:`Indeterminate` in setup or call -> INDETERMINATE
* a failed check (``assert``, :class:`CheckFailed`, ``pytest.fail``, or an error the kit's client or codec
  raised because of what the peer did) -> FAIL; PASS_LENIENT instead when the clause is SHOULD or MAY and the
  run is not strict (call phase only).  A refusal of the kit's protocol version is not one: the kit spoke the
  version of what it was told the target is
* anything else (the kit's own error) -> KIT_ERROR, naming the error and where in the kit it was raised; never
  PASS_LENIENT, whatever the clause's level
* the call passed -> PASS; PASS_LENIENT when the case recorded a SHOULD miss (FAIL when strict)
* teardown failed after a passing case -> KIT_ERROR for the kit's error, INDETERMINATE otherwise (the check
  itself passed; cleaning up went wrong)
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from cck.codec import CodecError, EncodeError, ExceptionType
from cck.conformance.targets import UnsupportedByTarget
from cck.conformance.verdicts import Indeterminate, Unsupported, Verdict
from cck.reference.client import BrokerRefused, ClientError, ObjectClosed

from ._deviations import Deviation

__all__ = ["Judgement", "Cause", "cause_of", "kit_error_location", "judge_phase", "judge_teardown", "CONFORMING",
           "first_line"]

#: Verdicts that keep the exit status 0.
CONFORMING = frozenset({Verdict.PASS, Verdict.PASS_LENIENT, Verdict.UNSUPPORTED})

Cause = Literal["unsupported", "indeterminate", "check", "kit"]

#: Errors raised because of what the peer did: the kit's client when the broker refused a request, closed the
#: connection, sent something out of place or did not answer in time; the codec decoding the peer's bytes.
_PEER_ERRORS: tuple[type[BaseException], ...] = (ClientError, CodecError)
#: Among those, the ones only the kit's own code can cause: using a closed session, producer or consumer, and
#: encoding a packet the kit built wrongly.
_KIT_ERRORS: tuple[type[BaseException], ...] = (ObjectClosed, EncodeError)

#: The kit's packages: a kit error's location is its innermost frame inside one of them.
_KIT_ROOT = Path(__file__).resolve().parents[2]
_KIT_PACKAGES = ("codec", "reference", "conformance")


def cause_of(exc: BaseException | None) -> Cause:
    """What an exception that ended a phase says about the subject (None: a failure pytest gave no exception)."""
    if isinstance(exc, Unsupported | UnsupportedByTarget | pytest.skip.Exception):
        return "unsupported"
    if isinstance(exc, Indeterminate):
        return "indeterminate"
    if isinstance(exc, AssertionError | pytest.fail.Exception):
        return "check"
    if isinstance(exc, BrokerRefused) and exc.type is ExceptionType.INCOMPATIBLE_CLIENT_SERVER_VERSIONS:
        # the kit offered a protocol version the broker does not speak: the target's declared version is wrong
        return "kit"
    if isinstance(exc, _PEER_ERRORS) and not isinstance(exc, _KIT_ERRORS):
        return "check"
    return "kit"


def kit_error_location(exc: BaseException | None) -> str | None:
    """``path:line in function`` of the innermost frame of ``exc``'s traceback in the kit's own code (or, when
    no frame is, the innermost frame at all); None without a traceback."""
    frames = traceback.extract_tb(exc.__traceback__) if exc is not None and exc.__traceback__ else []
    if not frames:
        return None
    own = [f for f in frames if _in_kit(f.filename)]
    frame = (own or frames)[-1]
    path = Path(frame.filename)
    shown = path.resolve().relative_to(_KIT_ROOT) if _in_kit(frame.filename) else path
    return f"{shown}:{frame.lineno} in {frame.name}"


def _in_kit(filename: str) -> bool:
    try:
        relative = Path(filename).resolve().relative_to(_KIT_ROOT)
    except ValueError:
        return False
    return bool(relative.parts) and relative.parts[0] in _KIT_PACKAGES


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    reason: str | None = None
    #: The known deviation this verdict matches (then it counts as conforming).
    deviation: Deviation | None = None
    #: A known deviation listed this case with another verdict: it no longer reproduces.
    stale: Deviation | None = None
    #: For KIT_ERROR: the error's type and where in the kit it was raised (``path:line in function``).
    error_type: str | None = None
    error_where: str | None = None

    @property
    def conforms(self) -> bool:
        return self.verdict in CONFORMING or self.deviation is not None

    def describe(self) -> str:
        if self.deviation is not None:
            return f"{self.verdict} (known deviation: {self.deviation.reason})"
        return str(self.verdict)


def first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def _kit_error(exc: BaseException | None, message: str | None, when: str) -> Judgement:
    where = kit_error_location(exc)
    error_type = type(exc).__name__ if exc is not None else None
    what = message or (f"{error_type}: {exc}" if exc is not None else f"the {when} phase failed without an error")
    return Judgement(Verdict.KIT_ERROR, f"kit error in {when}: {what}" + (f" (at {where})" if where else ""),
                     error_type=error_type, error_where=where)


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
    if outcome == "skipped":
        return Judgement(Verdict.UNSUPPORTED, skip_reason or "skipped")
    if outcome == "failed":
        cause = cause_of(exc)
        if cause == "unsupported":
            return Judgement(Verdict.UNSUPPORTED, str(exc) or type(exc).__name__)
        if cause == "indeterminate":
            return Judgement(Verdict.INDETERMINATE, str(exc) or "Indeterminate")
        if cause == "kit":
            return _kit_error(exc, message, when)
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


def judge_teardown(before: Judgement | None, outcome: str, exc: BaseException | None,
                   message: str | None) -> Judgement:
    """The final verdict once teardown has run."""
    if before is None:  # nothing decided (cannot happen in a normal run); say so rather than guess
        return Judgement(Verdict.INDETERMINATE, "the case reported no setup or call result")
    if outcome == "failed" and before.verdict in (Verdict.PASS, Verdict.PASS_LENIENT):
        if cause_of(exc) == "kit":
            return _kit_error(exc, message, "teardown")
        return Judgement(Verdict.INDETERMINATE, f"teardown failed: {first_line(message)}")
    return before
