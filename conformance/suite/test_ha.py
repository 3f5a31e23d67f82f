"""High availability: a primary and its backup server (spec 004 "Fail-over (session state)", spec 003 "JMS
Failover", spec 000 "Session reconnection").

Each case runs a pair the kit starts from one descriptor (``Topology.ha_pair``): ``node0`` the primary, ``node1``
its backup, one cluster connection between them.  The client is given the primary's URL only: it must learn the
backup from the topology.  The kit then kills the primary (SIGKILL) or stops the backup, and judges what the
client and the backup do.  A failover is timed from the kill to the first operation that succeeded on the
backup (evidence ``failover_ms``).

Policies: ``shared-store`` (one journal on one store; the backup activates when the primary's lock is gone).
``replication`` joins when the reference broker has it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from cck.conformance.cases import Case, cases
from cck.conformance.clients import ClientUnderTest
from cck.conformance.evidence import CaseEvidence
from cck.conformance.oracles import History
from cck.conformance.plugin import Settings
from cck.conformance.targets import HASpec, ManagedTarget, Target, Topology
from cck.conformance.verdicts import NotObserved
from cck.reference.client import (
    ClientError,
    Connection,
    Connector,
    TransactionRolledBack,
    connect,
    connector_of,
)

from ._kit import (
    RESTARTING,
    client_settings,
    drain_queue,
    judged,
    queue_for,
    run,
    send_keyed,
    settle_sends,
    wait_until,
)
from ._restart_support import Watch, ensure_queue

MakeTarget = Callable[[Topology], Target]

CASE_S = 150.0
#: how long the backup may take to activate and the client to reach it (a JVM loading a journal takes seconds)
FAILOVER_S = 60.0
#: how long a topology update may take to reach a subscribed client
TOPOLOGY_S = 20.0
COUNT = 10

POLICIES = ("shared-store",)


def _pair(target: Target) -> ManagedTarget:
    assert isinstance(target, ManagedTarget), f"a managed target was made, got {target!r}"
    return target


def _acceptor(target: ManagedTarget, node: str) -> Connector:
    spec = target.topology.node(node)
    return Connector(spec.host, spec.port)


def _backup_of_primary(connection: Connection, primary: Connector) -> Connector | None:
    """The backup connector of the topology member whose live connector is the primary; None when there is none."""
    for member in connection.core.topology.values():
        if member.live is not None and connector_of(member.live) == primary:
            return connector_of(member.backup) if member.backup is not None else None
    return None


async def _backup_learnt(connection: Connection, target: ManagedTarget, settings: Settings) -> Connector | None:
    """Wait (up to TOPOLOGY_S) until the primary's topology names the backup's acceptor as its backup; what it
    names then (the caller judges it, or goes on with whatever the client learnt)."""
    primary, backup = _acceptor(target, "node0"), _acceptor(target, "node1")
    with contextlib.suppress(NotObserved):
        await wait_until(lambda: _backup_of_primary(connection, primary) == backup,
                         settings.deadline(TOPOLOGY_S), "the backup in the primary's topology")
    return _backup_of_primary(connection, primary)


# ---------------------------------------------------------------------------------------------------- topology

TOPOLOGY = tuple(
    Case(f"ha.topology.{n}", "ha.backup-candidates" if step == "paired" else "ha.backup-candidates-current",
         f"{policy} pair; the client connects to the primary only and subscribes to the topology"
         + ("" if step == "paired" else "; then the kit stops the backup (SIGTERM)"),
         "the member whose live connector is the primary's acceptor names the backup's acceptor as its backup"
         if step == "paired" else
         "once the backup has stopped, the primary's member is sent again without a backup connector",
         needs=("config",) if step == "paired" else ("config", "restart"), params={"policy": policy, "step": step})
    for n, (policy, step) in enumerate(((p, s) for p in POLICIES for s in ("paired", "backup-gone")), 1)
)


@cases(*TOPOLOGY)
def test_the_topology_names_the_backup(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                       evidence: CaseEvidence) -> None:
    target = _pair(cck_make_target(Topology.ha_pair(HASpec(case.params["policy"]))))
    evidence.note("target", target.describe())
    primary, backup = _acceptor(target, "node0"), _acceptor(target, "node1")

    async def scenario() -> None:
        settings = client_settings(target, RESTARTING, reconnect_attempts=0)
        async with await connect(target.node("node0").url, settings=settings) as connection:
            paired = await _backup_learnt(connection, target, cck_settings)
            evidence.note("backup_seen", str(paired))
            assert paired == backup, f"the primary's member names backup {paired}, not the backup's acceptor {backup}"
            if case.params["step"] == "paired":
                return
            await asyncio.to_thread(target.node("node1").stop)
            with contextlib.suppress(NotObserved):
                await wait_until(lambda: _backup_of_primary(connection, primary) is None,
                                 cck_settings.deadline(TOPOLOGY_S), "the primary's member without a backup")
            left = _backup_of_primary(connection, primary)
            evidence.note("backup_after_stop", str(left))
            assert left is None, f"the primary's member still names backup {left} after the backup stopped"

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
         needs=("config", "kill"), params={"policy": policy, "kind": kind})
    for n, (policy, kind) in enumerate(((p, k) for p in POLICIES for k in ("durable", "mixed")), 1)
)


async def _kill_primary(target: ManagedTarget, watch: Watch, settings: Settings, evidence: CaseEvidence) -> float:
    """Kill the primary; wait for the client's failover to end (recreated or reattached); the monotonic time of
    the kill."""
    killed = time.monotonic()
    await asyncio.to_thread(target.node("node0").kill)
    outcome = await watch.until(("recreated", "reattached", "gave-up"), settings.deadline(FAILOVER_S))
    evidence.note("events", watch.to_json())
    assert outcome != "gave-up", f"the client gave up instead of failing over to the backup: {watch.kinds}"
    assert watch.kinds.index("listener") < watch.kinds.index(outcome), (
        f"the failure listener was not told before the session was restored: {watch.kinds}")
    return killed


@cases(*FAILOVER)
def test_the_client_fails_over_to_the_backup(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                             evidence: CaseEvidence) -> None:
    target = _pair(cck_make_target(Topology.ha_pair(HASpec(case.params["policy"]))))
    evidence.note("target", target.describe())
    queue = queue_for(case.id)
    history = History()
    durable = [case.params["kind"] == "durable" or seq % 2 == 0 for seq in range(COUNT)]

    async def scenario() -> None:
        settings = client_settings(target, RESTARTING)
        async with (judged(history, evidence, label="ha"),
                    await connect(target.node("node0").url, settings=settings) as connection):
            watch = Watch(connection)
            backup = _acceptor(target, "node1")
            await _backup_learnt(connection, target, cck_settings)
            session = await connection.create_session()
            await ensure_queue(session, queue)
            producer = session.create_producer(queue)
            keys = await send_keyed(producer, history, case.id, durable, name="P", process="producer",
                                    confirmed=False)
            # each send returned (confirmed); a non-durable message does not outlive its server, so it is recorded
            # as failed and a receipt of one is reported as unexpected
            settle_sends(history, keys, durable, name="P", process="producer")
            killed = await _kill_primary(target, watch, cck_settings, evidence)
            got = await drain_queue(connection, queue, history, sum(durable), cck_settings)
            evidence.note("failover_ms", round((time.monotonic() - killed) * 1000, 1))
            evidence.note("received", got)
            evidence.note("connected_to", str(connection.machine.connector))
            assert connection.machine.connector == backup, (
                f"the client is connected to {connection.machine.connector}, not the backup {backup}")

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- transactions

TRANSACTION = tuple(
    Case(f"ha.transaction.{n}", "ha.transaction-aborted",
         f"{policy} pair; a transacted session sends {COUNT} durable messages and does not commit; the kit kills the "
         "primary; once the client failed over to the backup it commits",
         "the commit fails with a transaction-rolled-back error (the work was done on the server that failed) and "
         "none of the messages is on the backup",
         needs=("config", "kill"), params={"policy": policy})
    for n, policy in enumerate(POLICIES, 1)
)


@cases(*TRANSACTION)
def test_a_transaction_open_at_failover_is_aborted(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                                   evidence: CaseEvidence) -> None:
    target = _pair(cck_make_target(Topology.ha_pair(HASpec(case.params["policy"]))))
    evidence.note("target", target.describe())
    queue = queue_for(case.id)
    history = History()

    async def scenario() -> None:
        settings = client_settings(target, RESTARTING)
        async with (judged(history, evidence, label="ha-tx"),
                    await connect(target.node("node0").url, settings=settings) as connection):
            watch = Watch(connection)
            await _backup_learnt(connection, target, cck_settings)
            setup = await connection.create_session()
            await ensure_queue(setup, queue)
            session = await connection.create_session(transacted=True)
            producer = session.create_producer(queue)
            keys = await send_keyed(producer, history, case.id, [True] * COUNT, name="P", process="producer",
                                    confirmed=False)
            await _kill_primary(target, watch, cck_settings, evidence)
            outcome: object = None
            try:
                await session.commit()
            except ClientError as exc:
                outcome = exc
            evidence.note("commit", repr(outcome))
            settle_sends(history, keys, [False] * COUNT, name="P", process="producer")
            got = await drain_queue(connection, queue, history, 0, cck_settings)
            evidence.note("received", got)
            assert isinstance(outcome, TransactionRolledBack), f"the commit after failover ended with {outcome!r}"

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- no survivor

NO_SURVIVOR = tuple(
    Case(f"ha.no-survivor.{n}", "ha.no-survivor",
         f"{policy} pair; a client with reconnectAttempts=3 holds a session on the primary; the kit kills the backup "
         "and then the primary (SIGKILL) and keeps both down",
         "the failure listener is told, the client makes its reconnect attempts over the primary and the backup and "
         "gives up; a call on the session then fails",
         needs=("config", "kill"), subject="client", params={"policy": policy})
    for n, policy in enumerate(POLICIES, 1)
)


@cases(*NO_SURVIVOR)
def test_no_session_survives_the_loss_of_both_servers(case: Case, cck_client: ClientUnderTest,
                                                      cck_make_target: MakeTarget, cck_settings: Settings,
                                                      evidence: CaseEvidence) -> None:
    cck_client.require_kit("the case watches the failure listener, the reconnect attempts and a call after giving "
                           "up through the kit's client API")
    target = _pair(cck_make_target(Topology.ha_pair(HASpec(case.params["policy"]))))
    evidence.note("target", target.describe())
    attempts = 3

    async def scenario() -> None:
        settings = client_settings(target, RESTARTING, reconnect_attempts=attempts)
        async with await connect(target.node("node0").url, settings=settings) as connection:
            watch = Watch(connection)
            knew_backup = await _backup_learnt(connection, target, cck_settings) == _acceptor(target, "node1")
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
