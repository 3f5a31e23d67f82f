"""The kit's asyncio client over real sockets against the reference broker and against a real
Apache Artemis broker of the pinned distribution: the same scenarios, the same assertions.

What passes against Artemis shows the client speaks the protocol as Artemis's own client does;
what passes against the reference broker shows the broker answers it the same way."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import pytest

from cck.codec import CoreMessage, ExceptionType, RoutingType, TypedProperties, Xid
from cck.conformance.artemis.distribution import ensure_distribution
from cck.reference.client import BrokerRefused, ClientSettings, Consumer, Delivery, Session, XAError, connect

from .targets import ArtemisTarget, Broker, ReferenceTarget

pytestmark = pytest.mark.artemis

SCENARIO_DEADLINE_S = 60.0
RECEIVE_S = 10.0
QUIET_S = 0.3  # how long "nothing more arrives" is watched for

T = TypeVar("T")


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


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(scenario(), SCENARIO_DEADLINE_S)

    return asyncio.run(bounded())


def queue_name() -> str:
    return f"cck.client.{uuid.uuid4().hex[:10]}"


async def drain(consumer: Consumer, count: int) -> list[Delivery]:
    got = []
    for _ in range(count):
        delivery = await consumer.receive(RECEIVE_S)
        assert delivery is not None, f"only {len(got)} of {count} deliveries arrived within {RECEIVE_S}s each"
        got.append(delivery)
    return got


async def anycast_queue(session: Session) -> str:
    name = queue_name()
    await session.create_queue(name, name, routing_type=RoutingType.ANYCAST, durable=True)
    return name


def numbered(i: int, *, durable: bool) -> CoreMessage:
    return CoreMessage(f"body-{i}".encode(), durable=durable, properties=TypedProperties.of(seq=i, tag=f"t{i}"))


@pytest.mark.parametrize("window", [-1, 1 << 20], ids=["no-window", "window-1MiB"])
@pytest.mark.parametrize("durable", [True, False], ids=["durable", "non-durable"])
def test_messages_arrive_once_in_order_with_their_properties(broker: Broker, durable: bool, window: int) -> None:
    count = 300

    async def scenario() -> None:
        settings = ClientSettings(confirmation_window_size=window, consumer_window_size=4096)
        async with await connect(broker.url, settings=settings) as connection:
            session = await connection.create_session()
            name = await anycast_queue(session)
            producer = session.create_producer(name)
            answers = []
            for i in range(count):
                if window == -1:
                    await producer.send(numbered(i, durable=durable))
                else:
                    answers.append(await producer.send_async(numbered(i, durable=durable)))
            await asyncio.gather(*(a for a in answers if a is not None))
            consumer = await session.create_consumer(name)
            session.start()
            got = await drain(consumer, count)
            for delivery in got:
                await consumer.acknowledge(delivery)
            assert [d.message.properties.get("seq") for d in got] == list(range(count))
            assert all(d.message.body == f"body-{i}".encode() for i, d in enumerate(got))
            assert all(d.message.properties.get("tag") == f"t{i}" for i, d in enumerate(got))
            assert {d.message.durable for d in got} == {durable}
            assert {d.delivery_count for d in got} == {1}
            assert await consumer.receive(QUIET_S) is None
            await session.close()

    run(scenario)


def test_local_transaction_commit_rollback_and_redelivery(broker: Broker) -> None:
    async def scenario() -> None:
        async with await connect(broker.url) as connection:
            session = await connection.create_session(transacted=True)
            name = await anycast_queue(session)
            producer = session.create_producer(name)
            await producer.send(CoreMessage(b"rolled-back", durable=True))
            await session.rollback()
            await producer.send(CoreMessage(b"committed", durable=True))
            await session.commit()
            consumer = await session.create_consumer(name)
            session.start()
            first = await consumer.receive(RECEIVE_S)
            assert first is not None
            assert (first.message.body, first.delivery_count) == (b"committed", 1)
            await consumer.acknowledge(first)
            await session.rollback()  # the ack is undone: the message comes back, counted
            again = await consumer.receive(RECEIVE_S)
            assert again is not None
            assert (again.message.body, again.delivery_count) == (b"committed", 2)
            await consumer.acknowledge(again)
            await session.commit()
            assert await consumer.receive(QUIET_S) is None
            query = await session.queue_query(name)
            assert (query.exists, query.message_count) == (True, 0)

    run(scenario)


def test_an_unacknowledged_message_is_redelivered_to_the_next_consumer(broker: Broker) -> None:
    async def scenario() -> None:
        async with await connect(broker.url) as connection:
            session = await connection.create_session()
            name = await anycast_queue(session)
            await session.create_producer(name).send(CoreMessage(b"once", durable=True))
            consumer = await session.create_consumer(name)
            session.start()
            first = await consumer.receive(RECEIVE_S)
            assert first is not None
            assert first.delivery_count == 1
            await consumer.close()  # never acknowledged
            second_consumer = await session.create_consumer(name)
            again = await second_consumer.receive(RECEIVE_S)
            assert again is not None
            assert again.message.body == b"once"
            assert again.message.message_id == first.message.message_id
            await second_consumer.individual_acknowledge(again)
            assert await second_consumer.receive(QUIET_S) is None

    run(scenario)


def test_xa_prepare_recover_commit_and_xa_error_codes(broker: Broker) -> None:
    async def scenario() -> None:
        async with await connect(broker.url) as connection:
            session = await connection.create_session(xa=True)
            name = await anycast_queue(session)
            xid = Xid(0x1234, uuid.uuid4().bytes, b"branch-1")
            await session.xa_start(xid)
            other = await connection.create_session(xa=True)
            with pytest.raises(XAError) as duplicate:
                await other.xa_start(xid)
            assert duplicate.value.code == -8  # XAER_DUPID
            await session.create_producer(name).send(CoreMessage(b"xa-work", durable=True))
            await session.xa_end(xid)
            assert await session.xa_prepare(xid) == 0  # XA_OK
            assert xid in await session.xa_recover()
            reader = await connection.create_session()
            consumer = await reader.create_consumer(name)
            reader.start()
            assert await consumer.receive(QUIET_S) is None, "a prepared send must stay invisible"
            await session.xa_commit(xid)
            delivered = await consumer.receive(RECEIVE_S)
            assert delivered is not None
            assert delivered.message.body == b"xa-work"
            assert xid not in await session.xa_recover()
            with pytest.raises(XAError) as unknown:
                await session.xa_commit(Xid(0x1234, uuid.uuid4().bytes, b"nobody"))
            assert unknown.value.code == -4  # XAER_NOTA

    run(scenario)


def test_refusals_carry_the_broker_s_exception_type(broker: Broker) -> None:
    async def scenario() -> None:
        async with await connect(broker.url) as connection:
            session = await connection.create_session()
            name = await anycast_queue(session)
            with pytest.raises(BrokerRefused) as exists:
                await session.create_queue(name, name, routing_type=RoutingType.ANYCAST)
            assert exists.value.type is ExceptionType.QUEUE_EXISTS
            with pytest.raises(BrokerRefused) as missing:
                await session.create_consumer(queue_name())
            assert missing.value.type is ExceptionType.QUEUE_DOES_NOT_EXIST
            # A refusal is an answer, not a failure: the session still works.
            assert (await session.queue_query(name)).exists

    run(scenario)


def test_the_connection_learns_of_a_broker_shutdown(broker: Broker) -> None:
    async def scenario() -> str:
        failed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        connection = await connect(broker.url)

        def failed_with(error: Exception) -> None:
            if not failed.done():
                failed.set_result(str(error))

        connection.add_failure_listener(failed_with)
        await connection.create_session()
        broker.stop(signal.SIGTERM)  # a graceful stop: DISCONNECT to every client, then exit
        return await asyncio.wait_for(failed, RECEIVE_S)

    try:
        reason = run(scenario)
    finally:
        broker.start()
    assert "DISCONNECT" in reason, reason
