"""The PySpark evidence pipeline: conformance runs' evidence -> Parquet -> matrix, timing compliance,
delivery audit and clause coverage -> a static site.

Command line: ``cck report --evidence DIR --out DIR [--master URL]`` (docs/reports.md).

The jobs are pure ``DataFrame -> DataFrame`` functions (:func:`case_verdicts`, :func:`conformance_matrix`,
:func:`group_summary`, :func:`column_diff`, :func:`case_sequences`, :func:`column_trends`,
:func:`timing_attempts`, :func:`timing_summary`, :func:`timing_outliers`, :func:`delivery_audit`,
:func:`audit_findings`, :func:`clause_coverage`) over tables with explicit schemas (:func:`load_schema`).  This
module imports pyspark only when one of them is used, so ``python -m cck.reports --help`` and the errors work without
it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._errors import EvidenceError, ReportError, SchemaVersionError

if TYPE_CHECKING:
    from ._audit import audit_findings, delivery_audit
    from ._coverage import clause_coverage, read_clause_table
    from ._diff import column_diff
    from ._groups import group_summary
    from ._ingest import extract, load, read_tables
    from ._matrix import case_verdicts, conformance_matrix
    from ._pipeline import build_report
    from ._schema import READ_VERSION, EvidenceSchema, load_schema
    from ._spark import spark_session
    from ._synth import Rates, write_evidence
    from ._timing import timing_attempts, timing_outliers, timing_summary
    from ._trends import case_sequences, column_trends
    from ._verdicts import SUBJECTS, VERDICTS

__all__ = [
    "ReportError",
    "EvidenceError",
    "SchemaVersionError",
    "READ_VERSION",
    "EvidenceSchema",
    "load_schema",
    "spark_session",
    "extract",
    "load",
    "read_tables",
    "SUBJECTS",
    "VERDICTS",
    "case_verdicts",
    "conformance_matrix",
    "group_summary",
    "column_diff",
    "case_sequences",
    "column_trends",
    "timing_attempts",
    "timing_summary",
    "timing_outliers",
    "delivery_audit",
    "audit_findings",
    "read_clause_table",
    "clause_coverage",
    "build_report",
    "Rates",
    "write_evidence",
]

_LAZY = {
    "READ_VERSION": "_schema", "EvidenceSchema": "_schema", "load_schema": "_schema",
    "spark_session": "_spark",
    "extract": "_ingest", "load": "_ingest", "read_tables": "_ingest",
    "SUBJECTS": "_verdicts", "VERDICTS": "_verdicts",
    "case_verdicts": "_matrix", "conformance_matrix": "_matrix",
    "group_summary": "_groups", "column_diff": "_diff", "case_sequences": "_trends", "column_trends": "_trends",
    "timing_attempts": "_timing", "timing_summary": "_timing", "timing_outliers": "_timing",
    "delivery_audit": "_audit", "audit_findings": "_audit",
    "read_clause_table": "_coverage", "clause_coverage": "_coverage",
    "build_report": "_pipeline",
    "Rates": "_synth", "write_evidence": "_synth",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'reports' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
