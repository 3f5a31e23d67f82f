"""The exploration's client rules on hand-made attempt logs and client logs (no broker): each rule finds its
violation and leaves a conforming run (and a late attempt that measured load explains) alone; the reconnection
settings and the initial refusals of an example load from JSON with and without them."""

from __future__ import annotations

import json

import pytest

from cck.conformance.explore import Example
from cck.conformance.explore._client_rules import (
    CallEnd,
    ClientEntry,
    LagSample,
    ProxyAttempt,
    judge_client,
    with_client_verdict,
)
from cck.conformance.explore._judge import judge
from cck.conformance.explore._model import ClientConfig, ExampleError, FaultSchedule
from cck.conformance.oracles import History

MS = 1_000_000
T0 = 1_000 * MS  # the failure


def _config(**kw: object) -> ClientConfig:
    return ClientConfig(**kw)  # type: ignore[arg-type]


def _log(*entries: tuple[float, str]) -> list[ClientEntry]:
    """The first connect returned at 0; then ``(ms after T0, kind)`` entries."""
    return [ClientEntry(0, "connected"), *(ClientEntry(T0 + int(at * MS), kind) for at, kind in entries)]


def _reconnect(config: ClientConfig, *at_ms: float, accepted: tuple[int, ...] = (), ending: str = "recreated",
               lag: tuple[LagSample, ...] = ()) -> list[str]:
    """Findings for one reconnection starting at T0 whose attempts come at ``at_ms`` (the last one connects)."""
    attempts = [ProxyAttempt(0, False)] + [ProxyAttempt(T0 + int(at * MS), i not in accepted and i < len(at_ms) - 1)
                                           for i, at in enumerate(at_ms)]
    end = (at_ms[-1] if at_ms else 0) + 5
    log = _log((-1, "listener"), (0, "failed"), (end, ending))
    return list(judge_client(config, 0, attempts, log, lag=lag).findings)


# ------------------------------------------------------------------------------------------- timing


def test_an_immediate_first_reconnect_and_waits_on_schedule_are_clean() -> None:
    config = _config(retry_interval_ms=100, retry_interval_multiplier=2.0, max_retry_interval_ms=1000)
    assert _reconnect(config, 3, 104, 305, 706) == []  # waits 100, 200, 400


def test_a_first_reconnect_after_a_retry_interval_is_late() -> None:
    config = _config(retry_interval_ms=500)
    (finding,) = _reconnect(config, 500)
    assert finding.startswith("client: ")
    assert "[backoff.immediate-first]" in finding


def test_a_first_wait_30_percent_long_is_late() -> None:
    config = _config(retry_interval_ms=500)
    assert _reconnect(config, 2, 502) == []
    (finding,) = _reconnect(config, 2, 652)
    assert "[backoff.retry-interval]" in finding
    assert "at most" in finding


def test_a_late_attempt_that_measured_load_explains_is_not_reported() -> None:
    config = _config(retry_interval_ms=500)
    stall = (LagSample(T0 + 400 * MS, 200 * MS),)  # the event loop stalled 200 ms within the wait
    assert _reconnect(config, 2, 702, lag=stall) == []
    assert len(_reconnect(config, 2, 702)) == 1
    # a stall outside the interval explains nothing
    elsewhere = (LagSample(T0 + 900 * MS, 50 * MS),)
    assert len(_reconnect(config, 2, 702, lag=elsewhere)) == 1


def test_earliness_is_not_excused_by_load() -> None:
    config = _config(retry_interval_ms=500)
    stall = (LagSample(T0 + 100 * MS, 300 * MS),)
    (finding,) = _reconnect(config, 2, 300, lag=stall)
    assert "at least" in finding


def test_an_ignored_multiplier_makes_the_second_wait_early() -> None:
    config = _config(retry_interval_ms=100, retry_interval_multiplier=3.0, max_retry_interval_ms=1000)
    assert _reconnect(config, 1, 101, 401) == []
    (finding,) = _reconnect(config, 1, 101, 201)
    assert "[backoff.multiplier]" in finding
    assert "at least" in finding


def test_an_ignored_cap_makes_a_capped_wait_late() -> None:
    config = _config(retry_interval_ms=100, retry_interval_multiplier=3.0, max_retry_interval_ms=150)
    assert _reconnect(config, 1, 101, 251) == []
    (finding,) = _reconnect(config, 1, 101, 401)
    assert "[backoff.max-retry-interval]" in finding


def test_a_wait_after_an_accepted_attempt_is_judged_for_earliness_only() -> None:
    config = _config(retry_interval_ms=100, max_retry_interval_ms=150)
    # attempt 1 was accepted (its reattach failed later): the late wait after it is not judged
    assert _reconnect(config, 1, 400, 500, accepted=(0,)) == []
    # an early one still is
    assert len(_reconnect(config, 1, 20, 120, accepted=(0,))) == 1


# ------------------------------------------------------------------------------------------- counts


def _gave_up(config: ClientConfig, attempts: int, calls: tuple[CallEnd, ...] = ()) -> list[str]:
    at = [ProxyAttempt(0, False)] + [ProxyAttempt(T0 + (1 + 50 * i) * MS, True) for i in range(attempts)]
    log = _log((-1, "listener"), (0, "failed"), (50 * attempts + 5, "gave-up"))
    return list(judge_client(config, 0, at, log, calls).findings)


def test_a_give_up_after_exactly_reconnect_attempts_is_clean() -> None:
    assert _gave_up(_config(reconnect_attempts=2), 2) == []


@pytest.mark.parametrize("made", [1, 3])
def test_a_give_up_after_another_number_of_attempts_is_a_finding(made: int) -> None:
    (finding,) = _gave_up(_config(reconnect_attempts=2), made)
    assert "[backoff.reconnect-attempts]" in finding


def test_more_attempts_than_reconnect_attempts_before_connecting_is_a_finding() -> None:
    config = _config(reconnect_attempts=1)
    (finding,) = _reconnect(config, 1, 51)
    assert "made 2 attempts" in finding


def _initial(config: ClientConfig, refuse: int, made: int, mark: str) -> list[str]:
    attempts = [ProxyAttempt(i * 50 * MS, i < refuse) for i in range(made)]
    log = [ClientEntry((made * 50 + 5) * MS, mark)]
    return list(judge_client(config, refuse, attempts, log).findings)


def test_the_first_connect_makes_at_most_initial_connect_attempts() -> None:
    assert _initial(_config(), 1, 1, "connect-failed") == []
    assert _initial(_config(initial_connect_attempts=2), 1, 2, "connected") == []
    (finding,) = _initial(_config(), 1, 2, "connected")  # one attempt more than allowed, which connected
    assert "[backoff.initial-connect-attempts]" in finding
    (finding,) = _initial(_config(initial_connect_attempts=3), 3, 2, "connect-failed")  # one too few
    assert "gave up after 2" in finding


# ------------------------------------------------------------------------------------------- listeners, give-up


def test_the_failure_listener_must_be_called_before_the_reconnection_begins() -> None:
    attempts = [ProxyAttempt(0, False), ProxyAttempt(T0 + MS, False)]
    good = _log((-1, "listener"), (0, "failed"), (0, "attempt"), (5, "recreated"))
    assert judge_client(_config(), 0, attempts, good).findings == ()
    late = _log((0, "failed"), (0, "attempt"), (0, "listener"), (5, "recreated"))
    (finding,) = judge_client(_config(), 0, attempts, late).findings
    assert "[restart.recreate]" in finding
    # a second failure: the listener calls of the first reconnection do not count for it
    again = [*good, *_log((10, "failed"), (10, "attempt"), (10, "listener"), (15, "recreated"))[1:]]
    assert len(judge_client(_config(), 0, attempts, again).findings) == 1


def test_a_call_left_to_time_out_after_the_client_gave_up_is_a_finding() -> None:
    config = _config(reconnect_attempts=1)
    gave_up = T0 + 55 * MS
    assert _gave_up(config, 1, (CallEnd("send", gave_up + MS, False),)) == []  # woken with the failure
    assert _gave_up(config, 1, (CallEnd("send", gave_up - MS, True),)) == []  # timed out before
    later = CallEnd("receive", gave_up + 300 * MS, True, started_ns=gave_up + MS)  # began after: not waiting
    assert _gave_up(config, 1, (later,)) == []
    (finding,) = _gave_up(config, 1, (CallEnd("send", gave_up + 2000 * MS, True),))
    assert "[restart.gave-up]" in finding
    assert finding.startswith("client: ")
    waiting = CallEnd("receive", gave_up + 250 * MS, True, started_ns=gave_up - 50 * MS)
    assert len(_gave_up(config, 1, (waiting,))) == 1


def test_the_client_findings_join_the_history_judgement() -> None:
    clean = judge(History(), drain_complete=True, desynchronised=False)
    verdict = judge_client(_config(reconnect_attempts=2), 0, [ProxyAttempt(0, False)],
                           _log((-1, "listener"), (0, "failed"), (5, "gave-up")))
    joined = with_client_verdict(clean, verdict)
    assert joined.kind == "finding"
    assert joined.findings == verdict.findings


# ------------------------------------------------------------------------------------------- the model


def test_examples_without_the_reconnection_fields_load_with_the_first_choices() -> None:
    data = {"workload": {"config": {"window": 65536, "connection_ttl_ms": 60000},
                         "operations": [{"kind": "commit"}]},
            "schedule": {"faults": []}}
    example = Example.from_dict(data)
    assert example.workload.config == ClientConfig()
    assert example.schedule.refuse_initial == 0
    assert example.to_dict() == data  # and written back the same


def test_the_reconnection_fields_round_trip_and_are_checked() -> None:
    config = ClientConfig(retry_interval_ms=250, retry_interval_multiplier=2.0, max_retry_interval_ms=150,
                          reconnect_attempts=2, initial_connect_attempts=3)
    assert ClientConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert "reconnects=2" in config.describe()
    schedule = FaultSchedule((), refuse_initial=2)
    assert FaultSchedule.from_dict(schedule.to_dict()) == schedule
    with pytest.raises(ExampleError):
        ClientConfig.from_dict({"window": 65536, "connection_ttl_ms": 60000, "retry_interval_ms": 7})
    with pytest.raises(ExampleError):
        FaultSchedule.from_dict({"faults": [], "refuse_initial": 9})
