"""The asyncio face of a session: :class:`Session`, :class:`Producer` and :class:`Consumer` around the sans-IO
session core.  Every wait is bounded: broker answers by ``call_timeout_ms`` (the core's timers), receives by
the caller's ``timeout``, producer credits by ``call_timeout_ms``."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, TypeVar

from cck.codec import (
    CoreMessage,
    Packet,
    RoutingType,
    SessionBindingQueryResponseMessage,
    SessionBindingQueryResponseMessage_V2,
    SessionBindingQueryResponseMessage_V3,
    SessionBindingQueryResponseMessage_V4,
    SessionBindingQueryResponseMessage_V5,
    SessionQueueQueryResponseMessage_V3,
    SessionXAGetInDoubtXidsResponseMessage,
    SessionXAGetTimeoutResponseMessage,
    SessionXAResponseMessage,
    Xid,
    encode_message,
)

from ._calls import Call
from ._errors import CallTimeout, ObjectClosed, ProtocolViolation
from ._flow import ConsumerCore, Delivery, ProducerCore
from ._session import SessionCore
from ._session_channel import BINDING_QUERY, QUEUE_QUERY

if TYPE_CHECKING:
    from ._aio import Connection

__all__ = ["Consumer", "Producer", "Session", "awaitable"]

P = TypeVar("P", bound=Packet)


def awaitable(call: Call) -> asyncio.Future[Packet]:
    """An asyncio future completed by the sans-IO call."""
    future: asyncio.Future[Packet] = asyncio.get_running_loop().create_future()

    def done(finished: Call) -> None:
        if future.done():
            return
        if finished.error is not None:
            future.set_exception(finished.error)
        else:
            future.set_result(finished.result())

    call.add_done_callback(done)
    return future


def _answer(answer: Packet, kind: type[P], request: str) -> P:
    """The answer as the type the request expects (the call queue already checked it; this keeps the type)."""
    if not isinstance(answer, kind):
        raise ProtocolViolation(f"{request} expects {kind.type_name()}, the broker answered {answer.type_name()}")
    return answer


BindingQueryAnswer = (SessionBindingQueryResponseMessage | SessionBindingQueryResponseMessage_V2
                      | SessionBindingQueryResponseMessage_V3 | SessionBindingQueryResponseMessage_V4
                      | SessionBindingQueryResponseMessage_V5)  # fmt: skip


class Session:
    """A session: queues, producers, consumers, local and XA transactions."""

    def __init__(self, connection: Connection, core: SessionCore) -> None:
        self.connection = connection
        self.core = core
        self._credit_event = asyncio.Event()
        core.on_credits = self._credit_event.set

    @property
    def name(self) -> str:
        return self.core.options.name

    async def _call(self, call: Call) -> Packet:
        return await self.connection._wait(call)

    def _pump(self) -> None:
        self.connection._pump()

    # ------------------------------------------------------------------ addresses and queues

    async def create_address(self, address: str, routing_types: tuple[RoutingType, ...] = (RoutingType.ANYCAST,),
                             *, auto_created: bool = False) -> None:
        await self._call(self.core.create_address(address, routing_types, auto_created))

    async def create_queue(self, address: str, queue: str | None = None, **options: Any) -> None:
        """CREATE_QUEUE_V2; options as :meth:`SessionCore.create_queue` (routing_type, durable, filter_string, ...)."""
        await self._call(self.core.create_queue(address, queue or address, **options))

    async def create_shared_queue(self, address: str, queue: str, **options: Any) -> None:
        await self._call(self.core.create_shared_queue(address, queue, **options))

    async def delete_queue(self, queue: str) -> None:
        await self._call(self.core.delete_queue(queue))

    async def queue_query(self, queue: str) -> SessionQueueQueryResponseMessage_V3:
        """The broker's answer as V3.  A server before 129 answers V2 (126..128) or v1: those are widened the
        way Artemis's ``toQueueQuery`` widens them (max consumers -1, not auto-created, no purge; the routing
        type, which Java leaves null, is the field's default).  ``core.queue_query`` gives the answer as sent."""
        answer = await self._call(self.core.queue_query(queue))
        if isinstance(answer, SessionQueueQueryResponseMessage_V3):
            return answer
        if not isinstance(answer, QUEUE_QUERY):
            raise ProtocolViolation(f"SESS_QUEUEQUERY: the broker answered {answer.type_name()}")
        return SessionQueueQueryResponseMessage_V3(
            answer.exists, answer.durable, answer.temporary, answer.consumer_count, answer.message_count,
            answer.filter_string, answer.address, answer.name, getattr(answer, "auto_create_queues", False))

    async def binding_query(self, address: str) -> BindingQueryAnswer:
        """The broker's answer in the version it chose (V5 from 135 down to v1 before 126); every version has
        ``exists`` and ``queue_names``."""
        answer = await self._call(self.core.binding_query(address))
        if not isinstance(answer, BINDING_QUERY):
            raise ProtocolViolation(f"SESS_BINDINGQUERY: the broker answered {answer.type_name()}")
        return answer

    async def add_metadata(self, key: str, data: str) -> None:
        await self._call(self.core.add_metadata(key, data))

    # ------------------------------------------------------------------ producers and consumers

    def create_producer(self, address: str | None = None) -> Producer:
        producer = Producer(self, self.core.create_producer(address))
        self._pump()
        return producer

    async def create_consumer(self, queue: str, *, filter_string: str | None = None,
                              browse_only: bool = False) -> Consumer:
        core, call = self.core.create_consumer(queue, filter_string=filter_string, browse_only=browse_only)
        consumer = Consumer(self, core)
        await self._call(call)
        return consumer

    def start(self) -> None:
        """SESS_START: deliveries begin (no answer)."""
        self.core.start()
        self._pump()

    async def stop(self) -> None:
        await self._call(self.core.stop())

    # ------------------------------------------------------------------ local transactions

    async def commit(self) -> None:
        """Commit; raises TransactionRolledBack when failover recreated the session under the transaction."""
        await self.connection._settle()
        if self.core.rollback_only and self.core.started:
            # The commit becomes a rollback: stop delivery first, as rollback() does, or messages the broker
            # delivers to the recreated consumers before it rolls back stay buffered and arrive twice.
            await self.stop()
            try:
                await self._call(self.core.commit())
            finally:
                self.start()
            return
        await self._call(self.core.commit())

    async def rollback(self, *, consider_last_message_as_delivered: bool = False) -> None:
        """Roll back.  As the Java client does: stop delivery, drop buffered messages, roll back, restart."""
        started = self.core.started
        if started:
            await self.stop()
        await self._call(self.core.rollback(consider_last_message_as_delivered=consider_last_message_as_delivered))
        if started:
            self.start()

    # ------------------------------------------------------------------ XA (each raises XAError on an XA error)

    async def _xa(self, call: Call) -> int:
        answer = await self._call(call)
        return _answer(answer, SessionXAResponseMessage, call.request).response_code

    async def xa_start(self, xid: Xid) -> None:
        await self._xa(self.core.xa_start(xid))

    async def xa_join(self, xid: Xid) -> None:
        await self._xa(self.core.xa_join(xid))

    async def xa_resume(self, xid: Xid) -> None:
        await self._xa(self.core.xa_resume(xid))

    async def xa_end(self, xid: Xid, *, failed: bool = False) -> None:
        await self._xa(self.core.xa_end(xid, failed=failed))

    async def xa_suspend(self) -> None:
        await self._xa(self.core.xa_suspend())

    async def xa_prepare(self, xid: Xid) -> int:
        """The vote (XA_OK = 0; Artemis never answers XA_RDONLY)."""
        return await self._xa(self.core.xa_prepare(xid))

    async def xa_commit(self, xid: Xid, *, one_phase: bool = False) -> None:
        await self._xa(self.core.xa_commit(xid, one_phase=one_phase))

    async def xa_rollback(self, xid: Xid) -> None:
        started = self.core.started
        if started:
            await self.stop()
        await self._xa(self.core.xa_rollback(xid))
        if started:
            self.start()

    async def xa_forget(self, xid: Xid) -> None:
        await self._xa(self.core.xa_forget(xid))

    async def xa_recover(self) -> tuple[Xid, ...]:
        answer = await self._call(self.core.xa_recover())
        return _answer(answer, SessionXAGetInDoubtXidsResponseMessage, "SESS_XA_INDOUBT_XIDS").xids

    async def xa_set_timeout(self, seconds: int) -> None:
        await self._call(self.core.xa_set_timeout(seconds))

    async def xa_get_timeout(self) -> int:
        answer = await self._call(self.core.xa_get_timeout())
        return _answer(answer, SessionXAGetTimeoutResponseMessage, "SESS_XA_GET_TIMEOUT").timeout_seconds

    def xa_failed(self, xid: Xid) -> None:
        self.core.xa_failed(xid)
        self._pump()

    # ------------------------------------------------------------------ close

    async def close(self) -> None:
        if self.core.closed:
            return
        await self._call(self.core.close())

    async def _credits(self, address: str | None, size: int) -> None:
        """Wait for producer credits (bounded by call_timeout_ms, as a blocked Java producer would not be).  As a
        call's, the bound runs anew while the session is away (call_failover_timeout_ms) and once it is back
        (call_timeout_ms): the credits are asked for again then, and a reconnection longer than the call timeout
        is not the broker leaving a request unanswered."""
        credits = self.core.credits_for(address)
        if credits is None:
            return
        settings = self.core.settings
        timeout_ms = settings.call_timeout_ms
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        resumes, away = self.core.resumes, False
        # looked up again each time: a recreated session drops the old session's credits and asks anew
        while not (credits := self.core.credits_for(address) or credits).try_acquire(size):
            self._pump()
            self._credit_event.clear()
            if self.core.closed:
                raise self.connection.core.failure or ObjectClosed(f"session {self.name!r} is closed")
            remaining = deadline - loop.time()
            if remaining <= 0 and not self.core.attached and not away:
                away = True
                deadline = loop.time() + settings.call_failover_timeout_ms / 1000
                continue
            if remaining <= 0 and self.core.attached and self.core.resumes != resumes:
                resumes = self.core.resumes
                deadline = loop.time() + timeout_ms / 1000
                continue
            if remaining <= 0:
                raise CallTimeout(f"producer credits for {address!r}", timeout_ms)
            # a wait that times out goes round again: the deadline may have moved (the session went away or came
            # back meanwhile), and the top of the loop decides
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._credit_event.wait(), remaining)


class Producer:
    def __init__(self, session: Session, core: ProducerCore) -> None:
        self.session = session
        self.core = core

    async def send(self, message: CoreMessage) -> None:
        """Send; waits for the broker's answer when the Java client would block (durable sends by default)."""
        call, blocking = await self._send(message)
        if call is not None and blocking:
            await awaitable(call)

    async def send_async(self, message: CoreMessage) -> asyncio.Future[Packet] | None:
        """Send without waiting; the future completes when the broker answers, or, before protocol 130, confirms
        the send's command (needs a confirmation window or a blocking send setting — otherwise the broker does
        neither and ``None`` is returned)."""
        call, _ = await self._send(message)
        return None if call is None else awaitable(call)

    async def _send(self, message: CoreMessage) -> tuple[Call | None, bool]:
        address = message.address or self.core.address
        await self.session._credits(address, len(encode_message(message)))
        result = self.session.core.send(self.core, message)
        self.session._pump()
        return result

    def close(self) -> None:
        self.session.core.close_producer(self.core)
        self.session._pump()


class Consumer:
    def __init__(self, session: Session, core: ConsumerCore) -> None:
        self.session = session
        self.core = core
        self._event = asyncio.Event()
        core.on_change = self._event.set

    @property
    def consumer_id(self) -> int:
        return self.core.consumer_id

    def receive_nowait(self) -> Delivery | None:
        delivery = self.core.take()
        self.session._pump()
        return delivery

    async def receive(self, timeout: float) -> Delivery | None:
        """The next delivery, or ``None`` after ``timeout`` seconds (or once the consumer is closed)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            delivery = self.receive_nowait()
            if delivery is not None:
                return delivery
            if self.core.closed:
                failure = self.session.connection.failure
                if failure is not None:
                    raise failure
                return None
            self._event.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            try:
                await asyncio.wait_for(self._event.wait(), remaining)
            except TimeoutError:
                return None

    async def acknowledge(self, delivery: Delivery) -> None:
        """Cumulative acknowledgement up to ``delivery``; waits only with block_on_acknowledge."""
        call = self.session.core.acknowledge(delivery)
        self.session._pump()
        if call is not None:
            await awaitable(call)

    async def individual_acknowledge(self, delivery: Delivery) -> None:
        call = self.session.core.acknowledge(delivery, individually=True)
        self.session._pump()
        if call is not None:
            await awaitable(call)

    async def close(self) -> None:
        call = self.session.core.close_consumer(self.core)
        if call is not None:
            await self.session._call(call)
