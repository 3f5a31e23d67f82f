"""ServerLocator URLs and the retry schedule, sans-IO (notes §11).

URL forms, as Artemis's client accepts them::

    tcp://host:port?confirmationWindowSize=1048576&reconnectAttempts=-1
    (tcp://a:61616,tcp://b:61617)?retryInterval=500
    udp://231.7.7.7:9876?localBindAddress=127.0.0.1&discoveryInitialWaitTimeout=3000

A ``udp://`` URL is a discovery locator (notes §12): the connectors come from broadcast-group
datagrams.  Its discovery parameters are the bean properties Artemis's ``UDPServerLocatorSchema``
sets on ``UDPBroadcastEndpointFactory`` and ``DiscoveryGroupConfiguration``; the other parameters
are client settings, as Artemis's JMS ``UDPSchema`` applies them to the connection factory.

The schedule is pure arithmetic on the settings; :class:`RetryLoop` turns it into
"attempt now / attempt at t / give up" decisions for a caller that owns the
sockets and the clock, and :class:`Reconnect` walks it over the candidate servers
of a reconnection (the failed one, then its backups).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from urllib.parse import unquote_plus

from cck.codec import TransportConfiguration

from ._settings import ClientSettings, _camel

__all__ = ["Connector", "DiscoveryEndpoint", "LocatorURL", "Reconnect", "RetryLoop", "connector_of", "intervals",
           "parse_locator_url"]

_AUTHORITY = re.compile(r"^(?P<host>\[[^\]]*\]|[^:/?#\[\]]+)(?::(?P<port>\d{1,5}))?/?$")
DEFAULT_PORT = 61616


@dataclass(frozen=True)
class Connector:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"tcp://{self.host}:{self.port}"


#: Artemis's Netty connector defaults (TransportConstants.DEFAULT_HOST / DEFAULT_PORT) for a
#: TransportConfiguration without ``host`` or ``port``.
_DEFAULT_HOST = "localhost"


def connector_of(config: TransportConfiguration) -> Connector | None:
    """The TCP connector a TransportConfiguration describes, or ``None`` when it is not a Netty connector.

    ``host`` and ``port`` may be strings (URI-built connectors) or numbers (programmatic ones), notes §3.8;
    a missing one takes Artemis's Netty default (localhost, 61616)."""
    if not config.factory_class_name.endswith("NettyConnectorFactory"):
        return None
    host = config.param("host", _DEFAULT_HOST)
    port = config.param("port", DEFAULT_PORT)
    if not isinstance(host, str) or not isinstance(port, int | str) or isinstance(port, bool):
        return None
    try:
        number = int(port)
    except ValueError:
        return None
    if not 0 < number < 65536:
        return None
    return Connector(host, number)


@dataclass(frozen=True)
class DiscoveryEndpoint:
    """Where a discovery locator listens and how long it waits (Artemis's defaults, notes §12)."""

    group_address: str
    group_port: int
    #: The interface the group is joined on (``localBindAddress``; Artemis's default, none, is any).
    local_bind_address: str = "0.0.0.0"  # noqa: S104 - joining on the default interface is the intent
    #: Accepted as Artemis accepts it; only a broadcaster binds to it, a receiver does not use it.
    local_bind_port: int = -1
    #: An entry not refreshed for this long is dropped when the next datagram arrives.
    refresh_timeout_ms: int = 10_000
    #: How long connection creation waits for the first broadcast.
    initial_wait_timeout_ms: int = 10_000

    @property
    def url(self) -> str:
        return f"udp://{self.group_address}:{self.group_port}"


@dataclass(frozen=True)
class LocatorURL:
    """``connectors`` is empty for a discovery locator (``discovery`` set): they are learnt at connect time."""

    connectors: tuple[Connector, ...]
    params: dict[str, str]
    discovery: DiscoveryEndpoint | None = None

    @property
    def is_discovery(self) -> bool:
        return self.discovery is not None

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
    discovery = any(m.partition("://")[0] == "udp" for m in members)
    if discovery and len(members) > 1:
        raise ValueError(f"bad broker URL {url!r}: a udp:// discovery group cannot be part of a connector list")
    connectors = () if discovery else tuple(_connector(m, url) for m in members)
    params: dict[str, str] = {}
    for pair in filter(None, re.split(r"[&;]", query)):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"bad broker URL {url!r}: parameter {pair!r} is not name=value")
        params[unquote_plus(key)] = unquote_plus(value)
    if discovery:
        return _discovery_locator(members[0], params, url)
    return LocatorURL(connectors, params)


def _connector(member: str, url: str) -> Connector:
    scheme, sep, rest = member.partition("://")
    if not sep:
        raise ValueError(f"bad broker URL {url!r}: {member!r} has no scheme (expected tcp://host:port)")
    if scheme != "tcp":
        raise ValueError(f"bad broker URL {url!r}: scheme {scheme!r} is not supported (only tcp and udp)")
    match = _AUTHORITY.match(rest)
    if match is None:
        raise ValueError(f"bad broker URL {url!r}: {rest!r} is not host[:port]")
    port = int(match["port"]) if match["port"] else DEFAULT_PORT
    if not 0 < port < 65536:
        raise ValueError(f"bad broker URL {url!r}: port {port} out of range")
    return Connector(match["host"].strip("[]"), port)


#: Discovery parameters: the bean properties Artemis's UDPServerLocatorSchema populates from a udp:// query
#: (UDPBroadcastEndpointFactory.setLocalBindAddress / setLocalBindPort,
#: DiscoveryGroupConfiguration.setRefreshTimeout / setDiscoveryInitialWaitTimeout).
_DISCOVERY_PARAMS = ("localBindAddress", "localBindPort", "refreshTimeout", "discoveryInitialWaitTimeout")
#: Properties Artemis also takes from a udp:// query that the kit does not use: refused by name.
_DISCOVERY_UNSUPPORTED = {
    "groupAddress": "give the group as the URL's host (udp://group:port)",
    "groupPort": "give the group port as the URL's port (udp://group:port)",
    "stoppingTimeout": "the kit's receiver stops at once",
    "name": "the kit does not name discovery groups",
    "ha": "the kit's client has no HA locator mode",
}


def _discovery_locator(member: str, params: dict[str, str], url: str) -> LocatorURL:
    rest = member.partition("://")[2]
    match = _AUTHORITY.match(rest)
    if match is None:
        raise ValueError(f"bad broker URL {url!r}: {rest!r} is not group-address:group-port")
    group = match["host"].strip("[]")
    _ipv4(group, "group address", url)
    if not ipaddress.IPv4Address(group).is_multicast:
        raise ValueError(f"bad broker URL {url!r}: group address {group!r} is not a multicast address (224.0.0.0/4)")
    if not match["port"]:
        raise ValueError(f"bad broker URL {url!r}: no group port (udp://{group}:9876)")
    port = int(match["port"])
    if not 0 < port < 65536:
        raise ValueError(f"bad broker URL {url!r}: group port {port} out of range")
    endpoint = DiscoveryEndpoint(group, port)
    client_params = {_camel(f.name) for f in fields(ClientSettings)}
    rest_params: dict[str, str] = {}
    for key, text in params.items():
        if key == "localBindAddress":
            _ipv4(text, key, url)
            endpoint = replace(endpoint, local_bind_address=text)
        elif key == "localBindPort":
            bind_port = _integer(key, text, url)
            if not -1 <= bind_port < 65536:
                raise ValueError(f"bad broker URL {url!r}: {key}={bind_port} out of range (-1 or 0..65535)")
            endpoint = replace(endpoint, local_bind_port=bind_port)
        elif key == "refreshTimeout":
            endpoint = replace(endpoint, refresh_timeout_ms=_positive_ms(key, text, url))
        elif key == "discoveryInitialWaitTimeout":
            endpoint = replace(endpoint, initial_wait_timeout_ms=_positive_ms(key, text, url))
        elif key in _DISCOVERY_UNSUPPORTED:
            raise ValueError(f"bad broker URL {url!r}: parameter {key!r} is not supported by the kit "
                             f"({_DISCOVERY_UNSUPPORTED[key]})")
        elif key in client_params:
            rest_params[key] = text
        else:
            raise ValueError(f"bad broker URL {url!r}: unknown parameter {key!r} (discovery: "
                             f"{', '.join(_DISCOVERY_PARAMS)}; client: {', '.join(sorted(client_params))})")
    return LocatorURL((), rest_params, endpoint)


def _ipv4(text: str, what: str, url: str) -> None:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"bad broker URL {url!r}: {what} {text!r} is not an IPv4 address") from None
    if address.version != 4:
        raise ValueError(f"bad broker URL {url!r}: {what} {text!r}: only IPv4 is supported")


def _integer(key: str, text: str, url: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"bad broker URL {url!r}: {key}={text!r} is not an integer") from None


def _positive_ms(key: str, text: str, url: str) -> int:
    number = _integer(key, text, url)
    if number <= 0:
        # Artemis takes any long: an initial wait of 0 waits forever, a negative one not at all, and a refresh
        # timeout <= 0 drops every entry as it arrives.  The kit refuses them (its waits all have a deadline).
        raise ValueError(f"bad broker URL {url!r}: {key}={number} must be > 0 (milliseconds)")
    return number


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

    def attempt_failed(self, now_ms: int) -> int | None:
        """Record a failed attempt at ``now_ms``; returns when to try again (ms), or None to give up."""
        self.failures += 1
        limit = self.limit
        if limit is not None and self.failures >= limit:
            return None
        return now_ms + next(self._intervals)


class Reconnect:
    """The reconnect loop of notes §11.4 over candidate servers: the server that failed first, then its backups.

    One attempt walks the candidates one after another without waiting (as Artemis's client tries the live
    connector, then the backup's); only when every candidate has failed does the attempt count against
    ``reconnectAttempts`` and the wait of :class:`RetryLoop` begin.  With one candidate this is exactly the
    RetryLoop: the first attempt at once, then retryInterval backed off.
    """

    def __init__(self, settings: ClientSettings, targets: tuple[Connector, ...]) -> None:
        if not targets:
            raise ValueError("a reconnection needs at least one server to try")
        self.targets = targets
        self._loop = RetryLoop(settings, reconnect=True)
        self._next = 0

    @property
    def failures(self) -> int:
        """Failed attempts so far (an attempt fails when every candidate has)."""
        return self._loop.failures

    def candidates(self) -> tuple[Connector, ...]:
        return self.targets

    def next_connector(self) -> Connector:
        return self.targets[self._next]

    def retarget(self, targets: tuple[Connector, ...]) -> None:
        """The candidates changed during the reconnection (the topology named another backup): the attempts go on
        over the new ones, with the failures counted so far; the candidate being tried keeps its place when it is
        still one (so the next is the one after it), else the next attempt starts from the first."""
        if not targets or targets == self.targets:
            return
        current = self.targets[self._next]
        self.targets = targets
        self._next = targets.index(current) if current in targets else 0

    def failed(self, now_ms: int) -> int | None:
        """The candidate just tried failed at ``now_ms``: the next candidate at once, or after the last one the
        loop's next wait; None to give up."""
        self._next += 1
        if self._next < len(self.targets):
            return now_ms
        self._next = 0
        return self._loop.attempt_failed(now_ms)
