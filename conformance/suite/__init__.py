"""The conformance suite: one module per case group (run with ``pytest --pyargs conformance.suite``).

Besides the cases, the timing self-check ``cck timing-check`` runs (:func:`timing_check`)."""

from __future__ import annotations

from ._backoff_skew import summary, timing_check

__all__ = ["timing_check", "summary"]
