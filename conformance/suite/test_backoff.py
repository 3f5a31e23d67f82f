"""Backoff timing of the client under test: defaults, intervals, multiplier, cap, attempts 0 / N / -1, initial
connect attempts, the immediate first reconnect and the failure listener (clauses: conformance/clauses/backoff.toml).

Every case here judges a client (subject ``client``): the kit's own (``--client kit``) or the stock Artemis client
of a pinned version (``--client artemis@2.44.0``), driven by ``fixtures/java/backoff`` and measured the same way;
the target broker only answers.  Each timed case puts the client behind a proxy that refuses it, measures every
connection attempt where it arrives (``time.monotonic_ns()``; the stock client's refused SYNs by the kernel's
stamp), and judges the intervals, the span, the number of attempts and the order of the client's events against
the schedule the oracle computes from the case's URL parameters (``conformance.oracles``), within the run's
tolerance.  A failing run is re-run alone once: failing twice is a FAIL, passing only on the re-run is
INDETERMINATE.  Intervals are tens to hundreds of milliseconds; only the default-settings cases wait the default
2000 ms, once.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from cck.conformance.artemis.distribution import ensure_distribution
from cck.conformance.cases import Case, Checks, cases
from cck.conformance.clients import ClientUnderTest
from cck.conformance.evidence import CaseEvidence
from cck.conformance.oracles import RetryPolicy, TimingResult, areverify
from cck.conformance.plugin import Settings
from cck.conformance.targets import Target
from cck.conformance.verdicts import CheckFailed, indeterminate, unsupported
from cck.reference.client import ClientSettings, parse_locator_url

from ._backoff_java import build_backoff_client
from ._backoff_runs import Plan, RunOutcome, expected_for, run_kit, run_stock
from ._backoff_syn import syn_watch_available
from ._kit import bounded

# ------------------------------------------------------------------------------------------------ the tables
# One row per behaviour: (sub, n, clause, checks, description, expectation, params): a case of the client under
# test, whichever it is.

_R, _I = "reconnect", "initial"


def _p(mode: str, limit: int | None = None, failing: int | None = None, connectors: int = 1,
       immediate_first: bool = True, judge_first: bool = True, **url: object) -> dict[str, Any]:
    return {"mode": mode, "url": {k: str(v) for k, v in url.items()}, "limit": limit, "failing": failing,
            "connectors": connectors, "immediate_first": immediate_first, "judge_first": judge_first}


_Row = tuple[str, int, str, Checks, str, str, dict[str, Any]]

ROWS: tuple[_Row, ...] = (
    # defaults (the parameters themselves are checked by test_default_parameters)
    ("defaults", 2, "backoff.defaults", "both", "cut the connection of a client with default settings",
     "reconnectAttempts defaults to 0: no reconnect attempt at all", _p(_R)),
    ("defaults", 3, "backoff.initial-connect-attempts", "implementation",
     "connect with default settings to a proxy that refuses",
     "initialConnectAttempts defaults to 1: one attempt, then the connect fails", _p(_I)),
    ("defaults", 4, "backoff.defaults", "both", "cut a client with reconnectAttempts=2 and default intervals",
     "an immediate attempt, then one after the default retryInterval of 2000 ms", _p(_R, reconnectAttempts=2)),
    # fixed intervals (multiplier 1.0)
    ("interval", 1, "backoff.retry-interval", "both", "retryInterval=100, reconnectAttempts=4, all refused",
     "attempts at 0, 100, 200, 300 ms", _p(_R, retryInterval=100, reconnectAttempts=4)),
    ("interval", 2, "backoff.retry-interval", "both", "retryInterval=250, reconnectAttempts=3, all refused",
     "attempts at 0, 250, 500 ms", _p(_R, retryInterval=250, reconnectAttempts=3)),
    ("interval", 3, "backoff.retry-interval", "both", "retryInterval=50, reconnectAttempts=6, all refused",
     "six attempts 50 ms apart after an immediate one", _p(_R, retryInterval=50, reconnectAttempts=6)),
    ("interval", 4, "backoff.retry-interval", "spec",
     "retryInterval=200, reconnectAttempts=4; only the intervals between attempts are judged",
     "200 ms between subsequent reconnection attempts (the manual's wording)",
     _p(_R, judge_first=False, retryInterval=200, reconnectAttempts=4)),
    # multiplier
    ("multiplier", 1, "backoff.multiplier", "both", "retryInterval=100, multiplier 1.0, reconnectAttempts=4",
     "equal intervals of 100 ms",
     _p(_R, retryInterval=100, retryIntervalMultiplier=1.0, reconnectAttempts=4)),
    ("multiplier", 2, "backoff.multiplier", "both", "retryInterval=100, multiplier 1.5, reconnectAttempts=5",
     "waits 100, 150, 225, 337 ms",
     _p(_R, retryInterval=100, retryIntervalMultiplier=1.5, reconnectAttempts=5)),
    ("multiplier", 3, "backoff.multiplier", "both", "retryInterval=50, multiplier 2.0, maxRetryInterval=5000, "
     "reconnectAttempts=5", "waits 50, 100, 200, 400 ms",
     _p(_R, retryInterval=50, retryIntervalMultiplier=2.0, maxRetryInterval=5000, reconnectAttempts=5)),
    ("multiplier", 4, "backoff.multiplier", "implementation",
     "retryInterval=101, multiplier 1.5, reconnectAttempts=4",
     "waits 101, 151, 226 ms: each product truncated, as Java's (long) cast",
     _p(_R, retryInterval=101, retryIntervalMultiplier=1.5, reconnectAttempts=4)),
    ("multiplier", 5, "backoff.multiplier", "spec", "the manual's example scaled by 1/10: retryInterval=100, "
     "multiplier 2.0, reconnectAttempts=4; intervals only", "100 ms, then 200 ms, then 400 ms between attempts",
     _p(_R, judge_first=False, retryInterval=100, retryIntervalMultiplier=2.0, maxRetryInterval=2000,
        reconnectAttempts=4)),
    # cap
    ("cap", 1, "backoff.max-retry-interval", "both", "retryInterval=50, multiplier 2.0, maxRetryInterval=200, "
     "reconnectAttempts=6", "waits 50, 100, 200, 200, 200 ms",
     _p(_R, retryInterval=50, retryIntervalMultiplier=2.0, maxRetryInterval=200, reconnectAttempts=6)),
    ("cap", 2, "backoff.max-retry-interval", "both", "retryInterval=100, multiplier 3.0, maxRetryInterval=250, "
     "reconnectAttempts=5", "waits 100, 250, 250, 250 ms",
     _p(_R, retryInterval=100, retryIntervalMultiplier=3.0, maxRetryInterval=250, reconnectAttempts=5)),
    ("cap", 3, "backoff.max-retry-interval", "implementation", "retryInterval=300, maxRetryInterval=100, "
     "reconnectAttempts=4", "waits 300, 100, 100 ms: the first interval is not capped",
     _p(_R, retryInterval=300, maxRetryInterval=100, reconnectAttempts=4)),
    ("cap", 4, "backoff.max-retry-interval", "both", "retryInterval=100, multiplier 1.5, maxRetryInterval=150, "
     "reconnectAttempts=4", "waits 100, 150, 150 ms",
     _p(_R, retryInterval=100, retryIntervalMultiplier=1.5, maxRetryInterval=150, reconnectAttempts=4)),
    # reconnectAttempts 0 / N / -1
    ("attempts", 1, "backoff.reconnect-attempts", "both", "reconnectAttempts=0, retryInterval=50; cut",
     "no reconnect attempt", _p(_R, retryInterval=50, reconnectAttempts=0)),
    ("attempts", 2, "backoff.reconnect-attempts", "both", "reconnectAttempts=1, retryInterval=100; cut",
     "exactly one reconnect attempt, then the client gives up", _p(_R, retryInterval=100, reconnectAttempts=1)),
    ("attempts", 3, "backoff.reconnect-attempts", "both", "reconnectAttempts=3, retryInterval=100; cut",
     "exactly three attempts (two waits), then the client gives up",
     _p(_R, retryInterval=100, reconnectAttempts=3)),
    ("attempts", 4, "backoff.reconnect-attempts", "both",
     "reconnectAttempts=-1, retryInterval=80; observe 6 attempts, then close the client",
     "attempts keep coming 80 ms apart; none after the close",
     _p(_R, limit=6, retryInterval=80, reconnectAttempts=-1)),
    ("attempts", 5, "backoff.reconnect-attempts", "both", "reconnectAttempts=-1, retryInterval=40, multiplier 2.0, "
     "maxRetryInterval=160; observe 7 attempts, then close", "waits 40, 80, 160, 160, ... ms; none after the close",
     _p(_R, limit=7, retryInterval=40, retryIntervalMultiplier=2.0, maxRetryInterval=160, reconnectAttempts=-1)),
    ("attempts", 6, "backoff.reconnect-attempts", "both",
     "reconnectAttempts=3, retryInterval=100; the proxy refuses one attempt, then lets the next through",
     "the second attempt, 100 ms after the first, reconnects and the session works",
     _p(_R, failing=1, retryInterval=100, reconnectAttempts=3)),
    # initialConnectAttempts 0 / 1 / N / -1
    ("initial", 1, "backoff.initial-connect-attempts", "implementation",
     "initialConnectAttempts=0, retryInterval=100, to a proxy that refuses", "0 behaves like 1: one attempt",
     _p(_I, retryInterval=100, initialConnectAttempts=0)),
    ("initial", 2, "backoff.initial-connect-attempts", "both", "initialConnectAttempts=1, retryInterval=100",
     "one attempt, then the connect fails", _p(_I, retryInterval=100, initialConnectAttempts=1)),
    ("initial", 3, "backoff.initial-connect-attempts", "implementation",
     "initialConnectAttempts=3, retryInterval=100", "attempts at 0, 100, 200 ms: the first retry waits retryInterval",
     _p(_I, retryInterval=100, initialConnectAttempts=3)),
    ("initial", 4, "backoff.initial-connect-attempts", "implementation",
     "initialConnectAttempts=4, retryInterval=50, multiplier 2.0", "waits 50, 100, 200 ms",
     _p(_I, retryInterval=50, retryIntervalMultiplier=2.0, initialConnectAttempts=4)),
    ("initial", 5, "backoff.initial-connect-attempts", "both",
     "initialConnectAttempts=-1, retryInterval=80; observe 5 attempts, then stop", "attempts keep coming 80 ms apart",
     _p(_I, limit=5, retryInterval=80, initialConnectAttempts=-1)),
    ("initial", 6, "backoff.initial-connect-attempts", "implementation",
     "initialConnectAttempts=3, retryInterval=100; two attempts refused, the third let through",
     "the third attempt, 100 ms after the second, connects",
     _p(_I, failing=2, retryInterval=100, initialConnectAttempts=3)),
    ("initial", 7, "backoff.initial-connect-attempts", "implementation",
     "two connectors (tcp://a,tcp://b), initialConnectAttempts=2, retryInterval=100",
     "max(1, 2) x 2 connectors = 4 attempts, 100 ms apart, round robin",
     _p(_I, connectors=2, retryInterval=100, initialConnectAttempts=2)),
    ("initial", 8, "backoff.initial-connect-attempts", "implementation",
     "reconnectAttempts=-1 with default initialConnectAttempts, retryInterval=100",
     "reconnectAttempts does not govern the initial connection: one attempt",
     _p(_I, retryInterval=100, reconnectAttempts=-1)),
    # the immediate first reconnect
    ("immediate", 1, "backoff.immediate-first", "implementation", "retryInterval=300, reconnectAttempts=2; cut",
     "the first attempt at once (not after 300 ms), the second 300 ms later",
     _p(_R, retryInterval=300, reconnectAttempts=2)),
    ("immediate", 2, "backoff.immediate-first", "implementation",
     "retryInterval=200, multiplier 2.0, reconnectAttempts=3; cut", "attempts at 0, 200, 600 ms",
     _p(_R, retryInterval=200, retryIntervalMultiplier=2.0, reconnectAttempts=3)),
    # failure listeners
    ("listener", 1, "backoff.failure-listener", "both", "reconnectAttempts=2, retryInterval=100; cut, every "
     "attempt refused", "the listener is told of the failure before the first attempt and the client reports "
     "giving up only after the last one", _p(_R, retryInterval=100, reconnectAttempts=2)),
    ("listener", 2, "backoff.failure-listener", "both", "reconnectAttempts=0; cut",
     "the failure listener is called once, with no reconnect attempt", _p(_R, retryInterval=100)),
)


def _case(row: _Row) -> Case:
    sub, n, clause, checks, description, expectation, params = row
    return Case(f"backoff.{sub}.{n}", clause, description, expectation, checks=checks, subject="client",
                params=params)


DEFAULTS = (
    Case("backoff.defaults.1", "backoff.defaults", "read the client's defaults: the kit's client's settings, a URL "
         "without parameters parsed by it and the oracle's policy; the stock client started with a URL without "
         "parameters and its locator's settings read back", "retryInterval 2000, multiplier 1.0, maxRetryInterval "
         "2000, reconnectAttempts 0, initialConnectAttempts 1", checks="both", subject="client"),
)
TIMED = tuple(_case(row) for row in ROWS)

_DEFAULT_VALUES = {"retryInterval": 2000, "retryIntervalMultiplier": 1.0, "maxRetryInterval": 2000,
                   "reconnectAttempts": 0, "initialConnectAttempts": 1}

# ------------------------------------------------------------------------------------------------ helpers


def _stock_java(client: ClientUnderTest) -> tuple[Any, Path]:
    """The stock client's distribution and compiled program, of the client's pinned version (fetched and compiled
    once; a failure to fetch or compile is the kit's error)."""
    why = syn_watch_available()
    if why is not None:
        unsupported(f"the stock client's refused attempts are timed as SYNs on lo: {why}")
    dist = ensure_distribution(client.version)
    return dist, build_backoff_client(dist)


def _judge(case: Case, settings: Settings, evidence: CaseEvidence,
           run_once: Callable[[], Awaitable[RunOutcome]]) -> None:
    plan = Plan.from_params(case.params)
    evidence.note("policy", plan.policy.to_dict())
    evidence.note("expected", [a.to_dict() for a in expected_for(plan)])
    runs: list[RunOutcome] = []

    async def once() -> TimingResult:
        outcome = await run_once()
        runs.append(outcome)
        label = f"run-{len(runs)}"
        evidence.attempts(outcome.attempts, label=label)
        evidence.note(label, outcome.notes | {"problems": outcome.problems})
        return outcome.result

    async def main() -> TimingResult:
        return await areverify(once, attempts=1)

    result = asyncio.run(bounded(main(), settings.deadline(240.0)))
    evidence.timing(case.id, result)
    if not result.ok:
        raise CheckFailed(f"{case.id}: {result.explanation}")
    if result.flaky:
        indeterminate(f"the run and its re-run disagree: {result.explanation}")


# ------------------------------------------------------------------------------------------------ the cases


@cases(*DEFAULTS)
def test_default_parameters(case: Case, cck_client: ClientUnderTest, cck_settings: Settings, cck_target: Target,
                            evidence: CaseEvidence) -> None:
    evidence.note("client", cck_client.name)
    if cck_client.is_kit:
        settings = ClientSettings()
        kit = {"retryInterval": settings.retry_interval_ms,
               "retryIntervalMultiplier": settings.retry_interval_multiplier,
               "maxRetryInterval": settings.max_retry_interval_ms, "reconnectAttempts": settings.reconnect_attempts,
               "initialConnectAttempts": settings.initial_connect_attempts}
        parsed = parse_locator_url("tcp://127.0.0.1:61616").settings()
        from_url = {"retryInterval": parsed.retry_interval_ms,
                    "retryIntervalMultiplier": parsed.retry_interval_multiplier,
                    "maxRetryInterval": parsed.max_retry_interval_ms, "reconnectAttempts": parsed.reconnect_attempts,
                    "initialConnectAttempts": parsed.initial_connect_attempts}
        oracle = RetryPolicy.from_params({}).to_dict()
        evidence.note("kit_client", kit)
        evidence.note("parsed_url", from_url)
        evidence.note("oracle", oracle)
        assert kit == _DEFAULT_VALUES, f"the kit client's defaults {kit} differ from {_DEFAULT_VALUES}"
        assert from_url == _DEFAULT_VALUES, f"a URL without parameters gives {from_url}, not {_DEFAULT_VALUES}"
        assert oracle == _DEFAULT_VALUES, f"the oracle's default policy {oracle} differs from {_DEFAULT_VALUES}"
        return
    java = _stock_java(cck_client)
    plan = Plan.from_params({"mode": "initial", "url": {}})
    outcome = asyncio.run(bounded(run_stock(plan, cck_target.url, cck_settings.tolerance, java),
                                  cck_settings.deadline(120.0)))
    detail = str(outcome.notes.get("stock_defaults", ""))
    evidence.note("stock_locator", detail)
    values = dict(zip(list(_DEFAULT_VALUES), detail.split("/"), strict=False))
    found = {k: (float(v) if k == "retryIntervalMultiplier" else int(v)) for k, v in values.items()}
    assert found == _DEFAULT_VALUES, f"the stock locator's defaults {found} differ from {_DEFAULT_VALUES}"


@cases(*TIMED)
@pytest.mark.cck_alone  # the client's retry schedule judged against the run's tolerance
def test_backoff_schedule(case: Case, cck_client: ClientUnderTest, cck_settings: Settings, cck_target: Target,
                          evidence: CaseEvidence) -> None:
    plan = Plan.from_params(case.params)
    tolerance = cck_settings.tolerance  # already widened by --timing-scale
    evidence.note("client", cck_client.name)
    if cck_client.is_kit:
        _judge(case, cck_settings, evidence,
               lambda: run_kit(plan, cck_target.url, cck_target.protocol_version, tolerance))
        return
    if plan.failing is not None:
        unsupported("the stock client's attempts are refused by a listener that is not there (timed as SYNs), so "
                    "the kit cannot let one attempt of a run through")
    java = _stock_java(cck_client)
    evidence.note("measured_by", "SYNs on lo (the proxy's listener paused: ECONNREFUSED)")
    _judge(case, cck_settings, evidence, lambda: run_stock(plan, cck_target.url, tolerance, java))


def test_tables_are_consistent() -> None:
    """Every row's parameters make a schedule and every case ID is unique (no broker needed)."""
    every = [*DEFAULTS, *TIMED]
    ids = [c.id for c in every]
    assert len(ids) == len(set(ids))
    for case in TIMED:
        expected_for(Plan.from_params(case.params))
    assert dataclasses.is_dataclass(Plan)
