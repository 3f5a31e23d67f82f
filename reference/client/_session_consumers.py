"""A session's consumer side (sans-IO, notes §8): consumers created, closed and recreated, deliveries into
their buffers, acknowledgements, start and stop, and the broker closing a consumer (DISCONNECT_CONSUMER)."""

from __future__ import annotations

from cck.codec import (
    DisconnectConsumerMessage,
    Packet,
    SessionAcknowledgeMessage,
    SessionConsumerCloseMessage,
    SessionConsumerFlowCreditMessage,
    SessionCreateConsumerMessage,
    SessionIndividualAcknowledgeMessage,
    SessionReceiveMessage,
    SessionStart,
    SessionStop,
)

from ._calls import Call
from ._errors import DeliveryFromLostSession
from ._flow import ConsumerCore, Delivery
from ._session_channel import NULL, QUEUE_QUERY, SessionChannel

__all__ = ["ConsumerSide"]


class ConsumerSide(SessionChannel):
    """Consumers and what they receive."""

    def create_consumer(self, queue: str, *, filter_string: str | None = None,
                        browse_only: bool = False) -> tuple[ConsumerCore, Call]:
        consumer = ConsumerCore(self, self._next_consumer, queue, self.settings.consumer_window_size, browse_only,
                                filter_string)
        self._next_consumer += 1
        self.consumers[consumer.consumer_id] = consumer
        call = self._call(SessionCreateConsumerMessage(consumer.consumer_id, queue, filter_string, browse_only, True),
                          QUEUE_QUERY)
        credits = consumer.initial_credits()
        if credits != 0:
            self.write(SessionConsumerFlowCreditMessage(consumer.consumer_id, credits))
        return consumer, call

    def close_consumer(self, consumer: ConsumerCore) -> Call | None:
        if consumer.closed:
            return None
        consumer.closed = True
        consumer.clear()
        self.consumers.pop(consumer.consumer_id, None)
        consumer._changed()
        return self._call(SessionConsumerCloseMessage(consumer.consumer_id), NULL)

    def acknowledge(self, delivery: Delivery, *, individually: bool = False) -> Call | None:
        """Acknowledge ``delivery`` (cumulatively up to it, or just it); a call only with block_on_acknowledge."""
        if delivery.incarnation != self.incarnation:
            # The broker that delivered it is gone and has given the message back to the queue; the same message
            # ID on the recreated session names a new delivery the application has not seen yet (maybe one
            # already buffered here), and acknowledging that would make the buffered copy arrive after a
            # confirmed acknowledgement.  Nothing is sent.
            raise DeliveryFromLostSession(delivery.message_id)
        blocking = self.settings.block_on_acknowledge
        self.work_done = True
        packet: Packet
        if individually:
            packet = SessionIndividualAcknowledgeMessage(delivery.consumer_id, delivery.message_id, blocking)
        else:
            packet = SessionAcknowledgeMessage(delivery.consumer_id, delivery.message_id, blocking)
        if blocking:
            return self._call(packet, NULL)
        self.write(packet)
        return None

    def start(self) -> None:
        self.started = True
        self.write(SessionStart())

    def stop(self) -> Call:
        self.started = False
        return self._call(SessionStop(), NULL)

    # ------------------------------------------------------------------ what the broker sends

    def _receive(self, packet: SessionReceiveMessage, size: int) -> None:
        consumer = self.consumers.get(packet.consumer_id)
        if consumer is None:
            return  # a delivery racing a consumer close; the broker cancels it back to the queue
        consumer.delivered(Delivery(packet.message, packet.consumer_id, packet.delivery_count, size,
                                    self.incarnation))

    def _disconnected(self, packet: DisconnectConsumerMessage) -> None:
        consumer = self.consumers.pop(packet.consumer_id, None)
        if consumer is not None:
            consumer.closed = consumer.closed_by_broker = True
            consumer._changed()

    # ------------------------------------------------------------------ the session's life

    def _clear_buffers(self) -> None:
        """Rollback: buffered deliveries are dropped, the broker redelivers them."""
        for consumer in self.consumers.values():
            consumer.clear()

    def _end_consumers(self) -> None:
        """The session is closing or failed: every consumer is closed and its readers wake."""
        for consumer in list(self.consumers.values()):
            consumer.closed = True
            consumer._changed()

    def _recreate_consumers(self) -> None:
        """On a recreated session (notes §9.5): every consumer again, with empty buffers and fresh credits; not one
        created while the session was away, whose held request (and credits) goes out next."""
        held = {p.consumer_id for p, _ in self.held if isinstance(p, SessionCreateConsumerMessage)}
        for consumer in self.consumers.values():
            if consumer.consumer_id in held:
                continue
            consumer.clear()
            self.write(SessionCreateConsumerMessage(consumer.consumer_id, consumer.queue, consumer.filter_string,
                                                    consumer.browse_only, False))
            credits = consumer.initial_credits()
            if credits != 0:
                self.write(SessionConsumerFlowCreditMessage(consumer.consumer_id, credits))
