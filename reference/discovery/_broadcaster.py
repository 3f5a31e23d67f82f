"""A broadcast group, sans-IO (notes §12): the datagram it sends and when.  Time is passed in
(``now_ms``: monotonic milliseconds, :mod:`reference._clock`); nothing here touches a socket."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from cck.codec import DiscoveryDatagram, TransportConfiguration, encode_discovery

__all__ = ["Broadcaster"]


class Broadcaster:
    """One broadcast group: the datagram it sends and when (``BroadcastGroupImpl``).

    The unique ID is a random UUID made once per instance (a broker start makes a new one).  The
    first datagram is due at ``now_ms``; then Artemis's fixed delay: each one ``period_ms`` after
    the previous was actually sent.
    """

    def __init__(
        self,
        node_id: str,
        connectors: Sequence[TransportConfiguration],
        period_ms: int,
        *,
        now_ms: int,
        unique_id: str | None = None,
    ) -> None:
        if period_ms <= 0:
            raise ValueError(f"period_ms must be > 0, got {period_ms}")
        self.period_ms = period_ms
        self.unique_id = unique_id if unique_id is not None else str(uuid.uuid4())
        self.datagram = DiscoveryDatagram(node_id, self.unique_id, tuple(connectors))
        #: The bytes of every datagram (the content never changes for one instance).
        self.payload = encode_discovery(self.datagram)
        self._due = now_ms
        #: How many datagrams :meth:`poll` handed out.
        self.sent = 0

    @property
    def node_id(self) -> str:
        return self.datagram.node_id

    def next_deadline(self) -> int:
        """When the next datagram is due (``now_ms`` clock)."""
        return self._due

    def poll(self, now_ms: int) -> bytes | None:
        """The datagram to send now, or ``None`` when none is due yet."""
        if now_ms < self._due:
            return None
        self._due = now_ms + self.period_ms
        self.sent += 1
        return self.payload
