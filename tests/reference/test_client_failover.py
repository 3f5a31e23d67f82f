"""The kit's client losing its TCP connection (cut by a proxy, the broker still running) against
the reference broker and a real Apache Artemis broker: with a confirmation window it reattaches and
replays, without one it recreates its session; nothing confirmed is lost or duplicated, and a
transaction interrupted by a recreate refuses to commit."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest

from cck.codec import CoreMessage, RoutingType, TypedProperties
from cck.conformance.artemis.distribution import ensure_distribution
from cck.reference.client import ClientSettings, Connection, TransactionRolledBack, connect

from .cut_proxy import CutProxy
from .targets import ArtemisTarget, Broker, ReferenceTarget

pytestmark = pytest.mark.artemis

SCENARIO_DEADLINE_S = 90.0
RECEIVE_S = 10.0
QUIET_S = 0.3
RECONNECT = ClientSettings(reconnect_attempts=-1, retry_interval_ms=100, max_retry_interval_ms=100,
                           call_timeout_ms=10_000)  # fmt: skip


@pytest.fixture(scope="module", params=["reference", "artemis"])
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp(request.param)
    target: Broker
    if request.param == "reference":
        target = ReferenceTarget(base / "data")
    else:
        target = ArtemisTarget(ensure_distribution().home, base / "instance")
    target.start()
    try:
        yield target
    finally:
        target.stop(signal.SIGTERM)


@pytest.fixture
def proxy(broker: Broker) -> Iterator[CutProxy]:
    host, port = broker.url.removeprefix("tcp://").split(":")
    with CutProxy(host, int(port)) as running:
        yield running


def run(scenario: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(scenario, SCENARIO_DEADLINE_S))


async def restored(connection: Connection, kind: str) -> None:
    """Wait (bounded) until the connection reports ``kind`` ("reattached" / "recreated")."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def watch(event: object) -> None:
        if getattr(event, "kind", None) in (kind, "gave-up") and not done.done():
            done.set_result(None)

    if not any(e.kind == kind for e in connection.events):
        connection.add_event_listener(watch)
        await asyncio.wait_for(done, RECEIVE_S)
    kinds = [e.kind for e in connection.events]
    assert kind in kinds, kinds


async def consume_all(connection: Connection, queue: str, expected: int) -> list[int]:
    session = await connection.create_session()
    consumer = await session.create_consumer(queue)
    session.start()
    seqs = []
    for _ in range(expected):
        delivery = await consumer.receive(RECEIVE_S)
        assert delivery is not None, f"only {len(seqs)} of {expected} arrived"
        seqs.append(int(delivery.message.properties.get("seq")))  # type: ignore[arg-type]
        await consumer.acknowledge(delivery)
    assert await consumer.receive(QUIET_S) is None, "more messages than were sent"
    return seqs


def test_with_a_window_a_cut_under_load_reattaches_and_replays(broker: Broker, proxy: CutProxy) -> None:
    count, cut_at = 400, 200
    queue = f"cck.failover.reattach.{id(proxy)}"

    async def scenario() -> None:
        settings = RECONNECT.with_params({"confirmationWindowSize": "65536"})
        async with await connect(f"tcp://127.0.0.1:{proxy.port}", settings=settings) as connection:
            session = await connection.create_session()
            await session.create_queue(queue, queue, routing_type=RoutingType.ANYCAST)
            producer = session.create_producer(queue)
            answers = []
            for seq in range(count):
                if seq == cut_at:
                    assert proxy.cut() == 1
                # Non-durable: answered asynchronously (the window), many in flight at the cut.  Durable sends in
                # flight at a cut against Artemis are an open question (docs/client.md, "Open findings").
                message = CoreMessage(b"r", durable=False, properties=TypedProperties.of(seq=seq))
                answers.append(await producer.send_async(message))
            await asyncio.gather(*(a for a in answers if a is not None))
            await restored(connection, "reattached")
            assert "recreated" not in [e.kind for e in connection.events]
            assert sorted(await consume_all(connection, queue, count)) == list(range(count))

    run(scenario())


def test_without_a_window_the_session_is_recreated_and_later_sends_arrive(broker: Broker, proxy: CutProxy) -> None:
    queue = f"cck.failover.recreate.{id(proxy)}"

    async def scenario() -> None:
        async with await connect(f"tcp://127.0.0.1:{proxy.port}", settings=RECONNECT) as connection:
            session = await connection.create_session()
            await session.create_queue(queue, queue, routing_type=RoutingType.ANYCAST)
            producer = session.create_producer(queue)
            for seq in range(100):
                if seq == 50:
                    # Between two confirmed sends; a send in flight at the cut would end FailoverInterrupted
                    # (outcome unknown), which is not what this test is about.
                    assert proxy.cut() == 1
                    await restored(connection, "recreated")
                await producer.send(CoreMessage(b"c", durable=True, properties=TypedProperties.of(seq=seq)))
            assert await consume_all(connection, queue, 100) == list(range(100))

    run(scenario())


def test_a_transaction_cut_by_a_recreate_is_rolled_back_not_committed(broker: Broker, proxy: CutProxy) -> None:
    queue = f"cck.failover.tx.{id(proxy)}"

    async def scenario() -> None:
        async with await connect(f"tcp://127.0.0.1:{proxy.port}", settings=RECONNECT) as connection:
            setup = await connection.create_session()
            await setup.create_queue(queue, queue, routing_type=RoutingType.ANYCAST)
            session = await connection.create_session(transacted=True)
            producer = session.create_producer(queue)
            await producer.send(CoreMessage(b"lost", durable=True, properties=TypedProperties.of(seq=-1)))
            assert proxy.cut() == 1
            await restored(connection, "recreated")
            with pytest.raises(TransactionRolledBack):
                await session.commit()
            await producer.send(CoreMessage(b"kept", durable=True, properties=TypedProperties.of(seq=1)))
            await session.commit()
            assert await consume_all(connection, queue, 1) == [1]

    run(scenario())
