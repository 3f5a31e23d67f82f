"""Traffic recorded in a history: keyed sends (the *fill* of a scenario), one receipt recorded the way every
group records it, and a drain that empties a consumer (expected messages first, then until nothing more
arrives) on which the groups' drains are built."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Sequence
from typing import Literal

from cck.codec import CoreMessage, RoutingType, TypedProperties
from cck.conformance.oracles import History
from cck.conformance.plugin import Settings
from cck.reference.client import ClientSettings, Connection, Consumer, Delivery, Producer, Session, connect

from ._messages import key_of, message, seq_of

__all__ = ["QUIET_S", "RECEIVE_S", "Ack", "Fence", "drain", "drain_queue", "drain_url", "fence_behind",
           "record_receipt", "send_fence", "send_keyed", "settle_sends"]

#: How long a "nothing more arrives" drain listens, in (unscaled) seconds.
QUIET_S = 1.0
#: How long one receive of an expected message may take, in (unscaled) seconds.
RECEIVE_S = 10.0

#: How a drain acknowledges: individually (the restart-shaped groups), cumulatively with blocking acks (a
#: drain that also records its acks as confirmed in the history), or not at all.
Ack = Literal["individual", "cumulative", "none"]


async def send_keyed(producer: Producer, history: History, prefix: str, durable: Sequence[bool], *, name: str,
                     process: str = "setup", confirmed: bool = True) -> list[str]:
    """Send one message per entry of ``durable`` (that message durable or not), keyed ``prefix:seq`` and recorded
    as producer ``name``'s ``seq``: each invoke, and with ``confirmed`` its completion once the send returned (the
    broker confirmed it); without, the outcome is the caller's to record (a transaction's, a failure's).  The
    keys, in order."""
    keys = []
    for seq, keep in enumerate(durable):
        key = f"{prefix}:{seq}"
        history.invoke_send(process, key, producer=name, seq=seq)
        await producer.send(message(key, seq, durable=keep))
        if confirmed:
            history.ok(process, "send", key, producer=name, seq=seq)
        keys.append(key)
    return keys


def settle_sends(history: History, keys: Sequence[str], survived: Sequence[bool], *, name: str,
                 process: str) -> None:
    """Record the outcome of sends :func:`send_keyed` left open (``confirmed=False``): ``ok`` for those that
    survived (a commit took them), ``fail`` for the others (rolled back, aborted, lost with the broker)."""
    for seq, (key, ok) in enumerate(zip(keys, survived, strict=True)):
        (history.ok if ok else history.fail)(process, "send", key, producer=name, seq=seq)


def record_receipt(history: History, process: str, delivery: Delivery, *, producer: str | None = None) -> None:
    """A receipt with its delivery count (redelivered = a count above 1, as the core JMS layer derives it);
    with ``producer``, also the message's ``seq`` so the history checks that producer's order."""
    order = {} if producer is None else {"producer": producer, "seq": seq_of(delivery)}
    history.received(process, key_of(delivery), delivery_count=delivery.delivery_count,
                     redelivered=delivery.delivery_count > 1, **order)


#: The property that marks a fence (its value tells one drain's fence from another's); never a key.
_FENCE = "cck_fence"


@dataclasses.dataclass(frozen=True)
class Fence:
    """A marker message sent to the tail of a queue once everything a case did there has settled: FIFO order puts
    every message already in the queue (duplicates stored by a replay included) before it, so a drain that sees
    its fence after the expected messages has seen the rest and need not sit out a quiet window."""

    token: str

    def marks(self, delivery: Delivery) -> bool:
        value = delivery.message.properties.get(_FENCE)
        return (value.decode() if isinstance(value, bytes) else value) == self.token


async def send_fence(session: Session, queue: str, *, consumers: int = 0) -> Fence | None:
    """Send a fence to ``queue`` through ``session``, where the fence can only reach the drain's consumer: an
    anycast queue of the same name as its address, with no consumer yet (or ``consumers``: as many as the drain's
    own, already open).  Anywhere else (or if the queue is not there) no fence is sent and the drain keeps its
    quiet window."""
    query = await session.queue_query(queue)
    if (not query.exists or query.address != queue or query.consumer_count != consumers
            or query.routing_type != RoutingType.ANYCAST or query.filter_string):
        return None
    fence = Fence(uuid.uuid4().hex)
    # priority 0, the lowest: a priority-ordered queue still delivers every message already stored before it
    await session.create_producer(queue).send(
        CoreMessage(b"", priority=0, properties=TypedProperties.of({_FENCE: fence.token})))
    return fence


async def fence_behind(consumer: Consumer) -> Fence | None:
    """A fence for a drain of ``consumer``, a consumer already open (one that lived through a failure, say): sent
    through a session of its own on the consumer's connection, when ``consumer`` is the queue's only consumer and
    its session acknowledges at once.  A transacted or XA session gets none (the drain acknowledges the fence
    there, and a rollback would give it back to the queue), nor does a queue another consumer shares."""
    options = consumer.session.core.options
    if options.xa or options.transacted:
        return None
    session = await consumer.session.connection.create_session()
    try:
        return await send_fence(session, consumer.core.queue, consumers=1)
    finally:
        await session.close()


async def drain(consumer: Consumer, history: History, process: str, *, quiet_s: float, expected: int = 0,
                receive_s: float = 0.0, ack: Ack = "individual", producer: str | None = None,
                within_s: float | None = None, fence: Fence | None = None) -> list[Delivery]:
    """Receive until ``expected`` messages arrived (each within ``receive_s``) and then nothing more for
    ``quiet_s``, or until ``within_s`` (if given) has passed; every receipt goes into ``history``.  With a
    ``fence``, the drain also ends as soon as the fence arrives after the expected messages (a fence that
    overtook some of them, or none, leaves the quiet window in force); the fence is acknowledged, not recorded."""
    loop = asyncio.get_running_loop()
    end = None if within_s is None else loop.time() + within_s
    got: list[Delivery] = []
    while end is None or loop.time() < end:
        delivery = await consumer.receive(receive_s if len(got) < expected else quiet_s)
        if delivery is None:
            break
        if fence is not None and fence.marks(delivery):
            await consumer.individual_acknowledge(delivery)
            if len(got) >= expected:
                break
            continue
        got.append(delivery)
        record_receipt(history, process, delivery, producer=producer)
        if ack == "individual":
            await consumer.individual_acknowledge(delivery)
        elif ack == "cumulative":
            await consumer.acknowledge(delivery)
            history.ack(process, key_of(delivery))
    return got


async def drain_queue(connection: Connection, queue: str, history: History, expected: int, settings: Settings,
                      *, process: str = "verifier") -> list[str]:
    """Everything left in ``queue``, through a new session of ``connection`` (acknowledged, so the queue ends
    empty): the keys received, in order."""
    session = await connection.create_session()
    fence = await send_fence(session, queue)
    consumer = await session.create_consumer(queue)
    session.start()
    got = await drain(consumer, history, process, expected=expected, quiet_s=settings.deadline(QUIET_S),
                      receive_s=settings.deadline(RECEIVE_S), fence=fence)
    await session.close()
    return [key_of(d) for d in got]


async def drain_url(url: str, queue: str, history: History, settings: ClientSettings, *, quiet: float,
                    timeout: float, process: str = "drain", producer: str = "P1") -> int:
    """Consume everything left on ``queue`` over a fresh connection straight to ``url`` (not through a proxy),
    recording each receipt (in ``producer``'s order) and its confirmed acknowledgement; ends once nothing arrives
    for ``quiet`` s, or after ``timeout`` s.  How many arrived."""
    plain = dataclasses.replace(settings, reconnect_attempts=0, block_on_acknowledge=True)
    async with await connect(url, settings=plain) as connection:
        session = await connection.create_session()
        fence = await send_fence(session, queue)
        consumer = await session.create_consumer(queue)
        session.start()
        got = await drain(consumer, history, process, quiet_s=quiet, ack="cumulative", producer=producer,
                          within_s=timeout, fence=fence)
    return len(got)
