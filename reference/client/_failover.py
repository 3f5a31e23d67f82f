"""The client's connection life as a sans-IO state machine: connect, lose the connection, reconnect,
reattach or recreate every session, or give up (notes §9.4, §9.5, §11.3, §11.4).

::

    machine = Failover(settings, balancer)
    machine.start(now_ms)
    for command in machine.take_commands(now_ms):
        ...  # Connect -> open a socket, then machine.opened(core, now) or machine.open_failed(core, why, now)
             # Send -> write the bytes; Disconnect -> close that core's socket; Record / NotifyFailure -> listeners
    machine.received(core, data, now_ms); machine.connection_lost(core, why, now_ms)
    machine.tick(now_ms) when machine.next_deadline() has passed

The machine owns what lives across connection cores: the sessions carried through a reconnection (their
resend caches and replay are the session cores' own), the retry schedule and the current core.  It never
reads a clock and never touches a socket; the asyncio layer carries out its commands.  Its transitions are
one table, ``_TABLE``: (state, event) -> (action, next state).  An action may answer with a follow-up event
(the next attempt is due at once, every session is restored, no attempt is left) that is handled in the new
state before the input returns.

Where it connects is an input: the first connection goes where the locator's policy chooses
(:class:`InitialConnect`); a reconnection walks the failed server and then ``backups`` (:class:`Reconnect`),
so a backup server learnt from the topology is one more candidate, not another code path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from cck.codec import CreateSessionResponseMessage, ReattachSessionResponseMessage

from ._balance import Balancer, InitialConnect
from ._calls import Call
from ._connection import ClientConnectionCore, TopologyMember
from ._errors import ClientError, ConnectionFailed, ObjectClosed, ProtocolViolation
from ._failover_support import balance_topology, connect_gave_up, reconnection_gave_up
from ._failover_terms import (
    ATTEMPT_STATES,
    FAILING_OVER_STATES,
    FINAL_STATES,
    Attached,
    Command,
    Connect,
    Disconnect,
    Event,
    FailoverEvent,
    GaveUp,
    NotifyFailure,
    Record,
    Schedule,
    Send,
    State,
)
from ._locator import Connector, Reconnect, connector_of, intervals
from ._restore import Restore
from ._session import SessionCore
from ._session_channel import fresh_session_name
from ._settings import ClientSettings

__all__ = ["Failover"]

LOG = logging.getLogger("cck.reference.client")


class Failover:
    """One connection of a ServerLocator, across every TCP connection it makes (Artemis's session factory).

    ``balancer`` chooses the first connection's server; ``backups`` are tried after the failed server on each
    reconnect attempt; ``names`` makes the name of a recreated session; ``refresh`` is called after each failed
    first-connection attempt, before the schedule counts it (discovery replaces the initial connectors then).
    """

    def __init__(self, settings: ClientSettings, balancer: Balancer[Connector], *,
                 backups: tuple[Connector, ...] = (), names: Callable[[], str] = fresh_session_name,
                 refresh: Callable[[], None] | None = None) -> None:
        self.settings = settings
        self.balancer = balancer
        self.backups = backups
        self.state = State.DETACHED
        self.events: list[FailoverEvent] = []
        #: The connectors the first connection chose from (the URL's, those discovered, or the topology's).
        self.connectors: tuple[Connector, ...] = balancer.initial
        self.connector: Connector | None = balancer.initial[0] if balancer.initial else None
        self.core = self._new_core()
        self._names = names
        self._refresh = refresh
        self._commands: list[Command] = []
        self._now_ms = 0  # the time of the input being handled (call callbacks fire inside inputs)
        self._schedule: Schedule | None = None
        self._due_ms: int | None = None
        self._reconnecting = False
        self._cause: ClientError | None = None  # the failure a reconnection is recovering from
        self._last_error = ""
        self._final: ClientError | None = None
        #: Sessions carried from the failed connection to the next one, and their restore on the current attempt.
        self._carried: list[SessionCore] = []
        self._restore = Restore(self.core, (), 0, names)

    # ------------------------------------------------------------------ inputs

    def start(self, now_ms: int) -> None:
        """The first connection: attempts where the balancer says, ``initialConnectAttempts`` per connector."""
        self._input(now_ms)
        self._fire(Event.START)

    def opened(self, core: ClientConnectionCore, now_ms: int) -> None:
        """The socket a :class:`Connect` asked for is open: run the handshake on it."""
        self._input(now_ms)
        if core is not self.core or self.state is not State.ATTEMPTING:
            self._commands.append(Disconnect(core))  # a late socket nobody waits for any more
            return
        topology = core.start(now_ms)
        topology.add_done_callback(lambda call: self._handshake_done(core, call))

    def open_failed(self, core: ClientConnectionCore, reason: str, now_ms: int) -> None:
        """The socket could not be opened (refused, unreachable, timed out)."""
        self._input(now_ms)
        if core is self.core and self.state is State.ATTEMPTING:
            self._fire(Event.ATTEMPT_FAILED, reason)

    def received(self, core: ClientConnectionCore, data: bytes, now_ms: int) -> None:
        self._input(now_ms)
        if core is self.core:
            core.receive(data, now_ms)

    def connection_lost(self, core: ClientConnectionCore, reason: str, now_ms: int) -> None:
        self._input(now_ms)
        if core is self.core:
            core.connection_lost(reason, now_ms)

    def tick(self, now_ms: int) -> None:
        """Run what is due: waiting calls of carried sessions past their failover timeout, the core's timers,
        the next attempt."""
        self._input(now_ms)
        for session in self._carried:
            if not session.attached:
                session.calls.expire(now_ms)
        if self.core.started:
            self.core.tick(now_ms)
        if self.state is State.DETACHED and self._due_ms is not None and now_ms >= self._due_ms:
            self._fire(Event.DUE)

    def close(self, now_ms: int) -> None:
        """No more attempts; sessions still waiting for a reconnection learn that it will not come."""
        self._input(now_ms)
        if self.state not in FINAL_STATES:
            if self.state is not State.ATTACHED:
                self._commands.append(Disconnect(self.core))  # an attempt in progress goes with it
            self._fire(Event.CLOSE)

    def next_deadline(self) -> int | None:
        due = [self._due_ms] if self.state is State.DETACHED and self._due_ms is not None else []
        due += [d for s in self._carried if not s.attached and (d := s.calls.next_deadline()) is not None]
        if self.core.started and self.core.failure is None and (core := self.core.next_deadline()) is not None:
            due.append(core)
        return min(due) if due else None

    def take_commands(self, now_ms: int) -> list[Command]:
        """What to carry out now, in order; the current core's bytes last (requests made while no core could
        take them start their timeouts now too)."""
        self._input(now_ms)
        for session in self._carried:
            if not session.attached:
                session.calls.stamp(now_ms)
        data = self.core.take_output(now_ms)
        if data:
            self._commands.append(Send(self.core, data))
        commands, self._commands = self._commands, []
        return commands

    # ------------------------------------------------------------------ what the application sees

    @property
    def reconnecting(self) -> bool:
        return self._reconnecting and self.state in FAILING_OVER_STATES

    @property
    def failure(self) -> ClientError | None:
        """Why the connection is unusable (``None`` while it works or is reconnecting)."""
        if self._final is not None:
            return self._final
        return None if self.reconnecting else self.core.failure

    # ------------------------------------------------------------------ the machine

    def _input(self, now_ms: int) -> None:
        self._now_ms = now_ms

    def _fire(self, event: Event, payload: object = None) -> None:
        follow: Event | None = event
        while follow is not None:
            transition = _TABLE.get((self.state, follow))
            if transition is None:
                if self.state in FINAL_STATES:
                    return  # late news about a connection that has ended
                raise RuntimeError(f"failover: no transition from {self.state.value} on {follow.value}")
            action, self.state = transition
            try:
                follow = action(self, self._now_ms, payload)
            except ClientError as error:
                # The broker said something the state does not allow: this attempt is over.
                if self.core.failure is None:
                    self.core.fail(error, self._now_ms)  # its failure listener ends the attempt
                elif self.state in ATTEMPT_STATES:
                    self._fire(Event.ATTEMPT_FAILED, str(error))
                return
            except Exception as exc:  # noqa: BLE001 - a defect of the client ends the reconnection, named
                self._internal_error(exc)
                return
            payload = None

    def _new_core(self) -> ClientConnectionCore:
        core = ClientConnectionCore(self.settings)
        core.keep_sessions = self.settings.reconnect_attempts != 0
        core.failure_listeners.append(lambda error: self._core_failed(core, error))
        core.topology_listeners.append(self._topology_changed)
        return core

    def _record(self, kind: str, detail: str = "") -> None:
        if not self._reconnecting:
            return  # the first connection's attempts are the connect call's business, not events
        event = FailoverEvent(kind, self._now_ms, self.connector.url if self.connector else "", detail)
        self.events.append(event)
        self._commands.append(Record(event))

    def _core_failed(self, core: ClientConnectionCore, error: ClientError) -> None:
        if core is not self.core:
            return
        self._commands += [NotifyFailure(error), Disconnect(core)]
        if self.state is State.ATTACHED:
            self._fire(Event.LOST if core.keep_sessions and not core.closed else Event.DROPPED, error)
        elif self.state in ATTEMPT_STATES:
            self._fire(Event.ATTEMPT_FAILED, str(error))

    def _handshake_done(self, core: ClientConnectionCore, call: Call) -> None:
        # A failed handshake is reported by the core's failure (the call fails only with it).
        if call.error is None and core is self.core and self.state is State.ATTEMPTING:
            self._fire(Event.CONNECTED)

    def _answered(self, core: ClientConnectionCore, call: Call) -> None:
        if call.error is not None or core is not self.core:
            return  # the core failed: its failure listener ends the attempt
        answer = call.result()
        if self.state is State.REATTACHING and isinstance(answer, ReattachSessionResponseMessage):
            self._fire(Event.REATTACHED if answer.reattached else Event.REFUSED, answer)
        elif self.state is State.RECREATING and isinstance(answer, CreateSessionResponseMessage):
            self._fire(Event.RECREATED, answer)
        else:
            raise ProtocolViolation(f"{answer.type_name()} is not an answer while {self.state.value}")

    def _topology_changed(self, node_id: str, member: TopologyMember | None, last: bool) -> None:
        """Every topology message of every connection feeds the locator's balancer, as in Artemis; a member
        whose live connector is the server this connection uses names its backup (or, without one, that there
        is none any more), which the next reconnection tries after it (Artemis's setBackupConnector)."""
        balance_topology(self.balancer, node_id, member, last, self.connector)
        if member is None or member.live is None or self.connector is None:
            return
        if connector_of(member.live) == self.connector:
            backup = connector_of(member.backup) if member.backup is not None else None
            self.backups = (backup,) if backup is not None and backup != self.connector else ()
            if self._reconnecting and isinstance(self._schedule, Reconnect):
                # learnt during the reconnection (on an attempt's connection): tried from the next attempt on, as
                # Artemis's client reads its backup connector afresh on each retry
                failed = self._schedule.targets[0]
                self._schedule.retarget((failed, *(b for b in self.backups if b != failed)))

    # ------------------------------------------------------------------ actions (see _TABLE)

    def _begin(self, now_ms: int, _: object) -> Event | None:
        self._schedule = InitialConnect(self.balancer, self.settings.initial_connect_attempts,
                                        intervals(self.settings))
        self._due_ms = now_ms
        return Event.DUE

    def _attempt(self, now_ms: int, _: object) -> Event | None:
        assert self._schedule is not None, "an attempt without a schedule"
        previous, self.core = self.core, self._new_core()
        if self._carried:
            self.core.adopt(self._carried, previous.next_channel)
        if not self._reconnecting:
            self.connectors = self._schedule.candidates()
        self.connector = self._schedule.next_connector()
        self._record("attempt")
        self._commands.append(Connect(self.connector, self.core, self._due_ms if self._due_ms is not None else now_ms))
        return None

    def _attempt_failed(self, now_ms: int, reason: object) -> Event | None:
        assert self._schedule is not None, "a failed attempt without a schedule"
        self._last_error = str(reason)
        self._record("attempt-failed", self._last_error)
        self._commands.append(Disconnect(self.core))
        if self._refresh is not None and not self._reconnecting:
            self._refresh()
        self._due_ms = self._schedule.failed(now_ms)
        if self._due_ms is None:
            return Event.EXHAUSTED
        return Event.DUE if self._due_ms <= now_ms else None

    def _begin_restore(self, now_ms: int, _: object) -> Event | None:
        self._restore = Restore(self.core, self._carried, now_ms + self.settings.call_timeout_ms, self._names)
        return self._restore_next()

    def _restore_next(self) -> Event | None:
        core, request = self.core, self._restore.next_request()
        if request is None:
            return Event.RESTORED
        request.add_done_callback(lambda call: self._answered(core, call))
        return None

    def _reattached(self, _: int, answer: object) -> Event | None:
        self._record("reattached", self._restore.reattached(answer))
        return self._restore_next()

    def _recreate(self, _: int, __: object) -> Event | None:
        core = self.core
        self._restore.recreate().add_done_callback(lambda call: self._answered(core, call))
        return None

    def _recreated(self, _: int, answer: object) -> Event | None:
        self._record("recreated", self._restore.recreated(answer))
        return self._restore_next()

    def _attached(self, _: int, __: object) -> Event | None:
        self._carried, self._reconnecting, self._due_ms = [], False, None
        self._commands.append(Attached(self.core))
        return None

    def _lost(self, now_ms: int, error: object) -> Event | None:
        self._cause = error if isinstance(error, ClientError) else ConnectionFailed(str(error))
        self._reconnecting = True
        self._record("failed", str(error))
        self._carried = [s for s in self.core.sessions.values() if not s.closed]
        assert self.connector is not None, "attached without a connector"
        targets = (self.connector, *(b for b in self.backups if b != self.connector))
        self._schedule = Reconnect(self.settings, targets)
        self._due_ms = now_ms  # notes §11.4: the first reconnect attempt is immediate
        return Event.DUE

    def _dropped(self, _: int, error: object) -> Event | None:
        self._final = error if isinstance(error, ClientError) else ConnectionFailed(str(error))
        return None

    def _give_up(self, _: int, __: object) -> Event | None:
        assert self._schedule is not None, "giving up without a schedule"
        self._finish(self._schedule.failures, None)
        return None

    def _close(self, _: int, __: object) -> Event | None:
        closed = ObjectClosed("the connection was closed while it was reconnecting")
        for session in self._carried:
            if not session.attached and not session.closed:
                session.failed(closed)
        self._carried, self._due_ms = [], None
        return None

    def _finish(self, attempts: int, internal: str | None) -> None:
        """Give up: the sessions carried fail with what the application sees from now on."""
        final = (reconnection_gave_up(self._cause, attempts, internal) if self._reconnecting
                 else connect_gave_up(self._last_error, attempts, internal))  # fmt: skip
        self._final = final
        self._record("gave-up", str(final))
        for session in self._carried:
            if not session.closed:
                session.failed(final)
        self._carried, self._due_ms = [], None
        self._commands.append(GaveUp(final))

    def _internal_error(self, exc: Exception) -> None:
        """A defect of this client, not of the peer: end the reconnection with the cause named rather than leave
        the sessions waiting on a machine that cannot go on."""
        LOG.error("reconnection stopped by an internal error", exc_info=exc)
        self._record("attempt-failed", f"internal error: {exc!r}")
        self.state = State.GAVE_UP
        failures = self._schedule.failures + 1 if self._schedule is not None else 1
        self._finish(failures, repr(exc))
        if self._final is not None:
            self.core.fail(self._final, self._now_ms)  # its socket's close must not start another reconnection
        self._commands.append(Disconnect(self.core))


_Action = Callable[[Failover, int, object], Event | None]
S, E = State, Event
#: The transitions: (state, event) -> (action, next state).  CLOSE is allowed from every state but the final two.
_TABLE: Mapping[tuple[State, Event], tuple[_Action, State]] = {
    (S.DETACHED, E.START): (Failover._begin, S.DETACHED),
    (S.DETACHED, E.DUE): (Failover._attempt, S.ATTEMPTING),
    (S.DETACHED, E.EXHAUSTED): (Failover._give_up, S.GAVE_UP),
    (S.ATTEMPTING, E.CONNECTED): (Failover._begin_restore, S.REATTACHING),
    (S.ATTEMPTING, E.ATTEMPT_FAILED): (Failover._attempt_failed, S.DETACHED),
    (S.REATTACHING, E.REATTACHED): (Failover._reattached, S.REATTACHING),
    (S.REATTACHING, E.REFUSED): (Failover._recreate, S.RECREATING),
    (S.REATTACHING, E.RESTORED): (Failover._attached, S.ATTACHED),
    (S.REATTACHING, E.ATTEMPT_FAILED): (Failover._attempt_failed, S.DETACHED),
    (S.RECREATING, E.RECREATED): (Failover._recreated, S.REATTACHING),
    (S.RECREATING, E.ATTEMPT_FAILED): (Failover._attempt_failed, S.DETACHED),
    (S.ATTACHED, E.LOST): (Failover._lost, S.DETACHED),
    (S.ATTACHED, E.DROPPED): (Failover._dropped, S.GAVE_UP),
    **{(state, E.CLOSE): (Failover._close, S.CLOSED) for state in State if state not in FINAL_STATES},
}
