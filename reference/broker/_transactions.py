"""Transactions: local commit and rollback, and the XA resource manager (branches by Xid, prepare,
two-phase commit, timeouts, prepared branches recovered from the journal) (notes §13).

Rules of this module:
* A transaction's sends are routed only at commit (or at prepare, where the routes are decided and
  stored, then applied at commit); its acknowledged refs leave their queue at commit and go back
  for redelivery at rollback.
* XA branches are kept broker-wide by Xid, so any session can complete a prepared branch (that is
  how recovery works).
"""

from __future__ import annotations

import logging

from cck.codec import Xid

from ._duplicates import DuplicateIds, duplicate_id_of
from ._engine import DeliveryEngine
from ._model import PostOffice
from ._session import Session, Transaction
from ._storage import Storage

__all__ = ["TIMED_OUT", "Transactions"]

LOG = logging.getLogger("cck.reference.broker")

TIMED_OUT = "AMQ229229: transaction timed out"


class Transactions:
    """Completes transactions against the engine and the storage; owns the XA branches."""

    def __init__(self, engine: DeliveryEngine, post_office: PostOffice, storage: Storage,
                 duplicates: DuplicateIds) -> None:
        self._engine = engine
        self._post_office = post_office  # journal transaction IDs come from the post office's ID sequence
        self._storage = storage
        self._duplicates = duplicates
        self.branches: dict[Xid, Transaction] = {}

    # ------------------------------------------------------------------ local

    def commit_work(self, tx: Transaction) -> None:
        """Route the sends and finish the acks of ``tx`` (durable effects as one journal transaction)."""
        journal_tx = tx.journal_tx or self._post_office.next_id()
        durable = False
        for message, address in tx.sends:
            dup = duplicate_id_of(message)
            if dup is not None:
                if self._duplicates.seen(address, dup):
                    # a commit retried after its outcome was unknown: what the first one routed is not routed again
                    LOG.warning("duplicate message detected in a transaction; not routed again",
                                extra={"address": address, "dup_id": dup.decode("utf-8", "replace")})
                    continue
                durable = self._duplicates.remember(address, dup, journal_tx) or durable
            durable = self._engine.route(message, address, journal_tx) or durable
        for ref in tx.acks:
            if ref.durable:
                durable = True
                self._storage.ref_acked(ref, journal_tx)
        if durable or tx.state == "PREPARED":
            self._storage.tx_commit(journal_tx)

    def commit_journal(self, journal_tx: int) -> None:
        """Commit a journal transaction a single send wrote (its message with its duplicate ID)."""
        self._storage.tx_commit(journal_tx)

    def rollback_work(self, session: Session, *, cancel_deliveries: bool, closing_cleanly: bool = False) -> None:
        """Discard the session's transaction; acknowledged (and, when asked, all
        delivered but unacknowledged) messages go back for redelivery.  A clean
        session close does not count the unacknowledged deliveries (Artemis
        decrements their delivery count when the consumer was not failed)."""
        refs = list(session.tx.acks)
        session.tx = Transaction()
        if cancel_deliveries:
            for consumer in session.consumers.values():
                for ref in consumer.delivering.values():
                    if closing_cleanly:
                        ref.delivery_count = max(0, ref.delivery_count - 1)
                    refs.append(ref)
                consumer.delivering.clear()
        self._engine.return_refs(refs)

    # ------------------------------------------------------------------ XA branches

    def begin(self, xid: Xid, timeout_s: int, now_ms: int) -> Transaction:
        tx = Transaction(xid=xid, timeout_s=timeout_s, started_at_ms=now_ms)
        self.branches[xid] = tx
        return tx

    def prepare(self, tx: Transaction) -> None:
        """Record the branch's durable effects and its prepare in one journal transaction."""
        assert tx.xid is not None
        tx.journal_tx = tx.journal_tx or self._post_office.next_id()
        storage = self._storage
        for message, address in tx.sends:
            message, queues = self._engine.resolve(message, address)
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

    def commit(self, tx: Transaction) -> None:
        """Commit a branch, one-phase or prepared."""
        if tx.xid is not None:
            self.branches.pop(tx.xid, None)
        if tx.state != "PREPARED":
            self.commit_work(tx)
            return
        # The journal already holds the records: only the commit marker is new.
        self._storage.tx_commit(tx.journal_tx)
        for message, queues in tx.routes:
            live = [q for q in queues if q.name in self._post_office.queues]
            self._engine.enqueue(message, live, None, tx.ref_ids)

    def abandon(self, tx: Transaction) -> None:
        """Roll a branch back: acknowledged messages return, sends are dropped."""
        if tx.xid is not None:
            self.branches.pop(tx.xid, None)
        if tx.state == "PREPARED":
            self._storage.tx_rollback(tx.journal_tx)
        self._engine.return_refs(list(tx.acks))
        tx.acks.clear()
        tx.sends.clear()
        tx.routes.clear()

    def in_doubt(self) -> tuple[Xid, ...]:
        return tuple(xid for xid, tx in self.branches.items() if tx.state == "PREPARED")

    def session_gone(self, session: Session) -> None:
        """The session ends while associated with a branch: an unprepared one rolls back."""
        tx = session.tx
        if tx.xid is not None and tx.state != "PREPARED":
            self.abandon(tx)
        session.tx = Transaction()

    def scan_timeouts(self, now_ms: int) -> None:
        """Branches past their timeout can only roll back; their acknowledged messages return at once."""
        for tx in list(self.branches.values()):
            if tx.timed_out(now_ms) and not tx.rollback_only:
                LOG.info("XA transaction timed out", extra={"xid": repr(tx.xid)})
                tx.rollback_only = TIMED_OUT
                self._engine.return_refs(list(tx.acks))
                tx.acks.clear()
                tx.sends.clear()

    def restore_prepared(self, xid: Xid, tx: Transaction) -> None:
        """After a restart: a prepared branch from the journal."""
        tx.state = "PREPARED"
        self.branches[xid] = tx
