"""BrokerServer's group commit with the fsync in a worker thread: replies wait for the sync that covers
them, keep their order per connection across batches, and a requested close follows the output before it.

Driven without sockets or sleeps: a scripted core, transports that record what is written, and a group
commit whose fsync blocks on a threading.Event the test sets.  Every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from cck.reference._server import BrokerServer, _Protocol
from cck.reference.broker import BrokerCore
from cck.reference.journal import Journal, PendingSync

DEADLINE_S = 10.0
T = TypeVar("T")


async def within(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, DEADLINE_S)


class ScriptedCore:
    """Stands in for BrokerCore.  Input is ``;``-separated commands: ``store:X`` stores something and
    replies X (a counted packet), ``echo:X`` replies X and stores nothing, ``grant:X`` replies X as a credit
    grant (early unless a counted reply is queued ahead of it), ``close`` asks for the connection to be closed."""

    def __init__(self, storage: BlockingCommit | None) -> None:
        self.storage = storage
        self.outbox: dict[int, bytearray] = {}
        self.early: dict[int, bytearray] = {}
        self.counted: set[int] = set()
        self.closing: set[int] = set()
        self.batches = 0
        self.batch_taken = asyncio.Event()

    def connection_made(self, conn_id: int, now_ms: int, peer: str, peer_certificate: bytes | None = None) -> None:
        self.outbox[conn_id] = bytearray()
        self.early[conn_id] = bytearray()

    def connection_lost(self, conn_id: int, now_ms: int) -> None:
        self.outbox.pop(conn_id, None)
        self.early.pop(conn_id, None)

    def receive(self, conn_id: int, data: bytes, now_ms: int) -> None:
        for command in data.decode().split(";"):
            verb, _, reply = command.partition(":")
            if verb == "store":
                assert self.storage is not None
                self.storage.stored += 1
                if self.storage.journal is not None:
                    self.storage.journal.add(self.storage.stored, 0, reply.encode())
                self.counted.add(conn_id)
            if verb == "close":
                self.closing.add(conn_id)
            if verb == "grant" and conn_id not in self.counted:
                self.early[conn_id] += reply.encode()
            else:
                self.outbox[conn_id] += reply.encode()

    def take_output_split(self) -> tuple[dict[int, bytes], dict[int, bytes], frozenset[int]]:
        early = {conn_id: bytes(box) for conn_id, box in self.early.items() if box}
        out = {conn_id: bytes(box) for conn_id, box in self.outbox.items() if box}
        counted, self.counted = frozenset(self.counted), set()
        for box in (*self.outbox.values(), *self.early.values()):
            box.clear()
        self.batches += 1
        self.batch_taken.set()
        return early, out, counted

    def take_closing(self) -> set[int]:
        closing, self.closing = self.closing, set()
        return closing

    def take_handed(self) -> set[int]:
        return set()  # nothing here subscribes to a journal

    def shutdown(self) -> None:
        for box in self.outbox.values():
            box += b"<bye>"

    def next_deadline(self) -> int:
        return 1 << 62  # never: nothing here is timed

    def tick(self, now_ms: int) -> None:
        return None

    async def next_batch(self) -> None:
        """Until the server has taken one more batch."""
        self.batch_taken.clear()
        await within(self.batch_taken.wait())


class BlockingSync:
    """One sync: ``wait`` (in the server's worker thread) blocks until the test releases it, then runs the
    journal's own fsync when there is a journal (``inner``)."""

    def __init__(self, commit: BlockingCommit, upto: int, inner: PendingSync | None) -> None:
        self.commit = commit
        self.upto = upto
        self.inner = inner
        self.release = threading.Event()
        if commit.release_all:
            self.release.set()
        self.entered = asyncio.Event()
        self.finished = asyncio.Event()
        self.error: BaseException | None = None
        self.fail_with: BaseException | None = None

    def wait(self) -> None:
        self.commit.loop.call_soon_threadsafe(self.entered.set)
        if not self.release.wait(DEADLINE_S):
            raise TimeoutError("the test never released this sync")
        if self.fail_with is not None:
            raise self.fail_with
        if self.inner is not None:
            self.inner.wait()

    def done(self, error: BaseException | None = None) -> None:
        if self.inner is not None:
            self.inner.done(error)
        self.error = error
        self.commit.in_flight -= 1
        if error is None:
            self.commit.durable = self.upto
        else:
            self.commit.failed = True
        self.finished.set()


class BlockingCommit:
    """A GroupCommit that counts what the scripted core stored and what became durable (and, given a
    journal, appends a record per store and syncs it for real)."""

    def __init__(self, journal: Journal | None = None) -> None:
        self.journal = journal
        self.loop = asyncio.get_running_loop()
        self.stored = 0
        self.durable = 0
        self.syncs: list[BlockingSync] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.sync_begun = asyncio.Event()
        self.release_all = False  # set when the test ends: syncs begun from then on do not block
        self.failed = False

    def begin_sync(self) -> BlockingSync | None:
        if self.stored == self.durable:
            return None
        if self.failed:  # as the journal does once an fsync failed
            raise OSError("the journal failed earlier")
        inner = self.journal.begin_sync() if self.journal is not None else None
        sync = BlockingSync(self, self.stored, inner)
        self.syncs.append(sync)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.sync_begun.set()
        return sync

    async def next_sync(self) -> BlockingSync:
        """The sync that begins next (or has begun since the last call)."""
        await within(self.sync_begun.wait())
        self.sync_begun.clear()
        sync = self.syncs[-1]
        await within(sync.entered.wait())  # its fsync is under way in the worker thread
        return sync


class RecordingTransport(asyncio.Transport):
    """What the server wrote and closed, in order, as events: ("write", bytes) or ("close", b"")."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, bytes]] = []
        self.changed = asyncio.Event()
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "write after close"
        self.events.append(("write", bytes(data)))
        self.changed.set()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.events.append(("close", b""))
            self.changed.set()

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    @property
    def written(self) -> bytes:
        return b"".join(data for kind, data in self.events if kind == "write")

    async def until(self, condition: Callable[[RecordingTransport], bool]) -> None:
        while not condition(self):
            self.changed.clear()
            await within(self.changed.wait())


class Harness:
    def __init__(self, *, durable: bool = True, journal: Journal | None = None) -> None:
        self.commit = BlockingCommit(journal) if durable else None
        self.core = ScriptedCore(self.commit)
        self.server = BrokerServer(cast(BrokerCore, self.core), "127.0.0.1", 0, group_commit=self.commit)

    async def __aenter__(self) -> Harness:
        await self.server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.commit is not None:
            self.commit.release_all = True
            for sync in self.commit.syncs:
                sync.release.set()  # never leave the worker thread blocked, whatever failed
        await within(self.server.stop())

    def connect(self) -> tuple[int, RecordingTransport]:
        transport = RecordingTransport()
        protocol = _Protocol(self.server)
        protocol.connection_made(transport)
        return protocol.conn_id, transport

    async def send(self, conn_id: int, data: bytes) -> None:
        """Feed input and wait until the server has taken it as one batch."""
        self.server.received(conn_id, data)
        await self.core.next_batch()

    @property
    def sync(self) -> BlockingCommit:
        assert self.commit is not None
        return self.commit


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(within(scenario()))


def test_replies_wait_for_their_fsync_and_keep_their_order_across_batches() -> None:
    async def scenario() -> None:
        async with Harness() as h:
            conn, transport = h.connect()
            await h.send(conn, b"store:1")
            first = await h.sync.next_sync()
            assert transport.events == []  # the fsync covering "1" has not returned

            await h.send(conn, b"store:2")  # stored while the first fsync is in flight
            await h.send(conn, b"echo:3")  # stores nothing, but must not overtake "2"
            assert len(h.sync.syncs) == 1, "at most one sync in flight"
            assert transport.events == []

            first.release.set()
            await transport.until(lambda t: t.written == b"1")
            second = await h.sync.next_sync()  # covers "2" and the batch behind it
            assert second.upto == 2
            assert transport.written == b"1"

            second.release.set()
            await transport.until(lambda t: t.written == b"123")
            await within(second.finished.wait())
            assert (first.error, second.error) == (None, None)
            assert h.sync.max_in_flight == 1

    run(scenario)


def test_one_sync_covers_every_batch_taken_while_another_was_in_flight() -> None:
    async def scenario() -> None:
        async with Harness() as h:
            a, ta = h.connect()
            b, tb = h.connect()
            await h.send(a, b"store:a1")
            first = await h.sync.next_sync()
            for n in range(2, 6):
                await h.send(a if n % 2 else b, f"store:{n}".encode())
            first.release.set()
            second = await h.sync.next_sync()
            assert second.upto == 5  # everything stored before it began
            second.release.set()
            await ta.until(lambda t: t.written == b"a135")
            await tb.until(lambda t: t.written == b"24")
            assert len(h.sync.syncs) == 2

    run(scenario)


def test_a_credit_grant_goes_out_before_the_sync_unless_a_counted_reply_waits_ahead_of_it() -> None:
    async def scenario() -> None:
        async with Harness() as h:
            conn, transport = h.connect()
            other, bystander = h.connect()
            await h.send(conn, b"grant:g1;store:s1")  # the grant was queued first: it needs no sync
            first = await h.sync.next_sync()
            assert transport.written == b"g1"
            await h.send(conn, b"grant:g2")  # s1 (counted) still waits: g2 must not overtake it
            await h.send(other, b"grant:o1")  # another connection has nothing waiting
            assert transport.written == b"g1"
            assert bystander.written == b"o1"
            first.release.set()
            await transport.until(lambda t: t.written == b"g1s1g2")
            await h.send(conn, b"grant:g3")  # nothing waits any more
            assert transport.written == b"g1s1g2g3"

    run(scenario)


def test_a_batch_that_stored_nothing_goes_out_at_once_when_nothing_waits() -> None:
    async def scenario() -> None:
        async with Harness() as h:
            conn, transport = h.connect()
            await h.send(conn, b"echo:ping")
            assert transport.events == [("write", b"ping")]
            assert h.sync.syncs == []

    run(scenario)


def test_without_storage_replies_are_written_in_the_flush() -> None:
    async def scenario() -> None:
        async with Harness(durable=False) as h:
            conn, transport = h.connect()
            await h.send(conn, b"echo:a")
            await h.send(conn, b"echo:b;close")
            assert transport.events == [("write", b"a"), ("write", b"b"), ("close", b"")]

    run(scenario)


def test_a_close_waits_for_the_output_taken_before_it() -> None:
    async def scenario() -> None:
        async with Harness() as h:
            conn, transport = h.connect()
            await h.send(conn, b"store:confirmed")
            first = await h.sync.next_sync()
            await h.send(conn, b"echo:refused;close")  # e.g. an EXCEPTION, then the core closes the connection
            await h.send(conn, b"echo:never")  # taken after the close: never written
            assert transport.events == []
            first.release.set()
            await transport.until(lambda t: t.closed)
            assert transport.written == b"confirmedrefused"
            assert transport.events[-1] == ("close", b"")

    run(scenario)


def test_a_failed_fsync_confirms_nothing_and_closes_the_waiting_connections() -> None:
    async def scenario() -> None:
        async with Harness() as h:
            conn, transport = h.connect()
            _other, bystander = h.connect()
            await h.send(conn, b"store:must-not-be-confirmed")
            sync = await h.sync.next_sync()
            sync.fail_with = OSError(5, "Input/output error")
            sync.release.set()
            await transport.until(lambda t: t.closed)
            await within(sync.finished.wait())
            assert isinstance(sync.error, OSError)
            assert transport.events == [("close", b"")]
            assert bystander.events == []  # nothing of it waited for that sync

    run(scenario)


def test_stop_sends_disconnect_after_the_replies_waiting_for_a_sync() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.server.start()
        conn, transport = h.connect()
        await h.send(conn, b"store:last")
        sync = await h.sync.next_sync()
        stopping = asyncio.ensure_future(h.server.stop())
        await h.core.next_batch()  # stop() took the DISCONNECTs (<bye>) as a batch
        assert not stopping.done()
        assert transport.events == []
        sync.release.set()
        await within(stopping)
        assert transport.events == [("write", b"last"), ("write", b"<bye>"), ("close", b"")]

    run(scenario)


@pytest.mark.parametrize("failing", [False, True])
def test_begin_sync_raising_closes_the_connections_that_waited(failing: bool) -> None:
    async def scenario() -> None:
        async with Harness() as h:
            conn, transport = h.connect()
            if failing:
                def refuse() -> None:
                    raise OSError(28, "No space left on device")

                h.sync.begin_sync = refuse  # type: ignore[method-assign,assignment]
            await h.send(conn, b"store:x")
            if failing:
                assert transport.events == [("close", b"")]
            else:
                sync = await h.sync.next_sync()
                sync.release.set()
                await transport.until(lambda t: t.written == b"x")

    run(scenario)



def test_with_a_real_journal_replies_follow_its_fsync(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.open()

    async def scenario() -> None:
        async with Harness(journal=journal) as h:
            conn, transport = h.connect()
            await h.send(conn, b"store:1")
            first = await h.sync.next_sync()
            await h.send(conn, b"store:2")  # appended while the first fsync is in flight
            assert journal.pending == 2
            first.release.set()
            await transport.until(lambda t: t.written == b"1")
            assert journal.pending == 1  # the first fsync covered record 1 only
            second = await h.sync.next_sync()
            second.release.set()
            await transport.until(lambda t: t.written == b"12")
            await within(second.finished.wait())
            assert journal.pending == 0

    run(scenario)
    journal.close()
    reopened = Journal(tmp_path)
    assert [r.payload for r in reopened.open().records] == [b"1", b"2"]
    reopened.close()
