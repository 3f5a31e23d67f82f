"""What every group runs its asyncio scenarios with: a bounded run, and a bounded poll of a condition."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from conformance.plugin import Settings

__all__ = ["run", "wait_until"]

#: Pause between two looks at a polled condition (bounded by the poll's deadline).
POLL_S = 0.01


def run(settings: Settings, scenario: Coroutine[Any, Any, None], seconds: float) -> None:
    """Run a case's scenario on a fresh event loop, bounded by the run's scaled deadline."""
    asyncio.run(asyncio.wait_for(scenario, settings.deadline(seconds)))


async def wait_until(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll ``predicate`` until it holds, at most ``seconds`` (loop clock, monotonic); a miss raises TimeoutError
    naming ``what``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not predicate():
        if loop.time() >= deadline:
            raise TimeoutError(f"{what}: not within {seconds:.1f} s")
        await asyncio.sleep(POLL_S)
