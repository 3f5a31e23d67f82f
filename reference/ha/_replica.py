"""The backup's side of journal replication: a connection of its own to the primary (the ARTEMIS preamble, a ping,
CLUSTER_CONNECT with the cluster credentials, then KIT_REPLICA_SUBSCRIBE on channel 3), a journal of its own
that takes the primary's records as they come (:meth:`Journal.replay`), made durable before each
acknowledgement.  See ``_source.py`` for the primary's side.

The primary's live state replaces whatever the backup's journal held: it is started afresh at KIT_REPLICA_BEGIN.
What it held is kept beside it (``<journal>.previous``) until the new one holds the primary's whole state, and
put back if the stream ends before that, so a server never ends up with half a journal; the node ID it will serve
as is written beside it once synchronised.  :meth:`Replica.follow` returns how the stream ended: the
primary stopped (gracefully, saying whether to take over) or was lost; a backup takes over only with a journal
that was synchronised in full.

When the primary mirrors its core (KIT_REPLICA_BEGIN says so), the journal synchronised with the live state is
handed to ``make_mirror``, which recovers a core from it (:class:`Mirror`); the primary's inputs then go to that
core, which writes the journal from there on, and the stream's end carries it (``ReplicaEnd.mirror``) for the
server that takes over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cck.codec import (
    PREAMBLE,
    ClusterConnectMessage,
    ClusterConnectReplyMessage,
    CodecError,
    FrameDecoder,
    Ping,
    ReplicaAck,
    ReplicaBegin,
    ReplicaInput,
    ReplicaRecords,
    ReplicaStopping,
    ReplicaSubscribe,
    encode_packet,
)

from ..journal import Journal, JournalError
from ._mirror import Mirror

__all__ = ["Replica", "ReplicaEnd"]

LOG = logging.getLogger("cck.reference.ha")

_CLUSTER_CHANNEL = 3


@dataclass(frozen=True, slots=True)
class ReplicaEnd:
    """How following the primary ended.  ``how``: ``refused`` (no connection, or the cluster login or the
    subscription was refused), ``lost`` (the connection broke), ``stopped`` (the primary said it stops);
    ``synced``: the backup's journal holds the primary's whole state up to the end; ``failover``: a stopping
    primary asked its backup to take over."""

    how: Literal["refused", "lost", "stopped"]
    synced: bool
    failover: bool = False
    detail: str = ""
    #: the mirror of the primary's core, when it mirrored (the caller takes over with it, or closes it)
    mirror: Mirror | None = None


class Replica:
    """Follows a primary into ``journal_dir`` (a directory of its own); ``node_id_file`` gets the primary's node
    ID.  One :meth:`follow` at a time."""

    def __init__(self, journal_dir: Path, node_id_file: Path, *, user: str, password: str, name: str,
                 file_size: int = 10 * 1024 * 1024, check_period_ms: int = 30_000, ttl_ms: int = 60_000,
        make_mirror: Callable[[ReplicaBegin], Mirror] | None = None) -> None:
        self.journal_dir = journal_dir
        self.node_id_file = node_id_file
        self.user = user
        self.password = password
        self.name = name
        self.file_size = file_size
        # the cluster connection's failure detection: a ping every check period, and a primary that sent nothing
        # for a whole TTL (a partition, a hung host: no FIN ever comes) is lost
        self.check_period_ms = check_period_ms
        self.ttl_ms = ttl_ms
        #: recovers a core from the synchronised journal when the primary mirrors its core
        self.make_mirror = make_mirror
        self._mirror: Mirror | None = None
        #: Set once the journal holds the primary's whole live state (the backup may take over from then on).
        self.synced = asyncio.Event()
        self.stored = 0  # records of the current stream made durable

    @property
    def mirror(self) -> Mirror | None:
        """The mirror of the primary's core while the current stream mirrors it (then with the stream's end)."""
        return self._mirror

    async def follow(self, host: str, port: int) -> ReplicaEnd:
        """Connect to the primary at ``host:port`` and store what it sends until the stream ends."""
        self.synced.clear()
        self.stored = 0
        self._mirror = None
        begin: ReplicaBegin | None = None
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError as exc:
            return ReplicaEnd("refused", False, detail=str(exc))
        journal: Journal | None = None
        node_id = ""
        pinger = asyncio.ensure_future(self._ping(writer))
        try:
            writer.write(PREAMBLE + encode_packet(Ping(self.ttl_ms), 0)
                         + encode_packet(ClusterConnectMessage(self.user, self.password), _CLUSTER_CHANNEL))
            decoder = FrameDecoder()
            while True:
                try:
                    data = await asyncio.wait_for(reader.read(1024 * 1024), self.ttl_ms / 1000)
                except TimeoutError:
                    return self._end("lost", f"nothing from the primary for the connection TTL ({self.ttl_ms} ms)")
                if not data:
                    return self._end("lost", "the primary closed the connection")
                decoder.feed(data)
                upto = None
                for frame in decoder:
                    packet = frame.packet
                    if isinstance(packet, ClusterConnectReplyMessage):
                        if not packet.authorized:
                            return self._end("refused", "the primary refused the cluster credentials")
                        writer.write(encode_packet(ReplicaSubscribe(self.name), _CLUSTER_CHANNEL))
                    elif isinstance(packet, ReplicaBegin):
                        if packet.mirror and self.make_mirror is None:
                            return self._end("refused", "the primary mirrors its core; this backup cannot")
                        journal = self._start_afresh()
                        node_id = packet.node_id
                        begin = packet
                    elif isinstance(packet, ReplicaRecords):
                        if journal is None:
                            return self._end("lost", "records before KIT_REPLICA_BEGIN")
                        journal.replay(packet.records)
                        upto = packet.upto
                        if packet.synced and not self.synced.is_set():
                            journal.sync()
                            self._synchronised(node_id)
                            if begin is not None and begin.mirror and self.make_mirror is not None:
                                # the core takes the journal from here (it writes what the inputs store)
                                journal.close()
                                journal = None
                                self._mirror = self.make_mirror(begin)
                            self.synced.set()
                            LOG.info("backup synchronised with the primary",
                                     extra={"records": upto, "mirror": self._mirror is not None})
                    elif isinstance(packet, ReplicaInput):
                        if self._mirror is None:
                            return self._end("lost", "a core input before the mirror was synchronised")
                        self._mirror.apply(packet)
                        upto = packet.upto
                    elif isinstance(packet, ReplicaStopping):
                        if journal is not None:
                            journal.sync()
                        if self._mirror is not None:
                            self._mirror.sync()
                        return self._end("stopped", "the primary stops", failover=packet.failover)
                if upto is not None and (journal is not None or self._mirror is not None):
                    # durable before acknowledged: the primary confirms its clients on this
                    if journal is not None:
                        journal.sync()
                    if self._mirror is not None:
                        self._mirror.sync()
                    self.stored = upto
                    writer.write(encode_packet(ReplicaAck(upto), _CLUSTER_CHANNEL))
        except (OSError, CodecError, JournalError) as exc:
            return self._end("lost", f"{type(exc).__name__}: {exc}")
        finally:
            pinger.cancel()
            if journal is not None:
                with contextlib.suppress(JournalError, OSError):
                    journal.close()
                if not self.synced.is_set():
                    self._put_back()
            writer.close()  # not waited for: the primary may be busy stopping, and this server has its own work


    async def _ping(self, writer: asyncio.StreamWriter) -> None:
        """A ping every check period: the primary answers each, so a live one is never silent for a TTL."""
        while True:
            await asyncio.sleep(self.check_period_ms / 1000)
            if writer.is_closing():
                return
            writer.write(encode_packet(Ping(self.ttl_ms), 0))

    def _end(self, how: Literal["refused", "lost", "stopped"], detail: str, *, failover: bool = False) -> ReplicaEnd:
        mirror, self._mirror = self._mirror, None
        end = ReplicaEnd(how, self.synced.is_set(), failover, detail, mirror)
        LOG.info("stopped following the primary", extra={"how": how, "synced": end.synced, "detail": detail})
        return end

    @property
    def _previous(self) -> Path:
        return self.journal_dir.with_name(self.journal_dir.name + ".previous")

    def _start_afresh(self) -> Journal:
        """An empty journal for the primary's state; what the directory held is kept aside until that is in."""
        shutil.rmtree(self._previous, ignore_errors=True)
        if self.journal_dir.exists():
            self.journal_dir.rename(self._previous)
        journal = Journal(self.journal_dir, file_size=self.file_size)
        journal.open()
        return journal

    def _synchronised(self, node_id: str) -> None:
        """The journal holds the primary's whole state: the old one can go, the node ID is the primary's."""
        shutil.rmtree(self._previous, ignore_errors=True)
        self.node_id_file.parent.mkdir(parents=True, exist_ok=True)
        self.node_id_file.write_text(node_id + "\n", encoding="ascii")

    def _put_back(self) -> None:
        """The stream ended before the journal held the primary's state: the journal from before comes back."""
        if self._previous.exists():
            shutil.rmtree(self.journal_dir, ignore_errors=True)
            self._previous.rename(self.journal_dir)
            LOG.info("the journal from before the synchronisation is back", extra={"journal": str(self.journal_dir)})
