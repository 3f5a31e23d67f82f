"""A case page's story, told before its data: the clause, what the case did and expected, what was observed, the
verdict and why; the wire log around the fault as a sequence diagram; the history findings and the timing plots.

No pyspark and no jinja2 here: everything is a pure function of the rows the pipeline collected for the case (the
evidence schema's records as dicts), so the page renders in tests from hand-made rows.  The diagram is drawn by
:mod:`conformance.sequence`, the renderer fault exploration draws its runs with (``reports`` may import it:
standard library only, like the evidence schema and the clause table).

A case's wire log can hold thousands of frames; the diagram is of a window around the fault: the first frame the
proxy cut, dropped, delayed or duplicated (else the first frame naming a key the history checker found an anomaly
of; else the log's start), :data:`FRAMES_BEFORE` frames before it and :data:`FRAMES_AFTER` after, of the proxy
that frame went through.  The history's operations and the proxy's connection attempts in that span of time are
drawn with the frames.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from typing import Any

from cck.conformance.clauses import CLAUSE_DIR, ClauseError, load_clauses
from cck.conformance.sequence import RunRecords, diagram, render_svg

from ._errors import ReportError
from ._svg import Attempt, schedule_plot

__all__ = ["FAULT_ACTIONS", "FRAMES_AFTER", "FRAMES_BEFORE", "CaseStory", "ClauseText", "FaultWindow",
           "HistoryFinding", "TimingFigure", "case_records", "case_story", "clause_texts", "diagram_window",
           "fault_window",
           "history_findings", "timing_figures"]

#: What the proxy does to a frame that makes it the fault (``forwarded`` is not one).
FAULT_ACTIONS = ("cut", "dropped", "delayed", "duplicated")
#: Frames drawn before the fault and after it (the diagram collapses chatter and elides far-away frames itself).
FRAMES_BEFORE = 20
FRAMES_AFTER = 60
#: Rows a case's diagram keeps at most (exploration's keep 400: a case page has more to show below it).
DIAGRAM_ROWS = 200
#: Anomalies marked in a diagram at most (each also adds a closing row).
ANOMALIES_SHOWN = 10
#: The history checker's result fields that are anomalies, named as the diagram names them.
_ANOMALY_KINDS = ("lost", "duplicated", "unexpected")
#: The history checker's reasons for a finding, in words (the diagram's closing row); others: the kind's meaning.
_ANOMALY_WHY = {
    "after_ack": "delivered again after its acknowledgement was confirmed",
    "not_redelivered": "delivered again, neither flagged redelivered nor with a higher delivery count",
    "never_sent": "received, but never sent",
    "send_failed": "received, but its send definitely failed",
}
#: The history checker's result fields counted on the page, in this order.
FINDING_KINDS = ("lost", "duplicated", "unexpected", "order_violations", "redelivery_mismatches", "ack_lost")
#: The id of the diagram's SVG in the page (its style rules are scoped to it).
DIAGRAM_ID = "sequence-diagram"

#: Why a verdict, in words, when the case record gives no more (known deviation and kit error are said apart).
VERDICT_WHY = {
    "PASS": "the subject did what the clause says",
    "PASS_LENIENT": "the subject missed a SHOULD, a recommendation of the clause, not a requirement",
    "UNSUPPORTED": "the case cannot run against this subject",
    "INDETERMINATE": "the kit could not tell",
    "KIT_ERROR": "the kit itself erred: the case says nothing about the subject",
    "FAIL": "the subject did what the clause forbids, or did not do what it requires",
}


@dataclass(frozen=True)
class ClauseText:
    """A clause of the clause table as the case page quotes it."""

    id: str
    level: str
    source: str
    text: str
    #: What Artemis does where it disagrees with the text (the table's ``implementation``).
    implementation: str | None = None


def clause_texts(directory: Traversable = CLAUSE_DIR) -> dict[str, ClauseText]:
    """The clause table (the kit's loader, :mod:`conformance.clauses`) by clause ID."""
    try:
        table = load_clauses(directory)
    except ClauseError as exc:
        raise ReportError(str(exc)) from None
    return {c.id: ClauseText(c.id, c.level, c.source, c.text, c.implementation) for c in table.values()}


@dataclass(frozen=True)
class FaultWindow:
    """The frames a case's diagram draws: ``[start, end)`` of the ``total`` frames of one proxy (``label``)."""

    label: str | None
    start: int
    end: int
    total: int
    #: What the window is around: ``cut`` (...), ``anomaly`` or ``start``.
    anchor: str
    #: The anchor frame's position among the proxy's frames (None: the log's start).
    anchor_index: int | None
    #: The time span of the drawn frames (None: open, the window reaches that end of the log).
    from_ns: int | None
    to_ns: int | None

    def covers(self, t_ns: Any) -> bool:
        """Whether a record at ``t_ns`` falls in the window's span of time."""
        if not isinstance(t_ns, int):
            return False
        return (self.from_ns is None or t_ns >= self.from_ns) and (self.to_ns is None or t_ns <= self.to_ns)


def _ordered(wire: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(wire, key=lambda r: (r.get("ts_ns") or 0, r.get("seq") or 0))


def _mentions(row: Mapping[str, Any], keys: frozenset[str]) -> bool:
    packet = row.get("packet")
    return isinstance(packet, str) and any(f"'{key}'" in packet for key in keys)


def fault_window(wire: Sequence[Mapping[str, Any]], anomaly_keys: frozenset[str] = frozenset(), *,
                 before: int = FRAMES_BEFORE, after: int = FRAMES_AFTER) -> FaultWindow | None:
    """The window of a case's wire rows around its fault (None without wire rows).  The frames of one proxy are
    drawn (a case's proxies each number their connections from 1): the one the anchor frame went through."""
    ordered = _ordered(wire)
    if not ordered:
        return None
    anchor = next((r for r in ordered if r.get("action") in FAULT_ACTIONS), None)
    kind = "start" if anchor is None else str(anchor["action"])
    if anchor is None and anomaly_keys:
        anchor = next((r for r in ordered if _mentions(r, anomaly_keys)), None)
        kind = "start" if anchor is None else "anomaly"
    label = (ordered[0] if anchor is None else anchor).get("label")
    frames = [r for r in ordered if r.get("label") == label]
    if anchor is None:
        at, start, end = None, 0, min(len(frames), before + after + 1)
    else:
        at = next(i for i, r in enumerate(frames) if r is anchor)
        start, end = max(0, at - before), min(len(frames), at + after + 1)
    return FaultWindow(label, start, end, len(frames), kind, at,
                       None if start == 0 else frames[start].get("ts_ns"),
                       None if end == len(frames) else frames[end - 1].get("ts_ns"))


def _result(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """A history result row's checker result (JSON text in Parquet, a dict in the evidence file)."""
    value = row.get("result")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, Mapping) else {}


def _anomalies(history_results: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """(kind, key) of the anomalies of the histories the checker did not pass, as exploration's findings name
    them (a passed history's findings were allowed: duplicates under a fault, say)."""
    out: list[dict[str, str]] = []
    for row in history_results:
        if row.get("ok") is not False:
            continue
        result = _result(row)
        for kind in _ANOMALY_KINDS:
            found = result.get(kind)
            for example in (found.get("examples") or ()) if isinstance(found, Mapping) else ():
                if isinstance(example, Mapping) and isinstance(example.get("key"), str):
                    why = _ANOMALY_WHY.get(str(example.get("reason")))
                    out.append({"kind": kind, "key": example["key"], **({"why": why} if why else {})})
    return out[:ANOMALIES_SHOWN]


def diagram_window(wire: Sequence[Mapping[str, Any]],
                   history_results: Sequence[Mapping[str, Any]] = ()) -> FaultWindow | None:
    """The window a case's diagram draws (:func:`fault_window`, the anomalies its failed histories name): the
    pipeline reads the case's history rows of that span of time only."""
    return fault_window(wire, frozenset(a["key"] for a in _anomalies(history_results)))


def case_records(case_id: str, *, wire: Sequence[Mapping[str, Any]], attempts: Sequence[Mapping[str, Any]] = (),
                 ends: Sequence[Mapping[str, Any]] = (),
                 history: Sequence[Mapping[str, Any]] = (), history_results: Sequence[Mapping[str, Any]] = (),
                 verdict: str | None = None, reason: str | None = None, title: str = "latest run",
                 wire_file: str | None = None) -> tuple[RunRecords, FaultWindow] | None:
    """A case's evidence rows as the records a sequence diagram is drawn from, and the window drawn (None
    without wire rows).  Frames outside the window are named by a section row at each end."""
    anomalies = _anomalies(history_results)
    window = diagram_window(wire, history_results)
    if window is None:
        return None
    frames = [r for r in _ordered(wire) if r.get("label") == window.label]
    shown = frames[window.start:window.end]
    whole = f" (the whole log: {wire_file})" if wire_file else ""
    timeline: list[dict[str, Any]] = []
    if window.start:
        timeline.append({"event": "section", "ts_ns": shown[0].get("ts_ns"),
                         "text": f"... {window.start} earlier frames not drawn{whole}"})
    if window.end < window.total:
        timeline.append({"event": "section", "ts_ns": (shown[-1].get("ts_ns") or 0) + 1,
                         "text": f"... {window.total - window.end} later frames not drawn{whole}"})
    findings = {"kind": verdict or "?", "reason": reason,
                "judgement": {"findings": [str(r.get("explanation")) for r in history_results
                                           if r.get("ok") is False and r.get("explanation")],
                              "anomalies": anomalies, "notes": []}}
    records = RunRecords(
        example=None, wire=shown, timeline=timeline, findings=findings, title=title, heading=f"case {case_id}",
        # a connection whose frames are drawn is opened where it was, though that is before the window
        attempts=[a for a in attempts if a.get("label") == window.label
                  and (window.covers(a.get("ts_ns")) or a.get("conn") in {f.get("conn") for f in shown})],
        # a connection's end is drawn where it happened, when that is inside the window
        ends=[e for e in ends if e.get("label") == window.label and window.covers(e.get("ts_ns"))],
        history=sorted((h for h in history if window.covers(h.get("time_ns"))),
                       key=lambda h: (h.get("time_ns") or 0, h.get("index") or 0)))
    return records, window


@dataclass(frozen=True)
class HistoryFinding:
    """One history's result: the checker's verdict, its explanation and its nonzero counts with example keys."""

    label: str | None
    ok: bool | None
    explanation: str
    #: (finding, count, the first example keys).
    counts: tuple[tuple[str, int, tuple[str, ...]], ...]


def history_findings(history_results: Sequence[Mapping[str, Any]], *, keys_shown: int = 5) -> list[HistoryFinding]:
    """The history results of a case as the page lists them, failed histories first."""
    out = []
    for row in history_results:
        result = _result(row)
        counts = []
        for name in FINDING_KINDS:
            found = result.get(name)
            if isinstance(found, Mapping) and isinstance(found.get("count"), int) and found["count"]:
                keys = tuple(str(e.get("key")) for e in found.get("examples") or () if isinstance(e, Mapping))
                counts.append((name.replace("_", " "), int(found["count"]), keys[:keys_shown]))
        explanation = row.get("explanation") or result.get("explanation") or ""
        out.append(HistoryFinding(row.get("label"), row.get("ok"), str(explanation), tuple(counts)))
    return sorted(out, key=lambda f: f.ok is not False)


@dataclass(frozen=True)
class TimingFigure:
    """One judged schedule of the case: its plot (observed against expected, tolerance band) and verdict."""

    name: str
    ok: bool | None
    explanation: str
    svg: str


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def timing_figures(timing: Sequence[Mapping[str, Any]]) -> list[TimingFigure]:
    """A plot per schedule the case judged (its deciding check, ``run`` 0; the re-verifications are in the rows)."""
    schedules: dict[str, list[Mapping[str, Any]]] = {}
    for row in timing:
        if (row.get("run") or 0) == 0:
            schedules.setdefault(str(row.get("name")), []).append(row)
    out = []
    for name, rows in schedules.items():
        points = []
        for row in rows:
            if not isinstance(row.get("index"), int):
                continue  # a schedule without samples: its row has no attempt
            deviation, allowed = _number(row.get("deviation_ms")), _number(row.get("allowed_ms"))
            outside = deviation is not None and allowed is not None and math.fabs(deviation) > allowed
            points.append(Attempt(row["index"], _number(row.get("expected_ms")), _number(row.get("observed_ms")),
                                  allowed, outside))
        first = rows[0]
        out.append(TimingFigure(name, first.get("ok"), str(first.get("explanation") or ""),
                                schedule_plot(points, title=name) if points else ""))
    return out


@dataclass(frozen=True)
class CaseStory:
    """What a case page says before its raw rows."""

    clause_id: str | None
    clause: ClauseText | None
    description: str | None
    expectation: str | None
    #: What was observed: the case's reason (None: nothing beyond the verdict).
    observed: str | None
    verdict: str | None
    #: Why that verdict: the known deviation's reason, the kit error, or what the verdict means.
    why: str
    known_deviation: str | None
    #: The sequence diagram (inline SVG) and the window it draws; None without wire rows.
    diagram_svg: str | None
    window: FaultWindow | None
    findings: tuple[HistoryFinding, ...]
    timing: tuple[TimingFigure, ...]


def _why(verdict: str | None, known_deviation: str | None, summary: Mapping[str, Any]) -> str:
    if known_deviation:
        return f"a known deviation of this {summary.get('subject') or 'broker'}: {known_deviation}"
    if verdict == "KIT_ERROR":
        where = f" ({summary.get('latest_kit_error_type') or '?'} at {summary.get('latest_kit_error_where') or '?'})"
        return VERDICT_WHY[verdict] + where
    return VERDICT_WHY.get(verdict or "", "a verdict the report does not know")


def case_story(case_id: str, *, summary: Mapping[str, Any], record: Mapping[str, Any] | None,
               clause: ClauseText | None, wire: Sequence[Mapping[str, Any]] = (),
               attempts: Sequence[Mapping[str, Any]] = (), ends: Sequence[Mapping[str, Any]] = (),
               history: Sequence[Mapping[str, Any]] = (),
               history_results: Sequence[Mapping[str, Any]] = (), timing: Sequence[Mapping[str, Any]] = (),
               title: str = "latest run", wire_file: str | None = None) -> CaseStory:
    """The story of one matrix cell: ``summary`` is its matrix row (the latest verdict, reason and known
    deviation), ``record`` the latest run's case record, the rest that run's evidence rows of the case."""
    record = record or {}
    verdict, reason = summary.get("latest_verdict"), summary.get("latest_reason")
    known = summary.get("latest_known_deviation")
    drawn = case_records(case_id, wire=wire, attempts=attempts, ends=ends, history=history,
                         history_results=history_results,
                         verdict=verdict, reason=reason, title=title, wire_file=wire_file)
    svg = None
    if drawn is not None:
        svg = render_svg(diagram(drawn[0], max_rows=DIAGRAM_ROWS), svg_id=DIAGRAM_ID)
    return CaseStory(
        clause_id=summary.get("clause_id") or record.get("clause_id"), clause=clause,
        description=record.get("description"), expectation=record.get("expectation"), observed=reason,
        verdict=verdict, why=_why(verdict, known, summary), known_deviation=known, diagram_svg=svg,
        window=None if drawn is None else drawn[1], findings=tuple(history_findings(history_results)),
        timing=tuple(timing_figures(timing)))
