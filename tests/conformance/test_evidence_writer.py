"""The evidence writer's rows match the schema, for every kind a case can record; the schema module stands
alone (reports/ loads it by path)."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

from cck.conformance.evidence import CaseEvidence, EvidenceWriter, case_rows, schema
from cck.conformance.faults import AttemptRecord, EndRecord, WireRecord
from cck.conformance.oracles import Attempt, History, Tolerance, check, check_schedule, reverify


def _evidence() -> CaseEvidence:
    evidence = CaseEvidence("demo.ev.1")
    evidence.wire([WireRecord(ts_ns=10, seen_ns=5, conn=1, direction="c2s", seq=1, channel=None, type_name="RAW",
                              size=4, confirmable=False, action="forwarded", packet=None, error="short")],
                  label="proxy")
    evidence.attempts([AttemptRecord(ts_ns=1, conn=1, outcome="refused", peer="127.0.0.1:5")])
    evidence.ends([EndRecord(ts_ns=2, conn=1, by="proxy", how="reset", reason="refused by RefuseConnections"),
                   EndRecord(ts_ns=9, conn=2, by="broker", how="fin")], label="proxy")
    history = History()
    history.invoke("p1", "send", "m1", time_ns=1)
    history.ok("p1", "send", "m1", time_ns=2)
    evidence.history(list(history), check(history))
    expected = [Attempt(index=0, offset_ms=100, wait_ms=100), Attempt(index=1, offset_ms=300, wait_ms=200)]
    late = check_schedule([100_000_000, 900_000_000], expected, Tolerance(10.0, 0.1), origin_ns=0)
    evidence.timing("reconnect", reverify(lambda: late, attempts=1))  # fails twice: two runs in the evidence
    evidence.note("odd", object())  # not JSON: kept as its repr
    return evidence


def test_every_row_validates() -> None:
    rows = case_rows("run-1", "demo.ev.1", _evidence())
    assert {kind for kind, found in rows.items() if found} == {"wire", "attempt", "end", "history",
                                                               "history_result", "timing", "note"}
    for kind, found in rows.items():
        for row in found:
            assert schema.validate(row) == [], (kind, row)
    assert rows["wire"][0]["label"] == "proxy"
    assert [(row["label"], row["conn"], row["by"], row["how"], row["reason"]) for row in rows["end"]] == [
        ("proxy", 1, "proxy", "reset", "refused by RefuseConnections"), ("proxy", 2, "broker", "fin", None)]
    assert [row["index"] for row in rows["history"]] == [0, 1]


def test_writer_lays_out_a_run(tmp_path: Path) -> None:
    writer = EvidenceWriter(tmp_path, "run-1")
    record = {"case_id": "demo.ev.1", "clause_id": "demo.must", "clause_level": "MUST", "checks": "both",
              "group": "demo", "nodeid": "t.py::t", "description": "d", "expectation": "e", "verdict": "PASS",
              "reason": None, "known_deviation": None, "deviation_stale": False, "should_misses": [],
              "params": {"n": 1}, "duration_s": 0.5, "started": "2025-01-31T12:00:00.000000Z",
              "finished": "2025-01-31T12:00:00.500000Z"}
    writer.write_case(record, _evidence())
    files = sorted(p.name for p in (tmp_path / "run-1").iterdir())
    assert files == sorted(name for kind, name in schema.FILES.items() if kind != "run")
    (case,) = [json.loads(line) for line in (tmp_path / "run-1" / "cases.jsonl").read_text().splitlines()]
    assert schema.validate(case) == []


def test_validate_names_each_problem() -> None:
    problems = schema.validate({"kind": "note", "schema_version": 2, "run_id": 5, "key": "k", "value": None,
                                "surprise": 1})
    assert "field 'case_id' is missing" in problems
    assert "field 'run_id': 5 is not a string" in problems
    assert "field 'schema_version': 2, this schema is 1" in problems
    assert "field 'surprise' is not in schema note v1" in problems
    assert schema.validate({"kind": "nope"}) == ["unknown record kind 'nope' (known: run, case, wire, attempt, "
                                                 "end, history, history_result, timing, note)"]


def test_schema_imports_only_the_standard_library() -> None:
    """``reports`` imports this module without the kit (tests/test_boundaries.py checks the whole subpackage)."""
    tree = ast.parse(Path(schema.__file__).read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    assert imported
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}
    assert not any(isinstance(node, ast.ImportFrom) and node.level for node in ast.walk(tree))
    assert all(f.type in schema.TYPES for fields in schema.RECORDS.values() for f in fields)
