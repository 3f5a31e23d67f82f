"""The security family's oracle: each login and attempt of a :class:`SecurityExample`, what the broker answered,
against what the model of the configuration (:mod:`._security_oracle`) says it must answer.

What the broker answered is one of: ``allowed`` (the request was done, or failed past the security check, as a
queue that already exists), ``refused`` (SECURITY_EXCEPTION, 105), ``error`` (another refusal, which says nothing
about permissions), ``unknown`` (no answer in time, the connection lost) or ``skipped`` (the login was refused, so
nothing ran).  Only ``allowed`` and ``refused`` are judged: a conforming broker answers every request of a secured
session one way or the other, and the model decides which.

An allowance the model refuses, on Artemis 2.44.0 in the guest realm, can be its known deviation
``security.anonymous.3`` (grants cached under the claimed user name): the finding then names it and cites its clause
last (``[security.anonymous]``), so that an exploration can set it aside (``--ignore-clause``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cck.conformance.oracles import check

from ._judge import Judgement
from ._security_model import SecurityExample
from ._security_oracle import Identity, authenticate, authorize, shares_cached_name

__all__ = ["Answer", "Answered", "judge_security"]

Answered = Literal["allowed", "refused", "error", "unknown", "skipped"]
#: the known deviation an allowance in the guest realm may be (conformance/deviations/artemis-2.44.0.toml)
CACHE_DEVIATION = "security.anonymous.3"
#: its clause, which such a finding cites last (so ``cck explore --ignore-clause security.anonymous`` sets it aside,
#: and only it: other findings in the guest realm cite nothing)
CACHE_CLAUSE = "security.anonymous"


@dataclass(frozen=True, slots=True)
class Answer:
    """What the broker answered step ``attempt`` of login ``login`` (``attempt`` None: the login itself)."""

    login: int
    attempt: int | None
    answered: Answered
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"login": self.login, "attempt": self.attempt, "answered": self.answered, "detail": self.detail}


def judge_security(example: SecurityExample, answers: Sequence[Answer]) -> Judgement:
    """Compare every judged answer with the model's prediction (see the module doc)."""
    findings: list[str] = []
    notes: list[str] = []
    identities: dict[int, Identity | None] = {}
    login_ok: dict[int, bool] = {}
    for answer in answers:
        login = example.logins[answer.login]
        where = f"login {answer.login + 1} ({login.credentials})"
        if answer.attempt is None:
            identity = authenticate(example.realm, login.credentials)
            identities[answer.login] = identity
            must = "allowed" if identity is not None else "refused"
            login_ok[answer.login] = answer.answered == must
            if answer.answered in ("allowed", "refused") and answer.answered != must:
                why = "the login modules refuse these credentials" if identity is None else f"as {identity.user}"
                findings.append(f"{where}: {answer.answered}, must be {must} in the {example.realm} realm ({why})")
            elif answer.answered not in ("allowed", "refused"):
                notes.append(f"{where}: {answer.answered} ({answer.detail}); not judged")
            continue
        attempt = login.attempts[answer.attempt]
        step = f"{where}, {attempt.describe()}"
        identity = identities.get(answer.login)
        if identity is None or not login_ok.get(answer.login, False):
            if answer.answered != "skipped":
                notes.append(f"{step}: {answer.answered}; not judged: the login already went wrong")
            continue
        if answer.answered not in ("allowed", "refused"):
            notes.append(f"{step}: {answer.answered} ({answer.detail}); not judged")
            continue
        place = attempt.where
        allowed = authorize(identity, attempt.permission, place.address, attempt.queue)
        if (answer.answered == "allowed") == allowed:
            continue
        must = "allowed" if allowed else "refused"
        line = (
            f"{step}: {answer.answered}, must be {must} ({identity.user} with roles "
            f"{', '.join(sorted(identity.roles))}, {attempt.permission})"
        )
        if not allowed and shares_cached_name(
            example.realm, identity, attempt.permission, place.address, attempt.queue
        ):
            line += (
                f"; Artemis 2.44.0's known deviation {CACHE_DEVIATION}: grants cached under the claimed name "
                f"{identity.claimed!r}, which another identity holds this permission under [{CACHE_CLAUSE}]"
            )
        findings.append(line)
    result = check([], final_drain_complete=True, allow_duplicates=True)
    return Judgement("finding" if findings else "clean", tuple(findings), tuple(notes), result)
