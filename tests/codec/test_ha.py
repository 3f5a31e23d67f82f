"""Backup registration and quorum votes beyond the generic vector test (test_artemis_vectors): packets built in
Python are the bytes Artemis wrote; a vote is typed only under the server-connect handler names and only when its
bytes are exactly that vote (else kept as bytes, so every frame re-encodes to itself); the encoder refuses the
combinations a decoder would not give back."""

from __future__ import annotations

import pytest

from cck.codec import (
    LIVE_FAILOVER_VOTE,
    PRIMARY_FAILOVER_VOTE,
    BackupRegistrationMessage,
    BackupRegistrationProblem,
    BackupReplicationStartFailedMessage,
    EncodeError,
    QuorumVoteMessage,
    QuorumVoteReplyMessage,
    ServerConnectVote,
    TransportConfiguration,
    TransportParam,
    TransportParamType,
    decode_frame,
    encode_packet,
)
from cck.codec._primitives import I32, N1, Bool, Str

from .vectors import artemis_bytes

NODE = "11111111-2222-3333-4444-555555555555"


def test_backup_registration_built_in_python_is_artemis_bytes() -> None:
    connector = TransportConfiguration(
        "netty",
        params=(TransportParam("host", TransportParamType.STRING, "localhost"),
                TransportParam("port", TransportParamType.INT, 61616)),
    )
    packet = BackupRegistrationMessage(
        cluster_user="ACTIVEMQ.CLUSTER.ADMIN.USER",
        cluster_password="CHANGE ME!!",
        backup_wants_fail_back=True,
        connector=connector,
    )
    frame = artemis_bytes("BACKUP_REGISTRATION/fail-back@136")
    assert encode_packet(packet, 3) == frame
    assert decode_frame(frame).packet == packet


@pytest.mark.parametrize("problem", list(BackupRegistrationProblem), ids=lambda p: p.name)
def test_registration_failed_codes_are_artemis_bytes(problem: BackupRegistrationProblem) -> None:
    frame = artemis_bytes(f"BACKUP_REGISTRATION_FAILED/{problem.name.lower().replace('_', '-')}@136")
    assert encode_packet(BackupReplicationStartFailedMessage(problem), 3) == frame
    assert decode_frame(frame).packet == BackupReplicationStartFailedMessage(int(problem))


def test_server_connect_vote_built_in_python_is_artemis_bytes() -> None:
    request = QuorumVoteMessage(PRIMARY_FAILOVER_VOTE, ServerConnectVote(vote=False, node_id=NODE))
    assert encode_packet(request, 3) == artemis_bytes("QUORUM_VOTE/primary-failover@136")
    reply = QuorumVoteReplyMessage(LIVE_FAILOVER_VOTE, ServerConnectVote(vote=True, node_id=NODE))
    assert encode_packet(reply, 3) == artemis_bytes("QUORUM_VOTE_REPLY/live-failover-not-found@136")
    found = decode_frame(artemis_bytes("QUORUM_VOTE_REPLY/primary-failover-found@136")).packet
    assert isinstance(found, QuorumVoteReplyMessage)
    assert found.vote is not None
    assert found.vote.transport_configuration is not None
    assert found.vote.transport_configuration.startswith("TransportConfiguration(name=netty")
    assert found.vote_bytes == b""


def test_other_handlers_keep_the_vote_bytes() -> None:
    frame = artemis_bytes("QUORUM_VOTE_REPLY/request-backup@136")
    packet = decode_frame(frame).packet
    assert isinstance(packet, QuorumVoteReplyMessage)
    assert packet.vote is None
    assert packet.vote_bytes == I32.build(1) + N1(Str).build(NODE) + Bool.build(True)
    assert encode_packet(packet, 3) == frame


@pytest.mark.parametrize(
    ("label", "vote_bytes"),
    [
        # Artemis 2.2.0 to 2.9.x (protocol 129/130): ServerConnectVote without the transport string.
        ("old-layout", Bool.build(True) + Str.build(NODE)),
        # Artemis's readBoolean takes any non-zero byte as true, but writes 0xFF: not this layout's own bytes.
        ("boolean-0x01", b"\x01" + Str.build(NODE) + b"\x00"),
        ("trailing-byte", Bool.build(True) + Str.build(NODE) + b"\x00\x00"),
        ("empty", b""),
    ],
)
def test_server_connect_handler_with_other_bytes_keeps_them(label: str, vote_bytes: bytes) -> None:
    packet = QuorumVoteMessage(LIVE_FAILOVER_VOTE, vote_bytes=vote_bytes)
    frame = encode_packet(packet, 3)
    assert decode_frame(frame).packet == packet
    assert encode_packet(decode_frame(frame).packet, 3) == frame


@pytest.mark.parametrize(
    ("packet", "message"),
    [
        (QuorumVoteMessage("RequestBackupQuorumVote", ServerConnectVote(True, NODE)), "travels under the handler"),
        (QuorumVoteMessage(PRIMARY_FAILOVER_VOTE, ServerConnectVote(True, NODE), b"\x00"), "not both"),
        (QuorumVoteReplyMessage(PRIMARY_FAILOVER_VOTE, None, Bool.build(True) + Str.build(NODE) + b"\x00"),
         "pass it as vote"),
    ],
    ids=["vote-under-other-handler", "vote-and-bytes", "vote-as-bytes"],
)
def test_encoder_refuses_what_would_decode_differently(packet: QuorumVoteMessage, message: str) -> None:
    with pytest.raises(EncodeError, match=message):
        encode_packet(packet, 3)
