"""The evidence schema as Spark sees it: explicit ``StructType``\\ s derived from the kit's field tables.

The field tables live in :mod:`conformance.evidence.schema` (standard library only): one of the two
modules of ``conformance`` that ``reports`` imports (with :mod:`conformance.clauses`; nothing else of the
kit, ``tests/test_boundaries.py`` holds it to that).  This module checks that its ``SCHEMA_VERSION`` is the
one this pipeline reads and maps each field type to a Spark type:

=========  ==================  =========================================
evidence   Spark               note
=========  ==================  =========================================
string     StringType
int        IntegerType         32-bit
long       LongType            64-bit (monotonic ``*_ns`` readings)
double     DoubleType
bool       BooleanType
timestamp  TimestampType       ISO 8601 UTC text; the session runs in UTC
json       StringType          the JSON value re-serialised, compact
=========  ==================  =========================================

Every table Spark stores also carries ``target`` (taken from the run's ``run.json``): Parquet is
partitioned by ``run_id`` and ``target``, and every job groups by target.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pyspark.sql.types import (
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from cck.conformance.evidence import schema as evidence_schema

from ._errors import ReportError, SchemaVersionError

__all__ = [
    "READ_VERSION",
    "SPARK_TYPES",
    "FieldSpec",
    "EvidenceSchema",
    "load_schema",
    "struct_for",
]

#: The evidence schema version this pipeline reads.
READ_VERSION = 1

#: Evidence field type -> Spark type.  ``json`` stays text: its shape differs per row.
SPARK_TYPES: Mapping[str, DataType] = {
    "string": StringType(),
    "int": IntegerType(),
    "long": LongType(),
    "double": DoubleType(),
    "bool": BooleanType(),
    "timestamp": TimestampType(),
    "json": StringType(),
}

#: The column every stored table gets beside the schema's own fields (from the run record).
TARGET_FIELD = StructField("target", StringType(), nullable=False)


@dataclass(frozen=True)
class FieldSpec:
    """One field of a record kind, as the schema module's ``Field`` declares it."""

    name: str
    type: str
    nullable: bool


@dataclass(frozen=True)
class EvidenceSchema:
    """The parts of the schema module the pipeline uses, typed."""

    #: The schema module's name (``conformance.evidence.schema``).
    module: str
    version: int
    records: Mapping[str, tuple[FieldSpec, ...]]
    files: Mapping[str, str]
    #: ``validate(record, kind) -> problems`` of the schema module.
    validate: Callable[[Mapping[str, Any], str], list[str]]

    def struct(self, kind: str) -> StructType:
        """The Spark schema of ``kind``'s stored table (the schema's fields, then ``target``)."""
        return struct_for(self.records[kind])


def struct_for(fields: tuple[FieldSpec, ...]) -> StructType:
    """A StructType with one field per FieldSpec, in table order, followed by ``target``."""
    columns = [StructField(f.name, SPARK_TYPES[f.type], nullable=f.nullable) for f in fields]
    if all(f.name != "target" for f in fields):
        columns.append(TARGET_FIELD)
    return StructType(columns)


def load_schema(module: ModuleType = evidence_schema) -> EvidenceSchema:
    """The schema module's field tables, checked to be of the version this pipeline reads."""
    where = Path(module.__file__) if module.__file__ else Path(module.__name__)
    version = getattr(module, "SCHEMA_VERSION", None)
    if version != READ_VERSION:
        raise SchemaVersionError(where, version, READ_VERSION)
    types = tuple(getattr(module, "TYPES", ()))
    unknown = sorted(set(types) - set(SPARK_TYPES))
    if unknown:
        raise ReportError(f"{where}: field type(s) {', '.join(unknown)} have no Spark type in reports/_schema.py")
    records = {
        kind: tuple(FieldSpec(f.name, f.type, bool(f.nullable)) for f in fields)
        for kind, fields in module.RECORDS.items()
    }
    validate: Callable[[Mapping[str, Any], str], list[str]] = module.validate
    return EvidenceSchema(module=module.__name__, version=version, records=records, files=dict(module.FILES),
                          validate=validate)
