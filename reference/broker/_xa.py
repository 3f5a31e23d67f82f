"""XA: the resource manager and the SESS_XA_* handlers (notes §13).

Transactions are kept by Xid in one broker-wide map, so any session can
commit or roll back a prepared branch (that is how recovery works).  Replies
are SESS_XA_RESP in the v1 layout; failures that are not XA errors (wrong
commit phase, a rolled-back transaction) are EXCEPTION packets, as Artemis
sends them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from codec import (
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

if TYPE_CHECKING:
    from ._session_handlers import SessionHandlers

__all__ = ["XA_ANSWERED", "XAHandlers"]

LOG = logging.getLogger("reference.broker")

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
TIMED_OUT = "AMQ229229: transaction timed out"


def _error(code: int, message: str) -> SessionXAResponseMessage:
    return SessionXAResponseMessage(True, code, message)


class XAHandlers:
    def __init__(self, sessions: SessionHandlers) -> None:
        self.sessions = sessions
        self.transactions: dict[Xid, Transaction] = {}

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
            self._abandon(current)
        if packet.xid in self.transactions:
            return _error(XAER_DUPID, f"AMQ229094: xid {packet.xid} already exists")
        tx = Transaction(xid=packet.xid, timeout_s=session.xa_timeout_s, started_at=self.sessions.core.now)
        self.transactions[packet.xid] = tx
        session.tx = tx
        return OK

    def _join(self, session: Session, packet: SessionXAJoinMessage) -> Packet:
        tx = self.transactions.get(packet.xid)
        if tx is None:
            return _error(XAER_NOTA, f"AMQ229062: Cannot find xid in resource manager: {packet.xid}")
        session.tx = tx
        return OK

    def _resume(self, session: Session, packet: SessionXAResumeMessage) -> Packet:
        tx = self.transactions.get(packet.xid)
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
        tx = self.transactions.get(packet.xid)
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
        tx = self.transactions.get(xid)
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
        if tx.rollback_only:
            self._abandon(tx)
            return _error(XA_RBROLLBACK, tx.rollback_only)
        self.prepare_transaction(tx)
        return OK

    def prepare_transaction(self, tx: Transaction) -> None:
        """Record the branch's durable effects and its prepare in one journal transaction."""
        assert tx.xid is not None
        sessions = self.sessions
        tx.journal_tx = tx.journal_tx or sessions.post_office.next_id()
        storage = sessions.core.storage
        for message, address in tx.sends:
            message, queues = sessions.resolve(message, address)
            tx.routes.append((message, queues))
            durable = [q for q in queues if q.durable] if message.durable else []
            if durable:
                storage.message_routed(message, durable, tx.journal_tx)
                ids = storage.take_ref_ids(message.message_id)
                tx.ref_ids.update(zip(((message.message_id, q.name) for q in durable), ids, strict=False))
        for ref in tx.acks:
            if ref.durable:
                storage.ref_acked(ref, tx.journal_tx)
        storage.tx_prepare(tx.journal_tx, tx.xid)
        tx.state = "PREPARED"

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
        if tx.rollback_only:
            reason = tx.rollback_only
            self._abandon(tx)
            raise BrokerError(ExceptionType.TRANSACTION_ROLLED_BACK, reason)
        self.commit(tx)
        return OK

    def commit(self, tx: Transaction) -> None:
        if tx.xid is not None:
            self.transactions.pop(tx.xid, None)
        if tx.state == "PREPARED":
            # The journal already holds the records: only the commit marker is new.
            self.sessions.core.storage.tx_commit(tx.journal_tx)
            self._apply(tx)
        else:
            self.sessions.commit_transaction(tx)

    def _apply(self, tx: Transaction) -> None:
        sessions = self.sessions
        for message, queues in tx.routes:
            live = [q for q in queues if q.name in sessions.post_office.queues]
            sessions.enqueue(message, live, None, tx.ref_ids)

    def _rollback(self, session: Session, packet: SessionXARollbackMessage) -> Packet:
        tx = self.transactions.get(packet.xid)
        if tx is None:
            # Artemis also rolls back the session's current work here.
            self.sessions.rollback_work(session, cancel_deliveries=False)
            return _error(XAER_NOTA, f"AMQ229062: Cannot find xid in resource manager: {packet.xid}")
        if session.tx is tx:
            return _error(XAER_PROTO, f"AMQ229067: xid {packet.xid} is still associated with this session")
        self._abandon(tx)
        return OK

    def _abandon(self, tx: Transaction) -> None:
        """Roll a branch back: acknowledged messages return, sends are dropped."""
        if tx.xid is not None:
            self.transactions.pop(tx.xid, None)
        if tx.state == "PREPARED":
            self.sessions.core.storage.tx_rollback(tx.journal_tx)
        self.sessions.return_refs(list(tx.acks))
        tx.acks.clear()
        tx.sends.clear()
        tx.routes.clear()

    def _forget(self, session: Session, packet: SessionXAForgetMessage) -> Packet:
        # No heuristic completions are ever made, so there is nothing to forget.
        return _error(XAER_NOTA, f"AMQ229062: Cannot find xid in resource manager: {packet.xid}")

    def _in_doubt(self, session: Session, packet: SessionXAGetInDoubtXids) -> Packet:
        prepared = tuple(xid for xid, tx in self.transactions.items() if tx.state == "PREPARED")
        return SessionXAGetInDoubtXidsResponseMessage(prepared)

    def _set_timeout(self, session: Session, packet: SessionXASetTimeoutMessage) -> Packet:
        session.xa_timeout_s = packet.timeout_seconds
        if session.tx.xid is not None:
            session.tx.timeout_s = packet.timeout_seconds
        return SessionXASetTimeoutResponseMessage(True)

    def _get_timeout(self, session: Session, packet: SessionXAGetTimeout) -> Packet:
        # The server-wide default, not what this session set (notes §13.3).
        return SessionXAGetTimeoutResponseMessage(self.sessions.core.settings.transaction_timeout_s)

    def _failed(self, session: Session, packet: SessionXAAfterFailedMessage) -> Packet | None:
        tx = self.transactions.get(packet.xid)
        if tx is not None:
            tx.rollback_only = "AMQ229228: the client failed over during this transaction"
        return None

    # ---------------------------------------------------------------- housekeeping

    def session_gone(self, session: Session) -> None:
        tx = session.tx
        if tx.xid is not None and tx.state != "PREPARED":
            self._abandon(tx)
        session.tx = Transaction()

    def scan_timeouts(self, now: float) -> None:
        for tx in list(self.transactions.values()):
            expired = tx.state != "PREPARED" and tx.timeout_s > 0 and now - tx.started_at > tx.timeout_s
            if expired and not tx.rollback_only:
                LOG.info("XA transaction timed out", extra={"xid": repr(tx.xid)})
                tx.rollback_only = TIMED_OUT
                self.sessions.return_refs(list(tx.acks))
                tx.acks.clear()
                tx.sends.clear()

    def restore_prepared(self, xid: Xid, tx: Transaction) -> None:
        """After a restart: a prepared branch from the journal."""
        tx.state = "PREPARED"
        self.transactions[xid] = tx
