"""Queue and consumer filters on the reference broker, end to end with the kit's client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from cck.codec import CoreMessage, ExceptionType, RoutingType, TypedProperties
from cck.reference._server import BrokerServer
from cck.reference.broker import BrokerCore, BrokerSettings
from cck.reference.client import BrokerRefused, Session, connect

DEADLINE_S = 20.0


@contextlib.asynccontextmanager
async def _session() -> AsyncIterator[Session]:
    async with BrokerServer(BrokerCore(BrokerSettings(node_id="n1")), "127.0.0.1", 0) as server:
        connection = await connect(f"tcp://127.0.0.1:{server.bound_port}")
        try:
            yield await connection.create_session()
        finally:
            await connection.close()


def _colored(*colors: str) -> list[CoreMessage]:
    return [CoreMessage(body=f"{i}".encode(), properties=TypedProperties.of(color=c)) for i, c in enumerate(colors)]


async def _drain(consumer: object, expected: int) -> list[str]:
    got: list[str] = []
    while len(got) < expected:
        delivery = await consumer.receive(5.0)  # type: ignore[attr-defined]
        assert delivery is not None, f"only {got} arrived, {expected} expected"
        got.append(str(delivery.message.properties["color"]))
        await consumer.acknowledge(delivery)  # type: ignore[attr-defined]
    return got


def test_consumers_get_what_their_filters_select_and_the_rest_waits() -> None:
    async def scenario() -> None:
        async with _session() as session:
            await session.create_queue("paint", "paint", routing_type=RoutingType.ANYCAST)
            reds = await session.create_consumer("paint", filter_string="color = 'red'")
            blues = await session.create_consumer("paint", filter_string="color IN ('blue')")
            session.start()
            producer = session.create_producer("paint")
            for message in _colored("red", "blue", "green", "red", "blue"):
                await producer.send(message)
            assert await _drain(reds, 2) == ["red", "red"]
            assert await _drain(blues, 2) == ["blue", "blue"]
            query = await session.queue_query("paint")
            assert query.message_count == 1  # green: no consumer selects it, it stays
            anyone = await session.create_consumer("paint")
            assert await _drain(anyone, 1) == ["green"]

    asyncio.run(asyncio.wait_for(scenario(), DEADLINE_S))


def test_a_queue_filter_keeps_out_what_it_does_not_select() -> None:
    async def scenario() -> None:
        async with _session() as session:
            await session.create_queue("paint", "reds", routing_type=RoutingType.MULTICAST,
                                       filter_string="color = 'red'")
            await session.create_queue("paint", "all", routing_type=RoutingType.MULTICAST)
            producer = session.create_producer("paint")
            for message in _colored("red", "blue", "red"):
                await producer.send(message)
            assert (await session.queue_query("reds")).message_count == 2
            assert (await session.queue_query("all")).message_count == 3

    asyncio.run(asyncio.wait_for(scenario(), DEADLINE_S))


def test_a_malformed_filter_is_refused_naming_where() -> None:
    async def scenario() -> None:
        async with _session() as session:
            await session.create_queue("paint", "paint", routing_type=RoutingType.ANYCAST)
            with pytest.raises(BrokerRefused) as refused:
                await session.create_consumer("paint", filter_string="color = ")
            assert refused.value.code == ExceptionType.INVALID_FILTER_EXPRESSION
            assert "offset 8" in str(refused.value)

    asyncio.run(asyncio.wait_for(scenario(), DEADLINE_S))
