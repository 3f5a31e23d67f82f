"""High availability: a primary and its backup server (spec 004 "Fail-over (session state)", spec 000 "Session
reconnection"): the topology names the backup, and a client given the primary's URL only fails over to it when
the primary is killed, also when the backup started after the messages were there.  The pair, the policies and
the timed kill: ``_ha_kit``.  Transactions and acknowledgements
across failover: ``test_ha_tx``; failback, graceful stops, losing both servers, restarting both: ``test_ha_lifecycle``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.oracles import History
from cck.conformance.plugin import Settings
from cck.conformance.targets import NodeStartError
from cck.conformance.verdicts import NotObserved
from cck.reference.client import connect

from ._ha_kit import (
    CASE_S,
    FAILOVER_S,
    POLICIES,
    TOPOLOGY_S,
    MakeTarget,
    acceptor,
    announced_while,
    backup_learnt,
    backup_of_primary,
    fail_over,
    kill_primary,
    on_primary,
    pair,
)
from ._kit import (
    QUIET_S,
    RECEIVE_S,
    RESTARTING,
    client_settings,
    drain,
    drain_queue,
    fence_behind,
    judged,
    key_of,
    queue_for,
    restarted,
    run,
    send_keyed,
    settle_sends,
    wait_until,
)
from ._restart_support import Watch, ensure_queue

COUNT = 10


# ---------------------------------------------------------------------------------------------------- topology

_TOPOLOGY_HOW = {
    "paired": "",
    "backup-gone": "; then the kit stops the backup (SIGTERM)",
    "backup-back": "; then the kit stops the backup (SIGTERM) and starts it again",
}
_TOPOLOGY_EXPECT = {
    "paired": "the member whose live connector is the primary's acceptor names the backup's acceptor as its backup",
    "backup-gone": "once the backup has stopped, the primary's member is sent again without a backup connector",
    "backup-back": "once the backup is back (waiting again), the primary's member is sent anew naming its acceptor "
                   "as the backup (a topology update after the backup's start)",
}
#: (policy, step); rows added later come last, so the case numbers of the earlier ones stay
_TOPOLOGY_ROWS = ([(p, s) for p in POLICIES for s in ("paired", "backup-gone")]
                  + [(p, "backup-back") for p in POLICIES])

TOPOLOGY = tuple(
    Case(f"ha.topology.{n}", "ha.backup-candidates-current" if step == "backup-gone" else "ha.backup-candidates",
         f"{policy} pair; the client connects to the primary only and subscribes to the topology"
         + _TOPOLOGY_HOW[step], _TOPOLOGY_EXPECT[step],
         needs=("config", "log") if step == "paired" else ("config", "log", "restart"),
         params={"policy": policy, "step": step})
    for n, (policy, step) in enumerate(_TOPOLOGY_ROWS, 1)
)


@cases(*TOPOLOGY)
def test_the_topology_names_the_backup(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                       evidence: CaseEvidence) -> None:
    target = pair(cck_make_target, evidence, case.params["policy"])
    primary, backup = acceptor(target, "node0"), acceptor(target, "node1")

    async def scenario() -> None:
        settings = client_settings(target, RESTARTING, reconnect_attempts=0)
        async with await connect(target.node("node0").url, settings=settings) as connection:
            paired = await backup_learnt(connection, target, cck_settings)
            evidence.note("backup_seen", str(paired))
            assert paired == backup, f"the primary's member names backup {paired}, not the backup's acceptor {backup}"
            if case.params["step"] == "paired":
                return
            await asyncio.to_thread(target.node("node1").stop)
            if case.params["step"] == "backup-gone":
                with contextlib.suppress(NotObserved):
                    await wait_until(lambda: backup_of_primary(connection, primary) is None,
                                     cck_settings.deadline(TOPOLOGY_S), "the primary's member without a backup")
                left = backup_of_primary(connection, primary)
                evidence.note("backup_after_stop", str(left))
                assert left is None, f"the primary's member still names backup {left} after the backup stopped"
                return
            # backup-back: whether the stopped backup was dropped is the other row's business (a SHOULD); an update
            # sent after the start shows the broker learnt the backup again, dropped before or not (the member the
            # client still holds from before the stop would show nothing)
            named = await announced_while(connection, target, cck_settings, target.node("node1").start)
            evidence.note("backup_after_start", [str(c) for c in named])
            evidence.note("backup_held_after_start", str(backup_of_primary(connection, primary)))
            assert backup in named, (
                f"no topology update named the backup {backup} again within {TOPOLOGY_S:.0f} s of its start (the "
                f"primary's member was sent naming {[str(c) for c in named]} since the start)")

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- failover

FAILOVER = tuple(
    Case(f"ha.kill.{n}", "ha.failover",
         f"{policy} pair; the client (given the primary's URL only, reconnecting every 100 ms) sends {COUNT} "
         f"{kind} messages, each confirmed; the kit kills the primary (SIGKILL)",
         "the client's failure listener is told, the client reaches the backup within the deadline and its "
         "session works there; "
         + {"durable": f"all {COUNT} durable messages are on the backup, each exactly once",
            "mixed": f"the {COUNT // 2} durable messages are on the backup, each once; the non-durable ones are gone"}[
             kind],
         needs=("config", "log", "kill"), params={"policy": policy, "kind": kind})
    for n, (policy, kind) in enumerate(((p, k) for p in POLICIES for k in ("durable", "mixed")), 1)
)


@cases(*FAILOVER)
def test_the_client_fails_over_to_the_backup(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                             evidence: CaseEvidence) -> None:
    target = pair(cck_make_target, evidence, case.params["policy"])
    queue = queue_for(case.id)
    history = History()
    durable = [case.params["kind"] == "durable" or seq % 2 == 0 for seq in range(COUNT)]

    async def scenario() -> None:
        settings = client_settings(target, RESTARTING)
        async with (judged(history, evidence, label="ha"),
                    await connect(target.node("node0").url, settings=settings) as connection):
            watch = Watch(connection)
            backup = acceptor(target, "node1")
            await backup_learnt(connection, target, cck_settings)
            session = await connection.create_session()
            await ensure_queue(session, queue)
            producer = session.create_producer(queue)
            keys = await send_keyed(producer, history, case.id, durable, name="P", process="producer",
                                    confirmed=False)
            # each send returned (confirmed); a non-durable message does not outlive its server, so it is recorded
            # as failed and a receipt of one is reported as unexpected
            settle_sends(history, keys, durable, name="P", process="producer")
            killed = await kill_primary(target, watch, cck_settings, evidence)
            got = await drain_queue(connection, queue, history, sum(durable), cck_settings)
            evidence.note("failover_ms", round((time.monotonic() - killed) * 1000, 1))
            evidence.note("received", got)
            evidence.note("connected_to", str(connection.machine.connector))
            assert connection.machine.connector == backup, (
                f"the client is connected to {connection.machine.connector}, not the backup {backup}")

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- consumers

LATE_BACKUP = tuple(
    Case(f"ha.late-backup.{n}", "ha.failover",
         f"{policy} pair whose backup the kit stops; the client (given the primary's URL only) sends {COUNT} durable "
         "messages to the primary alone, each confirmed; the kit starts the backup again"
         + (" and waits until it says it holds the primary's state (the initial synchronisation of what exists)"
            if policy == "replication" else "")
         + f"; once the primary's topology names it the client sends {COUNT} more; the kit kills the primary",
         f"the client reaches the backup within the deadline and all {2 * COUNT} messages are there, each exactly "
         "once: what the primary held before its backup existed is not lost",
         needs=("config", "log", "kill", "restart"), params={"policy": policy})
    for n, policy in enumerate(POLICIES, 1)
)


@cases(*LATE_BACKUP)
def test_a_backup_started_after_the_messages_takes_them_over(case: Case, cck_make_target: MakeTarget,
                                                            cck_settings: Settings, evidence: CaseEvidence) -> None:
    policy = case.params["policy"]
    target = pair(cck_make_target, evidence, policy)
    queue = queue_for(case.id)
    history = History()

    async def scenario() -> None:
        settings = client_settings(target, RESTARTING)
        async with (judged(history, evidence, label="late-backup"),
                    on_primary(target, cck_settings, evidence, client=settings) as (connection, watch)):
            await asyncio.to_thread(target.node("node1").stop)
            session = await connection.create_session()
            await ensure_queue(session, queue)
            producer = session.create_producer(queue)
            await send_keyed(producer, history, f"{case.id}:before", [True] * COUNT, name="B", process="producer")
            await restarted(target.node("node1").start, "node1")
            if policy == "replication":
                started = time.monotonic()
                try:
                    await asyncio.to_thread(target.node("node1").wait_synced, cck_settings.deadline(FAILOVER_S))
                except NodeStartError as exc:
                    raise NotObserved(f"the backup started again but never held the primary's state: {exc}") from None
                evidence.note("synchronised_ms", round((time.monotonic() - started) * 1000, 1))
            evidence.note("backup_after_start", str(await backup_learnt(connection, target, cck_settings)))
            await send_keyed(producer, history, f"{case.id}:after", [True] * COUNT, name="A", process="producer")
            killed = await kill_primary(target, watch, cck_settings, evidence)
            got = await drain_queue(connection, queue, history, 2 * COUNT, cck_settings)
            evidence.note("failover_ms", round((time.monotonic() - killed) * 1000, 1))
            evidence.note("received", len(got))
            assert connection.machine.connector == acceptor(target, "node1"), (
                f"the client is connected to {connection.machine.connector}, not the backup")

    run(cck_settings, scenario(), CASE_S)


CONSUMER = tuple(
    Case(f"ha.consumer.{n}", "ha.failover",
         f"{policy} pair; a consumer on the primary receives and acknowledges (each acknowledgement confirmed) "
         f"{COUNT} durable messages; the kit kills the primary (SIGKILL); once the client failed over it sends "
         f"{COUNT} more",
         f"the same consumer receives on the backup the {COUNT} messages sent after the failover, each exactly once "
         "and counted as a first delivery, and none of those it acknowledged on the primary",
         needs=("config", "log", "kill"), params={"policy": policy})
    for n, policy in enumerate(POLICIES, 1)
)


@cases(*CONSUMER)
def test_a_consumer_receives_again_after_failover(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                                  evidence: CaseEvidence) -> None:
    target = pair(cck_make_target, evidence, case.params["policy"])
    queue = queue_for(case.id)
    history = History()

    async def scenario() -> None:
        settings = client_settings(target, RESTARTING, block_on_acknowledge=True)
        async with (judged(history, evidence, label="ha-consumer"),
                    on_primary(target, cck_settings, evidence, client=settings) as (connection, watch)):
            session = await connection.create_session()
            await ensure_queue(session, queue)
            before = await send_keyed(session.create_producer(queue), history, f"{case.id}:before", [True] * COUNT,
                                      name="P", process="producer")
            consumer = await session.create_consumer(queue)
            session.start()
            acked = await drain(consumer, history, "consumer", expected=COUNT, quiet_s=0.0,
                                receive_s=cck_settings.deadline(RECEIVE_S))
            assert [key_of(d) for d in acked] == before, "the deliveries on the primary were not the messages sent"
            await kill_primary(target, watch, cck_settings, evidence)
            after = await send_keyed(session.create_producer(queue), history, f"{case.id}:after", [True] * COUNT,
                                     name="Q", process="producer")
            again = await drain(consumer, history, "consumer", expected=COUNT,
                                quiet_s=cck_settings.deadline(QUIET_S), receive_s=cck_settings.deadline(RECEIVE_S),
                                fence=await fence_behind(consumer))
            got = [key_of(d) for d in again]
            evidence.note("received_after_failover", got)
            repeated = sorted(set(got) & set(before))
            assert not repeated, f"acknowledged messages delivered again after the failover: {repeated}"
            missing = sorted(set(after) - set(got))
            assert not missing, f"the consumer did not receive after the failover: {missing}"

    run(cck_settings, scenario(), CASE_S)


# ------------------------------------------------------------------------------------------------ transparent resume

# Replication only: a resume needs the primary's session state on the backup before the primary is lost, and a
# shared-store backup shares the primary's journal, not its sessions; the reference broker's opt-in (session
# mirroring, asked for here) is a replication feature.  Artemis has none under either policy: the ha.failover
# rows show its shared-store backup recreating the sessions.
RESUME = tuple(
    Case(f"ha.resume.{n}", "ha.transparent-resume",
         f"{policy} pair (the reference broker with its transparent resume: the primary mirrors its sessions to the "
         "backup); on the primary a transacted session sends one durable message and a consumer of another "
         "session receives one message without acknowledging it; the kit kills the primary (SIGKILL)",
         "the session is resumed on the backup (its reattach accepted, nothing recreated): the transaction commits "
         "and its message is the next one the consumer receives; the unacknowledged message is not delivered "
         "again, and acknowledging it on the resumed session leaves the queue empty; a recreated session (what a "
         "backup without session state does) is reported as such",
         needs=("config", "log", "kill"), params={"policy": policy})
    for n, policy in enumerate(("replication",), 1)
)


@cases(*RESUME)
def test_the_session_resumes_on_the_backup(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                           evidence: CaseEvidence) -> None:
    target = pair(cck_make_target, evidence, case.params["policy"], transparent_resume=True)
    queue = queue_for(case.id)
    history = History()

    async def scenario() -> None:
        settings = client_settings(target, RESTARTING, confirmation_window_size=1024 * 1024)
        async with on_primary(target, cck_settings, evidence, client=settings) as (connection, watch):
            plain = await connection.create_session()
            await ensure_queue(plain, queue)
            [waiting] = await send_keyed(plain.create_producer(queue), history, f"{case.id}:waiting", [True],
                                         name="P", process="producer")
            consumer = await plain.create_consumer(queue)
            plain.start()
            first = await drain(consumer, history, "consumer", expected=1, quiet_s=0.0,
                                receive_s=cck_settings.deadline(RECEIVE_S), ack="none")
            assert [key_of(d) for d in first] == [waiting], f"the message to hold unacknowledged: {first}"
            transacted = await connection.create_session(transacted=True)
            [pending] = await send_keyed(transacted.create_producer(queue), history, f"{case.id}:tx", [True],
                                         name="T", process="tx", confirmed=False)
            killed = time.monotonic()
            await asyncio.to_thread(target.node("node0").kill)
            outcome = await fail_over(watch, cck_settings, evidence)
            evidence.note("failover_ms", round((time.monotonic() - killed) * 1000, 1))
            evidence.note("restored_by", outcome)
            assert outcome == "reattached", (
                f"the session was {outcome} on the backup, not resumed: its transaction and unacknowledged "
                "delivery do not survive (spec 004 asks that the client can resume its session transparently)")
            await transacted.commit()
            history.ok("tx", "send", pending, producer="T", seq=0)
            after = await drain(consumer, history, "consumer", expected=1, quiet_s=cck_settings.deadline(QUIET_S),
                                receive_s=cck_settings.deadline(RECEIVE_S), ack="none",
                                fence=await fence_behind(consumer))
            keys = [key_of(d) for d in after]
            evidence.note("received_after_resume", keys)
            assert waiting not in keys, "the unacknowledged message was delivered again after the resume"
            assert keys == [pending], f"the committed transaction's message, and only it, was to come next: {keys}"
            for delivery in (*first, *after):  # the delivery from before the failover is still the session's
                await consumer.individual_acknowledge(delivery)
                history.ack("consumer", key_of(delivery))
            left = await drain_queue(connection, queue, history, 0, cck_settings)
            evidence.note("left_in_queue", left)
            assert not left, f"acknowledged on the resumed session, yet still in the queue: {left}"

    run(cck_settings, scenario(), CASE_S)
