"""The time of the input the core is handling, for the owners that need it between entry points.

The core is the only writer: each entry point (``receive``, ``tick``, ``connection_made``,
``connection_lost``) sets it from the ``now_ms`` it was given.  The owners that stamp or schedule
something (an XA branch's start, a queue's redistribution) receive this object in their constructor
and read it; they never read a clock (``reference._clock`` is for the I/O layers).
"""

from __future__ import annotations

__all__ = ["CoreTime"]


class CoreTime:
    """Monotonic milliseconds, as the last entry point was given them."""

    __slots__ = ("_now_ms",)

    def __init__(self, now_ms: int = 0) -> None:
        self._now_ms = now_ms

    @property
    def ms(self) -> int:
        return self._now_ms

    def advance(self, now_ms: int) -> None:
        """Set by the core at each entry point (only there)."""
        self._now_ms = now_ms
