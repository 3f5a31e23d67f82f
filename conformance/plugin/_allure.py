"""Allure labels and links for each case, from its :class:`Case` and :class:`Clause` (allure-pytest does the
writing; it is active when ``--alluredir`` is set, which ``--evidence-dir`` does by default)."""

from __future__ import annotations

import importlib
from typing import Any

from cck.conformance.cases import Case
from cck.conformance.clauses import Clause, is_url

from ._judge import Judgement

__all__ = ["allure_dynamic", "label_case", "label_verdict", "SEVERITY"]

#: Clause level -> allure severity, so a report can sort MUST failures first.
SEVERITY = {"MUST": "critical", "SHOULD": "normal", "MAY": "minor"}


def allure_dynamic() -> Any | None:
    """``allure.dynamic``, or None when allure-pytest is not installed (labels are then simply not made).

    Imported by name at run time: the allure package ships no type information."""
    try:
        return importlib.import_module("allure").dynamic
    except ImportError:
        return None


def label_case(case: Case, clause: Clause | None, target: str, target_version: str | None,
               client: str | None = None) -> None:
    dynamic = allure_dynamic()
    if dynamic is None:
        return
    dynamic.id(case.id)
    dynamic.label("case_id", case.id)
    dynamic.title(f"{case.id}: {case.description}")
    dynamic.suite(case.group)
    dynamic.feature(case.group)
    dynamic.story(case.clause)
    dynamic.label("clause", case.clause)
    dynamic.label("checks", case.checks)
    dynamic.parameter("target", target)
    dynamic.parameter("target_version", target_version or "unknown")
    dynamic.label("target", f"{target} {target_version or 'unknown'}")
    dynamic.label("subject", case.subject)
    if client is not None:
        dynamic.parameter("client", client)
        dynamic.label("client", client)
    lines = [f"**Does:** {case.description}", "", f"**Expects:** {case.expectation}"]
    if clause is not None:
        dynamic.severity(SEVERITY[clause.level])
        dynamic.tag(clause.level)
        dynamic.label("clause_level", clause.level)
        if is_url(clause.source):
            dynamic.link(clause.source, name=f"clause {clause.id}")
        else:
            dynamic.label("clause_source", clause.source)
        lines += ["", f"**Clause {clause.id}** ({clause.level}, {clause.source}):", "", f"> {clause.text}"]
        if clause.implementation is not None:
            lines += ["", f"**Artemis implementation** ({clause.implementation_source or 'notes'}): "
                          f"{clause.implementation}", "", f"This case checks: {case.checks}"]
            if clause.implementation_source and is_url(clause.implementation_source):
                dynamic.link(clause.implementation_source, name=f"implementation of {clause.id}")
    dynamic.description("\n".join(lines))


def label_verdict(judgement: Judgement) -> None:
    dynamic = allure_dynamic()
    if dynamic is None:
        return
    dynamic.label("verdict", str(judgement.verdict))
    if judgement.deviation is not None:
        dynamic.label("known_deviation", judgement.deviation.reason)
        if judgement.deviation.link:
            dynamic.link(judgement.deviation.link, name="known deviation")
