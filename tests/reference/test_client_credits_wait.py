"""The asyncio client's wait for producer credits: bounded by the call timeout, which runs anew while the session
is away (the failover timeout) and once it is back, as a call's does, so that a reconnection longer than the call
timeout is not taken for a broker leaving a credit request unanswered."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from cck.reference.client import CallTimeout, ClientSettings
from cck.reference.client._aio_session import Session


@dataclass
class _Credits:
    granted: bool = False

    def try_acquire(self, size: int) -> bool:
        return self.granted


@dataclass
class _Core:
    """What the credits wait reads of a session core."""

    settings: ClientSettings
    credits: _Credits = field(default_factory=_Credits)
    attached: bool = True
    resumes: int = 0
    closed: bool = False

    def credits_for(self, address: str | None) -> _Credits:
        return self.credits


def _session(core: _Core) -> Session:
    session = Session.__new__(Session)
    session.core = core  # type: ignore[assignment]
    session._credit_event = asyncio.Event()
    session._pump = lambda: None  # type: ignore[method-assign]
    return session


SETTINGS = ClientSettings(call_timeout_ms=200, call_failover_timeout_ms=2_000)


def test_credits_that_never_come_time_out_after_the_call_timeout() -> None:
    async def scenario() -> None:
        session = _session(_Core(SETTINGS))
        with pytest.raises(CallTimeout, match="producer credits"):
            await asyncio.wait_for(session._credits("q", 10), 5)

    asyncio.run(scenario())


def test_a_session_away_past_the_call_timeout_keeps_the_wait_until_it_is_back_and_the_credits_come() -> None:
    async def scenario() -> None:
        core = _Core(SETTINGS, attached=False)
        session = _session(core)

        async def back_then_granted() -> None:
            await asyncio.sleep(0.4)  # past the 200 ms call timeout, within the failover timeout
            core.attached, core.resumes = True, core.resumes + 1
            await asyncio.sleep(0.1)
            core.credits.granted = True
            session._credit_event.set()

        helper = asyncio.create_task(back_then_granted())
        await asyncio.wait_for(session._credits("q", 10), 5)
        await helper

    asyncio.run(scenario())


def test_a_session_that_stays_away_times_out_after_the_failover_timeout() -> None:
    async def scenario() -> None:
        settings = ClientSettings(call_timeout_ms=100, call_failover_timeout_ms=300)
        session = _session(_Core(settings, attached=False))
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(CallTimeout):
            await asyncio.wait_for(session._credits("q", 10), 5)
        assert loop.time() - began >= 0.4 - 0.02  # the call timeout, then the failover timeout

    asyncio.run(scenario())
