"""Pending requests: a sans-IO future resolved by the broker's answer.

Requests on one channel are answered in the order they were sent (the broker
processes a session's packets in order, notes §7.4), so each channel keeps its
pending calls in a FIFO and every response packet resolves the oldest one.  The
correlation ID, where the response carries one, must agree; a disagreement is a
protocol violation, not something to paper over.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from cck.codec import ActiveMQExceptionMessage, Packet, SessionXAResponseMessage

from ._errors import BrokerRefused, CallTimeout, ClientError, ProtocolViolation, XAError

__all__ = ["Call", "CallQueue"]

_UNSET: Any = object()


class Call:
    """One request waiting for its answer.

    ``expect`` is the response type (or types) that completes it; an EXCEPTION
    always completes it with :class:`BrokerRefused`.  A call someone blocks on has a
    ``timeout_ms``; requests nobody blocks on (asynchronous sends) have none and never time out.

    The timeout runs from when the request goes out, not from when it was made: the connection core
    stamps ``deadline`` (monotonic ms) in ``take_output(now_ms)``, so making a request needs no clock.
    """

    __slots__ = ("_callbacks", "_error", "_result", "_stamped", "blocking", "correlation_id", "deadline", "expect",
                 "fails_with", "request", "timeout_ms")

    def __init__(self, request: str, expect: tuple[type[Packet], ...], correlation_id: int | None,
                 timeout_ms: int | None = None, *, deadline_ms: int | None = None) -> None:
        self.request = request
        self.expect = expect
        self.correlation_id = correlation_id
        self.blocking = timeout_ms is not None
        self.timeout_ms = 0 if timeout_ms is None else timeout_ms
        self.deadline: int | None = deadline_ms
        self._stamped = deadline_ms is not None or not self.blocking
        self._result: Packet | None = _UNSET
        self._error: ClientError | None = None
        self._callbacks: list[Callable[[Call], None]] = []
        #: set when the request was replaced before it went out (a commit a recreated session turned into a
        #: rollback): the answer then completes the call with this error
        self.fails_with: ClientError | None = None

    @property
    def done(self) -> bool:
        return self._result is not _UNSET or self._error is not None

    @property
    def error(self) -> ClientError | None:
        return self._error

    def result(self) -> Packet:
        """The response packet; raises the call's error; only valid once done."""
        if self._error is not None:
            raise self._error
        if self._result is _UNSET:
            raise RuntimeError(f"{self.request}: result() before the call completed")
        assert self._result is not None
        return self._result

    def stamp(self, now_ms: int) -> None:
        """Start the timeout of a blocking call whose request has just gone out (once)."""
        if not self._stamped:
            self.deadline = now_ms + self.timeout_ms
            self._stamped = True

    def bound(self, deadline_ms: int | None) -> None:
        """Replace the deadline (failover: ``None`` is "wait forever", and is not stamped again)."""
        self.deadline = deadline_ms
        self._stamped = True

    def add_done_callback(self, callback: Callable[[Call], None]) -> None:
        if self.done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def resolve(self, packet: Packet) -> None:
        if self.fails_with is not None:
            self._finish(_UNSET, self.fails_with)
        else:
            self._finish(packet, None)

    def fail(self, error: ClientError) -> None:
        self._finish(_UNSET, error)

    def _finish(self, packet: Any, error: ClientError | None) -> None:
        if self.done:
            return
        self._result, self._error = packet, error
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def __repr__(self) -> str:
        state = "done" if self.done else "pending"
        return f"<Call {self.request} correlation={self.correlation_id} {state}>"


class CallQueue:
    """The calls of one channel awaiting an answer, oldest first."""

    def __init__(self) -> None:
        self._calls: deque[Call] = deque()
        #: Blocking calls whose timeout has not started yet (their requests have not gone out).
        self._unstamped: list[Call] = []
        #: Correlated answers that matched no waiting call (see :meth:`answer`).
        self.stray: list[Packet] = []
        #: How many answers may still come while no call waits: those owed to commands replayed after a reattach
        #: (:meth:`replayed`) and to calls that timed out (:meth:`expire`).
        self._owed_answers = 0

    def __len__(self) -> int:
        return len(self._calls)

    def add(self, call: Call) -> Call:
        self._calls.append(call)
        if not call._stamped:
            self._unstamped.append(call)
        return call

    def replayed(self, count: int) -> None:
        """``count`` commands were replayed after a reattach.  The broker answers each it executes again, and some
        of them were answered before the failure (a command it refused is not counted in its confirmations, so
        it is replayed though it was processed): up to ``count`` answers arriving while no call waits are
        kept in ``stray`` like Artemis's client, which ignores them, instead of failing the connection, which
        would reattach and replay the same command again without end."""
        self._owed_answers += count

    def answer(self, packet: Packet) -> Call | None:
        """Complete the oldest call with ``packet``; returns it.

        A response whose correlation ID belongs to a younger waiting call completes that one.  A correlated
        response that matches no waiting call (a second answer to a command the broker processed twice,
        e.g. after a replay) is kept in ``stray`` and otherwise ignored, as Artemis's client ignores
        out-of-order responses: whether that was harmful is for the oracles to judge, not a reason to
        drop the connection.  Raises ProtocolViolation when nothing was waiting, or when the packet is
        neither what the call expects nor an EXCEPTION (an answer owed to a replayed command, see :meth:`replayed`,
        or to a call that timed out, see :meth:`expire`, is kept in ``stray`` even when nothing waits).
        """
        if not self._calls:
            if self._owed_answers > 0:
                self._owed_answers -= 1
                self.stray.append(packet)
                return None
            raise ProtocolViolation(f"unsolicited {packet.type_name()}: no request is waiting for an answer")
        call = self._calls[0]
        correlation = getattr(packet, "correlation_id", None)
        if correlation not in (None, -1) and call.correlation_id is not None and correlation != call.correlation_id:
            match = next((c for c in self._calls if c.correlation_id == correlation), None)
            if match is None:
                self.stray.append(packet)
                return None
            call = match
        self._calls.remove(call)
        if isinstance(packet, ActiveMQExceptionMessage):
            call.fail(BrokerRefused(packet.code, packet.message, call.request))
        elif isinstance(packet, SessionXAResponseMessage) and packet.error:
            call.fail(XAError(packet.response_code, packet.message, call.request))
        elif isinstance(packet, call.expect):
            call.resolve(packet)
        else:
            error = ProtocolViolation(f"{call.request} expects {'/'.join(t.type_name() for t in call.expect)}, "
                                      f"the broker answered {packet.type_name()}")
            call.fail(error)
            raise error
        return call

    def stamp(self, now_ms: int) -> None:
        """The requests made since the last output have gone out at ``now_ms``: start their timeouts."""
        unstamped, self._unstamped = self._unstamped, []
        for call in unstamped:
            call.stamp(now_ms)

    def expire(self, now_ms: int) -> list[Call]:
        """Fail every call past its deadline with CallTimeout; returns them.  The broker may still answer each (or
        resend its answer after a reattach, when the timeout failed the connection before the answer came): that
        answer, with no call waiting, is kept in ``stray`` like Artemis's client, which ignores it, instead of
        failing the connection, which would reattach and get the same answer again without end."""
        expired = [c for c in self._calls if c.deadline is not None and now_ms >= c.deadline]
        for call in expired:
            self._calls.remove(call)
            call.fail(CallTimeout(call.request, call.timeout_ms))
        self._owed_answers += len(expired)
        return expired

    def next_deadline(self) -> int | None:
        deadlines = [c.deadline for c in self._calls if c.deadline is not None]
        return min(deadlines) if deadlines else None

    def fail_oldest(self, count: int, error: Callable[[Call], ClientError]) -> None:
        """Fail the ``count`` oldest calls, each with its own error."""
        for _ in range(min(count, len(self._calls))):
            call = self._calls.popleft()
            call.fail(error(call))

    def extend_deadlines(self, deadline_ms: int | None) -> None:
        """While the connection is being re-established a waiting call is bounded by the failover timeout."""
        for call in self._calls:
            if call.blocking:
                call.bound(deadline_ms)

    def fail_all(self, error: ClientError) -> None:
        calls, self._calls = self._calls, deque()
        for call in calls:
            call.fail(error)
