"""The client's rules: the kit's own client (``reference/client``), judged by what the fault proxy and the client
itself recorded during a run.  Every other oracle of the exploration judges the broker; a finding here names the
client.

What is judged, each with the clause it rests on (notes §11, the suite's ``backoff.*`` and ``restart.give-up.*``
cases):

* ``backoff.immediate-first``: the first reconnect attempt after a failure comes at once, not after a retry
  interval;
* ``backoff.retry-interval`` / ``backoff.multiplier`` / ``backoff.max-retry-interval``: the k-th later wait is
  retryInterval x multiplier^(k-1), capped at maxRetryInterval (the first wait is not capped), as
  :func:`cck.conformance.oracles.expected_reconnect_schedule` computes it;
* ``backoff.reconnect-attempts``: a reconnection makes at most reconnectAttempts attempts, and exactly that many
  when it gives up;
* ``backoff.initial-connect-attempts``: the first connect makes at most max(1, initialConnectAttempts) attempts,
  and exactly that many when it fails;
* ``restart.recreate`` (failure listeners): the failure listeners are called before the reconnection begins;
* ``restart.gave-up``: when the client gives up, its sessions are failed: a call waiting then is woken with the
  failure, not left to time out.

Timing.  Attempts are the proxy's accept times (``time.monotonic_ns()``); the origin of a reconnection is the
moment the client reported its failure.  An interval is judged against the suite's tolerance
(:data:`~cck.conformance.oracles.DEFAULT_TOLERANCE`, set from the measured error of the clients the kit times)
on the early side as it is: nothing on a loaded machine makes a client's wait shorter (the next attempt is due
a wait after the client saw the previous one fail, which it can only see after the proxy accepted it).  The late
side is widened by what load explains, measured during the run: the time the event loop (which runs the client,
the proxy and their timers) was stalled within the interval, from a probe that sleeps a few milliseconds at a
time and records how much later it woke (:class:`LagSample`); and the first attempt gets the suite's
:data:`~cck.conformance.oracles.FIRST_ATTEMPT_REACTION_MS` for the client's reaction to the failure.  The late
side is judged only after an attempt the proxy refused: a wait counts from an attempt's failure, which for a
refused attempt is its accept, but for an accepted one comes whenever its handshake or reattach failed.

Pure functions over plain records; the runner measures (:func:`watch_loop`), this module judges.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

from cck.conformance.oracles import (
    DEFAULT_TOLERANCE,
    FIRST_ATTEMPT_REACTION_MS,
    RetryPolicy,
    Tolerance,
    expected_reconnect_schedule,
)

from ._judge import Judgement
from ._model import ClientConfig

__all__ = ["LAG_PERIOD_S", "CallEnd", "ClientEntry", "ClientVerdict", "LagSample", "ProxyAttempt", "judge_client",
           "watch_loop", "with_client_verdict"]

_MS = 1_000_000
#: How long the load probe sleeps between readings: short enough to see a stall of a few ms, long enough to
#: cost nothing.  Its own granularity (one period either side of an interval) is added to the late allowance.
LAG_PERIOD_S = 0.005

#: The client's events that end one reconnection (or the run's first connect, for the runner's marks).
_ENDS = frozenset({"failed", "reattached", "recreated", "gave-up"})


@dataclass(frozen=True, slots=True)
class ProxyAttempt:
    """A connection the proxy accepted: when, and whether it refused it (reset at once)."""

    ts_ns: int
    refused: bool


@dataclass(frozen=True, slots=True)
class ClientEntry:
    """One entry of the client's log, in the order the client reported them: a failover event's kind
    (``failed``, ``attempt``, ``attempt-failed``, ``reattached``, ``recreated``, ``gave-up``), ``listener`` (a
    failure listener was called), or the runner's marks ``connected`` / ``connect-failed`` (the first connect
    call returned)."""

    ts_ns: int
    kind: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class CallEnd:
    """A workload call that ended without an answer: when it ended, whether by a timeout (``timed_out``) or an
    error, and when it began where the runner knows (a receive)."""

    request: str
    ended_ns: int
    timed_out: bool
    started_ns: int | None = None


@dataclass(frozen=True, slots=True)
class LagSample:
    """The load probe woke at ``ts_ns``, ``late_ns`` after it asked to."""

    ts_ns: int
    late_ns: int


@dataclass(frozen=True, slots=True)
class ClientVerdict:
    """The client's rules' findings (each naming the client and its clause) and notes (what was not judged)."""

    findings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


async def watch_loop(samples: list[LagSample], period_s: float = LAG_PERIOD_S) -> None:
    """Record how late the event loop wakes a sleep of ``period_s``, until cancelled."""
    while True:
        asked = time.monotonic_ns()
        await asyncio.sleep(period_s)
        now = time.monotonic_ns()
        samples.append(LagSample(now, max(0, now - asked - int(period_s * 1e9))))


def _policy(config: ClientConfig) -> RetryPolicy:
    return RetryPolicy(retry_interval_ms=config.retry_interval_ms,
                       retry_interval_multiplier=config.retry_interval_multiplier,
                       max_retry_interval_ms=config.max_retry_interval_ms,
                       reconnect_attempts=config.reconnect_attempts,
                       initial_connect_attempts=config.initial_connect_attempts)


def _waits_ms(config: ClientConfig, count: int) -> list[int]:
    """The expected wait before each of ``count`` attempts (0 for the first, immediate one)."""
    unbounded = dataclasses.replace(_policy(config), reconnect_attempts=-1)
    return [a.wait_ms for a in expected_reconnect_schedule(unbounded, limit=count)]


def _stalled_ms(lag: Sequence[LagSample], start_ns: int, end_ns: int) -> float:
    """How long the event loop was stalled during [start, end]: the probe's late wakes whose stall overlaps it."""
    return sum(s.late_ns for s in lag if s.ts_ns > start_ns and s.ts_ns - s.late_ns < end_ns) / _MS


def _clause(config: ClientConfig, index: int, waits: Sequence[int]) -> str:
    if index == 0:
        return "backoff.immediate-first"
    if index == 1:
        return "backoff.retry-interval"
    uncapped = waits[index - 1] * config.retry_interval_multiplier
    return "backoff.max-retry-interval" if uncapped > config.max_retry_interval_ms else "backoff.multiplier"


def _judge_intervals(what: str, config: ClientConfig, origin_ns: int | None, attempts: Sequence[ProxyAttempt],
                     lag: Sequence[LagSample], tolerance: Tolerance, findings: list[str], notes: list[str]) -> None:
    """Judge each attempt's distance from the one before (the first: from ``origin_ns``, when given)."""
    waits = _waits_ms(config, len(attempts))
    period_ms = LAG_PERIOD_S * 1000
    unjudged_late = 0
    for index, attempt in enumerate(attempts):
        if index == 0 and origin_ns is None:
            continue
        start = origin_ns if index == 0 else attempts[index - 1].ts_ns
        assert start is not None
        observed = (attempt.ts_ns - start) / _MS
        expected = waits[index]
        allowed = tolerance.allowed_ms(expected)
        clause = _clause(config, index, waits)
        if observed < expected - allowed:
            findings.append(f"client: {what} attempt {index + 1} came {observed:.0f} ms after "
                            f"{'the failure' if index == 0 else 'the previous attempt'}, expected {expected} ms "
                            f"(at least {expected - allowed:.0f} ms) [{clause}]")
            continue
        if index > 0 and not attempts[index - 1].refused:
            unjudged_late += 1  # its wait counts from a failure later than its accept
            continue
        reaction = tolerance.scale * FIRST_ATTEMPT_REACTION_MS if index == 0 else 0.0
        load = _stalled_ms(lag, start, attempt.ts_ns) + 2 * period_ms
        late_limit = expected + allowed + reaction + load
        if observed > late_limit:
            findings.append(f"client: {what} attempt {index + 1} came {observed:.0f} ms after "
                            f"{'the failure' if index == 0 else 'the previous attempt'}, expected {expected} ms "
                            f"(at most {late_limit:.0f} ms, of which {load:.0f} ms the measured load) [{clause}]")
    if unjudged_late:
        notes.append(f"{what}: {unjudged_late} wait(s) after an accepted attempt judged for earliness only (the "
                     "wait counts from the attempt's failure, which came after its accept)")


def _judge_initial(config: ClientConfig, refuse_initial: int, attempts: Sequence[ProxyAttempt],
                   log: Sequence[ClientEntry], lag: Sequence[LagSample], tolerance: Tolerance,
                   findings: list[str], notes: list[str]) -> float | None:
    """The first connect's attempts; the moment it returned (None: it did not, nothing judged)."""
    mark = next((e for e in log if e.kind in ("connected", "connect-failed")), None)
    if mark is None:
        notes.append("the first connect did not return: its attempts are not judged")
        return None
    made = [a for a in attempts if a.ts_ns <= mark.ts_ns]
    bound = max(1, config.initial_connect_attempts)
    if len(made) > bound:
        findings.append(f"client: the first connect made {len(made)} attempts, initialConnectAttempts="
                        f"{config.initial_connect_attempts} allows {bound} [backoff.initial-connect-attempts]")
    elif mark.kind == "connect-failed" and len(made) < bound:
        if refuse_initial >= bound:
            findings.append(f"client: the first connect gave up after {len(made)} attempt(s), "
                            f"initialConnectAttempts={config.initial_connect_attempts} "
                            "[backoff.initial-connect-attempts]")
        else:
            notes.append(f"the first connect failed after {len(made)} attempt(s) with only {refuse_initial} "
                         "refused: not judged")
    _judge_intervals("initial connect", config, None, made, lag, tolerance, findings, notes)
    return mark.ts_ns


def _judge_listeners(log: Sequence[ClientEntry], findings: list[str]) -> None:
    """Each failure is preceded by a failure listener's call since the previous failover event that ends one."""
    called = False  # the runner adds its listener as soon as the first connect returns
    for entry in log:
        if entry.kind == "listener":
            called = True
        elif entry.kind == "failed":
            if not called:
                findings.append("client: a connection failure began its reconnection before any failure listener "
                                "was called [restart.recreate]")
            called = False
        elif entry.kind in _ENDS:
            called = False


def _judge_gave_up(gave_up_ns: int, calls: Sequence[CallEnd], findings: list[str]) -> None:
    """A call still waiting when the client gave up must end with the failure, not a timeout."""
    waiting = [c for c in calls if c.timed_out and c.ended_ns > gave_up_ns
               and (c.started_ns is None or c.started_ns < gave_up_ns)]
    if waiting:
        listed = ", ".join(f"{c.request} ({(c.ended_ns - gave_up_ns) / _MS:.0f} ms after)" for c in waiting[:5])
        findings.append(f"client: it gave up reconnecting but {len(waiting)} call(s) then waiting ended by timing "
                        f"out instead of failing with the connection failure: {listed} [restart.gave-up]")


def judge_client(config: ClientConfig, refuse_initial: int, attempts: Sequence[ProxyAttempt],
                 log: Sequence[ClientEntry], calls: Sequence[CallEnd] = (), lag: Sequence[LagSample] = (),
                 tolerance: Tolerance = DEFAULT_TOLERANCE) -> ClientVerdict:
    """Judge the client's reconnection in one run: ``attempts`` every connection the proxy accepted, in order;
    ``log`` the client's events and listener calls in the order it reported them; ``calls`` the workload's calls
    that ended without an answer; ``lag`` the load probe's readings."""
    findings: list[str] = []
    notes: list[str] = []
    connected_ns = _judge_initial(config, refuse_initial, attempts, log, lag, tolerance, findings, notes)
    _judge_listeners(log, findings)
    if connected_ns is None:
        return ClientVerdict(tuple(findings), tuple(notes))
    failures = [e for e in log if e.kind == "failed"]
    for number, failure in enumerate(failures):
        until = failures[number + 1].ts_ns if number + 1 < len(failures) else None
        made = [a for a in attempts if a.ts_ns > failure.ts_ns and (until is None or a.ts_ns < until)]
        ending = next((e for e in log if e.ts_ns >= failure.ts_ns and e.kind in ("reattached", "recreated", "gave-up")
                       and (until is None or e.ts_ns < until)), None)
        what = f"reconnection {number + 1}"
        bound = config.reconnect_attempts
        if bound >= 0 and len(made) > bound:
            findings.append(f"client: {what} made {len(made)} attempts, reconnectAttempts={bound} "
                            "[backoff.reconnect-attempts]")
        elif ending is not None and ending.kind == "gave-up" and len(made) < bound:
            findings.append(f"client: {what} gave up after {len(made)} attempt(s), reconnectAttempts={bound} "
                            "[backoff.reconnect-attempts]")
        if ending is not None and ending.kind == "gave-up":
            if bound == -1:
                notes.append(f"{what}: the client gave up although reconnectAttempts=-1 ({ending.detail})")
            _judge_gave_up(ending.ts_ns, calls, findings)
        _judge_intervals(what, config, failure.ts_ns, made, lag, tolerance, findings, notes)
    return ClientVerdict(tuple(findings), tuple(notes))


def with_client_verdict(judgement: Judgement, verdict: ClientVerdict) -> Judgement:
    """The history's judgement with the client's findings and notes added."""
    if not verdict.findings and not verdict.notes:
        return judgement
    findings = judgement.findings + verdict.findings
    return dataclasses.replace(judgement, kind="finding" if findings else "clean", findings=findings,
                               notes=judgement.notes + verdict.notes)
