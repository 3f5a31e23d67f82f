"""High availability across a partition between the two servers of a pair (a split brain): both keep running, each
loses sight of the other, and the kit still reaches each of them.

The partition is made by two fault proxies standing on the links between the servers (each server's connector to
the other names a proxy: ``ClusterSpec.via``); the kit blackholes both (no byte crosses either way, new connections
hang), while its client stays connected to the primary directly and it watches the backup's own acceptor.

* ``ha.partition.1`` (shared store) and ``.3`` (replication under the broker's file-based lock manager): the
  configuration arbitrates activation, so the backup must stay passive while the primary, which holds the lock,
  serves on (``ha.split-brain``);
* ``ha.partition.2`` (replication with no lock manager, one pair: no quorum is possible): the primary carries on
  serving its clients (``ha.primary-carries-on``); whether the backup activated too, so that two servers serve the
  same messages, is recorded as evidence (``both_active``), as the Artemis manual warns it will.
"""

from __future__ import annotations

import asyncio

from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.faults import Blackhole, FaultProxy
from cck.conformance.oracles import History
from cck.conformance.plugin import Settings, TargetFactory
from cck.conformance.targets import ClusterSpec, ManagedTarget

from ._ha_kit import CASE_S, MakeTarget, Policy, acceptor, on_primary, pair, refuses
from ._kit import (
    RESTARTING,
    client_settings,
    drain_queue,
    judged,
    observed,
    poll_value,
    queue_for,
    run,
    send_keyed,
)
from ._restart_support import ensure_queue

#: the pair's failure detection (the cluster connection's): a server silent for the TTL is lost
CHECK_PERIOD_MS = 1_000
CONNECTION_TTL_MS = 4_000
#: how long the backup is watched after the partition: its TTL runs out, then it decides (Artemis's replication
#: backup without a lock manager votes, alone, for a few seconds; with one it tries the lock once)
OBSERVE_S = 30.0
#: the primary's answer to a durable send after the partition: it first waits for its backup's acknowledgement
#: until that link's TTL (Artemis) or its replication timeout (the reference broker: 10 s) runs out
SEND_S = 30.0

ROWS: tuple[tuple[Policy, bool], ...] = (("shared-store", False), ("replication", False), ("replication", True))


def _protected(policy: Policy, lock_manager: bool) -> bool:
    """Whether the configuration claims to prevent a split brain (a shared store's lock, or a lock manager)."""
    return policy == "shared-store" or lock_manager


def _premise(policy: Policy, lock_manager: bool) -> str:
    return ("shared-store pair" if policy == "shared-store" else
            "replication pair under the broker's file-based lock manager" if lock_manager else
            "replication pair with no lock manager (one pair: no quorum)")


PARTITION = tuple(
    Case(f"ha.partition.{n}", "ha.split-brain" if _protected(policy, lock) else "ha.primary-carries-on",
         f"{_premise(policy, lock)} whose links to each other go through two fault proxies (connection TTL "
         f"{CONNECTION_TTL_MS} ms); the client, connected to the primary directly, sends one durable message; the "
         "kit blackholes both proxies (a partition: each server loses the other, the kit still reaches both), "
         f"watches the backup's acceptor for {OBSERVE_S:.0f} s, then sends one more durable message to the primary",
         ("the backup stays passive (its acceptor refuses connections for the whole window) while the primary serves "
          "on: the second send is confirmed and both messages are received from it, once each")
         if _protected(policy, lock) else
         ("the primary carries on: the second send is confirmed and both messages are received from it, once each; "
          "whether the backup activated as well (a split brain) is recorded as evidence"),
         needs=("config", "log"), params={"policy": policy, "lock_manager": lock})
    for n, (policy, lock) in enumerate(ROWS, 1)
)


@cases(*PARTITION)
def test_a_partition_between_the_servers(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                         cck_targets: TargetFactory, evidence: CaseEvidence) -> None:
    policy: Policy = case.params["policy"]
    lock_manager: bool = case.params["lock_manager"]
    protected = _protected(policy, lock_manager)
    queue = queue_for(case.id)
    history = History()

    async def scenario() -> None:
        # the acceptors' ports are chosen first: each proxy must know the server it stands for before they start
        primary_port, backup_port = cck_targets.ports(2)
        async with FaultProxy("127.0.0.1", backup_port) as to_backup, \
                FaultProxy("127.0.0.1", primary_port) as to_primary:
            cluster = ClusterSpec(check_period_ms=CHECK_PERIOD_MS, connection_ttl_ms=CONNECTION_TTL_MS,
                                  via=(("node0", "node1", to_backup.url), ("node1", "node0", to_primary.url)))
            target: ManagedTarget = await asyncio.to_thread(
                pair, cck_make_target, evidence, policy, lock_manager=lock_manager, cluster=cluster,
                ports=(primary_port, backup_port))
            await _partitioned(target, to_backup, to_primary)

    async def _partitioned(target: ManagedTarget, to_backup: FaultProxy, to_primary: FaultProxy) -> None:
        backup = acceptor(target, "node1")
        async with (judged(history, evidence, label="partition"),
                    on_primary(target, cck_settings, evidence, client=client_settings(target, RESTARTING))
                    as (connection, watch)):
            session = await connection.create_session()
            await ensure_queue(session, queue)
            producer = session.create_producer(queue)
            await send_keyed(producer, history, f"{case.id}:before", [True], name="B", process="producer")
            assert await refuses(backup), "the backup serves beside the primary before any partition"
            loop = asyncio.get_running_loop()
            since = watch.mark()
            cut = loop.time()
            for proxy in (to_backup, to_primary):
                proxy.add(Blackhole())
            seen = await poll_value(lambda: refuses(backup), lambda refused: not refused,
                                    cck_settings.deadline(OBSERVE_S))
            backup_active = not seen[-1]
            active_after_ms = round((loop.time() - cut) * 1000, 1) if backup_active else None
            evidence.note("backup_active", backup_active)
            evidence.note("backup_active_after_ms", active_after_ms)
            await observed(send_keyed(producer, history, f"{case.id}:after", [True], name="A", process="producer"),
                           cck_settings.deadline(SEND_S), "the primary's confirmation of a durable send")
            evidence.note("primary_confirmed_after_ms", round((loop.time() - cut) * 1000, 1))
            got = await drain_queue(connection, queue, history, 2, cck_settings)
            evidence.note("received", got)
            evidence.note("both_active", backup_active)
            evidence.note("client_events", watch.to_json())
            assert not watch.kinds[since:], f"the client lost the primary during the partition: {watch.kinds[since:]}"
            if protected:
                assert not backup_active, (
                    f"split brain: the backup activated {active_after_ms} ms into the "
                    "partition while the primary, which holds the lock, still served")

    run(cck_settings, scenario(), CASE_S)
