"""Session creation and reattachment (channel 1), session lifecycle, metadata and
local transactions (notes §5.2)."""

from __future__ import annotations

from dataclasses import dataclass

from construct import Struct

from .._constants import PacketType
from .._format import Trailing
from .._primitives import I32, I64, N1, Bool, Str
from ._base import Packet, extend


@dataclass(frozen=True, slots=True)
class CreateSessionMessage(Packet):
    """CREATESESSION (channel 1).  Note ``confirmation_window_size`` precedes
    ``pre_acknowledge`` on the wire."""

    TYPE = PacketType.CREATESESSION
    CONFIRMABLE = False
    FORMAT = Struct(
        "name" / Str,
        "session_channel_id" / I64,
        "version" / I32,
        "username" / N1(Str),
        "password" / N1(Str),
        "min_large_message_size" / I32,
        "xa" / Bool,
        "auto_commit_sends" / Bool,
        "auto_commit_acks" / Bool,
        "confirmation_window_size" / I32,
        "pre_acknowledge" / Bool,
        "default_address" / N1(Str),
    )

    name: str
    session_channel_id: int
    version: int = 136
    username: str | None = None
    password: str | None = None
    min_large_message_size: int = 102400
    xa: bool = False
    auto_commit_sends: bool = True
    auto_commit_acks: bool = True
    confirmation_window_size: int = -1
    pre_acknowledge: bool = False
    default_address: str | None = None


@dataclass(frozen=True, slots=True)
class CreateSessionMessage_V2(Packet):
    """CREATESESSION_V2 (version >= 131): adds the JMS client ID."""

    TYPE = PacketType.CREATESESSION_V2
    CONFIRMABLE = False
    FORMAT = extend(CreateSessionMessage, "client_id" / N1(Str))

    name: str
    session_channel_id: int
    version: int = 136
    username: str | None = None
    password: str | None = None
    min_large_message_size: int = 102400
    xa: bool = False
    auto_commit_sends: bool = True
    auto_commit_acks: bool = True
    confirmation_window_size: int = -1
    pre_acknowledge: bool = False
    default_address: str | None = None
    client_id: str | None = None


@dataclass(frozen=True, slots=True)
class CreateSessionResponseMessage(Packet):
    """CREATESESSION_RESP: the server's protocol version, which the client adopts."""

    TYPE = PacketType.CREATESESSION_RESP
    CONFIRMABLE = False
    IS_RESPONSE = True
    FORMAT = Struct("server_version" / I32)

    server_version: int = 136


@dataclass(frozen=True, slots=True)
class ReattachSessionMessage(Packet):
    """REATTACH_SESSION: find session ``name``; the client has processed server
    commands up to ``last_confirmed_command_id``."""

    TYPE = PacketType.REATTACH_SESSION
    CONFIRMABLE = False
    FORMAT = Struct("name" / Str, "last_confirmed_command_id" / I32)

    name: str
    last_confirmed_command_id: int = -1


@dataclass(frozen=True, slots=True)
class ReattachSessionResponseMessage(Packet):
    """REATTACH_SESSION_RESP: the server's last processed client command, and
    whether the session was found."""

    TYPE = PacketType.REATTACH_SESSION_RESP
    CONFIRMABLE = False
    IS_RESPONSE = True
    FORMAT = Struct("last_confirmed_command_id" / I32, "reattached" / Bool)

    last_confirmed_command_id: int
    reattached: bool


@dataclass(frozen=True, slots=True)
class SessionStart(Packet):
    """SESS_START: begin delivering to consumers (no reply).  Artemis sends it as a
    bare ``PacketImpl``."""

    TYPE = PacketType.SESS_START
    FORMAT = Struct()


@dataclass(frozen=True, slots=True)
class SessionStop(Packet):
    """SESS_STOP: stop delivering (NULL_RESPONSE).  A bare ``PacketImpl`` in Artemis."""

    TYPE = PacketType.SESS_STOP
    FORMAT = Struct()


@dataclass(frozen=True, slots=True)
class SessionCloseMessage(Packet):
    """SESS_CLOSE: close the session (NULL_RESPONSE, then the channel goes)."""

    TYPE = PacketType.SESS_CLOSE
    FORMAT = Struct()


@dataclass(frozen=True, slots=True)
class SessionAddMetaDataMessage(Packet):
    """SESS_ADD_METADATA (v1): never counted by the confirmation window."""

    TYPE = PacketType.SESS_ADD_METADATA
    CONFIRMABLE = False
    FORMAT = Struct("key" / Str, "data" / Str)

    key: str
    data: str


@dataclass(frozen=True, slots=True)
class SessionAddMetaDataMessageV2(Packet):
    """SESS_ADD_METADATA2: confirmable (and answered) only when ``requires_confirmation``."""

    TYPE = PacketType.SESS_ADD_METADATA2
    FORMAT = Struct("key" / Str, "data" / Str, "requires_confirmation" / Bool)

    key: str
    data: str
    requires_confirmation: bool = True

    def requires_confirmations(self) -> bool:
        return self.requires_confirmation


@dataclass(frozen=True, slots=True)
class SessionUniqueAddMetaDataMessage(Packet):
    """SESS_UNIQUE_ADD_METADATA: like ADD_METADATA2, refused (DUPLICATE_METADATA)
    when another session already holds the key/value."""

    TYPE = PacketType.SESS_UNIQUE_ADD_METADATA
    FORMAT = Struct("key" / Str, "data" / Str, "requires_confirmation" / Bool)

    key: str
    data: str
    requires_confirmation: bool = True

    def requires_confirmations(self) -> bool:
        return self.requires_confirmation


@dataclass(frozen=True, slots=True)
class SessionCommitMessage(Packet):
    """SESS_COMMIT: empty in v1; V2 (version >= 132) carries a correlation ID."""

    TYPE = PacketType.SESS_COMMIT
    FORMAT = Struct("correlation_id" / Trailing(I64))

    correlation_id: int | None = None


@dataclass(frozen=True, slots=True)
class RollbackMessage(Packet):
    """SESS_ROLLBACK."""

    TYPE = PacketType.SESS_ROLLBACK
    FORMAT = Struct("consider_last_message_as_delivered" / Bool)

    consider_last_message_as_delivered: bool = False
