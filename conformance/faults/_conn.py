"""One proxied connection: two sockets and a pipe each way between them.

Theory of operation.  Everything runs in event-loop callbacks; nothing here
awaits except the upstream connect, which has a deadline.  Bytes read from one
socket go through that direction's :class:`_Pipe`: the splitter cuts them into
frames, the rules judge each frame, and the verdict becomes an item in a FIFO
with a release time.  The FIFO is what keeps a direction in order: a frame
queued behind a delayed one leaves after it.  A cut is an item too, so frames
judged before it still leave first.

Connection states:

* ``connecting``: the client was accepted, the upstream connect is under way;
  client bytes queue up.
* ``open``: bytes flow both ways.  A FIN from one side is passed on once its
  pipe is empty (half-close); a reset from one side resets the other.
* ``dead``: blackholed.  Both sockets stay open and are still read (so the log
  shows what each end tried to say), but nothing is written and no close is
  passed on: each end finds out only by its own timeouts.
* ``closed``: cut, stopped, or both sides finished.

A connection's end is logged once (:class:`EndRecord`): the first thing that ended
it, a FIN or a reset from one side or a close of the proxy's own, is kept when it
happens (``_ended``, first one wins) and written when the connection is done, or by
the proxy's stop for one still open then.  A blackholed connection ends when one of
its sockets closes (that side's FIN or reset, which the proxy does not pass on), or
when the proxy stops; its reason says it was blackholed.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from ._rules import HALF_OPEN, Direction, FrameView, Verdict
from ._stream import FrameSplitter, Unit, VersionTracker
from ._wirelog import RAW, AttemptOutcome, AttemptRecord, EndBy, EndHow, EndRecord, WireLog, WireRecord

__all__ = ["Env", "ProxiedConnection", "SideProtocol", "reset_transport"]

Side = Literal["client", "upstream"]
State = Literal["connecting", "open", "dead", "closed"]

_SOURCE: dict[Direction, Side] = {"c2s": "client", "s2c": "upstream"}
_TARGET: dict[Direction, Side] = {"c2s": "upstream", "s2c": "client"}
_OTHER: dict[Side, Side] = {"client": "upstream", "upstream": "client"}
_DIRECTION_FROM: dict[Side, Direction] = {"client": "c2s", "upstream": "s2c"}
#: A side as the end log names it.
_BY: dict[Side, EndBy] = {"client": "client", "upstream": "broker"}

# Stop reading a side while more than this waits in the pipe it feeds (a long Delay on a busy
# stream must not buffer without bound); read again once it is below the low mark.
_QUEUE_HIGH = 4 * 1024 * 1024
_QUEUE_LOW = 1024 * 1024
_LINGER_RESET = struct.pack("ii", 1, 0)
_AS_IS = Verdict("forwarded")


class Env(Protocol):
    """What a connection needs from its proxy."""

    log: WireLog
    max_frame_size: int

    def now_ns(self) -> int: ...

    def judge(self, view: FrameView) -> Verdict: ...

    def forget(self, conn: ProxiedConnection) -> None: ...


def reset_transport(transport: asyncio.Transport) -> None:
    """Close with RST: SO_LINGER 0, then close without flushing."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):  # already shut down: the close below still releases it
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    transport.abort()


class SideProtocol(asyncio.Protocol):
    """One socket of a proxied connection; ``on_made`` binds an accepted client socket to its connection."""

    def __init__(self, side: Side, conn: ProxiedConnection | None = None,
                 on_made: Callable[[asyncio.Transport], ProxiedConnection | None] | None = None) -> None:
        self.side = side
        self.conn = conn
        self._on_made = on_made

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        if self._on_made is not None:
            self.conn = self._on_made(transport)
        elif self.conn is not None:
            self.conn.attach_upstream(transport)

    def data_received(self, data: bytes) -> None:
        if self.conn is not None:
            self.conn.received(self.side, data)

    def eof_received(self) -> bool:
        return self.conn.eof(self.side) if self.conn is not None else False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.conn.lost(self.side, exc)

    def pause_writing(self) -> None:
        if self.conn is not None:
            self.conn.pause_reading(_OTHER[self.side], "socket", True)

    def resume_writing(self) -> None:
        if self.conn is not None:
            self.conn.pause_reading(_OTHER[self.side], "socket", False)


@dataclass(slots=True)
class _Item:
    release_ns: int
    data: bytes
    record: WireRecord | None  # logged when the item leaves (None: the preamble)
    cut: bool = False
    half_open: bool = False  # a cut of the client's side only


class _Pipe:
    """One direction: splitter, verdicts, and the FIFO of what is still to be written."""

    def __init__(self, conn: ProxiedConnection, direction: Direction, splitter: FrameSplitter) -> None:
        self.conn = conn
        self.direction = direction
        self.splitter = splitter
        self.queue: deque[_Item] = deque()
        self.queued = 0
        self.timer: asyncio.TimerHandle | None = None
        self.eof = False  # the source will send nothing more
        self.finished = False  # ... and everything it sent has been passed on
        self.cut_by: str | None = None  # a cut is queued: later frames are not forwarded
        self.seq = 0

    # -------------------------------------------------------------- input

    def receive(self, data: bytes) -> None:
        for unit in self.splitter.feed(data):
            self._take(unit)
        self.drain()

    def _take(self, unit: Unit) -> None:
        conn, env = self.conn, self.conn.env
        now = env.now_ns()
        if unit.kind == "preamble":
            if conn.state != "dead" and self.cut_by is None:
                self._push(_Item(now, unit.data, None))
            return
        self.seq += 1
        frame = unit.frame
        view: FrameView | None = None
        if frame is None:
            record = WireRecord(now, now, conn.index, self.direction, self.seq, None, RAW, len(unit.data), False,
                                "forwarded", None, unit.error)
        else:
            packet = frame.packet
            conn.versions.saw(self.direction, packet)
            view = FrameView(conn.index, self.direction, frame.channel_id, packet.type_name(),
                             packet.requires_confirmations())
            record = WireRecord(now, now, conn.index, self.direction, self.seq, view.channel, view.type_name,
                                frame.size, view.confirmable, "forwarded", packet)
        # Frames that go nowhere are not judged, so that rule counters only move for real traffic.
        if conn.state == "dead":
            env.log.add(replace(record, action="dropped", rule=conn.dead_reason))
            return
        if self.cut_by is not None:
            env.log.add(replace(record, action="dropped", rule=f"connection being cut by {self.cut_by}"))
            return
        # Bytes without a frame boundary cannot be judged per frame: they are passed on as they are.
        verdict = env.judge(view) if view is not None else _AS_IS
        if verdict.action == "dropped":
            env.log.add(replace(record, action="dropped", rule=verdict.rule))
        elif verdict.action == "cut":
            self.cut_by = verdict.rule
            self._push(_Item(now, b"", replace(record, action="cut", rule=verdict.rule), cut=True,
                             half_open=verdict.half_open))
        else:
            release = now + round(verdict.delay_s * 1e9)
            self._push(_Item(release, unit.data * verdict.copies,
                             replace(record, action=verdict.action, rule=verdict.rule)))

    def _push(self, item: _Item) -> None:
        self.queue.append(item)
        self.queued += len(item.data)
        if self.queued > _QUEUE_HIGH:
            self.conn.pause_reading(_SOURCE[self.direction], "queue", True)

    # -------------------------------------------------------------- output

    def drain(self) -> None:
        """Write every item whose time has come; re-arm the timer for the next one."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        conn = self.conn
        target = conn.transports[_TARGET[self.direction]]
        if target is None or conn.state in ("dead", "closed"):
            return  # upstream not connected yet (drained again on connect), or nothing may flow
        now_ns = conn.env.now_ns
        while self.queue:
            item = self.queue[0]
            wait_ns = item.release_ns - now_ns()
            if wait_ns > 0:
                self.timer = asyncio.get_running_loop().call_later(wait_ns / 1e9, self.drain)
                break
            self.queue.popleft()
            self.queued -= len(item.data)
            if item.cut:
                assert item.record is not None
                conn.cut(item.record, half_open=item.half_open)
                return
            if target.is_closing():
                if item.record is not None:
                    conn.env.log.add(replace(item.record, ts_ns=now_ns(), action="dropped",
                                             rule="the receiving side had closed"))
                continue
            target.write(item.data)
            if item.record is not None:
                conn.env.log.add(replace(item.record, ts_ns=now_ns()))
        if self.queued < _QUEUE_LOW:
            conn.pause_reading(_SOURCE[self.direction], "queue", False)
        if self.eof and not self.queue:
            conn.pipe_finished(self)

    def discard(self, reason: str) -> None:
        """Forget what is still queued (the connection is going away); logged as dropped."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        now = self.conn.env.now_ns()
        for item in self.queue:
            if item.record is not None:
                self.conn.env.log.add(replace(item.record, ts_ns=now, action="dropped", rule=reason))
        self.queue.clear()
        self.queued = 0


class ProxiedConnection:
    """A client socket, its upstream socket (once connected) and the two pipes."""

    def __init__(self, env: Env, index: int, client: asyncio.Transport, accepted_ns: int, peer: str,
                 *, dead: bool) -> None:
        self.env = env
        self.index = index
        self.accepted_ns = accepted_ns
        self.peer = peer
        self.transports: dict[Side, asyncio.Transport | None] = {"client": client, "upstream": None}
        self.state: State = "dead" if dead else "connecting"
        self.dead_reason = "blackhole"  # what made it dead, for the log
        c2s = FrameSplitter(expect_preamble=True, version=0, max_frame_size=env.max_frame_size)
        s2c = FrameSplitter(expect_preamble=False, version=0, max_frame_size=env.max_frame_size)
        self.versions = VersionTracker(c2s, s2c)
        self.pipes: dict[Direction, _Pipe] = {"c2s": _Pipe(self, "c2s", c2s), "s2c": _Pipe(self, "s2c", s2c)}
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._connect_task: asyncio.Task[None] | None = None
        self._open_sides: set[Side] = {"client"}
        self._paused: dict[Side, set[str]] = {"client": set(), "upstream": set()}
        self._end: EndRecord | None = None  # what ended it first (logged once it is done)
        self._end_logged = False

    # -------------------------------------------------------------- upstream

    def connect_upstream(self, host: str, port: int, timeout: float) -> None:
        self._connect_task = asyncio.get_running_loop().create_task(self._connect(host, port, timeout))
        self._connect_task.add_done_callback(lambda _: self._check_done())

    async def _connect(self, host: str, port: int, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(loop.create_connection(lambda: SideProtocol("upstream", self), host, port), timeout)
        except (OSError, TimeoutError) as exc:
            detail = f"{host}:{port}: {exc or 'connect timed out'}"
            self._attempt("upstream-unreachable", detail)
            if self.state == "dead":
                return  # blackholed meanwhile: the client must not hear about it either
            self._ended("proxy", "fin", f"upstream unreachable: {detail}")
            # A broker that is not there: the client is told by an orderly close (FIN), not a reset.
            self.state = "closed"
            self.pipes["c2s"].discard("upstream unreachable")
            self._close_side("client", rst=False)
            return
        except asyncio.CancelledError:
            self._attempt("upstream-unreachable", "the proxy stopped before the upstream connect finished")
            raise
        self._attempt("forwarded", None)

    def _attempt(self, outcome: AttemptOutcome, detail: str | None) -> None:
        self.env.log.add_attempt(AttemptRecord(self.accepted_ns, self.index, outcome, self.peer, detail))

    def attach_upstream(self, transport: asyncio.Transport) -> None:
        self.transports["upstream"] = transport
        self._open_sides.add("upstream")
        if self.state == "closed":
            self._close_side("upstream", rst=True)  # the client is gone already: leave nothing half-open
            return
        if self.state == "connecting":
            self.state = "open"
        self.pipes["c2s"].drain()

    # -------------------------------------------------------------- socket events

    def received(self, side: Side, data: bytes) -> None:
        if self.state != "closed":
            self.pipes[_DIRECTION_FROM[side]].receive(data)

    def eof(self, side: Side) -> bool:
        """A FIN from ``side``: keep the socket open to finish the other direction (when passing it on)."""
        self._ended(_BY[side], "fin", None)
        if self.state in ("dead", "closed"):
            return False  # not passed on; asyncio closes that socket
        pipe = self.pipes[_DIRECTION_FROM[side]]
        pipe.eof = True
        pipe.drain()
        return True

    def lost(self, side: Side, exc: Exception | None) -> None:
        if exc is None:
            self._ended(_BY[side], "fin", None)  # no FIN read from it: the proxy closed it, after what ended it
        else:
            self._ended(_BY[side], "reset" if isinstance(exc, ConnectionResetError) else "error", str(exc) or None)
        self._open_sides.discard(side)
        self.transports[side] = None
        other = _OTHER[side]
        if self.state in ("open", "connecting"):
            self.pipes[_DIRECTION_FROM[other]].discard(f"the {side} side closed")
            if exc is not None:
                # A reset (or error) on one side is passed on as a reset on the other.
                self.state = "closed"
                self.pipes[_DIRECTION_FROM[side]].discard(f"the {side} side failed: {exc}")
                self._close_side(other, rst=True)
            else:
                inbound = self.pipes[_DIRECTION_FROM[side]]
                inbound.eof = True
                if inbound.finished:
                    # Its FIN was passed on long ago and now nothing can reach it either: close the other side.
                    self.state = "closed"
                    self._close_side(other, rst=False)
                else:
                    inbound.drain()  # the rest of what it sent goes on first; then the other side is closed
        self._check_done()

    def pipe_finished(self, pipe: _Pipe) -> None:
        """Everything a side sent before its FIN went out: pass the FIN on."""
        if pipe.finished:
            return
        pipe.finished = True
        target_side = _TARGET[pipe.direction]
        target = self.transports[target_side]
        reverse = self.pipes["s2c" if pipe.direction == "c2s" else "c2s"]
        if target is None:
            return
        if reverse.finished or self.transports[_OTHER[target_side]] is None or not target.can_write_eof():
            # Nothing can flow back any more: close for good.
            self.state = "closed"
            self._close_side(target_side, rst=False)
            self._close_side(_OTHER[target_side], rst=False)
        else:
            target.write_eof()

    def pause_reading(self, side: Side, reason: str, on: bool) -> None:
        if self.state == "dead":
            return  # a dead connection writes nothing, so nothing backs up: keep reading for the log
        reasons = self._paused[side]
        was_paused = bool(reasons)
        if on:
            reasons.add(reason)
        else:
            reasons.discard(reason)
        transport = self.transports[side]
        if transport is None or transport.is_closing() or was_paused == bool(reasons):
            return
        if reasons:
            transport.pause_reading()
        else:
            transport.resume_reading()

    # -------------------------------------------------------------- faults and shutdown

    def cut(self, record: WireRecord, *, half_open: bool = False) -> None:
        """Reset both sides now (the cut frame is logged, not forwarded); ``half_open``: reset only the client's
        side and blackhole the broker's, which stays open until the broker closes it or the proxy stops."""
        self.env.log.add(replace(record, ts_ns=self.env.now_ns()))
        if not half_open:
            self.close(rst=True, reason=f"connection cut by {record.rule}")
            return
        self._ended("proxy", "reset", f"client side cut by {record.rule}; the broker's side left open and silent")
        self.kill(record.rule or HALF_OPEN)  # the rule's description starts with HALF_OPEN
        self._close_side("client", rst=True)

    def kill(self, reason: str) -> None:
        """Blackhole: queued bytes are lost, nothing more is written, nothing is closed."""
        if self.state == "closed":
            return
        self.state = "dead"
        self.dead_reason = reason
        for pipe in self.pipes.values():
            pipe.discard(reason)
        for side in ("client", "upstream"):
            self._paused[side].clear()
            transport = self.transports[side]
            if transport is not None and not transport.is_closing():
                transport.resume_reading()  # keep reading: what each end still says goes to the log

    def close(self, *, rst: bool, reason: str) -> None:
        self._ended("proxy", "reset" if rst else "fin", reason)
        self.state = "closed"
        for pipe in self.pipes.values():
            pipe.discard(reason)
        if self._connect_task is not None and not self._connect_task.done():
            self._connect_task.cancel()
        for side in ("client", "upstream"):
            self._close_side(side, rst=rst)
        self._check_done()

    def _close_side(self, side: Side, *, rst: bool) -> None:
        transport = self.transports[side]
        if transport is None:
            return
        if rst:
            reset_transport(transport)
        elif not transport.is_closing():
            transport.close()

    def _ended(self, by: EndBy, how: EndHow, reason: str | None) -> None:
        """Keep what ended the connection, if nothing did before: the first FIN, reset or close wins."""
        if self._end is not None:
            return
        if self.state == "dead":
            blackholed = f"blackholed by {self.dead_reason}"
            reason = f"{reason}; {blackholed} before" if by == "proxy" else \
                f"{reason + '; ' if reason else ''}not passed on: {blackholed}"
        self._end = EndRecord(self.env.now_ns(), self.index, by, how, reason)

    def log_end(self) -> None:
        """Log the connection's end (once): when it is done, or when the proxy stopped with it still open."""
        if self._end_logged:
            return
        assert self._end is not None  # a connection is done only after its client side went, which ended it
        self._end_logged = True
        self.env.log.add_end(self._end)

    def _check_done(self) -> None:
        connecting = self._connect_task is not None and not self._connect_task.done()
        if not self._open_sides and not connecting and not self.done.done():
            self.state = "closed"
            for pipe in self.pipes.values():
                pipe.discard("connection closed")
            self.log_end()
            self.done.set_result(None)
            self.env.forget(self)
