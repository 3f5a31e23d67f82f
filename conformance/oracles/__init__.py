"""Oracles: judge what a run did, given what the configuration says it must do (design §3).

- Timing: :func:`expected_reconnect_schedule` and friends compute, from a :class:`RetryPolicy`, when
  attempts must happen (notes §11, §12.1); :func:`check_schedule` judges measured attempt times
  against that with a two-sided :class:`Tolerance`; :func:`reverify` re-runs a failing timing check
  alone before believing it.
- Histories: :class:`History` records Jepsen-style operations (invoke/ok/fail/info) and
  :func:`check` finds lost, duplicated and unexpected messages, per-producer order violations,
  redelivery-accounting mismatches and acks that did not stick, in one O(n) pass.

Pure computation: no sockets, no clocks of their own, no files. See docs/oracles.md.
"""

from ._history import ACK, RECEIVE, SEND, History, HistoryError, Op, OpType
from ._history_check import (
    AckLost,
    Duplicate,
    Findings,
    HistoryResult,
    Lost,
    OrderViolation,
    RedeliveryMismatch,
    Unexpected,
    check,
)
from ._retry import (
    Attempt,
    RetryPolicy,
    expected_broadcast_schedule,
    expected_initial_connect_schedule,
    expected_reconnect_schedule,
)
from ._timing import (
    DEFAULT_TOLERANCE,
    FIRST_ATTEMPT_REACTION_MS,
    SampleStatus,
    TimingResult,
    TimingSample,
    Tolerance,
    areverify,
    check_schedule,
    reverify,
)

__all__ = [
    # timing: expectations
    "RetryPolicy",
    "Attempt",
    "expected_reconnect_schedule",
    "expected_initial_connect_schedule",
    "expected_broadcast_schedule",
    # timing: judgement
    "Tolerance",
    "DEFAULT_TOLERANCE",
    "SampleStatus",
    "TimingSample",
    "TimingResult",
    "check_schedule",
    "FIRST_ATTEMPT_REACTION_MS",
    "reverify",
    "areverify",
    # histories
    "Op",
    "OpType",
    "History",
    "HistoryError",
    "SEND",
    "RECEIVE",
    "ACK",
    "check",
    "HistoryResult",
    "Findings",
    "Lost",
    "Duplicate",
    "Unexpected",
    "OrderViolation",
    "RedeliveryMismatch",
    "AckLost",
]
