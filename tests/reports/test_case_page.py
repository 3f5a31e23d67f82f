"""A case page tells its story before its data, rendered without Spark from rows shaped as the pipeline collects
them: the window of the wire log around the fault, the adapter from a case's rows to the sequence diagram's records
(a cut, the reconnection, a duplicate the checker found), and the page's sections in order with the diagram's
lanes and its fault and anomaly marks; and a real case's wire log from the committed evidence.  Needs no pyspark:
``reports._story`` and ``reports._site`` import none."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from lxml import html

from cck.conformance.sequence import diagram
from cck.reports._site import CasePage, MatrixColumn, SiteData, case_page_path, render_site
from cck.reports._story import ClauseText, case_records, clause_texts, fault_window, history_findings

CASE = "reattach.cut.9"
KEY = f"{CASE}-{{}}"
SVG = "{http://www.w3.org/2000/svg}"
CUT_RULE = "CutAfter(confirmable_commands=1, direction='s2c', channel=None, packet_types=frozenset())"


def _send(n: int, correlation: int) -> str:
    return (f"SessionSendMessage(message=CoreMessage(body=b'', message_id=0, address='q', properties=TypedProperties("
            f"entries=(Property(key='key', type=<PropertyType.STRING: 10>, value='{KEY.format(n)}'),))), "
            f"requires_response=True, correlation_id={correlation})")


def _frame(ms: int, direction: str, type_name: str, packet: str | None = None, *, conn: int = 1,
           action: str = "forwarded", channel: int = 10, label: str | None = None,
           rule: str | None = None) -> dict[str, Any]:
    """A wire row as the evidence holds it (``kind`` ... ``extra``), at ``ms`` on the run's clock."""
    return {"kind": "wire", "schema_version": 1, "run_id": "r1", "case_id": CASE, "label": label,
            "ts_ns": ms * 1_000_000, "seen_ns": ms * 1_000_000, "conn": conn, "direction": direction, "seq": ms,
            "channel": channel, "type": type_name, "size": 40, "confirmable": True, "action": action, "rule": rule,
            "error": None, "packet": packet or f"{type_name}()", "extra": None}


def _op(ms: int, index: int, type_: str, f: str, n: int, process: str = "producer") -> dict[str, Any]:
    return {"index": index, "label": None, "process": process, "type": type_, "f": f, "value": KEY.format(n),
            "time_ns": ms * 1_000_000, "producer": None, "seq": None, "redelivered": None, "delivery_count": None,
            "node": None}


#: Two sends; the broker's answer to the second is cut, the client reconnects, reattaches, replays the send, and
#: the broker takes the replay as a new send: the drain receives k1 twice.
WIRE = [
    _frame(1, "c2s", "SESS_SEND", _send(0, 1)),
    _frame(2, "s2c", "NULL_RESPONSE", "NullResponseMessage(correlation_id=1)"),
    _frame(3, "c2s", "SESS_SEND", _send(1, 2)),
    _frame(4, "s2c", "NULL_RESPONSE", "NullResponseMessage(correlation_id=2)", action="cut", rule=CUT_RULE),
    _frame(60, "c2s", "REATTACH_SESSION", "ReattachSessionMessage(name='s1', last_confirmed_command_id=0)",
           conn=2, channel=1),
    _frame(61, "s2c", "REATTACH_SESSION_RESP",
           "ReattachSessionResponseMessage(last_confirmed_command_id=0, reattached=True)", conn=2, channel=1),
    _frame(62, "c2s", "SESS_SEND", _send(1, 2), conn=2),
    _frame(63, "s2c", "NULL_RESPONSE", "NullResponseMessage(correlation_id=2)", conn=2),
]
ATTEMPTS = [{"label": None, "ts_ns": 0, "conn": 1, "outcome": "forwarded", "peer": "p", "detail": None},
            {"label": None, "ts_ns": 59_000_000, "conn": 2, "outcome": "forwarded", "peer": "p", "detail": None}]
HISTORY = [_op(0, 0, "invoke", "send", 0), _op(2, 1, "ok", "send", 0), _op(3, 2, "invoke", "send", 1),
           _op(64, 3, "ok", "send", 1), _op(80, 4, "ok", "receive", 1, "drain"),
           _op(81, 5, "ok", "receive", 1, "drain")]
#: As Parquet gives it: the checker's result is JSON text.
RESULT = ('{"ok": false, "lost": {"count": 0, "examples": []}, "duplicated": {"count": 1, "truncated": false, '
          f'"examples": [{{"key": "{KEY.format(1)}", "process": "drain", "time_ns": 81000000, '
          '"reason": "not_redelivered"}]}, "unexpected": {"count": 0, "examples": []}}')
HISTORY_RESULTS = [{"label": None, "ok": False, "explanation": "1 duplicated: reattach.cut.9-1 received twice",
                    "result": RESULT}]
TIMING = [{"name": "reconnect", "run": 0, "ok": False, "flaky": False, "explanation": "attempt 1 late",
           "index": index, "status": status, "expected_ms": expected, "observed_ms": observed,
           "deviation_ms": observed - expected, "allowed_ms": 20.0}
          for index, status, expected, observed in ((0, "ok", 0.0, 2.0), (1, "late", 50.0, 90.0))]
KNOWN = "Artemis stores a replayed durable send twice when the cut lands while its journal write is pending"
SUMMARY = {"subject": "broker", "target": "artemis", "target_version": "2.44.0", "client": None, "case_id": CASE,
           "clause_id": "reattach.last-received", "group": "reattach", "latest_verdict": "FAIL",
           "latest_run_id": "r1", "latest_reason": "1 duplicated: the broker stored the replayed send again",
           "latest_kit_error_type": None, "latest_kit_error_where": None, "latest_known_deviation": KNOWN,
           "modal_verdict": "FAIL", "runs": 1, "pass": 0, "unsupported": 0, "pass_lenient": 0, "indeterminate": 0,
           "kit_error": 0, "fail": 1, "other": 0, "flake_rate": 0.0, "first_seen": "t0", "last_seen": "t0"}
RECORD = {"case_id": CASE, "clause_id": "reattach.last-received", "description": "a cut after the first answer",
          "expectation": "each send stored once", "verdict": "FAIL"}


def test_the_window_is_around_the_first_fault_of_one_proxy() -> None:
    wire = [_frame(ms, "c2s", "PING") for ms in range(50)]
    wire += [_frame(50, "c2s", "SESS_SEND", action="dropped"), _frame(51, "c2s", "SESS_SEND", action="cut")]
    wire += [_frame(ms, "c2s", "PING") for ms in range(52, 200)]
    wire += [_frame(ms, "c2s", "PING", label="backup", action="cut") for ms in (55, 300)]  # another proxy
    window = fault_window(list(reversed(wire)), before=5, after=10)  # the rows' order is not trusted
    assert window is not None
    assert (window.label, window.anchor, window.anchor_index) == (None, "dropped", 50)
    assert (window.start, window.end, window.total) == (45, 61, 200)
    assert (window.from_ns, window.to_ns) == (45_000_000, 60_000_000)
    assert window.covers(50_000_000)
    assert not window.covers(61_000_000)
    assert not window.covers(None)


def test_without_a_fault_the_window_is_around_the_anomaly_else_the_start() -> None:
    wire = [_frame(ms, "c2s", "PING") for ms in range(100)] + [_frame(100, "c2s", "SESS_SEND", _send(7, 1))]
    wire += [_frame(ms, "c2s", "PING") for ms in range(101, 110)]
    around = fault_window(wire, frozenset({KEY.format(7)}), before=3, after=3)
    assert around is not None
    assert (around.anchor, around.anchor_index, around.start, around.end) == ("anomaly", 100, 97, 104)
    start = fault_window(wire, before=3, after=3)
    assert start is not None
    assert (start.anchor, start.anchor_index, start.start, start.end, start.from_ns) == ("start", None, 0, 7, None)
    assert fault_window([]) is None


def test_a_cases_rows_become_the_diagrams_records_a_cut_and_a_reconnection() -> None:
    drawn = case_records(CASE, wire=WIRE, attempts=ATTEMPTS, history=list(reversed(HISTORY)),
                         history_results=HISTORY_RESULTS, verdict="FAIL", reason="stored twice")
    assert drawn is not None
    records, window = drawn
    assert (window.anchor, window.anchor_index, window.start, window.end) == ("cut", 3, 0, len(WIRE))
    assert records.heading == f"case {CASE}"
    assert [h["index"] for h in records.history] == [0, 1, 2, 3, 4, 5]  # in time order
    assert records.findings["judgement"]["anomalies"] == [
        {"kind": "duplicated", "key": KEY.format(1),
         "why": "delivered again, neither flagged redelivered nor with a higher delivery count"}]
    rows = diagram(records).rows
    texts = [row.text for row in rows]
    assert "TCP connection 2 opened: the client reconnected" in texts
    cut = next(row for row in rows if row.action == "cut")
    assert cut.effect.startswith("CUT: the proxy resets connection 1")
    assert "NULL_RESPONSE" in cut.text
    assert "(answers send k1)" in cut.text
    assert any(row.kind == "frame" and "REATTACH_SESSION " in row.text for row in rows)
    assert any("k1 AGAIN" in row.text and row.marks == ("k1 DUPLICATED",) for row in rows)
    assert rows[-1].kind == "anomaly"
    assert rows[-1].text.startswith("k1 DUPLICATED")


def test_the_connections_ends_of_the_drawn_proxy_are_drawn_where_they_happened() -> None:
    def end(ms: int, conn: int, by: str, how: str, label: str | None = None) -> dict[str, Any]:
        return {"kind": "end", "label": label, "ts_ns": ms * 1_000_000, "conn": conn, "by": by, "how": how,
                "reason": CUT_RULE if by == "proxy" else None}

    # the window holds the whole log, so it is open at its end; another proxy's (label) end is not drawn
    ends = [end(4, 1, "proxy", "reset"), end(90, 2, "client", "fin"), end(5, 1, "broker", "fin", label="other")]
    drawn = case_records(CASE, wire=WIRE, attempts=ATTEMPTS, ends=ends, history=HISTORY,
                         history_results=HISTORY_RESULTS, verdict="FAIL", reason="stored twice")
    assert drawn is not None
    records, _ = drawn
    assert [(e["conn"], e["by"]) for e in records.ends] == [(1, "proxy"), (2, "client")]
    texts = [row.text for row in diagram(records).rows]
    assert any(text.startswith("TCP connection 1 reset by the proxy") for text in texts)
    assert "TCP connection 2 closed by the client (FIN)" in texts
    assert texts.index("TCP connection 2 closed by the client (FIN)") > texts.index(
        next(t for t in texts if t.startswith("TCP connection 1 reset by the proxy")))


def test_frames_outside_the_window_are_named_and_notes_outside_it_left_out() -> None:
    wire = [_frame(ms, "c2s", "PING") for ms in range(100)]
    wire[50] = _frame(50, "c2s", "SESS_SEND", _send(1, 1), action="cut")
    history = [_op(10, 0, "invoke", "send", 0), _op(50, 1, "invoke", "send", 1), _op(90, 2, "ok", "send", 2)]
    drawn = case_records(CASE, wire=wire, history=history, wire_file="x.wire.jsonl")
    assert drawn is not None
    records, window = drawn
    assert (window.start, window.end) == (30, 100)  # 20 before, up to 60 after: the log ends first
    assert [h["index"] for h in records.history] == [1, 2]
    assert [t["text"] for t in records.timeline] == ["... 30 earlier frames not drawn (the whole log: x.wire.jsonl)"]
    assert [row.text for row in diagram(records).rows[:3]] == [
        "... 30 earlier frames not drawn (the whole log: x.wire.jsonl)", "TCP connection 1 opened", "PING x20"]
    opened = {"label": None, "ts_ns": 0, "conn": 1, "outcome": "forwarded", "peer": "p", "detail": None}
    drawn = case_records(CASE, wire=wire, attempts=[opened], wire_file="x.wire.jsonl")
    assert drawn is not None
    assert [row.text for row in diagram(drawn[0]).rows[:2]] == [  # where connection 1 was opened, before the window
        "TCP connection 1 opened", "... 30 earlier frames not drawn (the whole log: x.wire.jsonl)"]
    assert case_records(CASE, wire=[]) is None


def test_history_findings_list_failed_histories_first_with_their_keys() -> None:
    passed = {"label": "other", "ok": True, "explanation": "all well", "result": {"duplicated": {"count": 0}}}
    findings = history_findings([passed, *HISTORY_RESULTS])
    assert [(f.label, f.ok) for f in findings] == [(None, False), ("other", True)]
    assert findings[0].counts == (("duplicated", 1, (KEY.format(1),)),)
    assert findings[1].counts == ()


def test_the_clause_texts_are_the_kits_table() -> None:
    clauses = clause_texts()
    clause = clauses["reattach.last-received"]
    assert clause.level == "MUST"
    assert "last command it successfully received" in " ".join(clause.text.split())
    assert clause.implementation


def case_page(**fields: Any) -> CasePage:
    """The failing case's page data (``fields`` replace its own); test_browser.py opens it in Chromium."""
    evidence = {"timing": TIMING, "history_result": HISTORY_RESULTS, "attempt": ATTEMPTS, "note": [],
                "wire": WIRE[:2]}
    values: dict[str, Any] = {
        "column": MatrixColumn.of(SUMMARY), "case_id": CASE, "summary": SUMMARY, "runs": [], "record": RECORD,
        "evidence": evidence, "wire_log": WIRE, "wire_shown": 2, "history": HISTORY,
        "clause": ClauseText("reattach.last-received", "MUST", "spec 000, paragraph 4",
                             "the server informs the client of the last command it received")}
    return CasePage(**{**values, **fields})


@pytest.fixture(scope="module")
def page_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("case-page")
    page = case_page()
    render_site(SiteData(evidence="ev", runs=[], matrix=[SUMMARY], case_pages=[page]), out)
    return out / case_page_path(page.column, CASE)


def _text(node: Any) -> str:
    return " ".join(" ".join(node.itertext()).split())


def test_the_case_page_tells_the_story_before_the_data(page_path: Path) -> None:
    source = page_path.read_text(encoding="utf-8")
    order = ["clause", "what-happened", "verdict", "sequence", "history-findings", "case-timing", "raw"]
    positions = [source.index(f'<section id="{name}">') for name in order]
    assert positions == sorted(positions)
    dom = html.fromstring(source)
    assert "last command it received" in _text(dom.get_element_by_id("clause-text"))
    assert _text(dom.get_element_by_id("case-description")) == RECORD["description"]
    assert _text(dom.get_element_by_id("case-expectation")) == RECORD["expectation"]
    assert _text(dom.get_element_by_id("case-observed")) == SUMMARY["latest_reason"]
    verdict = dom.get_element_by_id("case-verdict")
    assert (_text(verdict), verdict.get("class")) == ("FAIL", "verdict fail")
    assert _text(dom.get_element_by_id("case-why")) == f"a known deviation of this broker: {KNOWN}"
    window = _text(dom.get_element_by_id("sequence-window"))
    assert window.startswith("Frames 1 to 8 of 8 the fault proxy logged, around the first frame it cut (frame 4)")
    findings = _text(dom.get_element_by_id("history-findings-table"))
    assert "not ok 1 duplicated (reattach.cut.9-1)" in findings
    assert dom.xpath('//section[@id="case-timing"]//*[local-name()="polygon"][@class="band"]')
    assert dom.xpath('//section[@id="raw"]//table[@id="evidence-wire"]')


def test_the_case_pages_diagram_has_the_three_lanes_the_cut_and_the_anomaly(page_path: Path) -> None:
    source = page_path.read_text(encoding="utf-8")
    svg = ET.fromstring(source[source.index('<svg xmlns="http://www.w3.org/2000/svg" id="sequence-diagram"'):
                               source.index("</svg>", source.index('id="sequence-diagram"')) + len("</svg>")])
    texts = ["".join(t.itertext()) for t in svg.iter(f"{SVG}text")]
    assert {"client (the kit's)", "fault proxy", "broker"} <= set(texts)
    assert texts[0] == "case reattach.cut.9: artemis 2.44.0, run r1, FAIL"
    assert any(t.startswith("CUT: the proxy resets connection 1") for t in texts)
    assert [r for r in svg.iter(f"{SVG}rect") if r.get("fill") == "#c62828"]  # the cut's red bar at the proxy
    assert "!! k1 DUPLICATED" in texts
    assert "!! k1 DUPLICATED: delivered again, neither flagged redelivered nor with a higher delivery count" in texts
    style = "".join(svg.find(f"{SVG}style").itertext())  # type: ignore[union-attr]
    assert all(rule.startswith("#sequence-diagram ") for rule in style.replace("}", "}\n").splitlines())
    assert svg.find(f".//{SVG}script") is None


def test_a_case_without_a_wire_log_says_so_and_keeps_its_story(tmp_path: Path) -> None:
    page = case_page(wire_log=[], history=[], evidence={}, clause=None, record=None,
                 summary={**SUMMARY, "latest_verdict": "PASS", "latest_reason": None, "latest_known_deviation": None})
    render_site(SiteData(evidence="ev", runs=[], matrix=[page.summary], case_pages=[page]), tmp_path)
    dom = html.fromstring((tmp_path / page.path).read_text(encoding="utf-8"))
    assert _text(dom.get_element_by_id("sequence-window")) == "No wire log: the case used no fault proxy."
    assert _text(dom.get_element_by_id("case-why")) == "the subject did what the clause says"
    assert _text(dom.get_element_by_id("case-observed")) == "nothing beyond the verdict (the checks passed)"
    assert "not in the clause table" in _text(dom.get_element_by_id("clause"))
    assert not dom.xpath('//section[@id="history-findings"]')
    assert not dom.xpath("//svg")


def test_a_real_cases_wire_log_from_the_committed_evidence_draws_around_its_drops() -> None:
    """reattach.loss.5 of a committed reference run (tests/reports/data/evidence): the proxy drops the broker's
    answer to the fourth send and its credits, the client reconnects and reattaches, the answer is replayed."""
    run = Path(__file__).resolve().parent / "data/evidence/20261122T011546Z-reference-edea57"

    def rows(name: str) -> list[dict[str, Any]]:
        lines = (run / name).read_text(encoding="utf-8").splitlines()
        return [row for row in map(json.loads, lines) if row["case_id"] == "reattach.loss.5"]

    drawn = case_records("reattach.loss.5", wire=rows("wire.jsonl"), attempts=rows("attempts.jsonl"),
                         history=rows("history.jsonl"), history_results=rows("history_results.jsonl"),
                         verdict="PASS")
    assert drawn is not None
    records, window = drawn
    assert (window.anchor, window.anchor_index, window.start, window.end, window.total) == ("dropped", 25, 5, 38, 38)
    rows_drawn = diagram(records).rows
    dropped = [row.text for row in rows_drawn if row.action == "dropped"]
    assert dropped == ["SESS_PRODUCER_CREDITS ch10", "NULL_RESPONSE ch10 corr=4 (answers send k3)"]
    texts = [row.text for row in rows_drawn]
    assert texts.index("NULL_RESPONSE ch10 corr=4 (answers send k3)") \
        < texts.index("TCP connection 2 opened: the client reconnected") \
        < texts.index("REATTACH_SESSION ch1 last_confirmed=7") < texts.index("producer-1 send k3 confirmed")
    assert not any(row.marks for row in rows_drawn)  # the checker passed the history: no anomaly
