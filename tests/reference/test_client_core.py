"""The client's sans-IO core against the broker's sans-IO core, bytes moved by hand and time
passed in (monotonic ms): handshake, correlation IDs, the confirmation window, credits, timers and
failures, each checked on the frames that actually crossed."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from cck.codec import (
    PREAMBLE,
    CoreMessage,
    CreateSessionResponseMessage,
    ExceptionType,
    Frame,
    FrameDecoder,
    NullResponseMessage,
    PacketsConfirmedMessage,
    Ping,
    RoutingType,
    SessionCommitMessage,
    SessionConsumerFlowCreditMessage,
    SessionReceiveMessage,
    SessionRequestProducerCreditsMessage,
    SessionSendMessage,
    SubscribeClusterTopologyUpdatesMessageV2,
    Xid,
    encode_packet,
)
from cck.reference.broker import BrokerCore, BrokerSettings
from cck.reference.client import (
    BrokerRefused,
    CallTimeout,
    ClientConnectionCore,
    ClientError,
    ClientSettings,
    ConnectionFailed,
    ProtocolViolation,
    SessionCore,
    SessionOptions,
    XAError,
)

CONN = 1


@dataclass
class FakeClock:
    """The ``now_ms`` both cores are given."""

    now: int = 100_000


@dataclass
class Link:
    """A client core wired to a broker core; every frame that crosses is kept, decoded."""

    client: ClientConnectionCore
    broker: BrokerCore
    clock: FakeClock
    to_broker: list[Frame] = field(default_factory=list)
    to_client: list[Frame] = field(default_factory=list)
    up: FrameDecoder = field(default_factory=lambda: FrameDecoder(expect_preamble=True))
    down: FrameDecoder = field(default_factory=lambda: FrameDecoder())
    failures: list[ClientError] = field(default_factory=list)

    def pump(self) -> None:
        """Move bytes both ways until neither side has anything to say."""
        for _ in range(100):
            out = self.client.take_output(self.clock.now)
            if out:
                self.up.feed(out)
                self.to_broker.extend(self.up)
                self.broker.receive(CONN, out, self.clock.now)
            back = self.broker.take_output().get(CONN, b"")
            if back:
                self.down.feed(back)
                self.to_client.extend(self.down)
                self.client.receive(back, self.clock.now)
            if not out and not back:
                return
        raise AssertionError("the two cores kept talking for 100 rounds")

    def sent(self, packet_type: type) -> list:
        return [f.packet for f in self.to_broker if isinstance(f.packet, packet_type)]

    def received(self, packet_type: type) -> list:
        return [f.packet for f in self.to_client if isinstance(f.packet, packet_type)]

    def session(self, **options: object) -> SessionCore:
        session, call = self.client.create_session(SessionOptions(name=f"s{len(self.client.sessions)}", **options))  # type: ignore[arg-type]
        self.pump()
        assert isinstance(call.result(), CreateSessionResponseMessage)
        return session


def link(**settings: object) -> Link:
    clock = FakeClock()
    broker = BrokerCore(BrokerSettings(node_id="node-1"))
    broker.connection_made(CONN, clock.now)
    client = ClientConnectionCore(ClientSettings(**settings))  # type: ignore[arg-type]
    result = Link(client, broker, clock)
    client.failure_listeners.append(result.failures.append)
    topology = client.start(clock.now)
    result.pump()
    assert topology.done
    assert topology.error is None
    return result


def message(body: bytes = b"m", *, durable: bool = False, address: str = "q") -> CoreMessage:
    return CoreMessage(body, address=address, durable=durable)


# ---------------------------------------------------------------------- handshake


def test_start_writes_preamble_ping_and_subscribe_then_waits_for_the_last_topology_message() -> None:
    clock = FakeClock()
    client = ClientConnectionCore(ClientSettings(connection_ttl_ms=45_000))
    topology = client.start(clock.now)
    out = client.take_output(clock.now)
    assert out.startswith(PREAMBLE)
    decoder = FrameDecoder(expect_preamble=True)
    decoder.feed(out)
    assert [f.packet for f in decoder] == [Ping(45_000), SubscribeClusterTopologyUpdatesMessageV2(False, 136)]
    assert not topology.done
    broker = BrokerCore(BrokerSettings(node_id="node-7"))
    broker.connection_made(CONN, clock.now)
    broker.receive(CONN, out, clock.now)
    client.receive(broker.take_output()[CONN], clock.now)
    assert topology.done
    assert topology.error is None
    assert "node-7" in client.topology


def test_without_the_topology_the_connection_fails_after_topology_timeout() -> None:
    clock = FakeClock()
    client = ClientConnectionCore(ClientSettings(topology_timeout_ms=2_000))
    topology = client.start(clock.now)
    assert client.next_deadline() == clock.now + 2_000
    clock.now += 1_999
    client.tick(clock.now)
    assert not topology.done
    clock.now += 1
    client.tick(clock.now)
    assert isinstance(topology.error, CallTimeout)
    assert isinstance(client.failure, ConnectionFailed)
    assert client.failure.code == ExceptionType.CONNECTION_TIMEDOUT


def test_a_socket_lost_before_start_fails_the_topology_wait_at_once() -> None:
    # A broker that is stopping can accept the TCP connection and hang up before the handshake is written;
    # no timer runs on a failed core, so a topology call left waiting would hang a reconnection forever.
    clock = FakeClock()
    client = ClientConnectionCore(ClientSettings(topology_timeout_ms=2_000))
    client.connection_lost("the TCP connection to 127.0.0.1:61616 closed", clock.now)
    topology = client.start(clock.now)
    assert topology.done
    assert topology.error is client.failure
    assert isinstance(topology.error, ConnectionFailed)


# ---------------------------------------------------------------------- correlation and requires_response


def test_blocking_requests_count_correlation_ids_down_from_minus_two() -> None:
    wire = link()
    session = wire.session(auto_commit_sends=False, auto_commit_acks=False)
    first, second = session.commit(), session.commit()
    wire.pump()
    assert [p.correlation_id for p in wire.sent(SessionCommitMessage)] == [-2, -3]
    assert [p.correlation_id for p in wire.received(NullResponseMessage)][-2:] == [-2, -3]
    assert first.done
    assert second.done
    assert first.error is None
    assert second.error is None


@pytest.mark.parametrize(
    ("window", "durable", "requires_response", "correlation", "blocking"),
    [
        (-1, True, True, -2, True),  # blockOnDurableSend
        (-1, False, False, 0, False),  # fire and forget
        (1024, False, True, 1, False),  # a window makes every send answered, asynchronously
        (1024, True, True, -2, True),
    ],
)
def test_send_asks_for_a_response_as_the_java_client_does(
    window: int, durable: bool, requires_response: bool, correlation: int, blocking: bool
) -> None:
    wire = link(confirmation_window_size=window)
    session = wire.session()
    session.create_queue("q", "q")
    producer = session.create_producer("q")
    call, was_blocking = session.send(producer, message(durable=durable))
    wire.pump()
    sent = wire.sent(SessionSendMessage)[-1]
    assert (sent.requires_response, sent.correlation_id, was_blocking) == (requires_response, correlation, blocking)
    assert (call is not None) == requires_response
    if call is not None:
        assert call.done
        assert call.error is None
        assert (call.deadline is not None) == blocking


def test_asynchronous_sends_number_their_correlation_ids_up_from_one() -> None:
    wire = link(confirmation_window_size=1 << 20)
    session = wire.session()
    producer = session.create_producer("q")
    calls = [session.send(producer, message())[0] for _ in range(3)]
    wire.pump()
    assert [p.correlation_id for p in wire.sent(SessionSendMessage)] == [1, 2, 3]
    assert all(c is not None and c.done and c.error is None for c in calls)


# ---------------------------------------------------------------------- confirmation window


def test_the_client_confirms_received_commands_each_time_the_window_fills() -> None:
    window = 300
    wire = link(confirmation_window_size=window)
    session = wire.session()
    session.create_queue("q", "q")
    producer = session.create_producer("q")
    for i in range(6):
        session.send(producer, message(bytes([65 + i]) * 40))
    consumer, _ = session.create_consumer("q")
    session.start()
    wire.pump()
    assert len(consumer.buffer) == 6
    # Replay the client's counting on the frames it received on the session channel.
    expected, counted, index = [], 0, -1
    for frame in wire.to_client:
        if frame.channel_id == session.channel_id and frame.packet.requires_confirmations():
            index += 1
            counted += frame.size
            if counted >= window:
                expected.append(index)
                counted = 0
    confirmed = [f.packet.command_id for f in wire.to_broker
                 if isinstance(f.packet, PacketsConfirmedMessage) and f.channel_id == session.channel_id]
    assert expected, "the test should make the window fill at least once"
    assert confirmed == expected


def test_a_ping_flushes_a_partly_filled_window() -> None:
    wire = link(confirmation_window_size=1 << 20, client_failure_check_period_ms=1_000)
    session = wire.session()
    session.create_queue("q", "q")
    wire.pump()
    assert not wire.sent(PacketsConfirmedMessage)
    wire.clock.now += 1_000
    wire.client.tick(wire.clock.now)
    wire.pump()
    confirmed = wire.sent(PacketsConfirmedMessage)
    assert confirmed == [PacketsConfirmedMessage(session.receive_window.last_confirmed)]
    assert confirmed[0].command_id >= 0


def test_the_broker_s_confirmations_release_the_resend_cache() -> None:
    wire = link(confirmation_window_size=64)
    session = wire.session()
    producer = session.create_producer("q")
    for _ in range(10):
        session.send(producer, message(b"x" * 100))
    assert len(session.send_window.cache) >= 10
    wire.pump()
    assert wire.received(PacketsConfirmedMessage)
    assert len(session.send_window.cache) == 0
    assert session.send_window.first_stored == session.send_window.next_command_id


# ---------------------------------------------------------------------- credits


def test_producer_credits_are_requested_up_front_and_topped_up() -> None:
    wire = link(producer_window_size=1_000)
    session = wire.session()
    credits = session.credits_for("q")
    assert credits is not None
    wire.pump()
    assert wire.sent(SessionRequestProducerCreditsMessage) == [SessionRequestProducerCreditsMessage(1_000, "q")]
    assert (credits.available, credits.arriving) == (1_000, 0)
    assert credits.try_acquire(600)
    wire.pump()
    # 400 left, 600 more asked for so that a window's worth is available or on its way.
    assert wire.sent(SessionRequestProducerCreditsMessage)[-1] == SessionRequestProducerCreditsMessage(600, "q")
    assert credits.available == 1_000
    assert not credits.try_acquire(5_000)  # more than a window: asked for, not there yet
    wire.pump()
    assert credits.try_acquire(5_000)


def test_consumer_credits_start_at_the_window_and_come_back_at_half_of_it() -> None:
    wire = link(consumer_window_size=2_000)
    session = wire.session()
    session.create_queue("q", "q")
    producer = session.create_producer("q")
    for _ in range(8):
        session.send(producer, message(b"z" * 300))
    consumer, _ = session.create_consumer("q")
    session.start()
    wire.pump()
    flow = wire.sent(SessionConsumerFlowCreditMessage)
    assert flow == [SessionConsumerFlowCreditMessage(consumer.consumer_id, 2_000)]
    sizes = [d.size for d in consumer.buffer]
    assert sum(sizes) <= 2_000 + max(sizes)  # the broker stopped at the window
    taken = 0
    while consumer.buffer:
        taken += consumer.take().size  # type: ignore[union-attr]
        if taken >= 1_000:
            break
    wire.pump()
    assert wire.sent(SessionConsumerFlowCreditMessage)[-1] == SessionConsumerFlowCreditMessage(consumer.consumer_id,
                                                                                               taken)


# ---------------------------------------------------------------------- transactions


def test_rollback_drops_buffered_deliveries_and_the_broker_redelivers_them() -> None:
    wire = link()
    session = wire.session(auto_commit_sends=False, auto_commit_acks=False)
    session.create_queue("q", "q")
    producer = session.create_producer("q")
    session.send(producer, message(b"a"))
    session.send(producer, message(b"b"))
    session.commit()
    consumer, _ = session.create_consumer("q")
    session.start()
    wire.pump()
    first = consumer.take()
    assert first is not None
    assert first.delivery_count == 1
    session.acknowledge(first)
    session.stop()
    call = session.rollback()
    session.start()
    wire.pump()
    assert call.done
    assert call.error is None
    redelivered = [consumer.take() for _ in range(2)]
    assert [(d.message.body, d.delivery_count) for d in redelivered if d] == [(b"a", 2), (b"b", 2)]


def test_an_xa_error_answer_becomes_xa_error_with_its_code() -> None:
    wire = link()
    session = wire.session(xa=True, auto_commit_sends=False, auto_commit_acks=False)
    call = session.xa_commit(Xid(1, b"nobody", b"knows"), one_phase=False)
    wire.pump()
    assert isinstance(call.error, XAError)
    assert call.error.code == -4  # XAER_NOTA
    assert wire.client.failure is None  # an XA error is an answer, not a failure


def test_an_exception_answer_becomes_broker_refused_with_its_type() -> None:
    wire = link()
    session = wire.session()
    session.create_queue("q", "q", routing_type=RoutingType.ANYCAST)
    again = session.create_queue("q", "q", routing_type=RoutingType.ANYCAST)
    wire.pump()
    assert isinstance(again.error, BrokerRefused)
    assert again.error.type is ExceptionType.QUEUE_EXISTS
    assert "CREATE_QUEUE_V2" in str(again.error)


# ---------------------------------------------------------------------- failures and timers


def test_a_call_that_times_out_fails_the_connection_and_every_waiter() -> None:
    clock = FakeClock()
    client = ClientConnectionCore(ClientSettings(call_timeout_ms=500))
    failures: list[ClientError] = []
    client.failure_listeners.append(failures.append)
    client.start(clock.now)
    session, created = client.create_session(SessionOptions("lonely"))
    client.take_output(clock.now)  # the request goes out: its timeout starts
    clock.now += 500
    client.tick(clock.now)
    assert isinstance(created.error, CallTimeout)
    assert isinstance(client.failure, ConnectionFailed)
    assert client.failure.code == ExceptionType.CONNECTION_TIMEDOUT
    assert failures == [client.failure]
    with pytest.raises(ConnectionFailed):
        session.commit()


def test_a_session_close_that_times_out_leaves_the_connection_failed_not_the_timer_broken() -> None:
    # the expired SESS_CLOSE's callback removes its session while the timer walks the sessions
    wire = link(call_timeout_ms=500)
    session = wire.session()
    other = wire.session()
    closing = session.close()
    wire.client.take_output(wire.clock.now)  # SESS_CLOSE goes out and is never answered
    wire.clock.now += 500
    wire.client.tick(wire.clock.now)
    assert isinstance(closing.error, CallTimeout)
    assert session.channel_id not in wire.client.sessions
    assert isinstance(wire.client.failure, ConnectionFailed)
    assert wire.failures == [wire.client.failure]
    with pytest.raises(ConnectionFailed):
        other.commit()


def test_the_connection_fails_when_nothing_arrives_for_the_ttl() -> None:
    clock = FakeClock()
    client = ClientConnectionCore(ClientSettings(connection_ttl_ms=1_000, client_failure_check_period_ms=400))
    client.start(clock.now)
    client.take_output(clock.now)
    for _ in range(2):  # 0.4 and 0.8 s: pings, below the TTL
        clock.now += 400
        client.tick(clock.now)
        assert client.failure is None
    assert client.take_output(clock.now).count(encode_packet(Ping(1_000), 0)) == 2
    clock.now += 400  # 1.2 s >= the TTL, and nothing came back
    client.tick(clock.now)
    assert isinstance(client.failure, ConnectionFailed)
    assert "connection TTL" in str(client.failure)


def test_bytes_from_the_broker_keep_the_connection_alive() -> None:
    wire = link(connection_ttl_ms=1_000, client_failure_check_period_ms=400, topology_timeout_ms=60_000)
    for _ in range(10):
        wire.clock.now += 400
        wire.client.tick(wire.clock.now)
        wire.pump()  # the broker echoes each PING
    assert wire.client.failure is None


def test_disconnect_from_the_broker_fails_pending_calls_and_tells_listeners() -> None:
    wire = link()
    session = wire.session(auto_commit_sends=False, auto_commit_acks=False)
    pending = session.commit()  # not pumped: still waiting
    wire.broker.shutdown()
    wire.client.receive(wire.broker.take_output()[CONN], wire.clock.now)
    assert isinstance(wire.client.failure, ConnectionFailed)
    assert wire.client.failure.code == ExceptionType.DISCONNECTED
    assert "SHUT_DOWN" in str(wire.client.failure)
    assert pending.error is wire.client.failure
    assert wire.failures == [wire.client.failure]


def test_undecodable_bytes_fail_the_connection_with_a_named_error() -> None:
    wire = link()
    wire.client.receive(b"\x00\x00\x00\x09\x7b" + b"\x00" * 8, wire.clock.now)  # type 123 is no packet
    assert isinstance(wire.client.failure, ProtocolViolation)
    assert "undecodable" in str(wire.client.failure)


def test_an_answer_nobody_asked_for_is_a_protocol_violation() -> None:
    wire = link()
    wire.client.receive(encode_packet(NullResponseMessage(-1), 1), wire.clock.now)
    assert isinstance(wire.client.failure, ProtocolViolation)
    assert "unsolicited NULL_RESPONSE" in str(wire.client.failure)


def test_a_closed_session_drops_late_packets_on_its_channel() -> None:
    wire = link()
    session = wire.session()
    closing = session.close()
    wire.pump()
    assert closing.done
    assert closing.error is None
    assert session.channel_id not in wire.client.sessions
    wire.client.receive(encode_packet(SessionReceiveMessage(message(), 0, 1), session.channel_id), wire.clock.now)
    assert wire.client.failure is None
