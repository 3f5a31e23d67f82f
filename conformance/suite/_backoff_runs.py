"""One measured run of a backoff case, for either client.

A run builds its own proxy (or proxies) in front of the target, drives the client under test into its
retry loop and returns the attempts it measured, the judged schedule and what else it saw.  The kit's
client meets a proxy that accepts and resets each attempt (``RefuseConnections``: the proxy's
``AttemptRecord``); the stock Artemis client meets a listener that is not there (``pause_listening``:
ECONNREFUSED, timed by :class:`SynWatch`), because Artemis counts an accepted TCP connection as
connected (see ``_backoff_syn``).  Either way the attempt is stamped with ``time.monotonic_ns()`` when it
reaches the kit, and the same oracle judges it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode

from cck.conformance.faults import FaultProxy, RefuseConnections
from cck.conformance.oracles import (
    FIRST_ATTEMPT_REACTION_MS,
    Attempt,
    RetryPolicy,
    TimingResult,
    Tolerance,
    check_schedule,
    expected_initial_connect_schedule,
    expected_reconnect_schedule,
)
from cck.conformance.verdicts import NotObserved
from cck.reference.client import ClientError, ClientSettings, Connection, FailoverEvent, connect

from ._backoff_java import StockClient
from ._backoff_syn import SynRecord, SynWatch
from ._kit import wait_until

__all__ = ["Plan", "RunOutcome", "expected_for", "run_kit", "run_stock"]

_MS = 1_000_000


class _Stamped(Protocol):
    @property
    def ts_ns(self) -> int: ...

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Plan:
    """What a case row asks for (``Case.params`` read into a typed form)."""

    mode: str  # "reconnect" or "initial"
    url_params: Mapping[str, str]
    #: for an unbounded loop (-1): how many attempts to observe before stopping the client
    limit: int | None = None
    #: attempts refused before one is let through (None: every attempt is refused)
    failing: int | None = None
    connectors: int = 1
    #: the implementation's immediate first reconnect (True) or the manual's reading (False)
    immediate_first: bool = True
    #: False: the first attempt is not timed against the origin, only the intervals after it
    judge_first: bool = True
    #: The URL parameters the client is configured with when they are not those the schedule is expected from:
    #: the timing self-check (``_backoff_skew``) gives a client a wrong schedule on purpose.  None: ``url_params``.
    client_url_params: Mapping[str, str] | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Plan:
        return cls(mode=params["mode"], url_params=dict(params.get("url", {})), limit=params.get("limit"),
                   failing=params.get("failing"), connectors=params.get("connectors", 1),
                   immediate_first=params.get("immediate_first", True), judge_first=params.get("judge_first", True))

    @property
    def policy(self) -> RetryPolicy:
        return RetryPolicy.from_params(self.url_params)

    def query(self) -> str:
        """The query string of the URL the client under test is given."""
        params = self.url_params if self.client_url_params is None else self.client_url_params
        return ("?" + urlencode(dict(params))) if params else ""


@dataclass
class RunOutcome:
    """A run: the judged schedule (with any non-timing problem folded in) and the raw observations."""

    result: TimingResult
    attempts: Sequence[_Stamped]
    problems: list[str] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)


def expected_for(plan: Plan) -> list[Attempt]:
    policy = plan.policy
    if plan.mode == "reconnect":
        return expected_reconnect_schedule(policy, failing_attempts=plan.failing, limit=plan.limit,
                                           immediate_first=plan.immediate_first)
    return expected_initial_connect_schedule(policy, plan.connectors, plan.limit, failing_attempts=plan.failing)


def _next_wait_ms(plan: Plan, count: int) -> int:
    """The wait a client that (wrongly) went on would take before attempt ``count`` (0-based)."""
    policy = dataclasses.replace(plan.policy, reconnect_attempts=-1, initial_connect_attempts=-1)
    if plan.mode == "reconnect":
        if count == 0:
            return policy.retry_interval_ms if not plan.immediate_first else 0
        return expected_reconnect_schedule(policy, limit=count + 1)[-1].wait_ms
    return expected_initial_connect_schedule(policy, limit=count + 1)[-1].wait_ms if count else 0


def _quiet_s(plan: Plan, count: int, tolerance: Tolerance, cap_s: float) -> float:
    """How long to watch for an attempt that should not come (bounded by ``cap_s``)."""
    wait = max(_next_wait_ms(plan, count), plan.policy.retry_interval_ms if count == 0 else 0)
    return min(cap_s, (wait + tolerance.allowed_ms(wait)) / 1000 + 0.15 * tolerance.scale)


def _judge(plan: Plan, observed: Sequence[int], origin_ns: int | None, tolerance: Tolerance,
           problems: list[str]) -> TimingResult:
    expected = expected_for(plan)
    origin = origin_ns if plan.judge_first else None
    result = check_schedule(observed, expected, tolerance, origin_ns=origin, open_ended=plan.limit is not None,
                            reaction_ms=FIRST_ATTEMPT_REACTION_MS if plan.mode == "reconnect" else 0.0)
    if problems:
        result = dataclasses.replace(result, ok=False, explanation="; ".join([*problems, result.explanation]))
    return result


def _split(url: str) -> tuple[str, int]:
    host, _, port = url.removeprefix("tcp://").partition("?")[0].rpartition(":")
    return host.strip("[]"), int(port)


def _closed_port() -> int:
    """A port nothing listens on (bound, then released) for the stock client's warm-up attempts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _locator_url(proxies: Sequence[FaultProxy], plan: Plan) -> str:
    if len(proxies) == 1:
        return proxies[0].url + plan.query()
    return "(" + ",".join(p.url for p in proxies) + ")" + plan.query()


def _span_s(plan: Plan, tolerance: Tolerance) -> float:
    """A generous bound for the whole expected schedule (each wait plus its allowance, plus slack)."""
    expected = expected_for(plan)
    return sum((a.wait_ms + tolerance.allowed_ms(a.wait_ms)) / 1000 for a in expected) + 5.0 * tolerance.scale


# ---------------------------------------------------------------------------------------------- kit's client


async def run_kit(plan: Plan, target_url: str, protocol_version: int | None, tolerance: Tolerance) -> RunOutcome:
    host, port = _split(target_url)
    proxies = [FaultProxy(host, port) for _ in range(plan.connectors)]
    for proxy in proxies:
        await proxy.start()
    base = ClientSettings(call_timeout_ms=5000, topology_timeout_ms=5000)
    if protocol_version is not None:
        base = dataclasses.replace(base, version=protocol_version)
    try:
        if plan.mode == "reconnect":
            return await _kit_reconnect(plan, proxies[0], base, tolerance)
        return await _kit_initial(plan, proxies, base, tolerance)
    finally:
        for proxy in proxies:
            await proxy.stop()


async def _kit_reconnect(plan: Plan, proxy: FaultProxy, base: ClientSettings, tolerance: Tolerance) -> RunOutcome:
    problems: list[str] = []
    notes: dict[str, Any] = {}
    connection = await connect(_locator_url([proxy], plan), settings=base, connect_timeout=10.0)
    listener_ns: list[int] = []
    events: list[tuple[int, FailoverEvent]] = []
    gave_up = asyncio.Event()
    connection.add_failure_listener(lambda _error: listener_ns.append(time.monotonic_ns()))

    def on_event(event: FailoverEvent) -> None:
        events.append((time.monotonic_ns(), event))
        if event.kind in ("gave-up", "reattached", "recreated"):
            gave_up.set()

    connection.add_event_listener(on_event)
    try:
        session = await connection.create_session()
        before = len(proxy.attempts)
        proxy.add(RefuseConnections(count=plan.failing))
        expected = expected_for(plan)
        origin = time.monotonic_ns()
        proxy.cut_all()
        closed_ns: int | None = None
        if plan.limit is not None:
            await proxy.wait_for_attempts(before + plan.limit, _span_s(plan, tolerance))
            closed_ns = time.monotonic_ns()
            await connection.close()
            with contextlib.suppress(TimeoutError):
                await proxy.wait_for_attempts(len(proxy.attempts) + 1, _quiet_s(plan, plan.limit, tolerance, 1.0))
        elif expected:
            try:
                await asyncio.wait_for(gave_up.wait(), _span_s(plan, tolerance))
            except TimeoutError:
                raise NotObserved(f"the client neither gave up nor reconnected within {_span_s(plan, tolerance):.1f} "
                                  f"s of the cut ({len(proxy.attempts) - before} attempt(s) seen)") from None
            with contextlib.suppress(TimeoutError):
                await proxy.wait_for_attempts(before + len(expected) + 1,
                                              _quiet_s(plan, len(expected), tolerance, 1.0))
        else:
            with contextlib.suppress(TimeoutError):
                await proxy.wait_for_attempts(before + 1, _quiet_s(plan, 0, tolerance, 3.0))
        attempts = list(proxy.attempts[before:])
        observed = [a.ts_ns for a in attempts]
        if closed_ns is not None:
            after = [a for a in attempts if a.ts_ns > closed_ns]
            if after:
                problems.append(f"{len(after)} attempt(s) after the client was closed")
            observed = [a.ts_ns for a in attempts if a.ts_ns <= closed_ns]
        # the failure listener: at the failure, before the first attempt
        notes["failure_listener_ms"] = [(t - origin) / _MS for t in listener_ns]
        notes["events"] = [{"kind": e.kind, "at_ms": (t - origin) / _MS, "detail": e.detail} for t, e in events]
        # (the kit's client also calls it for each refused attempt's own TCP connection: counted, not judged)
        if not listener_ns:
            problems.append("the failure listener was not called")
        elif observed and listener_ns[0] > observed[0]:
            problems.append("the failure listener was called after the first reconnect attempt")
        ends = [t for t, e in events if e.kind == "gave-up"]
        if plan.limit is None and expected:
            if plan.failing is None or plan.failing >= len(expected):
                if not ends:
                    problems.append("the client never reported giving up")
                elif observed and ends[0] < observed[-1]:
                    problems.append("the client gave up before its last attempt")
                elif connection.failure is None:
                    problems.append("the connection does not report its failure after giving up")
                notes["gave_up_ms"] = [(t - origin) / _MS for t in ends]
            else:
                try:
                    await asyncio.wait_for(session.add_metadata("cck-backoff", "probe"), 10.0)
                except (ClientError, TimeoutError) as exc:
                    problems.append(f"the session does not work after the reconnection: {exc}")
        return RunOutcome(_judge(plan, observed, origin, tolerance, problems), attempts, problems, notes)
    finally:
        await connection.close()


async def _kit_initial(plan: Plan, proxies: Sequence[FaultProxy], base: ClientSettings,
                       tolerance: Tolerance) -> RunOutcome:
    problems: list[str] = []
    notes: dict[str, Any] = {}
    for proxy in proxies:
        # ``failing`` counts attempts over all connectors; with one connector it is the proxy's own count
        proxy.add(RefuseConnections(count=plan.failing))
    started = time.monotonic_ns()
    task = asyncio.ensure_future(connect(_locator_url(proxies, plan), settings=base, connect_timeout=10.0))
    connection: Connection | None = None
    failed_ns: int | None = None
    try:
        if plan.limit is not None:
            limit = plan.limit  # narrowed for the predicate below
            await wait_until(lambda: sum(len(p.attempts) for p in proxies) >= limit, _span_s(plan, tolerance),
                             f"fewer than {plan.limit} attempts")
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, ClientError, ConnectionRefusedError):
                await task
        else:
            try:
                connection = await asyncio.wait_for(task, _span_s(plan, tolerance))
            except ConnectionRefusedError as exc:
                failed_ns = time.monotonic_ns()
                notes["error"] = str(exc)
            except TimeoutError:
                raise NotObserved(f"the connect call neither connected nor failed within "
                                  f"{_span_s(plan, tolerance):.1f} s") from None
            if plan.failing is None and connection is not None:
                problems.append("the connection succeeded although every attempt was refused")
            if plan.failing is not None and connection is None:
                problems.append(f"the connection failed although attempt {plan.failing + 1} was let through")
        attempts: list[_Stamped] = sorted((a for p in proxies for a in p.attempts), key=lambda a: a.ts_ns)
        notes["connect_called_ms_before_first_attempt"] = (attempts[0].ts_ns - started) / _MS if attempts else None
        if plan.connectors > 1:
            owner = {(a.ts_ns, a.conn): i for i, p in enumerate(proxies) for a in p.attempts}
            notes["connector_of_each_attempt"] = [owner.get((a.ts_ns, a.to_json()["conn"])) for a in attempts]
        observed = [a.ts_ns for a in attempts]
        if failed_ns is not None and observed and failed_ns < observed[-1]:
            problems.append("the connect call failed before the client's last attempt")
        notes["connect_failed_ms"] = None if failed_ns is None or not observed else (failed_ns - observed[0]) / _MS
        origin = observed[0] if observed else started
        return RunOutcome(_judge(plan, observed, origin, tolerance, problems), attempts, problems, notes)
    finally:
        if connection is not None:
            await connection.close()


# ---------------------------------------------------------------------------------------------- stock client


async def run_stock(plan: Plan, target_url: str, tolerance: Tolerance, java: tuple[Any, Path]) -> RunOutcome:
    dist, classes = java
    host, port = _split(target_url)
    proxies = [FaultProxy(host, port) for _ in range(plan.connectors)]
    for proxy in proxies:
        await proxy.start()
    watch = SynWatch({p.port for p in proxies})
    client = StockClient(dist, classes, plan.mode, _locator_url(proxies, plan), deadline_s=120.0,
                         warmup_url=f"tcp://127.0.0.1:{_closed_port()}" if plan.mode == "initial" else None)
    try:
        if plan.mode == "reconnect":
            outcome = await _stock_reconnect(plan, proxies[0], watch, client, tolerance)
        else:
            outcome = await _stock_initial(plan, proxies, watch, client, tolerance)
        outcome.notes["stock_client_events"] = [e.to_dict() for e in client.events]
        return outcome
    finally:
        stderr = await client.close()
        watch.stop()
        for proxy in proxies:
            await proxy.stop()
        if stderr.strip():
            client.noise.append(stderr)


async def _stock_reconnect(plan: Plan, proxy: FaultProxy, watch: SynWatch, client: StockClient,
                           tolerance: Tolerance) -> RunOutcome:
    problems: list[str] = []
    notes: dict[str, Any] = {}
    await client.start()
    await client.wait_for("ready", timeout=60.0)
    expected = expected_for(plan)
    await proxy.pause_listening()
    before = len(await _recorded(watch))
    origin = time.monotonic_ns()
    proxy.cut_all()
    closed_ns: int | None = None
    if plan.limit is not None:
        limit = plan.limit  # narrowed for the predicate below
        await wait_until(lambda: len(watch.snapshot()) - before >= limit, _span_s(plan, tolerance),
                         f"fewer than {plan.limit} attempts")
        closed_ns = time.monotonic_ns()
        await client.close()  # the program exits once its locator is closed: no attempt can follow it
    elif expected:
        await client.wait_for("connection-failed", timeout=_span_s(plan, tolerance), after_ns=origin)
        await _quiet(watch, before + len(expected), _quiet_s(plan, len(expected), tolerance, 1.0))
    else:
        await client.wait_for("before-reconnect", "connection-failed", timeout=10.0, after_ns=origin)
        await _quiet(watch, before, _quiet_s(plan, 0, tolerance, 3.0))
    attempts: list[_Stamped] = list((await _recorded(watch))[before:])
    observed = [a.ts_ns for a in attempts if closed_ns is None or a.ts_ns <= closed_ns]
    _after_close(client, attempts, problems)
    failed = client.first("connection-failed", after_ns=origin)
    notes["connection_failed_ms"] = None if failed is None else (failed.ts_ns - origin) / _MS
    if plan.limit is None and expected and failed is not None and observed and failed.ts_ns < observed[-1]:
        problems.append("the failure listener reported the failure before the last attempt")
    return RunOutcome(_judge(plan, observed, origin, tolerance, problems), attempts, problems, notes)


def _after_close(client: StockClient, attempts: Sequence[_Stamped], problems: list[str]) -> None:
    """Attempts stamped after the program said its locator was closed (the "closed" line is read after the close
    returned, so an attempt the kernel stamped later surely came after it)."""
    closed = client.first("closed")
    if closed is not None:
        late = [a for a in attempts if a.ts_ns > closed.ts_ns]
        if late:
            problems.append(f"{len(late)} attempt(s) after the client was closed")


async def _recorded(watch: SynWatch) -> list[SynRecord]:
    """Every SYN seen up to now: waits (bounded) until the watch's thread has read what is queued."""
    return await asyncio.to_thread(watch.records_until, time.monotonic_ns(), 5.0)


async def _quiet(watch: SynWatch, count: int, seconds: float) -> None:
    """Watch ``seconds`` for attempts beyond ``count`` (returns early when one comes)."""
    with contextlib.suppress(TimeoutError):
        await wait_until(lambda: len(watch.snapshot()) > count, seconds, "no extra attempt")


async def _stock_initial(plan: Plan, proxies: Sequence[FaultProxy], watch: SynWatch, client: StockClient,
                         tolerance: Tolerance) -> RunOutcome:
    problems: list[str] = []
    notes: dict[str, Any] = {}
    for proxy in proxies:
        await proxy.pause_listening()
    await client.start()
    await client.wait_for("started", timeout=60.0)
    notes["stock_defaults"] = client.first("started").detail  # type: ignore[union-attr]
    if plan.limit is not None:
        limit = plan.limit  # narrowed for the predicate below
        await wait_until(lambda: len(watch.snapshot()) >= limit, 60.0 + _span_s(plan, tolerance),
                         f"fewer than {plan.limit} attempts")
        await client.close()  # the program exits once its locator is closed: no attempt can follow it
        end = None
    else:
        end = await client.wait_for("gave-up", "connected", timeout=60.0 + _span_s(plan, tolerance))
        if end.event != "gave-up":
            problems.append("the stock client connected although nothing was listening")
        notes["error"] = end.detail
    attempts: list[_Stamped] = list(await _recorded(watch))
    _after_close(client, attempts, problems)
    attempts = [a for a in attempts if (closed := client.first("closed")) is None or a.ts_ns <= closed.ts_ns]
    observed = [a.ts_ns for a in attempts]
    if end is not None and end.event == "gave-up" and observed and end.ts_ns < observed[-1]:
        problems.append("the connect call failed before the client's last attempt")
    origin = observed[0] if observed else None
    return RunOutcome(_judge(plan, observed, origin, tolerance, problems), attempts, problems, notes)
