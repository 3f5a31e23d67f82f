"""The one time convention of every sans-IO core in ``reference``.

Cores never read a clock.  Whoever drives them (the asyncio server, the client's
asyncio layer, a test) passes ``now_ms``: monotonic milliseconds as an ``int``,
and ``next_deadline()`` answers in the same unit.  Milliseconds, because every
timeout, interval and TTL the protocol and broker.xml configure is in
milliseconds; an ``int``, so deadlines compare exactly in tests.
"""

from __future__ import annotations

import time

__all__ = ["monotonic_ms"]


def monotonic_ms() -> int:
    """Monotonic milliseconds: the ``now_ms`` the I/O layers pass to the cores."""
    return time.monotonic_ns() // 1_000_000
