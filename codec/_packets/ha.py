"""High availability between brokers, on channel 3 (``CLUSTER``): a backup registering with its primary, the
primary's refusal, and the quorum votes a backup asks for before it takes over.

The layouts are the same at every protocol version 121..136 (Artemis 2.0.0 to 2.44.0 write the same
``encodeRest``); version 136 (2.37.0) changed only which handler name a voter tries first, not the bytes.  What a
vote's bytes hold depends on its handler name, see :class:`QuorumVoteMessage`.
"""

from __future__ import annotations

from dataclasses import dataclass
from io import BytesIO
from typing import Any

from construct import Construct, ConstructError, Struct

from .._constants import BackupRegistrationProblem, PacketType
from .._format import DataclassAdapter
from .._primitives import I32, N1, Bool, FieldError, Rest, SimpleStr, Str, remaining
from .._structures import TRANSPORT_CONFIGURATION, TransportConfiguration
from ._base import Packet

__all__ = [
    "LIVE_FAILOVER_VOTE",
    "PRIMARY_FAILOVER_VOTE",
    "SERVER_CONNECT_VOTE",
    "SERVER_CONNECT_VOTE_HANDLERS",
    "BackupRegistrationMessage",
    "BackupReplicationStartFailedMessage",
    "QuorumVoteMessage",
    "QuorumVoteReplyMessage",
    "ServerConnectVote",
]


@dataclass(frozen=True, slots=True)
class BackupRegistrationMessage(Packet):
    """BACKUP_REGISTRATION (channel 3, backup to primary): a replicating backup asks its primary to replicate to it,
    with the cluster credentials, whether it means to fail back (give the primary role back) and the connector the
    primary reaches it through (not nullable)."""

    TYPE = PacketType.BACKUP_REGISTRATION
    FORMAT = Struct(
        "cluster_user" / Str,
        "cluster_password" / Str,
        "backup_wants_fail_back" / Bool,
        "connector" / TRANSPORT_CONFIGURATION,
    )

    cluster_user: str
    cluster_password: str
    backup_wants_fail_back: bool
    connector: TransportConfiguration


@dataclass(frozen=True, slots=True)
class BackupReplicationStartFailedMessage(Packet):
    """BACKUP_REGISTRATION_FAILED (channel 3, primary to backup): the primary will not replicate to the backup.

    ``problem`` is a :class:`BackupRegistrationProblem` code; Artemis's decoder turns a code it does not know into
    ``null``, the codec keeps the int.
    """

    TYPE = PacketType.BACKUP_REGISTRATION_FAILED
    FORMAT = Struct("problem" / I32)

    problem: int = BackupRegistrationProblem.EXCEPTION


# ------------------------------------------------------------------------------------------------ quorum votes

#: The server-connect vote's handler name from Artemis 2.2.0 up to 2.36.x (``QuorumVoteServerConnect``); 2.37.0 and
#: later still answer it, under the same name.
LIVE_FAILOVER_VOTE = "LiveFailoverQuorumVote"
#: Its name from Artemis 2.37.0 on (protocol 136).
PRIMARY_FAILOVER_VOTE = "PrimaryFailoverQuorumVote"
#: The handler names whose vote is a :class:`ServerConnectVote`.
SERVER_CONNECT_VOTE_HANDLERS = frozenset({LIVE_FAILOVER_VOTE, PRIMARY_FAILOVER_VOTE})


@dataclass(frozen=True, slots=True)
class ServerConnectVote:
    """Artemis's ``ServerConnectVote``: a backup asks whether the primary ``node_id`` is still in a voter's topology.

    In a request ``vote`` says whether the asker wants to stay active; in a reply, the voter's answer.  A voter that
    still sees the node puts its connector's ``TransportConfiguration.toString()`` in ``transport_configuration``
    (free text, not the structure); otherwise it is ``None``.
    """

    vote: bool
    node_id: str
    transport_configuration: str | None = None


SERVER_CONNECT_VOTE = DataclassAdapter(
    ServerConnectVote,
    # BooleanVote's writeBoolean, then writeString and writeNullableString.
    Struct("vote" / Bool, "node_id" / Str, "transport_configuration" / N1(Str)),
)


def _server_connect_vote(handler: Any, data: bytes) -> ServerConnectVote | None:
    """``data`` as a :class:`ServerConnectVote` when ``handler`` names one and the bytes are exactly that vote as
    Artemis writes it (re-encoding gives them back), else ``None``."""
    if handler not in SERVER_CONNECT_VOTE_HANDLERS:
        return None
    stream = BytesIO(data)
    try:
        vote = SERVER_CONNECT_VOTE.parse_stream(stream)
        if remaining(stream) or SERVER_CONNECT_VOTE.build(vote) != data:
            return None
    except (ConstructError, ValueError):
        return None
    return vote if isinstance(vote, ServerConnectVote) else None


class _TypedVote(Construct):  # type: ignore[misc]
    """The vote, typed: a :class:`ServerConnectVote` when the handler names one and every byte left is that vote;
    otherwise ``None`` and nothing is consumed, so that ``vote_bytes`` takes the bytes."""

    def _parse(self, stream: BytesIO, context: Any, path: str) -> ServerConnectVote | None:
        at = stream.tell()
        vote = _server_connect_vote(context.handler, stream.read())
        if vote is None:
            stream.seek(at)
        return vote

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if obj is None:
            return None
        if context.handler not in SERVER_CONNECT_VOTE_HANDLERS:
            raise FieldError(
                f"a ServerConnectVote travels under the handler {LIVE_FAILOVER_VOTE!r} or {PRIMARY_FAILOVER_VOTE!r}, "
                f"not {context.handler!r} (put other votes in vote_bytes)",
                path=path,
                offset=None,
            )
        if context.vote_bytes:
            raise FieldError("a packet carries vote or vote_bytes, not both", path=path, offset=None)
        return SERVER_CONNECT_VOTE._build(obj, stream, context, path)


class _VoteBytes(Construct):  # type: ignore[misc]
    """The vote's bytes when it is not a typed :class:`ServerConnectVote`: every byte left, kept as they are."""

    def _parse(self, stream: BytesIO, context: Any, path: str) -> bytes:
        data: bytes = Rest()._parsereport(stream, context, path)
        return data

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        data = bytes(obj)
        if context.vote is None and _server_connect_vote(context.handler, data) is not None:
            # Decoding would give them back as ``vote``: one packet, one form.
            raise FieldError(
                f"these bytes are a ServerConnectVote under {context.handler!r}: pass it as vote",
                path=path,
                offset=None,
            )
        stream.write(data)
        return data


# The vote's layout depends on the handler, and Artemis's own decoder does not know it either: QuorumVoteMessage
# keeps the bytes after the handler until the QuorumVoteHandler registered under that name decodes them.  Artemis
# has two such layouts: the server-connect vote (a backup asking whether its primary is gone, the one every
# replicating pair uses) and the colocated RequestBackupVote (i32 backups, nullable node ID, boolean), whose class
# is private to ColocatedActivation.  So the packet carries the server-connect vote typed, because that is the one
# callers read and write, and every other vote as its bytes, so that nothing is lost and a decoded packet encodes to
# the same bytes.  Exactly one of the two is in use: ``vote`` is None whenever ``vote_bytes`` holds the vote
# (including a server-connect handler whose bytes are not that layout, e.g. the shorter vote Artemis 2.2.0 to 2.9.x
# wrote, without the transport string, at the same protocol version 130 as 2.10.0, which added it).
_QUORUM_VOTE_FORMAT = Struct(
    "handler" / SimpleStr,
    "vote" / _TypedVote(),
    "vote_bytes" / _VoteBytes(),
)


@dataclass(frozen=True, slots=True)
class QuorumVoteMessage(Packet):
    """QUORUM_VOTE (channel 3, broker to broker): a vote request to the ``QuorumVoteHandler`` named ``handler``.

    ``vote`` is the :class:`ServerConnectVote` when the handler is :data:`PRIMARY_FAILOVER_VOTE` or
    :data:`LIVE_FAILOVER_VOTE` (then ``vote_bytes`` is empty); for any other handler, or bytes that are not that
    layout, ``vote`` is ``None`` and ``vote_bytes`` holds the vote as it came.
    """

    TYPE = PacketType.QUORUM_VOTE
    FORMAT = _QUORUM_VOTE_FORMAT

    handler: str
    vote: ServerConnectVote | None = None
    vote_bytes: bytes = b""


@dataclass(frozen=True, slots=True)
class QuorumVoteReplyMessage(Packet):
    """QUORUM_VOTE_REPLY (channel 3): the voter's answer, under the handler name the request used, laid out like
    :class:`QuorumVoteMessage`."""

    TYPE = PacketType.QUORUM_VOTE_REPLY
    IS_RESPONSE = True
    FORMAT = _QUORUM_VOTE_FORMAT

    handler: str
    vote: ServerConnectVote | None = None
    vote_bytes: bytes = b""
