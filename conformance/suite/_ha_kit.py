"""What the ``ha`` modules share: the pair a case runs (``node0`` the primary, ``node1`` its backup, from one
``Topology.ha_pair`` descriptor), the acceptor of each, the backup as the primary's topology names it, and the
kill of the primary followed by the client's failover (timed: evidence ``failover_ms``).

The client is always given the primary's URL only: it must learn the backup from the topology.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Literal

from cck.conformance.evidence import CaseEvidence
from cck.conformance.plugin import Settings
from cck.conformance.targets import ClusterSpec, HASpec, ManagedTarget, NodeSpec, Target, Topology
from cck.conformance.verdicts import NotObserved
from cck.reference.client import ClientSettings, Connection, Connector, TopologyMember, connect, connector_of

from ._kit import RESTARTING, client_settings, signalled, wait_until
from ._restart_support import Watch

__all__ = [
    "CASE_S", "FAILOVER_S", "TOPOLOGY_S", "POLICIES", "MakeTarget", "Policy",
    "acceptor", "announced_while", "backup_learnt", "backup_of_primary", "fail_over", "ha_spec", "kill_primary",
    "on_primary", "pair", "refuses",
]

MakeTarget = Callable[[Topology], Target]
Policy = Literal["shared-store", "replication"]

#: the policies every ``ha`` table is parametrised over (``replication`` joins when the reference broker has it)
POLICIES: tuple[Policy, ...] = ("shared-store", "replication")
CASE_S = 150.0
#: how long the backup may take to activate and the client to reach it (a JVM loading a journal takes seconds)
FAILOVER_S = 60.0
#: how long a topology update may take to reach a subscribed client
TOPOLOGY_S = 20.0


def ha_spec(policy: Policy, *, allow_failback: bool = True, failover_on_shutdown: bool = False,
            lock_manager: bool = False, transparent_resume: bool = False, primary_restarts: bool = True) -> HASpec:
    """The pair's ``<ha-policy>`` under ``policy`` (what :func:`pair` starts, and ``benchmarks/ha_soak.py``).
    ``primary_restarts``: the primary is started again after a failover or a stop (see below)."""
    # a replication primary that is started again asks whether its backup took over (Artemis needs it to fail back);
    # under a lock manager the lock decides that instead.  On a first start the answer is always no (the backup has no
    # acceptor open), but asking costs an Artemis primary about 2 s (its locator's connect to the passive backup fails
    # only after a retry interval): a pair whose primary starts only once does not ask.
    return HASpec(policy, allow_failback=allow_failback, failover_on_shutdown=failover_on_shutdown,
                  check_for_live_server=policy == "replication" and not lock_manager and primary_restarts,
                  lock_manager=lock_manager, transparent_resume=transparent_resume)


def pair(make_target: MakeTarget, evidence: CaseEvidence, policy: Policy, *, like: NodeSpec | None = None,
         allow_failback: bool = True, failover_on_shutdown: bool = False, lock_manager: bool = False,
         transparent_resume: bool = False, cluster: ClusterSpec | None = None,
         ports: tuple[int, int] | None = None, primary_restarts: bool = False) -> ManagedTarget:
    """The case's pair, started (primary first), described in the evidence.  ``lock_manager``: replication under
    the broker's file-based lock manager; ``cluster``: the pair's cluster connection (failure detection, links
    through proxies); ``ports``: the acceptors' ports, chosen by the caller (who must know them beforehand);
    ``transparent_resume``: the reference broker's session mirroring (replication; Artemis has none);
    ``primary_restarts``: the case starts the primary again (a replication primary then checks for a live server)."""
    ha = ha_spec(policy, allow_failback=allow_failback, failover_on_shutdown=failover_on_shutdown,
                 lock_manager=lock_manager, transparent_resume=transparent_resume, primary_restarts=primary_restarts)
    topology = Topology.ha_pair(ha, cluster, like=like)
    if ports is not None:
        topology = dataclasses.replace(topology, nodes=tuple(
            dataclasses.replace(node, port=port) for node, port in zip(topology.nodes, ports, strict=True)))
    target = make_target(topology)
    assert isinstance(target, ManagedTarget), f"a managed target was made, got {target!r}"
    evidence.note("target", target.describe())
    return target


def acceptor(target: ManagedTarget, node: str) -> Connector:
    spec = target.topology.node(node)
    return Connector(spec.host, spec.port)


async def refuses(server: Connector) -> bool:
    """Whether ``server``'s acceptor refuses a TCP connection (nothing listens there: a passive server)."""
    try:
        _, writer = await asyncio.open_connection(server.host, server.port)
    except OSError:
        return True
    writer.close()
    return False


def backup_of_primary(connection: Connection, primary: Connector) -> Connector | None:
    """The backup connector of the topology member whose live connector is the primary; None when there is none."""
    for member in connection.core.topology.values():
        if member.live is not None and connector_of(member.live) == primary:
            return connector_of(member.backup) if member.backup is not None else None
    return None


async def backup_learnt(connection: Connection, target: ManagedTarget, settings: Settings) -> Connector | None:
    """Wait (up to TOPOLOGY_S) until the primary's topology names the backup's acceptor as its backup; what it
    names then (the caller judges it, or goes on with whatever the client learnt)."""
    primary, backup = acceptor(target, "node0"), acceptor(target, "node1")
    with contextlib.suppress(NotObserved):
        await wait_until(lambda: backup_of_primary(connection, primary) == backup,
                         settings.deadline(TOPOLOGY_S), "the backup in the primary's topology")
    return backup_of_primary(connection, primary)


async def announced_while(connection: Connection, target: ManagedTarget, settings: Settings,
                          action: Callable[[], None]) -> list[Connector | None]:
    """Run ``action`` (in a thread: a node's start, say) and wait, up to TOPOLOGY_S after it returned, until a topology
    update of the primary's member naming the backup's acceptor arrives; the backup each update of that member named
    from the moment ``action`` began (None: none), in order.  Only updates sent anew count: a member the client
    already held (a broker that never dropped it) does not."""
    primary, backup = acceptor(target, "node0"), acceptor(target, "node1")
    named: list[Connector | None] = []
    changed = asyncio.Event()

    def heard(node_id: str, member: TopologyMember | None, last: bool) -> None:
        if member is not None and member.live is not None and connector_of(member.live) == primary:
            named.append(connector_of(member.backup) if member.backup is not None else None)
            changed.set()

    connection.core.topology_listeners.append(heard)
    try:
        await asyncio.to_thread(action)
        await signalled(changed, lambda: backup in named, settings.deadline(TOPOLOGY_S))
    finally:
        connection.core.topology_listeners.remove(heard)
    return named


@asynccontextmanager
async def on_primary(target: ManagedTarget, settings: Settings, evidence: CaseEvidence, *,
                     client: ClientSettings | None = None,
                     url: str | None = None) -> AsyncIterator[tuple[Connection, Watch]]:
    """A connection of the kit's client (``client``: RESTARTING in the target's protocol) to the primary (or
    ``url``: a proxy standing for the pair), watched from its start, once the primary's topology named the
    backup (or the wait for it ran out: noted, the case goes on)."""
    client = client or client_settings(target, RESTARTING)
    async with await connect(url or target.node("node0").url, settings=client) as connection:
        watch = Watch(connection)
        evidence.note("backup_seen", str(await backup_learnt(connection, target, settings)))
        yield connection, watch


async def fail_over(watch: Watch, settings: Settings, evidence: CaseEvidence, *, since: int = 0) -> str:
    """Wait for the client's failover to end (recreated or reattached, logged at or after ``since``); the
    failure listener must have been told first."""
    outcome = await watch.until(("recreated", "reattached", "gave-up"), settings.deadline(FAILOVER_S), since=since)
    evidence.note("events", watch.to_json())
    assert outcome != "gave-up", f"the client gave up instead of failing over: {watch.kinds}"
    kinds = watch.kinds[since:]
    assert "listener" in kinds, f"the failure listener was not told: {kinds}"
    assert kinds.index("listener") < kinds.index(outcome), (
        f"the failure listener was told only after the session was restored: {kinds}")
    return outcome


async def kill_primary(target: ManagedTarget, watch: Watch, settings: Settings, evidence: CaseEvidence) -> float:
    """Kill the primary (SIGKILL) and wait for the client's failover; the monotonic time of the kill."""
    killed = time.monotonic()
    await asyncio.to_thread(target.node("node0").kill)
    await fail_over(watch, settings, evidence)
    return killed
