"""The seeded synthetic evidence generator: schema-valid, deterministic, and the audit finds exactly what it planted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cck.reports import __main__ as cli
from cck.reports._synth import KIT_ERROR, PLANTED, Rates, write_evidence

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The generator is standard library only: only the audit test needs pyspark (and skips without it).
RATES = Rates(lost=0.04, duplicated=0.04, out_of_order=0.04, unexpected=0.04, ack=0.5)
CLIENTS = ("kit", "artemis@2.44.0")


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_rows_are_valid_evidence(tmp_path: Path) -> None:
    from cck.conformance.evidence import schema

    synthesis = write_evidence(tmp_path, runs=2, events=3000, seed=5, rates=RATES, keys_per_history=200)
    assert len(synthesis.run_ids) == 2
    histories = 0
    for run_id in synthesis.run_ids:
        run = json.loads((tmp_path / run_id / "run.json").read_text(encoding="utf-8"))
        assert schema.validate(run, "run") == []
        for kind in ("case", "history", "history_result"):
            lines = (tmp_path / run_id / schema.FILES[kind]).read_text(encoding="utf-8").splitlines()
            assert lines
            for line in lines:
                record = json.loads(line)
                assert schema.validate(record, kind) == [], line
                assert record["run_id"] == run_id
            histories += len(lines) if kind == "case" else 0
    rows = sum(len((tmp_path / r / "history.jsonl").read_bytes().splitlines()) for r in synthesis.run_ids)
    assert rows == synthesis.events
    assert abs(synthesis.events - 3000) < 300
    assert histories == len(synthesis.planted)


def _records(root: Path, run_id: str, file: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / run_id / file).read_text(encoding="utf-8").splitlines()]


def test_client_runs_and_kit_errors_are_valid_evidence(tmp_path: Path) -> None:
    from cck.conformance.evidence import schema

    synthesis = write_evidence(tmp_path, runs=2, events=3000, seed=5, rates=RATES, keys_per_history=50,
                               clients=CLIENTS, client_cases=12, kit_errors=0.3)
    assert list(synthesis.clients.values()) == list(CLIENTS)
    written: dict[tuple[str, str], str] = {}
    for run_id in synthesis.run_ids:
        run = json.loads((tmp_path / run_id / "run.json").read_text(encoding="utf-8"))
        assert schema.validate(run, "run") == []
        client = synthesis.clients.get(run_id)
        assert (run["subject"], run["client"]) == (("client", client) if client else ("broker", None))
        cases = _records(tmp_path, run_id, "cases.jsonl")
        assert (run["exit_status"] == 3) == (any(c["verdict"] == KIT_ERROR for c in cases)
                                             and all(c["verdict"] != "FAIL" for c in cases))
        for case in cases:
            assert schema.validate(case, "case") == [], case
            assert (case["subject"], case["client"]) == (run["subject"], run["client"])
            assert (case["kit_error"] is not None) == (case["verdict"] == KIT_ERROR)
            written[(run_id, case["case_id"])] = case["verdict"]
        assert (tmp_path / run_id / "history.jsonl").exists() == (client is None)
    assert written == synthesis.verdicts
    kit_errors = synthesis.kit_errors()
    assert {run_id in synthesis.clients for run_id, _ in kit_errors} == {True, False}  # in both subjects
    assert len(kit_errors) < len(written)


def test_kit_errors_leave_the_histories_as_they_were(tmp_path: Path) -> None:
    plain = write_evidence(tmp_path / "plain", events=2000, seed=4, rates=RATES, keys_per_history=100)
    erring = write_evidence(tmp_path / "erring", events=2000, seed=4, rates=RATES, keys_per_history=100,
                            kit_errors=0.5)
    assert plain.kit_errors() == set()
    assert erring.kit_errors()
    assert erring.planted == plain.planted
    for run_id in plain.run_ids:
        assert (tmp_path / "plain" / run_id / "history.jsonl").read_bytes() == \
               (tmp_path / "erring" / run_id / "history.jsonl").read_bytes()
    with pytest.raises(ValueError, match="kit_errors"):
        write_evidence(tmp_path / "bad", kit_errors=1.5)


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        write_evidence(tmp_path / name, runs=2, events=2000, seed=seed, rates=RATES, keys_per_history=100,
                       clients=CLIENTS, kit_errors=0.2)
    a, b, c = (_files(tmp_path / name) for name in "abc")
    assert a == b
    assert a.keys() != c.keys() or a != c


def test_rates_are_controllable(tmp_path: Path) -> None:
    none = write_evidence(tmp_path / "none", events=2000, seed=1, rates=Rates(0, 0, 0, 0), keys_per_history=100)
    assert none.totals() == dict.fromkeys(PLANTED, 0)
    only_lost = write_evidence(tmp_path / "lost", events=4000, seed=1, rates=Rates(lost=0.2, duplicated=0,
                                                                                  out_of_order=0, unexpected=0))
    totals = only_lost.totals()
    assert totals["lost"] > 100
    assert totals["duplicated"] == totals["order_violation"] == totals["unexpected"] == 0
    with pytest.raises(ValueError, match="more than 1"):
        Rates(lost=0.6, duplicated=0.6)


def test_cli_writes_and_summarises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "evidence"
    argv = ["synth", "--runs", "2", "--events", "1500", "--seed", "3", "--out", str(out), "--lost", "0.05"]
    assert cli.main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["runs"] == ["synth-3-0000", "synth-3-0001"]
    assert summary["planted"]["lost"] > 0
    assert cli.main(argv) == cli.EXIT_INPUT  # not an empty directory any more
    assert "new or empty" in capsys.readouterr().err
    assert cli.main(["synth", "--events", "500", "--out", str(tmp_path / "clients"), "--clients", "kit, artemis",
                     "--client-cases", "3", "--kit-errors", "1"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert sorted(summary["clients"].values()) == ["artemis", "kit"]
    assert summary["verdicts"] == {KIT_ERROR: 1 + 2 * 3}


def test_checker_finds_what_was_planted(tmp_path: Path) -> None:
    """The kit's own history checker agrees with the plan (no Spark needed)."""
    from cck.conformance.oracles._history import Op
    from cck.conformance.oracles._history_check import check

    synthesis = write_evidence(tmp_path, runs=1, events=4000, seed=11, rates=RATES, keys_per_history=250)
    rows: dict[str, list[dict[str, Any]]] = {}
    for line in (tmp_path / synthesis.run_ids[0] / "history.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        rows.setdefault(record["case_id"], []).append(record)
    for (_, case_id), planted in synthesis.planted.items():
        ops = [Op(r["process"], r["type"], r["f"], r["value"], r["time_ns"], r["producer"], r["seq"],
                  r["redelivered"], r["delivery_count"]) for r in rows[case_id]]
        result = check(ops).to_dict()
        got = {"lost": result["lost"]["count"], "duplicated": result["duplicated"]["count"],
               "order_violation": result["order_violations"]["count"], "unexpected": result["unexpected"]["count"]}
        assert got == planted, case_id
        assert result["ack_lost"]["count"] == result["redelivery_mismatches"]["count"] == 0


@pytest.fixture
def spark_session(request: pytest.FixtureRequest) -> SparkSession:
    pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")
    session: SparkSession = request.getfixturevalue("spark")
    return session


def test_audit_finds_exactly_what_was_planted(tmp_path: Path, spark_session: SparkSession) -> None:
    from cck.reports import delivery_audit, extract, load, load_schema, read_tables

    spark = spark_session
    schema = load_schema()
    synthesis = write_evidence(tmp_path / "evidence", runs=2, events=2000, seed=2026, rates=RATES,
                               keys_per_history=100)
    totals = synthesis.totals()
    assert all(totals[name] > 0 for name in PLANTED), totals
    extracted = extract(spark, tmp_path / "evidence", schema)
    load(extracted, tmp_path / "data")
    tables = read_tables(spark, tmp_path / "data", schema)
    audit = {(row["run_id"], row["case_id"]): row.asDict()
             for row in delivery_audit(tables["history"], tables["history_result"]).collect()}
    assert audit.keys() == synthesis.planted.keys()
    for history, planted in synthesis.planted.items():
        row = audit[history]
        assert {name: row[name] for name in PLANTED} == planted, history
        assert (row["ack_lost"], row["redelivery_mismatch"], row["unreceived_undrained"]) == (0, 0, 0)
        assert row["ok"] == row["oracle_ok"] == (not any(planted.values()))


def test_the_matrix_finds_the_planted_client_runs_and_kit_errors(tmp_path: Path, spark_session: SparkSession) -> None:
    from cck.reports import conformance_matrix, extract, load_schema

    synthesis = write_evidence(tmp_path / "evidence", runs=2, events=1500, seed=8, rates=RATES,
                               keys_per_history=100, clients=CLIENTS, client_cases=6, kit_errors=0.25)
    extracted = extract(spark_session, tmp_path / "evidence", load_schema())
    matrix = [row.asDict() for row in conformance_matrix(extracted.tables["case"], extracted.runs).collect()]
    column = {"broker": lambda row: row["target"], "client": lambda row: row["client"]}
    found = {(row["subject"], column[row["subject"]](row), row["case_id"]): row for row in matrix}
    planted = {("client" if run_id in synthesis.clients else "broker",
                synthesis.clients.get(run_id, "url"), case_id): verdict
               for (run_id, case_id), verdict in synthesis.verdicts.items()}
    assert found.keys() == planted.keys()
    assert {key[1] for key in found if key[0] == "client"} == set(CLIENTS)
    for key, verdict in planted.items():
        row = found[key]
        assert (row["latest_verdict"], row["runs"], row["kit_error"]) == (verdict, 1, int(verdict == KIT_ERROR)), key
        if verdict == KIT_ERROR:
            assert (row["latest_kit_error_type"], row["latest_kit_error_where"]) == ("KitError",
                                                                                      "synthetic/kit.py:1 in plant")
    assert sum(row["kit_error"] for row in matrix) == len(synthesis.kit_errors()) > 0
