"""XA transactions (notes §5.2 "XA", §13)."""

from __future__ import annotations

from dataclasses import dataclass

from construct import Struct

from .._constants import PacketType
from .._format import Trailing
from .._primitives import I32, I64, N1, Bool, Counted, Str
from .._structures import XID, Xid
from ._base import Packet

_XID_ONLY = Struct("xid" / XID)


@dataclass(frozen=True, slots=True)
class SessionXAStartMessage(Packet):
    """SESS_XA_START (``start(xid, TMNOFLAGS)``)."""

    TYPE = PacketType.SESS_XA_START
    FORMAT = _XID_ONLY

    xid: Xid


@dataclass(frozen=True, slots=True)
class SessionXAEndMessage(Packet):
    """SESS_XA_END: ``failed`` is TMFAIL, else TMSUCCESS."""

    TYPE = PacketType.SESS_XA_END
    FORMAT = Struct("xid" / XID, "failed" / Bool)

    xid: Xid
    failed: bool = False


@dataclass(frozen=True, slots=True)
class SessionXACommitMessage(Packet):
    """SESS_XA_COMMIT, one- or two-phase."""

    TYPE = PacketType.SESS_XA_COMMIT
    FORMAT = Struct("xid" / XID, "one_phase" / Bool)

    xid: Xid
    one_phase: bool = False


@dataclass(frozen=True, slots=True)
class SessionXAPrepareMessage(Packet):
    """SESS_XA_PREPARE."""

    TYPE = PacketType.SESS_XA_PREPARE
    FORMAT = _XID_ONLY

    xid: Xid


@dataclass(frozen=True, slots=True)
class SessionXAResponseMessage(Packet):
    """SESS_XA_RESP: ``response_code`` is an XA code (0 = XA_OK).  Servers send the
    v1 layout; the V2 layout appends a correlation ID."""

    TYPE = PacketType.SESS_XA_RESP
    IS_RESPONSE = True
    FORMAT = Struct(
        "error" / Bool,
        "response_code" / I32,
        "message" / N1(Str),
        "correlation_id" / Trailing(I64),
    )

    error: bool = False
    response_code: int = 0
    message: str | None = None
    correlation_id: int | None = None


@dataclass(frozen=True, slots=True)
class SessionXARollbackMessage(Packet):
    """SESS_XA_ROLLBACK."""

    TYPE = PacketType.SESS_XA_ROLLBACK
    FORMAT = _XID_ONLY

    xid: Xid


@dataclass(frozen=True, slots=True)
class SessionXAJoinMessage(Packet):
    """SESS_XA_JOIN (``start(xid, TMJOIN)``)."""

    TYPE = PacketType.SESS_XA_JOIN
    FORMAT = _XID_ONLY

    xid: Xid


@dataclass(frozen=True, slots=True)
class SessionXASuspend(Packet):
    """SESS_XA_SUSPEND (``end(xid, TMSUSPEND)``); a bare ``PacketImpl`` in Artemis."""

    TYPE = PacketType.SESS_XA_SUSPEND
    FORMAT = Struct()


@dataclass(frozen=True, slots=True)
class SessionXAResumeMessage(Packet):
    """SESS_XA_RESUME (``start(xid, TMRESUME)``)."""

    TYPE = PacketType.SESS_XA_RESUME
    FORMAT = _XID_ONLY

    xid: Xid


@dataclass(frozen=True, slots=True)
class SessionXAForgetMessage(Packet):
    """SESS_XA_FORGET."""

    TYPE = PacketType.SESS_XA_FORGET
    FORMAT = _XID_ONLY

    xid: Xid


@dataclass(frozen=True, slots=True)
class SessionXAGetInDoubtXids(Packet):
    """SESS_XA_INDOUBT_XIDS (``recover``); a bare ``PacketImpl`` in Artemis."""

    TYPE = PacketType.SESS_XA_INDOUBT_XIDS
    FORMAT = Struct()


@dataclass(frozen=True, slots=True)
class SessionXAGetInDoubtXidsResponseMessage(Packet):
    """SESS_XA_INDOUBT_XIDS_RESP: prepared and heuristically completed xids."""

    TYPE = PacketType.SESS_XA_INDOUBT_XIDS_RESP
    IS_RESPONSE = True
    FORMAT = Struct("xids" / Counted(XID, 12))

    xids: tuple[Xid, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionXASetTimeoutMessage(Packet):
    """SESS_XA_SET_TIMEOUT."""

    TYPE = PacketType.SESS_XA_SET_TIMEOUT
    FORMAT = Struct("timeout_seconds" / I32)

    timeout_seconds: int


@dataclass(frozen=True, slots=True)
class SessionXASetTimeoutResponseMessage(Packet):
    """SESS_XA_SET_TIMEOUT_RESP (a server always says true)."""

    TYPE = PacketType.SESS_XA_SET_TIMEOUT_RESP
    IS_RESPONSE = True
    FORMAT = Struct("ok" / Bool)

    ok: bool = True


@dataclass(frozen=True, slots=True)
class SessionXAGetTimeout(Packet):
    """SESS_XA_GET_TIMEOUT; a bare ``PacketImpl`` in Artemis."""

    TYPE = PacketType.SESS_XA_GET_TIMEOUT
    FORMAT = Struct()


@dataclass(frozen=True, slots=True)
class SessionXAGetTimeoutResponseMessage(Packet):
    """SESS_XA_GET_TIMEOUT_RESP: the server-wide default, not the session's value."""

    TYPE = PacketType.SESS_XA_GET_TIMEOUT_RESP
    IS_RESPONSE = True
    FORMAT = Struct("timeout_seconds" / I32)

    timeout_seconds: int


@dataclass(frozen=True, slots=True)
class SessionXAAfterFailedMessage(Packet):
    """SESS_XA_FAILED: after a failed reattach, mark the xid rollback-only (no reply)."""

    TYPE = PacketType.SESS_XA_FAILED
    FORMAT = _XID_ONLY

    xid: Xid
