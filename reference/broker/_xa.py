"""XA: the SESS_XA_* handlers (notes §13).

The branches themselves belong to :class:`~._transactions.Transactions` (one broker-wide map by
Xid); these handlers check each request against the protocol's rules and answer it.  Replies are
SESS_XA_RESP in the v1 layout; failures that are not XA errors (wrong commit phase, a rolled-back
transaction) are EXCEPTION packets, as Artemis sends them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from cck.codec import (
    ExceptionType,
    Packet,
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
    SessionXAResponseMessage,
    SessionXAResumeMessage,
    SessionXARollbackMessage,
    SessionXASetTimeoutMessage,
    SessionXASetTimeoutResponseMessage,
    SessionXAStartMessage,
    SessionXASuspend,
    Xid,
)

from ._errors import BrokerError
from ._session import Session, Transaction
from ._time import CoreTime
from ._transactions import TIMED_OUT, Transactions

__all__ = ["XA_ANSWERED", "XAHandlers"]

LOG = logging.getLogger("cck.reference.broker")

XA_OK = 0
XA_RBROLLBACK = 100
XA_RBTIMEOUT = 106
XAER_NOTA = -4
XAER_PROTO = -6
XAER_DUPID = -8

OK = SessionXAResponseMessage(False, XA_OK, None)

#: Every XA request is answered, except SESS_XA_FAILED (notes §13.1).
XA_ANSWERED = (
    SessionXAStartMessage, SessionXAJoinMessage, SessionXAResumeMessage, SessionXASuspend, SessionXAEndMessage,
    SessionXAPrepareMessage, SessionXACommitMessage, SessionXARollbackMessage, SessionXAForgetMessage,
    SessionXAGetInDoubtXids, SessionXASetTimeoutMessage, SessionXAGetTimeout,
)  # fmt: skip


def _error(code: int, message: str) -> SessionXAResponseMessage:
    return SessionXAResponseMessage(True, code, message)


class XAHandlers:
    """The SESS_XA_* requests; ``default_timeout_s``: the server-wide branch timeout (broker.xml)."""

    def __init__(self, transactions: Transactions, time: CoreTime, default_timeout_s: int) -> None:
        self._transactions = transactions
        self._time = time
        self._default_timeout_s = default_timeout_s

    def handlers(self) -> dict[type[Packet], Callable[[Session, Any], Packet | None]]:
        return {
            SessionXAStartMessage: self._start,
            SessionXAJoinMessage: self._join,
            SessionXAResumeMessage: self._resume,
            SessionXASuspend: self._suspend,
            SessionXAEndMessage: self._end,
            SessionXAPrepareMessage: self._prepare,
            SessionXACommitMessage: self._commit,
            SessionXARollbackMessage: self._rollback,
            SessionXAForgetMessage: self._forget,
            SessionXAGetInDoubtXids: self._in_doubt,
            SessionXASetTimeoutMessage: self._set_timeout,
            SessionXAGetTimeout: self._get_timeout,
            SessionXAAfterFailedMessage: self._failed,
        }

    # ---------------------------------------------------------------- association

    def _start(self, session: Session, packet: SessionXAStartMessage) -> Packet:
        current = session.tx
        if current.xid is not None and current.state != "PREPARED":
            LOG.warning("XA start while another branch is associated; rolling it back",
                        extra={"session": session.name})
            self._transactions.abandon(current)
        if packet.xid in self._transactions.branches:
            return _error(XAER_DUPID, f"AMQ229094: xid {packet.xid} already exists")
        session.tx = self._transactions.begin(packet.xid, session.xa_timeout_s, self._time.ms)
        return OK

    def _join(self, session: Session, packet: SessionXAJoinMessage) -> Packet:
        tx = self._transactions.branches.get(packet.xid)
        if tx is None:
            return _error(XAER_NOTA, f"AMQ229062: Cannot find xid in resource manager: {packet.xid}")
        session.tx = tx
        return OK

    def _resume(self, session: Session, packet: SessionXAResumeMessage) -> Packet:
        tx = self._transactions.branches.get(packet.xid)
        if tx is None:
            return _error(XAER_NOTA, f"AMQ229062: Cannot find xid in resource manager: {packet.xid}")
        if tx.state != "SUSPENDED":
            return _error(XAER_PROTO, "AMQ229065: Cannot resume, transaction is not suspended")
        tx.state = "ACTIVE"
        session.tx = tx
        return OK

    def _suspend(self, session: Session, packet: SessionXASuspend) -> Packet:
        if session.tx.xid is None:
            return _error(XAER_PROTO, "AMQ229066: Cannot suspend, session is not doing work in a transaction")
        session.tx.state = "SUSPENDED"
        session.tx = Transaction()
        return OK

    def _end(self, session: Session, packet: SessionXAEndMessage) -> Packet:
        tx = self._transactions.branches.get(packet.xid)
        if tx is None:
            return _error(XAER_NOTA, f"AMQ229062: Cannot find xid in resource manager: {packet.xid}")
        if session.tx is not tx and tx.state != "SUSPENDED":
            return _error(XAER_PROTO, f"AMQ229067: xid {packet.xid} is not associated with this session")
        if session.tx is tx:
            session.tx = Transaction()
        if tx.state == "SUSPENDED":
            tx.state = "ACTIVE"
        if tx.rollback_only == TIMED_OUT:
            return _error(XA_RBTIMEOUT, TIMED_OUT)
        if packet.failed:
            tx.rollback_only = "the branch ended with TMFAIL"
        return OK

    # ---------------------------------------------------------------- completion

    def _owned(self, session: Session, xid: Xid) -> Transaction | Packet:
        tx = self._transactions.branches.get(xid)
        if tx is None:
            return _error(XAER_NOTA, f"AMQ229062: Cannot find xid in resource manager: {xid}")
        if session.tx is tx:
            return _error(XAER_PROTO, f"AMQ229067: xid {xid} is still associated with this session")
        return tx

    def _prepare(self, session: Session, packet: SessionXAPrepareMessage) -> Packet:
        found = self._owned(session, packet.xid)
        if not isinstance(found, Transaction):
            return found
        tx = found
        if tx.state == "PREPARED":
            return OK
        if tx.refused is not None:
            self._transactions.abandon(tx)
            raise tx.refused
        if tx.rollback_only:
            self._transactions.abandon(tx)
            return _error(XA_RBROLLBACK, tx.rollback_only)
        self._transactions.prepare(tx)
        return OK

    def _commit(self, session: Session, packet: SessionXACommitMessage) -> Packet:
        found = self._owned(session, packet.xid)
        if not isinstance(found, Transaction):
            return found
        tx = found
        if packet.one_phase and tx.state == "PREPARED":
            raise BrokerError(ExceptionType.ILLEGAL_STATE, "AMQ229228: one-phase commit of a prepared transaction")
        if not packet.one_phase and tx.state != "PREPARED":
            raise BrokerError(ExceptionType.ILLEGAL_STATE,
                              "AMQ229228: two-phase commit of a transaction that was not prepared")
        if tx.refused is not None:
            self._transactions.abandon(tx)
            raise tx.refused
        if tx.rollback_only:
            reason = tx.rollback_only
            self._transactions.abandon(tx)
            raise BrokerError(ExceptionType.TRANSACTION_ROLLED_BACK, reason)
        self._transactions.commit(tx)
        return OK

    def _rollback(self, session: Session, packet: SessionXARollbackMessage) -> Packet:
        tx = self._transactions.branches.get(packet.xid)
        if tx is None:
            # Artemis also rolls back the session's current work here.
            self._transactions.rollback_work(session, cancel_deliveries=False)
            return _error(XAER_NOTA, f"AMQ229062: Cannot find xid in resource manager: {packet.xid}")
        if session.tx is tx:
            return _error(XAER_PROTO, f"AMQ229067: xid {packet.xid} is still associated with this session")
        self._transactions.abandon(tx)
        return OK

    def _forget(self, session: Session, packet: SessionXAForgetMessage) -> Packet:
        # No heuristic completions are ever made, so there is nothing to forget.
        return _error(XAER_NOTA, f"AMQ229062: Cannot find xid in resource manager: {packet.xid}")

    def _in_doubt(self, session: Session, packet: SessionXAGetInDoubtXids) -> Packet:
        return SessionXAGetInDoubtXidsResponseMessage(self._transactions.in_doubt())

    def _set_timeout(self, session: Session, packet: SessionXASetTimeoutMessage) -> Packet:
        session.xa_timeout_s = packet.timeout_seconds
        if session.tx.xid is not None:
            session.tx.timeout_s = packet.timeout_seconds
        return SessionXASetTimeoutResponseMessage(True)

    def _get_timeout(self, session: Session, packet: SessionXAGetTimeout) -> Packet:
        # The server-wide default, not what this session set (notes §13.3).
        return SessionXAGetTimeoutResponseMessage(self._default_timeout_s)

    def _failed(self, session: Session, packet: SessionXAAfterFailedMessage) -> Packet | None:
        tx = self._transactions.branches.get(packet.xid)
        if tx is not None:
            tx.rollback_only = "AMQ229228: the client failed over during this transaction"
        return None
