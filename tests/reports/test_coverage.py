from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from cck.reports import ReportError, clause_coverage, read_clause_table
from cck.reports._coverage import CLAUSE_STRUCT

from .conftest import Table

COVERAGE = ("clause_id string, level string, group string, disagreement boolean, in_table boolean, "
            "case_ids array<string>, case_count int, targets array<string>, reference_cases long, "
            "reference_exercised boolean")


def test_coverage_per_clause(spark: SparkSession, table: Table) -> None:
    clauses = spark.createDataFrame([("w.a", "MUST", "window", False), ("w.b", "SHOULD", "window", True),
                                     ("w.c", "MUST", "window", False), ("w.d", "MUST", "window", False)], CLAUSE_STRUCT)
    cases = table("case",
                  {"run_id": "r1", "case_id": "w.a.1", "clause_id": "w.a", "verdict": "PASS"},
                  {"run_id": "r2", "case_id": "w.a.1", "clause_id": "w.a", "verdict": "FAIL"},
                  {"run_id": "r1", "case_id": "w.a.2", "clause_id": "w.a", "verdict": "UNSUPPORTED"},
                  {"run_id": "r3", "case_id": "w.b.1", "clause_id": "w.b", "verdict": "PASS", "target": "artemis"},
                  {"run_id": "r1", "case_id": "w.c.1", "clause_id": "w.c", "verdict": "KIT_ERROR"},
                  {"run_id": "r1", "case_id": "x.1", "clause_id": "gone", "verdict": "PASS"})
    expected = spark.createDataFrame([
        ("w.a", "MUST", "window", False, True, ["w.a.1", "w.a.2"], 2, ["reference"], 1, True),
        # run only against Artemis: covered, not exercised by the reference target
        ("w.b", "SHOULD", "window", True, True, ["w.b.1"], 1, ["artemis"], 0, False),
        # its one case ended in the kit's error: covered, not exercised
        ("w.c", "MUST", "window", False, True, ["w.c.1"], 1, ["reference"], 0, False),
        ("w.d", "MUST", "window", False, True, [], 0, [], 0, False),  # no case in the evidence
        ("gone", None, None, None, False, ["x.1"], 1, ["reference"], 1, True),  # cited, not in the table
    ], COVERAGE)
    assertDataFrameEqual(clause_coverage(clauses, cases), expected)


def test_the_kits_clause_table_reads(tmp_path: Path) -> None:
    rows = read_clause_table()
    ids = [row[0] for row in rows]
    assert "window.confirm-bytes" in ids
    assert len(ids) == len(set(ids))
    assert all(level in ("MUST", "SHOULD", "MAY") for _, level, _, _ in rows)
    (tmp_path / "bad.toml").write_text("[[clause]\n", encoding="utf-8")
    with pytest.raises(ReportError, match=r"bad\.toml: not readable TOML"):
        read_clause_table(tmp_path)
