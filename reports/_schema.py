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

Exploration evidence (``cck explore --evidence-dir``: ``summary.json``, ``examples.jsonl``, ``histories.jsonl``)
is written by ``conformance.explore``, which ``reports`` may not import, and has no ``kind`` or
``schema_version`` of its own; its tables are declared here (:data:`EXPLORE_RECORDS`), with where each value is
in the file's records (``FieldSpec.source``), and checked field by field like the suite's (:func:`field_problems`).
Each of its tables starts with ``exploration_id`` and ends with ``target``, both set by the reader.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
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
    "EXPLORE_FILES",
    "EXPLORE_RECORDS",
    "explore_struct",
    "field_problems",
    "field_value",
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
    #: Where the value is in a record when not at the top under ``name``: the keys into nested objects
    #: (exploration evidence only; the suite's records are flat).
    source: tuple[str, ...] = ()


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


# ---------------------------------------------------------------------------------------------- exploration

#: An exploration's files (``D/explore-<time>-seed<S>/``), by the table each is read into.  A directory holding
#: ``examples.jsonl`` is an exploration; ``summary.json`` is written last, so one without it did not finish.
EXPLORE_FILES: Mapping[str, str] = {
    "exploration": "summary.json",
    "explore_example": "examples.jsonl",
    "explore_history": "histories.jsonl",
}

_ID = FieldSpec("exploration_id", "string", False)

#: The exploration tables' fields as their files hold them (``exploration_id`` and ``target`` come first and last,
#: from the reader).  ``exploration`` also gets ``target_version`` and ``target_args`` from the summary's
#: ``target`` (the ``cck explore`` arguments naming it), which the reader checks itself.
EXPLORE_RECORDS: Mapping[str, tuple[FieldSpec, ...]] = {
    "exploration": (
        FieldSpec("target_version", "string", True),
        FieldSpec("target_args", "string", False),
        FieldSpec("seed", "long", False),
        FieldSpec("budget_s", "double", False),
        FieldSpec("max_examples", "int", True),
        FieldSpec("runs", "int", False),
        FieldSpec("kinds", "json", True),
        FieldSpec("found", "bool", False),
        FieldSpec("confirmed", "bool", False),
        FieldSpec("most_unconfirmed", "int", True, ("most_exposed", "unconfirmed")),
        FieldSpec("most_durable_sends", "int", True, ("most_exposed", "durable_sends")),
        FieldSpec("most_recent_durable_sends", "int", True, ("most_exposed", "recent_durable_sends")),
        FieldSpec("finding", "string", True),
        FieldSpec("example", "string", True),
        FieldSpec("replay", "string", True),
        FieldSpec("diagram", "string", True),
        FieldSpec("regression_case", "string", True),
        FieldSpec("finished", "timestamp", True),
    ),
    "explore_example": (
        FieldSpec("run", "int", False),
        FieldSpec("phase", "string", True),
        FieldSpec("at_s", "double", True),
        FieldSpec("kind", "string", False),
        FieldSpec("elapsed_s", "double", True),
        FieldSpec("example", "json", True),
        FieldSpec("summary", "string", True),
        FieldSpec("unconfirmed", "int", True, ("exposure", "unconfirmed")),
        FieldSpec("durable_sends", "int", True, ("exposure", "durable_sends")),
        FieldSpec("recent_durable_sends", "int", True, ("exposure", "recent_durable_sends")),
        FieldSpec("ops", "int", True),
        FieldSpec("checker_ok", "bool", True, ("checker", "ok")),
        FieldSpec("final_drain_complete", "bool", True, ("checker", "final_drain_complete")),
        FieldSpec("duplicates_allowed", "bool", True, ("checker", "duplicates_allowed")),
    ),
    "explore_history": (
        FieldSpec("run", "int", False),
        FieldSpec("index", "long", False),
        FieldSpec("process", "string", False),
        FieldSpec("type", "string", False),
        FieldSpec("f", "string", False),
        FieldSpec("value", "string", True),
        FieldSpec("time_ns", "long", False),
        FieldSpec("producer", "string", True),
        FieldSpec("seq", "long", True),
        FieldSpec("redelivered", "bool", True),
        FieldSpec("delivery_count", "int", True),
        FieldSpec("node", "string", True),
    ),
}
#: Fields of ``exploration`` the reader derives (not checked by :func:`field_problems`).
_DERIVED = frozenset({"target_version", "target_args"})


def explore_struct(kind: str) -> StructType:
    """The Spark schema of an exploration table: ``exploration_id``, the fields of :data:`EXPLORE_RECORDS`,
    ``target``."""
    return StructType([StructField(_ID.name, StringType(), False),
                       *struct_for(EXPLORE_RECORDS[kind]).fields])


_RANGES = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
_MISSING = object()


def field_value(record: Mapping[str, Any], field: FieldSpec) -> Any:
    """The field's value in ``record`` (None when absent or when an object on its way is)."""
    value: Any = record
    for key in field.source or (field.name,):
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind in _RANGES:
        low, high = _RANGES[kind]
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    if kind == "double":
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "timestamp":
        if not (isinstance(value, str) and value.endswith("Z")):
            return False
        try:
            datetime.fromisoformat(value[:-1] + "+00:00")
        except ValueError:
            return False
        return True
    try:  # json
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def field_problems(record: Mapping[str, Any], fields: tuple[FieldSpec, ...]) -> list[str]:
    """What is wrong with ``record`` against ``fields``, in the evidence schema's wording; [] if nothing.  Keys the
    fields do not name are ignored, as the evidence schema's readers ignore fields they do not know."""
    problems: list[str] = []
    for field in fields:
        if field.name in _DERIVED:
            continue
        path = field.source or (field.name,)
        holder: Any = record
        for depth, key in enumerate(path[:-1]):
            holder = None if holder is None else holder.get(key)
            if holder is not None and not isinstance(holder, Mapping):
                problems.append(f"field {'.'.join(path[:depth + 1])!r}: {holder!r} is not an object")
                break
        else:
            value = _MISSING if holder is None or path[-1] not in holder else holder[path[-1]]
            name = ".".join(path)
            if value is _MISSING or value is None:
                if not field.nullable:
                    problems.append(f"field {name!r} is {'missing' if value is _MISSING else 'null but not nullable'}")
            elif not _type_ok(field.type, value):
                problems.append(f"field {name!r}: {value!r} is not a {field.type}")
    return list(dict.fromkeys(problems))  # two fields of one object that is not one: said once
