"""The timing self-check (``cck timing-check``): which backoff rows can tell a schedule 20 % off,
and a real run of the kit's client with each wrong schedule, which the oracle must fail."""

from __future__ import annotations

import io
import math

import pytest

from cck.conformance.clients import ClientUnderTest
from cck.conformance.oracles import DEFAULT_TOLERANCE
from cck.conformance.suite._backoff_runs import Plan
from cck.conformance.suite._backoff_skew import Skew, margin, rows_for, skews, summary, timing_check
from cck.conformance.suite.test_backoff import TIMED

KIT = ClientUnderTest("kit")
STOCK = ClientUnderTest("artemis", "2.44.0")
BY_ID = {case.id: case for case in TIMED}


def _plan(case_id: str) -> Plan:
    return Plan.from_params(BY_ID[case_id].params)


def test_a_skew_moves_one_parameter_or_its_default() -> None:
    assert Skew("retryInterval", 1.2).apply({"retryInterval": "250", "reconnectAttempts": "3"}) == {
        "retryInterval": "300", "reconnectAttempts": "3"}
    assert Skew("retryIntervalMultiplier", 0.8).apply({}) == {"retryIntervalMultiplier": "0.8"}
    assert Skew("maxRetryInterval", 1.2).apply({})["maxRetryInterval"] == "2400"
    assert [s.name for s in skews(0.2)] == [
        "retryInterval x1.2", "retryInterval x0.8", "retryIntervalMultiplier x1.2", "retryIntervalMultiplier x0.8",
        "maxRetryInterval x1.2", "maxRetryInterval x0.8"]
    with pytest.raises(ValueError, match="between 0 and 1"):
        skews(1.5)


def test_margin_is_how_far_a_perfectly_kept_wrong_schedule_lands_outside_the_band() -> None:
    # 250 ms -> 300 ms: each wait 50 ms late against ±37.5 ms
    assert margin(_plan("backoff.interval.2"), Skew("retryInterval", 1.2), DEFAULT_TOLERANCE) == pytest.approx(
        max(50 / 37.5, 100 / (25 + 0.05 * 500)))
    # a cap the schedule never reaches changes nothing
    assert margin(_plan("backoff.interval.1"), Skew("maxRetryInterval", 0.8), DEFAULT_TOLERANCE) == 0
    # a single 100 ms wait 20 ms long is inside its ±30 ms band: this row cannot tell that skew
    assert margin(_plan("backoff.listener.1"), Skew("retryInterval", 1.2), DEFAULT_TOLERANCE) < 1
    assert math.isfinite(margin(_plan("backoff.cap.1"), Skew("maxRetryInterval", 1.2), DEFAULT_TOLERANCE))


def test_every_wrong_schedule_has_rows_that_can_tell_it() -> None:
    for skew in skews(0.2):
        for client in (KIT, STOCK):
            rows = rows_for(skew, TIMED, DEFAULT_TOLERANCE, client, 3)
            assert len(rows) == 3, skew
            assert all(margin(Plan.from_params(c.params), skew, DEFAULT_TOLERANCE) > 1 for c in rows)
            if not client.is_kit:
                assert all(Plan.from_params(c.params).failing is None for c in rows)


def test_the_kit_client_with_a_wrong_schedule_fails_every_time() -> None:
    out = io.StringIO()
    runs = timing_check(KIT, TIMED, DEFAULT_TOLERANCE, fraction=0.2, repeat=1, rows=1, out=out)
    every, lines = summary(runs, 1)
    assert len(runs) == 6
    assert every, "\n".join([*lines, out.getvalue()])
    assert all(run.caught for run in runs), [(r.skew.name, r.case_id, r.explanation) for r in runs]
