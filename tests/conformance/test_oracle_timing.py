"""The timing oracle: expected schedules (notes §11, §12.1), tolerance, counts and re-verification."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cck.conformance.oracles import (
    DEFAULT_TOLERANCE,
    FIRST_ATTEMPT_REACTION_MS,
    Attempt,
    RetryPolicy,
    TimingResult,
    Tolerance,
    areverify,
    check_schedule,
    expected_broadcast_schedule,
    expected_initial_connect_schedule,
    expected_reconnect_schedule,
    reverify,
)

MS = 1_000_000
ORIGIN = 5_000 * MS  # an arbitrary monotonic_ns() reading


def offsets(schedule: list[Attempt]) -> list[int]:
    return [attempt.offset_ms for attempt in schedule]


def observed_at(*offsets_ms: float, origin: int = ORIGIN) -> list[int]:
    return [origin + round(offset * MS) for offset in offsets_ms]


# -- RetryPolicy ---------------------------------------------------------------------------------------


def test_policy_defaults_are_artemis_defaults() -> None:
    # notes §11.1 / §14
    assert RetryPolicy() == RetryPolicy(retry_interval_ms=2000, retry_interval_multiplier=1.0,
                                        max_retry_interval_ms=2000, reconnect_attempts=0, initial_connect_attempts=1)


def test_policy_from_url_params_reads_artemis_names_and_ignores_others() -> None:
    policy = RetryPolicy.from_params({
        "retryInterval": "500", "retryIntervalMultiplier": "1.5", "maxRetryInterval": "60000",
        "reconnectAttempts": "-1", "initialConnectAttempts": "3", "ha": "true", "consumerWindowSize": "0"})
    assert policy == RetryPolicy(500, 1.5, 60000, -1, 3)
    assert RetryPolicy.from_params({}) == RetryPolicy()
    assert policy.to_dict()["retryIntervalMultiplier"] == 1.5


@pytest.mark.parametrize(("params", "named"), [
    ({"retryInterval": "fast"}, "retryInterval"),
    ({"retryInterval": "1_000"}, "retryInterval"),
    ({"retryInterval": " 100"}, "retryInterval"),
    ({"retryInterval": "-5"}, "retryInterval"),
    ({"maxRetryInterval": "2000.0"}, "maxRetryInterval"),
    ({"retryIntervalMultiplier": "inf"}, "retryIntervalMultiplier"),
    ({"retryIntervalMultiplier": "-2"}, "retryIntervalMultiplier"),
    ({"retryIntervalMultiplier": ""}, "retryIntervalMultiplier"),
    ({"reconnectAttempts": "-2"}, "reconnectAttempts"),
    ({"initialConnectAttempts": "many"}, "initialConnectAttempts"),
])
def test_policy_bad_param_is_named(params: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        RetryPolicy.from_params(params)


# -- reconnect schedule (notes §11.2, §11.4) -------------------------------------------------------------

RECONNECT_CASES = [
    # id, policy, kwargs, expected offsets, expected waits
    ("defaults: reconnectAttempts=0 means no reconnect", RetryPolicy(), {}, [], []),
    ("notes worked example: 3 attempts, 2 waits", RetryPolicy(reconnect_attempts=3), {},
     [0, 2000, 4000], [0, 2000, 2000]),
    ("single attempt is immediate", RetryPolicy(reconnect_attempts=1), {}, [0], [0]),
    ("multiplier 2.0 capped at maxRetryInterval",
     RetryPolicy(retry_interval_ms=1000, retry_interval_multiplier=2.0, max_retry_interval_ms=5000,
                 reconnect_attempts=6), {},
     [0, 1000, 3000, 7000, 12000, 17000], [0, 1000, 2000, 4000, 5000, 5000]),
    ("multiplier 1.5 truncates: 1000, 1500, 2250, 3375",
     RetryPolicy(retry_interval_ms=1000, retry_interval_multiplier=1.5, max_retry_interval_ms=100_000,
                 reconnect_attempts=5), {},
     [0, 1000, 2500, 4750, 8125], [0, 1000, 1500, 2250, 3375]),
    ("truncation toward zero: 1001 * 1.5 = 1501.5 -> 1501",
     RetryPolicy(retry_interval_ms=1001, retry_interval_multiplier=1.5, max_retry_interval_ms=100_000,
                 reconnect_attempts=4), {},
     [0, 1001, 2502, 4753], [0, 1001, 1501, 2251]),
    ("the first interval is not capped",
     RetryPolicy(retry_interval_ms=5000, max_retry_interval_ms=2000, reconnect_attempts=4), {},
     [0, 5000, 7000, 9000], [0, 5000, 2000, 2000]),
    ("multiplier below 1 shrinks the waits",
     RetryPolicy(retry_interval_ms=1000, retry_interval_multiplier=0.5, max_retry_interval_ms=2000,
                 reconnect_attempts=4), {},
     [0, 1000, 1500, 1750], [0, 1000, 500, 250]),
    ("-1 (forever) listed up to limit", RetryPolicy(retry_interval_ms=100, max_retry_interval_ms=100,
                                                    reconnect_attempts=-1), {"limit": 4},
     [0, 100, 200, 300], [0, 100, 100, 100]),
    ("limit truncates a bounded schedule", RetryPolicy(reconnect_attempts=10), {"limit": 2}, [0, 2000], [0, 2000]),
    ("success after 2 failures: 3 attempts", RetryPolicy(reconnect_attempts=5), {"failing_attempts": 2},
     [0, 2000, 4000], [0, 2000, 2000]),
    ("success at once", RetryPolicy(reconnect_attempts=5), {"failing_attempts": 0}, [0], [0]),
    ("more failures than attempts: gives up", RetryPolicy(reconnect_attempts=2), {"failing_attempts": 7},
     [0, 2000], [0, 2000]),
    ("forever with a success needs no limit", RetryPolicy(reconnect_attempts=-1), {"failing_attempts": 1},
     [0, 2000], [0, 2000]),
    ("manual reading: first reconnect after retryInterval",
     RetryPolicy(retry_interval_ms=1000, retry_interval_multiplier=2.0, max_retry_interval_ms=10_000,
                 reconnect_attempts=3), {"immediate_first": False},
     [1000, 3000, 7000], [1000, 2000, 4000]),
]


@pytest.mark.parametrize(("policy", "kwargs", "want_offsets", "want_waits"),
                         [pytest.param(*case[1:], id=case[0]) for case in RECONNECT_CASES])
def test_reconnect_schedule(policy: RetryPolicy, kwargs: dict[str, Any], want_offsets: list[int],
                            want_waits: list[int]) -> None:
    schedule = expected_reconnect_schedule(policy, **kwargs)
    assert offsets(schedule) == want_offsets
    assert [attempt.wait_ms for attempt in schedule] == want_waits
    assert [attempt.index for attempt in schedule] == list(range(len(schedule)))


def test_reconnect_schedule_outcomes() -> None:
    policy = RetryPolicy(reconnect_attempts=5)
    assert [a.succeeds for a in expected_reconnect_schedule(policy, failing_attempts=2)] == [False, False, True]
    assert not any(a.succeeds for a in expected_reconnect_schedule(policy))
    assert not any(a.succeeds for a in expected_reconnect_schedule(policy, failing_attempts=2, limit=2))


@pytest.mark.parametrize("kwargs", [{}, {"failing_attempts": None}])
def test_reconnect_forever_without_limit_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="limit"):
        expected_reconnect_schedule(RetryPolicy(reconnect_attempts=-1), **kwargs)


@pytest.mark.parametrize("kwargs", [{"failing_attempts": -1}, {"limit": -3}])
def test_reconnect_bad_arguments(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        expected_reconnect_schedule(RetryPolicy(reconnect_attempts=3), **kwargs)


# -- initial connection (notes §11.3) ---------------------------------------------------------------------

INITIAL_CASES = [
    ("defaults: one attempt, no retry", RetryPolicy(), 1, None, [0]),
    ("initialConnectAttempts=0 behaves like 1", RetryPolicy(initial_connect_attempts=0), 1, None, [0]),
    ("3 attempts: first retry waits retryInterval", RetryPolicy(initial_connect_attempts=3), 1, None,
     [0, 2000, 4000]),
    ("backoff applies after the first retry",
     RetryPolicy(retry_interval_ms=100, retry_interval_multiplier=3.0, max_retry_interval_ms=500,
                 initial_connect_attempts=4), 1, None, [0, 100, 400, 900]),
    ("attempts multiply by connectors", RetryPolicy(retry_interval_ms=10, max_retry_interval_ms=10,
                                                    initial_connect_attempts=2), 3, None,
     [0, 10, 20, 30, 40, 50]),
    ("0 x 2 connectors = 2 attempts", RetryPolicy(initial_connect_attempts=0), 2, None, [0, 2000]),
    ("-1 (forever) listed up to limit", RetryPolicy(initial_connect_attempts=-1), 1, 3, [0, 2000, 4000]),
]


@pytest.mark.parametrize(("policy", "connectors", "limit", "want"),
                         [pytest.param(*case[1:], id=case[0]) for case in INITIAL_CASES])
def test_initial_connect_schedule(policy: RetryPolicy, connectors: int, limit: int | None, want: list[int]) -> None:
    assert offsets(expected_initial_connect_schedule(policy, connectors, limit)) == want


def test_initial_connect_success_and_errors() -> None:
    schedule = expected_initial_connect_schedule(RetryPolicy(initial_connect_attempts=5), failing_attempts=1)
    assert [(a.offset_ms, a.succeeds) for a in schedule] == [(0, False), (2000, True)]
    with pytest.raises(ValueError, match="limit"):
        expected_initial_connect_schedule(RetryPolicy(initial_connect_attempts=-1))
    with pytest.raises(ValueError, match="connectors"):
        expected_initial_connect_schedule(RetryPolicy(), connectors=0)


# -- broadcasts (notes §12.1) --------------------------------------------------------------------------------


@pytest.mark.parametrize(("period", "count", "want"), [
    (2000, 4, [0, 2000, 4000, 6000]),
    (250, 1, [0]),
    (2000, 0, []),
])
def test_broadcast_schedule(period: int, count: int, want: list[int]) -> None:
    schedule = expected_broadcast_schedule(period, count)
    assert offsets(schedule) == want
    assert all(attempt.succeeds is None for attempt in schedule)


@pytest.mark.parametrize(("period", "count", "named"), [(0, 3, "broadcast-period"), (100, -1, "count")])
def test_broadcast_schedule_bad_arguments(period: int, count: int, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        expected_broadcast_schedule(period, count)


# -- tolerance ----------------------------------------------------------------------------------------------


def test_tolerance_formula_and_scaling() -> None:
    tolerance = Tolerance(absolute_ms=50, relative=0.1)
    assert tolerance.allowed_ms(2000) == pytest.approx(250)
    assert tolerance.allowed_ms(0) == pytest.approx(50)
    slow = tolerance.scaled(2).scaled(1.5)
    assert slow.allowed_ms(2000) == pytest.approx(750)
    assert slow.to_dict() == {"absolute_ms": 50, "relative": 0.1, "scale": 3.0}


@pytest.mark.parametrize("kwargs", [{"absolute_ms": -1, "relative": 0}, {"absolute_ms": 0, "relative": -0.1},
                                    {"absolute_ms": 0, "relative": 0, "scale": 0},
                                    {"absolute_ms": float("nan"), "relative": 0}])
def test_tolerance_rejects_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="Tolerance"):
        Tolerance(**kwargs)


# -- check_schedule --------------------------------------------------------------------------------------------

THREE = expected_reconnect_schedule(RetryPolicy(reconnect_attempts=3))  # 0, 2000, 4000
TOL = Tolerance(absolute_ms=50, relative=0.1)  # 50 ms at attempt 0, 250 ms for a 2000 ms wait


def test_exact_schedule_passes() -> None:
    result = check_schedule(observed_at(0, 2000, 4000), THREE, TOL, origin_ns=ORIGIN)
    assert result.ok
    assert result.count_mismatch is None
    assert [s.status for s in result.samples] == ["ok", "ok", "ok"]
    assert "all 3 attempts" in result.explanation


@pytest.mark.parametrize(("observed", "status", "index", "words"), [
    pytest.param((0, 2000, 4251), "late", 2, "attempt 2 was 251.0 ms late", id="last attempt too late"),
    pytest.param((0, 1749, 3749), "early", 1, "attempt 1 was 251.0 ms early", id="second attempt too early"),
    pytest.param((51, 2051, 4051), "late", 0, "attempt 0 was 51.0 ms late", id="first attempt not immediate"),
    pytest.param((0, 2300, 4300), "late", 1, "attempt 1 was 300.0 ms late", id="late then on time"),
])
def test_either_side_out_of_tolerance_fails(observed: tuple[float, ...], status: str, index: int,
                                            words: str) -> None:
    result = check_schedule(observed_at(*observed), THREE, TOL, origin_ns=ORIGIN)
    assert not result.ok
    bad = result.first_failure
    assert bad is not None
    assert (bad.status, bad.index) == (status, index)
    assert words in result.explanation


@pytest.mark.parametrize("observed", [(50, 1800, 4050), (0, 2250, 4000), (0, 2000, 4000)],
                         ids=["late 50 then early 250 then late 250", "late 250 then early 250", "exact"])
def test_deviation_up_to_the_allowed_passes(observed: tuple[float, ...]) -> None:
    assert check_schedule(observed_at(*observed), THREE, TOL, origin_ns=ORIGIN).ok


def test_intervals_are_judged_not_offsets() -> None:
    # Each wait is 200 ms long (within 250), so the offsets drift by 400 ms: still conforming,
    # because Artemis times each wait from the previous attempt; the drift is reported.
    result = check_schedule(observed_at(0, 2200, 4400), THREE, TOL, origin_ns=ORIGIN)
    assert result.ok
    assert result.samples[2].observed_offset_ms == pytest.approx(4400)
    assert result.samples[2].expected_offset_ms == 4000
    assert result.samples[2].deviation_ms == pytest.approx(200)


def test_a_systematic_error_fails_the_span() -> None:
    # every wait 240 ms too long: within each interval's 250 ms, but over three waits 720 ms against 6000 ± 650
    four = expected_reconnect_schedule(RetryPolicy(reconnect_attempts=4))
    result = check_schedule(observed_at(0, 2240, 4480, 6720), four, TOL, origin_ns=ORIGIN)
    assert all(sample.ok for sample in result.samples)
    assert result.span is not None
    assert (result.span.waits, result.span.expected_ms, result.span.allowed_ms) == (3, 6000, 650)
    assert result.span.deviation_ms == pytest.approx(720)
    assert not result.ok
    assert "the 3 waits from attempt 0 to attempt 3 took 6720.0 ms in all, expected 6000 ms ± 650.0 ms " \
           "(720.0 ms too long)" in result.explanation
    # random error that does not add up passes
    assert check_schedule(observed_at(0, 2240, 4000, 6240), four, TOL, origin_ns=ORIGIN).ok


def test_the_first_attempt_may_come_a_reaction_later_but_no_later_and_nothing_else_may() -> None:
    # immediate first reconnect, then 100 ms waits; the default tolerance allows 25 ms + 5 %
    schedule = expected_reconnect_schedule(RetryPolicy(retry_interval_ms=100, reconnect_attempts=3))
    assert offsets(schedule) == [0, 100, 200]
    reaction = FIRST_ATTEMPT_REACTION_MS
    late = observed_at(40, 140, 240)  # the client noticed the cut 40 ms after the kit made it
    assert not check_schedule(late, schedule, DEFAULT_TOLERANCE, origin_ns=ORIGIN).ok
    result = check_schedule(late, schedule, DEFAULT_TOLERANCE, origin_ns=ORIGIN, reaction_ms=reaction)
    assert result.ok, result.explanation
    # a client that waits a retry interval before its first attempt still fails
    waited = check_schedule(observed_at(100, 200, 300), schedule, DEFAULT_TOLERANCE, origin_ns=ORIGIN,
                            reaction_ms=reaction)
    assert not waited.ok
    assert waited.samples[0].status == "late"
    assert waited.samples[0].allowed_ms == pytest.approx(25 + reaction)
    # the later intervals keep their own band
    later = check_schedule(observed_at(10, 150, 250), schedule, DEFAULT_TOLERANCE, origin_ns=ORIGIN,
                           reaction_ms=reaction)
    assert later.samples[1].status == "late"
    # scaled like the tolerance
    assert check_schedule(observed_at(90, 190, 290), schedule, DEFAULT_TOLERANCE.scaled(2), origin_ns=ORIGIN,
                          reaction_ms=reaction).ok


def test_one_wait_has_no_span_of_its_own() -> None:
    result = check_schedule(observed_at(0, 2200), THREE[:2], TOL, origin_ns=ORIGIN)
    assert result.span is None
    assert result.to_dict()["span"] is None


def test_too_many_attempts() -> None:
    result = check_schedule(observed_at(0, 2000, 4000, 6000), THREE, TOL, origin_ns=ORIGIN)
    assert not result.ok
    assert result.count_mismatch == "too_many"
    assert result.samples[3].status == "extra"
    assert "too many attempts: observed 4, expected 3" in result.explanation


def test_too_few_attempts() -> None:
    result = check_schedule(observed_at(0, 2000), THREE, TOL, origin_ns=ORIGIN)
    assert not result.ok
    assert result.count_mismatch == "too_few"
    assert result.samples[2].status == "missing"
    assert "too few attempts: observed 2, expected 3" in result.explanation


def test_no_reconnect_expected_but_one_came() -> None:
    result = check_schedule(observed_at(10), expected_reconnect_schedule(RetryPolicy()), TOL, origin_ns=ORIGIN)
    assert result.count_mismatch == "too_many"
    assert not result.ok


def test_open_ended_schedule_tolerates_more_attempts() -> None:
    forever = expected_reconnect_schedule(RetryPolicy(reconnect_attempts=-1), limit=3)
    result = check_schedule(observed_at(0, 2000, 4000, 6000, 8000), forever, TOL, origin_ns=ORIGIN, open_ended=True)
    assert result.ok
    assert [s.status for s in result.samples[3:]] == ["unjudged", "unjudged"]
    # ... but not fewer
    assert check_schedule(observed_at(0), forever, TOL, origin_ns=ORIGIN, open_ended=True).count_mismatch == "too_few"


def test_without_origin_the_first_attempt_is_the_origin() -> None:
    broadcasts = expected_broadcast_schedule(2000, 3)
    result = check_schedule(observed_at(777, 2777, 4777), broadcasts, TOL, origin_ns=None)
    assert result.ok
    assert result.samples[0].status == "unjudged"
    assert result.samples[2].observed_offset_ms == pytest.approx(4000)


@pytest.mark.parametrize(("observed", "origin"), [(observed_at(0, 2000, 1999), ORIGIN), (observed_at(-1), ORIGIN)])
def test_readings_out_of_order_are_a_harness_error(observed: list[int], origin: int) -> None:
    with pytest.raises(ValueError, match="earlier than"):
        check_schedule(observed, THREE, TOL, origin_ns=origin)


def test_result_serialises_to_plain_json() -> None:
    result = check_schedule(observed_at(0, 2600), THREE, TOL, origin_ns=ORIGIN)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["ok"] is False
    assert data["count_mismatch"] == "too_few"
    assert data["samples"][1]["status"] == "late"
    assert data["samples"][1]["allowed_ms"] == pytest.approx(250)
    assert data["samples"][2]["observed_ms"] is None
    assert set(data["samples"][0]) == {"index", "status", "ok", "expected_ms", "observed_ms", "deviation_ms",
                                       "allowed_ms", "expected_offset_ms", "observed_offset_ms"}
    assert [a.to_dict() for a in THREE][1] == {"index": 1, "offset_ms": 2000, "wait_ms": 2000, "succeeds": False}


# -- reverify -----------------------------------------------------------------------------------------------------


def runs_of(*observations: tuple[float, ...]) -> Iterator[TimingResult]:
    for observed in observations:
        yield check_schedule(observed_at(*observed), THREE, TOL, origin_ns=ORIGIN)


GOOD, BAD = (0, 2000, 4000), (0, 2000, 4900)


def test_reverify_rescues_a_flake_and_keeps_the_evidence() -> None:
    results = runs_of(BAD, BAD, GOOD, GOOD)
    result = reverify(lambda: next(results))
    assert result.ok
    assert result.flaky
    assert [run.ok for run in result.runs] == [False, False, True]
    assert "passed on re-verification (run 3 of 3)" in result.explanation
    assert "attempt 2 was 900.0 ms late" in result.explanation
    assert [run["ok"] for run in result.to_dict()["runs"]] == [False, False, True]
    assert next(results).ok  # the fourth run was never needed


def test_reverify_a_real_failure_fails_after_all_runs() -> None:
    calls = []

    def run() -> TimingResult:
        calls.append(1)
        return next(runs_of(BAD))

    result = reverify(run, attempts=3)
    assert not result.ok
    assert not result.flaky
    assert len(calls) == len(result.runs) == 4
    assert "failed in all 4 runs" in result.explanation


def test_reverify_a_pass_runs_once() -> None:
    results = runs_of(GOOD, BAD)
    result = reverify(lambda: next(results))
    assert result.ok
    assert not result.flaky
    assert len(result.runs) == 1
    assert result.explanation.startswith("all 3 attempts")


def test_reverify_zero_reruns_and_bad_attempts() -> None:
    results = runs_of(BAD, GOOD)
    assert not reverify(lambda: next(results), attempts=0).ok
    with pytest.raises(ValueError, match="attempts"):
        reverify(lambda: next(runs_of(GOOD)), attempts=-1)


def test_areverify_awaits_runs_in_turn() -> None:
    results = runs_of(BAD, GOOD)

    async def run() -> TimingResult:
        await asyncio.sleep(0)
        return next(results)

    result = asyncio.run(areverify(run))
    assert result.ok
    assert result.flaky
    assert len(result.runs) == 2


# -- properties -------------------------------------------------------------------------------------------------

policies = st.builds(
    RetryPolicy,
    retry_interval_ms=st.integers(0, 10_000),
    retry_interval_multiplier=st.floats(0, 4, allow_nan=False),
    max_retry_interval_ms=st.integers(0, 30_000),
    reconnect_attempts=st.integers(-1, 25),
    initial_connect_attempts=st.integers(-1, 10),
)


@given(policies, st.integers(0, 30))
def test_schedule_shape(policy: RetryPolicy, limit: int) -> None:
    schedule = expected_reconnect_schedule(policy, limit=limit)
    bound = limit if policy.reconnect_attempts == -1 else min(limit, policy.reconnect_attempts)
    assert len(schedule) == bound
    for previous, attempt in itertools.pairwise(schedule):
        assert attempt.offset_ms == previous.offset_ms + attempt.wait_ms
    if schedule:
        assert schedule[0].offset_ms == 0
    if len(schedule) > 1:
        assert schedule[1].wait_ms == policy.retry_interval_ms  # the first wait, uncapped
        assert all(a.wait_ms <= policy.max_retry_interval_ms for a in schedule[2:])


@given(policies, st.integers(1, 20), st.integers(0, 2**40))
def test_observing_exactly_the_schedule_passes(policy: RetryPolicy, limit: int, origin: int) -> None:
    for schedule in (expected_reconnect_schedule(policy, limit=limit),
                     expected_initial_connect_schedule(policy, limit=limit)):
        observed = [origin + a.offset_ms * MS for a in schedule]
        assert check_schedule(observed, schedule, Tolerance(0, 0), origin_ns=origin).ok


# Waits of at least 10 ms keep readings jittered by +-5 ms in order.
spaced_policies = st.builds(
    RetryPolicy,
    retry_interval_ms=st.integers(10, 10_000),
    retry_interval_multiplier=st.floats(1, 4, allow_nan=False),
    max_retry_interval_ms=st.integers(10, 30_000),
    reconnect_attempts=st.integers(-1, 25),
)


@given(spaced_policies, st.data())
def test_jitter_within_half_the_absolute_tolerance_passes(policy: RetryPolicy, data: st.DataObject) -> None:
    # Moving each attempt by at most a/2 moves each interval by at most a: always accepted.
    schedule = expected_reconnect_schedule(policy, limit=12)
    jitter = data.draw(st.lists(st.integers(-5 * MS, 5 * MS), min_size=len(schedule), max_size=len(schedule)))
    observed = [ORIGIN + 6 * MS + a.offset_ms * MS + j for a, j in zip(schedule, jitter, strict=True)]
    result = check_schedule(observed, schedule, Tolerance(10, 0), origin_ns=ORIGIN + 6 * MS - 5 * MS)
    assert result.ok, result.explanation
    assert result.to_dict()["ok"] is True


def test_default_tolerance_is_usable() -> None:
    assert DEFAULT_TOLERANCE.allowed_ms(2000) > DEFAULT_TOLERANCE.allowed_ms(0) > 0


# -- docs/oracles.md ---------------------------------------------------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "oracles.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_doc_has_examples() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_doc_example_runs(source: str) -> None:
    exec(compile(source, str(DOC), "exec"), {})
