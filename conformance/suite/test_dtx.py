"""DTX (XA) restart outcomes (spec 004 "Cluster Restart" and "Restarting DTX Transactions"; notes §13.4).

A client does XA work — sends (durable and not), acknowledgements — and leaves branches prepared, ended,
active or committed in one phase; the broker is killed (SIGKILL) or stopped, and started again; a new client
recovers the in-doubt Xids and completes them.  Prepared branches come back with the same Xids and keep
holding their acknowledged messages; their durable effects survive whichever way they are completed and
their non-durable effects are lost; unprepared branches and local transactions are aborted; completed
branches are gone for good.  Heuristic completions are not covered: neither broker offers them over the core
protocol (Artemis only through management).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from cck.codec import Xid
from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.oracles import History
from cck.conformance.plugin import Settings
from cck.conformance.targets import Target
from cck.reference.client import Connection, Session, connect

from ._kit import (
    RESTARTING,
    client_settings,
    drain_queue,
    judged,
    queue_for,
    repeated,
    run,
    send_keyed,
    settle_sends,
)
from ._restart_support import Disruption, ensure_queue, take_acknowledged, xa_code

CASE_S = 150.0
COUNT = 4
XAER_NOTA = -4
FORMAT = 0x434B  # "CK"

_HOW = {"stop": "the broker is stopped gracefully and started again",
        "kill": "the broker is killed (SIGKILL) and started again"}
_NEEDS: dict[str, tuple[str, ...]] = {"stop": ("restart",), "kill": ("kill", "restart")}


def _xids(shape: str) -> tuple[Xid, ...]:
    """Xids of one case: a fresh global id each run (earlier runs may have left branches in doubt)."""
    gtrid = uuid.uuid4().bytes
    if shape == "one":
        return (Xid(FORMAT, gtrid, b"branch-1"),)
    if shape == "branches":  # one global transaction, three branches
        return tuple(Xid(FORMAT, gtrid, bytes([n])) for n in (1, 2, 3))
    if shape == "maximal":  # the XA limits: 64-byte global id and branch qualifier
        return (Xid(FORMAT, gtrid * 4, uuid.uuid4().bytes * 4),)
    if shape == "formats":  # several format ids, an empty branch qualifier
        return (Xid(0, gtrid, b"f0"), Xid(1, uuid.uuid4().bytes, b""), Xid(0x7FFFFFFF, uuid.uuid4().bytes, b"\xff"))
    raise ValueError(shape)


RECOVER = tuple(
    Case(f"dtx.recover.{n}", "dtx.prepared-survives",
         f"{len(_xids(shape))} branch(es) ({shape}: {desc}) each send one durable message and are prepared; "
         f"{_HOW[trigger]}; a new client recovers and commits them",
         "recover lists every prepared Xid with the same format id, global id and branch qualifier; none of their "
         "messages is delivered before the commit; after it each is delivered exactly once",
         needs=_NEEDS[trigger], params={"trigger": trigger, "shape": shape})
    for n, (trigger, shape, desc) in enumerate((
        ("kill", "one", "one ordinary Xid"),
        ("stop", "one", "one ordinary Xid"),
        ("kill", "branches", "one global id, branch qualifiers 1, 2, 3"),
        ("kill", "maximal", "64-byte global id and branch qualifier"),
        ("kill", "formats", "format ids 0, 1 and 2^31-1, one empty branch qualifier"),
    ), 1)
)

COMMIT = tuple(
    Case(f"dtx.commit.{n}", "dtx.commit-after-restart",
         f"a branch sends {COUNT} durable and {COUNT} non-durable messages to a durable queue"
         + (f" and acknowledges {COUNT} durable messages" if acks else "")
         + f" and is prepared; {_HOW[trigger]}; a new client commits it (two-phase)",
         "exactly the durable messages it sent are delivered, once each; the non-durable ones are lost"
         + ("; the messages it acknowledged never come back" if acks else ""),
         needs=_NEEDS[trigger], params={"trigger": trigger, "acks": acks})
    for n, (trigger, acks) in enumerate((("kill", False), ("stop", False), ("kill", True)), 1)
)

ROLLBACK = tuple(
    Case(f"dtx.rollback.{n}", "dtx.rollback-after-restart",
         f"a branch acknowledges {COUNT} {kind} messages and sends {COUNT} durable ones and is prepared; "
         f"{_HOW[trigger]}; a new client rolls it back",
         "its sends are never delivered; the durable messages it acknowledged are back on the queue and delivered "
         "again" + ("; the non-durable ones it acknowledged are lost" if kind != "durable" else ""),
         needs=_NEEDS[trigger], params={"trigger": trigger, "kind": kind})
    for n, (trigger, kind) in enumerate((("kill", "durable"), ("stop", "durable"), ("kill", "mixed")), 1)
)

HELD = tuple(
    Case(f"dtx.held.{n}", "dtx.prepared-acks-held",
         f"a branch acknowledges {COUNT} of {2 * COUNT} durable messages and is prepared; {_HOW[trigger]}; a new "
         f"consumer drains the queue, then the branch is {outcome}ed and the queue drained again",
         f"before the outcome only the {COUNT} messages the branch did not acknowledge are delivered; after it "
         + ("nothing more arrives" if outcome == "commit" else f"the {COUNT} acknowledged messages are delivered"),
         needs=_NEEDS[trigger], params={"trigger": trigger, "outcome": outcome})
    for n, (trigger, outcome) in enumerate((("kill", "commit"), ("kill", "rollback"), ("stop", "rollback")), 1)
)

UNPREPARED = tuple(
    Case(f"dtx.unprepared.{n}", "dtx.unprepared-aborted",
         f"a branch acknowledges {COUNT} durable messages and sends {COUNT} durable ones and is left {state} "
         f"(not prepared); {_HOW[trigger]}",
         "recover does not list it, a two-phase commit of it fails with XAER_NOTA, its sends are never delivered "
         "and the messages it acknowledged are delivered again",
         needs=_NEEDS[trigger], params={"trigger": trigger, "state": state})
    for n, (trigger, state) in enumerate((("kill", "active"), ("kill", "ended"), ("stop", "active"),
                                          ("stop", "ended")), 1)
)

ONE_PHASE = tuple(
    Case(f"dtx.one-phase.{n}", "dtx.one-phase-durable",
         f"a branch acknowledges {COUNT} durable messages, sends {COUNT} durable ones and is committed in one phase "
         f"(confirmed); {_HOW[trigger]}",
         "the messages it sent are delivered exactly once; the ones it acknowledged never come back; it is not in "
         "doubt",
         needs=_NEEDS[trigger], params={"trigger": trigger})
    for n, trigger in enumerate(("kill", "stop"), 1)
)

COMPLETED = tuple(
    Case(f"dtx.completed.{n}", "dtx.completed-forgotten",
         f"a prepared branch survives a kill -9 and is {outcome}ed by a new client; it then commits, rolls back and "
         "forgets the same Xid",
         "the Xid is no longer in doubt; commit, rollback and forget of it each fail with XAER_NOTA (nothing "
         "heuristic to forget)",
         needs=_NEEDS["kill"], params={"outcome": outcome})
    for n, outcome in enumerate(("commit", "rollback"), 1)
)

LOCAL = tuple(
    Case(f"dtx.local.{n}", "dtx.tx-aborted",
         f"a local transaction {what} and is not committed; {_HOW[trigger]}",
         {"sends": f"none of the {COUNT} messages is delivered",
          "acks": f"the {COUNT} messages are delivered again",
          "both": "none of the sends is delivered and the acknowledged messages are delivered again"}[what_key],
         needs=_NEEDS[trigger], params={"trigger": trigger, "work": what_key})
    for n, (trigger, what_key, what) in enumerate((
        ("kill", "sends", f"sends {COUNT} durable messages"),
        ("kill", "acks", f"acknowledges {COUNT} durable messages"),
        ("stop", "both", f"sends {COUNT} durable messages and acknowledges {COUNT} others"),
    ), 1)
)


# ---------------------------------------------------------------------------------------------- helpers
# Every case is one disrupt → fill → judge scenario: a connection *before* fills the queue and does the XA or
# local work, the broker is restarted (the disrupt), a connection *after* completes and drains, and the history
# is judged however the block ended.


async def _open(url: str, target: Target) -> Connection:
    return await connect(url, settings=client_settings(target, RESTARTING, reconnect_attempts=0))


async def _before(disruption: Disruption, target: Target, queue: str) -> tuple[Connection, Session]:
    """The connection that works before the restart, and a plain session on it that has created ``queue``."""
    before = await _open(disruption.url, target)
    setup = await before.create_session()
    await ensure_queue(setup, queue)
    return before, setup


async def _after(disruption: Disruption, before: Connection, target: Target) -> Connection:
    """Restart the broker (the case's trigger), let the old connection go, and open a new one."""
    await disruption.bounce()
    await before.close()
    return await _open(disruption.url, target)


async def _fill(session: Session, queue: str, prefix: str, history: History, count: int,
                durable: Sequence[bool] | None = None) -> list[str]:
    """Put ``count`` confirmed messages in ``queue`` (durable unless ``durable`` says otherwise)."""
    return await send_keyed(session.create_producer(queue), history, prefix, durable or [True] * count, name=prefix)


async def _send(session: Session, queue: str, prefix: str, history: History, durable: Sequence[bool]) -> list[str]:
    """Send inside the session's transaction; the sends are recorded as invoked, their fate is the outcome's."""
    return await send_keyed(session.create_producer(queue), history, prefix, durable, name=prefix, process="worker",
                            confirmed=False)


async def _branch(session: Session, xid: Xid, queue: str, history: History, settings: Settings, *, prefix: str,
                  take: int = 0, send: Sequence[bool] = (),
                  until: str = "prepared") -> tuple[list[str], list[str], int]:
    """One XA branch on ``session``: acknowledge ``take`` messages of ``queue`` and send one message per entry of
    ``send`` (durable or not) inside it, then leave it ``active``, ``ended`` or ``prepared``.  The keys it
    acknowledged and sent, and its prepare vote (-1 when not prepared)."""
    await session.xa_start(xid)
    taken = await take_acknowledged(session, queue, take, history, settings) if take else []
    sent = await _send(session, queue, prefix, history, send) if send else []
    if until != "active":
        await session.xa_end(xid)
    vote = await session.xa_prepare(xid) if until == "prepared" else -1
    return taken, sent, vote


async def _in_doubt(connection: Connection, xid: Xid) -> Session:
    """An XA session of ``connection`` that found ``xid`` in doubt (a failed check if not)."""
    recover = await connection.create_session(xa=True)
    assert xid in await recover.xa_recover(), "the prepared branch is not in doubt"
    return recover


@asynccontextmanager
async def _tidied(connection: Connection, xids: Sequence[Xid]) -> AsyncIterator[None]:
    """Afterwards, roll back whatever of this case's branches is still in doubt (a failed case must not leave
    them)."""
    try:
        yield
    finally:
        session = await connection.create_session(xa=True)
        for xid in set(await session.xa_recover()) & set(xids):
            await xa_code(session.xa_rollback(xid))
        await session.close()


def _judged_restarted(history: History, evidence: CaseEvidence, label: str,
                      after: list[str]) -> AbstractAsyncContextManager[None]:
    """The judging end for a history in which messages delivered before the restart come back after it (keys
    received after the restart collected in ``after`` as the block goes).  Spec 004 says nothing of a redelivered
    mark, and a restarted broker starts delivery counts afresh, so a receipt after the restart need not look like
    a redelivery: the check allows that; what the restarted broker delivered must still be free of duplicates,
    and nothing confirmed may be lost or appear unsent."""

    def again() -> list[str]:
        twice = repeated(after)
        return [f"delivered more than once after the restart: {twice}"] if twice else []

    return judged(history, evidence, label=label, allow_duplicates=True, also=again)


# ---------------------------------------------------------------------------------------------- cases


@cases(*RECOVER)
def test_prepared_branches_are_recovered(case: Case, cck_target: Target, cck_settings: Settings,
                                         evidence: CaseEvidence) -> None:
    trigger, xids = case.params["trigger"], _xids(case.params["shape"])
    queue = queue_for(case.id)
    history = History()

    async def scenario() -> None:
        async with judged(history, evidence, label="recovered"), Disruption(cck_target, trigger) as disruption:
            before, _ = await _before(disruption, cck_target, queue)
            session = await before.create_session(xa=True)
            sent: list[str] = []
            for index, xid in enumerate(xids):
                _, keys, vote = await _branch(session, xid, queue, history, cck_settings, prefix=f"{case.id}.b{index}",
                                              send=[True])
                sent += keys
                assert vote == 0, "prepare did not vote XA_OK"
            async with await _after(disruption, before, cck_target) as after, _tidied(after, xids):
                recover = await after.create_session(xa=True)
                in_doubt = await recover.xa_recover()
                evidence.note("in_doubt", [repr(x) for x in in_doubt if x in xids])
                missing = [x for x in xids if x not in in_doubt]
                assert not missing, f"prepared branches not in doubt after the restart: {missing}"
                probe = await after.create_session()
                held = (await probe.queue_query(queue)).message_count
                evidence.note("message_count_before_commit", held)
                assert held == 0, f"{held} messages of prepared branches are on the queue before the commit"
                for xid in xids:
                    assert await xa_code(recover.xa_commit(xid)) == 0, f"commit of recovered {xid} failed"
                for index, key in enumerate(sent):
                    history.ok("worker", "send", key, producer=f"{case.id}.b{index}", seq=0)
                evidence.note("received", await drain_queue(after, queue, history, len(sent), cck_settings))

    run(cck_settings, scenario(), CASE_S)


@cases(*COMMIT)
def test_commit_after_restart_keeps_durable_effects(case: Case, cck_target: Target, cck_settings: Settings,
                                                    evidence: CaseEvidence) -> None:
    trigger, acks = case.params["trigger"], case.params["acks"]
    queue = queue_for(case.id)
    history = History()
    (xid,) = _xids("one")
    durability = [seq % 2 == 0 for seq in range(2 * COUNT)]

    async def scenario() -> None:
        async with judged(history, evidence, label="committed"), Disruption(cck_target, trigger) as disruption:
            before, setup = await _before(disruption, cck_target, queue)
            if acks:
                await _fill(setup, queue, f"{case.id}.old", history, COUNT)
            taken, sent, _ = await _branch(await before.create_session(xa=True), xid, queue, history, cck_settings,
                                           prefix=f"{case.id}.new", take=COUNT if acks else 0, send=durability)
            async with await _after(disruption, before, cck_target) as after, _tidied(after, [xid]):
                recover = await _in_doubt(after, xid)
                assert await xa_code(recover.xa_commit(xid)) == 0, "the commit of the recovered branch failed"
                settle_sends(history, sent, durability, name=f"{case.id}.new", process="worker")
                for key in taken:
                    history.ack("worker", key)
                evidence.note("received", await drain_queue(after, queue, history, sum(durability), cck_settings))

    run(cck_settings, scenario(), CASE_S)


@cases(*ROLLBACK)
def test_rollback_after_restart_returns_durable_acks(case: Case, cck_target: Target, cck_settings: Settings,
                                                     evidence: CaseEvidence) -> None:
    trigger, kind = case.params["trigger"], case.params["kind"]
    queue = queue_for(case.id)
    history = History()
    (xid,) = _xids("one")
    old_durable = [kind == "durable" or seq % 2 == 0 for seq in range(COUNT)]
    got: list[str] = []

    async def scenario() -> None:
        async with (_judged_restarted(history, evidence, "rolled-back", got),
                    Disruption(cck_target, trigger) as disruption):
            before, setup = await _before(disruption, cck_target, queue)
            old = await _fill(setup, queue, f"{case.id}.old", history, COUNT, old_durable)
            taken, sent, _ = await _branch(await before.create_session(xa=True), xid, queue, history, cck_settings,
                                           prefix=f"{case.id}.new", take=COUNT, send=[True] * COUNT)
            async with await _after(disruption, before, cck_target) as after, _tidied(after, [xid]):
                recover = await _in_doubt(after, xid)
                assert await xa_code(recover.xa_rollback(xid)) == 0, "the rollback of the recovered branch failed"
                settle_sends(history, sent, [False] * COUNT, name=f"{case.id}.new", process="worker")
                got.extend(await drain_queue(after, queue, history, sum(old_durable), cck_settings))
                evidence.note("acknowledged", taken)
                evidence.note("received", got)
                kept = [key for key, keep in zip(old, old_durable, strict=True) if keep]
                assert sorted(got) == sorted(kept), f"after the rollback {got} arrived, expected {kept}"

    run(cck_settings, scenario(), CASE_S)


@cases(*HELD)
def test_prepared_acks_hold_messages_until_the_outcome(case: Case, cck_target: Target, cck_settings: Settings,
                                                       evidence: CaseEvidence) -> None:
    trigger, outcome = case.params["trigger"], case.params["outcome"]
    queue = queue_for(case.id)
    history = History()
    (xid,) = _xids("one")
    got: list[str] = []

    async def scenario() -> None:
        async with _judged_restarted(history, evidence, "held", got), Disruption(cck_target, trigger) as disruption:
            before, setup = await _before(disruption, cck_target, queue)
            keys = await _fill(setup, queue, case.id, history, 2 * COUNT)
            taken, _, _ = await _branch(await before.create_session(xa=True), xid, queue, history, cck_settings,
                                        prefix=case.id, take=COUNT)
            async with await _after(disruption, before, cck_target) as after, _tidied(after, [xid]):
                free = await drain_queue(after, queue, history, COUNT, cck_settings)
                got.extend(free)
                evidence.note("delivered_before_outcome", free)
                assert sorted(free) == sorted(set(keys) - set(taken)), \
                    f"before the outcome the queue delivered {free}; the branch holds {taken}"
                recover = await _in_doubt(after, xid)
                complete = recover.xa_commit(xid) if outcome == "commit" else recover.xa_rollback(xid)
                assert await xa_code(complete) == 0, f"the {outcome} of the recovered branch failed"
                if outcome == "commit":
                    for key in taken:
                        history.ack("worker", key)
                later = await drain_queue(after, queue, history, 0 if outcome == "commit" else COUNT, cck_settings)
                got.extend(later)
                evidence.note("delivered_after_outcome", later)
                if outcome == "rollback":
                    assert sorted(later) == sorted(taken), f"after the rollback {later} arrived, not {taken}"

    run(cck_settings, scenario(), CASE_S)


@cases(*UNPREPARED)
def test_unprepared_branches_are_aborted(case: Case, cck_target: Target, cck_settings: Settings,
                                         evidence: CaseEvidence) -> None:
    trigger, state = case.params["trigger"], case.params["state"]
    queue = queue_for(case.id)
    history = History()
    (xid,) = _xids("one")
    got: list[str] = []

    async def scenario() -> None:
        async with _judged_restarted(history, evidence, "aborted", got), Disruption(cck_target, trigger) as disruption:
            before, setup = await _before(disruption, cck_target, queue)
            await _fill(setup, queue, f"{case.id}.old", history, COUNT)
            taken, sent, _ = await _branch(await before.create_session(xa=True), xid, queue, history, cck_settings,
                                           prefix=f"{case.id}.new", take=COUNT, send=[True] * COUNT, until=state)
            async with await _after(disruption, before, cck_target) as after, _tidied(after, [xid]):
                recover = await after.create_session(xa=True)
                in_doubt = await recover.xa_recover()
                assert xid not in in_doubt, "an unprepared branch is in doubt after the restart"
                code = await xa_code(recover.xa_commit(xid))
                evidence.note("commit_code", code)
                assert code == XAER_NOTA, f"a two-phase commit of the aborted branch answered {code}, not XAER_NOTA"
                settle_sends(history, sent, [False] * COUNT, name=f"{case.id}.new", process="worker")
                got.extend(await drain_queue(after, queue, history, COUNT, cck_settings))
                evidence.note("acknowledged", taken)
                evidence.note("received", got)
                assert sorted(got) == sorted(taken), f"{got} arrived after the restart, expected {taken}"

    run(cck_settings, scenario(), CASE_S)


@cases(*ONE_PHASE)
def test_one_phase_commit_is_durable(case: Case, cck_target: Target, cck_settings: Settings,
                                     evidence: CaseEvidence) -> None:
    trigger = case.params["trigger"]
    queue = queue_for(case.id)
    history = History()
    (xid,) = _xids("one")

    async def scenario() -> None:
        async with judged(history, evidence, label="one-phase"), Disruption(cck_target, trigger) as disruption:
            before, setup = await _before(disruption, cck_target, queue)
            await _fill(setup, queue, f"{case.id}.old", history, COUNT)
            session = await before.create_session(xa=True)
            taken, sent, _ = await _branch(session, xid, queue, history, cck_settings, prefix=f"{case.id}.new",
                                           take=COUNT, send=[True] * COUNT, until="ended")
            await session.xa_commit(xid, one_phase=True)
            settle_sends(history, sent, [True] * COUNT, name=f"{case.id}.new", process="worker")
            for key in taken:
                history.ack("worker", key)
            async with await _after(disruption, before, cck_target) as after, _tidied(after, [xid]):
                recover = await after.create_session(xa=True)
                assert xid not in await recover.xa_recover(), "a branch committed in one phase is in doubt"
                evidence.note("received", await drain_queue(after, queue, history, COUNT, cck_settings))

    run(cck_settings, scenario(), CASE_S)


@cases(*COMPLETED)
def test_completed_branches_are_gone(case: Case, cck_target: Target, cck_settings: Settings,
                                     evidence: CaseEvidence) -> None:
    outcome = case.params["outcome"]
    queue = queue_for(case.id)
    history = History()
    (xid,) = _xids("one")

    async def scenario() -> None:
        async with judged(history, evidence, label="completed"), Disruption(cck_target, "kill") as disruption:
            before, _ = await _before(disruption, cck_target, queue)
            _, sent, _ = await _branch(await before.create_session(xa=True), xid, queue, history, cck_settings,
                                       prefix=case.id, send=[True])
            async with await _after(disruption, before, cck_target) as after, _tidied(after, [xid]):
                recover = await after.create_session(xa=True)
                complete = recover.xa_commit(xid) if outcome == "commit" else recover.xa_rollback(xid)
                assert await xa_code(complete) == 0, f"the {outcome} of the recovered branch failed"
                settle_sends(history, sent, [outcome == "commit"], name=case.id, process="worker")
                codes = {"recover": xid in await recover.xa_recover(),
                         "commit": await xa_code(recover.xa_commit(xid)),
                         "rollback": await xa_code(recover.xa_rollback(xid)),
                         "forget": await xa_code(recover.xa_forget(xid))}
                evidence.note("after_completion", codes)
                assert codes == {"recover": False, "commit": XAER_NOTA, "rollback": XAER_NOTA,
                                 "forget": XAER_NOTA}, codes
                expected = 1 if outcome == "commit" else 0
                evidence.note("received", await drain_queue(after, queue, history, expected, cck_settings))

    run(cck_settings, scenario(), CASE_S)


@cases(*LOCAL)
def test_local_transactions_are_aborted(case: Case, cck_target: Target, cck_settings: Settings,
                                        evidence: CaseEvidence) -> None:
    trigger, work = case.params["trigger"], case.params["work"]
    queue = queue_for(case.id)
    history = History()
    got: list[str] = []

    async def scenario() -> None:
        async with _judged_restarted(history, evidence, "local", got), Disruption(cck_target, trigger) as disruption:
            before, setup = await _before(disruption, cck_target, queue)
            session = await before.create_session(transacted=True)
            taken: list[str] = []
            sent: list[str] = []
            if work in ("acks", "both"):
                await _fill(setup, queue, f"{case.id}.old", history, COUNT)
                taken = await take_acknowledged(session, queue, COUNT, history, cck_settings)
            if work in ("sends", "both"):
                sent = await _send(session, queue, f"{case.id}.new", history, [True] * COUNT)
            after = await _after(disruption, before, cck_target)
            settle_sends(history, sent, [False] * len(sent), name=f"{case.id}.new", process="worker")
            async with after:
                got.extend(await drain_queue(after, queue, history, len(taken), cck_settings))
                evidence.note("acknowledged", taken)
                evidence.note("received", got)
                assert sorted(got) == sorted(taken), f"{got} arrived after the restart, expected {taken}"

    run(cck_settings, scenario(), CASE_S)
