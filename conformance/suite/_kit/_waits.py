"""Waits with a deadline for a condition: re-checked each time an event signals a change (:func:`signalled`:
what the kit records itself, a log of failover events, datagrams, deliveries), or polled at one interval when
nothing can signal (:func:`poll`: a queue's message count on the broker, a client's topology).  A wait for one
thing that signals (an answer, a delivery) awaits it instead, bounded by :func:`observed`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from cck.conformance.verdicts import NotObserved

__all__ = ["POLL_S", "poll", "poll_value", "signalled", "wait_until"]

T = TypeVar("T")

#: The pause between two looks at a polled condition, for every poll of the suite: short against the
#: deadlines (seconds) and the reactions polled for (tens of milliseconds or more), long enough that a poll
#: asking a broker over the network (a queue query, a binding query) does not load it.
POLL_S = 0.02


async def poll(check: Callable[[], Awaitable[bool]], seconds: float, what: Callable[[], str]) -> None:
    """Ask ``check()`` until it holds, at most ``seconds`` (loop clock, monotonic); a miss is a failed check
    (:class:`NotObserved`) naming ``what()``, asked only then so it can describe what was last seen."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not await check():
        if loop.time() >= deadline:
            raise NotObserved(f"{what()}: not within {seconds:.1f} s")
        await asyncio.sleep(POLL_S)


async def wait_until(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll ``predicate`` until it holds, at most ``seconds``; a miss is :class:`NotObserved` naming ``what``."""

    async def holds() -> bool:
        return predicate()

    await poll(holds, seconds, lambda: what)


async def poll_value(ask: Callable[[], Awaitable[T]], done: Callable[[T], bool], seconds: float) -> list[T]:
    """Every value ``ask()`` gave, asked until one is ``done`` or ``seconds`` passed.  Running out is not raised:
    the caller judges the last value (and may note the ones before it)."""
    seen: list[T] = []

    async def look() -> bool:
        seen.append(await ask())
        return done(seen[-1])

    with contextlib.suppress(NotObserved):
        await poll(look, seconds, lambda: "")
    return seen


async def signalled(changed: asyncio.Event, holds: Callable[[], bool], seconds: float) -> bool:
    """Whether ``holds()`` came true within ``seconds`` (loop clock, monotonic), re-checked each time ``changed``
    is set (whoever changes what ``holds`` reads sets it).  No poll: between two changes nothing is asked."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not holds():
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        # cleared only after ``holds()`` was asked, with no await between: a change cannot slip through
        changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), remaining)
    return True
