"""What flows through a session besides requests (notes §8): deliveries, producer credits per address and
each consumer's buffer and credit accounting.  Sans-IO; each writes through the session it belongs to."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cck.codec import CoreMessage, ExceptionType, SessionConsumerFlowCreditMessage, SessionRequestProducerCreditsMessage

from ._errors import BrokerRefused

if TYPE_CHECKING:
    from ._session_channel import SessionChannel

__all__ = ["ConsumerCore", "Delivery", "ProducerCore", "ProducerCredits"]


@dataclass(frozen=True)
class Delivery:
    """A message as a consumer received it."""

    message: CoreMessage
    consumer_id: int
    delivery_count: int
    #: Frame size in bytes: the unit of consumer credit.
    size: int
    #: the session's incarnation it arrived under (:attr:`SessionChannel.incarnation`): a recreate lost it
    incarnation: int = 0

    @property
    def message_id(self) -> int:
        return self.message.message_id


class ProducerCredits:
    """Credits for one address (Artemis's producer credits, notes §8).

    ``available`` may be spent now; ``arriving`` has been requested and not yet
    granted.  A request is made whenever available + arriving falls below what
    the next send needs or below one window.
    """

    def __init__(self, session: SessionChannel, address: str | None, window: int) -> None:
        self.session = session
        self.address = address
        self.window = window
        self.available = 0
        self.arriving = 0
        self.failed = False
        self._top_up(window)

    def _top_up(self, needed: int) -> None:
        wanted = max(needed, self.window)
        if wanted > self.available + self.arriving:
            request = wanted - self.available - self.arriving
            self.arriving += request
            self.session.write(SessionRequestProducerCreditsMessage(request, self.address or ""))

    def try_acquire(self, size: int) -> bool:
        """Spend ``size`` credits if they are there; otherwise ask for them and return False."""
        if self.failed:
            raise BrokerRefused(int(ExceptionType.ADDRESS_FULL),
                                f"the broker refused credits for {self.address!r} (address full)",
                                f"send to {self.address}")
        if self.available >= size:
            self.available -= size
            self._top_up(self.window)
            return True
        self._top_up(size)
        return False

    def granted(self, credits: int, failed: bool) -> None:
        self.arriving = max(0, self.arriving - credits)
        self.available += credits
        self.failed = failed


@dataclass
class ProducerCore:
    producer_id: int
    address: str | None
    closed: bool = False


class ConsumerCore:
    """A consumer's buffer and credit accounting."""

    def __init__(self, session: SessionChannel, consumer_id: int, queue: str, window: int, browse_only: bool,
                 filter_string: str | None = None) -> None:
        self.session = session
        self.consumer_id = consumer_id
        self.queue = queue
        self.filter_string = filter_string
        self.window = window
        self.browse_only = browse_only
        self.buffer: deque[Delivery] = deque()
        self.closed = False
        self.closed_by_broker = False
        self._consumed_bytes = 0
        #: Called after deliveries arrive or the consumer closes (the IO layer wakes its readers).
        self.on_change: Callable[[], None] | None = None

    def initial_credits(self) -> int:
        """SESS_FLOWTOKEN sent after creation: the window, -1 for unbounded, 1 for a slow consumer."""
        return 1 if self.window == 0 else self.window

    def delivered(self, delivery: Delivery) -> None:
        self.buffer.append(delivery)
        self._changed()

    def take(self) -> Delivery | None:
        """Hand the oldest buffered delivery to the application and return credits when due."""
        if not self.buffer:
            return None
        delivery = self.buffer.popleft()
        if self.window == 0:
            self.session.write(SessionConsumerFlowCreditMessage(self.consumer_id, 1))
        elif self.window > 0:
            self._consumed_bytes += delivery.size
            if self._consumed_bytes >= max(1, self.window // 2):
                self.session.write(SessionConsumerFlowCreditMessage(self.consumer_id, self._consumed_bytes))
                self._consumed_bytes = 0
        return delivery

    def clear(self) -> None:
        """Drop undelivered messages (rollback: the broker redelivers them)."""
        self.buffer.clear()
        self._consumed_bytes = 0

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()
