"""How a case runs its asyncio scenario: a bounded run, and the deadlines inside it that say whose fault a
miss is (the subject's: a failed check; the kit's or the machine's: INDETERMINATE)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from cck.conformance.plugin import Settings
from cck.conformance.targets import NodeStartError
from cck.conformance.verdicts import CheckFailed, Indeterminate, NotObserved

__all__ = ["SCENARIO_S", "bounded", "observed", "restarted", "run"]

T = TypeVar("T")

#: A scenario's overall deadline when its group names none, in (unscaled) seconds.
SCENARIO_S = 90.0


def run(settings: Settings, scenario: Coroutine[Any, Any, None], seconds: float = SCENARIO_S) -> None:
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
