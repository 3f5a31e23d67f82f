"""One security example, run: the administrator resets the name space straight on the realm's broker (the queues
the attempts use exist, the queues they create do not), then the kit's client, through a fault proxy that only
records the wire, logs in and attempts each operation in turn; every answer is classified and judged
(:func:`._security_judge.judge_security`).

Every call has a deadline (the client's call timeout, and one per step on the monotonic clock).  A run that cannot
be judged (no broker for the realm, the setup failing) is ``indeterminate``; an exception of the kit's own is a
``kit-error``: neither is ever a finding.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cck.codec import CURRENT_VERSION, CoreMessage, ExceptionType, RoutingType
from cck.conformance.faults import FaultProxy
from cck.reference.client import BrokerRefused, ClientError, ClientSettings, Connection, Session, connect

from ._runner import Outcome
from ._security_judge import Answer, Answered, judge_security
from ._security_model import Attempt, SecurityExample
from ._security_oracle import ADMIN, CREDENTIALS, NEW_QUEUES, QUEUES, Place, Realm

__all__ = ["SecurityLimits", "run_security"]


@dataclass(frozen=True, slots=True)
class SecurityLimits:
    """Deadlines (seconds) of one security run."""

    call_timeout_ms: int = 3_000
    #: one login or attempt, answer included
    step_s: float = 5.0
    #: the administrator's reset of the name space
    setup_s: float = 20.0
    example_s: float = 60.0


class _Indeterminate(Exception):
    """The run cannot be judged."""


def _settings(limits: SecurityLimits, protocol_version: int | None) -> ClientSettings:
    version = CURRENT_VERSION if protocol_version is None else min(CURRENT_VERSION, protocol_version)
    # every send blocks, so that its refusal comes back to the call
    return ClientSettings(
        version=version,
        reconnect_attempts=0,
        call_timeout_ms=limits.call_timeout_ms,
        block_on_durable_send=True,
        block_on_non_durable_send=True,
        block_on_acknowledge=True,
    )


def _routing(place: Place) -> RoutingType:
    return RoutingType.MULTICAST if place.routing == "multicast" else RoutingType.ANYCAST


async def _reset(url: str, settings: ClientSettings, limits: SecurityLimits) -> None:
    """As the administrator: every address and queue the attempts use exists, no queue they create does."""
    async with await connect(url, settings=settings, connect_timeout=limits.setup_s) as connection:
        admin = await connection.create_session(username=ADMIN.name, password=ADMIN.password)
        for place in QUEUES:
            if not (await admin.binding_query(place.address)).exists:
                await admin.create_address(place.address, (RoutingType.ANYCAST, RoutingType.MULTICAST))
            if not (await admin.queue_query(place.queue)).exists:
                await admin.create_queue(place.address, place.queue, routing_type=_routing(place), durable=True)
        for place in NEW_QUEUES:
            if (await admin.queue_query(place.queue)).exists:
                await admin.delete_queue(place.queue)
        await admin.close()


def _classified(error: BaseException, creating: bool) -> tuple[Answered, str]:
    if isinstance(error, BrokerRefused):
        if error.code == ExceptionType.SECURITY_EXCEPTION:
            return "refused", str(error.broker_message)
        if creating and error.code == ExceptionType.QUEUE_EXISTS:
            # the security check comes first (ServerSessionImpl.createQueue): the queue exists, so it was passed
            return "allowed", "the queue exists already"
        return "error", str(error)
    return "unknown", f"{type(error).__name__}: {error}"


async def _attempt(session: Session, attempt: Attempt) -> None:
    place = attempt.where
    if attempt.action == "send":
        producer = session.create_producer(place.address)
        try:
            await producer.send(CoreMessage(b"cck-explore-security", durable=True))
        finally:
            producer.close()
    elif attempt.action in ("consume", "browse"):
        consumer = await session.create_consumer(place.queue, browse_only=attempt.action == "browse")
        await consumer.close()
    else:
        await session.create_queue(
            place.address, place.queue, routing_type=_routing(place), durable=attempt.action == "create-durable"
        )


async def _run(
    url: str,
    example: SecurityExample,
    settings: ClientSettings,
    limits: SecurityLimits,
    answers: list[Answer],
    proxies: list[FaultProxy],
    timeline: list[dict[str, Any]],
) -> None:
    try:
        await asyncio.wait_for(_reset(url, settings, limits), limits.setup_s)
    except (ClientError, TimeoutError, OSError) as exc:
        raise _Indeterminate(f"resetting the name space as the administrator failed: {exc!r}") from exc
    host, _, port = url.removeprefix("tcp://").rpartition(":")
    proxy = FaultProxy(host.strip("[]"), int(port), stop_timeout=2.0)
    proxies.append(proxy)
    await proxy.start()
    connection: Connection | None = None
    try:
        try:
            connection = await asyncio.wait_for(
                connect(proxy.url, settings=settings, connect_timeout=limits.step_s), limits.step_s
            )
        except (ClientError, TimeoutError, OSError) as exc:
            raise _Indeterminate(f"connecting through the proxy failed: {exc!r}") from exc
        for index, login in enumerate(example.logins):
            timeline.append(
                {"ts_ns": time.monotonic_ns(), "event": "operation", "text": login.describe(), "index": index}
            )
            user, password = CREDENTIALS[login.credentials]
            session: Session | None = None
            try:
                session = await asyncio.wait_for(
                    connection.create_session(username=user, password=password), limits.step_s
                )
            except (ClientError, TimeoutError) as exc:
                answered, detail = _classified(exc, creating=False)
                answers.append(Answer(index, None, answered, detail))
            else:
                answers.append(Answer(index, None, "allowed"))
            for number, attempt in enumerate(login.attempts):
                if session is None:
                    answers.append(Answer(index, number, "skipped"))
                    continue
                try:
                    await asyncio.wait_for(_attempt(session, attempt), limits.step_s)
                except (ClientError, TimeoutError) as exc:
                    answers.append(Answer(index, number, *_classified(exc, attempt.action.startswith("create"))))
                else:
                    answers.append(Answer(index, number, "allowed"))
            if session is not None:
                with contextlib.suppress(ClientError, TimeoutError):
                    await asyncio.wait_for(session.close(), limits.step_s)
    finally:
        if connection is not None:
            with contextlib.suppress(ClientError, TimeoutError):
                await asyncio.wait_for(connection.close(), limits.step_s)
        await proxy.stop()


async def run_security(
    urls: Mapping[Realm, str],
    example: SecurityExample,
    *,
    limits: SecurityLimits = SecurityLimits(),
    protocol_version: int | None = None,
) -> Outcome:
    """Run ``example`` against the broker of its realm (``urls``) and judge it; never raises for what the broker
    does."""
    started = time.monotonic()
    answers: list[Answer] = []
    proxies: list[FaultProxy] = []
    timeline: list[dict[str, Any]] = []

    def outcome(kind: Any, reason: str = "") -> Outcome:
        proxy = proxies[0] if proxies else None
        judgement = judge_security(example, answers) if kind == "judge" else None
        return Outcome(
            example,
            judgement.kind if judgement is not None else kind,
            time.monotonic() - started,
            judgement,
            (),
            (),
            tuple(r.to_json() for r in proxy.wire_log) if proxy else (),
            tuple(a.to_json() for a in proxy.attempts) if proxy else (),
            tuple(timeline),
            reason,
            ends=tuple(e.to_json() for e in proxy.ends) if proxy else (),
        )

    url = urls.get(example.realm)
    if url is None:
        return outcome("indeterminate", f"no broker is configured for the {example.realm} realm")
    try:
        await asyncio.wait_for(
            _run(url, example, _settings(limits, protocol_version), limits, answers, proxies, timeline),
            limits.example_s,
        )
    except _Indeterminate as exc:
        return outcome("indeterminate", str(exc))
    except TimeoutError:
        return outcome("indeterminate", f"the example took longer than {limits.example_s:g} s")
    except Exception:  # noqa: BLE001 - any other exception is the kit's own error, reported as such
        return outcome("kit-error", traceback.format_exc())
    return outcome("judge")
