"""Bridges to nodes a discovery group finds: kept while listed or once reached, dropped when an
unreached node's entry expires (reference/cluster/_bridge.py ClusterManager.discovered)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from cck.codec import TransportConfiguration
from cck.conformance.targets import free_ports
from cck.reference.cluster._bridge import ClusterManager, Peer
from cck.reference.config._model import ClusterConnection


def _closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    return free_ports(1)[0]


def _manager() -> ClusterManager:
    cc = ClusterConnection("cluster", "self", discovery_group_ref="dg", retry_interval=50)
    # the hooks are only used once a bridge reaches a node, which no bridge here does
    return ClusterManager(cast(Any, None), cc, "tcp://127.0.0.1:1", lambda: None)


def test_an_unreached_node_is_dropped_when_its_entry_expires_and_found_anew_later() -> None:
    async def scenario() -> None:
        manager = _manager()
        connector = TransportConfiguration.netty("127.0.0.1", _closed_port(), "gone")
        manager.discovered([connector])
        (key, first), = manager.bridges.items()
        assert first.discovered
        assert not first.reached
        assert first.running
        manager.discovered([])
        assert manager.bridges == {}
        await asyncio.wait_for(asyncio.gather(*manager.retiring), 5.0)
        assert not first.running, "the expired node's bridge still runs"
        manager.discovered([connector])
        assert manager.bridges[key] is not first, "a node broadcasting again is found anew"
        await asyncio.wait_for(manager.stop(), 5.0)

    asyncio.run(scenario())


def test_a_reached_node_and_a_static_one_stay_when_the_entries_change() -> None:
    async def scenario() -> None:
        manager = _manager()
        manager.discovered([TransportConfiguration.netty("127.0.0.1", _closed_port(), "reached")])
        (reached,) = manager.bridges.values()
        reached.reached = True
        manager.connect_to(Peer("127.0.0.1", _closed_port()))
        manager.discovered([])
        assert reached in manager.bridges.values()
        assert len(manager.bridges) == 2
        assert manager.retiring == set()
        await asyncio.wait_for(manager.stop(), 5.0)

    asyncio.run(scenario())
