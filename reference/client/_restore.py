"""The carried sessions restored on a new connection core, one at a time (notes §9.4, §9.5): REATTACH_SESSION,
and where the broker refuses it, CREATESESSION under a new name.  Sans-IO; the failover machine
(``_failover.py``) sends each request, hands each answer back and records what happened."""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable
from typing import TypeVar

from cck.codec import CreateSessionResponseMessage, Packet, ReattachSessionResponseMessage

from ._calls import Call
from ._connection import ClientConnectionCore
from ._errors import ProtocolViolation
from ._session import SessionCore

__all__ = ["Restore"]

P = TypeVar("P", bound=Packet)


def _expect(answer: object, kind: type[P]) -> P:
    if not isinstance(answer, kind):
        found = answer.type_name() if isinstance(answer, Packet) else type(answer).__name__
        raise ProtocolViolation(f"expected {kind.type_name()}, the broker answered {found}")
    return answer


class Restore:
    """One attempt's restore: the sessions still to do on ``core``; calls waiting in them get ``call_deadline_ms``
    once their session is back; ``names`` names a recreated session."""

    def __init__(self, core: ClientConnectionCore, sessions: Iterable[SessionCore], call_deadline_ms: int,
                 names: Callable[[], str]) -> None:
        self.core = core
        self._pending = deque(sessions)
        self._call_deadline_ms = call_deadline_ms
        self._names = names
        self._new_name = ""

    def next_request(self) -> Call | None:
        """REATTACH_SESSION for the next session; None when every session is back."""
        return self.core.reattach(self._pending[0]) if self._pending else None

    def reattached(self, answer: object) -> str:
        """The broker kept the session: replay what it has not seen; returns what to record."""
        response = _expect(answer, ReattachSessionResponseMessage)
        session = self._pending.popleft()
        replayed = session.reattached(self.core, response.last_confirmed_command_id, self._call_deadline_ms)
        return f"{session.options.name}: {replayed} command(s) replayed"

    def recreate(self) -> Call:
        """The broker refused the reattach: CREATESESSION for the same channel under a new name."""
        self._new_name = self._names()
        return self.core.recreate(self._pending[0], self._new_name)

    def recreated(self, answer: object) -> str:
        """The session exists again under its new name: rebuild it; returns what to record."""
        response = _expect(answer, CreateSessionResponseMessage)
        session = self._pending.popleft()
        session.options = dataclasses.replace(session.options, name=self._new_name)
        session.recreated(self.core, response.server_version, self._call_deadline_ms)
        return f"new session name {self._new_name}"
