"""High availability over the pair's life (spec 004 "Fail-over (session state)"): no session survives the loss
of both servers.  The pair: ``_ha_kit``.
"""

from __future__ import annotations

import asyncio

from cck.conformance.cases import Case, cases
from cck.conformance.clients import ClientUnderTest
from cck.conformance.evidence import CaseEvidence
from cck.conformance.plugin import Settings
from cck.reference.client import ClientError, connect

from ._ha_kit import CASE_S, FAILOVER_S, POLICIES, MakeTarget, acceptor, backup_learnt, pair
from ._kit import RESTARTING, client_settings, run
from ._restart_support import Watch

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
