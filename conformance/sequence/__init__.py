"""Sequence diagrams of a run's wire log: client, fault proxy and broker lanes, one arrow per frame, the proxy's
fault actions, the connections, the history's operations and the anomaly, as a standalone SVG or plain text.

Pure functions of evidence records (the JSON objects of ``wire.jsonl``, ``attempts.jsonl``, ``ends.jsonl``,
``history.jsonl``, ``timeline.jsonl`` and ``findings.json``): :func:`diagram` makes the rows, :func:`render_svg` and
:func:`render_text` draw them, :func:`load_records` reads a run's directory.  Fault exploration draws its minimal
runs with them (``conformance.explore``, docs/exploration.md) and the report draws a case's wire log around its
fault (``reports._story``, docs/reports.md).

STANDARD LIBRARY ONLY, and nothing else of the kit: ``reports`` imports this package (with the evidence schema and
the clause table; ``tests/test_boundaries.py`` holds it to that), so both draw with one renderer.
"""

from __future__ import annotations

from ._rows import CHATTER, Diagram, Row, RowKind, RunRecords, diagram, frame_facts, load_records, ms_label
from ._svg import render_svg
from ._text import render_text

__all__ = ["CHATTER", "Diagram", "Row", "RowKind", "RunRecords", "diagram", "frame_facts", "load_records",
           "ms_label", "render_svg", "render_text"]
