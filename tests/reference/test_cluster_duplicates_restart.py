"""The duplicate IDs of durable bridged messages survive a crash of the receiving node: a bridge that resends
after the node recovered gets its message dropped, not routed twice (spec 002: "If the target node of the
bridge crashes and then recovers, messages might be resent from the source node ... filtered out")."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from cck.codec import CoreMessage, PropertyType, RoutingType, TypedProperties
from cck.reference.broker import BrokerCore, BrokerSettings, Queue
from cck.reference.broker._cluster import BRIDGE_DUP_KEY, ClusterRole, LoadBalancing
from cck.reference.broker._journal_storage import JournalStorage, open_journal

NODE = "11111111-1111-1111-1111-111111111111"


def _node(data: Path, cache: int = 100) -> tuple[BrokerCore, JournalStorage]:
    journal, recovery = open_journal(data, sync=False)
    storage = JournalStorage(journal)
    role = ClusterRole("c", NODE, None, LoadBalancing.ON_DEMAND, id_cache_size=cache)
    core = BrokerCore(BrokerSettings(node_id=NODE, cluster=role), storage=storage)
    storage.recover(recovery, post_office=core.post_office, transactions=core.transactions, cluster=core.cluster)
    if "orders" not in core.post_office.queues:
        core.engine.add_queue(Queue("orders", "orders", RoutingType.ANYCAST, durable=True))
    return core, storage


def _bridged(dup: bytes, durable: bool = True) -> CoreMessage:
    return CoreMessage(b"x", address="orders", durable=durable,
                       properties=TypedProperties.typed((BRIDGE_DUP_KEY, PropertyType.BYTES, dup)))


def _deliver(core: BrokerCore, message: CoreMessage) -> bool:
    """What the session handler does with a bridged send: True when it was routed."""
    cluster = core.cluster
    assert cluster is not None
    if cluster.duplicate(message):
        return False
    core.engine.route(dataclasses.replace(message, message_id=core.post_office.next_id()), "orders", None)
    return True


def test_a_resend_after_a_crash_is_still_recognised(tmp_path: Path) -> None:
    core, storage = _node(tmp_path)
    assert _deliver(core, _bridged(b"dup-1"))
    assert _deliver(core, _bridged(b"dup-2", durable=False))
    storage.journal.sync()
    storage.journal.close()  # a crash: nothing more is written

    core, storage = _node(tmp_path)
    assert not _deliver(core, _bridged(b"dup-1")), "a durable bridged message was routed twice across a restart"
    assert _deliver(core, _bridged(b"dup-2", durable=False))  # non-durable: gone with the crash, so not a duplicate
    assert len(core.post_office.queues["orders"].ready) == 2
    storage.journal.close()


def test_the_stored_cache_keeps_only_id_cache_size_ids(tmp_path: Path) -> None:
    core, storage = _node(tmp_path, cache=2)
    for dup in (b"a", b"b", b"c"):
        assert _deliver(core, _bridged(dup))
    storage.journal.sync()
    storage.journal.close()

    core, storage = _node(tmp_path, cache=2)
    assert [d for _, d in storage.recovered_duplicate_ids] == [b"b", b"c"]  # a's record was deleted on eviction
    assert _deliver(core, _bridged(b"a"))
    assert not _deliver(core, _bridged(b"c"))
    storage.journal.close()
