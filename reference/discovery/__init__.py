"""UDP discovery (notes §12), the part the broker and the kit's client share.

A sans-IO core with the time passed in (``now_ms``, :mod:`reference._clock`): :class:`Broadcaster`
says what a broadcast group sends and when, :class:`DiscoveryTable` turns received datagrams into
typed changes (Artemis's ``DiscoveryGroup`` rules).  The datagrams are Artemis's byte for byte: the
connectors are the TransportConfigurations Artemis builds from ``<connector>`` URIs
(:func:`connector_transport_configuration`).  The sockets are made as Artemis's
``UDPBroadcastEndpointFactory`` makes them (:func:`open_multicast_receiver`,
:func:`open_multicast_sender`).

The broker's broadcast and discovery groups (asyncio, from broker.xml) are in
:mod:`reference.cluster`; the client's ``udp://`` receiver is in :mod:`reference.client`.  Both import
this package and neither imports the other for it::

    broadcaster = Broadcaster(node_id, [connector_transport_configuration(c)], period_ms=2000, now_ms=now)
    payload = broadcaster.poll(now)          # bytes at once, then None until next_deadline()

    table = DiscoveryTable(own_node_id, refresh_timeout_ms=10_000)
    for change in table.receive(payload, ("10.0.0.5", 40123), now):
        match change:
            case NodeFound(node_id, connector, sender): ...
            case NodeExpired(node_id, connector, last_update_ms): ...
"""

from __future__ import annotations

from ._broadcaster import Broadcaster
from ._connector import (
    INVM_CONNECTOR_FACTORY,
    NETTY_CONNECTOR_FACTORY,
    NETTY_CONNECTOR_KEYS,
    connector_transport_configuration,
    java_hash_map_order,
)
from ._multicast import open_multicast_receiver, open_multicast_sender
from ._table import (
    ConnectorChanged,
    DiscoveryChange,
    DiscoveryEntry,
    DiscoveryTable,
    MalformedDatagram,
    NodeExpired,
    NodeFound,
    SameNodeNewUniqueId,
    Sender,
    notifies_listeners,
)

__all__ = [
    # sans-IO core
    "Broadcaster",
    "DiscoveryTable",
    "DiscoveryEntry",
    "DiscoveryChange",
    "NodeFound",
    "NodeExpired",
    "ConnectorChanged",
    "SameNodeNewUniqueId",
    "MalformedDatagram",
    "Sender",
    "notifies_listeners",
    # what a broadcast carries
    "connector_transport_configuration",
    "java_hash_map_order",
    "NETTY_CONNECTOR_FACTORY",
    "INVM_CONNECTOR_FACTORY",
    "NETTY_CONNECTOR_KEYS",
    # the sockets
    "open_multicast_receiver",
    "open_multicast_sender",
]
