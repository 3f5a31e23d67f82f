"""The rows of a sequence diagram of one run: client, proxy and broker lanes, one arrow per frame, the proxy's
fault actions, the connections, the workload's operations and the anomaly, drawn from the run's evidence.

Sans-IO: :func:`diagram` turns the evidence records (the JSON objects of ``wire.jsonl``, ``attempts.jsonl``,
``ends.jsonl``, ``history.jsonl``, ``timeline.jsonl`` and ``findings.json``) into rows, and ``_svg.render_svg`` and
``_text.render_text`` turn the rows into a standalone SVG and plain text.  :func:`load_records` is the one
function that reads files.  Standard library only: fault exploration draws its runs with it, and the report
draws a case's wire log around its fault with the same functions (``reports`` may import this package).

What the rows say:

* a frame is an arrow, labelled with its type, channel and the facts worth showing (the message key, the
  correlation id, the command id a PACKETS_CONFIRMED confirms, what a REATTACH_SESSION(_RESP) says); an answer
  names what it answers (matched on channel and correlation id, or in order on the channel);
* the proxy's actions end or mark the arrow at the proxy lane: dropped, cut (the connection reset), delayed,
  duplicated; refused connects are arrows that end there; a new TCP connection is a line across the lanes, and
  its end another, marked at the lane of the side that ended it first (client, proxy or broker), with how (FIN,
  reset, error) and the proxy's reason (evidence without ``ends.jsonl`` draws no ends);
* the operations (and the faults installed before them) are notes on the client (proxy) lane, the history's
  completions notes on the client lane, the final drain (straight to the broker) a section of notes;
* the anomaly's key is named in the header, and every frame and note of that key is drawn in red;
* runs of flow-control frames and pings collapse into one row, and a long run keeps the rows around what
  matters, the rest elided as "… n more frames".
"""

from __future__ import annotations

import json
import re
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

__all__ = ["Diagram", "Row", "RowKind", "RunRecords", "diagram", "frame_facts", "load_records", "ms_label"]

RowKind = Literal["frame", "group", "note", "boundary", "refused", "end", "section", "elided", "anomaly"]
Lane = Literal["client", "proxy", "broker"]

#: Frames drawn grey: flow control, confirmations and pings (a run of them is one row).
CHATTER = frozenset({"PING", "PACKETS_CONFIRMED", "SESS_PRODUCER_REQUEST_CREDITS", "SESS_PRODUCER_CREDITS",
                     "SESS_FLOWTOKEN"})
#: Broker frames that answer a request.
_ANSWERS = frozenset({"NULL_RESPONSE", "EXCEPTION"})
#: Client frames answered without a correlation id, in order on their channel.
_ANSWERED = frozenset({"SESS_COMMIT", "SESS_ROLLBACK", "SESS_CLOSE", "SESS_CONSUMER_CLOSE", "SESS_QUEUEQUERY",
                       "SESS_BINDINGQUERY", "CREATE_QUEUE", "CREATE_QUEUE_V2", "DELETE_QUEUE", "CREATESESSION",
                       "CREATESESSION_V2", "REATTACH_SESSION"})
_ANOMALY_WORDS = {"lost": "LOST", "duplicated": "DUPLICATED", "unexpected": "UNEXPECTED", "unanswered": "UNANSWERED"}
_ANOMALY_WHY = {
    "lost": "its send was confirmed, and no one received it, not even the final drain",
    "duplicated": "delivered again after its acknowledgement was confirmed",
    "unexpected": "received, but never sent (or its send definitely failed)",
    "unanswered": "a call about it (its send or its acknowledgement) was never answered, though no session was "
                  "recreated",
}


@dataclass(frozen=True, slots=True)
class RunRecords:
    """One run's evidence, as the JSON objects the evidence files hold."""

    #: ``Example.to_dict()`` (or None: not known).
    example: Mapping[str, Any] | None = None
    wire: Sequence[Mapping[str, Any]] = ()
    attempts: Sequence[Mapping[str, Any]] = ()
    history: Sequence[Mapping[str, Any]] = ()
    timeline: Sequence[Mapping[str, Any]] = ()
    #: ``findings.json``: ``kind``, ``judgement`` (``findings``, ``anomalies``, ``notes``), ``reason``.
    findings: Mapping[str, Any] = field(default_factory=dict)
    #: What the run was: "minimal run", "confirmation run", ...
    title: str = "run"
    #: What drew it, the header's first words ("cck explore", "case reattach.cut.9").
    heading: str = "cck explore"
    #: How each connection ended (``ends.jsonl``; empty in evidence older than it: no ends drawn).
    ends: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True, slots=True)
class Row:
    """One row of the diagram."""

    kind: RowKind
    text: str
    t_ns: int | None = None
    #: A note's lane; for an end, the lane of the side that ended the connection.
    lane: Lane | None = None
    #: A frame's direction (``c2s``, ``s2c``; a group's may be ``both``).
    direction: str | None = None
    #: A frame's fate at the proxy: forwarded, dropped, delayed, duplicated, cut; how a connection ended: fin,
    #: reset, error.
    action: str = "forwarded"
    #: What the proxy did to it, in words (empty: forwarded as is).
    effect: str = ""
    #: The anomalies this row shows ("k2 LOST").
    marks: tuple[str, ...] = ()
    #: Flow control and pings: drawn grey.
    muted: bool = False
    #: The full record, for a tooltip.
    detail: str = ""
    #: Frames in a group or elided run.
    count: int = 1
    conn: int | None = None


@dataclass(frozen=True, slots=True)
class Diagram:
    """A run's rows and the header above them."""

    title: str
    outcome: str
    #: The example (the workload and schedule) in words; empty: the header leaves the line out.
    example: str
    findings: tuple[str, ...]
    notes: tuple[str, ...]
    legend: str
    rows: tuple[Row, ...]
    heading: str = "cck explore"


# ---------------------------------------------------------------------------------------------------- facts

_FACT_NAMES = ("correlation_id", "command_id", "consumer_id", "message_id", "delivery_count",
               "last_confirmed_command_id", "reattached", "requires_response", "session_channel_id", "producer_id",
               "code", "credits")
_FACT = {name: re.compile(rf"\b{name}=(-?\d+|True|False|None)") for name in _FACT_NAMES}
_KEY_PROPERTY = re.compile(r"Property\(key='key', type=<[^>]*>, value='([^']*)'\)")
_QUEUE = re.compile(r"\b(?:queue_name|address)='([^']*)'")
_TEXT = re.compile(r"\bmessage='([^']*)'")
_NAME = re.compile(r"^\w+\(name='([^']*)'")
_RULE = re.compile(r"^(\w+)\((.*)\)$")
#: A key ``<run>-<n>``: exploration's ``f087b80f-3``, a suite case's ``reattach.loss.5-3``.
_RUN_KEY = re.compile(r"^(.+)-(\d+)$")


def frame_facts(packet: str | None) -> dict[str, Any]:
    """What a frame's packet (the wire log's ``repr``) says that a diagram shows: ints, booleans, the message
    key, the queue and an exception's text."""
    facts: dict[str, Any] = {}
    if not packet:
        return facts
    for name, pattern in _FACT.items():
        found = pattern.search(packet)
        if found is not None and found.group(1) != "None":
            value = found.group(1)
            facts[name] = value == "True" if value in ("True", "False") else int(value)
    if (key := _KEY_PROPERTY.search(packet)) is not None:
        facts["key"] = key.group(1)
    if (queue := _QUEUE.search(packet)) is not None:
        facts["queue"] = queue.group(1)
    if (text := _TEXT.search(packet)) is not None:
        facts["text"] = text.group(1)
    if (session := _NAME.search(packet)) is not None:
        facts["name"] = session.group(1)
    return facts


def _short_queue(name: str) -> str:
    return name.rsplit(".", 1)[-1] if name.startswith("cck.explore.") else name


def _short_rule(rule: str | None) -> str:
    """``CutAfter(confirmable_commands=2, direction='c2s', channel=None, ...)`` as ``CutAfter(2, c2s)``."""
    if not rule:
        return ""
    rule = re.sub(r"frozenset\((\{[^}]*\})\)", r"\1", rule).replace("'", "")
    found = _RULE.match(rule)
    if found is None:
        return rule if len(rule) <= 60 else rule[:57] + "..."
    args = [a.strip() for a in re.split(r",\s*(?![^{(\[]*[})\]])", found.group(2)) if a.strip()]
    shown = [a.split("=", 1)[-1] for a in args if not a.endswith(("=None", "=()", "=frozenset()"))]
    return f"{found.group(1)}({', '.join(shown)})"


def _key_namer(keys: Iterable[str]) -> tuple[Callable[[str], str], str]:
    """Short names for the run's keys (``f087b80f-3`` as ``k3``) when they share one prefix, and the legend."""
    runs = {found.group(1) for key in keys if (found := _RUN_KEY.match(key)) is not None}
    if len(runs) != 1:
        return (lambda key: key), ""
    (run,) = runs

    def name(key: str) -> str:
        found = _RUN_KEY.match(key)
        return f"k{found.group(2)}" if found is not None and found.group(1) == run else key

    return name, f"kN is the message with key {run}-N"


def _anomalies(findings: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(kind, key, why) of the counted findings: the judgement's ``anomalies``; ``why`` is the anomaly's own when
    it says (a case's checker tells a duplicate after an acknowledgement from one without the redelivered flag),
    else what the kind means to exploration's oracle."""
    judgement = findings.get("judgement") or {}
    out: list[tuple[str, str, str]] = []
    for anomaly in judgement.get("anomalies") or ():
        if isinstance(anomaly, Mapping) and anomaly.get("kind") in _ANOMALY_WORDS and isinstance(anomaly.get("key"),
                                                                                                   str):
            why = anomaly.get("why")
            why = why if isinstance(why, str) else _ANOMALY_WHY[anomaly["kind"]]
            out.append((anomaly["kind"], anomaly["key"], why))
    return out


# ---------------------------------------------------------------------------------------------------- rows


#: A request an answer may answer: how the label names it, and its message key.
_Request = tuple[str, str | None]


@dataclass
class _Answers:
    """Which request a broker answer answers: by correlation id on the channel, else in order on the channel."""

    by_correlation: dict[tuple[int | None, int], _Request] = field(default_factory=dict)
    in_order: dict[int | None, deque[_Request]] = field(default_factory=dict)

    def request(self, channel: int | None, type_name: str, facts: Mapping[str, Any], what: _Request) -> None:
        correlation = facts.get("correlation_id")
        if isinstance(correlation, int) and correlation != -1:
            self.by_correlation[(channel, correlation)] = what
        elif facts.get("requires_response") is True or type_name in _ANSWERED:
            self.in_order.setdefault(channel, deque()).append(what)

    def answer(self, channel: int | None, facts: Mapping[str, Any]) -> _Request | None:
        correlation = facts.get("correlation_id")
        if isinstance(correlation, int) and (channel, correlation) in self.by_correlation:
            return self.by_correlation.pop((channel, correlation))
        pending = self.in_order.get(channel)
        if pending and correlation in (None, -1):
            return pending.popleft()
        return None


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _frame_label(type_name: str, channel: int | None, facts: Mapping[str, Any], key: str | None,
                 answers: str | None, time: int = 1) -> str:
    parts = [type_name]
    if channel:
        parts.append(f"ch{channel}")
    if key is not None:
        parts.append(key if time == 1 else f"{key} AGAIN ({_ordinal(time)} time)")
    if "queue" in facts and type_name in ("CREATE_PRODUCER", "SESS_CREATECONSUMER", "CREATE_QUEUE_V2"):
        parts.append(_short_queue(facts["queue"]))
    if type_name == "SESS_SEND" and facts.get("requires_response") is False:
        parts.append("(no answer asked)")
    if "correlation_id" in facts and facts["correlation_id"] != -1 and type_name != "EXCEPTION":
        parts.append(f"corr={facts['correlation_id']}")
    if "message_id" in facts and type_name != "SESS_SEND":
        parts.append(f"msg={facts['message_id']}")
    if "delivery_count" in facts:
        parts.append(f"delivery={facts['delivery_count']}")
    if "command_id" in facts:
        parts.append(f"cmd={facts['command_id']}")
    if "last_confirmed_command_id" in facts:
        parts.append(f"last_confirmed={facts['last_confirmed_command_id']}")
    if "reattached" in facts:
        parts.append("reattached" if facts["reattached"] else "NOT reattached")
    if "session_channel_id" in facts:
        parts.append(f"(session ch{facts['session_channel_id']})")
    if type_name == "EXCEPTION":
        parts.append(f"code={facts.get('code')} {facts.get('text', '')[:60]}".rstrip())
    if answers is not None:
        parts.append(f"(answers {answers})")
    return " ".join(parts)


def _effect(record: Mapping[str, Any]) -> str:
    action = record.get("action")
    rule = _short_rule(record.get("rule"))
    if action == "dropped":
        return f"dropped: {rule}" if rule else "dropped"
    if action == "cut":
        return f"CUT: the proxy resets connection {record.get('conn')}" + (f" ({rule})" if rule else "")
    if action == "delayed":
        held = (int(record.get("ts_ns") or 0) - int(record.get("seen_ns") or 0)) / 1e6
        return f"held {held:.0f} ms by {rule}" if rule else f"held {held:.0f} ms"
    if action == "duplicated":
        return f"written twice by {rule}" if rule else "written twice"
    return ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _frames(wire: Sequence[Mapping[str, Any]], name: Callable[[str], str],
            marked: Mapping[str, str]) -> list[tuple[int, Row]]:
    answers = _Answers()
    message_keys: dict[int, str] = {}
    #: A session's name (CREATESESSION) to its channel: what a REATTACH_SESSION names.
    sessions: dict[str, int] = {}
    #: How often a key's send reached the broker and its delivery the client (a second one says "AGAIN").
    times: Counter[tuple[str, str]] = Counter()
    out: list[tuple[int, Row]] = []
    for record in wire:
        type_name = str(record.get("type", "?"))
        channel = _int(record.get("channel"))
        direction = str(record.get("direction", "c2s"))
        action = str(record.get("action", "forwarded"))
        facts = frame_facts(record.get("packet"))
        key: str | None = facts.get("key")
        if key is not None and "message_id" in facts and type_name == "SESS_RECEIVE_MSG":
            message_keys[facts["message_id"]] = key
        if key is None and type_name in ("SESS_INDIVIDUAL_ACKNOWLEDGE", "SESS_ACKNOWLEDGE"):
            key = message_keys.get(facts.get("message_id", -1))
        if "name" in facts and "session_channel_id" in facts:
            sessions[facts["name"]] = facts["session_channel_id"]
        elif type_name == "REATTACH_SESSION" and facts.get("name") in sessions:
            facts["session_channel_id"] = sessions[facts["name"]]
        answered: str | None = None
        subject = key
        if direction == "c2s" and action in ("forwarded", "delayed", "duplicated"):  # it reached the broker
            what = {"SESS_SEND": "send", "SESS_INDIVIDUAL_ACKNOWLEDGE": "ack"}.get(type_name, type_name)
            if type_name in ("CREATESESSION_V2", "CREATESESSION", "REATTACH_SESSION") \
                    and "session_channel_id" in facts:
                verb = "reattach" if type_name == "REATTACH_SESSION" else "create"
                what = f"{verb} of session ch{facts['session_channel_id']}"
            answers.request(channel, type_name, facts, (what if key is None else f"{what} {name(key)}", key))
        elif direction == "s2c" and (type_name in _ANSWERS or "_RESP" in type_name):
            request = answers.answer(channel, facts)  # the broker answered, whether or not the client got it
            if request is not None:
                answered, subject = request
        marks = (f"{name(subject)} {marked[subject]}",) if subject is not None and subject in marked else ()
        time = 1
        if key is not None and type_name in ("SESS_SEND", "SESS_RECEIVE_MSG"):
            times[(type_name, key)] += 1
            time = times[(type_name, key)]
        label = _frame_label(type_name, channel, facts, None if key is None else name(key), answered, time)
        out.append((_int(record.get("ts_ns")) or 0, Row(
            "frame", label, _int(record.get("ts_ns")), direction=direction, action=action, effect=_effect(record),
            marks=marks, muted=type_name in CHATTER and not marks, detail=str(record.get("packet") or type_name),
            conn=_int(record.get("conn")))))
    return out


def _attempt_rows(attempts: Sequence[Mapping[str, Any]]) -> list[tuple[int, Row]]:
    out: list[tuple[int, Row]] = []
    for attempt in attempts:
        conn = _int(attempt.get("conn"))
        ts = _int(attempt.get("ts_ns")) or 0
        outcome = attempt.get("outcome")
        detail = json.dumps(dict(attempt), sort_keys=True)
        if outcome == "forwarded":
            text = f"TCP connection {conn}" + (" opened" if conn == 1 else " opened: the client reconnected")
            out.append((ts, Row("boundary", text, ts, detail=detail, conn=conn)))
        elif outcome == "refused":
            why = attempt.get("detail") or "RefuseConnections"
            out.append((ts, Row("refused", f"connect {conn} refused by the proxy ({why})", ts, direction="c2s",
                                action="refused", detail=detail, conn=conn)))
        else:
            out.append((ts, Row("refused", f"connect {conn}: {outcome}", ts, direction="c2s", action="refused",
                                detail=detail, conn=conn)))
    return out


_LANES: dict[str, Lane] = {"client": "client", "proxy": "proxy", "broker": "broker"}
_CUT_BY = re.compile(r"\bconnection cut by (\w+\(.*\))")


def _end_rows(ends: Sequence[Mapping[str, Any]], attempts: Sequence[Mapping[str, Any]]) -> list[tuple[int, Row]]:
    """Each connection's end at its time, at the lane of the side that ended it first; a refused connect's end is
    its refused row already."""
    refused = {attempt.get("conn") for attempt in attempts if attempt.get("outcome") == "refused"}
    out: list[tuple[int, Row]] = []
    for end in ends:
        conn = _int(end.get("conn"))
        if conn in refused:
            continue
        by, how, reason = str(end.get("by", "?")), str(end.get("how", "?")), end.get("reason")
        ended = {"fin": f"closed by the {by} (FIN)", "reset": f"reset by the {by}", "error": f"failed at the {by}"}
        text = f"TCP connection {conn} " + ended.get(how, f"ended by the {by} ({how})")
        if reason:
            text += ": " + _CUT_BY.sub(lambda found: "cut by " + _short_rule(found.group(1)), str(reason))
        ts = _int(end.get("ts_ns")) or 0
        out.append((ts, Row("end", text, ts, lane=_LANES.get(by, "proxy"), action=how,
                            detail=json.dumps(dict(end), sort_keys=True), conn=conn)))
    return out


def _history_rows(history: Sequence[Mapping[str, Any]], name: Callable[[str], str],
                  marked: Mapping[str, str]) -> list[tuple[int, Row]]:
    out: list[tuple[int, Row]] = []
    skip: set[int] = set()
    receipts: Counter[str] = Counter()
    for index, op in enumerate(history):
        if index in skip or op.get("type") == "invoke":
            continue
        process, f, outcome, value = op.get("process"), op.get("f"), op.get("type"), op.get("value")
        key = name(value) if isinstance(value, str) else "?"
        who = "" if process == "plain" else f"{process} "
        if f == "send":
            text = {"ok": f"{who}send {key} confirmed", "fail": f"{who}send {key} failed",
                    "info": f"{who}send {key}: outcome unknown"}.get(str(outcome), f"{who}send {key} {outcome}")
        elif f == "receive":
            count = op.get("delivery_count")
            receipts[key] += 1
            again = f" AGAIN ({_ordinal(receipts[key])} receipt)" if receipts[key] > 1 else ""
            text = f"{who}received {key}{again}" + (f" (delivery {count})" if count is not None else "")
            if op.get("redelivered"):
                text += " redelivered"
            # the drain's receipt and its acknowledgement are one note (the workload's are apart: frames pass
            # between them)
            for ahead in range(index + 1, min(index + 3, len(history)) if process == "drain" else 0):
                later = history[ahead]
                if later.get("process") == process and later.get("f") == "ack" and later.get("value") == value:
                    skip.add(ahead)
                    if later.get("type") != "invoke":
                        text += ", ack confirmed" if later.get("type") == "ok" else f", ack {later.get('type')}"
                        break
        elif f == "ack":
            text = f"{who}ack {key} " + ("confirmed" if outcome == "ok" else f"outcome {outcome}")
        else:
            text = f"{who}{f} {key} {outcome}"
        marks = (f"{key} {marked[value]}",) if isinstance(value, str) and value in marked else ()
        ts = _int(op.get("time_ns")) or 0
        out.append((ts, Row("note", text, ts, lane="client", marks=marks, detail=json.dumps(dict(op), sort_keys=True),
                            muted=process == "drain" and not marks)))
    return out


def _timeline_rows(timeline: Sequence[Mapping[str, Any]]) -> list[tuple[int, Row]]:
    out: list[tuple[int, Row]] = []
    for event in timeline:
        ts = _int(event.get("ts_ns")) or 0
        kind, text = event.get("event"), str(event.get("text", ""))
        if kind == "operation":
            out.append((ts, Row("note", f"op {event.get('index')}: {text}", ts, lane="client", detail=text)))
        elif kind == "fault":
            out.append((ts, Row("note", f"rule installed: {text}", ts, lane="proxy", detail=text)))
        else:
            out.append((ts, Row("section", text, ts, detail=text)))
    return out


def _announce_connections(rows: list[Row]) -> list[Row]:
    """A boundary before the first frame of each connection no attempt record announced."""
    announced = {row.conn for row in rows if row.kind in ("boundary", "refused")}
    out: list[Row] = []
    for row in rows:
        if row.kind == "frame" and row.conn is not None and row.conn not in announced:
            announced.add(row.conn)
            text = f"TCP connection {row.conn}" + (" opened" if row.conn == 1 else " opened: the client reconnected")
            out.append(Row("boundary", text, row.t_ns, conn=row.conn))
        out.append(row)
    return out


def _collapse(rows: list[Row]) -> list[Row]:
    """Runs of two or more plain chatter frames (forwarded, unmarked) as one group row."""
    out: list[Row] = []
    run: list[Row] = []

    def flush() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            types = Counter(r.text.split(" ", 1)[0] for r in run)
            directions = {r.direction for r in run}
            text = ", ".join(f"{t} x{n}" for t, n in types.items())
            commands = [r.text.rsplit("cmd=", 1)[-1] for r in run if "cmd=" in r.text]
            if commands:
                text += f" (cmd={commands[0]}" + (f"..{commands[-1]})" if len(commands) > 1 else ")")
            out.append(Row("group", text, run[0].t_ns, direction=directions.pop() if len(directions) == 1 else "both",
                           muted=True, count=len(run), detail="\n".join(r.detail for r in run), conn=run[0].conn))
        run.clear()

    for row in rows:
        if row.kind == "frame" and row.muted and row.action == "forwarded" and not row.marks \
                and (not run or run[-1].conn == row.conn):
            run.append(row)
            continue
        flush()
        out.append(row)
    flush()
    return out


def _frames_in(rows: Iterable[Row]) -> int:
    return sum(r.count for r in rows if r.kind in ("frame", "group"))


def _elide(rows: list[Row], max_rows: int, context: int) -> list[Row]:
    """At most ``max_rows`` rows: plain frames far from anything that matters are elided first, then the middle."""
    if len(rows) <= max_rows:
        return rows

    def plain(row: Row) -> bool:
        return row.kind in ("frame", "group") and row.action == "forwarded" and not row.marks

    keep = [not plain(row) for row in rows]
    for index, row in enumerate(rows):
        if not plain(row):
            for near in range(max(0, index - context), min(len(rows), index + context + 1)):
                keep[near] = True
    out: list[Row] = []
    index = 0
    while index < len(rows):
        if keep[index]:
            out.append(rows[index])
            index += 1
            continue
        end = index
        while end < len(rows) and not keep[end]:
            end += 1
        skipped = rows[index:end]
        if len(skipped) == 1:
            out.append(skipped[0])
        else:
            frames = _frames_in(skipped)
            out.append(Row("elided", f"... {frames} more frames", skipped[0].t_ns, count=frames))
        index = end
    if len(out) <= max_rows:
        return out
    head = max_rows // 2
    tail = max_rows - head - 1
    middle = out[head:len(out) - tail]
    skipped_frames = _frames_in(middle) + sum(r.count for r in middle if r.kind == "elided")
    notes = sum(r.kind not in ("frame", "group", "elided") for r in middle)
    gap = Row("elided", f"... {skipped_frames} more frames and {notes} more notes", middle[0].t_ns,
              count=skipped_frames)
    return [*out[:head], gap, *out[len(out) - tail:]]


def diagram(records: RunRecords, *, max_rows: int = 400, context: int = 3,
            describe: Callable[[Mapping[str, Any] | None], str] | None = None) -> Diagram:
    """The rows of one run's sequence diagram (a pure function of its evidence records).  ``describe`` puts the
    example in words (exploration's knows its model; by default the example's JSON, nothing without one)."""
    anomalies = _anomalies(records.findings)
    keys = [str(op.get("value")) for op in records.history if isinstance(op.get("value"), str)]
    keys += [key for _, key, _ in anomalies]
    name, key_legend = _key_namer(keys)
    marked = {key: _ANOMALY_WORDS[kind] for kind, key, _ in reversed(anomalies)}
    timed: list[tuple[int, int, int, Row]] = []
    for rank, source in enumerate((_timeline_rows(records.timeline), _attempt_rows(records.attempts),
                                   _frames(records.wire, name, marked),
                                   _history_rows(records.history, name, marked),
                                   _end_rows(records.ends, records.attempts))):
        timed.extend((ts, rank, index, row) for index, (ts, row) in enumerate(source))
    timed.sort(key=lambda item: item[:3])
    t0 = timed[0][0] if timed else 0
    rows = [replace(row, t_ns=None if row.t_ns is None else row.t_ns - t0) for *_, row in timed]
    rows = _elide(_collapse(_announce_connections(rows)), max_rows, context)
    rows += [Row("anomaly", f"{name(key)} {_ANOMALY_WORDS[kind]}: {why}",
                 marks=(f"{name(key)} {_ANOMALY_WORDS[kind]}",)) for kind, key, why in anomalies]
    findings = records.findings
    judgement = findings.get("judgement") or {}
    outcome = str(findings.get("kind", "?"))
    lines = [_rename(str(line), keys, name) for line in judgement.get("findings") or ()]
    if not lines and findings.get("reason"):
        lines = [str(findings["reason"]).strip().splitlines()[-1]]
    return Diagram(records.title, outcome, (describe or _describe)(records.example), tuple(lines),
                   tuple(_rename(str(n), keys, name) for n in judgement.get("notes") or ()), key_legend, tuple(rows),
                   records.heading)


def ms_label(t_ns: int | None) -> str:
    """A row's time as the diagrams show it: milliseconds since the run's first record."""
    return "" if t_ns is None else f"+{t_ns / 1e6:,.0f}ms"


def _rename(text: str, keys: Iterable[str], name: Callable[[str], str]) -> str:
    for key in sorted(set(keys), key=len, reverse=True):
        text = text.replace(key, name(key))
    return text


def _describe(example: Mapping[str, Any] | None) -> str:
    return "" if example is None else json.dumps(example, sort_keys=True)


# ---------------------------------------------------------------------------------------------------- files


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_records(directory: Path, title: str | None = None) -> RunRecords:
    """The records of a run's evidence directory (``minimal/``, ``confirmation/``, ``replay/``); missing files
    are empty (``ends.jsonl`` is missing from evidence older than it)."""
    findings_file = directory / "findings.json"
    findings = json.loads(findings_file.read_text(encoding="utf-8")) if findings_file.is_file() else {}
    example_file = directory / "example.json"
    example = json.loads(example_file.read_text(encoding="utf-8")) if example_file.is_file() else None
    if isinstance(example, dict) and "example" in example:
        example = example["example"]
    return RunRecords(example, _read_jsonl(directory / "wire.jsonl"), _read_jsonl(directory / "attempts.jsonl"),
                      _read_jsonl(directory / "history.jsonl"), _read_jsonl(directory / "timeline.jsonl"), findings,
                      title or f"{directory.name} run", ends=_read_jsonl(directory / "ends.jsonl"))
