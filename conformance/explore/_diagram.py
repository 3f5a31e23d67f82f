"""An exploration run's sequence diagram: the renderer of :mod:`conformance.sequence` (shared with the report's
case pages), with the example put in words by exploration's own model (the workload and the fault schedule)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..sequence import Diagram, RunRecords
from ..sequence import diagram as _draw
from ._model import ExampleError
from ._security_model import example_from_dict

__all__ = ["describe_example", "diagram"]


def describe_example(example: Mapping[str, Any] | None) -> str:
    """The example's one-line ``describe()``; its JSON when this model cannot read it."""
    if example is None:
        return "(example not known)"
    try:
        return example_from_dict(example).describe()
    except ExampleError:
        return json.dumps(example, sort_keys=True)


def diagram(records: RunRecords, *, max_rows: int = 400, context: int = 3) -> Diagram:
    """The rows of one run's sequence diagram (:func:`conformance.sequence.diagram`), the example described."""
    return _draw(records, max_rows=max_rows, context=context, describe=describe_example)
