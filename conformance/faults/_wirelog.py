"""The proxy's evidence: one record per frame it saw, one per connection attempt, one per connection end.

Records are appended when their action has happened: a forwarded frame when its
bytes were handed to the socket (so a delayed frame's record comes late, and
``ts_ns - seen_ns`` is the time the proxy held it), a dropped or cut frame at
once, a connection's end once the connection is done (both sockets gone) or the
proxy stopped.  Timestamps are the proxy's injected monotonic clock in nanoseconds.

Tests wait for evidence with :meth:`WireLog.wait_for` (bounded by a deadline)
rather than sleeping.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from cck.codec import Packet
from cck.conformance.verdicts import NotObserved

from ._rules import Action, Direction

__all__ = ["AttemptOutcome", "AttemptRecord", "EndBy", "EndHow", "EndRecord", "WireLog", "WireRecord"]

#: What became of an accepted connection.
AttemptOutcome = Literal["forwarded", "refused", "upstream-unreachable", "blackholed"]
#: Who ended a connection first: one of its ends (the broker is the upstream side), or the proxy itself.
EndBy = Literal["client", "broker", "proxy"]
#: How: an orderly close (FIN), a reset (RST), or another socket error.
EndHow = Literal["fin", "reset", "error"]

#: ``type_name`` of a record holding bytes that were not decoded.
RAW = "RAW"


@dataclass(frozen=True, slots=True)
class WireRecord:
    """One frame (or, for ``type_name == "RAW"``, a run of undecoded bytes) seen by the proxy."""

    #: When the action happened (for forwarded frames: when the bytes were written), ns.
    ts_ns: int
    #: When the proxy had the whole frame decoded, ns.
    seen_ns: int
    #: Connection index: 1, 2, ... in accept order.
    conn: int
    direction: Direction
    #: Position of this frame in its connection and direction, from 1 (a duplicate is one frame).
    seq: int
    #: ``None`` for raw bytes.
    channel: int | None
    #: Artemis type name (``"SESS_SEND"``), or ``"RAW"``.
    type_name: str
    #: Bytes on the wire, including the 4-byte length (times two is not applied for duplicates).
    size: int
    confirmable: bool
    action: Action
    packet: Packet | None
    #: The codec's error text for the first raw record of a stream; why bytes stayed raw for the others.
    error: str | None = None
    #: The rule(s) or event that decided the action (``None``: plain forwarding).
    rule: str | None = None

    @property
    def reached_peer(self) -> bool:
        """Whether the frame's bytes were written to the other side."""
        return self.action in ("forwarded", "delayed", "duplicated")

    @property
    def held_ns(self) -> int:
        """How long the proxy held the frame before acting on it."""
        return self.ts_ns - self.seen_ns

    def to_json(self) -> dict[str, Any]:
        return {
            "ts_ns": self.ts_ns,
            "seen_ns": self.seen_ns,
            "conn": self.conn,
            "direction": self.direction,
            "seq": self.seq,
            "channel": self.channel,
            "type": self.type_name,
            "size": self.size,
            "confirmable": self.confirmable,
            "action": self.action,
            "rule": self.rule,
            "error": self.error,
            "packet": None if self.packet is None else repr(self.packet),
        }


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One accepted TCP connection: when it was accepted and what became of it."""

    #: Taken in the accept callback, before anything else happens to the connection.
    ts_ns: int
    conn: int
    outcome: AttemptOutcome
    peer: str
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"ts_ns": self.ts_ns, "conn": self.conn, "outcome": self.outcome, "peer": self.peer,
                "detail": self.detail}


@dataclass(frozen=True, slots=True)
class EndRecord:
    """How one accepted connection ended: who ended it first, how, and why.

    Exactly one per accepted connection (refused ones included: the proxy reset them), logged once the
    connection is done (both sockets gone) or, for one still open then, when the proxy stopped.  What the
    other side did afterwards (the FIN or reset the proxy passed on) is not recorded: it follows from the rules
    in docs/fault-proxy.md.
    """

    #: When the first side ended it (its FIN or reset reached the proxy, or the proxy closed it), ns.
    ts_ns: int
    conn: int
    by: EndBy
    how: EndHow
    #: The proxy's reason (``"connection cut by CutAfter(...)"``, ``"proxy stopped"``), a socket error's text,
    #: or that a blackholed connection's end was not passed on; ``None`` for a plain FIN.
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"ts_ns": self.ts_ns, "conn": self.conn, "by": self.by, "how": self.how, "reason": self.reason}


class _Waiter:
    __slots__ = ("future", "predicate")

    def __init__(self, predicate: Callable[[], bool], future: asyncio.Future[None]) -> None:
        self.predicate = predicate
        self.future = future


class WireLog:
    """The records, in the order their actions happened, and waiters on them."""

    def __init__(self) -> None:
        self.records: list[WireRecord] = []
        self.attempts: list[AttemptRecord] = []
        self.ends: list[EndRecord] = []
        self._waiters: list[_Waiter] = []

    def add(self, record: WireRecord) -> None:
        self.records.append(record)
        self._wake()

    def add_attempt(self, attempt: AttemptRecord) -> None:
        # Outcomes are known at different times (an upstream connect takes a while), but the list
        # stays in accept order because the backoff oracle reads it as a schedule.
        index = len(self.attempts)
        while index and self.attempts[index - 1].ts_ns > attempt.ts_ns:
            index -= 1
        self.attempts.insert(index, attempt)
        self._wake()

    def add_end(self, end: EndRecord) -> None:
        # Logged when a connection is done, which can be long after it ended (a half-closed connection keeps
        # flowing the other way): the list stays in the order the connections ended.
        index = len(self.ends)
        while index and self.ends[index - 1].ts_ns > end.ts_ns:
            index -= 1
        self.ends.insert(index, end)
        self._wake()

    def _wake(self) -> None:
        if not self._waiters:
            return
        still: list[_Waiter] = []
        for waiter in self._waiters:
            if waiter.future.done():
                continue
            if waiter.predicate():
                waiter.future.set_result(None)
            else:
                still.append(waiter)
        self._waiters = still

    async def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """Return once ``predicate()`` holds (checked on every new record).  After ``timeout`` s :class:`NotObserved`
        (a ``TimeoutError`` and a failed check): what the log waits for is traffic of the peers, the subject's."""
        if predicate():
            return
        waiter = _Waiter(predicate, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter.future, timeout)
        except TimeoutError:
            raise NotObserved(f"no {what} within {timeout} s") from None
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    async def wait_for(self, predicate: Callable[[WireRecord], bool], timeout: float) -> WireRecord:
        """The first record (already logged or coming) matching ``predicate``."""
        found: list[WireRecord] = []
        cursor = 0  # records before it were checked already: each record is looked at once

        def seen() -> bool:
            nonlocal cursor
            while not found and cursor < len(self.records):
                if predicate(self.records[cursor]):
                    found.append(self.records[cursor])
                cursor += 1
            return bool(found)

        await self.wait_until(seen, timeout, "matching wire record")
        return found[0]

    async def wait_for_attempts(self, count: int, timeout: float) -> list[AttemptRecord]:
        """The attempt list once it holds at least ``count`` entries."""
        await self.wait_until(lambda: len(self.attempts) >= count, timeout, f"{count} connection attempt(s)")
        return list(self.attempts)

    async def wait_for_end(self, conn: int, timeout: float) -> EndRecord:
        """The end record of connection ``conn`` (already logged or coming)."""

        def logged() -> EndRecord | None:
            return next((end for end in self.ends if end.conn == conn), None)

        await self.wait_until(lambda: logged() is not None, timeout, f"end of connection {conn}")
        end = logged()
        assert end is not None
        return end


def write_jsonl(path: str | os.PathLike[str], rows: list[dict[str, Any]]) -> int:
    """Write rows as JSON Lines; returns how many were written."""
    with open(path, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, sort_keys=True) + "\n")
    return len(rows)
