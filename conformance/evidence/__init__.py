"""Evidence of a conformance run: what each case records (:class:`CaseEvidence`) and the versioned JSON Lines
it is written as (:mod:`conformance.evidence.schema`; :class:`EvidenceWriter` writes it).

Standard library only, all of it: ``reports/`` imports :mod:`conformance.evidence.schema` (and so this
package), the one part of ``conformance`` besides :mod:`conformance.clauses` it may import."""

from __future__ import annotations

from . import schema
from ._recorder import CaseEvidence, ShouldMiss
from ._writer import EvidenceWriter, case_rows

__all__ = ["CaseEvidence", "ShouldMiss", "EvidenceWriter", "case_rows", "schema"]
