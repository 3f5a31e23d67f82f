"""benchmarks/audit_bench.py at a tiny size: Spark and the DuckDB query agree, and the report is written.

Needs pyspark (Java 17+) and duckdb, both in the ``reports`` extra: run it in that env
(``.tox/reports/bin/python -m pytest tests/benchmarks/test_audit_bench.py``); elsewhere it is skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")
pytest.importorskip("duckdb", reason="duckdb comes with the `reports` extra")

from benchmarks import audit_bench


def test_smoke_run_agrees_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "audit.json"
    argv = ["--events", "3000", "--runs", "2", "--warmup", "0", "--keys-per-history", "100",
            "--workdir", str(tmp_path / "work"), "--conf", "spark.sql.shuffle.partitions=2",
            "--conf", "spark.driver.memory=1g", "--json", str(out)]
    assert audit_bench.main(argv) == 0  # raises when the engines or the plan disagree
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["command"].startswith("python benchmarks/audit_bench.py --events 3000")
    (result,) = report["results"]
    assert abs(result["events"] - 3000) < 300
    assert result["spark_s"] > 0
    assert result["duckdb_s"] > 0
    assert result["ratio"] == pytest.approx(result["spark_s"] / result["duckdb_s"])


def test_duckdb_query_agrees_with_the_plan_on_every_anomaly(tmp_path: Path) -> None:
    """Without Spark: the SQL baseline finds exactly what the generator planted, at high rates."""
    from cck.reports._synth import Rates, write_evidence

    synthesis = write_evidence(tmp_path / "evidence", runs=2, events=4000, seed=9,
                               rates=Rates(lost=0.05, duplicated=0.05, out_of_order=0.05, unexpected=0.05),
                               keys_per_history=150)
    audit_bench.to_parquet(tmp_path / "evidence", tmp_path / "data", threads=2)
    _, rows = audit_bench.duckdb_audit(tmp_path / "data", threads=2)
    audit_bench.check_results(rows, rows, synthesis.planted)
    assert all(count > 0 for count in synthesis.totals().values())
