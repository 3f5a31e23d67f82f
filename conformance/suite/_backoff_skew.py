"""The timing self-check: on this machine, with this tolerance, does the backoff oracle fail a client whose schedule
is wrong?

A client is configured with another ``retryInterval``, ``retryIntervalMultiplier`` or ``maxRetryInterval`` than a
case expects (``skew``: 20 % by default, longer and shorter), and runs the backoff rows whose expected schedule that
parameter moves furthest outside the case's band; each run is judged against the case's own expectation, exactly as
the case judges it (one run, no re-run).  A skew is *caught* in a repetition when one of its rows fails.  Which rows
can catch a skew at all is decided beforehand and without noise: a client keeping the skewed schedule perfectly
must fall outside the band (:func:`margin` above 1).  ``cck timing-check`` runs it
(docs/conformance.md, "Timing tolerance").
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from cck.conformance.artemis.distribution import ensure_distribution
from cck.conformance.cases import Case
from cck.conformance.clients import ClientUnderTest
from cck.conformance.oracles import Tolerance, check_schedule
from cck.conformance.targets import Target, make_target
from cck.conformance.verdicts import KitError

from ._backoff_java import build_backoff_client
from ._backoff_runs import Plan, RunOutcome, expected_for, run_kit, run_stock
from ._backoff_syn import syn_watch_available
from ._kit import bounded

__all__ = ["Skew", "skews", "skewed", "margin", "rows_for", "SkewRun", "timing_check", "summary"]

#: The parameters a wrong schedule is made of, with the defaults a URL without them means.
PARAMETERS: Mapping[str, float] = {"retryInterval": 2000, "retryIntervalMultiplier": 1.0, "maxRetryInterval": 2000}
_NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class Skew:
    parameter: str
    factor: float

    @property
    def name(self) -> str:
        return f"{self.parameter} x{self.factor:g}"

    def apply(self, url_params: Mapping[str, str]) -> dict[str, str]:
        """The URL parameters with this one moved by the factor (the default value when the URL does not set it;
        intervals stay whole milliseconds, as a URL gives them)."""
        value = float(url_params.get(self.parameter, PARAMETERS[self.parameter])) * self.factor
        shown = f"{value:g}" if self.parameter == "retryIntervalMultiplier" else str(round(value))
        return {**url_params, self.parameter: shown}


def skews(fraction: float) -> tuple[Skew, ...]:
    """Every parameter ``fraction`` too long and too short."""
    if not 0 < fraction < 1:
        raise ValueError(f"a skew is a fraction between 0 and 1, got {fraction!r}")
    return tuple(Skew(p, f) for p in PARAMETERS for f in (1 + fraction, 1 - fraction))


def skewed(plan: Plan, skew: Skew) -> Plan:
    return dataclasses.replace(plan, client_url_params=skew.apply(plan.url_params))


def margin(plan: Plan, skew: Skew, tolerance: Tolerance) -> float:
    """How far outside the case's band a client keeping the skewed schedule *perfectly* lands, at its worst: the
    largest |deviation| / allowed over the intervals and the span (0 when the skew does not change the schedule;
    above 1: caught with no noise at all; infinite when the number of attempts changes)."""
    expected = expected_for(plan)
    kept = expected_for(dataclasses.replace(plan, url_params=skew.apply(plan.url_params)))
    origin = 10**12
    observed = [origin + int(a.offset_ms * _NS_PER_MS) for a in kept]
    result = check_schedule(observed, expected, tolerance, origin_ns=origin if plan.judge_first else None,
                            open_ended=plan.limit is not None)
    if result.count_mismatch is not None:
        return math.inf
    ratios = [abs(s.deviation_ms) / s.allowed_ms for s in result.samples
              if s.deviation_ms is not None and s.allowed_ms]
    if result.span is not None:
        ratios.append(abs(result.span.deviation_ms) / result.span.allowed_ms)
    return max(ratios, default=0.0)


def rows_for(skew: Skew, table: Iterable[Case], tolerance: Tolerance, client: ClientUnderTest,
             count: int) -> list[Case]:
    """The ``count`` rows the skew moves furthest outside their band (margin above 1), furthest first; rows the
    client cannot run (the stock client cannot be let through after refused attempts) are left out."""
    usable = [case for case in table if client.is_kit or Plan.from_params(case.params).failing is None]
    ranked = sorted(((margin(Plan.from_params(c.params), skew, tolerance), c.id, c) for c in usable),
                    key=lambda row: (-row[0], row[1]))
    return [case for m, _, case in ranked if m > 1][:count]


@dataclass(frozen=True)
class SkewRun:
    repetition: int
    skew: Skew
    case_id: str
    caught: bool
    explanation: str
    seconds: float


async def _run_one(case: Case, skew: Skew, client: ClientUnderTest, target: Target, tolerance: Tolerance,
                   java: tuple[Any, Path] | None) -> RunOutcome:
    plan = skewed(Plan.from_params(case.params), skew)
    if java is None:
        return await run_kit(plan, target.url, target.protocol_version, tolerance)
    return await run_stock(plan, target.url, tolerance, java)


def _stock_program(client: ClientUnderTest) -> tuple[Any, Path]:
    why = syn_watch_available()
    if why is not None:
        raise KitError(f"the stock client's refused attempts are timed as SYNs on lo, which cannot be done here: {why}")
    dist = ensure_distribution(client.version)
    return dist, build_backoff_client(dist)


def timing_check(client: ClientUnderTest, table: Sequence[Case], tolerance: Tolerance, *, fraction: float,
                 repeat: int, rows: int, out: TextIO = sys.stderr) -> list[SkewRun]:
    """Run every skew's rows ``repeat`` times against a reference broker of its own; one line per skew and
    repetition on ``out``.  Returns every run."""
    plan = {skew: rows_for(skew, table, tolerance, client, rows) for skew in skews(fraction)}
    for skew, chosen in plan.items():
        print(f"{skew.name}: rows {', '.join(c.id for c in chosen) or '(none can tell it)'}", file=out, flush=True)
    java = None if client.is_kit else _stock_program(client)
    runs: list[SkewRun] = []
    with tempfile.TemporaryDirectory(prefix="cck-timing-check-") as work, \
            make_target("reference", workdir=Path(work)) as target:
        for repetition in range(1, repeat + 1):
            for skew, chosen in plan.items():
                caught_by: list[str] = []
                for case in chosen:
                    began = time.monotonic()
                    outcome = asyncio.run(bounded(_run_one(case, skew, client, target, tolerance, java), 240.0))
                    run = SkewRun(repetition, skew, case.id, not outcome.result.ok, outcome.result.explanation,
                                  time.monotonic() - began)
                    runs.append(run)
                    if run.caught:
                        caught_by.append(case.id)
                verdict = f"caught by {', '.join(caught_by)}" if caught_by else "NOT caught"
                print(f"repetition {repetition}/{repeat}  {skew.name:<32} {verdict}", file=out, flush=True)
    return runs


def summary(runs: Sequence[SkewRun], repeat: int) -> tuple[bool, list[str]]:
    """Whether every skew was caught in every repetition, and one line per skew saying how often."""
    lines: list[str] = []
    every = True
    for skew in dict.fromkeys(r.skew for r in runs):
        caught = {r.repetition for r in runs if r.skew == skew and r.caught}
        every = every and len(caught) == repeat
        rows = [r for r in runs if r.skew == skew]
        share = sum(r.caught for r in rows) / len(rows)
        lines.append(f"{skew.name:<32} caught in {len(caught)} of {repeat} repetitions "
                     f"({share:.0%} of its {len(rows)} row runs failed)")
    return every, lines
