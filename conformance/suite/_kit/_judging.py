"""The judging end of every disrupt → fill → judge scenario: whatever the block did (broke a link or a broker,
sent and received through it) and however it ended, the history is drained, judged and written to the
evidence, so a failed wire-level check still leaves the loss/duplication/order findings (issue 16).

A case's block is the disrupt and fill; its group provides those steps (``_reattach_kit.proxied_scenario`` and
``send_through_a_cut``; ``_restart_support.Disruption`` and ``connected_through``; the DTX cases' connection
before and after the restart)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from cck.conformance.evidence import CaseEvidence
from cck.conformance.oracles import History, HistoryResult, check
from cck.conformance.verdicts import CheckFailed

__all__ = ["judge_history", "judged", "judged_afterwards", "repeated"]

#: A step run after the block: a function or a coroutine function.
Step = Callable[[], Any]


@asynccontextmanager
async def judged_afterwards(*steps: Step) -> AsyncIterator[None]:
    """Run the block, then ``steps`` in order *however the block ended*: a case's final judgements (drain what
    the broker still holds, check the history, each writing its own evidence) are made even when a wire-level
    check in the block already failed, so the evidence of a failure holds every finding.

    A step may be a function or a coroutine function; the steps stop at the first that raises (a later step
    would judge what an unfinished one left half done).  The block's failure, if any, is raised with the
    failing step's message added as a note; otherwise the failing step's own error is raised."""
    failure: Exception | None = None
    try:
        yield
    except Exception as exc:  # noqa: BLE001  (re-raised below, after the steps)
        failure = exc
    for step in steps:
        try:
            outcome = step()
            if inspect.isawaitable(outcome):
                await outcome
        except Exception as exc:
            if failure is None:
                raise
            failure.add_note(f"and afterwards: {type(exc).__name__}: {exc}")
            break
    if failure is not None:
        raise failure


def judge_history(history: History, evidence: CaseEvidence, label: str = "", *,
                  allow_duplicates: bool = False) -> HistoryResult:
    """Check ``history`` and write it with its result to the evidence (under ``label``)."""
    result = check(history, allow_duplicates=allow_duplicates)
    evidence.history(history, result, label=label)
    return result


def repeated(*received: Sequence[str]) -> list[str]:
    """The keys that occur more than once across ``received`` (sorted)."""
    every = [key for keys in received for key in keys]
    return sorted({key for key in every if every.count(key) > 1})


def judged(history: History, evidence: CaseEvidence, *, label: str = "", before: Step | None = None,
           problems: list[str] | None = None, also: Callable[[], list[str]] | None = None,
           allow_duplicates: bool = False) -> AbstractAsyncContextManager[None]:
    """Around a scenario's block: afterwards, however it ended, run ``before`` (a drain of what the broker still
    holds into the history, the wire log into the evidence), then judge the history into the evidence.  The
    block's own failure is raised with the
    history's added as a note; otherwise ``problems`` (filled in by the block as it goes), the history's
    findings and ``also()`` (problems only the finished history shows) fail the case together."""
    found = problems if problems is not None else []

    def verdict() -> None:
        result = judge_history(history, evidence, label, allow_duplicates=allow_duplicates)
        every = [*found, *([] if result.ok else [result.explanation]), *(also() if also is not None else [])]
        if every:
            raise CheckFailed(" | ".join(every))

    return judged_afterwards(*([before] if before is not None else []), verdict)
