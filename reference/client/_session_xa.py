"""A session's XA requests (notes §13), sans-IO: each writes one packet and returns the call its
SESS_XA_RESP (or the timeout and in-doubt answers) resolves.  The session remembers the branch it is
associated with (``active_xid``): a recreated session reports it failed (``SESS_XA_FAILED``)."""

from __future__ import annotations

from cck.codec import (
    SessionXAAfterFailedMessage,
    SessionXACommitMessage,
    SessionXAEndMessage,
    SessionXAForgetMessage,
    SessionXAGetInDoubtXids,
    SessionXAGetInDoubtXidsResponseMessage,
    SessionXAGetTimeout,
    SessionXAGetTimeoutResponseMessage,
    SessionXAJoinMessage,
    SessionXAPrepareMessage,
    SessionXAResumeMessage,
    SessionXARollbackMessage,
    SessionXASetTimeoutMessage,
    SessionXASetTimeoutResponseMessage,
    SessionXAStartMessage,
    SessionXASuspend,
    Xid,
)

from ._calls import Call
from ._session_channel import XA, SessionChannel

__all__ = ["XARequests"]


class XARequests(SessionChannel):
    """The XA verbs of a session."""

    def xa_start(self, xid: Xid) -> Call:
        self.active_xid = xid
        return self._call(SessionXAStartMessage(xid), XA)

    def xa_join(self, xid: Xid) -> Call:
        self.active_xid = xid
        return self._call(SessionXAJoinMessage(xid), XA)

    def xa_resume(self, xid: Xid) -> Call:
        self.active_xid = xid
        return self._call(SessionXAResumeMessage(xid), XA)

    def xa_end(self, xid: Xid, *, failed: bool = False) -> Call:
        self.active_xid = None
        return self._call(SessionXAEndMessage(xid, failed), XA)

    def xa_suspend(self) -> Call:
        self.active_xid = None
        return self._call(SessionXASuspend(), XA)

    def xa_prepare(self, xid: Xid) -> Call:
        return self._call(SessionXAPrepareMessage(xid), XA)

    def xa_commit(self, xid: Xid, *, one_phase: bool = False) -> Call:
        return self._call(SessionXACommitMessage(xid, one_phase), XA)

    def xa_rollback(self, xid: Xid) -> Call:
        for consumer in self.consumers.values():
            consumer.clear()
        return self._call(SessionXARollbackMessage(xid), XA)

    def xa_forget(self, xid: Xid) -> Call:
        return self._call(SessionXAForgetMessage(xid), XA)

    def xa_recover(self) -> Call:
        return self._call(SessionXAGetInDoubtXids(), (SessionXAGetInDoubtXidsResponseMessage,))

    def xa_set_timeout(self, seconds: int) -> Call:
        return self._call(SessionXASetTimeoutMessage(seconds), (SessionXASetTimeoutResponseMessage,))

    def xa_get_timeout(self) -> Call:
        return self._call(SessionXAGetTimeout(), (SessionXAGetTimeoutResponseMessage,))

    def xa_failed(self, xid: Xid) -> None:
        """SESS_XA_FAILED: no answer; the broker marks the branch rollback-only."""
        self.write(SessionXAAfterFailedMessage(xid))
