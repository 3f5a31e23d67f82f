from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from cck.reports import EvidenceError, SchemaVersionError, extract, load, read_tables
from cck.reports._ingest import QUARANTINE_STRUCT, parse_line
from cck.reports._schema import EvidenceSchema

from .conftest import EVIDENCE

NOTE = {"kind": "note", "schema_version": 1, "run_id": "r1", "case_id": "c", "key": "k", "value": {"a": [1, 2]}}


def _line(record: object) -> bytes:
    return json.dumps(record).encode() + b"\n"


@pytest.mark.parametrize(("raw", "reason"), [
    (_line(NOTE)[:30], "not JSON (truncated?): "),
    (b"[1, 2]\n", "not a JSON object but list"),
    (_line({**NOTE, "schema_version": 2}), "schema_version 2, this pipeline reads 1"),
    (_line({k: v for k, v in NOTE.items() if k != "key"}), "field 'key' is missing"),
    (_line({**NOTE, "key": 3}), "field 'key': 3 is not a string"),
    (_line({**NOTE, "kind": "wire"}), "field 'kind': 'wire', expected 'note'"),
    (_line({**NOTE, "run_id": "r2"}), "run_id 'r2' is not its run's ('r1')"),
    (b"\xff\xfe\n", "not UTF-8"),
])
def test_a_bad_line_gives_its_reason(schema: EvidenceSchema, raw: bytes, reason: str) -> None:
    parsed = parse_line(raw, "note", schema.records["note"], schema, "r1")
    assert isinstance(parsed, str)
    assert parsed.startswith(reason)


def test_a_good_line_is_typed_and_unknown_fields_are_ignored(schema: EvidenceSchema) -> None:
    parsed = parse_line(_line({**NOTE, "added_later": 1}), "note", schema.records["note"], schema, "r1")
    assert parsed == ("note", 1, "r1", "c", "k", '{"a":[1,2]}')
    assert parse_line(b"  \n", "note", schema.records["note"], schema, "r1") is None


def _copy(tmp_path: Path) -> tuple[Path, Path]:
    evidence = tmp_path / "evidence"
    shutil.copytree(EVIDENCE, evidence)
    return evidence, sorted(evidence.iterdir())[0]


def test_bad_rows_are_quarantined_and_the_rest_is_read(spark: SparkSession, schema: EvidenceSchema,
                                                       tmp_path: Path) -> None:
    evidence, run = _copy(tmp_path)
    cases = (run / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    good = len(cases)
    first = json.loads(cases[0])
    damaged = [*cases,
               json.dumps({**first, "schema_version": 7}),
               json.dumps({k: v for k, v in first.items() if k != "verdict"}),
               json.dumps({**first, "duration_s": "slow"}),
               json.dumps(first)[:40]]  # a truncated last line, as a killed writer leaves it
    (run / "cases.jsonl").write_text("\n".join(damaged), encoding="utf-8")
    extracted = extract(spark, evidence, schema)
    name = f"{run.name}/cases.jsonl"
    expected = spark.createDataFrame([
        (name, good + 1, run.name, "case", "schema_version 7, this pipeline reads 1"),
        (name, good + 2, run.name, "case", "field 'verdict' is missing"),
        (name, good + 3, run.name, "case", "field 'duration_s': 'slow' is not a double"),
        (name, good + 4, run.name, "case", "not JSON (truncated?): Unterminated string starting at: line 1 column 39 "
                                           "(char 38)"),
    ], QUARANTINE_STRUCT)
    assertDataFrameEqual(extracted.quarantine, expected)
    assert extracted.tables["case"].where(f"run_id = '{run.name}'").count() == good


def test_a_run_of_an_unreadable_schema_version_is_an_error(spark: SparkSession, schema: EvidenceSchema,
                                                           tmp_path: Path) -> None:
    evidence, run = _copy(tmp_path)
    record = json.loads((run / "run.json").read_text(encoding="utf-8"))
    (run / "run.json").write_text(json.dumps({**record, "schema_version": 2}), encoding="utf-8")
    with pytest.raises(SchemaVersionError) as caught:
        extract(spark, evidence, schema)
    assert caught.value.path == run / "run.json"
    assert caught.value.found == 2
    assert str(caught.value).startswith(f"{run / 'run.json'}: evidence schema version 2, this pipeline reads version 1")


def test_a_run_without_run_json_is_quarantined_whole(spark: SparkSession, schema: EvidenceSchema,
                                                     tmp_path: Path) -> None:
    evidence, run = _copy(tmp_path)
    (run / "run.json").unlink()
    extracted = extract(spark, evidence, schema)
    expected = spark.createDataFrame(
        [(f"{run.name}/run.json", 0, run.name, "run",
          "no run.json (the session did not finish?) (the whole run is skipped)")], QUARANTINE_STRUCT)
    assertDataFrameEqual(extracted.quarantine, expected)
    assert extracted.run_count == 1
    assert extracted.tables["case"].where(f"run_id = '{run.name}'").count() == 0


def test_a_missing_evidence_directory_names_the_path(spark: SparkSession, schema: EvidenceSchema,
                                                     tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match=f"{tmp_path / 'nowhere'}: evidence directory does not exist"):
        extract(spark, tmp_path / "nowhere", schema)
    (tmp_path / "empty").mkdir()
    with pytest.raises(EvidenceError, match="no evidence runs found"):
        extract(spark, tmp_path / "empty", schema)


def test_parquet_is_partitioned_by_run_and_target_and_reads_back(spark: SparkSession, schema: EvidenceSchema,
                                                                 tmp_path: Path) -> None:
    extracted = extract(spark, EVIDENCE, schema)
    load(extracted, tmp_path / "data")
    runs = sorted(p.name for p in EVIDENCE.iterdir())
    assert sorted(p.name for p in (tmp_path / "data" / "case").glob("run_id=*")) == [f"run_id={r}" for r in runs]
    assert all((p / "target=reference").is_dir() for p in (tmp_path / "data" / "case").glob("run_id=*"))
    tables = read_tables(spark, tmp_path / "data", schema)
    for kind in ("case", "timing", "history"):
        assertDataFrameEqual(tables[kind], extracted.tables[kind])
    assert tables["wire"].schema.fieldNames() == schema.struct("wire").fieldNames()
