"""A reconnection must end: whatever goes wrong inside an attempt, the sessions learn it with a named
error and the event log says so, instead of waiting on a task that died (a hang the conformance
suite once showed as "none of ('recreated', 'reattached', 'gave-up') within 90 s")."""

from __future__ import annotations

import asyncio

import pytest

from cck.reference._server import BrokerServer
from cck.reference.broker import BrokerCore, BrokerSettings
from cck.reference.client import ClientSettings, ConnectionFailed, SessionCore, connect

SCENARIO_DEADLINE_S = 30.0


def test_an_internal_error_during_restore_ends_the_reconnection_with_its_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken_restore(self: SessionCore, *_: object) -> None:
        raise RuntimeError("restore broke")

    async def scenario() -> None:
        async with BrokerServer(BrokerCore(BrokerSettings(node_id="n1")), "127.0.0.1", 0) as server:
            settings = ClientSettings(reconnect_attempts=-1, retry_interval_ms=50, call_timeout_ms=5_000)
            connection = await connect(f"tcp://127.0.0.1:{server.bound_port}", settings=settings)
            session = await connection.create_session()
            ended = asyncio.get_running_loop().create_future()
            connection.add_event_listener(
                lambda event: ended.set_result(event) if event.kind == "gave-up" and not ended.done() else None
            )
            # Without a confirmation window the broker refuses the reattach: the session is recreated.
            monkeypatch.setattr(SessionCore, "recreated", broken_restore)
            assert connection._transport is not None
            connection._transport.close()  # the socket goes; the broker stays up, so the attempt connects
            gave_up = await asyncio.wait_for(ended, 10.0)
            assert "internal error" in gave_up.detail
            assert "restore broke" in gave_up.detail
            kinds = [event.kind for event in connection.events]
            assert kinds == ["failed", "attempt", "attempt-failed", "gave-up"], kinds
            with pytest.raises(ConnectionFailed, match="restore broke"):
                await session.commit()
            await connection.close()

    asyncio.run(asyncio.wait_for(scenario(), SCENARIO_DEADLINE_S))
