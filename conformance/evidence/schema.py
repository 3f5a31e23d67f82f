"""The evidence schema: the records a conformance run writes, as field tables, and a validator.

STANDARD LIBRARY ONLY, and no imports from ``conformance``: ``reports/`` imports this module (with
:mod:`conformance.clauses` and :mod:`conformance.sequence`, the only parts of ``conformance`` it may import;
``tests/test_boundaries.py`` holds it to that), so the report pipeline reads the schema the kit writes without
importing the kit.

Layout of one run (``<evidence-dir>/<run-id>/``)::

    run.json                one RUN record (written when the session ends)
    cases.jsonl             one CASE record per case, written as each case ends
    wire.jsonl              WIRE rows: decoded frames the fault proxy saw
    attempts.jsonl          ATTEMPT rows: connections the fault proxy accepted
    ends.jsonl              END rows: how each of those connections ended (absent in evidence older than it)
    history.jsonl           HISTORY rows: Jepsen-style operations (invoke/ok/fail/info)
    history_results.jsonl   HISTORY_RESULT rows: the history checker's result per history
    timing.jsonl            TIMING rows: one per judged attempt of a timing check
    notes.jsonl             NOTE rows: anything else a case kept (key, JSON value)

Every row carries ``kind``, ``schema_version`` and ``run_id``; every row but the run record carries
``case_id``.  Types: ``string``, ``int`` (32-bit), ``long`` (64-bit), ``double``, ``bool``,
``timestamp`` (ISO 8601 UTC text ending in ``Z``, e.g. ``2025-01-31T12:00:00.123456Z``) and ``json``
(any JSON value, kept as is).  Monotonic readings (``*_ns``) are ``time.monotonic_ns()`` of the run's
process: comparable within a run, not across runs.

Version policy: adding a nullable field keeps SCHEMA_VERSION; removing or renaming a field, changing
its type or making it non-nullable increments it.  Readers should ignore fields they do not know.
Adding a record kind (a file of its own) keeps it too: evidence without the file reads as none of those
rows, and a reader that does not know the kind never opens its file (``END`` came so).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "SCHEMA_VERSION",
    "TYPES",
    "Field",
    "RUN",
    "CASE",
    "WIRE",
    "ATTEMPT",
    "END",
    "HISTORY",
    "HISTORY_RESULT",
    "TIMING",
    "NOTE",
    "RECORDS",
    "FILES",
    "validate",
    "format_timestamp",
]

SCHEMA_VERSION = 1

TYPES = ("string", "int", "long", "double", "bool", "timestamp", "json")


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    nullable: bool = False
    doc: str = ""


def _common(*, case: bool = True) -> tuple[Field, ...]:
    fields = (
        Field("kind", "string", doc="the record kind: run, case, wire, attempt, end, history, history_result, timing, "
                                    "note"),
        Field("schema_version", "int"),
        Field("run_id", "string"),
    )
    return (*fields, Field("case_id", "string")) if case else fields


RUN: tuple[Field, ...] = (
    *_common(case=False),
    Field("target", "string", doc="url, reference or artemis"),
    Field("subject", "string", True, "what the run judged: broker, or client (absent in evidence older than "
                                     "subjects: broker)"),
    Field("client", "string", True, "the client under test of a client run: kit or artemis@<version>"),
    Field("target_version", "string", True, "the broker's version (for url: what the user declared)"),
    Field("protocol_version", "int", True, "the core protocol version of that broker version, when known"),
    Field("broker_url", "string", True),
    Field("strict", "bool", doc="whether SHOULD misses counted as FAIL"),
    Field("python", "string"),
    Field("pytest", "string"),
    Field("kit_version", "string"),
    Field("started", "timestamp"),
    Field("finished", "timestamp"),
    Field("exit_status", "int", True),
    Field("verdict_counts", "json", doc="verdict -> number of cases"),
    Field("settings", "json", doc="the run's resolved settings and where each came from (no password)"),
)

CASE: tuple[Field, ...] = (
    *_common(),
    Field("clause_id", "string"),
    Field("clause_level", "string", True, "MUST, SHOULD or MAY"),
    Field("subject", "string", True, "what the case judges: broker or client (absent in older evidence: broker)"),
    Field("client", "string", True, "the client under test (client cases): kit or artemis@<version>"),
    Field("checks", "string", doc="spec, implementation or both"),
    Field("group", "string"),
    Field("nodeid", "string"),
    Field("description", "string"),
    Field("expectation", "string"),
    Field("verdict", "string", doc="PASS, PASS_LENIENT, UNSUPPORTED, INDETERMINATE, FAIL or KIT_ERROR"),
    Field("reason", "string", True),
    Field("known_deviation", "string", True, "the reason of the known deviation the verdict matched"),
    Field("kit_error", "json", True, "for KIT_ERROR: {type, where}: the error's type and where in the kit it was "
                                     "raised (path:line in function)"),
    Field("deviation_stale", "bool", doc="a known deviation listed this case but did not reproduce"),
    Field("should_misses", "json", doc="list of SHOULD messages the broker missed"),
    Field("params", "json", True),
    Field("duration_s", "double"),
    Field("started", "timestamp"),
    Field("finished", "timestamp"),
)

_LABEL = Field("label", "string", True, "the case's name for the proxy or history the row came from")
_EXTRA = Field("extra", "json", True, "fields the source object had that this schema version does not know")

WIRE: tuple[Field, ...] = (
    *_common(),
    _LABEL,
    Field("ts_ns", "long"),
    Field("seen_ns", "long"),
    Field("conn", "int"),
    Field("direction", "string"),
    Field("seq", "long"),
    Field("channel", "long", True),
    Field("type", "string", doc="Artemis packet type name, or RAW"),
    Field("size", "int"),
    Field("confirmable", "bool"),
    Field("action", "string"),
    Field("rule", "string", True),
    Field("error", "string", True),
    Field("packet", "string", True, "the decoded packet's repr"),
    _EXTRA,
)

ATTEMPT: tuple[Field, ...] = (
    *_common(),
    _LABEL,
    Field("ts_ns", "long"),
    Field("conn", "int"),
    Field("outcome", "string"),
    Field("peer", "string"),
    Field("detail", "string", True),
    _EXTRA,
)

END: tuple[Field, ...] = (
    *_common(),
    _LABEL,
    Field("ts_ns", "long", doc="when the first side ended it (its FIN or reset reached the proxy, or the proxy "
                               "closed it)"),
    Field("conn", "int"),
    Field("by", "string", doc="who ended it first: client, broker or proxy"),
    Field("how", "string", doc="fin, reset or error"),
    Field("reason", "string", True, "the proxy's reason (a cut's rule, proxy stopped), a socket error's text, or "
                                    "that a blackholed connection's end was not passed on"),
    _EXTRA,
)

HISTORY: tuple[Field, ...] = (
    *_common(),
    _LABEL,
    Field("index", "long", doc="position of the operation in its history"),
    Field("process", "string"),
    Field("type", "string", doc="invoke, ok, fail or info"),
    Field("f", "string"),
    Field("value", "string", True),
    Field("time_ns", "long"),
    Field("producer", "string", True),
    Field("seq", "long", True),
    Field("redelivered", "bool", True),
    Field("delivery_count", "int", True),
    Field("node", "string", True),
    _EXTRA,
)

HISTORY_RESULT: tuple[Field, ...] = (
    *_common(),
    _LABEL,
    Field("ok", "bool", True),
    Field("explanation", "string", True),
    Field("result", "json", doc="the checker's whole result (counts and examples of each finding)"),
)

TIMING: tuple[Field, ...] = (
    *_common(),
    Field("name", "string", doc="the case's name for the judged schedule"),
    Field("run", "int", doc="0: the deciding check; 1, 2, ...: each run of a re-verification"),
    Field("ok", "bool", True, "the schedule's verdict"),
    Field("flaky", "bool", True, "passed only on re-verification"),
    Field("explanation", "string", True),
    Field("tolerance", "json", True),
    Field("expected_count", "int", True),
    Field("observed_count", "int", True),
    Field("count_mismatch", "string", True),
    Field("index", "int", True, "the attempt's position; null on a row for a schedule without samples"),
    Field("status", "string", True, "ok, early, late, missing, extra or unjudged"),
    Field("expected_ms", "double", True),
    Field("observed_ms", "double", True),
    Field("deviation_ms", "double", True),
    Field("allowed_ms", "double", True),
    Field("expected_offset_ms", "double", True),
    Field("observed_offset_ms", "double", True),
    _EXTRA,
)

NOTE: tuple[Field, ...] = (
    *_common(),
    Field("key", "string"),
    Field("value", "json", True),
)

RECORDS: Mapping[str, tuple[Field, ...]] = {
    "run": RUN,
    "case": CASE,
    "wire": WIRE,
    "attempt": ATTEMPT,
    "end": END,
    "history": HISTORY,
    "history_result": HISTORY_RESULT,
    "timing": TIMING,
    "note": NOTE,
}

#: The file each record kind is written to, inside the run's directory.
FILES: Mapping[str, str] = {
    "run": "run.json",
    "case": "cases.jsonl",
    "wire": "wire.jsonl",
    "attempt": "attempts.jsonl",
    "end": "ends.jsonl",
    "history": "history.jsonl",
    "history_result": "history_results.jsonl",
    "timing": "timing.jsonl",
    "note": "notes.jsonl",
}

_INT_RANGE = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


def format_timestamp(moment: datetime) -> str:
    """A datetime (naive ones are taken as local time) as this schema's timestamp text, in UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _type_problem(field: Field, value: Any) -> str | None:
    kind = field.type
    if kind == "string":
        ok = isinstance(value, str)
    elif kind in _INT_RANGE:
        low, high = _INT_RANGE[kind]
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    elif kind == "double":
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "timestamp":
        ok = isinstance(value, str) and value.endswith("Z") and _parses_as_time(value)
    else:  # json
        try:
            json.dumps(value, allow_nan=False)
            ok = True
        except (TypeError, ValueError):
            ok = False
    return None if ok else f"field {field.name!r}: {value!r} is not a {kind}"


def _parses_as_time(text: str) -> bool:
    try:
        datetime.fromisoformat(text[:-1] + "+00:00")
    except ValueError:
        return False
    return True


def validate(record: Mapping[str, Any], kind: str | None = None) -> list[str]:
    """Problems with ``record`` against the schema of its kind (its ``kind`` field unless given); [] if none."""
    kind = kind if kind is not None else record.get("kind")
    if not isinstance(kind, str) or kind not in RECORDS:
        return [f"unknown record kind {kind!r} (known: {', '.join(RECORDS)})"]
    problems: list[str] = []
    fields = RECORDS[kind]
    known = {f.name for f in fields}
    for field in fields:
        if field.name not in record:
            if not field.nullable:  # a nullable field may be absent: evidence older than the field reads it as null
                problems.append(f"field {field.name!r} is missing")
            continue
        value = record[field.name]
        if value is None:
            if not field.nullable:
                problems.append(f"field {field.name!r} is null but not nullable")
            continue
        problem = _type_problem(field, value)
        if problem:
            problems.append(problem)
    if record.get("kind") not in (None, kind):
        problems.append(f"field 'kind': {record.get('kind')!r}, expected {kind!r}")
    if "schema_version" in record and record["schema_version"] != SCHEMA_VERSION:
        problems.append(f"field 'schema_version': {record['schema_version']!r}, this schema is {SCHEMA_VERSION}")
    problems.extend(f"field {name!r} is not in schema {kind} v{SCHEMA_VERSION}" for name in record if name not in known)
    return problems
