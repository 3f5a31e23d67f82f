"""Expected attempt schedules, computed from a client's retry settings (notes §11, §12.1).

Everything here is arithmetic on milliseconds: no clock, no I/O. The schedules are what a broker or
client that follows Artemis's algorithm *must* produce; ``_timing.check_schedule`` compares a
measured run against them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RetryPolicy",
    "Attempt",
    "expected_reconnect_schedule",
    "expected_initial_connect_schedule",
    "expected_broadcast_schedule",
]

# Java's (long) cast saturates instead of overflowing; the cap below normally hides this, but a
# policy with maxRetryInterval near Long.MAX_VALUE must not make Python ints grow without bound.
_JAVA_LONG_MAX = 2**63 - 1

# Field name -> the URL query parameter Artemis reads it from, so errors speak the user's language.
_URL_NAMES = {
    "retry_interval_ms": "retryInterval",
    "retry_interval_multiplier": "retryIntervalMultiplier",
    "max_retry_interval_ms": "maxRetryInterval",
    "reconnect_attempts": "reconnectAttempts",
    "initial_connect_attempts": "initialConnectAttempts",
}

# Java's Long.parseLong / Double.parseDouble accept less than Python's int()/float() (no "1_000",
# no surrounding blanks, no "inf"); matching them keeps a URL that Artemis rejects from passing here.
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The ServerLocator retry settings, with Artemis's defaults (notes §11.1, §14)."""

    #: The first wait between attempts, in ms (``retryInterval``).
    retry_interval_ms: int = 2000
    #: Backoff factor applied to the previous wait (``retryIntervalMultiplier``).
    retry_interval_multiplier: float = 1.0
    #: Cap for *computed* waits; the first wait is not capped (``maxRetryInterval``).
    max_retry_interval_ms: int = 2000
    #: 0 = never reconnect, -1 = forever, N = N attempts (``reconnectAttempts``).
    reconnect_attempts: int = 0
    #: 0 behaves like 1, -1 = forever (``initialConnectAttempts``).
    initial_connect_attempts: int = 1

    def __post_init__(self) -> None:
        # The Java client accepts nonsense such as negative intervals (its waits then return at
        # once); an oracle fed such a value would compute a meaningless schedule, so refuse it.
        for name in ("retry_interval_ms", "max_retry_interval_ms"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"{_URL_NAMES[name]} ({name}) must be an integer >= 0, got {value!r}")
        multiplier = self.retry_interval_multiplier
        if not isinstance(multiplier, int | float) or not math.isfinite(multiplier) or multiplier < 0:
            raise ValueError(
                f"retryIntervalMultiplier (retry_interval_multiplier) must be a finite number >= 0, got {multiplier!r}")
        for name in ("reconnect_attempts", "initial_connect_attempts"):
            value = getattr(self, name)
            if type(value) is not int or value < -1:
                raise ValueError(f"{_URL_NAMES[name]} ({name}) must be an integer >= -1, got {value!r}")

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> RetryPolicy:
        """Read the retry settings from URL query parameters (``tcp://h:61616?retryInterval=500&...``).

        Parameters this policy does not model (``ha``, ``consumerWindowSize``, ...) are ignored: a
        connection URL carries many. A malformed value raises ValueError naming the parameter.
        """
        values: dict[str, Any] = {}
        for field_name, url_name in _URL_NAMES.items():
            text = params.get(url_name)
            if text is None:
                continue
            if field_name == "retry_interval_multiplier":
                if not _FLOAT_TEXT.fullmatch(text):
                    raise ValueError(f"URL parameter {url_name}={text!r} is not a decimal number")
                values[field_name] = float(text)
            else:
                if not _INT_TEXT.fullmatch(text):
                    raise ValueError(f"URL parameter {url_name}={text!r} is not an integer")
                values[field_name] = int(text)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The settings under their Artemis URL names, for evidence."""
        return {url: getattr(self, name) for name, url in _URL_NAMES.items()}


@dataclass(frozen=True, slots=True)
class Attempt:
    """One expected attempt: when it happens, measured from the schedule's origin."""

    #: 0-based position in the schedule.
    index: int
    #: Time from the origin (the failure, the first connect call, the first broadcast) in ms.
    offset_ms: int
    #: Wait since the previous attempt in ms (for index 0: the offset itself).
    wait_ms: int
    #: True for the attempt expected to connect, False for one expected to fail, None when the
    #: schedule has no notion of outcome (broadcasts).
    succeeds: bool | None = False

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "offset_ms": self.offset_ms, "wait_ms": self.wait_ms, "succeeds": self.succeeds}


def _waits(policy: RetryPolicy) -> Iterator[int]:
    """The waits between consecutive attempts: retryInterval, then backoff (notes §11.2).

    ``next = (long)(current * multiplier)``, capped at maxRetryInterval; the first wait is
    retryInterval itself and is deliberately *not* capped, as in Artemis.
    """
    current = policy.retry_interval_ms
    while True:
        yield current
        # int() truncates toward zero like Java's (long) cast; the product is a double in both.
        current = min(int(current * policy.retry_interval_multiplier), _JAVA_LONG_MAX, policy.max_retry_interval_ms)


def _count(bound: int | None, failing_attempts: int | None, limit: int | None, what: str) -> tuple[int, bool]:
    """How many attempts to list, and whether the last one is the success.

    ``bound`` is the number of attempts the client makes before giving up (None = forever).
    """
    if failing_attempts is not None and failing_attempts < 0:
        raise ValueError(f"failing_attempts must be >= 0 or None, got {failing_attempts}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    if failing_attempts is not None and (bound is None or failing_attempts < bound):
        count, last_succeeds = failing_attempts + 1, True
    elif bound is not None:
        count, last_succeeds = bound, False
    elif limit is None:
        raise ValueError(f"{what} is -1 (retry forever) and every attempt fails: pass limit= to bound the schedule")
    else:
        count, last_succeeds = limit, False
    if limit is not None and limit < count:
        count, last_succeeds = limit, False
    return count, last_succeeds


def _schedule(policy: RetryPolicy, count: int, last_succeeds: bool, *, first_wait: int | None) -> list[Attempt]:
    """``count`` attempts; the first at ``first_wait`` (0 = immediate, None = after retryInterval)."""
    attempts: list[Attempt] = []
    waits = _waits(policy)
    offset = 0
    for index in range(count):
        wait = (next(waits) if first_wait is None else first_wait) if index == 0 else next(waits)
        offset += wait
        attempts.append(Attempt(index, offset, wait, last_succeeds and index == count - 1))
    return attempts


def expected_reconnect_schedule(
    policy: RetryPolicy,
    *,
    failing_attempts: int | None = None,
    limit: int | None = None,
    immediate_first: bool = True,
) -> list[Attempt]:
    """The reconnect attempts after a connection failure, offsets from the failure (notes §11.4).

    The first attempt is immediate; after each failed attempt the client waits retryInterval, then
    backed-off intervals (§11.2), until it has made ``reconnectAttempts`` attempts (-1: forever,
    0: no reconnect at all, so an empty schedule). With ``failing_attempts=k`` the attempt after
    ``k`` failures succeeds and ends the schedule. An unbounded schedule needs ``limit`` (the
    number of attempts to list); a ``limit`` also truncates a bounded one.

    ``immediate_first=False`` gives the reading of the user manual in which even the first
    reconnect waits retryInterval; Artemis's code does not do that (design §3 on such disputes).

    Not modelled: the reattach-failed restart (§11.4 step 3) and the failover loop over other
    connector pairs (step 4) — a case needing them composes schedules itself.
    """
    if policy.reconnect_attempts == 0:
        # failoverAttempts could still start the failover loop (§11.4), which this schedule omits.
        return []
    bound = None if policy.reconnect_attempts == -1 else policy.reconnect_attempts
    count, last_succeeds = _count(bound, failing_attempts, limit, "reconnectAttempts")
    return _schedule(policy, count, last_succeeds, first_wait=0 if immediate_first else None)


def expected_initial_connect_schedule(
    policy: RetryPolicy,
    connectors: int = 1,
    limit: int | None = None,
    *,
    failing_attempts: int | None = None,
) -> list[Attempt]:
    """The attempts of the first connection, offsets from the first attempt (notes §11.3).

    Each attempt tries one connector; the client gives up after
    ``max(1, initialConnectAttempts) * connectors`` attempts (-1: never). The first retry waits
    retryInterval, later ones back off (§11.2). ``failing_attempts`` and ``limit`` work as in
    :func:`expected_reconnect_schedule`.
    """
    if type(connectors) is not int or connectors < 1:
        raise ValueError(f"connectors must be an integer >= 1, got {connectors!r}")
    configured = policy.initial_connect_attempts
    bound = None if configured == -1 else max(1, configured) * connectors
    count, last_succeeds = _count(bound, failing_attempts, limit, "initialConnectAttempts")
    return _schedule(policy, count, last_succeeds, first_wait=0)


def expected_broadcast_schedule(period_ms: int, count: int) -> list[Attempt]:
    """Discovery broadcasts: the first immediately, then one every ``broadcast-period`` (notes §12.1)."""
    if type(period_ms) is not int or period_ms <= 0:
        raise ValueError(f"broadcast-period (period_ms) must be an integer > 0, got {period_ms!r}")
    if type(count) is not int or count < 0:
        raise ValueError(f"count must be an integer >= 0, got {count!r}")
    return [Attempt(index, index * period_ms, period_ms if index else 0, None) for index in range(count)]
