"""High availability, work in flight when the primary fails (spec 003 "JMS Failover"): a transaction open on
the primary is aborted on the backup.  The pair and the timed kill: ``_ha_kit``.
"""

from __future__ import annotations

from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.oracles import History
from cck.conformance.plugin import Settings
from cck.reference.client import ClientError, TransactionRolledBack, connect

from ._ha_kit import CASE_S, POLICIES, MakeTarget, backup_learnt, kill_primary, pair
from ._kit import RESTARTING, client_settings, drain_queue, judged, queue_for, run, send_keyed, settle_sends
from ._restart_support import Watch, ensure_queue

COUNT = 10


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
    target = pair(cck_make_target, evidence, case.params["policy"])
    queue = queue_for(case.id)
    history = History()

    async def scenario() -> None:
        settings = client_settings(target, RESTARTING)
        async with (judged(history, evidence, label="ha-tx"),
                    await connect(target.node("node0").url, settings=settings) as connection):
            watch = Watch(connection)
            await backup_learnt(connection, target, cck_settings)
            setup = await connection.create_session()
            await ensure_queue(setup, queue)
            session = await connection.create_session(transacted=True)
            producer = session.create_producer(queue)
            keys = await send_keyed(producer, history, case.id, [True] * COUNT, name="P", process="producer",
                                    confirmed=False)
            await kill_primary(target, watch, cck_settings, evidence)
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
