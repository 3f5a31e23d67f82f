"""The asyncio transport around :class:`~reference.broker.BrokerCore`.

It owns the sockets and the clock and nothing else: it passes the core monotonic
milliseconds (``reference._clock.monotonic_ms``), and the core's deadlines are in them.  Bytes that arrive in one
event-loop iteration are all fed to the core first; then one ``flush`` takes
the replies (a *batch*) and the storage is made durable before they are
written, so no client hears "done" for something a crash could still lose.

Group commit, with the fsync off the event loop: the loop's half of a sync
(``GroupCommit.begin_sync``: write what was stored) runs at the flush, the
``fsync`` itself in a worker thread while the loop goes on decoding and
storing the next batches.  At most one sync is in flight; it covers every
batch taken before it began, and the batches taken meanwhile wait for the
next one, which starts as soon as it returns.  Batches are written strictly
in the order they were taken (a FIFO), so one connection's replies never
overtake each other, and a batch that stored nothing still waits behind one
that did.  A close the core asked for happens after the output taken with it.

One exception, as in Artemis: a producer credit grant confirms nothing stored,
so the core queues it apart (``early``) and it is written at once -- unless a
counted packet of the same connection is still waiting, because the order of
counted packets on the wire must stay the resend cache's order (a reattach
replays by position).  Holding grants for the fsync would pace a producer by
one window per disk round trip.

Resource handling: every accepted socket is registered with the core and
unregistered when it closes, whichever side closes it.  ``stop()`` sends
DISCONNECT to every client, flushes, closes sockets and the listener.

Error handling: bad input is the core's business (it answers with an EXCEPTION
and asks for that connection alone to be closed); an exception escaping the
core is logged and closes only the connection whose bytes caused it.  A sync
that fails (the journal then refuses further work) confirms nothing: the
replies waiting for it are dropped and their connections closed.

TLS (an acceptor with ``sslEnabled``): given an :class:`ssl.SSLContext`, the listener serves TLS only, each
connection behind asyncio's TLS layer (``reference._tls.server_layers``: it also sends the alert of a failed
handshake).  The handshake runs on the loop without blocking it (OpenSSL over memory buffers) and
``connection_made`` comes only once it is complete, so the core never sees a connection that has not finished one:
a plain TCP client (``ARTEMIS`` and frames) fails the handshake at its first bytes and is closed, and one that sends
too little to fail it is closed after :data:`reference._tls.TLS_HANDSHAKE_TIMEOUT_S`.

Every change to the core goes through one path (:func:`reference.broker.apply_input`), shown first to
``inputs`` when given: a replication that mirrors the core to a backup forwards them (``reference/ha``).  Such a
replication's group commit also holds the early credit grants (``hold_early``): nothing reaches a client before
the backup has the input that caused it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import ssl
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from ._clock import monotonic_ms
from ._tls import TLS_HANDSHAKE_TIMEOUT_S, server_layers
from .broker import BrokerCore, CoreInput, InputKind, apply_input

__all__ = ["BrokerServer", "GroupCommit", "HandOver", "StreamHandler", "SyncInProgress"]

LOG = logging.getLogger("cck.reference.server")


class SyncInProgress(Protocol):
    """A sync whose loop-side half is done (see :class:`reference.journal.PendingSync`)."""

    def wait(self) -> None:
        """The blocking half (the fsync); runs in a worker thread."""

    def done(self, error: BaseException | None = None) -> None:
        """Back on the loop, with what ``wait`` raised."""


class GroupCommit(Protocol):
    """What the server needs of durable storage."""

    def begin_sync(self) -> SyncInProgress | None:
        """Start making everything stored so far durable; ``None`` when nothing is waiting for that."""


class StreamHandler(Protocol):
    """What speaks on a connection the core handed over (a backup's journal replication)."""

    def data_received(self, data: bytes) -> None: ...

    def connection_lost(self, exc: Exception | None) -> None: ...


#: Takes a connection the core is done with (its transport) and returns what reads from it from then on.
HandOver = Callable[[asyncio.Transport], StreamHandler]


@dataclass(slots=True)
class _Batch:
    """What one flush took from the core: replies per connection, then connections to close."""

    output: dict[int, bytes]
    closing: set[int]
    counted: frozenset[int] = frozenset()  # connections with a counted (resend-cached) packet in ``output``


class _Protocol(asyncio.Protocol):
    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        self.conn_id = 0
        self.transport: asyncio.Transport | None = None
        self.handler: StreamHandler | None = None  # once the core handed the connection over

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        tls = transport.get_extra_info("ssl_object")
        certificate = tls.getpeercert(binary_form=True) if isinstance(tls, ssl.SSLObject | ssl.SSLSocket) else None
        self.conn_id = self.server.register(self, str(peer), certificate)

    def data_received(self, data: bytes) -> None:
        if self.handler is not None:
            self.handler.data_received(data)
        else:
            self.server.received(self.conn_id, data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.handler is not None:
            self.server.handed_lost(self)
            self.handler.connection_lost(exc)
        else:
            self.server.unregister(self.conn_id)


class BrokerServer:
    """Listens on one acceptor and drives the core."""

    def __init__(
        self,
        core: BrokerCore,
        host: str = "127.0.0.1",
        port: int = 61616,
        *,
        group_commit: GroupCommit | None = None,
        clock: Callable[[], int] = monotonic_ms,
        hand_over: HandOver | None = None,
        inputs: Callable[[CoreInput], None] | None = None,
        hold_early: Callable[[], bool] | None = None,
        first_conn_id: int = 1,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.core = core
        self.tls = tls  # the acceptor's TLS (None: plain TCP)
        self.host = host
        self.port = port
        self.group_commit = group_commit
        self.clock = clock
        self._inputs = inputs
        self._hold_early = hold_early
        # a core that already knows connections (a backup's mirror of its primary) keeps their IDs
        self._ids = itertools.count(first_conn_id)
        self._protocols: dict[int, _Protocol] = {}
        self._server: asyncio.base_events.Server | None = None
        self._flush_scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._covered: list[_Batch] = []  # written when the sync in flight returns
        self._next: list[_Batch] = []  # taken while it was in flight: covered by the next sync
        self._in_flight: asyncio.Future[None] | None = None
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._counted_waiting: dict[int, int] = {}  # connection → waiting batches holding a counted packet for it
        self._fsync_thread: ThreadPoolExecutor | None = None
        self._closing = False  # stop() began closing the connections: one accepted from now on is closed at once
        self._hand_over = hand_over
        self._handing: set[int] = set()  # to hand over once the output taken with them is written
        self._handed: list[_Protocol] = []  # handed over, still open (closed by stop())

    @property
    def bound_port(self) -> int:
        """The port actually listened on (useful with port 0)."""
        assert self._server is not None
        assert self._server.sockets
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self.group_commit is not None:
            self._fsync_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fsync")
        self._server = await self._listen(self._loop)
        self._arm_timer()
        LOG.info("listening", extra={"host": self.host, "port": self.bound_port, "tls": self.tls is not None})

    async def _listen(self, loop: asyncio.AbstractEventLoop) -> asyncio.base_events.Server:
        tls = self.tls
        layers = None if tls is None else server_layers(loop, lambda: _Protocol(self), tls, TLS_HANDSHAKE_TIMEOUT_S)
        if layers is not None:  # TLS, each connection behind a layer that sends a failed handshake's alert
            return await loop.create_server(layers, self.host, self.port, reuse_address=True)
        return await loop.create_server(lambda: _Protocol(self), self.host, self.port, reuse_address=True, ssl=tls,
                                        ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if tls is not None else None)

    async def __aenter__(self) -> BrokerServer:
        """``async with BrokerServer(core, host, 0) as server:`` — started on entry, stopped gracefully on exit."""
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    async def stop(self, *, disconnect: bool = True, drained: Callable[[], None] | None = None) -> None:
        """Graceful stop: DISCONNECT to all, flush, close.  Without ``disconnect`` the clients are told nothing:
        their connections just close, so they fail over (a backup handing the store back to its primary)."""
        if disconnect:
            self.core.shutdown()
        self._flush()
        await self._idle()  # the DISCONNECTs and every reply still waiting are out before the sockets close
        if drained is not None:
            drained()  # nothing more will be stored: the last word to what the server handed over (its backups)
        if self._fsync_thread is not None:
            # Idle: nothing is left for it.  A sync still asked for (a connection lost while closing) goes to the
            # loop's default executor, which asyncio.run shuts down itself.
            self._fsync_thread.shutdown(wait=False)
            self._fsync_thread = None
        if self._server is not None:
            self._server.close()
        if self._timer is not None:
            self._timer.cancel()
        # closed before waiting for the listener: from Python 3.12 wait_closed() also waits for every accepted
        # connection, and without DISCONNECT (a failback) the clients would keep theirs open (a transport writes
        # what it still holds before it closes)
        self._closing = True
        for protocol in [*self._protocols.values(), *self._handed]:
            if protocol.transport is not None:
                protocol.transport.close()
        if self._server is not None:
            await self._server.wait_closed()
        LOG.info("stopped")

    # ---------------------------------------------------------------- protocol callbacks

    def register(self, protocol: _Protocol, peer: str, certificate: bytes | None = None) -> int:
        """The connection's ID; 0 (closed at once, never seen by the core) once the server is closing: the
        listener may have accepted it just before it closed, and its ``connection_made`` comes a loop turn later."""
        if self._closing:
            assert protocol.transport is not None
            protocol.transport.close()
            return 0
        conn_id = next(self._ids)
        self._protocols[conn_id] = protocol
        made = peer.encode("utf-8") + (b"\0" + certificate if certificate else b"")
        self._feed(CoreInput(InputKind.MADE, self.clock(), conn_id, made))
        return conn_id

    def _feed(self, event: CoreInput) -> None:
        """The one way into the core (see the module's docstring)."""
        if self._inputs is not None:
            self._inputs(event)
        apply_input(self.core, event)

    def handed_lost(self, protocol: _Protocol) -> None:
        with contextlib.suppress(ValueError):
            self._handed.remove(protocol)

    def unregister(self, conn_id: int) -> None:
        if self._protocols.pop(conn_id, None) is not None:
            self._feed(CoreInput(InputKind.LOST, self.clock(), conn_id))
            self._schedule_flush()

    def received(self, conn_id: int, data: bytes) -> None:
        try:
            self._feed(CoreInput(InputKind.RECEIVED, self.clock(), conn_id, data))
        except Exception:  # one connection's failure must not stop the broker
            LOG.exception("internal error handling a connection's input; closing it", extra={"conn": conn_id})
            self._close(conn_id)
        self._schedule_flush()

    def poke(self) -> None:
        """Something changed the core from outside a connection (a cluster bridge): deliver and write."""
        self._feed(CoreInput(InputKind.DELIVER, self.clock()))
        self._schedule_flush()

    # ---------------------------------------------------------------- output

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled and self._loop is not None:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        early, output, counted = self.core.take_output_split()
        closing = self.core.take_closing()
        handed = self.core.take_handed()
        if handed:  # handed over where a close would happen: after the output taken with them
            self._handing |= handed
            closing |= handed
        hold_early = self._hold_early is not None and self._hold_early()
        for conn_id, data in early.items():
            # held for the group commit with the rest when the backup must have the input first (mirroring), or
            # when a counted packet of the connection is still waiting (the wire order is the resend cache's)
            if hold_early or self._counted_waiting.get(conn_id):
                output[conn_id] = data + output.get(conn_id, b"")
            else:  # a credit grant needs no sync (as in Artemis); holding it would pace producers by the fsync
                self._write_batch({conn_id: data}, ())
        if output or closing:
            batch = _Batch(output, closing, counted)
            for conn_id in counted:
                self._counted_waiting[conn_id] = self._counted_waiting.get(conn_id, 0) + 1
            if self._in_flight is None:
                self._start_sync([batch])
            else:  # covered by the next sync, which starts when this one returns
                self._next.append(batch)
        self._arm_timer()

    def _start_sync(self, batches: list[_Batch]) -> None:
        """With no sync in flight: begin the one covering ``batches``, or write them now if nothing is unsynced."""
        try:
            pending = self.group_commit.begin_sync() if self.group_commit is not None else None
        except Exception:
            LOG.exception("journal sync failed; closing the connections whose replies depended on it")
            self._abandon(batches)
            return
        if pending is None:  # nothing stored since the last sync: no reply here waits for the disk
            self._write(batches)
            return
        assert self._loop is not None
        self._covered = batches
        self._in_flight = self._loop.run_in_executor(self._fsync_thread, pending.wait)
        self._in_flight.add_done_callback(functools.partial(self._synced, pending))

    def _synced(self, pending: SyncInProgress, future: asyncio.Future[None]) -> None:
        """On the loop, once the worker's fsync returned: the covered batches may go out."""
        self._in_flight = None
        error = asyncio.CancelledError() if future.cancelled() else future.exception()
        batches, self._covered = self._covered, []
        pending.done(error)
        if error is None:
            self._write(batches)
        else:
            LOG.error("journal sync failed; closing the connections whose replies depended on it", exc_info=error)
            self._abandon(batches)
        if self._next:
            batches, self._next = self._next, []
            self._start_sync(batches)
        if self._in_flight is None:
            for waiter in self._idle_waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self._idle_waiters.clear()

    async def _idle(self) -> None:
        """Until no sync is in flight and no batch waits (at once if that is already so)."""
        if self._in_flight is None:
            return
        assert self._loop is not None
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._idle_waiters.append(waiter)
        await waiter

    def _release(self, batches: list[_Batch]) -> None:
        """These batches leave the queue (written or abandoned): their counted packets no longer hold early ones."""
        for batch in batches:
            for conn_id in batch.counted:
                left = self._counted_waiting.get(conn_id, 0) - 1
                if left > 0:
                    self._counted_waiting[conn_id] = left
                else:
                    self._counted_waiting.pop(conn_id, None)

    def _write(self, batches: list[_Batch]) -> None:
        """Write batches in the order they were taken; one write per connection, closes after their output."""
        self._release(batches)
        if len(batches) == 1:  # the common case, kept cheap: nothing to merge
            self._write_batch(batches[0].output, batches[0].closing)
            return
        chunks: dict[int, list[bytes]] = {}
        closing: dict[int, None] = {}  # ordered set
        for batch in batches:
            for conn_id, data in batch.output.items():
                if conn_id not in closing:  # what a closed connection was sent later is never written
                    chunks.setdefault(conn_id, []).append(data)
            closing.update(dict.fromkeys(batch.closing))
        self._write_batch({conn_id: b"".join(parts) for conn_id, parts in chunks.items()}, closing)

    def _write_batch(self, output: dict[int, bytes], closing: Iterable[int]) -> None:
        for conn_id, data in output.items():
            protocol = self._protocols.get(conn_id)
            if protocol is not None and protocol.transport is not None and not protocol.transport.is_closing():
                protocol.transport.write(data)
        for conn_id in closing:
            self._close(conn_id)

    def _abandon(self, batches: list[_Batch]) -> None:
        """The storage could not be made durable: never confirm it; close the connections that waited for it."""
        self._release(batches)
        for batch in batches:
            for conn_id in (*batch.output, *batch.closing):
                self._close(conn_id)

    def _close(self, conn_id: int) -> None:
        protocol = self._protocols.get(conn_id)
        if conn_id in self._handing:
            self._handing.discard(conn_id)
            if protocol is not None and protocol.transport is not None and self._hand_over is not None \
                    and not protocol.transport.is_closing():
                del self._protocols[conn_id]
                self._feed(CoreInput(InputKind.LOST, self.clock(), conn_id))
                protocol.handler = self._hand_over(protocol.transport)
                self._handed.append(protocol)
                self._schedule_flush()
                return
        if protocol is not None and protocol.transport is not None:
            protocol.transport.close()

    def _arm_timer(self) -> None:
        if self._loop is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0, self.core.next_deadline() - self.clock()) / 1000
        self._timer = self._loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._feed(CoreInput(InputKind.TICK, self.clock()))
        self._flush()

