"""The hex vectors of the protocol notes (§16), produced by Artemis's encoders,
decode to the stated fields and re-encode to the same bytes."""

from __future__ import annotations

import pytest

from cck.codec import (
    ActiveMQExceptionMessage,
    ClusterTopologyChangeMessage_V4,
    CoreMessage,
    CreateAddressMessage,
    CreateProducerMessage,
    CreateQueueMessage_V2,
    CreateSessionMessage,
    CreateSessionMessage_V2,
    CreateSessionResponseMessage,
    DisconnectMessage,
    DisconnectMessage_V2,
    DisconnectMessage_V3,
    NullResponseMessage,
    Packet,
    PacketsConfirmedMessage,
    Ping,
    ReattachSessionMessage,
    ReattachSessionResponseMessage,
    RemoveProducerMessage,
    RollbackMessage,
    SessionAcknowledgeMessage,
    SessionAddMetaDataMessageV2,
    SessionBindingQueryMessage,
    SessionBindingQueryResponseMessage_V5,
    SessionCloseMessage,
    SessionCommitMessage,
    SessionConsumerCloseMessage,
    SessionConsumerFlowCreditMessage,
    SessionCreateConsumerMessage,
    SessionDeleteQueueMessage,
    SessionIndividualAcknowledgeMessage,
    SessionProducerCreditsMessage,
    SessionQueueQueryMessage,
    SessionQueueQueryResponseMessage_V3,
    SessionReceiveMessage,
    SessionRequestProducerCreditsMessage,
    SessionSendMessage,
    SessionStart,
    SessionXACommitMessage,
    SessionXAEndMessage,
    SessionXAGetInDoubtXidsResponseMessage,
    SessionXAGetTimeoutResponseMessage,
    SessionXAPrepareMessage,
    SessionXAResponseMessage,
    SessionXASetTimeoutMessage,
    SessionXAStartMessage,
    SubscribeClusterTopologyUpdatesMessageV2,
    TypedProperties,
    Xid,
    decode_frame,
    encode_packet,
)

XID = Xid(0x1234, global_transaction_id=bytes([9, 8, 7]), branch_qualifier=bytes([1, 2]))
NODE = "11111111-2222-3333-4444-555555555555"
TEXT_HI = CoreMessage.text_body("hi")

# (hex from the notes, channel, packet)
VECTORS: list[tuple[str, int, Packet]] = [
    ("00000011 0a 0000000000000000 000000000000ea60", 0, Ping(60000)),
    ("0000000e 71 0000000000000000 00 00000088", 0, SubscribeClusterTopologyUpdatesMessageV2(False, 136)),
    (
        "00000045 ef 0000000000000000 00 00000024 0024"
        + NODE.encode().hex()
        + "0000018bcfe56800 00 00 ff 00 00 00000088",
        0,
        ClusterTopologyChangeMessage_V4(False, NODE, 1700000000000, None, None, True, None, None, 136),
    ),
    (
        "00000051 ee 0000000000000001 00000006 0073 0065 0073 0073 002d 0031 000000000000000a 00000088"
        " 01 00000005 0067 0075 0065 0073 0074 01 00000005 0067 0075 0065 0073 0074 00019000"
        " 00 ff ff ffffffff 00 00 00",
        1,
        CreateSessionMessage_V2("sess-1", 10, 136, "guest", "guest", 102400, False, True, True, -1, False),
    ),
    (
        "00000050 1e 0000000000000001 00000006 0073 0065 0073 0073 002d 0031 000000000000000a 00000088"
        " 01 00000005 0067 0075 0065 0073 0074 01 00000005 0067 0075 0065 0073 0074 00019000"
        " 00 ff ff ffffffff 00 00",
        1,
        CreateSessionMessage("sess-1", 10, 136, "guest", "guest", 102400, False, True, True, -1, False),
    ),
    ("0000000d 1f 0000000000000001 00000088", 1, CreateSessionResponseMessage(136)),
    (
        "0000001d 20 0000000000000001 00000006 0073006500730073002d0031 00000005",
        1,
        ReattachSessionMessage("sess-1", 5),
    ),
    ("0000000e 21 0000000000000001 00000003 ff", 1, ReattachSessionResponseMessage(3, True)),
    ("0000000e 14 0000000000000001 0000006c 00", 1, ActiveMQExceptionMessage(108, None)),
    ("00000015 ed 0000000000000000 01 00000004 6e003100 04 00 00", 0, DisconnectMessage_V3("n1", 4)),
    ("00000012 0b 0000000000000000 01 00000004 6e003100", 0, DisconnectMessage("n1")),
    ("00000013 7c 0000000000000000 01 00000004 6e003100 00", 0, DisconnectMessage_V2("n1", None)),
    ("00000011 15 000000000000000a ffffffffffffffff", 10, NullResponseMessage(-1)),
    (
        "00000022 14 000000000000000a 00000064 01 00000004 006e006f00200071 0000000000000005",
        10,
        ActiveMQExceptionMessage(100, "no q", 5),
    ),
    ("0000000d 16 000000000000000a 00000007", 10, PacketsConfirmedMessage(7)),
    (
        "00000018 f5 000000000000000a 00000004 61003100 00000001 01 ff 00",
        10,
        CreateAddressMessage("a1", (1,), True, False),
    ),
    (
        "00000033 f4 000000000000000a 00000004 61003100 00000004 71003100 00 ff 00 ff 00 01 ffffffff 00"
        + "00" * 15,
        10,
        CreateQueueMessage_V2("a1", "q1", None, True, False, True, False, 1, -1, False),
    ),
    ("00000011 23 000000000000000a 00000004 71003100", 10, SessionDeleteQueueMessage("q1")),
    (
        "00000020 28 000000000000000a 0000000000000000 00000004 71003100 00 00 ff 00000004",
        10,
        SessionCreateConsumerMessage(0, "q1", None, False, True, 4),
    ),
    (
        "00000015 46 000000000000000a 0000000000000000 00100000",
        10,
        SessionConsumerFlowCreditMessage(0, 1048576),
    ),
    (
        "0000001a 29 000000000000000a 0000000000000000 000000000000002a 00",
        10,
        SessionAcknowledgeMessage(0, 42, False),
    ),
    (
        "0000001a 51 000000000000000a 0000000000000000 000000000000002a ff",
        10,
        SessionIndividualAcknowledgeMessage(0, 42, True),
    ),
    ("00000011 2b 000000000000000a fffffffffffffffe", 10, SessionCommitMessage(-2)),
    ("0000000a 2c 000000000000000a 00", 10, RollbackMessage(False)),
    ("00000009 43 000000000000000a", 10, SessionStart()),
    ("00000009 45 000000000000000a", 10, SessionCloseMessage()),
    ("00000011 2d 000000000000000a 00000004 71003100", 10, SessionQueueQueryMessage("q1")),
    ("00000011 31 000000000000000a 00000004 61003100", 10, SessionBindingQueryMessage("a1")),
    (
        "00000015 4f 000000000000000a 00008000 00000004 61003100",
        10,
        SessionRequestProducerCreditsMessage(32768, "a1"),
    ),
    ("00000015 50 000000000000000a 00008000 00000004 61003100", 10, SessionProducerCreditsMessage(32768, "a1")),
    (
        "00000016 69 000000000000000a 00000001 006b 00000001 0076 ff",
        10,
        SessionAddMetaDataMessageV2("k", "v", True),
    ),
    ("00000016 ec 000000000000000a 00000001 01 00000004 61003100", 10, CreateProducerMessage(1, "a1")),
    ("0000000d eb 000000000000000a 00000001", 10, RemoveProducerMessage(1)),
    ("00000011 4a 000000000000000a 0000000000000000", 10, SessionConsumerCloseMessage(0)),
    (
        "00000045 f2 000000000000000a ff ff 00 00000000 0000000000000000 00 01 00000004 61003100"
        " 01 00000004 71003100 ff 00 00 01 ffffffff" + "00" * 16 + "ff 00",
        10,
        SessionQueueQueryResponseMessage_V3(
            True, True, False, 0, 0, None, "a1", "q1", True, False, False, 1, -1, configuration_managed=False
        ),
    ),
    (
        "00000025 ea 000000000000000a ff 00000001 00000004 71003100 ff ff 00 ffffffff 00 00 00 00 00 00 00 ff",
        10,
        SessionBindingQueryResponseMessage_V5(
            True, ("q1",), True, True, False, -1, supports_multicast=False, supports_anycast=True
        ),
    ),
    ("0000001a 33 000000000000000a 00001234 00000002 0102 00000003 090807", 10, SessionXAStartMessage(XID)),
    (
        "0000001b 34 000000000000000a 00001234 00000002 0102 00000003 090807 00",
        10,
        SessionXAEndMessage(XID, False),
    ),
    ("0000001a 36 000000000000000a 00001234 00000002 0102 00000003 090807", 10, SessionXAPrepareMessage(XID)),
    (
        "0000001b 35 000000000000000a 00001234 00000002 0102 00000003 090807 00",
        10,
        SessionXACommitMessage(XID, False),
    ),
    ("0000000f 37 000000000000000a 00 00000000 00", 10, SessionXAResponseMessage(False, 0, None)),
    (
        "00000015 37 000000000000000a ff fffffffc 01 00000001 0078",
        10,
        SessionXAResponseMessage(True, -4, "x"),
    ),
    (
        "00000017 37 000000000000000a 00 00000000 00 fffffffffffffffd",
        10,
        SessionXAResponseMessage(False, 0, None, -3),
    ),
    (
        "0000001e 3e 000000000000000a 00000001 00001234 00000002 0102 00000003 090807",
        10,
        SessionXAGetInDoubtXidsResponseMessage((XID,)),
    ),
    ("0000000d 3f 000000000000000a 0000003c", 10, SessionXASetTimeoutMessage(60)),
    ("0000000d 42 000000000000000a 0000003c", 10, SessionXAGetTimeoutResponseMessage(60)),
    (
        "00000058 47 000000000000000a 00000016 01 00000004 68006900 0000000000000000 01 00000004 61003100"
        " 00 03 01 0000000000000000 0000018bcfe56800 04 01 00000001 00000002 6e00 06 00000007"
        " ff fffffffffffffffe 00000001",
        10,
        SessionSendMessage(
            CoreMessage(
                TEXT_HI,
                address="a1",
                type=3,
                durable=True,
                timestamp=1700000000000,
                properties=TypedProperties.of(n=7),
            ),
            True,
            -2,
            1,
        ),
    ),
    (
        "00000040 47 000000000000000a 0000000d 0000000000000000 01 00000004 61003100 00 00 00"
        " 0000000000000000 0000000000000000 04 00 00 0000000000000000 00000000",
        10,
        SessionSendMessage(CoreMessage(b"", address="a1"), False, 0, 0),
    ),
    (
        "00000048 4b 000000000000000a 00000016 01 00000004 68006900 00000000000004d2 01 00000004 61003100"
        " 00 03 01 0000000000000000 0000018bcfe56800 04 00 0000000000000000 00000001",
        10,
        SessionReceiveMessage(
            CoreMessage(TEXT_HI, 1234, "a1", None, 3, True, 0, 1700000000000, 4), 0, 1
        ),
    ),
]


@pytest.mark.parametrize(("hexstr", "channel", "packet"), VECTORS, ids=[v[2].type_name() for v in VECTORS])
def test_notes_vector_round_trips(hexstr: str, channel: int, packet: Packet) -> None:
    data = bytes.fromhex(hexstr.replace(" ", ""))
    frame = decode_frame(data)
    assert frame.packet == packet
    assert frame.channel_id == channel
    assert frame.size == len(data)
    assert encode_packet(packet, channel) == data


def test_text_body_reads_back() -> None:
    assert CoreMessage(TEXT_HI, type=3).text == "hi"
