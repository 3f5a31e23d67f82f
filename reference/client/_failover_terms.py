"""The failover machine's vocabulary (:mod:`reference.client._failover`): its states and events, the commands
it emits for the asyncio layer to carry out, and the events it records for listeners and evidence."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from ._connection import ClientConnectionCore
from ._errors import ClientError
from ._locator import Connector

__all__ = ["ATTEMPT_STATES", "FAILING_OVER_STATES", "FINAL_STATES", "Attached", "Command", "Connect", "Disconnect",
           "Event", "FailoverEvent", "GaveUp", "NotifyFailure", "Record", "Schedule", "Send", "State"]


class State(Enum):
    DETACHED = "detached"  # no usable connection; the next attempt is due at the schedule's time
    ATTEMPTING = "attempting"  # a socket is being opened and the handshake run on a fresh core
    REATTACHING = "reattaching"  # REATTACH_SESSION sent for the next carried session (or none left)
    RECREATING = "recreating"  # the broker refused the reattach: CREATESESSION sent under a new name
    ATTACHED = "attached"
    GAVE_UP = "gave-up"  # no attempt left (or reconnection off): the connection is failed for good
    CLOSED = "closed"


#: No event moves the machine out of these.
FINAL_STATES = frozenset({State.GAVE_UP, State.CLOSED})
#: A connection is being tried: its socket, handshake or the restore of the sessions.
ATTEMPT_STATES = frozenset({State.ATTEMPTING, State.REATTACHING, State.RECREATING})
FAILING_OVER_STATES = ATTEMPT_STATES | {State.DETACHED}


class Event(Enum):
    START = "start"  # connect() was called
    DUE = "due"  # the wait before the next attempt is over
    CONNECTED = "connected"  # the attempt's handshake ended (topology with last=true)
    ATTEMPT_FAILED = "attempt-failed"  # the attempt's socket, handshake or restore failed
    REATTACHED = "reattached"  # REATTACH_SESSION_RESP(reattached=true)
    REFUSED = "refused"  # REATTACH_SESSION_RESP(reattached=false)
    RECREATED = "recreated"  # CREATESESSION_RESP to the recreate
    RESTORED = "restored"  # every carried session is reattached or recreated
    LOST = "lost"  # the attached connection failed and will be re-established
    DROPPED = "dropped"  # the attached connection failed and reconnection is off (reconnectAttempts=0)
    EXHAUSTED = "exhausted"  # the schedule has no attempt left
    CLOSE = "close"  # the application closed the connection


@dataclass(frozen=True)
class FailoverEvent:
    """What the connection went through after it first connected, for listeners and evidence."""

    kind: str  # "failed", "attempt", "attempt-failed", "reattached", "recreated", "gave-up"
    at_ms: int
    connector: str
    detail: str = ""


@dataclass(frozen=True)
class Connect:
    """Open a TCP connection to ``connector`` for ``core`` now (the schedule said ``at_ms``), then report
    :meth:`Failover.opened` or :meth:`Failover.open_failed`."""

    connector: Connector
    core: ClientConnectionCore
    at_ms: int


@dataclass(frozen=True)
class Send:
    core: ClientConnectionCore
    data: bytes


@dataclass(frozen=True)
class Disconnect:
    """Close ``core``'s socket: its attempt failed, or it failed, or the connection was closed."""

    core: ClientConnectionCore


@dataclass(frozen=True)
class Record:
    """Tell the event listeners."""

    event: FailoverEvent


@dataclass(frozen=True)
class NotifyFailure:
    """Tell the failure listeners: a TCP connection failed (before any reconnection, as Artemis does)."""

    error: ClientError


@dataclass(frozen=True)
class Attached:
    """The connection works: the first connect succeeded, or a reconnection restored every session."""

    core: ClientConnectionCore


@dataclass(frozen=True)
class GaveUp:
    """No attempt is left; ``error`` is what the application sees from now on."""

    error: ClientError


Command = Connect | Send | Disconnect | Record | NotifyFailure | Attached | GaveUp


class Schedule(Protocol):
    """Where and when the next attempt goes: :class:`~reference.client._balance.InitialConnect` for the first
    connection, :class:`~reference.client._locator.Reconnect` after a failure."""

    @property
    def failures(self) -> int: ...

    def candidates(self) -> tuple[Connector, ...]: ...

    def next_connector(self) -> Connector: ...

    def failed(self, now_ms: int) -> int | None: ...
