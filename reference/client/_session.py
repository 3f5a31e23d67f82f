"""One client session: its channel, confirmation window, pending calls,
producers' credits and consumers' buffers (sans-IO; the connection core writes
the bytes and passes the time in).

What the Java client does and this follows (notes §7-§9, §13):

* Blocking requests get correlation IDs -2, -3, ... (only the packets that
  carry one on the wire: SESS_SEND, SESS_COMMIT); asynchronous sends 1, 2, ...
* With a confirmation window every send asks for a response, which arrives
  asynchronously; without one only blocking sends do.
* Every confirmable packet received is counted once processed; when the bytes
  counted reach the window a PACKETS_CONFIRMED goes back.
* Producer credits per address: ``producer_window_size`` requested up front and
  topped up so that a window's worth is always available or on its way.
* Consumer credits: the initial window in SESS_FLOWTOKEN, then the consumed
  bytes are returned once they reach half the window.

:class:`SessionCore` is the session's incoming side, its failover (detach, reattach, recreate), producers,
local transactions and close; it is put together from the channel (``_session_channel.py``: state and
writes) and the families of requests built on it: addresses and queues (``_session_requests.py``),
consumers (``_session_consumers.py``) and XA (``_session_xa.py``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cck.codec import (
    ARTEMIS_2_7_0_VERSION,
    ARTEMIS_2_21_0_VERSION,
    ARTEMIS_2_28_0_VERSION,
    CoreMessage,
    CreateProducerMessage,
    DisconnectConsumerMessage,
    PacketsConfirmedMessage,
    ReattachSessionMessage,
    RemoveProducerMessage,
    RollbackMessage,
    SessionCloseMessage,
    SessionCommitMessage,
    SessionProducerCreditsFailMessage,
    SessionProducerCreditsMessage,
    SessionReceiveMessage,
    SessionSendMessage,
    SessionStart,
    SessionXAAfterFailedMessage,
)
from cck.codec import Frame as CodecFrame

from ._calls import Call
from ._errors import ClientError, FailoverInterrupted, ObjectClosed, ProtocolViolation, TransactionRolledBack
from ._flow import ProducerCore, ProducerCredits
from ._session_channel import NULL
from ._session_consumers import ConsumerSide
from ._session_requests import QueueRequests
from ._session_xa import XARequests

if TYPE_CHECKING:
    from ._connection import ClientConnectionCore

__all__ = ["SessionCore"]


class SessionCore(QueueRequests, ConsumerSide, XARequests):
    """The client side of one session channel."""

    # ------------------------------------------------------------------ incoming

    def handle(self, frame: CodecFrame) -> None:
        packet = frame.packet
        if isinstance(packet, PacketsConfirmedMessage):
            self.send_window.confirmed(packet.command_id)
            self.commands_confirmed(packet.command_id)
            return
        if packet.IS_RESPONSE:
            self.calls.answer(packet)
        elif isinstance(packet, SessionReceiveMessage):
            self._receive(packet, frame.size)
        elif isinstance(packet, (SessionProducerCreditsMessage, SessionProducerCreditsFailMessage)):
            self._credits(packet)
        elif isinstance(packet, DisconnectConsumerMessage):
            self._disconnected(packet)
        else:
            raise ProtocolViolation(f"{packet.type_name()} on session channel {self.channel_id} is not something "
                                    "a broker sends to a client (large messages are not supported by this client)")
        if packet.requires_confirmations():
            self.confirm(frame.size)

    def _credits(self, packet: SessionProducerCreditsMessage | SessionProducerCreditsFailMessage) -> None:
        credits = self.credits.get(packet.address) or self.credits.get(packet.address or None)
        if credits is not None:
            credits.granted(packet.credits, failed=isinstance(packet, SessionProducerCreditsFailMessage))
        if self.on_credits is not None:
            self.on_credits()

    def failed(self, error: ClientError) -> None:
        """The connection is gone: every waiter learns why, every reader wakes."""
        self.closed = True
        self.failure = error
        self.calls.fail_all(error)
        self.confirmations_lost(lambda _call: error)
        for _packet, confirmation in self.held:
            if confirmation is not None:
                confirmation.fail(error)
        self._end_consumers()
        if self.on_credits is not None:
            self.on_credits()

    # ------------------------------------------------------------------ failover

    def detach(self, failover_deadline_ms: int | None) -> None:
        """The connection failed and a new one is being made: keep everything, hold new writes, and bound
        the calls already waiting by the failover timeout instead of the dead connection's timers."""
        if self.attached:  # the first failure of this outage: later attempts keep what it found
            self.xid_at_failure = self.active_xid
            self.work_at_failure = self.work_done
        self.attached = False
        self._calls_at_detach = len(self.calls)
        self.calls.extend_deadlines(failover_deadline_ms)

    def reattach_request(self) -> ReattachSessionMessage:
        """REATTACH_SESSION: our name and the last broker command we processed."""
        return ReattachSessionMessage(self.options.name, self.receive_window.last_confirmed)

    def reattached(self, connection: ClientConnectionCore, broker_last_confirmed: int, call_deadline_ms: int) -> int:
        """The broker kept the session: resend what it has not seen, then what was held; returns how many
        cached commands were replayed."""
        self.connection = connection
        self.xid_at_failure = None  # the broker kept the branch with the session: nothing failed
        self.work_at_failure = False
        self.commits_while_away.clear()
        replay = self.send_window.replay_after(broker_last_confirmed)
        self.commands_confirmed(broker_last_confirmed)
        self.calls.replayed(len(replay))
        connection.write_frames(replay)
        self._resume(call_deadline_ms)
        return len(replay)

    def recreated(self, connection: ClientConnectionCore, server_version: int, call_deadline_ms: int) -> None:
        """The broker lost the session and a new one was created on the same channel (notes §9.5): fresh
        windows, consumers and the started state rebuilt, waiting calls told their outcome is unknown,
        a transaction with work in it marked rollback-only, an XA branch reported failed."""
        self.connection = connection
        self.incarnation += 1
        self.server_version = server_version
        connection.adopt_version(server_version)
        self.send_window.reset()
        self.confirmations_lost(lambda call: FailoverInterrupted(call.request))
        self.receive_window.last_confirmed = -1
        self.receive_window.received_bytes = 0
        self.calls.fail_oldest(self._calls_at_detach, lambda call: FailoverInterrupted(call.request))
        self.attached = True
        if self.options.transacted and self.work_at_failure:
            self._lose_work()
        self.work_at_failure = False
        self.commits_while_away.clear()
        self._recreate_consumers()
        held = {p.producer_id for p, _ in self.held if isinstance(p, CreateProducerMessage)}
        for producer in self.producers.values():
            # one created while the session was away goes out with the held requests, once
            if self.version >= ARTEMIS_2_28_0_VERSION and producer.producer_id not in held:
                self.write(CreateProducerMessage(producer.producer_id, producer.address))
        self.credits.clear()  # credits granted by the lost session are gone; they are asked for again on use
        if self.on_credits is not None:
            self.on_credits()  # a send waiting for the old session's credits asks again (Artemis resets them)
        if self.xid_at_failure is not None:
            self.write(SessionXAAfterFailedMessage(self.xid_at_failure))
            self.xid_at_failure = None
        if self.started:
            self.write(SessionStart())
        self._resume(call_deadline_ms)

    def _lose_work(self) -> None:
        """The transaction's work from before the failure is gone with the old session.  A commit made while the
        session was away goes out as a rollback and fails with TransactionRolledBack (Artemis's client blocks such
        a commit until its failover is done, then finds the session rollback-only); with none, the session is
        rollback-only until its next commit or rollback."""
        if self.commits_while_away:
            # the first held commit is the first commit made while away: its call is the first one recorded
            for index, (packet, confirmation) in enumerate(self.held):
                if isinstance(packet, SessionCommitMessage):
                    self.held[index] = (RollbackMessage(False), confirmation)
                    self.commits_while_away[0].fails_with = TransactionRolledBack(self.options.name)
                    return
        self.rollback_only = True

    def _resume(self, call_deadline_ms: int) -> None:
        self.attached = True
        self.resumes += 1
        self.calls.extend_deadlines(call_deadline_ms)
        held, self.held = self.held, []
        for packet, confirmation in held:
            self.write(packet, confirmation)

    # ------------------------------------------------------------------ producers

    def create_producer(self, address: str | None) -> ProducerCore:
        producer = ProducerCore(self._next_producer, address)
        self._next_producer += 1
        if self.version >= ARTEMIS_2_28_0_VERSION:
            self.write(CreateProducerMessage(producer.producer_id, address))
        self.producers[producer.producer_id] = producer
        return producer

    def close_producer(self, producer: ProducerCore) -> None:
        if producer.closed:
            return
        producer.closed = True
        self.producers.pop(producer.producer_id, None)
        if self.version >= ARTEMIS_2_28_0_VERSION and not self.closed:
            self.write(RemoveProducerMessage(producer.producer_id))

    def credits_for(self, address: str | None) -> ProducerCredits | None:
        """The address's producer credits, created on first use; ``None`` without producer flow control."""
        if self.settings.producer_window_size == -1:
            return None
        credits = self.credits.get(address)
        if credits is None:
            credits = self.credits[address] = ProducerCredits(self, address, self.settings.producer_window_size)
        return credits

    def send(self, producer: ProducerCore, message: CoreMessage) -> tuple[Call | None, bool]:
        """Queue a SESS_SEND.  Returns the call that its response resolves (``None`` when the broker will
        not answer) and whether the Java client would block on it."""
        if producer.closed:
            raise ObjectClosed(f"producer {producer.producer_id} is closed")
        if message.address is None:
            if producer.address is None:
                raise ValueError("the message has no address and the producer has none either")
            message = dataclasses.replace(message, address=producer.address)
        blocking = (self.settings.block_on_durable_send if message.durable
                    else self.settings.block_on_non_durable_send)  # fmt: skip
        # From 2.7.0 (130) a confirmation window makes every send ask for a NULL_RESPONSE; before it (the
        # SessionSendMessage / _1X layouts) only a blocking send does, and the window confirms the others
        # with PACKETS_CONFIRMED alone (Artemis 1.x's client acknowledges sends from its command
        # confirmation handler), so such a send's call completes when its command ID is confirmed.
        windowed = self.send_window.enabled and self.version >= ARTEMIS_2_7_0_VERSION
        requires_response = blocking or windowed
        correlation = 0
        call = None
        if blocking:
            correlation = self._blocking_id()
        elif windowed:
            self._async_correlation += 1
            correlation = self._async_correlation
        packet = SessionSendMessage(message, requires_response, correlation, producer.producer_id)
        self.work_done = True
        if requires_response:
            call = self.calls.add(self.connection.new_call("SESS_SEND", NULL, correlation, blocking=blocking))
        elif self.send_window.enabled:  # before 130: done when the broker confirms the command
            call = Call("SESS_SEND", (), None)
        self.write(packet, None if requires_response else call)
        return call, blocking

    # ------------------------------------------------------------------ local transactions

    def commit(self) -> Call:
        """SESS_COMMIT; on a rollback-only session (recreated after failover) a rollback instead, and the call
        fails with TransactionRolledBack once the broker has rolled back."""
        if self.rollback_only:
            rollback = self.rollback()
            failed = Call("SESS_COMMIT", NULL, None)
            rollback.add_done_callback(lambda done: failed.fail(done.error or TransactionRolledBack(self.options.name)))
            return failed
        # SessionCommitMessage_V2 (a correlation ID) from 2.21.0 (132); before, the empty SESS_COMMIT.
        correlation = self._blocking_id() if self.version >= ARTEMIS_2_21_0_VERSION else None
        self.work_done = False
        call = self._call(SessionCommitMessage(correlation), NULL, correlation)
        if not self.attached:  # held: what it commits is known once the session is back (see _lose_work)
            self.commits_while_away.append(call)
        return call

    def rollback(self, *, consider_last_message_as_delivered: bool = False) -> Call:
        """Roll back; buffered deliveries are dropped first, the broker redelivers them."""
        self._clear_buffers()
        self.work_done = self.rollback_only = False
        return self._call(RollbackMessage(consider_last_message_as_delivered), NULL)

    # ------------------------------------------------------------------ close

    def close(self) -> Call:
        """SESS_CLOSE; the session is gone once the broker answers."""
        self._end_consumers()
        call = self._call(SessionCloseMessage(), NULL)
        call.add_done_callback(lambda _: self.connection.session_closed(self))
        return call
