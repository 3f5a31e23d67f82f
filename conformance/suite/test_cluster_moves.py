"""Messages that move between the nodes of a cluster after they were routed: redistribution and scale-down
(spec 002 "Message Redistribution", "Scaling Down"; notes cluster-wire §5.1, §5.2).

**Redistribution** runs on two nodes under ON_DEMAND, with ``redistribution-delay`` 0 for addresses
``cck.rd0.#``, 2000 ms for ``cck.rd2000.#`` and the default (-1, nothing set) for ``cck.rddefault.#``.  The
kit leaves numbered messages waiting on node0, makes node1 the only place with a consumer and reads where
each message ends up.  A consumer that does not take messages is one on a session the kit never started: the
broker counts it as a consumer but delivers nothing to it.  The two triggers are "a remote consumer appears
while the queue has no local consumer" and "the last local consumer closes"; the timing cases use the second,
whose moment the kit knows (its close call), measured on the loop's monotonic clock.

**Scale-down** runs on two nodes where node1 scales down to node0 (static connectors), and on three where
node1 is in scale-down group "a", node0 advertises group "b" and node2 group "a".  The kit leaves messages on
node1, stops it gracefully (SIGTERM: the target's ``stop()``) and reads what node0 (or node2) holds.  A
stopped node is started again for the next case (``RevivingPool``), not the whole cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from cck.codec import DisconnectReason, RoutingType
from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.faults import FaultProxy
from cck.conformance.plugin import Settings
from cck.conformance.targets import AddressSetting, ClusterSpec, ManagedTarget, ScaleDownSpec, Topology
from cck.reference.client import Connector, Consumer, connect, connector_of

from ._cluster_kit import (
    FORM_S,
    ClusterClients,
    N,
    Placement,
    RevivingPool,
    barrier,
    send_mixed,
    stop_node,
    wait_counts,
)
from ._kit import RESTARTING, client_settings, restarted, run, unique

CASE_S = 120.0
#: how long messages may take to arrive where they go once they move (redistribution, scale-down)
ARRIVE_S = 20.0
#: how long a graceful stop with scale-down may take (Artemis waits up to 10 s for a target in its topology)
STOP_S = 60.0
#: the redistribution delay of addresses cck.rd2000.#
DELAY_MS = 2000
#: after the trigger, the time a redistributed message may take on top of the delay and the run's timing
#: tolerance: one forward through the store-and-forward queue and the bridge, and the delivery to the consumer
FORWARD_MS = 500
#: while a local consumer holds the messages, how long the kit listens on node1 for one that must not come: a
#: redistribution with delay 0 moves the first message within milliseconds of its trigger (cases 1, 2)
HELD_S = 1.0
#: with the default redistribution-delay (-1), how long the kit listens for a message that must not move: longer
#: than redistribution with delay 0 takes (milliseconds) and than DELAY_MS plus its tolerance
NEVER_S = 3.0
KIT_NODES = ("node0", "node1")


def _settings(**delays: int) -> tuple[AddressSetting, ...]:
    # the kit's defaults (Topology's are private to the descriptor) plus a redistribution-delay per prefix
    return (
        AddressSetting.of("#", dead_letter_address="DLQ", expiry_address="ExpiryQueue", auto_create_queues=True,
                          auto_create_addresses=True, auto_delete_queues=False, auto_delete_addresses=False),
        *(AddressSetting.of(f"cck.{prefix}.#", redistribution_delay=delay) for prefix, delay in delays.items()),
    )


def _two(cluster: ClusterSpec, settings: tuple[AddressSetting, ...] | None = None) -> Topology:
    base = Topology.cluster_of(2, cluster)
    return base if settings is None else Topology(base.nodes, cluster=cluster, address_settings=settings)


#: Every topology of the module, by key; cases of one key share one running cluster (in this order).
TOPOLOGIES: dict[str, Topology] = {
    "redistribution": _two(ClusterSpec(message_load_balancing="ON_DEMAND"), _settings(rd0=0, rd2000=DELAY_MS)),
    "scale-down": _two(ClusterSpec(scale_down=(ScaleDownSpec("node1", targets=("node0",)),))),
    "scale-down-groups": Topology.cluster_of(3, ClusterSpec(scale_down=(
        ScaleDownSpec("node0", enabled=False, group_name="b"),
        ScaleDownSpec("node1", group_name="a", targets=("node0", "node2")),
        ScaleDownSpec("node2", enabled=False, group_name="a"),
    ))),
}




def _case(cid: str, clause: str, description: str, expectation: str, *, checks: str = "both",
          **params: Any) -> Case:
    return Case(cid, clause, description, expectation, checks=checks,  # type: ignore[arg-type]
                needs=("config", "control"), params=params)


def _problems(placement: Placement, expected: dict[str, list[int]], *, ordered: bool) -> list[str]:
    """Compare where each message was found with ``expected`` (node -> indexes): lost, duplicated, misplaced and
    (``ordered``) out of order."""
    problems: list[str] = []
    twice = placement.duplicates()
    if twice:
        problems.append(f"messages found twice: {twice}")
    wanted = {i for ix in expected.values() for i in ix}
    found = placement.node_of()
    lost = sorted(wanted - set(found))
    if lost:
        problems.append(f"messages lost: {lost}")
    unexpected = sorted(set(found) - wanted)
    if unexpected:
        problems.append(f"messages that should not be there: {unexpected}")
    for node, indexes in expected.items():
        got = placement.found.get(node, [])
        if sorted(got) != sorted(indexes):
            problems.append(f"{node} got {sorted(got)}, expected {sorted(indexes)}")
        elif ordered and got != indexes:
            problems.append(f"{node} got them in the order {got}, expected {indexes}")
    return problems


# ---------------------------------------------------------------------------------------------------- redistribution

REDISTRIBUTION = (
    _case("cluster.redistribution.1", "cluster.redistribution",
          f"ON_DEMAND, 2 nodes, redistribution-delay 0; an anycast queue of one name on both nodes, no consumers; "
          f"{N} messages (half durable) to node0, where they stay; then a consumer on node1",
          f"a remote consumer appearing while node0's queue has none triggers redistribution: all {N} reach node1's "
          "consumer, each once, and node0's queue is empty",
          prefix="rd0"),
    _case("cluster.redistribution.2", "cluster.redistribution",
          f"redistribution-delay 0; node0's queue has a consumer that takes nothing (its session is not started); "
          f"{N} messages to node0; a consumer on node1; then node0's consumer closes",
          f"nothing moves while node0 has a consumer (the kit listens {HELD_S:g} s on node1); once the last local "
          f"consumer closed, all {N} reach node1, each once",
          prefix="rd0", held=True),
    _case("cluster.redistribution.3", "cluster.redistribution",
          f"redistribution-delay 0; {N} messages alternating color='red' / 'blue' wait on node0 (no consumers); "
          "then a consumer on node1 with filter color='red'",
          "only messages a remote consumer's filter matches are redistributed: the red ones reach node1, the blue "
          "ones stay in node0's queue (each message once)",
          prefix="rd0", color=True),
    _case("cluster.redistribution.4", "cluster.redistribution",
          f"redistribution-delay 0; a multicast address with a subscription queue of one name on both nodes; {N} "
          "MULTICAST messages to node0 (they stay there); then a consumer on node1's subscription",
          f"subscriptions are redistributed like anycast queues: all {N} reach node1, each once",
          prefix="rd0", routing=RoutingType.MULTICAST),
    _case("cluster.redistribution.5", "cluster.redistribution.delay",
          f"redistribution-delay {DELAY_MS} ms; node0's consumer takes nothing (session not started), {N} messages "
          "wait on node0, node1 has a consumer; the kit closes node0's consumer and times the first arrival on "
          "node1 from that close (monotonic clock)",
          f"nothing moves before the delay: the first message reaches node1 {DELAY_MS} ms after the close, within "
          f"the run's timing tolerance early and the tolerance plus {FORWARD_MS} ms (one forward) late; then all "
          f"{N}, each once",
          prefix="rd2000", held=True, timed=True),
    _case("cluster.redistribution.6", "cluster.redistribution.delay",
          f"redistribution-delay {DELAY_MS} ms; as cluster.redistribution.5, but right after closing node0's "
          "consumer the kit opens another one there (again on a session not started)",
          f"a local consumer reappearing before the delay expires cancels the redistribution: nothing reaches node1 "
          f"within the delay plus its tolerance and {FORWARD_MS} ms, all {N} are still on node0 and are consumed "
          "there",
          prefix="rd2000", held=True, reopen=True),
    _case("cluster.redistribution.7", "cluster.redistribution.default",
          f"redistribution-delay not set (default -1); node0's consumer takes nothing, {N} messages wait on node0, "
          "node1 has a consumer; then node0's consumer closes",
          f"messages are never redistributed by default: node1 receives nothing within {NEVER_S:g} s after the close "
          f"(delay 0 moves them within milliseconds), all {N} stay on node0",
          prefix="rddefault", held=True, never=True),
)


def _colors(i: int) -> dict[str, str | int | bool]:
    return {"color": "red" if i % 2 == 0 else "blue"}


def _timed(case: Case) -> bool:
    """Whether the case judges a redistribution delay against the run's tolerance (the others wait on deadlines
    and fixed windows, which brokers starting beside them cannot turn into a FAIL)."""
    return bool(case.params.get("timed") or case.params.get("reopen"))


@cases(*(case for case in REDISTRIBUTION if not _timed(case)))
def test_redistribution(case: Case, clusters: RevivingPool, cck_settings: Settings, evidence: CaseEvidence) -> None:
    _redistribution(case, clusters, cck_settings, evidence)


@cases(*(case for case in REDISTRIBUTION if _timed(case)))
@pytest.mark.cck_alone  # a redistribution delay is judged against the run's tolerance
def test_redistribution_delay(case: Case, clusters: RevivingPool, cck_settings: Settings,
                              evidence: CaseEvidence) -> None:
    _redistribution(case, clusters, cck_settings, evidence)


def _redistribution(case: Case, clusters: RevivingPool, cck_settings: Settings, evidence: CaseEvidence) -> None:
    p = case.params
    target = clusters.get(TOPOLOGIES["redistribution"])
    evidence.note("target", target.describe())
    routing: RoutingType = p.get("routing", RoutingType.ANYCAST)
    address = unique(f"cck.{p['prefix']}.{case.id}")
    tolerance = cck_settings.tolerance

    async def scenario() -> None:
        async with ClusterClients(target, cck_settings) as c:
            await c.queue_on(KIT_NODES, address, routing=routing)
            idle = await c.connections["node0"].create_session()  # never started: its consumers take nothing
            held: Consumer | None = await idle.create_consumer(address) if p.get("held") else None
            await barrier(c, "node0", ("node1",), FORM_S)
            color = _colors if p.get("color") else None
            await c.send("node0", address, N, routing=routing if routing == RoutingType.MULTICAST else None,
                         props=color)
            seen = await c.wait_count("node0", address, N, ARRIVE_S)
            assert seen == N, f"node0's queue holds {seen} of the {N} messages sent to it (none should move yet)"
            remote = await c["node1"].create_consumer(address, filter_string="color='red'" if color else None)
            await barrier(c, "node0", ("node1",), FORM_S)  # node0 now knows node1's consumer
            loop = asyncio.get_running_loop()
            if held is not None:
                early = await c.collect([("node1", remote)], 1, HELD_S)
                evidence.note("moved_while_held", early.found)
                assert early.total == 0, (f"messages moved to node1 while node0's queue still had a consumer: "
                                          f"{early.describe()}")
                before = loop.time()
                await held.close()
                after = loop.time()
                evidence.note("close_s", round(after - before, 4))
                if p.get("reopen"):
                    held = await idle.create_consumer(address)
                    evidence.note("reopened_after_close_s", round(loop.time() - after, 4))
                if p.get("timed"):
                    first = await remote.receive(cck_settings.deadline(ARRIVE_S))
                    arrived = loop.time()
                    assert first is not None, f"nothing reached node1 within {ARRIVE_S:g} s of the close"
                    await remote.acknowledge(first)
                    allowed_ms = tolerance.allowed_ms(DELAY_MS)
                    earliest_ms = (arrived - after) * 1000  # the broker saw the close before `after`
                    latest_ms = (arrived - before) * 1000  # ... and after `before`
                    bounds = (DELAY_MS - allowed_ms, DELAY_MS + allowed_ms + FORWARD_MS)
                    evidence.note("first_arrival_ms", {"from_close_sent": round(latest_ms, 1),
                                                       "from_close_answered": round(earliest_ms, 1),
                                                       "bounds": [round(b, 1) for b in bounds]})
                    assert latest_ms >= bounds[0], (
                        f"the first message reached node1 {latest_ms:.0f} ms after the close, before the delay of "
                        f"{DELAY_MS} ms (less its tolerance {allowed_ms:.0f} ms)")
                    assert earliest_ms <= bounds[1], (
                        f"the first message reached node1 {earliest_ms:.0f} ms after the close, later than the "
                        f"delay of {DELAY_MS} ms plus {allowed_ms:.0f} ms tolerance and {FORWARD_MS} ms to forward")
                    rest = await c.collect([("node1", remote)], N - 1, ARRIVE_S)
                    placement = Placement({"node1": [int(first.message.properties["cck_index"]),  # type: ignore[arg-type]
                                                     *rest.found["node1"]]})
                    extra = await c.collect([("node1", remote)], 1, HELD_S)
                    placement.found["node1"] += extra.found["node1"]
                    evidence.note("placement", placement.found)
                    problems = _problems(placement, {"node1": list(range(N))}, ordered=False)
                    assert not problems, " | ".join(problems)
                    return
                if p.get("reopen") or p.get("never"):
                    quiet = (DELAY_MS + tolerance.allowed_ms(DELAY_MS) + FORWARD_MS) / 1000 if p.get("reopen") \
                        else NEVER_S
                    moved = await c.collect([("node1", remote)], 1, quiet)
                    evidence.note("moved", moved.found)
                    left = await c.count("node0", address)
                    evidence.note("left_on_node0", left)
                    assert moved.total == 0, (f"messages moved to node1 within {quiet:.1f} s of the close: "
                                              f"{moved.describe()}")
                    assert left == N, f"node0's queue holds {left} of the {N} messages"
                    if held is not None:
                        await held.close()
                    local = await c["node0"].create_consumer(address)
                    placement = await c.collect([("node0", local), ("node1", remote)], N, ARRIVE_S)
                    evidence.note("placement", placement.found)
                    problems = _problems(placement, {"node0": list(range(N)), "node1": []}, ordered=False)
                    assert not problems, " | ".join(problems)
                    return
            red = [i for i in range(N) if i % 2 == 0] if color else list(range(N))
            moving = loop.time()
            placement = await c.collect([("node1", remote)], len(red), ARRIVE_S)
            extra = await c.collect([("node1", remote)], 1, HELD_S)  # one that must not come (a blue, a duplicate)
            placement.found["node1"] += extra.found["node1"]
            # one deadline for the move: node0's count gets what is left of ARRIVE_S (at least one look), not
            # another ARRIVE_S after a collect that already ran out
            left_s = max(0.0, cck_settings.deadline(ARRIVE_S) - (loop.time() - moving)) / cck_settings.deadline(1.0)
            left = await c.wait_count("node0", address, N - len(red), left_s)
            evidence.note("left_on_node0", left)
            # a message moved to node1 that its consumer does not take waits in node1's queue
            waiting = await c.count("node1", address)
            evidence.note("waiting_on_node1", waiting)
            if color:
                local = await c["node0"].create_consumer(address)
                stayed = await c.collect([("node0", local)], N - len(red), ARRIVE_S)
                placement.found["node0"] = stayed.found["node0"]
            evidence.note("placement", placement.found)
            expected = {"node1": red, **({"node0": [i for i in range(N) if i % 2]} if color else {})}
            problems = _problems(placement, expected, ordered=False)
            if left != N - len(red):
                problems.append(f"node0's queue holds {left} messages, expected {N - len(red)}")
            if waiting:
                problems.append(f"node1's queue holds {waiting} messages its consumer did not take (moved although "
                                "no consumer there matches them)")
            assert not problems, " | ".join(problems)

    run(cck_settings, scenario(), CASE_S)


# ---------------------------------------------------------------------------------------------------- scale-down

HALF = N // 2


def _durable(i: int) -> bool:
    return i % 2 == 0


SCALE_DOWN = (
    _case("cluster.scale-down.1", "cluster.scale-down",
          f"2 nodes, node1 scales down to node0 (static connectors); an anycast queue of one name on both; "
          f"messages 0..{HALF - 1} wait on node0, {HALF}..{N - 1} on node1 (even ones durable, odd ones not); the "
          "kit stops node1 gracefully",
          f"node0's queue then holds all {N}: node1's at the back, after node0's own, in their order (consumed "
          f"0..{N - 1}), none lost or twice, non-durable ones included",
          topology="scale-down", shape="both"),
    _case("cluster.scale-down.2", "cluster.scale-down",
          "as cluster.scale-down.1 with a multicast address and a subscription queue of one name on both nodes, "
          "MULTICAST messages",
          f"node0's subscription holds all {N}, node1's after node0's own, in order, none lost or twice",
          topology="scale-down", shape="both", routing=RoutingType.MULTICAST),
    _case("cluster.scale-down.3", "cluster.scale-down.missing-queue",
          f"node1 scales down to node0; an anycast address and durable queue that exist only on node1, {N} "
          "messages waiting there (half durable); the kit stops node1 gracefully",
          f"node0 has a queue of that name afterwards (created for the scale-down, durable as on node1) holding "
          f"all {N} in order",
          topology="scale-down", shape="only-node1", checks="implementation"),
    _case("cluster.scale-down.4", "cluster.scale-down.durability",
          f"node1 scales down to node0; {N} messages wait on node1 (even ones durable, odd ones not), none on "
          "node0; the kit stops node1, sees them on node0, then restarts node0",
          f"node0 holds all {N} after the scale-down; after node0's restart exactly the durable ones are left (a "
          "message keeps its durability when it moves)",
          topology="scale-down", shape="restart"),
    _case("cluster.scale-down.5", "cluster.scale-down.disconnect",
          "node1 scales down to node0; a client connected to node1 (through the kit's fault proxy, which decodes "
          "what it carries) when the kit stops node1",
          "the client receives DISCONNECT_V3 with reason SCALE_DOWN (or DISCONNECT_V2) naming node0's node ID as "
          "the scale-down target, and its connection fails with that reason",
          topology="scale-down", shape="disconnect", checks="implementation"),
    _case("cluster.scale-down.6", "cluster.scale-down.group",
          "3 nodes; node1 scales down with group-name 'a' and connectors to node0 then node2; node0 advertises "
          f"group 'b', node2 group 'a' (scale-down disabled on both); the queue on all three, {N} messages wait on "
          "node1; the kit stops node1 gracefully",
          f"only a node of node1's group receives them: node2's queue holds all {N} in order, node0's none",
          topology="scale-down-groups", shape="group"),
)


def _node_id(clients: ClusterClients, target: ManagedTarget, node: str) -> str | None:
    """The node ID ``node`` advertises in the topology its own connection received."""
    spec = target.topology.node(node)
    for node_id, member in clients.connections[node].core.topology.items():
        if member.live is not None and connector_of(member.live) == Connector(spec.host, spec.port):
            return node_id
    return None


@cases(*SCALE_DOWN)
def test_scale_down(case: Case, clusters: RevivingPool, cck_settings: Settings, evidence: CaseEvidence) -> None:
    p = case.params
    target = clusters.get(TOPOLOGIES[p["topology"]])
    evidence.note("target", target.describe())
    shape: str = p["shape"]
    routing: RoutingType = p.get("routing", RoutingType.ANYCAST)
    typed = routing if routing == RoutingType.MULTICAST else None
    address = unique(f"cck.scale.{case.id}")
    others = tuple(n.name for n in target.topology.nodes if n.name != "node1")
    receiver = "node2" if shape == "group" else "node0"

    async def scenario() -> None:
        async with ClusterClients(target, cck_settings) as c:
            queues = ("node1",) if shape == "only-node1" else tuple(n.name for n in target.topology.nodes)
            await c.queue_on(queues, address, routing=routing)
            await barrier(c, "node1", others, FORM_S)  # node1 knows the others (and their groups)
            mine = list(range(HALF)) if shape == "both" else []
            theirs = list(range(len(mine), N))
            if shape == "disconnect":
                theirs = []
            await send_mixed(c, "node0", address, mine, _durable, typed)
            await send_mixed(c, "node1", address, theirs, _durable, typed)
            wanted = {("node1", address): len(theirs)}
            if shape != "only-node1":
                wanted[("node0", address)] = len(mine)
            counts = await wait_counts(c, wanted, ARRIVE_S)
            assert counts == wanted, f"before the stop the queues hold {counts}, expected {wanted}"
            target_id = _node_id(c, target, receiver)
            evidence.note("receiver_node_id", target_id)
            if shape == "disconnect":
                await _disconnect(c, target, target_id, evidence)
                return
            took = await stop_node(target, "node1")
            evidence.note("stop_s", round(took, 2))
            after = {(n, address): (len(mine) + len(theirs) if n == receiver else 0) for n in others}
            counts = await wait_counts(c, after, ARRIVE_S)
            evidence.note("counts_after_scale_down", {f"{n}:{q}": v for (n, q), v in counts.items()})
            assert counts == after, f"after node1's scale-down the queues hold {counts}, expected {after}"
            if shape == "only-node1":
                answer = await c["node0"].queue_query(address)
                evidence.note("created_queue", {"exists": answer.exists, "durable": answer.durable,
                                                "routing_type": answer.routing_type})
                assert answer.durable, "the queue created on node0 for the scale-down is not durable"
            if shape == "restart":
                await restarted(target.node("node0").restart, "node0")
                # the kit's session on node0 died with it: a new connection for the rest
                async with await connect(target.node("node0").url,
                                         settings=client_settings(target, RESTARTING, reconnect_attempts=0)) as again:
                    session = await again.create_session()
                    session.start()
                    consumer = await session.create_consumer(address)
                    placement = Placement({"node0": []})
                    while (delivery := await consumer.receive(cck_settings.deadline(HELD_S * 3))) is not None:
                        placement.found["node0"].append(int(delivery.message.properties["cck_index"]))  # type: ignore[arg-type]
                        await consumer.acknowledge(delivery)
                evidence.note("placement_after_restart", placement.found)
                problems = _problems(placement, {"node0": [i for i in theirs if _durable(i)]}, ordered=True)
                assert not problems, " | ".join(problems)
                return
            consumers = await c.consumers(address, [receiver])
            placement = await c.collect(list(consumers.items()), N, ARRIVE_S)
            extra = await c.collect(list(consumers.items()), 1, HELD_S)  # a duplicate would come now
            placement.found[receiver] += extra.found[receiver]
            evidence.note("placement", placement.found)
            problems = _problems(placement, {receiver: mine + theirs}, ordered=True)
            assert not problems, " | ".join(problems)

    run(cck_settings, scenario(), CASE_S)


async def _disconnect(c: ClusterClients, target: ManagedTarget, target_id: str | None, evidence: CaseEvidence) -> None:
    spec = target.topology.node("node1")
    async with FaultProxy(spec.host, spec.port) as proxy:
        watched = await connect(proxy.url, settings=client_settings(target, RESTARTING, reconnect_attempts=0))
        try:
            await watched.create_session()
            stopping = asyncio.create_task(stop_node(target, "node1"))
            try:
                record = await proxy.wait_for_record(
                    lambda r: r.direction == "s2c" and r.type_name.startswith("DISCONNECT"), c.deadline(STOP_S))
            finally:
                took = await stopping
                evidence.note("stop_s", round(took, 2))
            evidence.note("disconnect", repr(record.packet))
            failure = watched.failure
            evidence.note("client_failure", str(failure))
        finally:
            with contextlib.suppress(Exception):
                await watched.close()
    packet = record.packet
    problems: list[str] = []
    reason = getattr(packet, "reason", None)
    named = getattr(packet, "target_node_id", None) or getattr(packet, "scale_down_node_id", None)
    if record.type_name == "DISCONNECT_V3" and reason != DisconnectReason.SCALE_DOWN:
        problems.append(f"DISCONNECT_V3 gives reason {reason!r}, not SCALE_DOWN ({int(DisconnectReason.SCALE_DOWN)})")
    if record.type_name == "DISCONNECT":
        problems.append("plain DISCONNECT: no scale-down target named")
    if target_id is None or named != target_id:
        problems.append(f"the DISCONNECT names {named!r} as the target, not node0's node ID {target_id!r}")
    if failure is None or ("SCALE_DOWN" not in str(failure) and record.type_name == "DISCONNECT_V3"):
        problems.append(f"the client's connection failure does not name SCALE_DOWN: {failure}")
    assert not problems, " | ".join(problems) + f" (packet: {packet!r})"
