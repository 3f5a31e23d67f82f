"""Session-channel packets: producers, consumers, acknowledgements, local transactions, metadata and
closing; the address/queue packets (:mod:`._queue_handlers`) and XA (:mod:`._xa`) join the same table
(notes §5.2, §7.4, §8, §13).

Each handler returns the reply packet (or ``None``); :meth:`SessionHandlers.handle` then confirms
the request in the session's window and sends the reply, which is Artemis's order (confirm, then
respond).  A :class:`BrokerError` becomes an EXCEPTION reply when the request wanted one, and the
request is then *not* counted as confirmed; a refused request that wanted no reply (a non-blocking
send) cannot be told of it: it is logged and, as Artemis does, confirmed like any other.

Sends and new consumers are checked against the session's permissions (:mod:`._authorization`), before
anything of them is done.

The state these packets change has other owners, given in the constructor: routing and delivery
(:class:`~._engine.DeliveryEngine`), transactions (:class:`~._transactions.Transactions`), the sessions
by name (:class:`~._session.SessionRegistry`), the output (:class:`~._outbox.Outbox`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from cck.codec import (
    ActiveMQExceptionMessage,
    CoreMessage,
    CreateProducerMessage,
    ExceptionType,
    Packet,
    PacketsConfirmedMessage,
    RemoveProducerMessage,
    RollbackMessage,
    SessionAcknowledgeMessage,
    SessionAddMetaDataMessage,
    SessionAddMetaDataMessageV2,
    SessionBindingQueryMessage,
    SessionCloseMessage,
    SessionCommitMessage,
    SessionConsumerCloseMessage,
    SessionConsumerFlowCreditMessage,
    SessionCreateConsumerMessage,
    SessionDeleteQueueMessage,
    SessionExpireMessage,
    SessionForceConsumerDelivery,
    SessionIndividualAcknowledgeMessage,
    SessionProducerCreditsMessage,
    SessionQueueQueryMessage,
    SessionRequestProducerCreditsMessage,
    SessionSendMessage,
    SessionStart,
    SessionStop,
    SessionUniqueAddMetaDataMessage,
)

from ._authorization import Authorization, CheckType
from ._cluster import MANAGEMENT_ADDRESS, OPERATION_KEY, QUEUE_INFO_OPERATION, ROUTE_TO_KEY
from ._cluster_hooks import ClusterHooks
from ._connection import Connection
from ._duplicates import DuplicateIds, duplicate_id_of
from ._engine import DeliveryEngine, check_filter
from ._errors import BrokerError
from ._management import answer_request
from ._model import MessageRef, PostOffice, split_fqqn
from ._outbox import Outbox
from ._queue_handlers import QueueHandlers
from ._replies import null_response
from ._session import Consumer, Session, SessionRegistry, Transaction
from ._transactions import Transactions
from ._xa import XA_ANSWERED, XAHandlers

__all__ = ["SessionHandlers", "wants_reply"]

LOG = logging.getLogger("cck.reference.broker")

Handler = Callable[[Session, Any], Packet | None]

# Requests Artemis always answers (others answer only when they carry requires_response).
_ALWAYS_ANSWERED = (
    SessionDeleteQueueMessage, SessionCommitMessage, RollbackMessage, SessionStop, SessionCloseMessage,
    SessionConsumerCloseMessage, SessionQueueQueryMessage, SessionBindingQueryMessage, SessionAddMetaDataMessage,
)  # fmt: skip


def wants_reply(packet: Packet) -> bool:
    """Whether the client waits for an answer (so a refusal must be an EXCEPTION)."""
    if isinstance(packet, (*_ALWAYS_ANSWERED, *XA_ANSWERED)):
        return True
    if isinstance(packet, (SessionAddMetaDataMessageV2, SessionUniqueAddMetaDataMessage)):
        return packet.requires_confirmation
    return bool(getattr(packet, "requires_response", False))


def _reply(session: Session, correlation: int | None = -1) -> Packet:
    return null_response(session.connection.version, correlation)


class SessionHandlers:
    """Protocol handlers for everything that travels on a session channel, by packet class."""

    def __init__(self, *, engine: DeliveryEngine, post_office: PostOffice, transactions: Transactions,
                 outbox: Outbox, duplicates: DuplicateIds, registry: SessionRegistry, authorization: Authorization,
                 queues: QueueHandlers, xa: XAHandlers, cluster: ClusterHooks | None) -> None:
        self._engine = engine
        self._authorization = authorization
        self._duplicates = duplicates
        self._post_office = post_office
        self._transactions = transactions
        self._outbox = outbox
        self._registry = registry
        self._queues = queues
        self._cluster = cluster
        self._handlers: dict[type[Packet], Handler] = {
            SessionSendMessage: self._send,
            SessionAcknowledgeMessage: self._acknowledge,
            SessionIndividualAcknowledgeMessage: self._individual_acknowledge,
            SessionConsumerFlowCreditMessage: self._flow_credit,
            SessionRequestProducerCreditsMessage: self._producer_credits,
            SessionCreateConsumerMessage: self._create_consumer,
            SessionConsumerCloseMessage: self._close_consumer,
            SessionStart: self._start,
            SessionStop: self._stop,
            SessionCloseMessage: self._close,
            SessionCommitMessage: self._commit,
            RollbackMessage: self._rollback,
            SessionForceConsumerDelivery: self._force_delivery,
            SessionExpireMessage: self._expired,
            SessionAddMetaDataMessage: self._metadata,
            SessionAddMetaDataMessageV2: self._metadata,
            SessionUniqueAddMetaDataMessage: self._unique_metadata,
            CreateProducerMessage: self._create_producer,
            RemoveProducerMessage: self._remove_producer,
            **queues.handlers(),
            **xa.handlers(),
        }

    # ------------------------------------------------------------------ entry

    def handle(self, session: Session, packet: Packet, size: int) -> None:
        if isinstance(packet, PacketsConfirmedMessage):
            session.send_window.confirmed(packet.command_id)
            return
        handler = self._handlers.get(type(packet))
        if handler is None:
            raise BrokerError(ExceptionType.UNSUPPORTED_PACKET,
                              f"{packet.type_name()} is not valid on a session channel")
        try:
            reply = handler(session, packet)
        except BrokerError as exc:
            # the log is all there is of a refusal nobody waits for (Artemis logs it as an error, AMQ224016)
            LOG.log(logging.INFO if wants_reply(packet) else logging.WARNING, "request refused",
                    extra={"session": session.name, "packet": packet.type_name(), "code": exc.code, "reason": str(exc)})
            if not wants_reply(packet) and packet.requires_confirmations():
                self._outbox.confirm(session, size)  # Artemis: no answer to send, so the command is confirmed
            if wants_reply(packet):
                correlation = getattr(packet, "correlation_id", None)
                self._outbox.send(session.connection, session.channel_id,
                                  ActiveMQExceptionMessage(exc.code, str(exc), correlation), session)
            return
        if packet.requires_confirmations():
            self._outbox.confirm(session, size)
        if isinstance(packet, SessionCloseMessage):
            self._outbox.flush_confirmations(session)
        if reply is not None:
            self._outbox.send(session.connection, session.channel_id, reply, session,
                              needs_no_sync=isinstance(reply, SessionProducerCreditsMessage))

    # ------------------------------------------------------------------ producers

    def _manage(self, session: Session, request: CoreMessage, transacted: bool) -> None:
        """A management request (already checked for manage): answered, not routed; the answer goes to its
        reply-to address, within the session's transaction when it has one (as Artemis sends it)."""
        if self._cluster is not None and request.properties.get(OPERATION_KEY) == QUEUE_INFO_OPERATION:
            self._cluster.management(session, request)
            return
        answer = answer_request(request, self._post_office.queues, self._post_office.next_id())
        if answer.address is None:
            return
        # the answer is the user's send: Artemis checks it like one (and refuses the request when it may not)
        self._check_send(session, CheckType.SEND, answer.address, transacted)
        if answer.address not in self._post_office.addresses:
            # Artemis would auto-create it where allowed; the reference answers only to an address that exists
            LOG.warning("management answer for an address that does not exist; dropped",
                        extra={"address": answer.address, "session": session.name})
            return
        message = dataclasses.replace(answer.message, address=answer.address)
        if transacted:
            session.tx.check_open()
            session.tx.sends.append((message, answer.address))
        else:
            self._engine.route(message, answer.address, None)

    def _send(self, session: Session, packet: SessionSendMessage) -> Packet | None:
        message = packet.message
        address = message.address or session.default_address
        if address is None:
            raise BrokerError(ExceptionType.ILLEGAL_STATE, "message has no address")
        reply = _reply(session, packet.correlation_id) if packet.requires_response else None
        transacted = session.tx.xid is not None or not session.auto_commit_sends
        # a management request needs manage (and not send); a refused send dooms the session's transaction
        self._check_send(session, CheckType.MANAGE if address == MANAGEMENT_ADDRESS else CheckType.SEND, address,
                         transacted)
        if address == MANAGEMENT_ADDRESS:
            self._manage(session, message, transacted)
            return reply
        if self._cluster is not None and self._cluster.duplicate(message):
            return reply  # a bridge resent what it had delivered before a failure
        message = dataclasses.replace(message, message_id=self._post_office.next_id(), address=address)
        if ROUTE_TO_KEY not in message.properties:  # a bridged message names its queues by ID
            self._engine.ensure_address(address, message, lambda name, queue: self._authorization.auto_create(
                session, name, queue=queue))
        dup = duplicate_id_of(message)
        if transacted:
            session.tx.check_open()
            session.tx.sends.append((message, address))
        elif dup is None:
            self._engine.route(message, address, None)
        elif self._duplicates.seen(address, dup):
            # sent again after a failure whose outcome the producer could not know: routed once already
            LOG.warning("duplicate message detected; not routed again",
                        extra={"address": address, "dup_id": dup.decode("utf-8", "replace")})
        else:
            # the message and its ID in one journal transaction: a crash keeps both or neither
            tx_id = self._post_office.next_id()
            stored = self._engine.route(message, address, tx_id)
            if self._duplicates.remember(address, dup, tx_id) or stored:
                self._transactions.commit_journal(tx_id)
        return reply

    def _check_send(self, session: Session, check: CheckType, address: str, transacted: bool) -> None:
        try:
            self._authorization.check(session, check, address)
        except BrokerError as exc:
            if transacted:
                session.tx.refused = exc
            raise

    def _producer_credits(self, session: Session, packet: SessionRequestProducerCreditsMessage) -> Packet | None:
        # Never full: grant at once (a broker that does not answer blocks Java producers).
        return SessionProducerCreditsMessage(packet.credits, packet.address)

    def _create_producer(self, session: Session, packet: CreateProducerMessage) -> Packet | None:
        session.producers[packet.producer_id] = packet.address
        return None

    def _remove_producer(self, session: Session, packet: RemoveProducerMessage) -> Packet | None:
        session.producers.pop(packet.producer_id, None)
        return None

    # ------------------------------------------------------------------ consumers

    def _create_consumer(self, session: Session, packet: SessionCreateConsumerMessage) -> Packet | None:
        _, queue_name = split_fqqn(packet.queue_name)
        queue = self._post_office.queues.get(queue_name)
        if queue is None:
            raise BrokerError(ExceptionType.QUEUE_DOES_NOT_EXIST, f"AMQ229017: Queue {queue_name} does not exist")
        self._authorization.check(session, CheckType.BROWSE if packet.browse_only else CheckType.CONSUME,
                                  queue.address, queue.name)
        check_filter(packet.filter_string)
        self._engine.add_consumer(Consumer(packet.consumer_id, session, queue, packet.filter_string,
                                           packet.browse_only))
        return self._queues.queue_query_response(session, queue.name) if packet.requires_response else None

    def _flow_credit(self, session: Session, packet: SessionConsumerFlowCreditMessage) -> Packet | None:
        self._engine.grant(_consumer(session, packet.consumer_id), packet.credits)
        return None

    def _start(self, session: Session, packet: SessionStart) -> Packet | None:
        session.started = True
        for consumer in session.consumers.values():
            self._engine.wake(consumer.queue)
        return None

    def _stop(self, session: Session, packet: SessionStop) -> Packet | None:
        session.started = False
        return _reply(session)

    def _force_delivery(self, session: Session, packet: SessionForceConsumerDelivery) -> Packet | None:
        self._engine.force_delivery(_consumer(session, packet.consumer_id), packet.sequence)
        return None

    def _close_consumer(self, session: Session, packet: SessionConsumerCloseMessage) -> Packet | None:
        self._engine.remove_consumer(_consumer(session, packet.consumer_id), failed=False)
        return _reply(session)

    # ------------------------------------------------------------------ acknowledgements

    def _acknowledge(self, session: Session, packet: SessionAcknowledgeMessage) -> Packet | None:
        consumer = _consumer(session, packet.consumer_id)
        if packet.message_id not in consumer.delivering:
            raise _no_reference(packet.consumer_id, packet.message_id)
        acked: list[MessageRef] = []
        while consumer.delivering:  # cumulative, in delivery order
            message_id, ref = consumer.delivering.popitem(last=False)
            acked.append(ref)
            if message_id == packet.message_id:
                break
        self._engine.acknowledge(session, acked)
        return _reply(session) if packet.requires_response else None

    def _individual_acknowledge(self, session: Session, packet: SessionIndividualAcknowledgeMessage) -> Packet | None:
        consumer = _consumer(session, packet.consumer_id)
        ref = consumer.delivering.pop(packet.message_id, None)
        if ref is None:
            raise _no_reference(packet.consumer_id, packet.message_id)
        self._engine.acknowledge(session, [ref])
        return _reply(session) if packet.requires_response else None

    def _expired(self, session: Session, packet: SessionExpireMessage) -> Packet | None:
        ref = _consumer(session, packet.consumer_id).delivering.pop(packet.message_id, None)
        if ref is not None:
            self._engine.expire(ref)
        return None

    # ------------------------------------------------------------------ local transactions

    def _commit(self, session: Session, packet: SessionCommitMessage) -> Packet | None:
        tx = session.tx
        if tx.refused is not None:
            self._transactions.rollback_work(session, cancel_deliveries=False)
            raise tx.refused
        if tx.rollback_only:
            reason = tx.rollback_only
            self._transactions.rollback_work(session, cancel_deliveries=False)
            raise BrokerError(ExceptionType.TRANSACTION_ROLLED_BACK, reason)
        self._transactions.commit_work(tx)
        session.tx = Transaction()
        return _reply(session, packet.correlation_id)

    def _rollback(self, session: Session, packet: RollbackMessage) -> Packet | None:
        self._transactions.rollback_work(session, cancel_deliveries=True)
        return _reply(session)

    # ------------------------------------------------------------------ metadata

    def _metadata(
        self, session: Session, packet: SessionAddMetaDataMessage | SessionAddMetaDataMessageV2
    ) -> Packet | None:
        session.metadata[packet.key] = packet.data
        return _reply(session) if wants_reply(packet) else None

    def _unique_metadata(self, session: Session, packet: SessionUniqueAddMetaDataMessage) -> Packet | None:
        if self._registry.metadata_taken(packet.key, packet.data, session):
            raise BrokerError(ExceptionType.DUPLICATE_METADATA,
                              f"AMQ229213: metadata {packet.key}={packet.data} is already in use")
        session.metadata[packet.key] = packet.data
        return _reply(session) if packet.requires_confirmation else None

    # ------------------------------------------------------------------ closing

    def _close(self, session: Session, packet: SessionCloseMessage) -> Packet | None:
        # handle() then confirms, flushes the confirmations and answers (notes §7.4).
        self.close_session(session, failed=False)
        return _reply(session)

    def close_session(self, session: Session, *, failed: bool) -> None:
        """End a session: roll back its work, return its deliveries, drop temp queues."""
        if session.tx.xid is not None:
            self._transactions.session_gone(session)
        self._transactions.rollback_work(session, cancel_deliveries=True, closing_cleanly=not failed)
        for consumer in list(session.consumers.values()):
            self._engine.remove_consumer(consumer, failed=failed)
        conn: Connection = session.connection
        if conn.sessions.get(session.channel_id) is session:
            del conn.sessions[session.channel_id]
        self._registry.remove(session)
        self._engine.remove_temporary_queues(session.name)
        LOG.info("session closed", extra={"session": session.name, "failed": failed})

    def fail_connection_sessions(self, conn: Connection) -> None:
        """The connection failed: its sessions end as failed (not kept for reattach)."""
        for session in list(conn.sessions.values()):
            if session.connection is conn:
                self.close_session(session, failed=True)


def _consumer(session: Session, consumer_id: int) -> Consumer:
    consumer = session.consumers.get(consumer_id)
    if consumer is None:
        raise BrokerError(ExceptionType.ILLEGAL_STATE, f"no consumer {consumer_id} in session {session.name}")
    return consumer


def _no_reference(consumer_id: int, message_id: int) -> BrokerError:
    return BrokerError(ExceptionType.ILLEGAL_STATE,
                       f"AMQ229027: Could not find reference on consumer ID={consumer_id}, messageId = {message_id}")
