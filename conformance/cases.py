"""Conformance cases: what each test in ``conformance/suite`` checks, as data.

A case has an ID (``<group>.<sub>.<n>``), the clause it checks (an ID in the clause table), a
description (what the kit does), an expectation (what a conforming subject must do), which side of a
documented-vs-implemented disagreement it checks, the target capabilities it needs, its subject (the
broker, or the client under test: ``conformance.clients``) and the parameters of its row.  Families
of cases are tables of these, parametrised onto one test function::

    WINDOW = (
        Case("window.cadence.1", "core.window.confirm", "send 100 1 KiB messages with a 10 KiB window",
             "PACKETS_CONFIRMED arrives each time the confirmed bytes pass 10 KiB", params={"window": 10240}),
        ...
    )

    @cases(*WINDOW)
    def test_confirmation_cadence(case: Case, cck_target: Target, evidence: CaseEvidence) -> None:
        window = case.params["window"]
        ...
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

__all__ = ["Case", "Checks", "Subject", "SUBJECTS", "cases", "CASE_ID"]

#: ``<group>.<sub>.<n>``: lower-case words joined by dots, ending in a number.
CASE_ID = re.compile(r"[a-z][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)+\.[0-9]+")

#: Where the Artemis implementation and its documents disagree, which one a case checks.
Checks = Literal["spec", "implementation", "both"]

#: What a case judges: the broker (the target; the kit's client is only its instrument) or the client under test
#: (``--client``; the broker only answers).  A run judges one subject: broker runs count, report and exit on
#: broker cases only, client runs on client cases only.
Subject = Literal["broker", "client"]
SUBJECTS: tuple[Subject, ...] = ("broker", "client")


@dataclass(frozen=True)
class Case:
    id: str
    clause: str
    description: str
    expectation: str
    checks: Checks = "both"
    #: Target capabilities (``conformance.targets`` CONTROL, KILL, RESTART, CONFIG, LOG) the case cannot run without.
    needs: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    subject: Subject = "broker"

    def __post_init__(self) -> None:
        if not CASE_ID.fullmatch(self.id):
            raise ValueError(f"case ID {self.id!r} is not <group>.<sub>.<n> (lower case, ending in a number)")
        if not self.description or not self.expectation:
            raise ValueError(f"case {self.id}: a description and an expectation are required")
        if self.subject not in SUBJECTS:
            raise ValueError(f"case {self.id}: subject {self.subject!r} is not one of {', '.join(SUBJECTS)}")

    @property
    def group(self) -> str:
        return self.id.split(".", 1)[0]


def cases(*table: Case) -> pytest.MarkDecorator:
    """Parametrise a test over a table of cases (argument name ``case``; each case's ID is the test ID)."""
    ids = [c.id for c in table]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate case IDs in one table: {', '.join(duplicates)}")
    return pytest.mark.parametrize("case", table, ids=ids)
