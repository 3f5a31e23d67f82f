"""The primary's side of journal replication: its backups' connections (handed over by the broker core once a
backup logged in with the cluster credentials and subscribed) and the group commit that waits for them.

Each subscribed backup gets the node ID (KIT_REPLICA_BEGIN), the journal's live state (:meth:`Journal.snapshot`)
and from then on every record the journal appends, numbered from 1 over its connection, in batches of at most
:data:`BATCH_BYTES` (KIT_REPLICA_RECORDS; the live state's last batch says ``synced``).  The backup answers
KIT_REPLICA_ACK with the number of the last record it has made durable.

Nothing a client was told is stored may be missing from a backup that takes over: :meth:`Replication.begin_sync`
wraps the journal's group commit, and its worker-thread half returns only once the local fsync is done *and*
every backup acknowledged the records appended before the sync began -- or was dropped: a backup that does not
acknowledge within ``ack_timeout_s`` is disconnected and the primary goes on alone (as an Artemis primary does when
its backup goes away).

Mirroring (``mirror`` given, ``_mirror.py``): the first backup to subscribe while the core has never had a
session gets the core's counters with KIT_REPLICA_BEGIN and, after the live state, the core's inputs
(KIT_REPLICA_INPUT, numbered on from the records) instead of the journal's records; the group commit waits for
its acknowledgement of every input fed so far, and :meth:`Replication.holds_early` keeps the server from writing
anything before that.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Protocol

from cck.codec import (
    CodecError,
    FrameDecoder,
    Ping,
    ReplicaAck,
    ReplicaBegin,
    ReplicaInput,
    ReplicaRecords,
    ReplicaStopping,
    encode_packet,
)

from ..broker import CoreInput, InputKind, MirrorPoint
from ..journal import Journal

__all__ = ["BATCH_BYTES", "Replication", "ReplicationSource"]

LOG = logging.getLogger("cck.reference.ha")

_CLUSTER_CHANNEL = 3
#: Records per KIT_REPLICA_RECORDS packet, at most (a record larger than this goes alone).
BATCH_BYTES = 1024 * 1024


class ReplicationSource:
    """One backup's connection: the records sent to it and what it acknowledged.  Loop-side methods run on the
    event loop; :meth:`wait_acked` runs in the group commit's worker thread."""

    def __init__(self, transport: asyncio.Transport, name: str, *, gone: Callable[[ReplicationSource], None],
                 synced: Callable[[ReplicationSource], None] | None = None) -> None:
        self.name = name
        self._transport = transport
        self._gone_callback = gone
        self._synced_callback = synced
        self._snapshot_upto: int | None = None  # the live state's last record, until the backup acknowledged it
        self._decoder = FrameDecoder()
        self._pending: list[bytes] = []  # appended records not yet written to the backup
        self._inputs: list[bytes] = []  # mirrored inputs (encoded) not yet written to it
        self._flush_scheduled = False
        self._sent = 0  # records numbered so far
        self._acked = 0
        self._gone = False
        self._changed = threading.Condition()

    @property
    def sent(self) -> int:
        return self._sent

    @property
    def acked(self) -> int:
        with self._changed:
            return self._acked

    def begin(self, node_id: str, snapshot: list[bytes], mirror: MirrorPoint | None = None) -> None:
        """The node ID and the live state, written at once (the same loop turn as the snapshot was taken); with
        ``mirror``, the core's counters too (the core's inputs follow, :meth:`forward`)."""
        begin = ReplicaBegin(node_id) if mirror is None else ReplicaBegin(
            node_id, True, mirror.next_id, mirror.ttl_check_at_ms, mirror.tx_scan_at_ms)
        self._transport.write(encode_packet(begin, _CLUSTER_CHANNEL))
        self._write(snapshot, synced=True)
        self._snapshot_upto = self._sent
        LOG.info("backup synchronising", extra={"backup": self.name, "records": len(snapshot)})

    def appended(self, record: bytes) -> None:
        """A record the journal appended: sent in the next loop turn, with the others of this one."""
        if self._gone:
            return
        self._pending.append(record)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def forward(self, event: CoreInput) -> None:
        """An input of the core (mirroring): sent in the next loop turn, with the others of this one."""
        if self._gone:
            return
        self._sent += 1
        self._inputs.append(encode_packet(ReplicaInput(self._sent, int(event.kind), event.conn_id, event.now_ms,
                                                       event.data), _CLUSTER_CHANNEL))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Write the records appended (or the inputs fed) so far (the group commit calls it before waiting)."""
        self._flush_scheduled = False
        if self._pending and not self._gone:
            records, self._pending = self._pending, []
            self._write(records, synced=True)
        if self._inputs and not self._gone:
            inputs, self._inputs = self._inputs, []
            self._transport.write(b"".join(inputs))

    def _write(self, records: list[bytes], *, synced: bool) -> None:
        batch: list[bytes] = []
        size = 0
        packets = []
        for index, record in enumerate(records):
            batch.append(record)
            size += len(record)
            if size >= BATCH_BYTES or index == len(records) - 1:
                self._sent += len(batch)
                last = index == len(records) - 1
                packets.append(encode_packet(ReplicaRecords(self._sent, synced and last, b"".join(batch)),
                                             _CLUSTER_CHANNEL))
                batch, size = [], 0
        if not records:  # an empty live state is synced at once
            packets.append(encode_packet(ReplicaRecords(self._sent, synced, b""), _CLUSTER_CHANNEL))
        self._transport.write(b"".join(packets))

    def stopping(self, failover: bool) -> None:
        """Tell the backup this primary stops gracefully, and whether it should take over."""
        if not self._gone:
            self.flush()
            self._transport.write(encode_packet(ReplicaStopping(failover), _CLUSTER_CHANNEL))

    # -------------------------------------------------------------------- the connection (StreamHandler)

    def data_received(self, data: bytes) -> None:
        self._decoder.feed(data)
        try:
            for frame in self._decoder:
                if isinstance(frame.packet, ReplicaAck):
                    with self._changed:
                        self._acked = max(self._acked, frame.packet.upto)
                        self._changed.notify_all()
                    if self._snapshot_upto is not None and self._acked >= self._snapshot_upto:
                        self._snapshot_upto = None
                        LOG.info("backup synchronised", extra={"backup": self.name, "records": self._acked})
                        if self._synced_callback is not None:
                            self._synced_callback(self)
                elif isinstance(frame.packet, Ping):
                    # answered, so the backup sees this primary alive even when there is nothing to replicate
                    self._transport.write(encode_packet(Ping(frame.packet.connection_ttl), 0))
        except CodecError as exc:
            LOG.warning("bad input from a backup; dropping it", extra={"backup": self.name, "detail": str(exc)})
            self.drop()

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended("its connection closed" if exc is None else f"its connection failed: {exc}")

    def drop(self) -> None:
        """Stop replicating to this backup (it failed to keep up, or sent garbage)."""
        self._transport.close()
        self._ended("dropped")

    def _ended(self, why: str) -> None:
        if self._gone:
            return
        with self._changed:
            self._gone = True
            self._changed.notify_all()
        LOG.info("backup no longer replicated to", extra={"backup": self.name, "reason": why})
        self._gone_callback(self)

    # -------------------------------------------------------------------- the worker thread

    def wait_acked(self, upto: int, timeout_s: float) -> bool:
        """Until the backup acknowledged record ``upto`` (True) or went away (True: nothing to wait for any more);
        False when ``timeout_s`` passed first."""
        with self._changed:
            return self._changed.wait_for(lambda: self._gone or self._acked >= upto, timeout_s)


class _LocalSync(Protocol):
    """What the journal's own group commit gives (:class:`reference.journal.PendingSync`)."""

    def wait(self) -> None: ...

    def done(self, error: BaseException | None = None) -> None: ...


class _ReplicatedSync:
    """A group commit that also waits for the backups: see the module's docstring."""

    def __init__(self, local: _LocalSync | None, waits: list[tuple[ReplicationSource, int]], timeout_s: float,
                 loop: asyncio.AbstractEventLoop) -> None:
        self._local = local
        self._waits = waits
        self._timeout_s = timeout_s
        self._loop = loop

    def wait(self) -> None:
        if self._local is not None:
            self._local.wait()
        for source, upto in self._waits:
            if not source.wait_acked(upto, self._timeout_s):
                LOG.warning("a backup did not acknowledge in time; replicating no more to it",
                            extra={"backup": source.name, "upto": upto, "timeout_s": self._timeout_s})
                self._loop.call_soon_threadsafe(source.drop)

    def done(self, error: BaseException | None = None) -> None:
        if self._local is not None:
            self._local.done(error)


class Replication:
    """The primary's backups (any number, each with a connection of its own) and the group commit that waits for
    them.  ``group_commit``: the journal's own (``JournalStorage``); ``journal``: the journal it writes; ``synced``:
    called each time a backup has acknowledged the whole live state it was sent first (a failback can go on)."""

    def __init__(self, group_commit: Callable[[], _LocalSync | None], journal: Journal, node_id: str, *,
                 ack_timeout_s: float = 10.0, synced: Callable[[], None] | None = None,
                 mirror: Callable[[], MirrorPoint | None] | None = None) -> None:
        self._local_begin = group_commit
        self._synced = synced
        self._journal = journal
        self._node_id = node_id
        self._ack_timeout_s = ack_timeout_s
        self._sources: list[ReplicationSource] = []
        # mirroring: the core's counters when it can be mirrored now (None: it has had sessions)
        self._mirror_point = mirror
        self._mirror: ReplicationSource | None = None
        self._known: set[int] = set()  # connections the mirror knows (made since mirroring began)

    @property
    def backups(self) -> int:
        return len(self._sources)

    def accept(self, transport: asyncio.Transport) -> ReplicationSource:
        """A connection the core handed over (a subscribed backup): starts its synchronisation now."""
        peer = transport.get_extra_info("peername")
        source = ReplicationSource(transport, str(peer), gone=self._gone, synced=self._source_synced)
        point = self._mirror_point() if self._mirror_point is not None and self._mirror is None else None
        source.begin(self._node_id, self._journal.snapshot(), point)
        self._sources.append(source)
        if point is not None:
            self._mirror = source
            self._known.clear()
            LOG.info("mirroring the core to a backup", extra={"backup": source.name})
        elif self._mirror_point is not None:
            LOG.info("not mirroring the core to this backup (sessions were opened before it subscribed, or another "
                     "backup mirrors it): it gets the journal only", extra={"backup": source.name})
        self._journal.observe_appends(self._appended)
        return source

    def core_input(self, event: CoreInput) -> None:
        """The server's ``inputs``: every input of the core, forwarded to the mirroring backup (for the
        connections it knows: those made since it began)."""
        mirror = self._mirror
        if mirror is None:
            return
        if event.kind is InputKind.MADE:
            self._known.add(event.conn_id)
        elif event.kind in (InputKind.RECEIVED, InputKind.LOST):
            if event.conn_id not in self._known:
                return
            if event.kind is InputKind.LOST:
                self._known.discard(event.conn_id)
        mirror.forward(event)

    def holds_early(self) -> bool:
        """The server's ``hold_early``: while a backup mirrors the core, no reply goes out before the group commit
        (which waits for the backup to have every input so far)."""
        return self._mirror is not None

    def _source_synced(self, _source: ReplicationSource) -> None:
        if self._synced is not None:
            self._synced()

    def _appended(self, record: bytes) -> None:
        for source in self._sources:
            if source is not self._mirror:  # the mirror writes these records itself
                source.appended(record)

    def _gone(self, source: ReplicationSource) -> None:
        if source is self._mirror:
            self._mirror = None
            self._known.clear()
        if source in self._sources:
            self._sources.remove(source)
        if not self._sources:
            self._journal.observe_appends(None)

    def begin_sync(self) -> _ReplicatedSync | _LocalSync | None:
        """The server's group commit (:class:`reference._server.GroupCommit`): the journal's, plus the wait for
        every backup to acknowledge what was appended so far."""
        local = self._local_begin()
        waits = []
        for source in self._sources:
            source.flush()
            if source.acked < source.sent:
                waits.append((source, source.sent))
        if not waits:
            return local
        return _ReplicatedSync(local, waits, self._ack_timeout_s, asyncio.get_running_loop())

    def stopping(self, failover: bool) -> None:
        """A graceful stop: every backup is told, and whether to take over."""
        for source in list(self._sources):
            source.stopping(failover)
