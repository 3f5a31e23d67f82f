"""Verdicts of conformance cases, the outcome for the kit's own errors, and what a case raises to decide them.

A case's verdict is decided by the *cause* of what ended it, never by the bare fact that something was raised:

* PASS — the subject (the broker, or the client under test) did what the clause says.
* PASS_LENIENT — it missed a SHOULD (a failed check of a SHOULD-level clause, or :meth:`CaseEvidence.should`);
  ``--strict-should`` turns that into FAIL.
* UNSUPPORTED — the case cannot run against this target or client (it needs control the target does not give,
  or the subject lacks an optional feature): :func:`unsupported`, or the targets' ``UnsupportedByTarget``.
* INDETERMINATE — the kit could not tell (a timing check disagreed with its own re-run, the case ran out of its
  overall deadline, the machine was too slow to judge): :func:`indeterminate`.
* FAIL — a failed check: the subject did what the clause forbids or did not do what it requires.  A check is an
  ``assert`` (or :class:`CheckFailed`, or :class:`NotObserved` for something that did not happen in time) or
  an error the kit's client raises *because of what the broker did*: it refused a request, closed the
  connection, sent an unexpected or undecodable packet, or did not answer within the call timeout.
* KIT_ERROR — an error of the kit itself: a bug in its code (``TypeError``, ``KeyError``, ...), a helper that
  crashed, a resource it could not get (a port, a process, a broker it could not start), a wait that timed
  out without naming what it waited for.  Never PASS, PASS_LENIENT or FAIL: the case says nothing about the
  subject.  The reason names the error and where in the kit it was raised.

Exit status of a run: 0 when every case conforms (PASS, PASS_LENIENT, UNSUPPORTED, known deviations), 1 when
any case FAILs, 3 when none failed but the kit erred in some (pytest's "internal error": the tool, not the
subject), 2 when none failed or erred but some were INDETERMINATE.
"""

from __future__ import annotations

import enum
from typing import NoReturn

__all__ = [
    "Verdict",
    "Unsupported",
    "Indeterminate",
    "CheckFailed",
    "NotObserved",
    "KitError",
    "unsupported",
    "indeterminate",
]


class Verdict(enum.StrEnum):
    PASS = "PASS"  # noqa: S105  (a verdict name, not a password)
    PASS_LENIENT = "PASS_LENIENT"  # noqa: S105
    UNSUPPORTED = "UNSUPPORTED"
    INDETERMINATE = "INDETERMINATE"
    FAIL = "FAIL"
    KIT_ERROR = "KIT_ERROR"


class Unsupported(Exception):
    """The case cannot run against this target; the message says why."""


class Indeterminate(Exception):
    """The kit could not decide; the message says why."""


class CheckFailed(AssertionError):
    """A check of the subject failed: what it did (or did not do) breaks the case's clause.

    ``assert`` raises the plain ``AssertionError``, which counts the same; raise this from helpers that check
    on a case's behalf, so the cause is stated where the check is."""


class NotObserved(CheckFailed, TimeoutError):
    """What the subject must do did not happen within its deadline (a FAIL, not the kit's timeout).

    Also a ``TimeoutError``, so code that tolerates a quiet period (``contextlib.suppress(TimeoutError)``)
    keeps working when a wait for the subject becomes a check."""


class KitError(Exception):
    """The kit could not do its part (a helper failed, a resource could not be had): the KIT_ERROR outcome.

    Any exception that is not a check, an :class:`Unsupported` or an :class:`Indeterminate` is the kit's error
    too; raise this one to say what the kit was doing in words of its own."""


def unsupported(reason: str) -> NoReturn:
    raise Unsupported(reason)


def indeterminate(reason: str) -> NoReturn:
    raise Indeterminate(reason)
