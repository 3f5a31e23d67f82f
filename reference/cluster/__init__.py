"""Clustering for the reference broker: UDP broadcast groups and discovery groups (notes §12).

A sans-IO core with the time passed in (:class:`Broadcaster` says what to send and when,
:class:`DiscoveryTable` turns received datagrams into typed changes; the kit client's ``udp://``
receiver uses the same table) under a thin asyncio layer
(:class:`BroadcastEndpoint`, :class:`DiscoveryEndpoint`, all of a broker.xml's groups in
:class:`UdpGroups`).  The datagrams are Artemis's byte for byte: the connectors are the
TransportConfigurations Artemis builds from ``<connector>`` URIs
(:func:`connector_transport_configuration`)::

    groups = UdpGroups(config, node_id)      # ConfigError when a group cannot work
    await groups.start()                     # after the acceptor listens
    groups.discovery["dg"].subscribe(lambda entries: ...)   # a node appeared or expired
    await groups.stop()                      # before the acceptor closes

The cluster connections (bridges made with the kit's client, which itself uses the discovery
table, hence not imported here) are in ``reference.cluster._bridge``.

Sans-IO::

    table = DiscoveryTable(own_node_id, refresh_timeout_ms=10_000)
    for change in table.receive(data, ("10.0.0.5", 40123), now_ms):
        match change:
            case NodeFound(node_id, connector, sender): ...
            case NodeExpired(node_id, connector, last_update_ms): ...
"""

from __future__ import annotations

from ._discovery import (
    INVM_CONNECTOR_FACTORY,
    NETTY_CONNECTOR_FACTORY,
    NETTY_CONNECTOR_KEYS,
    Broadcaster,
    ConnectorChanged,
    DiscoveryChange,
    DiscoveryEntry,
    DiscoveryTable,
    MalformedDatagram,
    NodeExpired,
    NodeFound,
    SameNodeNewUniqueId,
    Sender,
    connector_transport_configuration,
    java_hash_map_order,
    notifies_listeners,
)
from ._udp import BroadcastEndpoint, DiscoveryEndpoint, DiscoveryListener, UdpGroups, monotonic_ms

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
    # asyncio
    "UdpGroups",
    "BroadcastEndpoint",
    "DiscoveryEndpoint",
    "DiscoveryListener",
    "monotonic_ms",
]
