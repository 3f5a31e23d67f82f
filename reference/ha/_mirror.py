"""Session mirroring, the reference broker's opt-in transparent resume (spec 004 "Fail-over (session state)"):
besides the journal, a replication backup keeps a *mirror* of its primary's core, fed every input the primary's
core gets (:mod:`reference.broker._inputs`), so that it holds the primary's sessions, consumers, deliveries in
flight, resend caches, confirmation windows and open local and XA transactions.  A client that fails over to it
reattaches (its REATTACH_SESSION finds the session) and replays from its resend cache what the mirror had not
received; nothing is rolled back or delivered again.

How it stays exact: the mirror starts from the primary's journal, recovered as a backup recovers it to take over,
and the primary's counters (:class:`reference.broker.MirrorPoint`); from then on it gets the primary's inputs in
the order the primary's core got them, with the primary's times, and the core is deterministic.  The primary
mirrors only a core that has never had a session (what a core holds beyond its journal is sessions), so the two
start equal; and it writes nothing to any client before the backup has acknowledged the inputs that led to it
(its group commit waits for them, early credit grants included), so whatever a client saw, the mirror has.

The mirror writes its own journal (the records the primary's core writes, the same ones), so in mirroring mode
the primary sends no journal records after the live state.  What the mirror's core would send to clients is
dropped: the primary sent it.  Inputs that do not reach the core through the server (a cluster bridge of another
node changing bindings) are not mirrored: mirroring is for a pair whose cluster is the pair."""

from __future__ import annotations

import contextlib
import logging

from cck.codec import ReplicaInput

from ..broker import BrokerCore, CoreInput, InputKind, JournalStorage, apply_input
from ..journal import JournalError

__all__ = ["Mirror"]

LOG = logging.getLogger("cck.reference.ha")


class Mirror:
    """A backup's mirror of its primary's core (``core`` on ``storage``, recovered from the primary's live
    state and set to its counters).  On the backup's event loop."""

    def __init__(self, core: BrokerCore, storage: JournalStorage) -> None:
        self.core = core
        self.storage = storage
        #: the highest connection ID the primary used (a server taking over with this core numbers above it)
        self.highest_conn_id = 0
        #: the primary's time at its last input (monotonic ms on the primary's clock)
        self.now_ms = 0
        self.applied = 0

    def apply(self, packet: ReplicaInput) -> None:
        """One input of the primary's core; what the core would write is dropped (the primary wrote it)."""
        event = CoreInput(InputKind(packet.kind), packet.now_ms, packet.conn_id, packet.data)
        try:
            apply_input(self.core, event)
        except Exception:  # the primary's core failed the same way: its server closes the connection (LOST follows)
            LOG.exception("internal error applying the primary's input, as on the primary",
                          extra={"conn": packet.conn_id, "kind": event.kind.name})
        self.core.take_output_split()
        self.core.take_closing()  # the primary closes them; their LOST input follows
        self.core.take_handed()
        self.highest_conn_id = max(self.highest_conn_id, packet.conn_id)
        self.now_ms = max(self.now_ms, packet.now_ms)
        self.applied += 1

    def sync(self) -> None:
        """Make what the mirrored inputs stored durable (before the backup acknowledges them)."""
        pending = self.storage.begin_sync()  # the journal's sync, with the storage's compaction judged first
        if pending is not None:
            pending.complete()

    def take_over(self, now_ms: int) -> None:
        """The primary is gone: its connections with it.  Their sessions stay, detached, for the clients to
        reattach within their connection TTL, as after a connection failure on the primary itself."""
        for conn_id in list(self.core.connections):
            apply_input(self.core, CoreInput(InputKind.LOST, now_ms, conn_id))
        self.core.take_output_split()
        self.core.take_closing()
        LOG.info("taking over with the primary's sessions", extra={"inputs": self.applied,
                                                                   "sessions": sum(1 for _ in self.core.sessions)})

    def close(self) -> None:
        with contextlib.suppress(JournalError, OSError):
            self.storage.journal.close()
