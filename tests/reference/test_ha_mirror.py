"""The reference broker's session mirroring (``reference/ha/_mirror.py``): a backup's core fed the primary's core
inputs ends in the primary's state, sessions and all, once every reply the clients got has been seen; a primary
that already had a session sends the journal only.  In process, over real sockets; every wait has a deadline.
That a client resumes its session on a backup that took over with the mirror is the conformance case
``ha.resume.1`` (a replication pair of processes, the kit's client)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from cck.codec import CoreMessage, ReplicaBegin, RoutingType
from cck.reference._server import BrokerServer
from cck.reference.broker import BrokerCore, BrokerSettings, JournalStorage, MirrorPoint, open_journal
from cck.reference.broker._cluster import ClusterRole
from cck.reference.client import ClientSettings, connect
from cck.reference.ha import Mirror, Replica, Replication

DEADLINE_S = 20.0
USER, PASSWORD = "cluster", "secret"
NODE = "primary-node"
T = TypeVar("T")


async def within(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, DEADLINE_S)


def settings() -> BrokerSettings:
    return BrokerSettings(node_id=NODE, cluster=ClusterRole("cc", NODE, None, user=USER, password=PASSWORD),
                          accept_replicas=True)


def recovered(directory: Path) -> tuple[BrokerCore, JournalStorage]:
    journal, recovery = open_journal(directory, sync=False)
    storage = JournalStorage(journal)
    core = BrokerCore(settings(), storage=storage)
    storage.recover(recovery, post_office=core.post_office, transactions=core.transactions, cluster=core.cluster,
                    duplicates=core.duplicates)
    return core, storage


def make_mirror(directory: Path) -> Any:
    def build(begin: ReplicaBegin) -> Mirror:
        core, storage = recovered(directory)
        core.continue_from(MirrorPoint(begin.next_id, begin.ttl_check_at_ms, begin.tx_scan_at_ms))
        return Mirror(core, storage)

    return build


@asynccontextmanager
async def mirroring_primary(data: Path) -> AsyncIterator[tuple[BrokerServer, BrokerCore, Replication]]:
    core, storage = recovered(data / "journal")
    replication = Replication(storage.begin_sync, storage.journal, NODE,
                              mirror=lambda: core.mirror_point() if core.sessions.opened == 0 else None)
    server = BrokerServer(core, "127.0.0.1", 0, group_commit=replication, hand_over=replication.accept,
                          inputs=replication.core_input, hold_early=replication.holds_early)
    await server.start()
    try:
        yield server, core, replication
    finally:
        await server.stop()
        storage.journal.close()


def fingerprint(core: BrokerCore) -> dict[str, Any]:
    """What a resumed client depends on: sessions (windows, resend caches, consumers and what they hold, open
    transactions), queues (what is ready, in order) and the next ID."""
    sessions = {}
    for session in core.sessions:
        sessions[session.name] = {
            "channel": session.channel_id,
            "last_confirmed": session.receive_window.last_confirmed,
            "received_bytes": session.receive_window.received_bytes,
            "resend_cache": list(session.send_window.cache),
            "consumers": {cid: (c.queue.name, c.credits, list(c.delivering)) for cid, c in session.consumers.items()},
            "tx": repr(session.tx),
            "started": session.started,
        }
    queues = {name: [ref.message.message_id for ref in q.ready] for name, q in core.post_office.queues.items()}
    return {"sessions": sessions, "queues": queues, "next_id": core.post_office.upcoming_id}


def test_the_mirror_ends_in_the_primary_s_state_sessions_and_all(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with mirroring_primary(tmp_path / "primary") as (server, core, _):
            replica = Replica(tmp_path / "backup" / "journal", tmp_path / "backup" / "node-id", user=USER,
                              password=PASSWORD, name="test-backup", make_mirror=make_mirror(tmp_path / "backup" /
                                                                                             "journal"))
            following = asyncio.ensure_future(replica.follow("127.0.0.1", server.bound_port))
            await within(replica.synced.wait())
            client = ClientSettings(reconnect_attempts=0, confirmation_window_size=1024 * 1024)
            async with await connect(f"tcp://127.0.0.1:{server.bound_port}", settings=client) as connection:
                plain = await connection.create_session()
                await plain.create_queue("q", "q", routing_type=RoutingType.ANYCAST, durable=True)
                producer = plain.create_producer("q")
                for n in range(6):
                    await producer.send(CoreMessage(body=f"m{n}".encode(), durable=n % 2 == 0))
                consumer = await plain.create_consumer("q")
                plain.start()
                held = [await within(consumer.receive(DEADLINE_S)) for _ in range(3)]
                assert all(d is not None for d in held)
                transacted = await connection.create_session(transacted=True)
                await transacted.create_producer("q").send(CoreMessage(body=b"in-tx", durable=True))
                await plain.create_queue("fence", "fence", routing_type=RoutingType.ANYCAST, durable=False)
                # every reply above reached the client after the backup acknowledged its inputs
                mirror = replica.mirror
                assert mirror is not None, "the primary had no session when the backup subscribed: it mirrors"
                assert fingerprint(mirror.core) == fingerprint(core)
                assert mirror.core.mirror_point() == core.mirror_point()
            following.cancel()

    asyncio.run(scenario())


def test_a_primary_that_already_had_a_session_sends_the_journal_only(tmp_path: Path) -> None:
    async def scenario() -> bool:
        async with mirroring_primary(tmp_path / "primary") as (server, _, replication):
            async with await connect(f"tcp://127.0.0.1:{server.bound_port}",
                                     settings=ClientSettings(reconnect_attempts=0)) as connection:
                await connection.create_session()
            replica = Replica(tmp_path / "backup" / "journal", tmp_path / "backup" / "node-id", user=USER,
                              password=PASSWORD, name="test-backup", make_mirror=make_mirror(tmp_path / "backup" /
                                                                                             "journal"))
            following = asyncio.ensure_future(replica.follow("127.0.0.1", server.bound_port))
            await within(replica.synced.wait())
            mirrored = replica.mirror is not None or replication.holds_early()
            following.cancel()
            return mirrored

    assert asyncio.run(scenario()) is False
