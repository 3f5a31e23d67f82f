"""The exploration's second oracle: the confirmation-window rules, judged on the fault proxy's wire log.

The history shows what the client saw of its messages; the wire log shows what each end wrote.  A session
channel's confirmable commands are numbered from 0 by their receiver, which answers with PACKETS_CONFIRMED(index
of the last command it counted) (notes §9.1-§9.3, clauses ``window.*``).  These pure functions judge four rules:

* ``window.confirm-bytes``: the broker confirms exactly when the full frame sizes (length prefix included) of the
  commands it counted since its last confirmation reach the window: a confirmation naming a command past the one
  at which the window filled is late;
* ``window.flush`` (ttl check): a command the broker received is confirmed within its connection-ttl check
  interval (2 s, Artemis's ``connection-ttl-check-interval`` default and the reference's) plus a slack, whenever
  the broker is seen still writing on that connection after that time;
* ``window.flush`` (close): the answer to SESS_CLOSE is preceded by a confirmation of everything, the close
  included;
* ``window.flush`` (client PING): the kit's client confirms a partly filled window of the broker's packets with
  each PING (a client rule).

Soundness under the proxy's faults. A receiver numbers only what reached it, so only frames the proxy wrote to the
peer (forwarded, delayed, duplicated; a duplicate is only ever of an uncounted type) are counted, whatever was
dropped. A span is one session channel on one connection whose numbering is known: on connection 1 from 0; on a
later one from 0 after a recreate (CREATESESSION with that channel), or from the broker's last received command
after a reattach (REATTACH_SESSION_RESP): the client replays after that answer, so the broker's indexes continue
from it. A command the broker refused (EXCEPTION) is left out of the numbering (``window.exception-not-counted``,
from protocol 130): the workload's only refused request is a CREATE_QUEUE of a queue that exists, and the broker
answers a channel's commands in order, so each EXCEPTION saying so answers the oldest CREATE_QUEUE not yet answered
(after a reattach the client replays refused ones back to back); a span with any other EXCEPTION is not judged.
``window.zero``: with window 0 no session may be reattached once the broker saw its connection drop (Artemis 2.44.0
sometimes is: deviation window.mode.6), so not judged after a half-open cut (the broker saw no drop);
``reattach.no-window``: nor with window -1, where the window rules have nothing else to judge.
The byte rule is judged on connection 1 only (what the broker's byte count is after a reattach is not on the wire),
and only on confirmations that came: a confirmation still owed when a cut ended the connection is no finding; a
confirmation naming a command past those the broker received is one (``window.exception-not-counted`` when it
refused some). The close rule is judged only where nothing but forwarding and delaying happened on the connection
from the close on (so the close was answered, and the last NULL_RESPONSE on the channel is at or after that
answer), and no command the broker may answer was still waiting for its answer when the close was sent (the answer
after the close could then be that command's). The timing rules use the proxy's clock for both ends: when a command
was written to the broker (``ts_ns``) and when the broker's answer had arrived (``seen_ns``), so a delay rule
holding the answer changes nothing.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from cck.codec import (
    ExceptionType,
    PacketsConfirmedMessage,
    ReattachSessionMessage,
    ReattachSessionResponseMessage,
)
from cck.conformance.faults import HALF_OPEN, RAW, WireRecord

from ._judge import Judgement

__all__ = ["CHECK_S", "FLUSH_SLACK_S", "PING_SLACK_S", "WireJudgement", "judge_wire", "with_wire"]

#: The broker's connection-ttl check interval, at which it flushes partly filled windows (Artemis's
#: ``connection-ttl-check-interval`` default; the reference broker's ``ttl_check_interval_ms``).
CHECK_S = 2.0
#: Added to CHECK_S before a missing flush counts: a flush comes at most one check interval after the command
#: (measured: see docs/exploration.md); the slack absorbs a durable command's journal write and a loaded 2-core
#: machine's scheduling.  The workload's idle operation (``_model.IDLE_MS``) lasts longer than both.
FLUSH_SLACK_S = 1.5
#: How long after the broker's packet reached the client a PING must come before the client's flush is owed
#: with it: the client counts a packet in the callback that reads it, which its event loop runs before a timer
#: due in the same turn (the PING's); the slack covers a turn that began just before the packet arrived.
PING_SLACK_S = 0.25
#: Session channels start at 10 (notes §7.1 step 6); lower channels carry pings and session setup.
SESSION_CHANNEL_MIN = 10
_REACHED = ("forwarded", "delayed", "duplicated")
_UNFAULTED = ("forwarded", "delayed")


@dataclass(frozen=True, slots=True)
class WireJudgement:
    """What the wire rules made of one run's wire log."""

    #: Counted findings, one line each, each naming its clause.
    findings: tuple[str, ...] = ()
    #: What was not judged, and why.
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Span:
    """One session channel's confirmable commands on one connection, in the order sent, with their receiver's
    indexes (``first`` is the first one's)."""

    conn: int
    channel: int
    first: int
    commands: tuple[WireRecord, ...]
    #: how many commands the broker refused (left out of ``commands`` from protocol 130)
    refused: int = 0

    def index(self, position: int) -> int:
        return self.first + position


def _confirmed(record: WireRecord) -> int | None:
    packet = record.packet
    return packet.command_id if isinstance(packet, PacketsConfirmedMessage) else None


class _Log:
    """The wire log, sorted per connection and direction by position."""

    def __init__(self, records: Iterable[WireRecord]) -> None:
        self.by: dict[tuple[int, str], list[WireRecord]] = defaultdict(list)
        for record in records:
            self.by[(record.conn, record.direction)].append(record)
        for frames in self.by.values():
            frames.sort(key=lambda r: r.seq)
        self.conns = sorted({conn for conn, _ in self.by})
        #: every session's name -> its channel (from CREATESESSION, on any connection)
        self.channels: dict[str, int] = {}
        for (_, direction), frames in self.by.items():
            for r in frames:
                channel = getattr(r.packet, "session_channel_id", None)
                name = getattr(r.packet, "name", None)
                if direction == "c2s" and r.type_name.startswith("CREATESESSION") and isinstance(channel, int) \
                        and isinstance(name, str):
                    self.channels[name] = channel

    def frames(self, conn: int, direction: str) -> list[WireRecord]:
        return self.by.get((conn, direction), [])

    def counted(self, conn: int, direction: str, channel: int) -> list[WireRecord]:
        """The confirmable frames on ``channel`` that reached the peer."""
        return [r for r in self.frames(conn, direction)
                if r.channel == channel and r.confirmable and r.action in _REACHED]

    def confirms(self, conn: int, direction: str, channel: int) -> list[tuple[int, WireRecord]]:
        """The PACKETS_CONFIRMED ``direction``'s writer sent on ``channel`` (whatever the proxy did with them)."""
        out = []
        for r in self.frames(conn, direction):
            index = _confirmed(r)
            if r.channel == channel and index is not None:
                out.append((index, r))
        return out

    def refused(self, conn: int, channel: int) -> list[WireRecord | None]:
        """The commands the broker refused on ``channel``, one per EXCEPTION: for an EXCEPTION saying the queue
        exists (the workload's only refused request is a CREATE_QUEUE of a queue that exists), the oldest
        CREATE_QUEUE written before it and not yet matched to another (the broker answers a channel's commands in
        order; a reattach replays refused ones back to back, so the last command before the EXCEPTION is not
        always the one it answers); for any other EXCEPTION, or one with no such command, ``None`` (not known
        which)."""
        out: list[WireRecord | None] = []
        creates = [r for r in self.counted(conn, "c2s", channel) if r.type_name.startswith("CREATE_QUEUE")]
        matched: set[int] = set()
        for answer in self.frames(conn, "s2c"):
            if answer.channel != channel or "EXCEPTION" not in answer.type_name:
                continue
            code = getattr(answer.packet, "code", ExceptionType.QUEUE_EXISTS)  # no packet: a test's record
            waiting = [r for r in creates if r.seen_ns <= answer.seen_ns and r.seq not in matched]
            if code != ExceptionType.QUEUE_EXISTS or not waiting:
                out.append(None)
                continue
            matched.add(waiting[0].seq)
            out.append(waiting[0])
        return out


def _broker_spans(log: _Log, notes: list[str], *, refusals_counted: bool) -> list[_Span]:
    """The client's commands as the broker numbered them, per connection and session channel (without the ones it
    refused, unless ``refusals_counted``: before protocol 130 a refused command was counted like any other)."""
    spans = []
    for conn in log.conns:
        c2s = log.frames(conn, "c2s")
        channels = sorted({r.channel for r in c2s if r.channel is not None and r.channel >= SESSION_CHANNEL_MIN
                           and r.confirmable})
        created = {getattr(r.packet, "session_channel_id", None) for r in c2s
                   if r.type_name.startswith("CREATESESSION")}
        requests = [r for r in c2s if isinstance(r.packet, ReattachSessionMessage)]
        answers = [r for r in log.frames(conn, "s2c") if isinstance(r.packet, ReattachSessionResponseMessage)]
        reattached: dict[int, tuple[int, WireRecord]] = {}
        for request, answer in zip(requests, answers, strict=False):
            assert isinstance(request.packet, ReattachSessionMessage)
            assert isinstance(answer.packet, ReattachSessionResponseMessage)
            channel = log.channels.get(request.packet.name)
            if channel is not None and answer.packet.reattached:
                reattached[channel] = (answer.packet.last_confirmed_command_id + 1, answer)
        for channel in channels:
            commands = log.counted(conn, "c2s", channel)
            if not commands:
                continue
            refused = log.refused(conn, channel)
            if None in refused:
                notes.append(f"wire: channel {channel} on connection {conn} not judged: the broker refused a "
                             "command there (EXCEPTION) and which one is not on the wire")
                continue
            if not refusals_counted:
                commands = [r for r in commands if r not in refused]
            else:
                refused = []
            if conn == 1 or channel in created:
                first = 0
            elif channel in reattached and all(r.seen_ns >= reattached[channel][1].seen_ns for r in commands):
                first = reattached[channel][0]
            else:
                notes.append(f"wire: channel {channel} on connection {conn} not judged: how the broker numbers "
                             "its commands there is not on the wire")
                continue
            spans.append(_Span(conn, channel, first, tuple(commands), len(refused)))
    return spans


def _late_confirmations(log: _Log, span: _Span, window: int) -> str | None:
    """``window.confirm-bytes`` on a connection-1 span: the first confirmation that came after the command at
    which the counted bytes reached the window.  Only windows that start at the connection's start or right after
    a full window's confirmation are judged: Artemis's periodic flush runs on another thread than its count, so
    a flush racing the count of a command may leave that command out of the next window."""
    sizes = [r.size for r in span.commands]
    position = 0
    known = True  # the broker's count restarted at ``position``
    for index, _ in log.confirms(span.conn, "s2c", span.channel):
        if index >= len(sizes) and not any(r.type_name == RAW for r in log.frames(span.conn, "c2s")):
            refused = " (the refused ones not counted)" if span.refused else ""
            clause = "window.exception-not-counted" if span.refused else "window.confirm-bytes"
            return (f"{clause}: on channel {span.channel} the broker confirmed command {index}, but it was sent only "
                    f"{len(sizes)} confirmable command(s){refused}")
        if index < position or index >= len(sizes):
            return None  # a confirmation that goes back may be a flush racing a confirmation: judge no further
        counted = 0
        filled = None
        for due in range(position, index + 1):
            counted += sizes[due]
            if counted >= window:
                filled = due
                break
        if known and filled is not None and filled < index:
            return (f"window.confirm-bytes: on channel {span.channel} the {counted} bytes of commands "
                    f"{position}..{filled} (full frames, length prefix included) reached the {window}-byte "
                    f"window at command {filled}, but the broker's next PACKETS_CONFIRMED named {index}")
        known = filled == index
        position = index + 1
    return None


def _missing_flush(log: _Log, span: _Span) -> str | None:
    """``window.flush`` by the ttl check: the first command the broker left unconfirmed past the check interval
    and the slack, although it was seen writing on the connection later."""
    # what the broker wrote after a half-open cut shows it still had the connection, not that this channel's
    # session was still on it: the client's reattach may have moved it to another connection by then
    s2c = [r for r in log.frames(span.conn, "s2c") if not (r.rule or "").startswith(HALF_OPEN)]
    if not s2c:
        return None
    alive_until = max(r.seen_ns for r in s2c)
    confirms = log.confirms(span.conn, "s2c", span.channel)
    allowed_ns = int((CHECK_S + FLUSH_SLACK_S) * 1e9)
    for position, command in enumerate(span.commands):
        deadline = command.ts_ns + allowed_ns
        if alive_until <= deadline:
            return None  # later commands were written later still
        index = span.index(position)
        if not any(i >= index and r.seen_ns <= deadline for i, r in confirms):
            return (f"window.flush: command {index} ({command.type_name}) on channel {span.channel} was not "
                    f"confirmed within {CHECK_S + FLUSH_SLACK_S:g} s (the broker's {CHECK_S:g} s ttl check and "
                    f"{FLUSH_SLACK_S:g} s slack), although the broker wrote on the connection later")
    return None


def _close_unflushed(log: _Log, span: _Span) -> str | None:
    """``window.flush`` on close: no confirmation of SESS_CLOSE came before its answer."""
    for position, command in enumerate(span.commands):
        if command.type_name != "SESS_CLOSE":
            continue
        later = [r for d in ("c2s", "s2c") for r in log.frames(span.conn, d) if r.seen_ns >= command.seen_ns]
        if any(r.action not in _UNFAULTED for r in later):
            return None
        s2c = [r for r in log.frames(span.conn, "s2c") if r.channel == span.channel]
        if _answer_owed_before(log, span, command, s2c):
            return None
        answers = [r for r in s2c if r.type_name == "NULL_RESPONSE" and r.seen_ns >= command.seen_ns]
        if not answers:
            return None
        answer = answers[-1]
        index = span.index(position)
        if not any(i >= index and r.seq < answer.seq for i, r in log.confirms(span.conn, "s2c", span.channel)):
            return (f"window.flush: SESS_CLOSE (command {index} on channel {span.channel}) was answered without a "
                    "PACKETS_CONFIRMED of everything before the answer")
    return None


#: Confirmable commands the broker never answers, and those it answers only when they ask (``requires_response``).
_NEVER_ANSWERED = frozenset({"SESS_START", "SESS_FLOWTOKEN", "SESS_PRODUCER_REQUEST_CREDITS", "SESS_EXPIRED"})
_ANSWERED_IF_ASKED = frozenset({"SESS_SEND", "SESS_SEND_LARGE", "SESS_SEND_CONTINUATION", "SESS_ACKNOWLEDGE",
                                "SESS_INDIVIDUAL_ACKNOWLEDGE"})


def _answered(record: WireRecord) -> bool:
    """Whether the broker may answer this command (any request but those it never answers)."""
    if record.type_name in _NEVER_ANSWERED:
        return False
    if record.type_name in _ANSWERED_IF_ASKED:
        return bool(getattr(record.packet, "requires_response", False))
    return True


def _is_answer(record: WireRecord) -> bool:
    return record.type_name in ("NULL_RESPONSE", "EXCEPTION") or "_RESP" in record.type_name


def _answer_owed_before(log: _Log, span: _Span, close: WireRecord, s2c: list[WireRecord]) -> bool:
    """Whether a command the broker may answer reached it after its last answer on the channel before
    ``close``: then the first answer after the close may be that command's (the broker answers a channel's commands
    in order, and a rollback's answer is a NULL_RESPONSE like the close's), so the close's answer is not known.
    After a reattach the client replays a call still waiting right before the close, and the kit's client, whose
    wait for that call had timed out, took the replayed call's answer for the close's and ended the run."""
    answered_until = max((r.seen_ns for r in s2c if _is_answer(r) and r.seen_ns < close.seen_ns), default=-1)
    return any(r.channel == span.channel and r.action in _REACHED and r.seq < close.seq
               and r.seen_ns > answered_until and _answered(r)
               for r in log.frames(span.conn, "c2s"))


def _ping_unflushed(log: _Log) -> str | None:
    """``window.flush`` by the client's PING, on connection 1: a PING written well after a broker's packet
    reached the client, with no confirmation of that packet written by then (or right after the PING)."""
    c2s = log.frames(1, "c2s")
    pings = [r for r in c2s if r.type_name == "PING"]
    s2c_channels = sorted({r.channel for r in log.frames(1, "s2c") if r.channel is not None
                           and r.channel >= SESSION_CHANNEL_MIN and r.confirmable})
    for channel in s2c_channels:
        closes = [r.seq for r in c2s if r.channel == channel and r.type_name == "SESS_CLOSE"]
        closed_at = min(closes) if closes else None
        confirms = log.confirms(1, "c2s", channel)
        for index, packet in enumerate(log.counted(1, "s2c", channel)):
            due = packet.ts_ns + int(PING_SLACK_S * 1e9)
            ping = next((p for p in pings if p.seen_ns >= due), None)
            if ping is None or (closed_at is not None and closed_at < ping.seq):
                break
            if not any(i >= index and r.seq <= ping.seq + 1 for i, r in confirms):
                after_s = (ping.seen_ns - packet.ts_ns) / 1e9
                return (f"window.flush: the client's PING (c2s #{ping.seq}) came {after_s:.1f} s after the broker's "
                        f"packet {index} ({packet.type_name}) on channel {channel} reached it, "
                        "without a PACKETS_CONFIRMED of it")
    return None


def _reattached_without_window(log: _Log, window: int) -> str | None:
    """``window.zero`` (window 0) and ``reattach.no-window`` (window -1): a session without a resend cache was
    reattached (a broker keeps a connection's sessions for a reattach only when their window is above 0; Artemis
    answers REATTACH_SESSION of a window -1 session ``reattached=false`` and closes it)."""
    for conn in log.conns:
        for r in log.frames(conn, "s2c"):
            if isinstance(r.packet, ReattachSessionResponseMessage) and r.packet.reattached:
                if window < 0:
                    return (f"reattach.no-window: a session with confirmation window -1 was reattached on connection "
                            f"{conn} (window -1 disables the resend cache: the client must recreate it)")
                return (f"window.zero: a session with confirmation window 0 was reattached on connection {conn} "
                        "(Artemis 2.44.0 does this when the client comes back at once: its known deviation "
                        "window.mode.6)")
    return None


def judge_wire(records: Iterable[WireRecord], *, window: int, refusals_counted: bool = False) -> WireJudgement:
    """Judge the confirmation-window rules on one run's wire log; ``window``: the client's confirmation window
    (both ends use it; -1: no window, so only that no session was reattached); ``refusals_counted``: the protocol
    is older than 130, whose brokers count a refused command."""
    wire = list(records)
    log = _Log(wire)
    if window < 0:  # nothing is confirmed: only whether a session was reattached is judged
        kept = _reattached_without_window(log, window)
        return WireJudgement(() if kept is None else (kept,))
    findings: list[str] = []
    notes: list[str] = []
    if window == 0 and (kept := _reattached_without_window(log, window)) is not None:
        if any((r.rule or "").startswith(HALF_OPEN) for r in wire):
            # the broker never saw the drop, so it still had the session: window 0 is not -1, and only a drop it
            # saw closes a window-0 session (Artemis and the reference broker alike reattach it then)
            notes.append(f"{kept}; not counted: after a half-open cut")
        else:
            findings.append(kept)
    for span in _broker_spans(log, notes, refusals_counted=refusals_counted):
        found = [_close_unflushed(log, span), _missing_flush(log, span)]
        if span.conn == 1:
            found.append(_late_confirmations(log, span, window))
        findings.extend(f for f in found if f is not None)
    ping = _ping_unflushed(log)
    if ping is not None:
        findings.append(ping)
    return WireJudgement(tuple(dict.fromkeys(findings)), tuple(notes))


def with_wire(judgement: Judgement, wire: WireJudgement) -> Judgement:
    """The history's judgement with the wire's findings and notes after its own."""
    findings = (*judgement.findings, *wire.findings)
    return dataclasses.replace(judgement, kind="finding" if findings else "clean", findings=findings,
                               notes=(*judgement.notes, *wire.notes))
