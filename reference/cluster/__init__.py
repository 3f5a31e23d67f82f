"""Clustering for the reference broker: broker.xml's broadcast and discovery groups over UDP (notes §12),
cluster connections (bridges made with the kit's client) and scale-down.

The sans-IO discovery core the groups run (:class:`~reference.discovery.Broadcaster`,
:class:`~reference.discovery.DiscoveryTable`) and the multicast sockets are in :mod:`reference.discovery`,
which the kit client's ``udp://`` receiver uses too; this package adds the asyncio layer for a broker
(:class:`BroadcastEndpoint`, :class:`DiscoveryEndpoint`, all of a broker.xml's groups in
:class:`UdpGroups`)::

    groups = UdpGroups(config, node_id)      # ConfigError when a group cannot work
    await groups.start()                     # after the acceptor listens
    groups.discovery["dg"].subscribe(lambda entries: ...)   # a node appeared or expired
    await groups.stop()                      # before the acceptor closes

and the cluster connections and scale-down on top of them::

    role = cluster_role(config, node_id)     # None: no cluster connection
    manager = start_cluster(config, hooks, groups, own_url, flush)   # None: no cluster connection
    await scale_down(config, core, server, groups)
"""

from __future__ import annotations

from ._bridge import ClusterManager, Peer, cluster_role, start_cluster
from ._scale_down import scale_down
from ._udp import BroadcastEndpoint, DiscoveryEndpoint, DiscoveryListener, UdpGroups, monotonic_ms

__all__ = [
    # asyncio: a broker.xml's broadcast and discovery groups
    "UdpGroups",
    "BroadcastEndpoint",
    "DiscoveryEndpoint",
    "DiscoveryListener",
    "monotonic_ms",
    # cluster connections and scale-down
    "ClusterManager",
    "Peer",
    "cluster_role",
    "start_cluster",
    "scale_down",
]
