"""High availability, work in flight when the primary fails (spec 003 "JMS Failover", spec 004 "Restarting DTX
Transactions"): the same rules the failover and DTX groups hold against one restarted server, held across a
failover onto the backup.  A transaction open on the primary is aborted on the backup (its commit says so, a retry
commits once); what it consumed, and what a plain session did not acknowledge, comes back; a commit whose answer
never reached the client ends with its outcome unknown, is all or nothing, and a retry with the same duplicate IDs
leaves each message once; an XA branch prepared on the primary is in doubt on the backup and completes there with
its durable effects only, one not prepared is gone.  The pair and the timed kill: ``_ha_kit``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from cck.codec import (
    DUPLICATE_ID_PROPERTY,
    CoreMessage,
    ExceptionType,
    TypedProperties,
    Xid,
    duplicate_id_property,
)
from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.faults import Drop, FaultProxy
from cck.conformance.oracles import History
from cck.conformance.plugin import Settings
from cck.conformance.targets import ManagedTarget, NodeSpec, Target
from cck.reference.client import (
    BrokerRefused,
    ClientError,
    Connection,
    FailoverInterrupted,
    Producer,
    Session,
    XAError,
)

from ._ha_kit import (
    CASE_S,
    FAILOVER_S,
    POLICIES,
    MakeTarget,
    Policy,
    acceptor,
    kill_primary,
    on_primary,
    pair,
)
from ._kit import (
    RECEIVE_S,
    drain,
    drain_queue,
    judged,
    judged_afterwards,
    key_of,
    observed,
    poll_value,
    queue_for,
    repeated,
    run,
    send_keyed,
    settle_sends,
    wait_until,
)
from ._restart_support import (
    ensure_queue,
    judge_redelivery,
    redelivered,
    rolled_back,
    take_acknowledged,
    xa_code,
)

COUNT = 10
#: how long a queue's message count may take to show a committed transaction or acknowledgements
SETTLE_S = 5.0
XA_FORMAT = 0x434B  # "CK"
XAER_NOTA = -4
#: the message property Artemis's duplicate detection reads (HornetQ's is ``_HQ_DUPL_ID``: codec.duplicate_id_property)
DUPLICATE_ID = DUPLICATE_ID_PROPERTY

#: the pair's nodes store each delivery's count before the delivery goes out (the redelivered mark survives a kill)
COUNT_FIRST = NodeSpec(extra=(("persist-delivery-count-before-delivery", "true"),))
_COUNT_FIRST_HOW = " (both servers with persist-delivery-count-before-delivery=true)"


def _redelivered_mark(count_first: bool) -> str:
    return ("with a delivery count above 1 (redelivered)" if count_first
            else "marked redelivered (SHOULD: the backup loads the journal, which need not hold the delivery count)")


# ---------------------------------------------------------------------------------------------------- tables

TRANSACTION = tuple(
    Case(f"ha.transaction.{n}", "failover.tx-retry" if retry else "ha.transaction-aborted",
         f"{policy} pair; a transacted session sends {COUNT} durable messages and does not commit; the kit kills the "
         "primary; once the client failed over to the backup it commits"
         + ("; then it sends the same messages again and commits" if retry else ""),
         "the commit fails with a transaction-rolled-back error (the work was done on the server that failed)"
         + ("; the retried transaction commits and each message is on the backup exactly once" if retry
            else " and none of the messages is on the backup"),
         needs=("config", "log", "kill"), params={"policy": policy, "retry": retry})
    for n, (policy, retry) in enumerate(((p, r) for p in POLICIES for r in (False, True)), 1)
)

TX_ACK = tuple(
    Case(f"ha.tx-ack.{n}", "failover.redelivery",
         f"{policy} pair" + (_COUNT_FIRST_HOW if count_first else "")
         + f"; a transacted session receives and acknowledges {COUNT} durable messages without "
         "committing; the kit kills the primary; once the client failed over it commits, receives again, acknowledges "
         "and commits",
         "the first commit raises TransactionRolledBack; the same messages are delivered again "
         + _redelivered_mark(count_first) + "; the second commit succeeds and the backup's queue is then empty",
         needs=("config", "log", "kill"), params={"policy": policy, "count_first": count_first})
    for n, (policy, count_first) in enumerate(((p, c) for p in POLICIES for c in (False, True)), 1)
)

CLIENT_ACK = tuple(
    Case(f"ha.client-ack.{n}", "failover.redelivery",
         f"{policy} pair" + (_COUNT_FIRST_HOW if count_first else "")
         + f"; a non-transacted session receives {COUNT} durable messages and does not acknowledge "
         "them; the kit kills the primary",
         "once the client failed over, the recreated consumer receives the same messages again, first "
         "unacknowledged first, " + _redelivered_mark(count_first)
         + "; once they are acknowledged the backup's queue is empty",
         needs=("config", "log", "kill"), params={"policy": policy, "count_first": count_first})
    for n, (policy, count_first) in enumerate(((p, c) for p in POLICIES for c in (False, True)), 1)
)

_LOST = {
    "request": "the proxy drops the client's SESS_COMMIT (the commit never takes effect)",
    "answer": "the proxy drops the primary's answer to the commit (the commit took "
              "effect)",
}

COMMIT_IN_FLIGHT = tuple(
    Case(f"ha.commit-in-flight.{n}", "ha.duplicate-retry" if duplicates else "failover.interrupted",
         f"{policy} pair, the client connected through a fault proxy that stands for the pair (the kit points it at "
         f"the backup before the kill); a transacted session sends {COUNT} durable messages"
         + (f" each with its own {DUPLICATE_ID}" if duplicates else "") + f" and commits; {_LOST[lost]}; the kit "
         "kills the primary while the commit waits"
         + ("; after the failover the client sends the same messages with the same IDs again and commits" if duplicates
            else ""),
         "the waiting commit ends with FailoverInterrupted (outcome unknown) once the session is recreated on the "
         "backup; "
         + ("the retried commit succeeds, or is refused as holding duplicate IDs (the first commit took effect); "
            "either way each message is on the backup exactly once" if duplicates
            else "the transaction is all or nothing on the backup and no message is there twice"),
         needs=("config", "log", "kill"), params={"policy": policy, "lost": lost, "duplicates": duplicates})
    for n, (policy, duplicates, lost) in enumerate(
        ((p, d, w) for p in POLICIES for d in (False, True) for w in ("request", "answer")), 1)
)

#: the XA rows: (shape, clause, what the branch does and how it is left, what is done after the failover, expected)
_XA_ROWS: tuple[tuple[str, str, str, str, str], ...] = (
    ("branches", "dtx.prepared-survives",
     "three branches of one global transaction (branch qualifiers 1, 2, 3) each send one durable message and are "
     "prepared", "a new session recovers and commits them",
     "the backup's recover lists every prepared Xid with the same format id, global id and branch qualifier; none "
     "of their messages is delivered before the commit; after it each is delivered exactly once"),
    ("commit", "dtx.commit-after-restart",
     f"a branch sends {COUNT} durable and {COUNT} non-durable messages and is prepared",
     "a new session recovers it and commits it (two-phase)",
     "exactly the durable messages it sent are delivered, once each; the non-durable ones are lost with the primary"),
    ("rollback", "dtx.rollback-after-restart",
     f"a branch acknowledges {COUNT} durable messages and sends {COUNT} durable ones and is prepared",
     "a new session recovers it and rolls it back",
     "its sends are never delivered; the messages it acknowledged are on the backup and delivered again"),
    ("active", "failover.xa-failed",
     f"a branch acknowledges {COUNT} durable messages and sends {COUNT} durable ones and is left active",
     "the recreated session ends it and tries to prepare it",
     "the prepare fails; the Xid is not in doubt on the backup; its sends are never delivered and the messages it "
     "acknowledged are delivered again"),
    ("ended", "dtx.unprepared-aborted",
     f"a branch acknowledges {COUNT} durable messages and sends {COUNT} durable ones and is ended, not prepared",
     "a new session recovers and commits it (two-phase)",
     "recover does not list it, the commit fails with XAER_NOTA, its sends are never delivered and the messages it "
     "acknowledged are delivered again"),
)

XA = tuple(
    Case(f"ha.xa.{n}", clause, f"{policy} pair; {work}; the kit kills the primary; once the client failed over, {then}",
         expect, needs=("config", "log", "kill"), params={"policy": policy, "shape": shape})
    for n, (policy, (shape, clause, work, then, expect)) in enumerate(((p, r) for p in POLICIES for r in _XA_ROWS),
                                                                      1)
)


# ---------------------------------------------------------------------------------------------------- helpers


async def _emptied(session: Session, queue: str, evidence: CaseEvidence, settings: Settings) -> None:
    """The queue's message count must come to 0 (asked until it does or SETTLE_S passed: a broker may count what a
    commit or an acknowledgement removed a moment after answering)."""

    async def count() -> int:
        return (await session.queue_query(queue)).message_count

    counts = await poll_value(count, lambda n: n == 0, settings.deadline(SETTLE_S))
    evidence.note("message_count", counts)
    assert counts[-1] == 0, f"{counts[-1]} messages left on the backup's queue (counts seen: {counts})"


def _judged_redelivery(case: Case, history: History, evidence: CaseEvidence) -> AbstractAsyncContextManager[None]:
    """The judging end of the redelivery rows: the redelivered mark is strict only where the pair stores counts
    before delivery (the backup knows only what the journal holds)."""
    may_be_lost = not case.params["count_first"]
    return judged_afterwards(lambda: judge_redelivery(history, may_be_lost, evidence))


def _redelivery_pair(case: Case, make_target: MakeTarget, evidence: CaseEvidence) -> ManagedTarget:
    policy: Policy = case.params["policy"]
    return pair(make_target, evidence, policy, like=COUNT_FIRST if case.params["count_first"] else None)


async def _send_identified(producer: Producer, history: History, prefix: str, ids: Sequence[bytes],
                           target: Target) -> list[str]:
    """Send one durable message per duplicate ID (keyed ``prefix:seq``, its ID in the property the target's server
    family detects duplicates by) inside the session's transaction; recorded as invoked, their outcome is the
    caller's."""
    property_name = duplicate_id_property(target.protocol_version)
    keys = []
    for seq, duplicate_id in enumerate(ids):
        key = f"{prefix}:{seq}"
        history.invoke_send("tx", key, producer="C", seq=seq)
        await producer.send(CoreMessage(key.encode(), durable=True,
                                        properties=TypedProperties.of({"key": key, "seq": seq,
                                                                       property_name: duplicate_id})))
        keys.append(key)
    return keys


async def _fill(session: Session, queue: str, prefix: str, history: History, count: int = COUNT) -> list[str]:
    """Put ``count`` confirmed durable messages in ``queue``."""
    return await send_keyed(session.create_producer(queue), history, prefix, [True] * count, name=prefix)


async def _outcome(call: Awaitable[object]) -> str:
    """``ok``, or the error an XA step ended with."""
    try:
        await call
    except (XAError, BrokerRefused) as exc:
        return repr(exc)
    return "ok"


def _xids(shape: str) -> tuple[Xid, ...]:
    """The case's Xids: a fresh global id each run (an earlier run may have left a branch in doubt)."""
    gtrid = uuid.uuid4().bytes
    if shape == "branches":
        return tuple(Xid(XA_FORMAT, gtrid, bytes([n])) for n in (1, 2, 3))
    return (Xid(XA_FORMAT, gtrid, b"ha"),)


# ---------------------------------------------------------------------------------------------------- transactions


@cases(*TRANSACTION)
def test_a_transaction_open_at_failover_is_aborted(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                                   evidence: CaseEvidence) -> None:
    target = pair(cck_make_target, evidence, case.params["policy"])
    retry = case.params["retry"]
    queue = queue_for(case.id)
    history = History()

    async def scenario() -> None:
        async with (judged(history, evidence, label="ha-tx"),
                    on_primary(target, cck_settings, evidence) as (connection, watch)):
            setup = await connection.create_session()
            await ensure_queue(setup, queue)
            session = await connection.create_session(transacted=True)
            producer = session.create_producer(queue)
            keys = await send_keyed(producer, history, case.id, [True] * COUNT, name="P", process="producer",
                                    confirmed=False)
            await kill_primary(target, watch, cck_settings, evidence)
            try:
                await rolled_back(session, evidence, "a transaction")
            finally:
                settle_sends(history, keys, [False] * COUNT, name="P", process="producer")
            if retry:
                await send_keyed(producer, history, case.id, [True] * COUNT, name="P", process="producer",
                                 confirmed=False)
                await session.commit()
                settle_sends(history, keys, [True] * COUNT, name="P", process="producer")
            got = await drain_queue(connection, queue, history, COUNT if retry else 0, cck_settings)
            evidence.note("received", got)
            assert sorted(got) == (sorted(keys) if retry else []), f"the backup delivered {got}"

    run(cck_settings, scenario(), CASE_S)


@cases(*TX_ACK)
def test_acknowledgements_in_flight_are_redelivered(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                                    evidence: CaseEvidence) -> None:
    target = _redelivery_pair(case, cck_make_target, evidence)
    queue = queue_for(case.id)
    history = History()

    async def scenario() -> None:
        async with (_judged_redelivery(case, history, evidence),
                    on_primary(target, cck_settings, evidence) as (connection, watch)):
            setup = await connection.create_session()
            await ensure_queue(setup, queue)
            keys = await _fill(setup, queue, case.id, history)
            session = await connection.create_session(transacted=True)
            consumer = await session.create_consumer(queue)
            session.start()
            first = await drain(consumer, history, "tx", expected=COUNT, quiet_s=0.0,
                                receive_s=cck_settings.deadline(RECEIVE_S))
            assert [key_of(d) for d in first] == keys, "the first delivery was not the messages sent, in order"
            await kill_primary(target, watch, cck_settings, evidence)
            await rolled_back(session, evidence, "acknowledgements")
            again = await redelivered(consumer, history, "tx", COUNT, cck_settings, evidence)
            assert sorted(key_of(d) for d in again) == sorted(keys), "not every acknowledged message came back"
            await session.commit()
            for key in keys:
                history.ack("tx", key)
            await _emptied(setup, queue, evidence, cck_settings)

    run(cck_settings, scenario(), CASE_S)


@cases(*CLIENT_ACK)
def test_unacknowledged_messages_are_redelivered(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                                 evidence: CaseEvidence) -> None:
    target = _redelivery_pair(case, cck_make_target, evidence)
    queue = queue_for(case.id)
    history = History()

    async def scenario() -> None:
        async with (_judged_redelivery(case, history, evidence),
                    on_primary(target, cck_settings, evidence) as (connection, watch)):
            session = await connection.create_session()
            await ensure_queue(session, queue)
            keys = await _fill(session, queue, case.id, history)
            consumer = await session.create_consumer(queue)
            session.start()
            await drain(consumer, history, "client", expected=COUNT, quiet_s=0.0,
                        receive_s=cck_settings.deadline(RECEIVE_S), ack="none")
            await kill_primary(target, watch, cck_settings, evidence)
            again = await redelivered(consumer, history, "client", COUNT, cck_settings, evidence)
            assert again, "no unacknowledged message came back"
            assert key_of(again[0]) == keys[0], "the first unacknowledged message did not come first"
            assert sorted(key_of(d) for d in again) == sorted(keys), "not every unacknowledged message came back"
            await _emptied(await connection.create_session(), queue, evidence, cck_settings)

    run(cck_settings, scenario(), CASE_S)


@cases(*COMMIT_IN_FLIGHT)
def test_a_commit_cut_off_by_failover(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                      evidence: CaseEvidence) -> None:
    target = pair(cck_make_target, evidence, case.params["policy"])
    lost, duplicates = case.params["lost"], case.params["duplicates"]
    queue = queue_for(case.id)
    history = History()
    primary, backup = acceptor(target, "node0"), acceptor(target, "node1")
    # The kit's client takes the backup of the topology member whose live connector is the one it uses, and a
    # proxy is not that: the proxy stands for the pair instead, pointed at the backup before the primary dies.
    proxy = FaultProxy(primary.host, primary.port)
    ids = [uuid.uuid4().bytes for _ in range(COUNT)] if duplicates else []

    def wire() -> None:
        evidence.wire(proxy.wire_log, label="commit-in-flight")
        evidence.attempts(proxy.attempts, label="commit-in-flight")
        evidence.ends(proxy.ends, label="commit-in-flight")

    async def scenario() -> None:
        async with (judged(history, evidence, label="commit-in-flight", before=wire), proxy,
                    on_primary(target, cck_settings, evidence, url=proxy.url) as (connection, watch)):
            setup = await connection.create_session()
            await ensure_queue(setup, queue)
            session = await connection.create_session(transacted=True)
            producer = session.create_producer(queue)
            if duplicates:
                keys = await _send_identified(producer, history, case.id, ids, target)
            else:
                keys = await send_keyed(producer, history, case.id, [True] * COUNT, name="C", process="tx",
                                        confirmed=False)
            rule = Drop("c2s", {"SESS_COMMIT"}, count=1) if lost == "request" else Drop("s2c", {"NULL_RESPONSE"},
                                                                                            count=1)
            handle = proxy.add(rule)
            pending: asyncio.Future[Any] = asyncio.ensure_future(session.commit())
            await wait_until(lambda: handle.spent, cck_settings.deadline(RECEIVE_S),
                             f"the proxy to drop the commit's {lost}")
            assert not pending.done(), "the commit ended although it or its answer was dropped"
            proxy.upstream_host, proxy.upstream_port = backup.host, backup.port
            await kill_primary(target, watch, cck_settings, evidence)
            outcome: object
            try:
                outcome = await observed(pending, cck_settings.deadline(FAILOVER_S),
                                         "the interrupted commit to end after the failover")
            except ClientError as exc:
                outcome = exc
            evidence.note("commit", repr(outcome))
            for seq, key in enumerate(keys):
                history.info("tx", "send", key, producer="C", seq=seq)
            assert isinstance(outcome, FailoverInterrupted), f"the waiting commit ended with {outcome!r}"
            if duplicates:
                await _send_identified(producer, history, case.id, ids, target)
                retried: object = "ok"
                try:
                    await session.commit()
                except BrokerRefused as exc:
                    retried = exc
                evidence.note("retried_commit", repr(retried))
                assert retried == "ok" or (isinstance(retried, BrokerRefused)
                                           and retried.type == ExceptionType.DUPLICATE_ID_REJECTED), \
                    f"the retried commit ended with {retried!r}"
                settle_sends(history, keys, [True] * COUNT, name="C", process="tx")
            got = await drain_queue(connection, queue, history, COUNT if duplicates else 0, cck_settings)
            evidence.note("received", got)
            if duplicates:
                assert sorted(got) == sorted(keys), f"the backup delivered {got}, not each message once"
            else:
                assert sorted(got) in ([], sorted(keys)), f"a part of the transaction was delivered: {got}"

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- XA


def _judged_xa(history: History, evidence: CaseEvidence, after: list[str]) -> AbstractAsyncContextManager[None]:
    """Messages a branch acknowledged on the primary come back on the backup, which may count them afresh (the
    DTX rules say nothing of a redelivered mark): duplicates across the failover are allowed, but what the backup
    delivered (collected in ``after``) must be free of them, and nothing confirmed may be lost or appear unsent."""

    def again() -> list[str]:
        twice = repeated(after)
        return [f"delivered more than once by the backup: {twice}"] if twice else []

    return judged(history, evidence, label="ha-xa", allow_duplicates=True, also=again)


async def _completed(shape: str, recover: Session, worker: Session, connection: Connection, queue: str,
                     xids: Sequence[Xid], evidence: CaseEvidence) -> None:
    """After the failover: complete the branches as the row ``shape`` says, judging each step (``worker`` is the
    session that did the work, recreated on the backup; ``recover`` a new XA session there)."""
    if shape == "active":
        xid = xids[0]
        steps = {"end": await _outcome(worker.xa_end(xid)), "prepare": await _outcome(worker.xa_prepare(xid)),
                 "rollback": await _outcome(worker.xa_rollback(xid))}
        evidence.note("xa_steps", steps)
        assert steps["prepare"] != "ok", f"the branch active at the failure was prepared: {steps}"
    in_doubt = await recover.xa_recover()
    evidence.note("in_doubt", [repr(x) for x in in_doubt if x in xids])
    if shape in ("active", "ended"):
        assert not set(xids) & set(in_doubt), "a branch not prepared at the failure is in doubt on the backup"
        if shape == "ended":
            code = await xa_code(recover.xa_commit(xids[0]))
            evidence.note("commit_code", code)
            assert code == XAER_NOTA, f"the commit of the unprepared branch ended with XA code {code}, not XAER_NOTA"
        return
    missing = [x for x in xids if x not in in_doubt]
    assert not missing, f"branches prepared on the primary are not in doubt on the backup: {missing}"
    held = (await (await connection.create_session()).queue_query(queue)).message_count
    evidence.note("message_count_before_outcome", held)
    if shape != "rollback":
        assert held == 0, f"{held} messages of prepared branches are on the queue before the commit"
    for xid in xids:
        complete = recover.xa_rollback(xid) if shape == "rollback" else recover.xa_commit(xid)
        code = await xa_code(complete)
        assert code == 0, f"the completion of recovered {xid} ended with XA code {code}"


@cases(*XA)
def test_xa_branches_across_failover(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                     evidence: CaseEvidence) -> None:
    target = pair(cck_make_target, evidence, case.params["policy"])
    shape = case.params["shape"]
    queue = queue_for(case.id)
    history = History()
    xids = _xids(shape)
    prepared = shape in ("branches", "commit", "rollback")
    takes = shape in ("rollback", "active", "ended")
    durability = [True] if shape == "branches" else (
        [seq % 2 == 0 for seq in range(2 * COUNT)] if shape == "commit" else [True] * COUNT)
    after: list[str] = []

    async def scenario() -> None:
        async with (_judged_xa(history, evidence, after),
                    on_primary(target, cck_settings, evidence) as (connection, watch)):
            setup = await connection.create_session()
            await ensure_queue(setup, queue)
            old = await _fill(setup, queue, f"{case.id}.old", history) if takes else []
            worker = await connection.create_session(xa=True)
            taken: list[str] = []
            sent: list[list[str]] = []
            for index, xid in enumerate(xids):
                await worker.xa_start(xid)
                if takes:
                    taken += await take_acknowledged(worker, queue, COUNT, history, cck_settings)
                sent.append(await send_keyed(worker.create_producer(queue), history, f"{case.id}.b{index}", durability,
                                             name=f"{case.id}.b{index}", process="worker", confirmed=False))
                if shape != "active":
                    await worker.xa_end(xid)
                if prepared:
                    assert await worker.xa_prepare(xid) == 0, "prepare did not vote XA_OK"
            await kill_primary(target, watch, cck_settings, evidence)
            recover = await connection.create_session(xa=True)
            try:
                await _completed(shape, recover, worker, connection, queue, xids, evidence)
            finally:
                for xid in set(await recover.xa_recover()) & set(xids):  # a failed case leaves nothing in doubt
                    await xa_code(recover.xa_rollback(xid))
            committed = shape in ("branches", "commit")
            for index, keys in enumerate(sent):
                settle_sends(history, keys, durability if committed else [False] * len(keys),
                             name=f"{case.id}.b{index}", process="worker")
            expected = sum(durability) * len(xids) if committed else len(old)
            after.extend(await drain_queue(connection, queue, history, expected, cck_settings))
            evidence.note("received", after)
            if committed:
                kept = [key for keys in sent for key, keep in zip(keys, durability, strict=True) if keep]
                assert sorted(after) == sorted(kept), f"after the commit {after} arrived, expected {kept}"
            else:
                assert sorted(after) == sorted(taken), \
                    f"the branch's sends were delivered or its acknowledgements not undone: {after}, taken {taken}"

    run(cck_settings, scenario(), CASE_S)
