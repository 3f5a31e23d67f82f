"""The sequence diagram of a run, drawn from tiny made-up evidence records: arrows and their facts, the proxy's
actions, connections, notes, the anomaly in red, collapsed chatter, elided long runs; the SVG is well-formed and
self-contained, and the text form has the lanes as columns."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

from cck.conformance.explore import (
    ClientConfig,
    DropFrames,
    Example,
    FaultSchedule,
    Row,
    RunRecords,
    Send,
    Workload,
    diagram,
    frame_facts,
    load_records,
    render_svg,
    render_text,
)

RUN = "0badcafe"
EXAMPLE = Example(Workload(ClientConfig(), (Send(0, 2),)), FaultSchedule((DropFrames("c2s", "SESS_SEND"),)))


def _send(key: str, correlation: int) -> str:
    return (f"SessionSendMessage(message=CoreMessage(body=b'{key}', message_id=0, address='cck.explore.{RUN}.q0', "
            f"properties=TypedProperties(entries=(Property(key='key', type=<PropertyType.STRING: 10>, value='{key}'), "
            f"Property(key='seq', type=<PropertyType.INT: 6>, value=0)))), requires_response=True, "
            f"correlation_id={correlation}, sender_id=0)")


def _receive(key: str, message_id: int, count: int = 1) -> str:
    return (f"SessionReceiveMessage(message=CoreMessage(body=b'{key}', message_id={message_id}, "
            f"properties=TypedProperties(entries=(Property(key='key', type=<PropertyType.STRING: 10>, "
            f"value='{key}'),))), consumer_id=0, delivery_count={count})")


def _frame(ts: int, direction: str, type_name: str, packet: str | None = None, *, action: str = "forwarded",
           conn: int = 1, channel: int | None = 10, rule: str | None = None) -> dict[str, Any]:
    return {"ts_ns": ts * 1_000_000, "seen_ns": ts * 1_000_000, "conn": conn, "direction": direction, "seq": 1,
            "channel": channel, "type": type_name, "size": 20, "confirmable": True, "action": action, "rule": rule,
            "error": None, "packet": packet or f"{type_name}()"}


def _op(ts: int, process: str, type_: str, f: str, key: str, **extra: Any) -> dict[str, Any]:
    return {"process": process, "type": type_, "f": f, "value": key, "time_ns": ts * 1_000_000, **extra}


def _lost(key: str) -> dict[str, Any]:
    return {"kind": "finding", "judgement": {"kind": "finding", "findings": [f"1 lost: confirmed, never received "
                                                                             f"({key})"],
                                             "notes": [], "anomalies": [{"kind": "lost", "key": key}]}}


def _rows(records: RunRecords, **options: Any) -> list[Row]:
    return list(diagram(records, **options).rows)


def test_an_answer_names_the_request_it_answers() -> None:
    k1 = f"{RUN}-1"
    rows = _rows(RunRecords(wire=[_frame(1, "c2s", "SESS_SEND", _send(k1, -2)),
                                  _frame(2, "s2c", "NULL_RESPONSE", "NullResponseMessage(correlation_id=-2)"),
                                  _frame(3, "s2c", "SESS_RECEIVE_MSG", _receive(k1, 7)),
                                  _frame(4, "c2s", "SESS_INDIVIDUAL_ACKNOWLEDGE",
                                         "SessionIndividualAcknowledgeMessage(consumer_id=0, message_id=7, "
                                         "requires_response=True)"),
                                  _frame(5, "s2c", "NULL_RESPONSE", "NullResponseMessage(correlation_id=-1)")],
                            history=[_op(1, "plain", "invoke", "send", k1)]))
    frames = [r.text for r in rows if r.kind == "frame"]
    assert frames == ["SESS_SEND ch10 k1 corr=-2", "NULL_RESPONSE ch10 corr=-2 (answers send k1)",
                      "SESS_RECEIVE_MSG ch10 k1 msg=7 delivery=1", "SESS_INDIVIDUAL_ACKNOWLEDGE ch10 k1 msg=7",
                      "NULL_RESPONSE ch10 (answers ack k1)"]
    assert rows[0].kind == "boundary"  # connection 1, though no attempt record announced it
    assert [r.t_ns for r in rows if r.kind == "frame"] == [0, 1_000_000, 2_000_000, 3_000_000, 4_000_000]


def test_the_proxy_actions_are_marked_at_the_proxy_lane() -> None:
    rows = _rows(RunRecords(wire=[
        _frame(1, "c2s", "SESS_SEND", _send("a", -2), action="dropped", rule="Drop(direction='c2s', "
                                                                            "packet_types={'SESS_SEND'}, count=1)"),
        {**_frame(2, "s2c", "NULL_RESPONSE", action="delayed", rule="Delay(...)"), "seen_ns": 0},
        _frame(3, "c2s", "PING", channel=0, action="duplicated", rule="Duplicate(...)"),
        _frame(4, "c2s", "SESS_COMMIT", "SessionCommitMessage(correlation_id=-4)", action="cut",
               rule="CutAfter(confirmable_commands=2, direction='c2s', channel=None, packet_types=None)"),
        _frame(9, "c2s", "SUBSCRIBE_TOPOLOGY_V2", channel=0, conn=3)],
        attempts=[{"ts_ns": 0, "conn": 1, "outcome": "forwarded", "peer": "p"},
                  {"ts_ns": 5_000_000, "conn": 2, "outcome": "refused", "peer": "p", "detail": None},
                  {"ts_ns": 8_000_000, "conn": 3, "outcome": "forwarded", "peer": "p"}]))
    effects = {r.text.split(" ")[0]: (r.action, r.effect) for r in rows if r.kind == "frame"}
    assert effects["SESS_SEND"] == ("dropped", "dropped: Drop(c2s, {SESS_SEND}, 1)")
    assert effects["NULL_RESPONSE"] == ("delayed", "held 2 ms by Delay(...)")
    assert effects["PING"][0] == "duplicated"
    assert effects["SESS_COMMIT"] == ("cut", "CUT: the proxy resets connection 1 (CutAfter(2, c2s))")
    assert [r.text for r in rows if r.kind in ("boundary", "refused")] == [
        "TCP connection 1 opened", "connect 2 refused by the proxy (RefuseConnections)",
        "TCP connection 3 opened: the client reconnected"]
    text = render_text(diagram(RunRecords(wire=[_frame(1, "c2s", "SESS_SEND", _send("a", -2), action="dropped"),
                                               _frame(2, "s2c", "NULL_RESPONSE")])))
    dropped, answered = [line for line in text.splitlines() if "SESS_SEND" in line or "NULL_RESPONSE" in line][-2:]
    assert "|" + "-" * 29 + "X" + " " * 29 + "|" in dropped  # ends at the proxy's column
    assert "|<" + "-" * 58 + "|" in answered


CUT_RULE = "CutAfter(confirmable_commands=2, direction='c2s', channel=None, packet_types=None)"
#: Connection 1 cut by the proxy, 2 refused, 3 closed by the broker, 4 reset by the client.
ENDED = RunRecords(
    wire=[_frame(1, "c2s", "SESS_SEND", _send("a", -2)),
          _frame(2, "c2s", "SESS_COMMIT", "SessionCommitMessage(correlation_id=-4)", action="cut", rule=CUT_RULE),
          _frame(5, "c2s", "SESS_SEND", _send("b", -2), conn=3),
          _frame(6, "s2c", "NULL_RESPONSE", "NullResponseMessage(correlation_id=-2)", conn=3),
          _frame(9, "c2s", "SESS_SEND", _send("c", -2), conn=4)],
    attempts=[{"ts_ns": 0, "conn": 1, "outcome": "forwarded", "peer": "p"},
              {"ts_ns": 3_000_000, "conn": 2, "outcome": "refused", "peer": "p", "detail": None},
              {"ts_ns": 4_000_000, "conn": 3, "outcome": "forwarded", "peer": "p"},
              {"ts_ns": 8_000_000, "conn": 4, "outcome": "forwarded", "peer": "p"}],
    ends=[{"ts_ns": 2_000_000, "conn": 1, "by": "proxy", "how": "reset", "reason": f"connection cut by {CUT_RULE}"},
          {"ts_ns": 3_000_000, "conn": 2, "by": "proxy", "how": "reset", "reason": "refused by RefuseConnections"},
          {"ts_ns": 7_000_000, "conn": 3, "by": "broker", "how": "fin", "reason": None},
          {"ts_ns": 10_000_000, "conn": 4, "by": "client", "how": "reset",
           "reason": "[Errno 104] Connection reset by peer"}])


def test_a_connections_end_is_drawn_at_its_time_by_the_side_that_ended_it() -> None:
    rows = _rows(ENDED)
    assert [(r.kind, r.text) for r in rows if r.kind != "frame"] == [
        ("boundary", "TCP connection 1 opened"),
        ("end", "TCP connection 1 reset by the proxy: cut by CutAfter(2, c2s)"),
        ("refused", "connect 2 refused by the proxy (RefuseConnections)"),  # its end is this row: not drawn again
        ("boundary", "TCP connection 3 opened: the client reconnected"),
        ("end", "TCP connection 3 closed by the broker (FIN)"),
        ("boundary", "TCP connection 4 opened: the client reconnected"),
        ("end", "TCP connection 4 reset by the client: [Errno 104] Connection reset by peer")]
    ends = [(r.t_ns, r.lane, r.action, r.conn) for r in rows if r.kind == "end"]
    assert ends == [(2_000_000, "proxy", "reset", 1), (7_000_000, "broker", "fin", 3),
                    (10_000_000, "client", "reset", 4)]
    kinds = [(r.kind, r.conn) for r in rows]
    # each end right after its connection's last frame, before what came next
    assert kinds.index(("end", 1)) == kinds.index(("frame", 1)) + 2  # the SESS_SEND, the cut, then the end
    assert kinds.index(("end", 3)) == kinds.index(("frame", 3)) + 2  # the send, the broker's answer, its FIN
    assert kinds.index(("end", 3)) + 1 == kinds.index(("boundary", 4))
    assert json.loads(rows[kinds.index(("end", 3))].detail) == ENDED.ends[2]


def test_the_text_and_svg_draw_each_end_on_its_lane() -> None:
    drawn = diagram(ENDED)
    lines = render_text(drawn).splitlines()
    cut = next(i for i, line in enumerate(lines) if "SESS_COMMIT" in line)
    assert lines[cut + 1] == ("      +2ms  |" + "_" * 29 + "R" + "_" * 29 + "|  TCP connection 1 reset by the proxy: "
                              "cut by CutAfter(2, c2s)")
    broker_fin = next(line for line in lines if "TCP connection 3 closed" in line)
    assert "|" + "_" * 29 + "|" + "_" * 29 + "F  TCP connection 3 closed by the broker (FIN)" in broker_fin
    client_reset = next(line for line in lines if "TCP connection 4 reset" in line)
    assert "  R" + "_" * 29 + "|" + "_" * 29 + "|  TCP connection 4 reset by the client" in client_reset
    assert lines.index(broker_fin) < next(i for i, line in enumerate(lines) if "TCP connection 4 opened" in line)

    svg = ET.fromstring(render_svg(drawn))
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t.text or "" for t in svg.iter(f"{ns}text")]
    assert "TCP connection 1 reset by the proxy: cut by CutAfter(2, c2s)" in texts
    assert "TCP connection 3 closed by the broker (FIN)" in texts
    assert not any("TCP connection 2" in t for t in texts)
    # the marks: at the proxy (filled: a reset), the broker (open: a FIN) and the client lane, in that order
    circles = [(c.get("cx"), c.get("fill")) for c in svg.iter(f"{ns}circle")]
    assert circles == [("740", "#d84315"), ("1080", "white"), ("400", "#d84315")]
    rows = {g.findtext(f"{ns}title"): g for g in svg.iter(f"{ns}g")}
    ended = rows[json.dumps(ENDED.ends[2], sort_keys=True)]
    assert [t.text for t in ended.iter(f"{ns}text")] == ["+7ms", "TCP connection 3 closed by the broker (FIN)"]


def test_an_end_by_a_socket_error_says_so() -> None:
    drawn = diagram(RunRecords(wire=[_frame(1, "c2s", "SESS_SEND", _send("a", -2))],
                               ends=[{"ts_ns": 4_000_000, "conn": 1, "by": "broker", "how": "error",
                                      "reason": "[Errno 110] Connection timed out"}]))
    (end,) = [r for r in drawn.rows if r.kind == "end"]
    assert (end.text, end.lane, end.t_ns) == ("TCP connection 1 failed at the broker: [Errno 110] Connection timed "
                                              "out", "broker", 3_000_000)
    line = next(line for line in render_text(drawn).splitlines() if "failed at the broker" in line)
    assert "|" + "_" * 29 + "|" + "_" * 29 + "E  TCP connection 1 failed" in line


def test_evidence_without_ends_draws_no_ends() -> None:
    rows = _rows(replace(ENDED, ends=()))
    assert not [r for r in rows if r.kind == "end"]
    assert [r.text for r in rows if r.kind == "boundary"] == [
        "TCP connection 1 opened", "TCP connection 3 opened: the client reconnected",
        "TCP connection 4 opened: the client reconnected"]


def test_operations_faults_and_history_are_notes_in_time_order() -> None:
    k1 = f"{RUN}-1"
    records = RunRecords(
        wire=[_frame(3, "c2s", "SESS_SEND", _send(k1, -2)),
              _frame(4, "s2c", "NULL_RESPONSE", "NullResponseMessage(correlation_id=-2)")],
        timeline=[{"ts_ns": 1_000_000, "event": "fault", "text": "drop 1 c2s SESS_SEND"},
                  {"ts_ns": 2_000_000, "event": "operation", "text": "send(q0 x1 durable blocking)", "index": 0},
                  {"ts_ns": 6_000_000, "event": "phase", "text": "final drain"}],
        history=[_op(2, "plain", "invoke", "send", k1), _op(5, "plain", "ok", "send", k1),
                 _op(7, "drain", "ok", "receive", k1, delivery_count=1, redelivered=False),
                 _op(7, "drain", "invoke", "ack", k1), _op(7, "drain", "ok", "ack", k1)])
    rows = _rows(records)
    assert [(r.kind, r.lane, r.text) for r in rows if r.kind not in ("frame", "boundary")] == [
        ("note", "proxy", "rule installed: drop 1 c2s SESS_SEND"),
        ("note", "client", "op 0: send(q0 x1 durable blocking)"),
        ("note", "client", "send k1 confirmed"),
        ("section", None, "final drain"),
        ("note", "client", "drain received k1 (delivery 1), ack confirmed")]
    assert diagram(records).legend == f"kN is the message with key {RUN}-N"


def test_the_anomaly_is_named_and_its_frames_are_red() -> None:
    k1, k2 = f"{RUN}-1", f"{RUN}-2"
    records = RunRecords(
        example=EXAMPLE.to_dict(),
        wire=[_frame(1, "c2s", "SESS_SEND", _send(k1, -2)),
              _frame(2, "s2c", "NULL_RESPONSE", "NullResponseMessage(correlation_id=-2)"),
              _frame(3, "c2s", "SESS_SEND", _send(k2, -3)),
              _frame(4, "s2c", "NULL_RESPONSE", "NullResponseMessage(correlation_id=-3)")],
        history=[_op(5, "plain", "ok", "send", k1), _op(5, "plain", "ok", "send", k2),
                 _op(8, "drain", "ok", "receive", k1, delivery_count=1)],
        findings=_lost(k2), title="minimal run")
    drawn = diagram(records)
    assert drawn.findings == ("1 lost: confirmed, never received (k2)",)
    assert drawn.example == EXAMPLE.describe()
    marked = [r.text for r in drawn.rows if r.marks]
    assert marked == ["SESS_SEND ch10 k2 corr=-3", "NULL_RESPONSE ch10 corr=-3 (answers send k2)",
                      "send k2 confirmed",
                      "k2 LOST: its send was confirmed, and no one received it, not even the final drain"]
    svg = render_svg(drawn)
    assert "FINDING: 1 lost: confirmed, never received (k2)" in svg
    assert svg.count('style="fill:#c62828">!! k2 LOST</text>') == 3  # in red beside the two frames and the note
    assert ">!! k2 LOST: its send was confirmed" in svg  # and the last row says why
    text = render_text(drawn)
    assert "FINDING: 1 lost" in text
    assert "SESS_SEND ch10 k2 corr=-3  !! k2 LOST" in text
    assert "SESS_SEND ch10 k1 corr=-2  !!" not in text


def test_runs_of_chatter_collapse_into_one_row() -> None:
    pings = [_frame(i, "c2s" if i % 2 else "s2c", "PING", "Ping(connection_ttl=2000)", channel=0)
             for i in range(1, 6)]
    confirms = [_frame(10 + i, "c2s", "PACKETS_CONFIRMED", f"PacketsConfirmedMessage(command_id={i})")
                for i in range(3)]
    rows = _rows(RunRecords(wire=[*pings, _frame(9, "c2s", "SESS_COMMIT"), *confirms]))
    groups = [(r.text, r.direction, r.count) for r in rows if r.kind == "group"]
    assert groups == [("PING x5", "both", 5), ("PACKETS_CONFIRMED x3 (cmd=0..2)", "c2s", 3)]
    assert [r.text for r in rows if r.kind == "frame"] == ["SESS_COMMIT ch10"]


def test_a_long_run_keeps_what_matters_and_elides_the_rest() -> None:
    wire = [_frame(i, "c2s", "SESS_SEND", _send(f"{RUN}-{i}", -i)) for i in range(1, 1001)]
    wire[500] = {**wire[500], "action": "dropped"}
    rows = _rows(RunRecords(wire=wire), max_rows=60, context=2)
    assert len(rows) <= 60
    assert sum(r.count for r in rows if r.kind in ("frame", "group", "elided")) == 1000
    dropped = next(i for i, r in enumerate(rows) if r.action == "dropped")
    assert [r.kind for r in rows[dropped - 3:dropped + 4]] == ["elided", "frame", "frame", "frame", "frame", "frame",
                                                               "elided"]
    assert rows[dropped - 3].text == "... 496 more frames"  # after connection 1's line and two frames
    tight = _rows(RunRecords(wire=[{**w, "action": "dropped"} for w in wire]), max_rows=40)
    assert len(tight) == 40
    assert any(r.kind == "elided" and r.text == "... 962 more frames and 0 more notes" for r in tight)


def test_the_svg_is_well_formed_and_self_contained() -> None:
    k1 = f"{RUN}-1"
    records = RunRecords(example=EXAMPLE.to_dict(),
                         wire=[_frame(1, "c2s", "SESS_SEND", _send(k1, -2), action="dropped", rule="Drop(<&>)")],
                         history=[_op(2, "plain", "info", "send", k1)], findings=_lost(k1))
    svg = render_svg(diagram(records))
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "<script" not in svg
    assert "href" not in svg
    titles = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert any("<PropertyType.STRING: 10>" in t for t in titles)  # the whole frame on hover, escaped
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert {"client (the kit's)", "fault proxy", "broker"} <= set(texts)
    assert "dropped: Drop(<&>)" in texts


def test_frame_facts_reads_the_wire_logs_packet_text() -> None:
    assert frame_facts(_send("k", -2)) == {"correlation_id": -2, "message_id": 0, "requires_response": True,
                                           "key": "k", "queue": f"cck.explore.{RUN}.q0"}
    assert frame_facts("ReattachSessionResponseMessage(last_confirmed_command_id=4, reattached=True)") == {
        "last_confirmed_command_id": 4, "reattached": True}
    assert frame_facts("ActiveMQExceptionMessage(code=101, message='AMQ229019: gone', correlation_id=None)") == {
        "code": 101, "text": "AMQ229019: gone"}
    assert frame_facts(None) == {}


def test_the_evidence_files_load_into_the_same_diagram(tmp_path: Path) -> None:
    k1 = f"{RUN}-1"
    records = RunRecords(example=EXAMPLE.to_dict(), wire=[_frame(1, "c2s", "SESS_SEND", _send(k1, -2))],
                         attempts=[{"ts_ns": 0, "conn": 1, "outcome": "forwarded", "peer": "p"}],
                         history=[_op(2, "plain", "ok", "send", k1)],
                         timeline=[{"ts_ns": 0, "event": "operation", "text": "send", "index": 0}],
                         findings=_lost(k1), title="minimal run",
                         ends=[{"ts_ns": 3_000_000, "conn": 1, "by": "client", "how": "fin", "reason": None}])
    for name, rows in (("wire", records.wire), ("attempts", records.attempts), ("history", records.history),
                       ("timeline", records.timeline), ("ends", records.ends)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "findings.json").write_text(json.dumps(records.findings))
    (tmp_path / "example.json").write_text(json.dumps({"seed": 1, "example": EXAMPLE.to_dict()}))
    loaded = diagram(load_records(tmp_path, "minimal run"))
    assert loaded == diagram(records)
    assert loaded.rows[-2].text == "TCP connection 1 closed by the client (FIN)"  # then the anomaly's row
    (tmp_path / "ends.jsonl").unlink()  # evidence older than ends.jsonl
    assert diagram(load_records(tmp_path, "minimal run")) == diagram(replace(records, ends=()))


def test_a_key_sent_or_received_again_says_so() -> None:
    k1 = f"{RUN}-1"
    records = RunRecords(
        wire=[_frame(1, "c2s", "SESS_SEND", _send(k1, -2)),
              _frame(2, "s2c", "NULL_RESPONSE", "NullResponseMessage(correlation_id=-2)", action="cut"),
              _frame(3, "c2s", "SESS_SEND", _send(k1, -2), conn=2)],
        history=[_op(4, "drain", "ok", "receive", k1, delivery_count=1), _op(4, "drain", "ok", "ack", k1),
                 _op(5, "drain", "ok", "receive", k1, delivery_count=1), _op(5, "drain", "ok", "ack", k1)],
        findings={"kind": "finding", "judgement": {"findings": [f"1 duplicated after a confirmed acknowledgement: "
                                                                f"{k1} (to drain, delivery count 1)"],
                                                   "anomalies": [{"kind": "duplicated", "key": k1}]}})
    rows = diagram(records).rows
    assert [r.text for r in rows if r.kind in ("frame", "note")] == [
        "SESS_SEND ch10 k1 corr=-2", "NULL_RESPONSE ch10 corr=-2 (answers send k1)",
        "SESS_SEND ch10 k1 AGAIN (2nd time) corr=-2",
        "drain received k1 (delivery 1), ack confirmed",
        "drain received k1 AGAIN (2nd receipt) (delivery 1), ack confirmed"]
    assert all(r.marks == ("k1 DUPLICATED",) for r in rows if r.kind in ("frame", "note", "anomaly"))
    assert diagram(records).findings == ("1 duplicated after a confirmed acknowledgement: k1 (to drain, delivery "
                                         "count 1)",)
