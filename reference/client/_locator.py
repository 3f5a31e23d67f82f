"""ServerLocator URLs and the retry schedule, sans-IO (notes §11).

URL forms, as Artemis's client accepts them::

    tcp://host:port?confirmationWindowSize=1048576&reconnectAttempts=-1
    (tcp://a:61616,tcp://b:61617)?retryInterval=500

The schedule is pure arithmetic on the settings; :class:`RetryLoop` turns it into
"attempt now / attempt at t / give up" decisions for a caller that owns the
sockets and the clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote_plus

from ._settings import ClientSettings

__all__ = ["Connector", "LocatorURL", "RetryLoop", "intervals", "parse_locator_url"]

_AUTHORITY = re.compile(r"^(?P<host>\[[^\]]*\]|[^:/?#\[\]]+)(?::(?P<port>\d{1,5}))?/?$")
DEFAULT_PORT = 61616


@dataclass(frozen=True)
class Connector:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"tcp://{self.host}:{self.port}"


@dataclass(frozen=True)
class LocatorURL:
    connectors: tuple[Connector, ...]
    params: dict[str, str]

    def settings(self, base: ClientSettings | None = None) -> ClientSettings:
        return (base or ClientSettings()).with_params(self.params)


def parse_locator_url(url: str) -> LocatorURL:
    """Parse a locator URL; a ValueError names the part that is wrong."""
    text = url.strip()
    query = ""
    if text.startswith("("):
        close = text.find(")")
        if close == -1:
            raise ValueError(f"bad broker URL {url!r}: '(' without ')'")
        members = [m.strip() for m in text[1:close].split(",")]
        rest = text[close + 1:]
        if rest and not rest.startswith("?"):
            raise ValueError(f"bad broker URL {url!r}: expected '?' after ')', found {rest[:10]!r}")
        query = rest[1:]
    else:
        head, _, query = text.partition("?")
        members = [head]
    if not members or any(not m for m in members):
        raise ValueError(f"bad broker URL {url!r}: empty connector")
    connectors = tuple(_connector(m, url) for m in members)
    params: dict[str, str] = {}
    for pair in filter(None, re.split(r"[&;]", query)):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"bad broker URL {url!r}: parameter {pair!r} is not name=value")
        params[unquote_plus(key)] = unquote_plus(value)
    return LocatorURL(connectors, params)


def _connector(member: str, url: str) -> Connector:
    scheme, sep, rest = member.partition("://")
    if not sep:
        raise ValueError(f"bad broker URL {url!r}: {member!r} has no scheme (expected tcp://host:port)")
    if scheme != "tcp":
        raise ValueError(f"bad broker URL {url!r}: scheme {scheme!r} is not supported (only tcp)")
    match = _AUTHORITY.match(rest)
    if match is None:
        raise ValueError(f"bad broker URL {url!r}: {rest!r} is not host[:port]")
    port = int(match["port"]) if match["port"] else DEFAULT_PORT
    if not 0 < port < 65536:
        raise ValueError(f"bad broker URL {url!r}: port {port} out of range")
    return Connector(match["host"].strip("[]"), port)


def intervals(settings: ClientSettings) -> Iterator[int]:
    """Waits between attempts in ms: retryInterval, then xmultiplier truncated, capped (the first is not capped)."""
    interval = settings.retry_interval_ms
    while True:
        yield interval
        interval = min(int(interval * settings.retry_interval_multiplier), settings.max_retry_interval_ms)


class RetryLoop:
    """When to try next.  ``reconnect=True`` is the loop after a failure (first attempt immediate, stop after
    ``reconnect_attempts`` failures); ``reconnect=False`` the initial connection (stop after
    ``max(1, initial_connect_attempts) x connectors`` failures)."""

    def __init__(self, settings: ClientSettings, *, reconnect: bool, connectors: int = 1) -> None:
        self.settings = settings
        self.reconnect = reconnect
        self.connectors = max(1, connectors)
        self.failures = 0
        self._intervals = intervals(settings)

    @property
    def limit(self) -> int | None:
        """How many failed attempts end the loop (None: never)."""
        if self.reconnect:
            attempts = self.settings.reconnect_attempts
            return None if attempts == -1 else attempts
        attempts = self.settings.initial_connect_attempts
        return None if attempts == -1 else max(1, attempts) * self.connectors

    @property
    def enabled(self) -> bool:
        return self.limit != 0

    def attempt_failed(self, now: float) -> float | None:
        """Record a failed attempt at ``now``; returns when to try again, or None to give up."""
        self.failures += 1
        limit = self.limit
        if limit is not None and self.failures >= limit:
            return None
        return now + next(self._intervals) / 1000
