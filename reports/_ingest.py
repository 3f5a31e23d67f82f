"""Ingest: evidence runs (JSON Lines) -> validated rows with explicit schemas -> Parquet; bad rows -> quarantine.

Layout read: ``<evidence>/<run-id>/run.json`` and the ``*.jsonl`` files the schema's ``FILES`` names (any
depth below ``<evidence>``, so the tox layout ``<evidence>/<target>/<run-id>/`` works too), and allure-pytest's
``<run-id>/allure-results/*-result.json`` (table ``allure``, :mod:`reports._allure`).

What happens to bad input:

* A row that is not valid JSON (e.g. a truncated last line), not an object, of another
  ``schema_version``, of the wrong kind, with a missing required field, a wrong type or the wrong
  ``run_id`` is **quarantined**: one quarantine row (file, line, reason) and the job goes on.  Fields the
  schema does not know are ignored (the schema's version policy: readers ignore unknown fields).
* An allure result file that is not JSON or lacks its uuid, name or a known status is quarantined (line 0,
  kind ``allure``).
* A run whose ``run.json`` is missing, not JSON or invalid is quarantined **as a whole** (one row naming
  ``run.json``; its other files are not read): without its target, its rows cannot be placed.
* A run whose ``run.json`` declares a ``schema_version`` this pipeline cannot read is an **error**
  (:class:`SchemaVersionError` naming the file and the version) and nothing is written: the whole run
  was written by another writer version, and quietly quarantining every row of it would report a
  matrix with a run missing.  Per-row quarantine is for damage inside a run this pipeline can read.

Explorations (``cck explore --evidence-dir``) are read too: every directory below ``<evidence>`` holding
``examples.jsonl`` is one, its ``summary.json`` one row of the ``exploration`` table (read here, on the driver),
``examples.jsonl`` and ``histories.jsonl`` the rows of ``explore_example`` and ``explore_history`` (on the
executors, a task per file), checked against :data:`reports._schema.EXPLORE_RECORDS` with the same quarantine:
a bad line is one quarantine row, a missing or unreadable ``summary.json`` refuses the exploration as a whole
(line 0, kind ``exploration``).  An exploration's own run directories (``minimal/``, ``confirmation/``,
``kit-error-<n>/``) and a ``--replay`` run's (``example.json`` beside ``findings.json``) hold ``history.jsonl`` and
``wire.jsonl`` of exploration's format, not the suite's: they are not runs, and are not read as such.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from ._allure import ALLURE_STRUCT, RESULT_SUFFIX, parse_allure_file
from ._errors import EvidenceError, SchemaVersionError
from ._schema import (
    EXPLORE_FILES,
    EXPLORE_RECORDS,
    EvidenceSchema,
    FieldSpec,
    explore_struct,
    field_problems,
    field_value,
)

__all__ = [
    "QUARANTINE_STRUCT",
    "Quarantined",
    "RunFile",
    "Extracted",
    "discover_runs",
    "discover_explorations",
    "exploration_id",
    "read_run_record",
    "read_exploration",
    "parse_line",
    "parse_file",
    "parse_explore_line",
    "parse_explore_file",
    "extract",
    "load",
    "read_tables",
    "write_quarantine",
]

#: One quarantined row: where it was and why it was refused.
QUARANTINE_STRUCT = StructType([
    StructField("file", StringType(), False),
    StructField("line", IntegerType(), False),
    StructField("run_id", StringType(), True),
    StructField("kind", StringType(), True),
    StructField("reason", StringType(), False),
])


@dataclass(frozen=True)
class Quarantined:
    file: str
    line: int
    run_id: str | None
    kind: str | None
    reason: str


@dataclass(frozen=True)
class RunFile:
    """One evidence file to read: which run, which kind, where (``relative`` is what reports show)."""

    path: str
    relative: str
    kind: str
    run_id: str
    target: str


@dataclass(frozen=True)
class Extracted:
    """What extract produced: the runs table, one table per record kind, and the quarantine."""

    runs: DataFrame
    tables: Mapping[str, DataFrame]
    quarantine: DataFrame
    run_count: int
    #: Runs quarantined as a whole (their run.json was missing or invalid).
    runs_quarantined: tuple[Quarantined, ...]
    #: The parsed files, persisted so rows and quarantine come from one read (unpersist when loaded).
    persisted: tuple[DataFrame, ...] = ()
    #: Every run's ``allure-results`` directory that holds results (for the allure HTML report).
    allure_dirs: tuple[Path, ...] = ()
    #: The explorations' summaries (the ``exploration`` table; its runs' rows are ``tables["explore_example"]``
    #: and ``tables["explore_history"]``), how many were read, and each one's directory by its ID.
    explorations: DataFrame | None = None
    exploration_count: int = 0
    exploration_dirs: Mapping[str, Path] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- rows


def _convert(spec: FieldSpec, value: Any) -> Any:
    """A validated JSON value as the Python value Spark's type for the field takes."""
    if value is None:
        return None
    if spec.type == "timestamp":
        return datetime.fromisoformat(value[:-1] + "+00:00")
    if spec.type == "json":
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    if spec.type == "double":
        return float(value)
    return value


def parse_record(record: Any, kind: str, fields: tuple[FieldSpec, ...], schema: EvidenceSchema,
                 run_id: str | None) -> tuple[Any, ...] | str:
    """A decoded JSON value as a row tuple in ``fields`` order, or the reason it is refused."""
    if not isinstance(record, dict):
        return f"not a JSON object but {type(record).__name__}"
    if record.get("schema_version") != schema.version:
        return f"schema_version {record.get('schema_version')!r}, this pipeline reads {schema.version}"
    known = {f.name for f in fields}
    problems = schema.validate({k: v for k, v in record.items() if k in known}, kind)
    if problems:
        return "; ".join(problems)
    if run_id is not None and record["run_id"] != run_id:
        return f"run_id {record['run_id']!r} is not its run's ({run_id!r})"
    return tuple(_convert(f, record.get(f.name)) for f in fields)  # an absent nullable field: null


@dataclass(frozen=True)
class _Refused:
    reason: str


def _decode(raw: bytes) -> Any:
    """One JSON Lines line's value, :class:`_Refused` with why it is not one, or None for a blank line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _Refused(f"not UTF-8: {exc.reason} at byte {exc.start}")
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        return _Refused(f"not JSON (truncated?): {exc}")


def parse_line(raw: bytes, kind: str, fields: tuple[FieldSpec, ...], schema: EvidenceSchema,
               run_id: str | None) -> tuple[Any, ...] | str | None:
    """One JSON Lines line as a row tuple, the reason it is refused, or None for a blank line."""
    record = _decode(raw)
    if record is None or isinstance(record, _Refused):
        return None if record is None else record.reason
    return parse_record(record, kind, fields, schema, run_id)


def parse_file(run_file: RunFile,
               schema: EvidenceSchema) -> Iterator[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]]:
    """Every line of one evidence file as (row, None) or (None, quarantine row); runs on the executors (the
    schema travels with the task; its ``validate`` by reference to the schema module, imported there)."""
    fields = schema.records[run_file.kind]
    with open(run_file.path, "rb") as lines:
        for number, raw in enumerate(lines, start=1):
            parsed = parse_line(raw, run_file.kind, fields, schema, run_file.run_id)
            if parsed is None:
                continue
            if isinstance(parsed, str):
                yield None, (run_file.relative, number, run_file.run_id, run_file.kind, parsed)
            else:
                yield (*parsed, run_file.target), None


def parse_explore_line(raw: bytes, fields: tuple[FieldSpec, ...]) -> tuple[Any, ...] | str | None:
    """One line of an exploration's JSON Lines file as the values of ``fields``, the reason it is refused, or None
    for a blank line."""
    record = _decode(raw)
    if record is None or isinstance(record, _Refused):
        return None if record is None else record.reason
    if not isinstance(record, dict):
        return f"not a JSON object but {type(record).__name__}"
    problems = field_problems(record, fields)
    if problems:
        return "; ".join(problems)
    return tuple(_convert(spec, field_value(record, spec)) for spec in fields)


def parse_explore_file(run_file: RunFile) -> Iterator[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]]:
    """Every line of an exploration's ``examples.jsonl`` or ``histories.jsonl`` (``run_file.run_id`` is the
    exploration's ID) as (row, None) or (None, quarantine row); runs on the executors."""
    fields = EXPLORE_RECORDS[run_file.kind]
    with open(run_file.path, "rb") as lines:
        for number, raw in enumerate(lines, start=1):
            parsed = parse_explore_line(raw, fields)
            if parsed is None:
                continue
            if isinstance(parsed, str):
                yield None, (run_file.relative, number, run_file.run_id, run_file.kind, parsed)
            else:
                yield (run_file.run_id, *parsed, run_file.target), None


#: One file's lines as (row, None) or (None, quarantine row): what the executors run per file.
_Parser = Callable[[RunFile], Iterator[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]]]


# ---------------------------------------------------------------------------------------------- runs


def _check_directory(evidence: Path) -> None:
    if not evidence.exists():
        raise EvidenceError(evidence, "evidence directory does not exist")
    if not evidence.is_dir():
        raise EvidenceError(evidence, "evidence path is not a directory")


def discover_explorations(evidence: Path) -> list[Path]:
    """Every exploration directory below ``evidence`` (or ``evidence`` itself): one holding ``examples.jsonl``."""
    _check_directory(evidence)
    name = EXPLORE_FILES["explore_example"]
    return sorted({path.parent for path in evidence.rglob(name) if path.is_file()})


def _exploration_part(directory: Path, explorations: Sequence[Path]) -> bool:
    """Whether ``directory`` is an exploration's or inside one, or a ``--replay`` run's evidence."""
    if (directory / "example.json").is_file() and (directory / "findings.json").is_file():
        return True
    return any(directory == e or e in directory.parents for e in explorations)


def discover_runs(evidence: Path, schema: EvidenceSchema) -> list[Path]:
    """Every run directory below ``evidence``: a directory holding run.json or any file of the schema's, but not
    one of exploration's (:func:`discover_explorations`; its run directories hold files of those names)."""
    _check_directory(evidence)
    names = set(schema.files.values())
    found = {path.parent for name in names for path in evidence.rglob(name) if path.is_file()}
    explorations = discover_explorations(evidence)
    return sorted(directory for directory in found if not _exploration_part(directory, explorations))


def exploration_id(directory: Path, evidence: Path) -> str:
    """An exploration's ID: its directory's path below ``evidence`` (its name when it is ``evidence``)."""
    relative = directory.relative_to(evidence).as_posix()
    return directory.name if relative == "." else relative


def read_run_record(path: Path, schema: EvidenceSchema, evidence: Path) -> tuple[Any, ...] | Quarantined:
    """A run's ``run.json`` as a row tuple of the run table, or the quarantine row that refuses the run.

    Raises :class:`SchemaVersionError` when it declares a schema version this pipeline cannot read."""
    relative = path.relative_to(evidence).as_posix()
    run_id = path.parent.name

    def refuse(reason: str) -> Quarantined:
        return Quarantined(relative, 0, run_id, "run", reason + " (the whole run is skipped)")

    if not path.is_file():
        return refuse("no run.json (the session did not finish?)")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return refuse(f"not JSON: {exc}")
    if not isinstance(record, dict):
        return refuse(f"not a JSON object but {type(record).__name__}")
    if "schema_version" not in record:
        return refuse("field 'schema_version' is missing")
    if record["schema_version"] != schema.version:
        raise SchemaVersionError(path, record["schema_version"], schema.version)
    parsed = parse_record(record, "run", schema.records["run"], schema, run_id)
    if isinstance(parsed, str):
        return refuse(parsed)
    return parsed


def read_exploration(directory: Path, evidence: Path) -> tuple[Any, ...] | Quarantined:
    """An exploration's ``summary.json`` as a row of the ``exploration`` table, or the quarantine row that refuses
    the exploration (its other files are then not read: without the summary its runs have no target)."""
    ident = exploration_id(directory, evidence)
    path = directory / EXPLORE_FILES["exploration"]
    relative = path.relative_to(evidence).as_posix()

    def refuse(reason: str) -> Quarantined:
        return Quarantined(relative, 0, ident, "exploration", reason + " (the whole exploration is skipped)")

    if not path.is_file():
        return refuse("no summary.json (the exploration did not finish writing its evidence?)")
    try:
        record = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        return refuse(f"cannot be read: {exc.strerror or exc}")
    except UnicodeDecodeError as exc:
        return refuse(f"not UTF-8: {exc.reason} at byte {exc.start}")
    except json.JSONDecodeError as exc:
        return refuse(f"not JSON: {exc}")
    if not isinstance(record, dict):
        return refuse(f"not a JSON object but {type(record).__name__}")
    fields = EXPLORE_RECORDS["exploration"]
    problems = field_problems(record, fields)
    given: Any = record.get("target")
    args = [arg for arg in given if isinstance(arg, str)] if isinstance(given, list) else []
    if not isinstance(given, list) or len(args) != len(given):
        problems.insert(0, "field 'target' is missing" if given is None else f"field 'target': {given!r} is not a "
                                                                               "list of strings")
    elif "--target" not in args[:-1]:
        problems.insert(0, f"field 'target': {args!r} names no --target")
    if problems:
        return refuse("; ".join(problems))
    version = args[args.index("--artemis-version") + 1] if "--artemis-version" in args[:-1] else None
    derived = {"target_version": version, "target_args": shlex.join(args)}
    values = [derived[spec.name] if spec.name in derived else _convert(spec, field_value(record, spec))
              for spec in fields]
    return (ident, *values, args[args.index("--target") + 1])


# ---------------------------------------------------------------------------------------------- jobs


def extract(spark: SparkSession, evidence: Path, schema: EvidenceSchema) -> Extracted:
    """Read every run below ``evidence`` into DataFrames with the schema's explicit structs (lazy)."""
    runs: list[tuple[Any, ...]] = []
    refused: list[Quarantined] = []
    files: list[RunFile] = []
    allure_dirs: list[Path] = []
    run_struct = schema.struct("run")
    target_at = run_struct.fieldNames().index("target")
    run_id_at = run_struct.fieldNames().index("run_id")
    explorations: list[tuple[Any, ...]] = []
    exploration_dirs: dict[str, Path] = {}
    for directory in discover_runs(evidence, schema):
        row = read_run_record(directory / schema.files["run"], schema, evidence)
        if isinstance(row, Quarantined):
            refused.append(row)
            continue
        runs.append(row)
        for kind, name in schema.files.items():
            path = directory / name
            if kind != "run" and path.is_file():
                files.append(RunFile(str(path.resolve()), path.relative_to(evidence).as_posix(), kind,
                                     row[run_id_at], row[target_at]))
        results = sorted((directory / "allure-results").glob("*" + RESULT_SUFFIX))
        if results:
            allure_dirs.append(directory / "allure-results")
        files.extend(RunFile(str(path.resolve()), path.relative_to(evidence).as_posix(), "allure",
                             row[run_id_at], row[target_at]) for path in results)

    for directory in discover_explorations(evidence):
        summary = read_exploration(directory, evidence)
        if isinstance(summary, Quarantined):
            refused.append(summary)
            continue
        explorations.append(summary)
        ident, target = summary[0], summary[-1]
        exploration_dirs[ident] = directory
        for kind, name in EXPLORE_FILES.items():
            path = directory / name
            if kind != "exploration" and path.is_file():
                files.append(RunFile(str(path.resolve()), path.relative_to(evidence).as_posix(), kind, ident, target))

    if not runs and not refused and not explorations:
        raise EvidenceError(evidence, "no evidence runs found (expected <run-id>/run.json and *.jsonl below it, or "
                                      "an exploration's summary.json and examples.jsonl)")
    runs_df = spark.createDataFrame(runs, run_struct)
    tables: dict[str, DataFrame] = {}
    persisted: list[DataFrame] = []
    quarantines: list[DataFrame] = [spark.createDataFrame(
        [(q.file, q.line, q.run_id, q.kind, q.reason) for q in refused], QUARANTINE_STRUCT)]
    context = spark.sparkContext
    parsers: dict[str, tuple[StructType, _Parser]] = {
        kind: (schema.struct(kind), lambda f: parse_file(f, schema)) for kind in schema.records if kind != "run"}
    parsers["allure"] = (ALLURE_STRUCT, lambda f: parse_allure_file(f.path, f.relative, f.run_id, f.target))
    for kind in EXPLORE_FILES:
        if kind != "exploration":
            parsers[kind] = (explore_struct(kind), parse_explore_file)
    for kind, (struct, parse) in parsers.items():
        mine = [f for f in files if f.kind == kind]
        if not mine:
            tables[kind] = spark.createDataFrame([], struct)
            continue
        slices = max(1, min(len(mine), context.defaultParallelism * 4))
        both = spark.createDataFrame(context.parallelize(mine, slices).flatMap(parse), StructType([
            StructField("row", struct, True),
            StructField("bad", QUARANTINE_STRUCT, True),
        ])).persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(both)
        tables[kind] = both.where("row IS NOT NULL").select("row.*")
        quarantines.append(both.where("bad IS NOT NULL").select("bad.*"))
    quarantine = quarantines[0]
    for more in quarantines[1:]:
        quarantine = quarantine.unionByName(more)
    return Extracted(runs_df, tables, quarantine, len(runs), tuple(refused), tuple(persisted), tuple(allure_dirs),
                     spark.createDataFrame(explorations, explore_struct("exploration")), len(explorations),
                     exploration_dirs)


def _partitions(kind: str) -> tuple[str, ...]:
    """The columns a stored table is partitioned by: a run's and its target; an exploration's target (its ID is a
    path)."""
    return ("target",) if kind in EXPLORE_FILES else ("run_id", "target")


def load(extracted: Extracted, data: Path) -> None:
    """Write the runs and every kind's rows as Parquet under ``data/<kind>/run_id=.../target=.../``, and, when the
    evidence has explorations, their tables under ``data/<kind>/target=.../`` (without, :func:`read_tables` reads
    them empty)."""
    stored = {"run": extracted.runs, **extracted.tables}
    if extracted.explorations is not None:
        stored["exploration"] = extracted.explorations
    for kind, frame in stored.items():
        if kind in EXPLORE_FILES and not extracted.exploration_count:
            continue
        frame.write.mode("overwrite").partitionBy(*_partitions(kind)).parquet(str(data / kind))


def read_tables(spark: SparkSession, data: Path, schema: EvidenceSchema) -> dict[str, DataFrame]:
    """The stored tables, read back with their explicit schemas (never inferred), columns in schema order."""
    tables: dict[str, DataFrame] = {}
    structs = {kind: schema.struct(kind) for kind in schema.records}
    explore = {kind: explore_struct(kind) for kind in EXPLORE_FILES}
    for kind, struct in {**structs, "allure": ALLURE_STRUCT, **explore}.items():
        path = data / kind
        if any(path.glob(f"{_partitions(kind)[0]}=*")):
            tables[kind] = spark.read.schema(struct).parquet(str(path)).select(*struct.fieldNames())
        else:
            tables[kind] = spark.createDataFrame([], struct)
    return tables


def write_quarantine(quarantine: DataFrame, path: Path) -> int:
    """The quarantine as JSON Lines (file, line, run_id, kind, reason), in file and line order; its row count."""
    count = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for row in quarantine.orderBy("file", "line").toLocalIterator():
            out.write(json.dumps(row.asDict(), ensure_ascii=False) + "\n")
            count += 1
    return count
