"""The broker core driven packet by packet in memory."""

from __future__ import annotations

import pytest

from cck.codec import (
    ActiveMQExceptionMessage,
    ClusterTopologyChangeMessage_V4,
    CoreMessage,
    CreateQueueMessage_V2,
    CreateSessionMessage_V2,
    CreateSessionResponseMessage,
    ExceptionType,
    FrameDecoder,
    NullResponseMessage,
    PacketsConfirmedMessage,
    Ping,
    ReattachSessionMessage,
    ReattachSessionResponseMessage,
    RollbackMessage,
    RoutingType,
    SessionAcknowledgeMessage,
    SessionCommitMessage,
    SessionConsumerFlowCreditMessage,
    SessionCreateConsumerMessage,
    SessionProducerCreditsMessage,
    SessionQueueQueryResponseMessage_V3,
    SessionReceiveMessage,
    SessionRequestProducerCreditsMessage,
    SessionSendMessage,
    SessionStart,
    SessionXACommitMessage,
    SessionXAEndMessage,
    SessionXAGetInDoubtXids,
    SessionXAGetInDoubtXidsResponseMessage,
    SessionXAPrepareMessage,
    SessionXAResponseMessage,
    SessionXAStartMessage,
    Xid,
    encode_packet,
    raw,
)

from .harness import connect, new_core, open_session

QUEUE = "q1"


def _queue(wire, name: str = QUEUE) -> None:  # type: ignore[no-untyped-def]
    frames = wire.send(CreateQueueMessage_V2(name, name, routing_type=RoutingType.ANYCAST))
    assert frames[-1].packet == NullResponseMessage(-1)


def _send(wire, body: bytes, *, durable: bool = True, channel: int = 10):  # type: ignore[no-untyped-def]
    return wire.send(SessionSendMessage(CoreMessage(body, address=QUEUE, durable=durable), True, -2, 0), channel)


def _consume(wire, credits: int = -1) -> None:  # type: ignore[no-untyped-def]
    assert isinstance(wire.send(SessionCreateConsumerMessage(0, QUEUE))[-1].packet, SessionQueueQueryResponseMessage_V3)
    wire.send(SessionConsumerFlowCreditMessage(0, credits))
    wire.send(SessionStart())


def test_handshake_answers_topology_with_last_true() -> None:
    core = new_core()
    wire = connect(core)
    topology = wire.received[-1].packet
    assert isinstance(topology, ClusterTopologyChangeMessage_V4)
    assert topology.last
    assert topology.node_id == "node-1"
    assert topology.server_version == 136
    assert wire.send(Ping(30000), 0)[-1].packet == Ping(30000)


def test_send_receive_ack_with_server_message_ids_and_delivery_count_1() -> None:
    core = new_core()
    wire = connect(core)
    open_session(wire)
    _queue(wire)
    assert _send(wire, b"a")[-1].packet == NullResponseMessage(-2)
    _send(wire, b"b")
    _consume(wire)
    deliveries = [f.packet for f in wire.received if isinstance(f.packet, SessionReceiveMessage)]
    assert [d.message.body for d in deliveries] == [b"a", b"b"]
    assert all(d.delivery_count == 1 for d in deliveries)
    assert all(d.message.message_id > 0 for d in deliveries)
    wire.send(SessionAcknowledgeMessage(0, deliveries[-1].message.message_id, True))  # cumulative
    assert core.post_office.queues[QUEUE].message_count == 0


def test_the_engine_lists_its_queues_and_removes_waiting_messages_that_left() -> None:
    """What scale-down uses: the queues in creation order, and the messages it moved taken out of them and
    out of storage."""
    core = new_core()
    wire = connect(core)
    open_session(wire)
    _queue(wire, "other")
    _queue(wire)
    _send(wire, b"a")
    _send(wire, b"b")
    assert [q.name for q in core.engine.queues()] == ["other", QUEUE]
    queue = core.post_office.queues[QUEUE]
    first, second = list(queue.ready)
    core.engine.remove_waiting([first])
    core.engine.remove_waiting([first])  # already gone: nothing happens
    assert list(queue.ready) == [second]


def test_consumer_gets_nothing_before_credits() -> None:
    core = new_core()
    wire = connect(core)
    open_session(wire)
    _queue(wire)
    _send(wire, b"a")
    wire.send(SessionCreateConsumerMessage(0, QUEUE))
    frames = wire.send(SessionStart())
    assert not any(isinstance(f.packet, SessionReceiveMessage) for f in frames)
    frames = wire.send(SessionConsumerFlowCreditMessage(0, 1024))
    assert [type(f.packet) for f in frames] == [SessionReceiveMessage]


def test_rollback_redelivers_with_delivery_count_2() -> None:
    core = new_core()
    wire = connect(core)
    open_session(wire, auto_commit_acks=False)
    _queue(wire)
    _send(wire, b"a")
    _consume(wire)
    first = [f.packet for f in wire.received if isinstance(f.packet, SessionReceiveMessage)][-1]
    wire.send(SessionAcknowledgeMessage(0, first.message.message_id, False))
    frames = wire.send(RollbackMessage(False))
    again = [f.packet for f in frames if isinstance(f.packet, SessionReceiveMessage)]
    assert again
    assert again[0].message.message_id == first.message.message_id
    assert again[0].delivery_count == 2


def test_transacted_sends_are_invisible_until_commit() -> None:
    core = new_core()
    wire = connect(core)
    open_session(wire, auto_commit_sends=False)
    _queue(wire)
    _send(wire, b"a")
    assert core.post_office.queues[QUEUE].message_count == 0
    assert wire.send(SessionCommitMessage(-3))[-1].packet == NullResponseMessage(-3)
    assert core.post_office.queues[QUEUE].message_count == 1


@pytest.mark.parametrize("window", [100, 250, 1000])
def test_packets_confirmed_when_the_window_fills(window: int) -> None:
    core = new_core()
    wire = connect(core)
    open_session(wire, window=window)
    _queue(wire)
    sizes: list[int] = [len(encode_packet(CreateQueueMessage_V2(QUEUE, QUEUE, routing_type=1), 10))]
    confirmed: list[int] = []
    for i in range(20):
        frame = encode_packet(SessionSendMessage(CoreMessage(b"x" * 10, address=QUEUE), True, -2 - i, 0), 10)
        sizes.append(len(frame))
        confirmed += [f.packet.command_id for f in wire.raw(frame) if isinstance(f.packet, PacketsConfirmedMessage)]
    expected, total = [], 0
    for index, size in enumerate(sizes):
        total += size
        if total >= window:
            expected.append(index)
            total = 0
    assert confirmed == expected


def test_reattach_replays_unconfirmed_before_answering() -> None:
    core = new_core()
    wire = connect(core)
    open_session(wire, window=1 << 20)
    _queue(wire)
    _send(wire, b"a")
    _consume(wire)
    core.connection_lost(wire.conn_id, 1000)
    detached = core.sessions.get("s1")
    assert detached is not None
    assert detached.detached_at_ms == 1000
    second = connect(core, conn_id=2)
    frames = second.send(ReattachSessionMessage("s1", -1), 1)
    kinds = [type(f.packet) for f in frames]
    assert kinds[-1] is ReattachSessionResponseMessage
    assert SessionReceiveMessage in kinds[:-1]  # replayed first
    response = frames[-1].packet
    assert response.reattached
    assert response.last_confirmed_command_id >= 0


def test_reattach_fails_for_an_unknown_session_and_without_a_window() -> None:
    core = new_core()
    wire = connect(core)
    open_session(wire, window=-1)
    core.connection_lost(wire.conn_id, 1000)
    second = connect(core, conn_id=2)
    assert second.send(ReattachSessionMessage("s1", -1), 1)[-1].packet == ReattachSessionResponseMessage(-1, False)


def test_xa_prepare_commit_and_recover() -> None:
    core = new_core()
    wire = connect(core)
    open_session(wire, xa=True, auto_commit_sends=False, auto_commit_acks=False)
    _queue(wire)
    xid = Xid(1, b"gtrid", b"bqual")
    ok = SessionXAResponseMessage(False, 0, None)
    assert wire.send(SessionXAStartMessage(xid))[-1].packet == ok
    _send(wire, b"in-xa")
    assert wire.send(SessionXAEndMessage(xid, False))[-1].packet == ok
    assert wire.send(SessionXAPrepareMessage(xid))[-1].packet == ok
    assert wire.send(SessionXAGetInDoubtXids())[-1].packet == SessionXAGetInDoubtXidsResponseMessage((xid,))
    assert core.post_office.queues[QUEUE].message_count == 0
    one_phase = wire.send(SessionXACommitMessage(xid, True))[-1].packet
    assert isinstance(one_phase, ActiveMQExceptionMessage)
    assert one_phase.code == ExceptionType.ILLEGAL_STATE
    assert wire.send(SessionXACommitMessage(xid, False))[-1].packet == ok
    assert core.post_office.queues[QUEUE].message_count == 1


def test_wrong_password_gets_security_exception_and_the_connection_stays() -> None:
    core = new_core(users={"admin": "secret"}, allow_anonymous=False)
    wire = connect(core)
    frames = wire.send(CreateSessionMessage_V2("s", 10, 136, "admin", "wrong"), 1)
    assert isinstance(frames[-1].packet, ActiveMQExceptionMessage)
    assert frames[-1].packet.code == ExceptionType.SECURITY_EXCEPTION
    assert not wire.closed_by_broker  # only the session is refused, as Artemis refuses it
    assert isinstance(wire.send(CreateSessionMessage_V2("t", 11, 136, "admin", "secret"), 1)[-1].packet,
                      CreateSessionResponseMessage)


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (raw.frame(99, b"", channel_id=0), ExceptionType.UNSUPPORTED_PACKET),
        (raw.frame(10, b"\x00", channel_id=0), ExceptionType.INTERNAL_ERROR),  # malformed PING
        (b"\x7f\xff\xff\xff" + bytes(9), ExceptionType.INTERNAL_ERROR),  # oversized length
        (encode_packet(SessionStart(), 77), ExceptionType.ILLEGAL_STATE),  # no such session
    ],
    ids=["unknown-type", "malformed", "oversized", "wrong-state"],
)
def test_bad_input_gets_an_exception_and_closes_only_that_connection(data: bytes, code: int) -> None:
    core = new_core()
    bad = connect(core, conn_id=1)
    good = connect(core, conn_id=2)
    open_session(good)
    frames = bad.raw(data)
    assert isinstance(frames[-1].packet, ActiveMQExceptionMessage)
    assert frames[-1].packet.code == code
    assert bad.closed_by_broker
    _queue(good)
    assert _send(good, b"still fine")[-1].packet == NullResponseMessage(-2)



def _types(data: bytes) -> list[type]:
    decoder = FrameDecoder(version=136)
    decoder.feed(data)
    return [type(frame.packet) for frame in decoder]


def test_a_credit_grant_is_early_output_unless_a_counted_reply_is_queued_ahead_of_it() -> None:
    """The transport may write a grant before the journal sync; the core never puts one ahead of a counted reply,
    so the counted packets keep the resend cache's order on the wire."""
    core = new_core()
    wire = connect(core)
    open_session(wire, window=1 << 20)
    _queue(wire)
    ask = encode_packet(SessionRequestProducerCreditsMessage(65536, QUEUE), 10)
    blocking_send = encode_packet(SessionSendMessage(CoreMessage(b"x", address=QUEUE, durable=True), True, -2, 0), 10)
    session = core.connections[1].sessions[10]
    cached_before = len(list(session.send_window.replay_after(-1)))

    core.receive(1, ask, 0)
    early, held, counted = core.take_output_split()
    assert _types(early[1]) == [SessionProducerCreditsMessage]
    assert 1 not in held
    assert not counted

    core.receive(1, blocking_send + ask, 0)  # the send's NULL_RESPONSE is counted and waits for the sync
    early, held, counted = core.take_output_split()
    assert early == {}
    assert _types(held[1]) == [NullResponseMessage, SessionProducerCreditsMessage]
    assert counted == {1}
    cache = b"".join(list(session.send_window.replay_after(-1))[cached_before:])
    assert _types(cache) == [SessionProducerCreditsMessage, NullResponseMessage, SessionProducerCreditsMessage]


def test_the_core_s_deadlines_are_monotonic_milliseconds() -> None:
    core = new_core(ttl_check_interval_ms=2000, transaction_timeout_scan_ms=1000)
    core.tick(5_000)
    assert core.next_deadline() == 6_000  # the transaction scan, 1000 ms after the tick
    core.tick(6_000)
    assert core.next_deadline() == 7_000  # the TTL check is due at 7_000 too


def test_a_detached_session_expires_its_connection_ttl_in_ms_after_the_drop() -> None:
    core = new_core(ttl_check_interval_ms=1)
    wire = connect(core)
    wire.send(Ping(1500), 0)
    open_session(wire, window=1 << 20)
    core.connection_lost(wire.conn_id, 1_000)
    core.tick(2_499)
    assert core.sessions.get("s1") is not None, "reattach must stay possible until the TTL has passed"
    core.tick(2_500)
    assert core.sessions.get("s1") is None
