"""Producers' duplicate IDs (``_AMQ_DUPL_ID``): a send repeated with the same ID is routed once, per address, in
and out of transactions, and the IDs of what was stored survive a restart (so a backup or a restarted server that
loaded the journal drops a send the client repeats after a failover)."""

from __future__ import annotations

from pathlib import Path

from cck.codec import (
    CoreMessage,
    CreateQueueMessage_V2,
    NullResponseMessage,
    RoutingType,
    SessionCommitMessage,
    SessionSendMessage,
    TypedProperties,
)
from cck.reference.broker import BrokerCore, BrokerSettings, JournalStorage, open_journal

from .harness import Wire, connect, open_session


def _queue(wire: Wire, name: str) -> None:
    assert wire.send(CreateQueueMessage_V2(name, name, routing_type=RoutingType.ANYCAST))[-1].packet == \
        NullResponseMessage(-1)


def _send(wire: Wire, address: str, dup: str | None, *, durable: bool = True, channel: int = 10) -> None:
    properties = TypedProperties.of(_AMQ_DUPL_ID=dup) if dup is not None else TypedProperties.of()
    frames = wire.send(SessionSendMessage(CoreMessage(b"m", address=address, durable=durable, properties=properties),
                                          True, -2, 0), channel)
    assert isinstance(frames[-1].packet, NullResponseMessage)  # a dropped duplicate is answered as done too


def _count(core: BrokerCore, queue: str) -> int:
    return len(core.post_office.queues[queue].ready)


def test_a_repeated_id_is_routed_once_per_address() -> None:
    core = BrokerCore(BrokerSettings(node_id="n"))
    wire = connect(core)
    open_session(wire)
    for name in ("a", "b"):
        _queue(wire, name)
    for _ in range(3):
        _send(wire, "a", "id-1")
    _send(wire, "a", "id-2")
    _send(wire, "b", "id-1")  # another address has a cache of its own
    _send(wire, "a", None)  # no ID: never a duplicate
    _send(wire, "a", None)
    assert (_count(core, "a"), _count(core, "b")) == (4, 1)


def test_a_transaction_retried_after_its_commit_routes_nothing_twice() -> None:
    core = BrokerCore(BrokerSettings(node_id="n"))
    wire = connect(core)
    open_session(wire, auto_commit_sends=False)
    _queue(wire, "a")
    for attempt in range(2):  # the commit, then its retry with the same IDs
        for seq in range(3):
            _send(wire, "a", f"tx-{seq}")
        assert isinstance(wire.send(SessionCommitMessage())[-1].packet, NullResponseMessage), attempt
    assert _count(core, "a") == 3


def test_the_cache_keeps_id_cache_size_ids_per_address() -> None:
    core = BrokerCore(BrokerSettings(node_id="n", id_cache_size=2))
    wire = connect(core)
    open_session(wire)
    _queue(wire, "a")
    for dup in ("x", "y", "z", "x"):  # x was evicted by z: routed again
        _send(wire, "a", dup)
    assert _count(core, "a") == 4


def _node(data: Path, cache: int = 100) -> tuple[BrokerCore, JournalStorage, Wire]:
    journal, recovery = open_journal(data, sync=False)
    storage = JournalStorage(journal)
    core = BrokerCore(BrokerSettings(node_id="n", id_cache_size=cache), storage=storage)
    storage.recover(recovery, post_office=core.post_office, transactions=core.transactions, cluster=core.cluster,
                    duplicates=core.duplicates)
    wire = connect(core)
    open_session(wire)
    if "a" not in core.post_office.queues:
        _queue(wire, "a")
    return core, storage, wire


def test_the_ids_of_stored_sends_survive_a_crash(tmp_path: Path) -> None:
    core, storage, wire = _node(tmp_path)
    _send(wire, "a", "kept")
    _send(wire, "a", "gone-with-the-crash", durable=False)
    storage.journal.sync()
    storage.journal.close()  # a crash: nothing more is written

    core, storage, wire = _node(tmp_path)
    assert _count(core, "a") == 1  # the durable message
    _send(wire, "a", "kept")  # the client's repeat after the failover: dropped
    assert _count(core, "a") == 1
    storage.journal.close()


def test_an_evicted_id_is_deleted_from_the_journal(tmp_path: Path) -> None:
    core, storage, wire = _node(tmp_path, cache=1)
    _send(wire, "a", "first")
    _send(wire, "a", "second")  # evicts "first"
    storage.journal.sync()
    storage.journal.close()
    core, storage, wire = _node(tmp_path, cache=1)
    assert [dup for _, _, dup in storage.recovered_send_duplicate_ids] == [b"second"]
    _send(wire, "a", "second")  # still known: dropped
    assert _count(core, "a") == 2
    storage.journal.close()
