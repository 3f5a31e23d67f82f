"""Evidence of a conformance run: what each case records (:class:`CaseEvidence`) and the versioned JSON Lines
it is written as (:mod:`conformance.evidence.schema`, which ``reports/`` reads by file path without importing
``conformance``; :class:`EvidenceWriter` writes it)."""

from __future__ import annotations

from . import schema
from ._recorder import CaseEvidence, ShouldMiss
from ._writer import EvidenceWriter, case_rows

__all__ = ["CaseEvidence", "ShouldMiss", "EvidenceWriter", "case_rows", "schema"]
