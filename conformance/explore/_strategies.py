"""Hypothesis strategies for workloads, fault schedules and whole examples.

Shrinking works on what these draw: fewer operations and faults, smaller counts, earlier install points, the
first entry of each choice table (so tables list the simplest choice first).
"""

from __future__ import annotations

from hypothesis import strategies as st

from ._model import (
    CONNECTION_TTLS_MS,
    CUT_FRAME_TYPES,
    DELAY_TYPES,
    DROP_TYPES,
    DUPLICATE_TYPES,
    MAX_BATCH,
    MAX_CUT_AFTER,
    QUEUES,
    WINDOWS,
    XA_ACTIONS,
    XIDS,
    ClientConfig,
    Commit,
    CreateConsumer,
    CreateProducer,
    CutAfterCommands,
    CutAtFrame,
    DelayFrames,
    Direction,
    DropFrames,
    DuplicateFrames,
    Example,
    Fault,
    FaultSchedule,
    Operation,
    Receive,
    RefuseConnects,
    ResetReattach,
    Rollback,
    Send,
    Workload,
    Xa,
)

__all__ = ["client_configs", "examples", "fault_schedules", "faults", "operations", "workloads"]

_queues = st.integers(0, len(QUEUES) - 1)
_directions: st.SearchStrategy[Direction] = st.sampled_from(("c2s", "s2c"))
# The preferred (shrunk-to) window is 64 KiB, the usual one; -1 (no reattach at all) is the last choice.
_windows = st.sampled_from((64 * 1024, *(w for w in WINDOWS if w not in (64 * 1024, -1)), -1))


def client_configs() -> st.SearchStrategy[ClientConfig]:
    return st.builds(ClientConfig, window=_windows, connection_ttl_ms=st.sampled_from(CONNECTION_TTLS_MS[::-1]))


def operations() -> st.SearchStrategy[Operation]:
    """One operation; sends and receives first, as the simplest (shrinking prefers them)."""
    return st.one_of(
        # small batches first (shrinking prefers them), then batches long enough to keep writes in flight at a cut
        st.builds(Send, queue=_queues, count=st.one_of(st.integers(1, 3), st.integers(4, MAX_BATCH)),
                  durable=st.booleans().map(lambda b: not b),
                  blocking=st.booleans().map(lambda b: not b), tx=st.booleans()),
        st.builds(Receive, queue=_queues, count=st.integers(1, 3), tx=st.booleans()),
        st.builds(Commit),
        st.builds(Rollback),
        st.builds(CreateConsumer, queue=_queues, tx=st.booleans()),
        st.builds(CreateProducer, queue=_queues, tx=st.booleans()),
        st.builds(Xa, action=st.sampled_from(XA_ACTIONS), xid=st.integers(0, XIDS - 1), queue=_queues,
                  count=st.integers(1, 3), durable=st.booleans().map(lambda b: not b)),
    )


def workloads(max_operations: int = 8) -> st.SearchStrategy[Workload]:
    return st.builds(Workload, config=client_configs(),
                     operations=st.lists(operations(), min_size=1, max_size=max_operations).map(tuple))


def _typed(direction: str, table: dict[str, tuple[str, ...]]) -> st.SearchStrategy[str]:
    return st.sampled_from(table[direction])


@st.composite
def _cut_at_frame(draw: st.DrawFn, at: int) -> CutAtFrame:
    direction = draw(_directions)
    return CutAtFrame(draw(st.integers(0, 6)), direction, draw(_typed(direction, dict(CUT_FRAME_TYPES))), at)


@st.composite
def _drop(draw: st.DrawFn, at: int) -> DropFrames:
    direction = draw(_directions)
    return DropFrames(direction, draw(_typed(direction, dict(DROP_TYPES))), draw(st.integers(1, 2)), at)


@st.composite
def _delay(draw: st.DrawFn, at: int) -> DelayFrames:
    direction = draw(_directions)
    return DelayFrames(direction, draw(_typed(direction, dict(DELAY_TYPES))), draw(st.sampled_from((50, 200, 500))),
                       at)


@st.composite
def _duplicate(draw: st.DrawFn, at: int) -> DuplicateFrames:
    direction = draw(_directions)
    return DuplicateFrames(direction, draw(_typed(direction, dict(DUPLICATE_TYPES))), draw(st.integers(1, 3)), at)


def faults(max_at: int = 0) -> st.SearchStrategy[Fault]:
    """One fault installed before operation ``at`` <= ``max_at``; cuts first (they are what makes a reattach)."""
    return st.integers(0, max_at).flatmap(lambda at: st.one_of(
        # early cuts first; late ones land in a long batch, with many sends routed and not yet written
        st.builds(CutAfterCommands, n=st.one_of(st.integers(0, 12), st.integers(13, MAX_CUT_AFTER)),
                  direction=_directions, at=st.just(at)),
        _cut_at_frame(at),
        st.builds(ResetReattach, count=st.integers(1, 2), at=st.just(at)),
        st.builds(RefuseConnects, count=st.integers(1, 3), at=st.just(at)),
        _drop(at),
        _delay(at),
        _duplicate(at),
    ))


def fault_schedules(max_faults: int = 3, max_at: int = 0) -> st.SearchStrategy[FaultSchedule]:
    return st.builds(FaultSchedule, st.lists(faults(max_at), min_size=1, max_size=max_faults).map(tuple))


@st.composite
def examples(draw: st.DrawFn, max_operations: int = 8, max_faults: int = 3) -> Example:
    """A workload, then a schedule whose faults are installed before one of its operations."""
    workload = draw(workloads(max_operations))
    schedule = draw(fault_schedules(max_faults, max_at=len(workload.operations) - 1))
    return Example(workload, schedule)
