"""Client-side UDP discovery (notes §12): an asyncio receiver feeding the sans-IO
:class:`reference.discovery.DiscoveryTable` the broker's discovery groups use too (Artemis's
``DiscoveryGroup`` rules: own node ignored, one entry per node with the last connector of a datagram,
expiry evaluated only when a datagram arrives), and the wait for the first broadcast that
``connect("udp://...")`` does.

::

    async with DiscoveryReceiver(DiscoveryEndpoint("231.7.7.7", 9876, "127.0.0.1")) as receiver:
        await receiver.wait_for_broadcast(10_000)
        receiver.connectors  # (Connector("10.0.0.5", 61616),) in discovery order
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from cck.codec import ExceptionType

from .._clock import monotonic_ms
from ..discovery import (
    ConnectorChanged,
    DiscoveryChange,
    DiscoveryTable,
    MalformedDatagram,
    NodeFound,
    SameNodeNewUniqueId,
    Sender,
    open_multicast_receiver,
)
from ._errors import ConnectionFailed
from ._locator import Connector, DiscoveryEndpoint, connector_of

LOG = logging.getLogger("cck.reference.client.discovery")

__all__ = ["DiscoveryReceiver", "connector_of", "discover"]


def _warning(change: DiscoveryChange) -> str | None:
    """What the client warns about: a datagram it cannot read, two servers with one node ID, and a
    (new or changed) connector it cannot connect to."""
    if isinstance(change, MalformedDatagram):
        host, port = change.sender
        return f"ignored a malformed discovery datagram from {host}:{port}: {change.error}"
    if isinstance(change, SameNodeNewUniqueId):
        return (f"multiple servers broadcasting node id {change.node_id} "
                f"(unique id {change.old_unique_id} then {change.new_unique_id})")
    if isinstance(change, NodeFound | ConnectorChanged):
        config = change.connector if isinstance(change, NodeFound) else change.new
        if connector_of(config) is None:
            host, port = change.sender
            return (f"node {change.node_id} (from {host}:{port}) announces connector {config.name!r} "
                    f"({config.factory_class_name}, params { {p.key: p.value for p in config.params} }), "
                    "which is not a TCP host:port the kit can connect to")
    return None


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, receiver: DiscoveryReceiver) -> None:
        self.receiver = receiver

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.receiver.datagram_received(data, (str(addr[0]), int(addr[1])))

    def error_received(self, exc: Exception) -> None:
        LOG.warning("discovery on %s: %s", self.receiver.endpoint.url, exc)


class DiscoveryReceiver:
    """Joins the group on ``endpoint.local_bind_address`` (:func:`reference.discovery.open_multicast_receiver`)
    and feeds every datagram to a :class:`~reference.discovery.DiscoveryTable`.

    ``node_id`` is the receiver's own (a random UUID by default, as Artemis's client); ``clock_ms`` gives
    the ``now_ms`` of each datagram's arrival (monotonic ms, ``reference._clock``), which the table takes."""

    def __init__(self, endpoint: DiscoveryEndpoint, *, node_id: str | None = None,
                 clock_ms: Callable[[], int] = monotonic_ms) -> None:
        self.endpoint = endpoint
        self.clock_ms = clock_ms
        self.table = DiscoveryTable(node_id or str(uuid.uuid4()), endpoint.refresh_timeout_ms)
        #: Every datagram that arrived: who sent it and what it changed in the table.
        self.arrivals: list[tuple[Sender, tuple[DiscoveryChange, ...]]] = []
        self._broadcast = asyncio.Event()
        self._transport: asyncio.DatagramTransport | None = None

    @property
    def node_id(self) -> str:
        return self.table.node_id

    @property
    def connectors(self) -> tuple[Connector, ...]:
        """The TCP connectors of the known nodes, in discovery order (an entry whose connector is not a
        TCP host:port is left out; it was warned about when it arrived)."""
        found = (connector_of(entry.connector) for entry in self.table.entries)
        return tuple(c for c in found if c is not None)

    @property
    def where(self) -> str:
        """``group:port (joined on address)``, for messages."""
        endpoint = self.endpoint
        return f"{endpoint.group_address}:{endpoint.group_port} (joined on {endpoint.local_bind_address})"

    async def open(self) -> None:
        endpoint = self.endpoint
        try:
            sock = open_multicast_receiver(endpoint.group_address, endpoint.group_port, endpoint.local_bind_address)
        except OSError as exc:
            raise ConnectionFailed(f"cannot join the discovery group {self.where}: {exc}") from exc
        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(lambda: _Datagrams(self), sock=sock)
        self._transport = transport

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    async def wait_for_broadcast(self, timeout_ms: int) -> bool:
        """Wait (at most ``timeout_ms``) for a datagram that counts as a broadcast since the last wait;
        as Artemis's ``waitForBroadcast``, the flag is consumed."""
        try:
            await asyncio.wait_for(self._broadcast.wait(), timeout_ms / 1000)
        except TimeoutError:
            return False
        self._broadcast.clear()
        return True

    def datagram_received(self, data: bytes, sender: Sender) -> tuple[DiscoveryChange, ...]:
        """Feed one datagram to the table (the socket calls this): warn about what is wrong with it, and end
        the wait for a broadcast when it is another node's well-formed datagram (with connectors or not)."""
        broadcasts = self.table.broadcasts
        changes = self.table.receive(data, sender, self.clock_ms())
        self.arrivals.append((sender, changes))
        for change in changes:
            warning = _warning(change)
            if warning is not None:
                LOG.warning("discovery on %s: %s", self.where, warning)
        if self.table.broadcasts != broadcasts:
            self._broadcast.set()
        return changes

    async def __aenter__(self) -> DiscoveryReceiver:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


async def discover(endpoint: DiscoveryEndpoint, initial_connect_attempts: int, *,
                   clock_ms: Callable[[], int] = monotonic_ms) -> DiscoveryReceiver:
    """Open a receiver and wait for the first broadcast, as ServerLocator does before connecting (notes §12.2).

    Each wait lasts ``initial_wait_timeout_ms``; with ``initialConnectAttempts`` N > 0 a timed-out wait is
    retried N times (Artemis's ``executeDiscovery``: N + 1 waits in all), otherwise it fails at once.  Returns
    the open receiver (the caller closes it) once it knows at least one TCP connector; raises
    :class:`ConnectionFailed` (``CONNECTION_TIMEDOUT``) when nothing arrived."""
    receiver = DiscoveryReceiver(endpoint, clock_ms=clock_ms)
    await receiver.open()
    try:
        waits = 1 + max(0, initial_connect_attempts)
        timeout = endpoint.initial_wait_timeout_ms
        for wait in range(1, waits + 1):
            if await receiver.wait_for_broadcast(timeout):
                break
            if wait < waits:
                LOG.warning("discovery on %s: no broadcast within %d ms, waiting again (%d of %d)",
                            receiver.where, timeout, wait + 1, waits)
        else:
            detail = f" ({waits} waits: initialConnectAttempts={initial_connect_attempts})" if waits > 1 else ""
            raise ConnectionFailed(f"no broadcast on {receiver.where} within {timeout} ms{detail}",
                                   int(ExceptionType.CONNECTION_TIMEDOUT))
        if not receiver.connectors:
            nodes = ", ".join(entry.node_id for entry in receiver.table.entries) or "none"
            raise ConnectionFailed(f"the broadcasts on {receiver.where} name no TCP connector to connect to "
                                   f"(nodes: {nodes})")
    except BaseException:
        receiver.close()
        raise
    return receiver
