"""The asyncio transport around :class:`~reference.broker.BrokerCore`.

It owns the sockets and the clock and nothing else.  Bytes that arrive in one
event-loop iteration are all fed to the core first; then one ``flush`` makes
the storage durable (one fsync covering every connection's writes: the group
commit) and only then writes the replies, so no client hears "done" for
something a crash could still lose.

Resource handling: every accepted socket is registered with the core and
unregistered when it closes, whichever side closes it.  ``stop()`` sends
DISCONNECT to every client, flushes, closes sockets and the listener.

Error handling: bad input is the core's business (it answers with an EXCEPTION
and asks for that connection alone to be closed); an exception escaping the
core is logged and closes only the connection whose bytes caused it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable

from .broker import BrokerCore

__all__ = ["BrokerServer"]

LOG = logging.getLogger("reference.server")


class _Protocol(asyncio.Protocol):
    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        self.conn_id = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.conn_id = self.server.register(self, str(peer))

    def data_received(self, data: bytes) -> None:
        self.server.received(self.conn_id, data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.unregister(self.conn_id)


class BrokerServer:
    """Listens on one acceptor and drives the core."""

    def __init__(
        self,
        core: BrokerCore,
        host: str = "127.0.0.1",
        port: int = 61616,
        *,
        sync: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.core = core
        self.host = host
        self.port = port
        self.sync = sync
        self.clock = clock
        self._ids = itertools.count(1)
        self._protocols: dict[int, _Protocol] = {}
        self._server: asyncio.base_events.Server | None = None
        self._flush_scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def bound_port(self) -> int:
        """The port actually listened on (useful with port 0)."""
        assert self._server is not None
        assert self._server.sockets
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._server = await self._loop.create_server(lambda: _Protocol(self), self.host, self.port, reuse_address=True)
        self._arm_timer()
        LOG.info("listening", extra={"host": self.host, "port": self.bound_port})

    async def stop(self) -> None:
        """Graceful stop: DISCONNECT to all, flush, close."""
        self.core.shutdown()
        self._flush()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self._timer is not None:
            self._timer.cancel()
        for protocol in list(self._protocols.values()):
            if protocol.transport is not None:
                protocol.transport.close()
        LOG.info("stopped")

    # ---------------------------------------------------------------- protocol callbacks

    def register(self, protocol: _Protocol, peer: str) -> int:
        conn_id = next(self._ids)
        self._protocols[conn_id] = protocol
        self.core.connection_made(conn_id, self.clock(), peer)
        return conn_id

    def unregister(self, conn_id: int) -> None:
        if self._protocols.pop(conn_id, None) is not None:
            self.core.connection_lost(conn_id, self.clock())
            self._schedule_flush()

    def received(self, conn_id: int, data: bytes) -> None:
        try:
            self.core.receive(conn_id, data, self.clock())
        except Exception:  # one connection's failure must not stop the broker
            LOG.exception("internal error handling a connection's input; closing it", extra={"conn": conn_id})
            self._close(conn_id)
        self._schedule_flush()

    # ---------------------------------------------------------------- output

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled and self._loop is not None:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        output = self.core.take_output()
        closing = self.core.take_closing()
        if output and self.sync is not None:
            self.sync()  # group commit: one fsync for everything the batch stored
        for conn_id, data in output.items():
            protocol = self._protocols.get(conn_id)
            if protocol is not None and protocol.transport is not None and not protocol.transport.is_closing():
                protocol.transport.write(data)
        for conn_id in closing:
            self._close(conn_id)
        self._arm_timer()

    def _close(self, conn_id: int) -> None:
        protocol = self._protocols.get(conn_id)
        if protocol is not None and protocol.transport is not None:
            protocol.transport.close()

    def _arm_timer(self) -> None:
        if self._loop is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0.0, self.core.next_deadline() - self.clock())
        self._timer = self._loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.core.tick(self.clock())
        self._flush()

