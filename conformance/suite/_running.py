"""What every group runs its asyncio scenarios with: a bounded run, and a bounded poll of a condition."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from conformance.plugin import Settings
from conformance.targets import NodeStartError
from conformance.verdicts import CheckFailed, Indeterminate, NotObserved

__all__ = ["run", "wait_until", "bounded", "observed", "restarted", "judged_afterwards"]

T = TypeVar("T")

#: Pause between two looks at a polled condition (bounded by the poll's deadline).
POLL_S = 0.01


def run(settings: Settings, scenario: Coroutine[Any, Any, None], seconds: float) -> None:
    """Run a case's scenario on a fresh event loop, bounded by the run's scaled deadline."""
    asyncio.run(bounded(scenario, settings.deadline(seconds)))


async def bounded(scenario: Coroutine[Any, Any, Any], seconds: float) -> Any:
    """Await ``scenario`` for at most ``seconds``.  Running out is INDETERMINATE, not a FAIL: every wait for the
    subject inside a case has a deadline of its own and fails the case when it passes (:class:`NotObserved`), so
    only a case that was slow everywhere (a loaded machine) reaches the overall one.  A ``TimeoutError`` raised
    inside the scenario is passed on as it is."""
    return await _within(scenario, seconds, lambda: Indeterminate(
        f"the case did not finish within its overall deadline of {seconds:.0f} s"))


async def observed(awaitable: Awaitable[T], seconds: float, what: str) -> T:
    """Await something the subject must do (an answer, an event of the client, a delivery) for at most
    ``seconds``.  Missing it is a failed check (:class:`NotObserved`) naming ``what``; a ``TimeoutError`` raised
    inside ``awaitable`` itself is passed on as it is (its raiser knows whose it is)."""
    return await _within(awaitable, seconds, lambda: NotObserved(f"{what}: not within {seconds:.1f} s"))


async def _within(awaitable: Awaitable[T], seconds: float, expired: Callable[[], Exception]) -> T:
    """``awaitable``'s result; ``expired()`` raised instead when ``seconds`` ran out (and only then)."""
    try:
        async with asyncio.timeout(seconds) as scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            raise expired() from None
        raise


async def restarted(action: Callable[[], None], node: str) -> None:
    """Run a node's ``start`` or ``restart`` inside a case (after a stop, a crash or a kill), off the loop.  The
    case has started that node once already with the same configuration, so a node that does not come back with
    its own data is the subject's failure (a check); a first start in a fixture stays a kit error."""
    try:
        await asyncio.to_thread(action)
    except NodeStartError as exc:
        raise CheckFailed(f"{node} did not start again with its data: {exc}") from exc


async def wait_until(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll ``predicate`` until it holds, at most ``seconds`` (loop clock, monotonic).  ``what`` names what the
    subject must do; a miss is a failed check (:class:`NotObserved`) naming it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not predicate():
        if loop.time() >= deadline:
            raise NotObserved(f"{what}: not within {seconds:.1f} s")
        await asyncio.sleep(POLL_S)


@asynccontextmanager
async def judged_afterwards(*steps: Callable[[], Any]) -> AsyncIterator[None]:
    """Run the block, then ``steps`` in order *however the block ended*: a case's final judgements (drain what
    the broker still holds, check the history, each writing its own evidence) are made even when a wire-level
    check in the block already failed, so the evidence of a failure holds every finding.

    A step may be a function or a coroutine function; the steps stop at the first that raises (a later step
    would judge what an unfinished one left half done).  The block's failure, if any, is raised with the
    failing step's message added as a note; otherwise the failing step's own error is raised."""
    failure: Exception | None = None
    try:
        yield
    except Exception as exc:  # noqa: BLE001  (re-raised below, after the steps)
        failure = exc
    for step in steps:
        try:
            outcome = step()
            if inspect.isawaitable(outcome):
                await outcome
        except Exception as exc:
            if failure is None:
                raise
            failure.add_note(f"and afterwards: {type(exc).__name__}: {exc}")
            break
    if failure is not None:
        raise failure
