"""What the discovery group's cases listen with: a multicast receiver that keeps every datagram a broadcast
group sends, stamped on arrival with the monotonic clock and dissected through the codec's scapy layer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cck.codec import DiscoveryDatagram, encode_discovery
from cck.codec.scapy import ArtemisDiscovery
from cck.conformance.verdicts import NotObserved
from cck.reference.client import Connector, connector_of
from cck.reference.discovery import open_multicast_receiver

from ._kit import signalled

__all__ = ["BroadcastListener", "Heard"]


@dataclass(frozen=True)
class Heard:
    """One datagram as it arrived: when (``time.monotonic_ns()``), from where, its bytes and what they say."""

    at_ns: int
    sender: tuple[str, int]
    data: bytes
    datagram: DiscoveryDatagram | None
    error: str | None

    @property
    def exact(self) -> bool:
        """The datagram is exactly its encoding: no trailing bytes, nothing the codec would write differently."""
        return self.datagram is not None and encode_discovery(self.datagram) == self.data

    def advertises(self, host: str, port: int) -> bool:
        wanted = Connector(host, port)
        return self.datagram is not None and any(connector_of(c) == wanted for c in self.datagram.connectors)

    def to_json(self) -> dict[str, Any]:
        return {"at_ns": self.at_ns, "sender": list(self.sender), "bytes": len(self.data), "hex": self.data.hex(),
                "node_id": self.datagram.node_id if self.datagram else None,
                "unique_id": self.datagram.unique_id if self.datagram else None, "error": self.error}


def _dissect(data: bytes) -> tuple[DiscoveryDatagram | None, str | None]:
    layer = ArtemisDiscovery(data)
    datagram: DiscoveryDatagram | None = layer.datagram
    error: str | None = layer.getfieldval("error")
    return datagram, error


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, listener: BroadcastListener) -> None:
        self.listener = listener

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        at = time.monotonic_ns()
        datagram, error = _dissect(data)
        self.listener._heard(Heard(at, (str(addr[0]), int(addr[1])), data, datagram, error))


class BroadcastListener:
    """``async with BroadcastListener(group, port) as heard:`` collects datagrams until the block ends."""

    def __init__(self, group: str, port: int, interface: str = "127.0.0.1") -> None:
        self.group, self.port, self.interface = group, port, interface
        self.heard: list[Heard] = []
        self._changed = asyncio.Event()
        self._transport: asyncio.DatagramTransport | None = None

    async def __aenter__(self) -> BroadcastListener:
        sock = open_multicast_receiver(self.group, self.port, self.interface)
        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(lambda: _Protocol(self), sock=sock)
        self._transport = transport
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._transport is not None:
            self._transport.close()

    def _heard(self, heard: Heard) -> None:
        self.heard.append(heard)
        self._changed.set()

    def from_node(self, host: str, port: int, *, after_ns: int = 0) -> list[Heard]:
        """The datagrams that advertise ``host:port`` (one node's), received after ``after_ns``."""
        return [h for h in self.heard if h.at_ns > after_ns and h.advertises(host, port)]

    async def wait_for(self, done: Callable[[], bool], seconds: float, what: str) -> None:
        """Wait until ``done()`` holds, re-checked on every datagram; TimeoutError naming ``what`` after ``seconds``."""
        if not await signalled(self._changed, done, seconds):
            raise NotObserved(f"{what}: not within {seconds:.1f} s ({len(self.heard)} datagram(s) heard on "
                              f"{self.group}:{self.port}, joined on {self.interface})")

    async def quiet(self, heard: Callable[[], bool], seconds: float) -> bool:
        """Watch for ``seconds``; True when ``heard()`` became true (something arrived that should not have)."""
        try:
            await self.wait_for(heard, seconds, "quiet")
        except TimeoutError:
            return False
        return True
