"""Verdicts of conformance cases and the two outcomes a case can declare itself.

* PASS — the broker did what the clause says.
* PASS_LENIENT — it missed a SHOULD (a failed check of a SHOULD-level clause, or :meth:`CaseEvidence.should`);
  ``--strict`` turns that into FAIL.
* UNSUPPORTED — the case cannot run against this target (it needs control the target does not give, or
  the broker lacks an optional feature): :func:`unsupported`, or the targets' ``UnsupportedByTarget``.
* INDETERMINATE — the kit could not tell (the broker would not start, a timing check disagreed with its own
  re-run, the machine was too slow to judge): :func:`indeterminate`.
* FAIL — the broker did not do what a MUST says.

Exit status of a run: 0 when every case conforms (PASS, PASS_LENIENT, UNSUPPORTED), 1 when any case FAILs
(known deviations excepted), 2 when none failed but some were INDETERMINATE.
"""

from __future__ import annotations

import enum
from typing import NoReturn

__all__ = ["Verdict", "Unsupported", "Indeterminate", "unsupported", "indeterminate"]


class Verdict(enum.StrEnum):
    PASS = "PASS"  # noqa: S105  (a verdict name, not a password)
    PASS_LENIENT = "PASS_LENIENT"  # noqa: S105
    UNSUPPORTED = "UNSUPPORTED"
    INDETERMINATE = "INDETERMINATE"
    FAIL = "FAIL"


class Unsupported(Exception):
    """The case cannot run against this target; the message says why."""


class Indeterminate(Exception):
    """The kit could not decide; the message says why."""


def unsupported(reason: str) -> NoReturn:
    raise Unsupported(reason)


def indeterminate(reason: str) -> NoReturn:
    raise Indeterminate(reason)
