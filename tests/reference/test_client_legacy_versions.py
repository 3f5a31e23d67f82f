"""The client's sans-IO core announcing an old protocol version (124: HornetQ 2.4.x, 128: Artemis 1.5.x): the
preamble, the session packet and every other version-gated packet it writes are the ones that version's own
client wrote.

Expected frames are the Artemis-made vectors in ``fixtures/vectors/packets.jsonl`` (written by Artemis 2.44's
classes at the vector's version) wherever the layout does not depend on the version or the vector was written
at an equivalent one (the encoders' gates are ``>= 129`` / ``>= 130``, so what they write at 129 they write at
124 and 128 too); their layouts were compared with the same classes in Artemis 1.5.6 and HornetQ 2.4.7 (the
``encodeRest`` of CreateSessionMessage, CreateQueueMessage, CreateSharedQueueMessage, SessionCreateConsumerMessage
and the query responses write the same fields in the same order).  Where a field holds the version itself the
vector is patched at the offset its field order gives, and says so.  The real servers are in
``tests/conformance/test_legacy_launch.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cck.codec import (
    HORNETQ_PREAMBLE,
    PREAMBLE,
    ClusterTopologyChangeMessage_V2,
    ClusterTopologyChangeMessage_V3,
    ClusterTopologyChangeMessage_V4,
    CoreMessage,
    CreateSessionMessage,
    CreateSessionMessage_V2,
    CreateSessionResponseMessage,
    FrameDecoder,
    Packet,
    PacketsConfirmedMessage,
    Ping,
    PropertyType,
    SessionQueueQueryResponseMessage,
    SessionQueueQueryResponseMessage_V2,
    SessionSendMessage,
    TypedProperties,
    encode_packet,
)
from cck.reference.client import (
    Call,
    ClientConnectionCore,
    ClientSettings,
    ConnectionFailed,
    FailoverInterrupted,
    SessionCore,
    SessionOptions,
)

VECTORS = Path(__file__).resolve().parents[2] / "fixtures" / "vectors" / "packets.jsonl"
NODE = "11111111-2222-3333-4444-555555555555"
NOW = 1_000
#: HornetQ 2.4.7 and Artemis 1.5.6, the two releases the kit runs (conformance/targets/_legacy_launch.py).
LEGACY = (124, 128)


def vector(name: str) -> bytes:
    with VECTORS.open(encoding="utf-8") as handle:
        for line in handle:
            record: dict[str, Any] = json.loads(line)
            if record["id"] == name:
                return bytes.fromhex(record["hex"])
    raise LookupError(name)


class Server:
    """Stands in for a server of ``version``: answers are encoded by hand at that version."""

    def __init__(self, version: int, **settings: Any) -> None:
        self.version = version
        self.client = ClientConnectionCore(ClientSettings(version=version, **settings))
        self.topology = self.client.start(NOW)
        self.head = b""

    def sent(self) -> bytes:
        """Everything the client wrote since the last look."""
        return self.client.take_output(NOW)

    def frames(self) -> list[bytes]:
        """The client's frames since the last look, each as its own bytes (the preamble kept apart)."""
        data = self.sent()
        if data.startswith((PREAMBLE, HORNETQ_PREAMBLE)):
            self.head, data = data[:7], data[7:]
        out = []
        while data:
            size = int.from_bytes(data[:4], "big") + 4
            out.append(data[:size])
            data = data[size:]
        return out

    def answer(self, packet: Packet, channel: int) -> None:
        self.client.receive(encode_packet(packet, channel, version=self.version), NOW)

    def answer_bytes(self, data: bytes) -> None:
        self.client.receive(data, NOW)

    def topology_then_session(self, *, server_version: int | None = None) -> SessionCore:
        """The topology a non-clustered server of this version sends, then a session (answered)."""
        topology: Packet
        if self.version >= 131:
            topology = ClusterTopologyChangeMessage_V4(False, NODE, 1, None, None, True, None, None,
                                                       server_version or self.version)
        elif self.version >= 125:
            topology = ClusterTopologyChangeMessage_V3(False, NODE, 1, None, None, True, None, None)
        else:
            topology = ClusterTopologyChangeMessage_V2(False, NODE, 1, None, None, True, None)
        self.answer(topology, 0)
        assert self.topology.done
        assert self.topology.error is None
        session, call = self.client.create_session(SessionOptions("sess-1", "guest", "guest"))
        self.frames()
        self.answer(CreateSessionResponseMessage(server_version or self.version), 1)
        assert call.done
        assert call.error is None
        return session


# ---------------------------------------------------------------------- preamble


@pytest.mark.parametrize(("version", "expected"), [
    (122, HORNETQ_PREAMBLE), (124, HORNETQ_PREAMBLE), (125, HORNETQ_PREAMBLE),
    (126, PREAMBLE), (128, PREAMBLE), (129, PREAMBLE), (136, PREAMBLE),
])  # fmt: skip
def test_the_preamble_is_the_one_the_client_of_that_version_wrote(version: int, expected: bytes) -> None:
    server = Server(version)
    data = server.sent()
    assert data[:7] == expected
    decoder = FrameDecoder(version=version)
    decoder.feed(data[7:])
    assert isinstance(next(decoder).packet, Ping)  # frames follow at once


@pytest.mark.parametrize(("setting", "expected"), [("ARTEMIS", PREAMBLE), ("HORNETQ", HORNETQ_PREAMBLE), ("", b"")])
def test_an_explicit_preamble_wins_over_the_version(setting: str, expected: bytes) -> None:
    for version in (124, 136):
        settings = ClientSettings(version=version).with_params({"preamble": setting})
        assert settings.preamble == setting
        data = ClientConnectionCore(settings)
        data.start(NOW)
        out = data.take_output(NOW)
        assert out[: len(expected)] == expected
        decoder = FrameDecoder(version=version)
        decoder.feed(out[len(expected):])
        assert isinstance(next(decoder).packet, Ping)


def test_an_unknown_preamble_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="preamble must be one of 'ARTEMIS', 'HORNETQ', ''"):
        ClientSettings(preamble="AMQP")
    with pytest.raises(ValueError, match="got 'hornetq'"):
        ClientSettings().with_params({"preamble": "hornetq"})


def test_subscribe_topology_announces_the_old_version() -> None:
    """SUBSCRIBE_TOPOLOGY_V2 (clusterConnection false): Artemis's vector at 129 with the flag and the version
    (the last 5 bytes, by field order) written as a 124 client writes them."""
    server = Server(124)
    _ping, subscribe = server.frames()
    assert server.head == HORNETQ_PREAMBLE
    assert subscribe == vector("SUBSCRIBE_TOPOLOGY_V2/cluster-129@129")[:-5] + b"\x00" + (124).to_bytes(4, "big")


# ---------------------------------------------------------------------- session creation


def _createsession(version: int) -> bytes:
    """Artemis's CREATESESSION vector (v1 layout, "sess-1" on channel 1) with its version field set: the field
    starts at byte 37 (13 header + name as i32 length and 6 UTF-16 chars + i64 channel ID)."""
    notes = vector("CREATESESSION/notes@136")
    return notes[:37] + version.to_bytes(4, "big") + notes[41:]


@pytest.mark.parametrize("version", [122, 124, 126, 128, 129, 130])
def test_before_2_18_the_session_is_created_with_createsession_v1(version: int) -> None:
    server = Server(version)
    server.frames()
    server.answer(ClusterTopologyChangeMessage_V2(False, NODE, 1, None, None, True, None), 0)
    server.client.create_session(SessionOptions("sess-1", "guest", "guest", client_id="ignored"))
    (frame,) = server.frames()
    assert frame == _createsession(version)


@pytest.mark.parametrize("version", [131, 136])
def test_from_2_18_on_it_is_createsession_v2_with_the_client_id(version: int) -> None:
    server = Server(version)
    server.frames()
    server.client.create_session(SessionOptions("sess-1", "guest", "guest", client_id="me"))
    (frame,) = server.frames()
    decoder = FrameDecoder(version=version)
    decoder.feed(frame)
    packet = next(decoder).packet
    assert isinstance(packet, CreateSessionMessage_V2)
    assert (packet.version, packet.client_id) == (version, "me")


def test_a_newer_servers_version_does_not_raise_the_clients() -> None:
    """Announcing 128 to a 2.x server that answers 136: the client keeps writing 128's packets, because the
    server decodes them by the 128 it was told in SUBSCRIBE_TOPOLOGY_V2."""
    server = Server(128)
    server.frames()
    server.answer(ClusterTopologyChangeMessage_V3(False, NODE, 1, None, None, True, None, None), 0)
    session, call = server.client.create_session(SessionOptions("sess-1"))
    server.answer(CreateSessionResponseMessage(136), 1)
    assert call.error is None
    assert (session.server_version, server.client.version, session.version) == (136, 128, 128)
    server.frames()
    server.client.create_session(SessionOptions("sess-2"))
    decoder = FrameDecoder(version=128)
    decoder.feed(server.sent())
    assert isinstance(next(decoder).packet, CreateSessionMessage)


def test_an_older_servers_topology_lowers_the_version_before_the_first_session() -> None:
    """A 2.44 client (136) told by CLUSTER_TOPOLOGY_V4 that the server is 130 (2.7-2.17 never send V4, but a
    2.18-2.20 server answers 131): the first session is created with the packet the server's version knows."""
    server = Server(136)
    server.frames()
    server.answer(ClusterTopologyChangeMessage_V4(False, NODE, 1, None, None, True, None, None, 130), 0)
    assert server.client.version == 130
    server.client.create_session(SessionOptions("sess-1"))
    decoder = FrameDecoder(version=130)
    decoder.feed(server.sent())
    packet = next(decoder).packet
    assert isinstance(packet, CreateSessionMessage)
    assert packet.version == 136


# ---------------------------------------------------------------------- the session's packets


@pytest.mark.parametrize("version", LEGACY)
def test_queues_are_created_with_the_version_1_packets(version: int) -> None:
    server = Server(version)
    session = server.topology_then_session()
    queue = session.create_queue("a1", "q1", filter_string="color='red'")
    shared = session.create_shared_queue("t1", "sub-1", filter_string="a=1")
    address = session.create_address("a1")
    assert server.frames() == [vector("CREATE_QUEUE/filter@136"), vector("CREATE_SHARED_QUEUE/filter@136")]
    # No CREATE_ADDRESS before 129 (Artemis's client skips it): done at once, nothing written.
    assert address.done
    assert address.error is None
    null = vector("NULL_RESPONSE/v1-empty@129")  # no correlation ID before 130
    server.answer_bytes(null + null)
    assert queue.done
    assert queue.error is None
    assert shared.done
    assert shared.error is None


@pytest.mark.parametrize(("version", "answer"), [
    (124, "SESS_QUEUEQUERY_RESP/exists@136"), (128, "SESS_QUEUEQUERY_RESP_V2/exists@136"),
])  # fmt: skip
def test_a_consumer_is_created_without_a_priority_and_takes_the_old_query_answer(version: int, answer: str) -> None:
    server = Server(version)
    session = server.topology_then_session()
    consumer, call = session.create_consumer("q1")
    create, _flow = server.frames()
    assert create == vector("SESS_CREATECONSUMER/no-priority@129")
    server.answer_bytes(vector(answer))
    assert call.done
    assert call.error is None
    assert isinstance(call.result(), (SessionQueueQueryResponseMessage, SessionQueueQueryResponseMessage_V2))
    # A delivery in the 1.x message layout (Artemis's SessionReceiveMessage_1X vector at 128).
    server.answer_bytes(vector("SESS_RECEIVE_MSG/notes@128"))
    delivery = consumer.take()
    assert delivery is not None
    assert (delivery.message.body, delivery.message.message_id, delivery.message.address) == (
        bytes.fromhex("010000000468006900"), 1234, "a1")


@pytest.mark.parametrize("version", LEGACY)
def test_sends_use_the_1x_layout_and_only_blocking_ones_ask_for_an_answer(version: int) -> None:
    """With a confirmation window a 2.7+ client asks for an answer to every send; before 130 only a blocking
    send does (the window's PACKETS_CONFIRMED stands for the rest: the send is done once its command ID is
    confirmed), and no correlation ID travels."""
    server = Server(version, confirmation_window_size=1024, producer_window_size=-1)
    session = server.topology_then_session()
    producer = session.create_producer("a1")
    assert server.frames() == []  # no CREATE_PRODUCER before 134
    sent = CoreMessage(bytes.fromhex("010000000468006900"), 0, "a1", None, 3, True, 0, 1_700_000_000_000, 4,
                       TypedProperties.typed(("n", PropertyType.INT, 7)))
    blocking, is_blocking = session.send(producer, sent)
    (frame,) = server.frames()
    assert frame == vector("SESS_SEND/text-durable@128")
    assert is_blocking
    assert blocking is not None
    server.answer_bytes(vector("NULL_RESPONSE/v1-empty@129"))
    assert blocking.done
    assert blocking.error is None

    call, is_blocking = session.send(producer, CoreMessage(b"x", address="a1", durable=False))
    assert call is not None
    assert not is_blocking
    decoder = FrameDecoder(version=version)
    decoder.feed(server.sent())
    packet = next(decoder).packet
    assert isinstance(packet, SessionSendMessage)
    assert (packet.requires_response, packet.correlation_id, packet.sender_id) == (False, None, None)
    server.answer(PacketsConfirmedMessage(0), session.channel_id)  # the blocking send's command, not this one
    assert not call.done
    server.answer(PacketsConfirmedMessage(1), session.channel_id)
    assert call.done
    assert call.error is None


def _async_sends(version: int, count: int) -> tuple[Server, SessionCore, list[Call]]:
    server = Server(version, confirmation_window_size=1024, producer_window_size=-1)
    session = server.topology_then_session()
    producer = session.create_producer("a1")
    calls = []
    for n in range(count):
        call, _ = session.send(producer, CoreMessage(bytes([n]), address="a1", durable=False))
        assert call is not None
        calls.append(call)
    server.frames()
    return server, session, calls


@pytest.mark.parametrize("version", LEGACY)
def test_a_reattach_completes_the_sends_the_broker_had_and_the_replayed_ones_on_their_confirmation(
        version: int) -> None:
    server, session, calls = _async_sends(version, 3)
    session.detach(None)
    session.reattached(server.client, 0, NOW)  # the broker had command 0; 1 and 2 are replayed
    assert [c.done for c in calls] == [True, False, False]
    assert len(server.frames()) == 2
    server.answer(PacketsConfirmedMessage(2), session.channel_id)
    assert all(c.done and c.error is None for c in calls)


@pytest.mark.parametrize("version", LEGACY)
def test_a_recreated_session_reports_unconfirmed_sends_as_interrupted_and_a_failure_fails_them(
        version: int) -> None:
    server, session, calls = _async_sends(version, 2)
    server.answer(PacketsConfirmedMessage(0), session.channel_id)
    session.detach(None)
    session.recreated(server.client, version, NOW)
    assert calls[0].error is None
    assert isinstance(calls[1].error, FailoverInterrupted)

    _, session, calls = _async_sends(version, 1)
    session.failed(ConnectionFailed("gone"))
    assert isinstance(calls[0].error, ConnectionFailed)


@pytest.mark.parametrize("version", LEGACY)
def test_commit_is_the_empty_version_1_packet(version: int) -> None:
    server = Server(version)
    session = server.topology_then_session()
    call = session.commit()
    assert server.frames() == [vector("SESS_COMMIT/v1-empty@129")]
    server.answer_bytes(vector("NULL_RESPONSE/v1-empty@129"))
    assert call.done
    assert call.error is None
