"""Writing a run's evidence as the versioned JSON Lines that :mod:`conformance.evidence.schema` describes."""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from . import schema
from ._recorder import CaseEvidence

__all__ = ["EvidenceWriter", "case_rows"]


def _jsonable(value: Any) -> Any:
    """``value`` as plain JSON (anything JSON cannot hold becomes its repr, so a case's odd note never
    loses the rest of the evidence)."""
    return json.loads(json.dumps(value, default=repr, allow_nan=False))


def _row(kind: str, base: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """A row of ``kind``: the schema's fields taken from ``base`` and ``data`` (missing ones null), and
    whatever else ``data`` holds kept under ``extra`` when the kind has that field."""
    fields = schema.RECORDS[kind]
    names = {f.name for f in fields}
    row: dict[str, Any] = {"kind": kind, **base}
    for field in fields:
        if field.name not in row:
            row[field.name] = data.get(field.name)
    if "extra" in names:
        extra = {k: v for k, v in data.items() if k not in names}
        row["extra"] = _jsonable(extra) if extra else None
    return row


def _timing_rows(base: Mapping[str, Any], timing: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    name = timing.get("name", "")
    results: list[Mapping[str, Any]] = [timing, *timing.get("runs", ())]
    for run, result in enumerate(results):
        head = {k: result.get(k) for k in ("ok", "flaky", "explanation", "expected_count", "observed_count",
                                           "count_mismatch")}
        head["tolerance"] = _jsonable(result.get("tolerance"))
        samples = result.get("samples") or [{}]
        for sample in samples:
            data = {**head, **{k: v for k, v in sample.items() if k != "ok"}}
            yield _row("timing", {**base, "name": name, "run": run}, data)


def case_rows(run_id: str, case_id: str, evidence: CaseEvidence) -> dict[str, list[dict[str, Any]]]:
    """The rows of one case's evidence, by record kind (the case record itself is not among them)."""
    base = {"schema_version": schema.SCHEMA_VERSION, "run_id": run_id, "case_id": case_id}
    history = []
    per_label: dict[str | None, int] = {}
    for op in evidence.history_ops:
        label = op.get("label")
        index = per_label.get(label, 0)
        per_label[label] = index + 1
        history.append(_row("history", {**base, "index": index}, op))
    return {
        "wire": [_row("wire", base, record) for record in evidence.wire_records],
        "attempt": [_row("attempt", base, record) for record in evidence.attempt_records],
        "end": [_row("end", base, record) for record in evidence.end_records],
        "history": history,
        "history_result": [
            _row("history_result", {**base, "label": result.get("label") or None, "result": _jsonable(result)}, result)
            for result in evidence.history_results
        ],
        "timing": [row for timing in evidence.timings for row in _timing_rows(base, timing)],
        "note": [_row("note", {**base, "key": key, "value": _jsonable(value)}, {}) for key, value in
                 evidence.notes.items()],
    }


class EvidenceWriter:
    """Appends a run's records under ``<root>/<run_id>/``; the directory is made on first use."""

    def __init__(self, root: Path, run_id: str) -> None:
        self.run_id = run_id
        self.directory = root / run_id

    def _append(self, kind: str, rows: Iterable[Mapping[str, Any]]) -> None:
        lines = [json.dumps(row, allow_nan=False, default=repr) + "\n" for row in rows]
        if not lines:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / schema.FILES[kind]).open("a", encoding="utf-8") as out:
            # several processes may append to one run (`cck run --jobs`): a record is written whole, under an
            # exclusive lock, never interleaved with another process's
            fcntl.flock(out, fcntl.LOCK_EX)
            out.writelines(lines)
            out.flush()

    def write_case(self, record: Mapping[str, Any], evidence: CaseEvidence | None) -> None:
        """One case's record (fields of :data:`schema.CASE` other than kind/version/run) and its evidence."""
        row = {"kind": "case", "schema_version": schema.SCHEMA_VERSION, "run_id": self.run_id, **record}
        row["params"] = _jsonable(row.get("params"))
        self._append("case", [row])
        if evidence is not None:
            for kind, rows in case_rows(self.run_id, str(record["case_id"]), evidence).items():
                self._append(kind, rows)

    def write_run(self, record: Mapping[str, Any]) -> Path:
        """The run record (fields of :data:`schema.RUN` other than kind/version/run), replacing any earlier one."""
        row = {"kind": "run", "schema_version": schema.SCHEMA_VERSION, "run_id": self.run_id, **record}
        row["settings"] = _jsonable(row.get("settings"))
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / schema.FILES["run"]
        path.write_text(json.dumps(row, indent=2, allow_nan=False) + "\n", encoding="utf-8")
        return path
