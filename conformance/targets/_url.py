"""A broker somebody else runs, known only by its URL: black-box cases only.

Its node cannot be started, stopped, killed or restarted by the kit; asking raises
:class:`UnsupportedByTarget` naming the capability, which the suite reports as UNSUPPORTED.
"""

from __future__ import annotations

from typing import NoReturn
from urllib.parse import urlsplit

from ._base import CONTROL, KILL, RESTART, Node, Target
from ._errors import UnsupportedByTarget

__all__ = ["UNKNOWN_VERSION", "UrlNode", "UrlTarget", "check_url"]

UNKNOWN_VERSION = "unknown"


def check_url(url: str) -> str:
    """Return ``url`` if it is ``tcp://host:port[?params]``; raise ValueError saying what is wrong."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"bad broker URL {url!r}: {exc}") from None
    if parts.scheme != "tcp":
        raise ValueError(f"bad broker URL {url!r}: the scheme must be tcp:// (got {parts.scheme or 'none'!r})")
    if not parts.hostname:
        raise ValueError(f"bad broker URL {url!r}: no host")
    if port is None:
        raise ValueError(f"bad broker URL {url!r}: no port (the core acceptor's, e.g. tcp://{parts.hostname}:61616)")
    if parts.path not in ("", "/") or parts.fragment:
        raise ValueError(f"bad broker URL {url!r}: only tcp://host:port with optional ?parameters")
    return url


class UrlNode(Node):
    def __init__(self, target: UrlTarget, name: str, url: str) -> None:
        super().__init__(name)
        self._target = target
        self._url = url

    @property
    def url(self) -> str:
        return self._url

    @property
    def is_running(self) -> bool:
        # the kit cannot know without connecting; a case that needs to know connects and sees
        return True

    def _refuse(self, capability: str, action: str) -> NoReturn:
        raise UnsupportedByTarget(self._target.name, capability, self._target.capabilities, f"{action} {self.name}")

    def start(self) -> None:
        self._refuse(CONTROL, "start")

    def stop(self) -> None:
        self._refuse(CONTROL, "stop")

    def kill(self) -> None:
        self._refuse(KILL, "kill")

    def restart(self, graceful: bool = True) -> None:
        self._refuse(RESTART, "restart")

    def logs(self, lines: int = 200) -> str:
        return ""  # the broker's log is not ours to read

    def close(self) -> None:
        """Nothing to release."""


class UrlTarget(Target):
    """``UrlTarget("tcp://broker:61616", version="2.44.0")``; the version is what the user says."""

    name = "url"

    def __init__(
        self, url: str, *, version: str | None = None, protocol_version: int | None = None, node_name: str = "node0"
    ) -> None:
        super().__init__(version or UNKNOWN_VERSION, frozenset(), None, protocol_version)
        self._nodes = (UrlNode(self, node_name, check_url(url)),)

    @property
    def nodes(self) -> tuple[UrlNode, ...]:
        return self._nodes

    def start(self) -> None:
        """Nothing to do: the broker is already running (somebody else's)."""

    def stop(self) -> None:
        self.require(CONTROL, action="stop its brokers")

    def close(self) -> None:
        """Nothing to release."""
