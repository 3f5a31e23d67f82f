"""The evidence schema as Spark sees it: explicit ``StructType``\\ s derived from the kit's field tables.

The field tables live in ``conformance/evidence/schema.py`` (standard library only).  This module loads
that file *by path* (``importlib.util.spec_from_file_location``) so that ``reports`` never imports the
``conformance`` package, checks that its ``SCHEMA_VERSION`` is the one this pipeline reads, and maps
each field type to a Spark type:

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

import importlib.util
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

from ._errors import ReportError, SchemaVersionError

__all__ = [
    "READ_VERSION",
    "SCHEMA_PATH",
    "SPARK_TYPES",
    "FieldSpec",
    "EvidenceSchema",
    "load_schema",
    "struct_for",
]

#: The evidence schema version this pipeline reads.
READ_VERSION = 1

#: The kit's schema module, beside ``reports/`` in a checkout and in an installed wheel alike.
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "conformance" / "evidence" / "schema.py"

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

    path: Path
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


def _load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("_cck_evidence_schema", path)
    if spec is None or spec.loader is None:
        raise ReportError(f"{path}: cannot be loaded as the evidence schema module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except (OSError, SyntaxError) as exc:
        raise ReportError(f"{path}: cannot be loaded as the evidence schema module: {exc}") from None
    return module


def load_schema(path: Path = SCHEMA_PATH) -> EvidenceSchema:
    """Load the schema module at ``path`` and check it is the version this pipeline reads."""
    module = _load_module(path)
    version = getattr(module, "SCHEMA_VERSION", None)
    if version != READ_VERSION:
        raise SchemaVersionError(path, version, READ_VERSION)
    types = tuple(getattr(module, "TYPES", ()))
    unknown = sorted(set(types) - set(SPARK_TYPES))
    if unknown:
        raise ReportError(f"{path}: field type(s) {', '.join(unknown)} have no Spark type in reports/_schema.py")
    records = {
        kind: tuple(FieldSpec(f.name, f.type, bool(f.nullable)) for f in fields)
        for kind, fields in module.RECORDS.items()
    }
    validate: Callable[[Mapping[str, Any], str], list[str]] = module.validate
    return EvidenceSchema(path=path, version=version, records=records, files=dict(module.FILES), validate=validate)
