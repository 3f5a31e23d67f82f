from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from cck.conformance.evidence import schema as kit_schema
from cck.reports import READ_VERSION, SchemaVersionError, load_schema
from cck.reports._schema import EvidenceSchema


def test_every_kind_has_a_struct_of_its_fields_then_target(schema: EvidenceSchema) -> None:
    assert schema.version == READ_VERSION == kit_schema.SCHEMA_VERSION
    for kind, fields in kit_schema.RECORDS.items():
        struct = schema.struct(kind)
        assert struct.fieldNames()[: len(fields)] == [f.name for f in fields]
        assert "target" in struct.fieldNames()
        assert [f.nullable for f in struct.fields[: len(fields)]] == [f.nullable for f in fields]


def test_the_note_struct_exactly(schema: EvidenceSchema) -> None:
    assert schema.struct("note") == StructType([
        StructField("kind", StringType(), False), StructField("schema_version", IntegerType(), False),
        StructField("run_id", StringType(), False), StructField("case_id", StringType(), False),
        StructField("key", StringType(), False), StructField("value", StringType(), True),  # json: text
        StructField("target", StringType(), False)])


def test_types_map(schema: EvidenceSchema) -> None:
    types = {f.name: f.dataType for f in schema.struct("timing").fields}
    assert types["run"] == IntegerType()
    assert types["ok"] == BooleanType()
    assert types["expected_ms"] == DoubleType()
    assert {f.name: f.dataType for f in schema.struct("wire").fields}["ts_ns"] == LongType()
    assert {f.name: f.dataType for f in schema.struct("case").fields}["started"] == TimestampType()


def test_the_schema_is_the_kits_module(schema: EvidenceSchema) -> None:
    assert schema.module == kit_schema.__name__
    assert schema.validate is kit_schema.validate


def test_a_schema_module_of_another_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kit_schema, "SCHEMA_VERSION", 2)
    message = r"evidence[/\\]schema\.py: evidence schema version 2, this pipeline reads version 1"
    with pytest.raises(SchemaVersionError, match=message):
        load_schema(kit_schema)
