"""A waiting server tells the active one that it is there: on channel 3 of a connection of its own,
CLUSTER_CONNECT with the cluster credentials, then NODE_ANNOUNCE with ``backup = true``, the node ID it
backs up and its own connector (notes §5, the packet catalogue).  The active server pairs that connector
with its own in the topology its clients hear, for as long as this connection lives; pings keep it alive.

When the connection fails the announcer tries again after ``retry_s``, going through the candidates (the
cluster connection's static connectors) in turn, until it is cancelled: the waiting server activates then, or
stops."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TypeVar

from cck.codec import (
    PREAMBLE,
    ClusterConnectMessage,
    ClusterConnectReplyMessage,
    CodecError,
    FrameDecoder,
    NodeAnnounceMessage,
    Packet,
    Ping,
    TransportConfiguration,
    encode_packet,
)

__all__ = ["BackupAnnouncer"]

P = TypeVar("P", bound=Packet)

LOG = logging.getLogger("cck.reference.ha")

_CLUSTER_CHANNEL = 3
#: The connection TTL the announcer asks for; it pings at a third of it.
_TTL_MS = 30_000


class BackupAnnouncer:
    """Announces ``connector`` as the backup of ``node_id`` to whichever of ``candidates`` (host, port) answers."""

    def __init__(self, node_id: str, connector: TransportConfiguration, candidates: Sequence[tuple[str, int]], *,
                 user: str, password: str, retry_s: float = 0.5) -> None:
        self.node_id = node_id
        self.connector = connector
        self.candidates = tuple(candidates)
        self.user = user
        self.password = password
        self.retry_s = retry_s
        #: Whether an active server accepted the announcement on the connection open now.
        self.announced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and self.candidates:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        turn = 0
        while True:
            host, port = self.candidates[turn % len(self.candidates)]
            turn += 1
            try:
                await self._announce_to(host, port)
            except (OSError, CodecError, asyncio.IncompleteReadError) as exc:
                LOG.debug("backup announcement failed", extra={"host": host, "port": port, "detail": str(exc)})
            self.announced.clear()
            await asyncio.sleep(self.retry_s)

    async def _announce_to(self, host: str, port: int) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(PREAMBLE + encode_packet(Ping(_TTL_MS), 0)
                         + encode_packet(ClusterConnectMessage(self.user, self.password), _CLUSTER_CHANNEL))
            await writer.drain()
            decoder = FrameDecoder()
            reply = await self._next(reader, decoder, ClusterConnectReplyMessage, "answering the cluster login")
            if not reply.authorized:
                LOG.warning("the active server refused the cluster credentials", extra={"host": host, "port": port})
                return
            writer.write(encode_packet(NodeAnnounceMessage(self.node_id, backup=True, connector=None,
                                                           backup_connector=self.connector), _CLUSTER_CHANNEL)
                         + encode_packet(Ping(_TTL_MS), 0))
            await writer.drain()
            # NODE_ANNOUNCE has no answer; the ping's, which the server sends after it handled what came before it
            # on this connection, says the announcement is in (and the clients were told)
            await self._next(reader, decoder, Ping, "answering the ping after the announcement")
            self.announced.set()
            LOG.info("announced as backup", extra={"host": host, "port": port, "node": self.node_id})
            await self._keep_alive(reader, writer)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    @staticmethod
    async def _next(reader: asyncio.StreamReader, decoder: FrameDecoder, kind: type[P], waiting_for: str) -> P:
        """The next packet of ``kind`` the active server sends (the ones before it are of no use here)."""
        while True:
            data = await reader.read(65536)
            if not data:
                raise ConnectionResetError(f"the active server closed the connection before {waiting_for}")
            decoder.feed(data)
            for frame in decoder:
                if isinstance(frame.packet, kind):
                    return frame.packet

    async def _keep_alive(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Ping until the active server goes (its end of the connection closes)."""

        async def ping() -> None:
            while True:
                await asyncio.sleep(_TTL_MS / 3000)
                writer.write(encode_packet(Ping(_TTL_MS), 0))
                await writer.drain()

        pinger = asyncio.ensure_future(ping())
        try:
            while await reader.read(65536):
                pass  # pings and topology the server may send: nothing a waiting server acts on
        finally:
            pinger.cancel()
            # gather, not a suppressed CancelledError: a cancellation of this task arriving here (the announcer
            # stopped just as the connection ended) must go on, or the task would swallow it and retry forever
            await asyncio.gather(pinger, return_exceptions=True)
