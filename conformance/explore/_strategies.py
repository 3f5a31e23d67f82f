"""Hypothesis strategies for workloads, fault schedules and whole examples.

Shrinking works on what these draw: fewer operations and faults, smaller counts, earlier install points, the
first entry of each choice table (so tables list the simplest choice first).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from ._model import (
    CONNECTION_TTLS_MS,
    CUT_FRAME_TYPES,
    DELAY_TYPES,
    DROP_TYPES,
    DUPLICATE_TYPES,
    INITIAL_CONNECT_ATTEMPTS,
    MAX_BATCH,
    MAX_CUT_AFTER,
    MAX_OPERATIONS,
    MAX_REFUSE_INITIAL,
    MAX_RETRY_INTERVALS_MS,
    QUEUES,
    RECONNECT_ATTEMPTS,
    RETRY_INTERVAL_MULTIPLIERS,
    RETRY_INTERVALS_MS,
    WINDOWS,
    XA_ACTIONS,
    XIDS,
    ClientConfig,
    Commit,
    CreateConsumer,
    CreateExistingQueue,
    CreateProducer,
    CutAfterCommands,
    CutAtFrame,
    CutHalfOpen,
    CutSettled,
    DelayFrames,
    Direction,
    DropFrames,
    DuplicateFrames,
    Example,
    Fault,
    FaultSchedule,
    Idle,
    Operation,
    Receive,
    RefuseConnects,
    ResetReattach,
    RestartBroker,
    Rollback,
    Send,
    Workload,
    Xa,
)
from ._restart import RESTART_ONE_IN

__all__ = ["backoffs", "client_configs", "examples", "fault_schedules", "faults", "gave_up", "operations",
           "reconnections", "settled_cuts", "tx_rounds", "window_fills", "workloads", "xa_completions", "xa_rounds"]

_queues = st.integers(0, len(QUEUES) - 1)
_directions: st.SearchStrategy[Direction] = st.sampled_from(("c2s", "s2c"))
# The preferred (shrunk-to) window is 64 KiB, the usual one; -1 (no reattach at all) is the last choice.
_windows = st.sampled_from((64 * 1024, *(w for w in WINDOWS if w not in (64 * 1024, -1)), -1))


# Reconnecting forever is drawn as often as all finite counts together: a client that gives up ends the workload's
# sessions, which the history oracles (other than the client's own rules) then learn nothing more from.
_reconnect_attempts = st.sampled_from((RECONNECT_ATTEMPTS[0],) * (len(RECONNECT_ATTEMPTS) - 1) + RECONNECT_ATTEMPTS)


def reconnections() -> st.SearchStrategy[dict[str, Any]]:
    """The client's reconnection schedule, as :class:`ClientConfig` fields."""
    return st.fixed_dictionaries({"retry_interval_ms": st.sampled_from(RETRY_INTERVALS_MS),
                                  "retry_interval_multiplier": st.sampled_from(RETRY_INTERVAL_MULTIPLIERS),
                                  "max_retry_interval_ms": st.sampled_from(MAX_RETRY_INTERVALS_MS),
                                  "reconnect_attempts": _reconnect_attempts,
                                  "initial_connect_attempts": st.sampled_from(INITIAL_CONNECT_ATTEMPTS)})


def client_configs(reconnection: bool = True) -> st.SearchStrategy[ClientConfig]:
    """A configuration; without ``reconnection`` the reconnection schedule is the first choice of each table."""
    base = st.builds(ClientConfig, window=_windows, connection_ttl_ms=st.sampled_from(CONNECTION_TTLS_MS[::-1]))
    if not reconnection:
        return base
    return st.tuples(base, reconnections()).map(lambda pair: dataclasses.replace(pair[0], **pair[1]))


def operations() -> st.SearchStrategy[Operation]:
    """One operation; sends and receives first, as the simplest (shrinking prefers them)."""
    return st.one_of(
        # small batches first (shrinking prefers them), then batches long enough to keep writes in flight at a cut
        st.builds(Send, queue=_queues, count=st.one_of(st.integers(1, 3), st.integers(4, MAX_BATCH)),
                  durable=st.booleans().map(lambda b: not b),
                  blocking=st.booleans().map(lambda b: not b), tx=st.booleans()),
        st.builds(Receive, queue=_queues, count=st.integers(1, 3), tx=st.booleans(),
                  ack=st.booleans().map(lambda b: not b)),
        st.builds(Commit),
        st.builds(Rollback),
        st.builds(CreateConsumer, queue=_queues, tx=st.booleans()),
        st.builds(CreateProducer, queue=_queues, tx=st.booleans()),
        # a refused command, and (a quarter as often: it makes a run up to 4 s longer, about 2 s where the flushes
        # come, and hypothesis varies a drawn example in place, so one idle spell tends to come back) an idle spell
        st.integers(0, 3).flatmap(lambda i: st.builds(Idle) if i == 3 else st.builds(CreateExistingQueue,
                                                                                      queue=_queues)),
        st.builds(Xa, action=st.sampled_from(XA_ACTIONS), xid=st.integers(0, XIDS - 1), queue=_queues,
                  count=st.integers(1, 3), durable=st.booleans().map(lambda b: not b)),
    )


def _one_idle_spell(operations_: list[Operation]) -> tuple[Operation, ...]:
    """``operations_`` without the idle spells after the first: one gives the broker's flushes and the pings their
    time, a second only makes the run up to 4 s longer (and the target phase, which varies an exposed example in
    place, keeps such slow examples coming back)."""
    first = next((i for i, op in enumerate(operations_) if isinstance(op, Idle)), len(operations_))
    return (*operations_[:first + 1], *(op for op in operations_[first + 1:] if not isinstance(op, Idle)))


def workloads(max_operations: int = 8, reconnection: bool = True) -> st.SearchStrategy[Workload]:
    return st.builds(Workload, config=client_configs(reconnection),
                     operations=st.lists(operations(), min_size=1, max_size=max_operations).map(_one_idle_spell))


@st.composite
def tx_rounds(draw: st.DrawFn, example: Example) -> Example:
    """``example`` with a round a transaction does not commit appended: messages sent to a queue, some of them
    received (and acknowledged) in the transacted session, then rolled back or left for the session's close to roll
    back (a shape the free mix seldom makes: about 1 % of its workloads)."""
    queue = draw(_queues)
    tail: tuple[Operation, ...] = (Send(queue, draw(st.integers(1, 3))),
                                   Receive(queue, draw(st.integers(1, 3)), tx=True))
    if draw(st.booleans().map(lambda b: not b)):
        tail += (Rollback(),)
    workload = example.workload
    return Example(dataclasses.replace(workload, operations=workload.operations + tail), example.schedule)


def _typed(direction: str, table: dict[str, tuple[str, ...]]) -> st.SearchStrategy[str]:
    return st.sampled_from(table[direction])


@st.composite
def _cut_at_frame(draw: st.DrawFn, at: int) -> CutAtFrame:
    direction = draw(_directions)
    return CutAtFrame(draw(st.integers(0, 6)), direction, draw(_typed(direction, dict(CUT_FRAME_TYPES))), at)


@st.composite
def _cut_settled(draw: st.DrawFn, at: int) -> CutSettled:
    direction = draw(_directions)
    return CutSettled(draw(st.integers(0, 6)), direction, draw(_typed(direction, dict(CUT_FRAME_TYPES))), at)


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
        _cut_settled(at),
        # last, so that shrinking turns it into a plain cut where that fails as well
        st.builds(CutHalfOpen, n=st.integers(0, 12), direction=_directions, at=st.just(at)),
    ))


# Refusals before the first connect in three examples of seven (as many as the client's initial attempts
# ends the example at its connect); shrinks to none.
_refuse_initial = st.integers(0, 2 * MAX_REFUSE_INITIAL).map(lambda n: max(0, n - MAX_REFUSE_INITIAL))


def fault_schedules(max_faults: int = 3, max_at: int = 0, refuse_initial: bool = True
                    ) -> st.SearchStrategy[FaultSchedule]:
    return st.builds(FaultSchedule, st.lists(faults(max_at), min_size=1, max_size=max_faults).map(tuple),
                     refuse_initial=_refuse_initial if refuse_initial else st.just(0))


@st.composite
def _restart(draw: st.DrawFn, operations: int, one_in: int) -> RestartBroker | None:
    """A restart in one example of ``one_in`` (shrinks to none); a kill first, then a stop; late install points as
    likely as early ones (a restart after the sends is what a journal bug shows in)."""
    if draw(st.integers(0, one_in - 1)) != one_in - 1:
        return None
    return RestartBroker(draw(st.booleans()), draw(st.integers(0, min(operations, 12))))


@st.composite
def examples(draw: st.DrawFn, max_operations: int = 8, max_faults: int = 3, restart: bool = False,
             restart_one_in: int = RESTART_ONE_IN) -> Example:
    """A workload, then a schedule whose faults are installed before one of its operations.  Then, each drawn after
    what comes before it (so that shrinking it to its first choice leaves the example as drawn before it): the
    client's reconnection schedule and initial refusals; in one draw in two, a shape the transaction, failure,
    window, give-up and backoff rules judge (:data:`_SHAPES`), where the bounds leave room; and with ``restart`` (the
    target can restart its broker) non-durable queues and, in one example of ``restart_one_in``, a restart."""
    workload = draw(workloads(max_operations, reconnection=False))
    schedule = draw(fault_schedules(max_faults, max_at=len(workload.operations) - 1, refuse_initial=False))
    # half the examples keep the first choice of every reconnection table, which is also where shrinking goes first
    reconnection = draw(st.one_of(st.just({}), reconnections()))
    config = dataclasses.replace(workload.config, **reconnection)
    # with a varied schedule, the refusals mostly meet the initial attempts' bound (one short of it: the connect
    # succeeds at the last attempt; all of them: it fails), where the attempts and their waits are judged
    initial = config.initial_connect_attempts
    refuse = st.sampled_from((0, initial - 1, initial)) if reconnection else _refuse_initial
    schedule = dataclasses.replace(schedule, refuse_initial=draw(refuse))
    if reconnection and len(schedule.faults) < max_faults and draw(st.booleans()):
        # refused reconnect attempts from the start: the waits between them are what the schedule is judged by
        schedule = dataclasses.replace(schedule, faults=(RefuseConnects(draw(st.integers(1, 3))), *schedule.faults))
    example = Example(dataclasses.replace(workload, config=config), schedule)
    shape = draw(st.integers(0, 2 * len(_SHAPES) - 1))
    if shape >= len(_SHAPES):  # the draws below len(_SHAPES) add none (where shrinking goes)
        add, operations_, faults_ = _SHAPES[shape - len(_SHAPES)]
        if max_operations > operations_ and max_faults >= faults_:
            # room for the shape: the first operations and faults kept (a fault past the kept operations installed
            # before the last of them)
            kept = example.workload.operations[:max_operations - operations_]
            room = tuple(dataclasses.replace(f, at=min(f.at, len(kept) - 1))
                         for f in schedule.faults)[:max_faults - faults_]
            example = draw(add(Example(dataclasses.replace(example.workload, operations=kept),
                                       dataclasses.replace(schedule, faults=room))))
    if not restart:
        return example
    workload, schedule = example.workload, example.schedule
    # the durable queues are the first choice (shrinking goes there)
    volatile = tuple(sorted(draw(st.sets(_queues, max_size=2))))
    restarts = draw(_restart(len(workload.operations), restart_one_in))
    if restarts is not None:
        # the restart is a fault of its own: how many of the proxy's faults stay shrinks to none
        kept_faults = draw(st.integers(0, min(len(schedule.faults), max_faults)))
        schedule = dataclasses.replace(schedule, faults=(*schedule.faults[:kept_faults], restarts))
        # in three restarting examples of four (shrinks to none): what the XA rules judge across a restart
        xa_round = draw(st.integers(0, 3).flatmap(lambda i: st.none() if i == 0 else xa_rounds()))
        if xa_round is not None and len(workload.operations) + len(xa_round) <= MAX_OPERATIONS:
            extended = workload.operations + xa_round
            workload = dataclasses.replace(workload, operations=extended)
            schedule = dataclasses.replace(schedule, faults=(*schedule.faults[:-1],
                                                             dataclasses.replace(restarts, at=len(extended))))
    return Example(dataclasses.replace(workload, volatile=volatile), schedule)


@st.composite
def xa_rounds(draw: st.DrawFn) -> tuple[Operation, ...]:
    """An XA round a restart then follows (the restart is moved after it): messages sent outside any branch, then
    received (acknowledged) in a branch that also sends durable messages and is prepared; or durable messages sent
    in a branch committed in one phase.  What the XA rules judge across a restart: a prepared branch is recovered
    with its messages and its acknowledgements, a one-phase commit is kept; the free mix seldom has a prepare or a
    one-phase commit before a restart."""
    xid, queue, count = draw(st.integers(0, XIDS - 1)), draw(_queues), draw(st.integers(1, 3))
    if draw(st.booleans()):
        return (Xa("send", xid, queue, count), Xa("commit-one-phase", xid))
    return (Send(queue, count), Xa("receive", xid, queue, count), Xa("send", xid, queue, draw(st.integers(1, 3))),
            Xa("prepare", xid))


@st.composite
def xa_completions(draw: st.DrawFn, example: Example) -> Example:
    """``example`` with a branch completed then forgotten appended: durable messages sent in a branch, committed (in
    one or two phases) or rolled back, then a forget of its Xid and a recover.  The broker keeps nothing to forget
    (no heuristic completion), so the forget must be refused with XAER_NOTA, and recover must not list the branch:
    what ``dtx.completed-forgotten`` and ``dtx.prepared-survives`` judge (the free mix draws a forget in about one
    example in twenty)."""
    xid = draw(st.integers(0, XIDS - 1))
    tail: tuple[Operation, ...] = (Xa("send", xid, draw(_queues), draw(st.integers(1, 3))),
                                   Xa(draw(st.sampled_from(("commit", "rollback", "commit-one-phase"))), xid),
                                   Xa("forget", xid), Xa("recover", xid))
    workload = example.workload
    return Example(dataclasses.replace(workload, operations=workload.operations + tail), example.schedule)


@st.composite
def window_fills(draw: st.DrawFn, example: Example) -> Example:
    """``example`` with the smallest window, a batch of blocking sends put first (each answered before the next, so
    the whole batch has passed the proxy when the faults are installed) and every fault installed after it, and no
    initial refusals: the shape in which the byte rule (``window.confirm-bytes``, judged on the first
    connection only) sees the broker's window fill several times (a free draw seldom has a small window and a long
    batch before its first fault: about one workload in twenty)."""
    batch = Send(draw(_queues), draw(st.integers(MAX_BATCH // 2, MAX_BATCH)), durable=False, blocking=True)
    workload, schedule = example.workload, example.schedule
    smallest = min(w for w in WINDOWS if w > 0)
    return Example(dataclasses.replace(workload, config=dataclasses.replace(workload.config, window=smallest),
                                       operations=(batch, *workload.operations)),
                   dataclasses.replace(schedule, faults=tuple(dataclasses.replace(f, at=f.at + 1)
                                                              for f in schedule.faults), refuse_initial=0))


@st.composite
def settled_cuts(draw: st.DrawFn, example: Example) -> Example:
    """``example`` without a confirmation window, with deliveries left unacknowledged appended and the connection
    cut at the next send, the cut settled: the shape in which rule 3 of ``_redelivery`` judges the count a failed
    close must keep (a settled cut only settles on the first connection, and a windowed session is kept for
    reattach, so a free draw seldom makes it)."""
    queue = draw(_queues)
    tail: tuple[Operation, ...] = (Send(queue, draw(st.integers(1, 3))),
                                   Receive(queue, draw(st.integers(1, 3)), tx=draw(st.booleans()), ack=False),
                                   Send(draw(_queues)))
    workload = example.workload
    operations_ = workload.operations + tail
    cut = CutSettled(0, "c2s", "SESS_SEND", len(operations_) - 1)
    # no initial refusals: the cut must be of the workload's first connection for the rule to judge it
    return Example(dataclasses.replace(workload, config=dataclasses.replace(workload.config, window=-1),
                                       operations=operations_),
                   dataclasses.replace(example.schedule, faults=(*example.schedule.faults, cut), refuse_initial=0))


def _refused_after_a_cut_send(example: Example, queue: int, *, durable: bool, refusals: int
                              ) -> tuple[tuple[Operation, ...], tuple[Fault, ...]]:
    """``example``'s operations with a blocking send appended, and its faults with that send cut on its way to the
    broker and the next ``refusals`` reconnect attempts refused (the tail the give-up and backoff shapes share)."""
    operations_ = (*example.workload.operations, Send(queue, 1, durable=durable, blocking=True))
    last = len(operations_) - 1
    return operations_, (*example.schedule.faults, RefuseConnects(refusals, at=last),
                         CutAfterCommands(0, "c2s", at=last))


@st.composite
def gave_up(draw: st.DrawFn, example: Example) -> Example:
    """``example`` with a finite number of reconnect attempts, then a blocking send cut on its way to the broker with
    every reconnect attempt refused: the client gives up with the send's call waiting, the shape in which the
    client's ``restart.gave-up`` rule judges that the call fails at once (a free draw needs a finite count, enough
    refusals and a call in flight at the cut together, which it seldom has).  Without a confirmation window: a
    broker keeps a windowed session it lost for its connection-ttl (up to a minute), and the sessions the client
    gave up would hold their deliveries from the final drain that long."""
    attempts = draw(st.sampled_from(tuple(a for a in RECONNECT_ATTEMPTS if a > 0)))
    workload = example.workload
    operations_, faults_ = _refused_after_a_cut_send(example, draw(_queues), durable=True, refusals=attempts)
    return Example(dataclasses.replace(workload, config=dataclasses.replace(workload.config, window=-1,
                                                                            reconnect_attempts=attempts),
                                       operations=operations_),
                   dataclasses.replace(example.schedule, faults=faults_))


@st.composite
def backoffs(draw: st.DrawFn, example: Example) -> Example:
    """``example`` reconnecting forever with a growing wait (a multiplier above 1, the largest cap), then a blocking
    send cut on its way to the broker with the next three reconnect attempts refused: the waits between the four
    attempts are what the client's ``backoff.*`` rules judge, each longer than the last (a free draw needs a
    multiplier, a cap above the multiplied wait and two refusals in a row together, which it seldom has)."""
    workload = example.workload
    config = dataclasses.replace(workload.config, reconnect_attempts=-1,
                                 retry_interval_ms=draw(st.sampled_from(RETRY_INTERVALS_MS)),
                                 retry_interval_multiplier=draw(st.sampled_from(
                                     tuple(m for m in RETRY_INTERVAL_MULTIPLIERS if m > 1))),
                                 max_retry_interval_ms=max(MAX_RETRY_INTERVALS_MS))
    operations_, faults_ = _refused_after_a_cut_send(example, draw(_queues), durable=False, refusals=3)
    return Example(dataclasses.replace(workload, config=config, operations=operations_),
                   dataclasses.replace(example.schedule, faults=faults_))


#: The shapes :func:`examples` adds to one example in two, each with the operations and faults it appends (what
#: must be left room for): drawn by index, so the order is part of what a seed draws.
_SHAPES: tuple[tuple[Any, int, int], ...] = (
    (tx_rounds, 3, 0),
    (settled_cuts, 3, 1),
    (window_fills, 1, 0),
    (gave_up, 1, 2),
    (backoffs, 1, 2),
    (xa_completions, 4, 0),
)
