"""High availability over the pair's life: the primary taking its place back from the backup (failback), a
graceful stop of the primary with and without failover-on-shutdown, both servers lost (spec 004 "Fail-over
(session state)": no session survives) and both started again (spec 000 "Session reconnection", spec 004
"Cluster Restart": the client recreates its session on the primary, durable messages are back).  The pair, the
policies and the timed kill: ``_ha_kit``.
"""

from __future__ import annotations

import asyncio
import time

from cck.conformance.cases import Case, cases
from cck.conformance.clients import ClientUnderTest
from cck.conformance.evidence import CaseEvidence
from cck.conformance.oracles import History
from cck.conformance.plugin import Settings
from cck.conformance.targets import ManagedTarget
from cck.conformance.verdicts import NotObserved
from cck.reference.client import ClientError, Connection, Connector, Consumer, Producer, connect

from ._ha_kit import (
    CASE_S,
    FAILOVER_S,
    POLICIES,
    MakeTarget,
    acceptor,
    backup_learnt,
    fail_over,
    kill_primary,
    on_primary,
    pair,
    refuses,
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
    queue_for,
    run,
    send_keyed,
    settle_sends,
)
from ._restart_support import Watch, ensure_queue

COUNT = 10
#: how long a backup that must stay passive is watched (Artemis's backup looks at the store every 2 s)
PASSIVE_S = 10.0


def _on(connection: Connection, server: Connector, role: str, evidence: CaseEvidence) -> None:
    """The client is connected to ``server`` (the ``role`` of the pair)."""
    evidence.note(f"connected_to_{role}", str(connection.machine.connector))
    assert connection.machine.connector == server, (
        f"the client is connected to {connection.machine.connector}, not the {role} {server}")


async def _receive(consumer: Consumer, history: History, count: int, settings: Settings, process: str) -> int:
    """``count`` messages through ``consumer`` (each acknowledged), then nothing more for a quiet window."""
    got = await drain(consumer, history, process, expected=count, quiet_s=settings.deadline(QUIET_S),
                      receive_s=settings.deadline(RECEIVE_S), fence=await fence_behind(consumer))
    return len(got)


async def _send(producer: Producer, history: History, case_id: str, batch: str, durable: list[bool]) -> None:
    """A batch of keyed messages, each confirmed (``durable`` says which are); a non-durable one is recorded as
    lost with its server, so a receipt of it after a restart is reported as unexpected."""
    keys = await send_keyed(producer, history, f"{case_id}:{batch}", durable, name=batch, process="producer",
                            confirmed=False)
    settle_sends(history, keys, durable, name=batch, process="producer")


# ---------------------------------------------------------------------------------------------------- failback

FAILBACK = tuple(
    Case(f"ha.failback.{n}", "ha.failback",
         f"{policy} pair with allow-failback; the client (given the primary's URL only, reconnecting every 100 ms) "
         + {"producer": f"sends {COUNT} durable messages to the primary; the kit kills the primary (SIGKILL); once "
                        f"the client failed over it sends {COUNT} more to the backup; the kit starts the primary "
                        "again",
            "consumer": f"receives {COUNT} durable messages on the primary through one consumer; the kit kills the "
                        f"primary; {COUNT} more are sent to the backup and received through the same consumer; the "
                        f"kit starts the primary again and {COUNT} more are sent and received there"}[variant],
         "the client fails over to the backup, then moves back to the primary within the deadline (evidence "
         "failback_ms, from the primary's start); "
         + {"producer": f"all {2 * COUNT} messages are on the primary afterwards, each exactly once",
            "consumer": f"the consumer keeps receiving across both moves: all {3 * COUNT} messages, each exactly "
                        "once, none left on the primary"}[variant],
         needs=("config", "log", "kill", "restart"), params={"policy": policy, "variant": variant})
    for n, (policy, variant) in enumerate(((p, v) for p in POLICIES for v in ("producer", "consumer")), 1)
)


@cases(*FAILBACK)
def test_the_primary_takes_its_place_back(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                          evidence: CaseEvidence) -> None:
    target = pair(cck_make_target, evidence, case.params["policy"], allow_failback=True, primary_restarts=True)
    consuming = case.params["variant"] == "consumer"
    queue = queue_for(case.id)
    history = History()
    primary, backup = acceptor(target, "node0"), acceptor(target, "node1")

    async def scenario() -> None:
        # blocking acknowledgements: a message received before a move is acknowledged on the server it came from,
        # so nothing is in flight when the kit kills or starts a server
        settings = client_settings(target, RESTARTING, block_on_acknowledge=True)
        async with (judged(history, evidence, label="failback"),
                    on_primary(target, cck_settings, evidence, client=settings) as (connection, watch)):
            session = await connection.create_session()
            await ensure_queue(session, queue)
            producer = session.create_producer(queue)
            consumer = await session.create_consumer(queue) if consuming else None
            session.start()
            received = 0
            await _send(producer, history, case.id, "on-primary", [True] * COUNT)
            if consumer is not None:
                received += await _receive(consumer, history, COUNT, cck_settings, "consumer")
            await kill_primary(target, watch, cck_settings, evidence)
            _on(connection, backup, "backup", evidence)
            await _send(producer, history, case.id, "on-backup", [True] * COUNT)
            if consumer is not None:
                received += await _receive(consumer, history, COUNT, cck_settings, "consumer")
            moved = watch.mark()
            started = time.monotonic()
            await asyncio.to_thread(target.node("node0").start)
            outcome = await fail_over(watch, cck_settings, evidence, since=moved)
            evidence.note("failback_ms", round((time.monotonic() - started) * 1000, 1))
            evidence.note("failback", outcome)
            await asyncio.to_thread(target.node("node0").wait_active, cck_settings.deadline(FAILOVER_S))
            _on(connection, primary, "primary", evidence)
            if consumer is not None:
                await _send(producer, history, case.id, "after-failback", [True] * COUNT)
                received += await _receive(consumer, history, COUNT, cck_settings, "consumer")
                evidence.note("received_by_consumer", received)
            left = await drain_queue(connection, queue, history, 0 if consuming else 2 * COUNT, cck_settings)
            evidence.note("left_on_primary", len(left))

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- graceful stop

#: (policy, failover-on-shutdown) of the graceful-stop rows.  failover-on-shutdown is a shared-store setting: a
#: replication primary that stops gracefully tells its backup (Artemis: STOP_CALLED, after which the backup forces
#: its failover after a delay, ReplicationObserver.onPrimaryStopping), so its row expects the backup to take over.
SHUTDOWN_ROWS = tuple((p, f) for p in POLICIES for f in ((True, False) if p == "shared-store" else (True,)))

SHUTDOWN = tuple(
    Case(f"ha.shutdown.{n}", "ha.shutdown",
         (f"{policy} pair with failover-on-shutdown={str(failover).lower()}" if policy == "shared-store" else
          f"{policy} pair")
         + f"; the client (given the primary's URL only, reconnecting every 100 ms) sends {COUNT} durable messages, "
         "each confirmed; the kit stops the primary gracefully (SIGTERM)"
         + ("" if failover else f"; after watching the backup for {PASSIVE_S:.0f} s it starts the primary again"),
         ("the backup activates: the client fails over to it within the deadline and finds the "
          f"{COUNT} messages there, each exactly once") if failover else
         (f"the backup stays passive: for {PASSIVE_S:.0f} s the client reaches no server and the backup's acceptor "
          "refuses connections; once the primary is started again the client reconnects to it and finds the "
          f"{COUNT} messages there, each exactly once"),
         needs=("config", "log", "restart"), params={"policy": policy, "failover": failover})
    for n, (policy, failover) in enumerate(SHUTDOWN_ROWS, 1)
)


async def _stays_passive(target: ManagedTarget, watch: Watch, since: int, settings: Settings,
                         evidence: CaseEvidence) -> None:
    """The backup does not serve for PASSIVE_S: the client's reconnection ends nowhere and the backup's acceptor
    refuses connections, at the start and at the end of the window."""
    backup = acceptor(target, "node1")
    refused = [await refuses(backup)]
    try:
        outcome: str | None = await watch.until(("recreated", "reattached", "gave-up"), settings.deadline(PASSIVE_S),
                                                since=since)
    except NotObserved:
        outcome = None
    refused.append(await refuses(backup))
    evidence.note("passive_window", {"seconds": settings.deadline(PASSIVE_S), "client_outcome": outcome,
                                     "backup_refused": refused, "events": watch.to_json()})
    assert outcome is None, (
        f"the client's reconnection ended ({outcome}) after the primary's graceful stop without failover: "
        f"{watch.kinds[since:]}")
    assert all(refused), f"the backup's acceptor took connections after a stop without failover: {refused}"


@cases(*SHUTDOWN)
def test_a_graceful_stop_of_the_primary(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                        evidence: CaseEvidence) -> None:
    failover = case.params["failover"]
    target = pair(cck_make_target, evidence, case.params["policy"], failover_on_shutdown=failover,
                  primary_restarts=True)
    queue = queue_for(case.id)
    history = History()
    primary, backup = acceptor(target, "node0"), acceptor(target, "node1")

    async def scenario() -> None:
        settings = client_settings(target, RESTARTING)
        async with (judged(history, evidence, label="shutdown"),
                    on_primary(target, cck_settings, evidence, client=settings) as (connection, watch)):
            session = await connection.create_session()
            await ensure_queue(session, queue)
            await _send(session.create_producer(queue), history, case.id, "P", [True] * COUNT)
            stopped = watch.mark()
            await asyncio.to_thread(target.node("node0").stop)
            if failover:
                await fail_over(watch, cck_settings, evidence, since=stopped)
                _on(connection, backup, "backup", evidence)
            else:
                await _stays_passive(target, watch, stopped, cck_settings, evidence)
                await asyncio.to_thread(target.node("node0").start)
                await fail_over(watch, cck_settings, evidence, since=stopped)
                _on(connection, primary, "primary", evidence)
            # what the client was told when the primary stopped (DISCONNECT and its reason, or a closed socket)
            evidence.note("told", next((d for k, _, d in watch.log[stopped:] if k == "listener"), None))
            got = await drain_queue(connection, queue, history, COUNT, cck_settings)
            evidence.note("received", len(got))

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- both restarted

RESTART_ALL = tuple(
    Case(f"ha.restart-all.{n}", clause,
         f"{policy} pair; the client (given the primary's URL only, reconnecting forever every 100 ms) holds a "
         f"session with a consumer (not started) on a durable queue and sends {COUNT} "
         + ("durable messages" if kind != "mixed" else "messages, every other one durable")
         + ", each confirmed; the kit kills the backup and the primary (SIGKILL), then starts the primary and then "
         "the backup",
         {"recreate": "the client reaches the primary with its session recreated (the servers lost it: never "
                      "reattached), its failure listener told first; the consumer made before the kill receives "
                      "there",
          "durable": f"all {COUNT} durable messages are back on the primary, each exactly once, received through "
                     "the recreated session's consumer",
          "mixed": f"the {COUNT // 2} durable messages are back on the primary, each once; the non-durable ones "
                   "are gone"}[kind],
         needs=("config", "log", "kill", "restart"), params={"policy": policy, "kind": kind})
    for n, (policy, (kind, clause)) in enumerate(
        ((p, k) for p in POLICIES for k in (("recreate", "restart.recreate"),
                                            ("durable", "restart.durable-messages"),
                                            ("mixed", "restart.non-durable-lost"))), 1)
)


@cases(*RESTART_ALL)
def test_both_servers_restarted(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                evidence: CaseEvidence) -> None:
    target = pair(cck_make_target, evidence, case.params["policy"], primary_restarts=True)
    queue = queue_for(case.id)
    history = History()
    durable = [case.params["kind"] != "mixed" or seq % 2 == 0 for seq in range(COUNT)]

    async def scenario() -> None:
        settings = client_settings(target, RESTARTING)
        async with (judged(history, evidence, label="restart-all"),
                    on_primary(target, cck_settings, evidence, client=settings) as (connection, watch)):
            session = await connection.create_session()
            await ensure_queue(session, queue)
            consumer = await session.create_consumer(queue)  # not started: nothing is in flight at the kill
            await _send(session.create_producer(queue), history, case.id, "P", durable)
            await asyncio.to_thread(target.node("node1").kill)
            await asyncio.to_thread(target.node("node0").kill)
            await asyncio.to_thread(target.node("node0").start)
            await asyncio.to_thread(target.node("node0").wait_active, cck_settings.deadline(FAILOVER_S))
            await asyncio.to_thread(target.node("node1").start)
            outcome = await fail_over(watch, cck_settings, evidence)
            evidence.note("restored", outcome)
            _on(connection, acceptor(target, "node0"), "primary", evidence)
            assert outcome == "recreated", f"the client's session was {outcome} on a restarted primary: {watch.kinds}"
            session.start()
            got = await _receive(consumer, history, sum(durable), cck_settings, "consumer")
            evidence.note("received", got)

    run(cck_settings, scenario(), CASE_S)

# ---------------------------------------------------------------------------------------------------- no survivor

NO_SURVIVOR = tuple(
    Case(f"ha.no-survivor.{n}", "ha.no-survivor",
         f"{policy} pair; a client with reconnectAttempts=3 holds a session on the primary; the kit kills the backup "
         "and then the primary (SIGKILL) and keeps both down",
         "the failure listener is told, the client makes its reconnect attempts over the primary and the backup and "
         "gives up; a call on the session then fails",
         needs=("config", "log", "kill"), subject="client", params={"policy": policy})
    for n, policy in enumerate(POLICIES, 1)
)


@cases(*NO_SURVIVOR)
def test_no_session_survives_the_loss_of_both_servers(case: Case, cck_client: ClientUnderTest,
                                                      cck_make_target: MakeTarget, cck_settings: Settings,
                                                      evidence: CaseEvidence) -> None:
    cck_client.require_kit("the case watches the failure listener, the reconnect attempts and a call after giving "
                           "up through the kit's client API")
    target = pair(cck_make_target, evidence, case.params["policy"])
    attempts = 3

    async def scenario() -> None:
        settings = client_settings(target, RESTARTING, reconnect_attempts=attempts)
        async with await connect(target.node("node0").url, settings=settings) as connection:
            watch = Watch(connection)
            knew_backup = await backup_learnt(connection, target, cck_settings) == acceptor(target, "node1")
            evidence.note("knew_backup", knew_backup)
            session = await connection.create_session()
            await asyncio.to_thread(target.node("node1").kill)
            await asyncio.to_thread(target.node("node0").kill)
            outcome = await watch.until(("recreated", "reattached", "gave-up"), cck_settings.deadline(FAILOVER_S))
            evidence.note("events", watch.to_json())
            assert outcome == "gave-up", f"the client ended its reconnection with {outcome}: {watch.kinds}"
            assert watch.kinds[0] == "listener", f"the failure listener was not told first: {watch.kinds}"
            # each reconnect attempt tries the failed server, then the backup the topology names at that moment
            # (a broker that dropped the stopped backup from it leaves the failed server alone)
            tried = [e.connector for e in connection.events if e.kind == "attempt"]
            evidence.note("attempted", tried)
            primary_url, backup_url = target.node("node0").url, target.node("node1").url
            assert tried.count(primary_url) == attempts, (
                f"{tried.count(primary_url)} attempts on the failed primary, reconnectAttempts={attempts}: {tried}")
            assert set(tried) <= {primary_url, backup_url}, f"attempts on servers not in the pair: {tried}"
            failed: object = None
            try:
                await session.queue_query("anything")
            except ClientError as exc:
                failed = exc
            evidence.note("call_after", repr(failed))
            assert isinstance(failed, ClientError), f"a call after the client gave up ended with {failed!r}"

    run(cck_settings, scenario(), CASE_S)
