"""Transport URIs of ``<acceptor>`` and ``<connector>``: ``tcp://host:port?key=value;key=value``.

As Artemis reads them: the query starts after the last ``?`` and is split on ``;`` and ``&``;
names and values are URL-decoded; ``host`` and ``port`` in the query override the authority;
host defaults to ``localhost`` and port to 61616 (netty ``TransportConstants`` DEFAULT_HOST and
DEFAULT_PORT).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote_plus

__all__ = ["TransportURI", "URIError", "parse_transport_uri"]

DEFAULT_HOST = "localhost"  # TC DEFAULT_HOST
DEFAULT_PORT = 61616  # TC DEFAULT_PORT
SCHEMES = ("tcp", "vm")

_AUTHORITY = re.compile(r"(?P<host>\[[^\]]*\]|[^:\[\]]*)(?::(?P<port>.*))?")


class URIError(ValueError):
    def __init__(self, reason: str, found: str | None = None) -> None:
        self.reason = reason
        self.found = found
        super().__init__(reason)


@dataclass(frozen=True)
class TransportURI:
    scheme: str
    host: str
    port: int
    params: dict[str, str]
    fragment: str


def _port(text: str) -> int:
    if not re.fullmatch(r"\d+", text) or int(text) > 65535:
        raise URIError("port must be an integer 0..65535", text)
    return int(text)


def parse_query(query: str) -> dict[str, str]:
    params: dict[str, str] = {}
    if not query:
        return params
    for part in re.split(r"[&;]", query):
        if not part:
            continue
        key, sep, value = part.partition("=")
        # a parameter without '=' has no value in Artemis (null); kept here as ''
        params[unquote_plus(key)] = unquote_plus(value) if sep else ""
    return params


def parse_transport_uri(text: str) -> TransportURI:
    text = text.strip()
    scheme, sep, rest = text.partition("://")
    if not sep or not scheme:
        raise URIError("expected a transport URI such as tcp://host:port?key=value", text)
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise URIError(f"unknown transport scheme '{scheme}' (Artemis knows {', '.join(SCHEMES)})", text)
    rest, _, fragment = rest.partition("#")
    q = rest.rfind("?")
    authority, query = (rest[:q], rest[q + 1 :]) if q >= 0 else (rest, "")
    authority = authority.rstrip("/")
    params = parse_query(query)
    if scheme == "vm":
        return TransportURI(scheme, "", -1, params, fragment)
    m = _AUTHORITY.fullmatch(authority)
    if m is None:
        raise URIError("malformed host:port", authority)
    host = m.group("host").strip("[]") or DEFAULT_HOST
    port = DEFAULT_PORT if m.group("port") is None else _port(m.group("port"))
    if "host" in params:
        host = params["host"]
    if "port" in params:
        port = _port(params["port"])
    return TransportURI(scheme, host, port, params, fragment)
