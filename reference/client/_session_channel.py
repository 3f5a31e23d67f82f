"""What every part of a client session stands on (sans-IO): how it was asked for (:class:`SessionOptions`),
its state, and writing on its channel -- a packet, a call that waits for an answer, a confirmation.

The session's verbs are built on :class:`SessionChannel` in their own modules: addresses and queues
(``_session_requests.py``), consumers and deliveries (``_session_consumers.py``), XA (``_session_xa.py``);
:class:`~reference.client._session.SessionCore` puts them together with producers, local transactions and
failover.
"""

from __future__ import annotations

import itertools
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cck.codec import (
    NullResponseMessage,
    Packet,
    PacketsConfirmedMessage,
    SessionBindingQueryResponseMessage,
    SessionBindingQueryResponseMessage_V2,
    SessionBindingQueryResponseMessage_V3,
    SessionBindingQueryResponseMessage_V4,
    SessionBindingQueryResponseMessage_V5,
    SessionQueueQueryResponseMessage,
    SessionQueueQueryResponseMessage_V2,
    SessionQueueQueryResponseMessage_V3,
    SessionXAResponseMessage,
    Xid,
)

from .._window import ReceiveWindow, SendWindow
from ._calls import Call, CallQueue
from ._errors import ClientError, ObjectClosed
from ._flow import ConsumerCore, ProducerCore, ProducerCredits

if TYPE_CHECKING:
    from ._connection import ClientConnectionCore

__all__ = ["BINDING_QUERY", "NULL", "QUEUE_QUERY", "XA", "SessionChannel", "SessionOptions", "fresh_session_name"]

#: The answers a request accepts (any other answer is a protocol violation).
NULL = (NullResponseMessage,)
QUEUE_QUERY = (SessionQueueQueryResponseMessage, SessionQueueQueryResponseMessage_V2,
               SessionQueueQueryResponseMessage_V3)  # fmt: skip
BINDING_QUERY = (SessionBindingQueryResponseMessage, SessionBindingQueryResponseMessage_V2,
                 SessionBindingQueryResponseMessage_V3, SessionBindingQueryResponseMessage_V4,
                 SessionBindingQueryResponseMessage_V5)  # fmt: skip
XA = (SessionXAResponseMessage,)
_session_numbers = itertools.count(1)


def fresh_session_name() -> str:
    """A name no broker has seen: a new session, or a session recreated after failover (notes §9.5)."""
    return f"cck-{uuid.uuid4()}-{next(_session_numbers)}"


@dataclass(frozen=True)
class SessionOptions:
    """How the session was asked for in CREATESESSION."""

    name: str
    username: str | None = None
    password: str | None = None
    xa: bool = False
    auto_commit_sends: bool = True
    auto_commit_acks: bool = True
    pre_acknowledge: bool = False
    default_address: str | None = None
    client_id: str | None = None

    @property
    def transacted(self) -> bool:
        return not (self.auto_commit_sends and self.auto_commit_acks)


class SessionChannel:
    """One session channel's state and its writes."""

    def __init__(self, connection: ClientConnectionCore, channel_id: int, options: SessionOptions) -> None:
        self.connection = connection
        self.channel_id = channel_id
        self.options = options
        settings = connection.settings
        self.settings = settings
        self.send_window = SendWindow(settings.confirmation_window_size)
        self.receive_window = ReceiveWindow(settings.confirmation_window_size)
        self.calls = CallQueue()
        self.consumers: dict[int, ConsumerCore] = {}
        self.producers: dict[int, ProducerCore] = {}
        self.credits: dict[str | None, ProducerCredits] = {}
        self.started = False
        self.closed = False
        self.failure: ClientError | None = None  # why the session ended, when a failure ended it
        self.server_version = settings.version
        # Failover state (notes §9.4, §9.5).
        self.attached = True
        #: how many times the session came back (reattached or recreated): what a wait outside the call table
        #: (producer credits) reads to know that the session was away meanwhile
        self.resumes = 0
        #: written while detached: sent once reattached or recreated (with the send's confirmation call, if any)
        self.held: list[tuple[Packet, Call | None]] = []
        #: asynchronous sends before 2.7.0 (130) with a confirmation window, by command ID: the broker does not
        #: answer them, its PACKETS_CONFIRMED does (Artemis 1.x's client acknowledges such a send from its
        #: command confirmation handler)
        self.confirmations: deque[tuple[int, Call]] = deque()
        self._calls_at_detach = 0
        self.work_done = False  # a transacted session has sent or acknowledged since its last commit/rollback
        self.rollback_only = False
        #: how many times the session was recreated; a delivery carries the value it arrived under
        self.incarnation = 0
        self.active_xid: Xid | None = None
        #: the branch the session was associated with when its connection failed: what a recreated session
        #: reports failed, even when the application has ended the branch meanwhile (that XA_END is held and goes
        #: out after the report, as Artemis's client blocks it until its failover is done)
        self.xid_at_failure: Xid | None = None
        #: whether the transaction had work in it when the connection failed (a recreate loses that work)
        self.work_at_failure = False
        #: commits made while the session was away, their requests held: the first decides that lost work's fate
        self.commits_while_away: list[Call] = []
        self._blocking_correlation = -1
        self._async_correlation = 0
        self._next_consumer = 0
        self._next_producer = 0
        #: Called when producer credits arrive (the IO layer wakes blocked senders).
        self.on_credits: Callable[[], None] | None = None

    @property
    def version(self) -> int:
        """The version this session's packets are chosen by: the connection's (our announced version, lowered
        to the broker's once it told us), as Artemis's session context asks its connection."""
        return self.connection.version

    def write(self, packet: Packet, confirmation: Call | None = None) -> None:
        """Send a packet on this session's channel (confirmable ones enter the resend cache); ``confirmation``
        completes once the broker confirms the packet's command ID."""
        if self.closed:
            if self.failure is not None:
                raise self.failure
            if self.connection.failure is not None:
                raise self.connection.failure
            raise ObjectClosed(f"session {self.options.name!r} is closed; cannot send {packet.type_name()}")
        if not self.attached:
            self.held.append((packet, confirmation))
            return
        self.connection.send_session_packet(self, packet)
        if confirmation is not None:
            self.confirmations.append((self.send_window.next_command_id - 1, confirmation))

    def commands_confirmed(self, last_id: int) -> None:
        """The broker has processed every command up to ``last_id``: the sends waiting for that complete."""
        while self.confirmations and self.confirmations[0][0] <= last_id:
            self.confirmations.popleft()[1].resolve(PacketsConfirmedMessage(last_id))

    def confirmations_lost(self, error: Callable[[Call], ClientError]) -> None:
        """The commands waiting for a confirmation will not get one (the session is gone or was recreated)."""
        while self.confirmations:
            call = self.confirmations.popleft()[1]
            call.fail(error(call))

    def _call(self, packet: Packet, expect: tuple[type[Packet], ...], correlation: int | None = None) -> Call:
        call = self.calls.add(self.connection.new_call(packet.type_name(), expect, correlation, blocking=True))
        self.write(packet)
        return call

    def _blocking_id(self) -> int:
        self._blocking_correlation -= 1
        return self._blocking_correlation

    def confirm(self, frame_size: int) -> None:
        index = self.receive_window.processed(frame_size)
        if index is not None:
            self.connection.send_raw(self.channel_id, PacketsConfirmedMessage(index))

    def flush_confirmations(self) -> None:
        """Confirm a partly filled window (on every PING, notes §9.3)."""
        index = self.receive_window.flush()
        if index is not None and not self.closed:
            self.connection.send_raw(self.channel_id, PacketsConfirmedMessage(index))
