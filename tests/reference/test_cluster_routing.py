"""The sans-IO part of the reference broker's clustering: remote bindings from notifications, the choice
of one binding per routing name for each load-balancing mode (docs/notes/cluster-wire.md §4), routes by
binding ID, the bridge's duplicate IDs, and the state request a bridge sends."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cck.codec import CoreMessage, PropertyType, RoutingType, TransportConfiguration, TypedProperties
from cck.reference.broker import BrokerCore, BrokerSettings, Queue
from cck.reference.broker._cluster import (
    BRIDGE_DUP_KEY,
    ROUTE_TO_KEY,
    ClusterRole,
    ClusterState,
    LoadBalancing,
    Notification,
    address_matches,
    decode_ids,
    encode_ids,
    queue_info_request,
)
from cck.reference.broker._cluster_hooks import bridge_dup_id, forwardable
from cck.reference.broker._errors import BrokerError

ME = "11111111-1111-1111-1111-111111111111"
B = "22222222-2222-2222-2222-222222222222"
C = "33333333-3333-3333-3333-333333333333"


def _state(lb: LoadBalancing = LoadBalancing.ON_DEMAND, max_hops: int = 1, address: str = "") -> ClusterState:
    return ClusterState(ClusterRole("c", ME, TransportConfiguration.netty("127.0.0.1", 1), lb, max_hops, address))


def _added(node: str, queue: str = "orders", address: str = "orders", distance: int = 0) -> Notification:
    return Notification("BINDING_ADDED", address, queue, queue + node, distance, binding_id=hash(node) & 0xFFFF)


def _consumer(node: str, queue: str = "orders", kind: str = "CONSUMER_CREATED",
              filter_string: str | None = None) -> Notification:
    return Notification(kind, "orders", queue, queue + node, 0, filter_string=filter_string)


def _local(name: str = "orders", consumers: int = 0) -> Queue:
    queue = Queue(name, "orders", RoutingType.ANYCAST, durable=True)
    queue.consumers.extend([SimpleNamespace(browse_only=False, accepts=lambda _m: True)] * consumers)  # type: ignore[list-item]
    return queue


def _picks(state: ClusterState, local: list[Queue], count: int, message: CoreMessage | None = None) -> list[str]:
    """Where each of ``count`` messages goes: ``local`` or the node a remote binding leads to."""
    out: list[str] = []
    for _ in range(count):
        chosen, forwards = state.choose("orders", message or CoreMessage(), local)
        out.extend(["local"] * len(chosen))
        out.extend(sf.rsplit(".", 1)[1][:1] for sf in forwards)  # first letter of the node ID
    return out


@pytest.mark.parametrize(("spec", "address", "expected"), [
    ("", "anything", True),
    ("orders", "orders.eu", True),
    ("orders", "invoices", False),
    ("orders,invoices", "invoices.x", True),
    ("!orders.secret", "orders.public", True),
    ("orders,!orders.secret", "orders.secret.x", False),
    ("!orders", "orders", False),
])  # fmt: skip
def test_cluster_address_is_a_list_of_prefixes_where_exclusions_win(spec: str, address: str, expected: bool) -> None:
    assert address_matches(spec, address) is expected


def test_strict_rotates_over_the_local_queue_and_every_remote_one_regardless_of_consumers() -> None:
    state = _state(LoadBalancing.STRICT)
    state.apply(B, _added(B))
    state.apply(C, _added(C))
    picks = _picks(state, [_local()], 9)
    assert picks[:3] == picks[3:6] == picks[6:]
    assert sorted(picks[:3]) == ["2", "3", "local"]


def test_on_demand_keeps_messages_local_until_a_remote_queue_has_a_consumer() -> None:
    state = _state()
    state.apply(B, _added(B))
    state.apply(C, _added(C))
    assert _picks(state, [_local()], 4) == ["local"] * 4
    state.apply(C, _consumer(C))
    assert _picks(state, [_local()], 3) == ["3"] * 3
    state.apply(B, _consumer(B))
    assert sorted(_picks(state, [_local()], 4)) == ["2", "2", "3", "3"]
    assert sorted(_picks(state, [_local(consumers=1)], 3)) == ["2", "3", "local"]
    state.apply(C, _consumer(C, kind="CONSUMER_CLOSED"))
    state.apply(B, _consumer(B, kind="CONSUMER_CLOSED"))
    assert _picks(state, [_local()], 2) == ["local"] * 2


def test_on_demand_sends_a_remote_consumer_only_what_its_filter_selects() -> None:
    state = _state()
    state.apply(B, _added(B))
    state.apply(B, _consumer(B, filter_string="color = 'red'"))
    red = CoreMessage(properties=TypedProperties.of(color="red"))
    blue = CoreMessage(properties=TypedProperties.of(color="blue"))
    assert _picks(state, [_local()], 2, red) == ["2", "2"]
    assert _picks(state, [_local()], 2, blue) == ["local", "local"]
    state.apply(B, _consumer(B, kind="CONSUMER_CLOSED", filter_string="color = 'red'"))
    assert state.remote[next(iter(state.remote))].consumer_filters == []


def test_a_remote_queue_filter_decides_whether_it_may_be_chosen() -> None:
    state = _state(LoadBalancing.STRICT)
    state.apply(B, Notification("BINDING_ADDED", "orders", "orders", "orders" + B, 0, 5, "color = 'red'"))
    assert _picks(state, [_local()], 2, CoreMessage(properties=TypedProperties.of(color="blue"))) == ["local"] * 2
    assert sorted(_picks(state, [_local()], 2, CoreMessage(properties=TypedProperties.of(color="red")))) == [
        "2", "local"]


def test_a_name_known_only_remotely_is_forwarded_even_without_consumers() -> None:
    state = _state()
    state.apply(B, _added(B))
    assert _picks(state, [], 2) == ["2", "2"]
    assert _picks(_state(), [], 1) == []  # no binding anywhere: nothing is forwarded


@pytest.mark.parametrize("lb", [LoadBalancing.OFF, LoadBalancing.OFF_WITH_REDISTRIBUTION])
def test_off_modes_never_forward_whatever_the_routing_type(lb: LoadBalancing) -> None:
    state = _state(lb)
    state.apply(B, _added(B))
    state.apply(B, _consumer(B))
    assert _picks(state, [_local()], 3) == ["local"] * 3
    assert _picks(state, [], 1) == []
    multicast = CoreMessage(properties=TypedProperties.typed(("_AMQ_ROUTING_TYPE", PropertyType.BYTE, 0)))
    assert _picks(state, [_local()], 2, multicast) == ["local"] * 2
    assert _picks(state, [], 1, multicast) == []


def test_a_disconnected_remote_binding_is_skipped_while_another_binding_exists() -> None:
    state = _state(LoadBalancing.STRICT)
    state.apply(B, _added(B))
    state.connected(B, False)
    assert _picks(state, [_local()], 3) == ["local"] * 3
    state.connected(B, True)
    assert sorted(_picks(state, [_local()], 2)) == ["2", "local"]


def test_notifications_past_max_hops_or_about_this_node_or_internal_addresses_are_ignored() -> None:
    state = _state(max_hops=1)
    assert state.apply(B, _added(C, distance=1)) is None  # two hops away
    assert state.apply(B, _added(ME)) is None  # this node's own queue, heard back
    assert state.apply(B, _added(B, "$.artemis.internal.sf.c.x", "$.artemis.internal.sf.c.x")) is None
    chain = _state(max_hops=2)
    binding = chain.apply(B, _added(C, distance=1))
    assert binding is not None
    assert binding.distance == 2
    assert binding.via == B
    scoped = _state(address="orders")
    assert scoped.apply(B, _added(B, "invoices", "invoices")) is None


def test_a_reset_forgets_what_came_through_that_bridge_only() -> None:
    state = _state()
    state.apply(B, _added(B))
    state.apply(C, _added(C))
    gone = state.reset(B)
    assert [g.via for g in gone] == [B]
    assert [b.via for b in state.remote.values()] == [C]


def test_a_bridged_message_reaches_local_queues_and_further_hops_by_binding_id() -> None:
    state = _state(max_hops=2)
    remote = state.apply(B, _added(C, distance=1))
    assert remote is not None
    local = _local()
    queues, forwards = state.route_to([local.binding_id, remote.binding_id, 12345], {local.binding_id: local})
    assert queues == [local]
    assert forwards == {state.role.sf_queue(B): [remote.remote_id]}


def test_route_ids_are_big_endian_longs_and_a_ragged_route_is_an_error() -> None:
    assert encode_ids([1, 258]) == bytes.fromhex("0000000000000001" "0000000000000102")
    assert decode_ids(encode_ids([7, -1, 2**62])) == [7, -1, 2**62]
    with pytest.raises(ValueError, match="13 bytes"):
        decode_ids(b"\x00" * 13)


def test_the_duplicate_cache_remembers_up_to_its_size() -> None:
    state = ClusterState(ClusterRole("c", ME, None, id_cache_size=2))
    assert [state.duplicate(x) for x in (b"a", b"b", b"a")] == [False, False, True]
    state.duplicate(b"c")  # b"a" is the oldest and leaves
    assert state.duplicate(b"a") is False


def test_a_forwarded_copy_carries_its_bridge_route_and_a_duplicate_id() -> None:
    sf = "$.artemis.internal.sf.c." + B
    stored = CoreMessage(b"body", message_id=42, address="orders", durable=True, properties=TypedProperties.typed(
        ("app", PropertyType.STRING, "kept"),
        (ROUTE_TO_KEY + sf, PropertyType.BYTES, encode_ids([5])),
        (ROUTE_TO_KEY + "$.artemis.internal.sf.c." + C, PropertyType.BYTES, encode_ids([6])),
    ))  # fmt: skip
    copy = forwardable(stored, sf, ME)
    assert copy is not None
    assert dict(copy.properties) == {"app": "kept", ROUTE_TO_KEY: encode_ids([5]),
                                     BRIDGE_DUP_KEY: bridge_dup_id(ME, 42)}
    assert (copy.body, copy.address, copy.durable) == (b"body", "orders", True)
    assert len(bridge_dup_id(ME, 42)) == 24
    assert forwardable(stored, "$.artemis.internal.sf.c.other", ME) is None


def test_a_notification_survives_its_message_form() -> None:
    note = Notification("BINDING_ADDED", "orders", "orders", "orders" + B, 1, 99, None, 2)
    message = note.message(7, first=True)
    assert Notification.read(message.properties) == note
    assert message.properties["_AMQ_RESET_QUEUE_DATA"] is True
    assert Notification.read({"_AMQ_RESET_QUEUE_DATA": True}) is None
    with pytest.raises(ValueError, match="_AMQ_Address"):
        Notification.read({"_AMQ_NotifType": "BINDING_ADDED"})


def _clustered_core(lb: LoadBalancing = LoadBalancing.STRICT) -> BrokerCore:
    role = ClusterRole("c", ME, TransportConfiguration.netty("127.0.0.1", 1), lb)
    return BrokerCore(BrokerSettings(node_id=ME, cluster=role))


def test_the_state_request_answers_with_every_binding_and_consumer_between_reset_and_complete() -> None:
    core = _clustered_core()
    sessions = core.engine
    assert sessions.cluster is not None
    sessions.add_queue(Queue("orders", "orders", RoutingType.ANYCAST, durable=True))
    reply = sessions.add_queue(Queue("notif.x", "activemq.notifications", RoutingType.MULTICAST, durable=False))
    sessions.cluster.management(SimpleNamespace(name="stub"), queue_info_request("notif.x", ""))  # type: ignore[arg-type]
    notes = [ref.message.properties for ref in reply.ready]
    assert notes[0]["_AMQ_RESET_QUEUE_DATA"] is True
    assert notes[-1]["_AMQ_RESET_QUEUE_DATA_COMPLETE"] is True
    assert [(n["_AMQ_NotifType"], n["_AMQ_RoutingName"]) for n in notes] == [("BINDING_ADDED", "orders")]


def test_a_chosen_remote_binding_puts_the_message_into_its_store_and_forward_queue() -> None:
    core = _clustered_core()
    sessions = core.engine
    assert sessions.cluster is not None
    local = sessions.add_queue(Queue("orders", "orders", RoutingType.ANYCAST, durable=True))
    sessions.cluster.node_up(B, TransportConfiguration.netty("127.0.0.1", 2))
    sessions.cluster.heard(B, _added(B).message(1, first=True, last=True).properties)
    for index in range(4):
        sessions.route(CoreMessage(properties=TypedProperties.of(i=index)), "orders", None)
    sf = core.post_office.queues[sessions.cluster.role.sf_queue(B)]
    assert len(local.ready) == len(sf.ready) == 2
    assert all(isinstance(r.message.properties[ROUTE_TO_KEY + sf.name], bytes) for r in sf.ready)
    assert B in sessions.cluster.state.members



def _redistributing_core(delay_ms: int) -> BrokerCore:
    role = ClusterRole("c", ME, None, LoadBalancing.ON_DEMAND, redistribution_delay=lambda _address: delay_ms)
    core = BrokerCore(BrokerSettings(node_id=ME, cluster=role))
    assert core.cluster is not None
    core.cluster.node_up(B, None)
    core.cluster.heard(B, _added(B).message(1, first=True, last=True).properties)
    return core


@pytest.mark.parametrize("delay_ms", [0, 2000])
def test_waiting_messages_move_to_a_remote_consumer_after_the_redistribution_delay(delay_ms: int) -> None:
    core = _redistributing_core(delay_ms)
    sessions = core.engine
    assert sessions.cluster is not None
    local = sessions.add_queue(Queue("orders", "orders", RoutingType.ANYCAST, durable=True))
    for index in range(3):
        sessions.enqueue(CoreMessage(message_id=100 + index, address="orders"), [local], None)
    core.tick(10_000)
    assert len(local.ready) == 3  # no remote consumer yet: nothing moves
    sessions.cluster.heard(B, _consumer(B).message(2).properties)
    sessions.deliver_all()
    if delay_ms:
        assert len(local.ready) == 3
        assert sessions.cluster.next_deadline() == 12_000
        core.tick(12_000)
    sf = core.post_office.queues[sessions.cluster.role.sf_queue(B)]
    assert len(local.ready) == 0
    assert len(sf.ready) == 3
    assert all(ref.message.message_id not in (100, 101, 102) for ref in sf.ready)  # copies with new IDs


def test_no_redistribution_when_the_delay_is_minus_one_or_a_local_consumer_is_back() -> None:
    core = _redistributing_core(-1)
    sessions = core.engine
    assert sessions.cluster is not None
    local = sessions.add_queue(Queue("orders", "orders", RoutingType.ANYCAST, durable=True))
    sessions.enqueue(CoreMessage(message_id=100, address="orders"), [local], None)
    sessions.cluster.heard(B, _consumer(B).message(2).properties)
    core.tick(100_000)
    assert len(local.ready) == 1
    delayed = _redistributing_core(1000)
    assert delayed.cluster is not None
    queue = delayed.engine.add_queue(Queue("orders", "orders", RoutingType.ANYCAST, durable=True))
    delayed.cluster.heard(B, _consumer(B).message(2).properties)
    assert delayed.cluster.next_deadline() == 1_000
    queue.consumers.append(SimpleNamespace(browse_only=False))  # type: ignore[arg-type]
    delayed.cluster.queue_changed(queue, "CONSUMER_CREATED")
    assert delayed.cluster.next_deadline() is None


def test_a_node_that_left_is_no_longer_a_choice_but_its_waiting_messages_stay() -> None:
    core = _clustered_core(LoadBalancing.ON_DEMAND)
    sessions = core.engine
    assert sessions.cluster is not None
    sessions.cluster.node_up(B, None)
    sessions.cluster.heard(B, _added(B).message(1, first=True, last=True).properties)
    sessions.route(CoreMessage(), "orders", None)  # only node B has the queue: forwarded
    sf = core.post_office.queues[sessions.cluster.role.sf_queue(B)]
    assert len(sf.ready) == 1
    sessions.cluster.node_left(B)
    assert sessions.cluster.state.remote == {}
    sessions.route(CoreMessage(), "orders", None)
    assert len(sf.ready) == 1


def test_redistribution_moves_only_what_a_remote_consumer_selects() -> None:
    core = _redistributing_core(0)
    sessions = core.engine
    assert sessions.cluster is not None
    local = sessions.add_queue(Queue("orders", "orders", RoutingType.ANYCAST, durable=True))
    for index, color in enumerate(("red", "blue", "red", "blue")):
        sessions.enqueue(CoreMessage(message_id=100 + index, address="orders",
                                     properties=TypedProperties.of(color=color)), [local], None)
    core.tick(1_000)
    sessions.cluster.heard(B, _consumer(B, filter_string="color = 'red'").message(2).properties)
    sessions.deliver_all()
    sf = core.post_office.queues[sessions.cluster.role.sf_queue(B)]
    assert [r.message.properties["color"] for r in sf.ready] == ["red", "red"]
    assert [r.message.properties["color"] for r in local.ready] == ["blue", "blue"]


def test_a_ragged_route_is_refused_with_a_clear_error() -> None:
    core = _clustered_core()
    route = TypedProperties.typed((ROUTE_TO_KEY, PropertyType.BYTES, b"\x00" * 5))
    with pytest.raises(BrokerError, match="_AMQ_ROUTE_TO: a route of 5 bytes"):
        core.engine.route(CoreMessage(properties=route), "orders", None)
