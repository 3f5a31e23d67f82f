"""The confirmation window, identical on both ends of a session channel (notes §9).

Command IDs are implicit: each side numbers the *confirmable* packets it sends
on a channel 0, 1, 2, ... and keeps them in a resend cache until the peer
confirms them with PACKETS_CONFIRMED(last index).  The receiving side counts
what it has processed and confirms once the bytes received reach the window
size (``window`` = -1 disables all of it).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["ReceiveWindow", "SendWindow"]


@dataclass
class SendWindow:
    """Sender side: the resend cache of confirmable packets not yet confirmed."""

    window: int
    first_stored: int = 0
    cache: deque[bytes] = field(default_factory=deque)

    @property
    def enabled(self) -> bool:
        """A cache exists for any window other than -1 (0 included)."""
        return self.window != -1

    @property
    def next_command_id(self) -> int:
        return self.first_stored + len(self.cache)

    def sent(self, frame: bytes) -> None:
        """Record a confirmable frame just sent."""
        if self.enabled:
            self.cache.append(frame)

    def confirmed(self, last_id: int) -> int:
        """Drop everything up to ``last_id``; returns how many frames were released."""
        if not self.enabled:
            return 0
        count = min(max(last_id - self.first_stored + 1, 0), len(self.cache))
        for _ in range(count):
            self.cache.popleft()
        # A confirmation past the end (the peer counted commands we never cached)
        # moves the numbering on, as Artemis does after warning.
        self.first_stored = max(self.first_stored + count, last_id + 1)
        return count

    def replay_after(self, last_received: int) -> list[bytes]:
        """Release what the peer has seen (up to ``last_received``) and return the rest to resend."""
        self.confirmed(last_received)
        return list(self.cache)

    def reset(self) -> None:
        self.cache.clear()
        self.first_stored = 0


@dataclass
class ReceiveWindow:
    """Receiver side: counts processed confirmable packets and their bytes."""

    window: int
    last_confirmed: int = -1
    received_bytes: int = 0

    @property
    def enabled(self) -> bool:
        return self.window != -1

    def processed(self, frame_size: int) -> int | None:
        """Count one processed confirmable packet; returns the index to confirm when the window fills."""
        if not self.enabled:
            return None
        self.last_confirmed += 1
        self.received_bytes += frame_size
        if self.received_bytes >= self.window:
            self.received_bytes = 0
            return self.last_confirmed
        return None

    def flush(self) -> int | None:
        """The index to confirm if anything is unconfirmed (ping, TTL check, close)."""
        if not self.enabled or self.received_bytes == 0:
            return None
        self.received_bytes = 0
        return self.last_confirmed
