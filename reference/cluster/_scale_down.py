"""Scale-down: a node stopping gracefully hands its messages to another node (docs/notes/cluster-wire.md §5.2).

With ``<ha-policy><live-only><scale-down>`` enabled, the stopping node

1. finds a target: the first node reachable through the scale-down ``<connectors>``, its
   ``<discovery-group-ref>``'s entries, or (with neither) the cluster's known members; with a
   ``<group-name>``, only a node that advertises that scale-down group name in its topology;
2. disconnects its clients with DISCONNECT reason SCALE_DOWN naming the target (so they can follow);
3. sends every waiting message, as the cluster user, to the target with ``_AMQ_ROUTE_TO`` naming the
   target's queues of the same names (created there first when missing; queue IDs are derived from
   names, see ``reference.broker._model.stable_id``), so each lands at the back of the same queues,
   durable or not as it was; only after the target confirmed a message is it removed here.

Messages in a store-and-forward queue for the target keep their route; those waiting for a third
node are sent to their address and routed by the target as any send.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Iterable

from cck.codec import ExceptionType, PropertyType, TypedProperties

from .._server import BrokerServer
from ..broker import (
    ROUTE_TO_KEY,
    SF_PREFIX,
    BrokerCore,
    DeliveryEngine,
    MessageRef,
    Queue,
    encode_ids,
    internal_address,
)
from ..client import BrokerRefused, ClientError, ClientSettings, Connection, Session, connect, connector_of
from ..config import BrokerConfig
from ..discovery import connector_transport_configuration
from ._bridge import Peer, identify
from ._udp import UdpGroups

__all__ = ["scale_down"]

LOG = logging.getLogger("cck.reference.cluster")


def _candidates(config: BrokerConfig, core: BrokerCore, udp: UdpGroups) -> list[Peer]:
    policy = config.ha_policy.scale_down
    assert policy is not None
    connectors = {c.name: c for c in config.connectors}
    if policy.connectors:
        return [Peer(connectors[n].host, connectors[n].port, connector_transport_configuration(connectors[n]))
                for n in policy.connectors]
    if policy.discovery_group_ref is not None:
        found = [connector_of(e.connector) for e in udp.discovery[policy.discovery_group_ref].entries]
        return [Peer(f.host, f.port) for f in found if f is not None]
    cluster = core.cluster
    if cluster is None:
        return []
    peers = [connector_of(c) for n, c in cluster.members() if c is not None and n != cluster.role.node_id]
    return [Peer(p.host, p.port) for p in peers if p is not None]


async def _target(config: BrokerConfig, core: BrokerCore, udp: UdpGroups,
                  settings: ClientSettings) -> tuple[Connection, str, Peer] | None:
    policy = config.ha_policy.scale_down
    assert policy is not None
    for peer in _candidates(config, core, udp):
        try:
            connection = await connect(peer.url, settings=settings, connect_timeout=10.0)
        except (ClientError, OSError) as exc:
            LOG.info("scale-down target unreachable", extra={"peer": peer.url, "reason": str(exc)})
            continue
        try:
            node_id = identify(connection, peer)
        except ValueError as exc:
            LOG.info("scale-down target not identified", extra={"peer": peer.url, "reason": str(exc)})
            await connection.close()
            continue
        member = connection.core.topology.get(node_id)
        group = member.scale_down_group if member is not None else None
        if node_id != core.settings.node_id and (policy.group_name is None or group == policy.group_name):
            return connection, node_id, peer
        await connection.close()
    return None


def _waiting(engine: DeliveryEngine) -> list[tuple[Queue, list[MessageRef]]]:
    """The queues to empty, fullest first (as Artemis orders them), with their waiting messages."""
    queues = [q for q in engine.queues()
              if q.ready and not q.temporary and (not internal_address(q.address)
                                                   or q.name.startswith(SF_PREFIX))]
    queues.sort(key=lambda q: len(q.ready), reverse=True)
    return [(q, list(q.ready)) for q in queues]


def _route_for(ref: MessageRef, target_sf: str, holders: Iterable[Queue]) -> TypedProperties:
    """The properties the target routes the message by (see the module docstring)."""
    entries = tuple(e for e in ref.message.properties.entries if not e.key.startswith(ROUTE_TO_KEY))
    properties = TypedProperties(entries)
    if ref.queue.name.startswith(SF_PREFIX):
        route = ref.message.properties.get(ROUTE_TO_KEY + target_sf)
        if ref.queue.name == target_sf and isinstance(route, bytes):
            return properties.with_value(ROUTE_TO_KEY, route, PropertyType.BYTES)
        return properties  # for a third node: the target routes it by its address
    return properties.with_value(ROUTE_TO_KEY, encode_ids(q.binding_id for q in holders), PropertyType.BYTES)


async def _ensure_queue(session: Session, queue: Queue) -> None:
    try:
        await session.create_queue(queue.address, queue.name, routing_type=queue.routing_type,
                                   durable=queue.durable, max_consumers=queue.max_consumers,
                                   purge_on_no_consumers=queue.purge_on_no_consumers)
    except BrokerRefused as exc:
        if exc.code != ExceptionType.QUEUE_EXISTS:
            raise


async def _move(engine: DeliveryEngine, server: BrokerServer, session: Session, target_sf: str) -> int:
    producer = session.create_producer()
    waiting = _waiting(engine)
    for queue, _ in waiting:
        if not queue.name.startswith(SF_PREFIX):
            await _ensure_queue(session, queue)
    # a message in several queues (a multicast address) goes once, naming all of them
    holders: dict[int, list[MessageRef]] = {}
    for _, refs in waiting:
        for ref in refs:
            holders.setdefault(ref.message_id, []).append(ref)
    moved = 0
    for refs in holders.values():
        first = refs[0]
        same_kind = [r for r in refs if r.queue.name.startswith(SF_PREFIX) == first.queue.name.startswith(SF_PREFIX)]
        properties = _route_for(first, target_sf, [r.queue for r in same_kind])
        await producer.send(dataclasses.replace(first.message, message_id=0, properties=properties))
        engine.remove_waiting(refs)
        moved += 1
    server.poke()
    return moved


async def scale_down(config: BrokerConfig, core: BrokerCore, server: BrokerServer, udp: UdpGroups) -> None:
    """Hand this node's messages to another node before it stops (when broker.xml enables scale-down)."""
    policy = config.ha_policy.scale_down
    if policy is None or not policy.enabled:
        return
    settings = ClientSettings(reconnect_attempts=0, block_on_durable_send=True, block_on_non_durable_send=True,
                              producer_window_size=-1)
    found = await _target(config, core, udp, settings)
    if found is None:
        LOG.error("scale-down found no target node; the messages stay in this node's journal",
                  extra={"group": policy.group_name})
        return
    connection, node_id, peer = found
    LOG.info("scaling down", extra={"target": node_id, "peer": peer.url})
    core.shutdown(scale_down_to=(node_id, peer.connector))
    server.poke()
    cluster = core.cluster
    target_sf = cluster.role.sf_queue(node_id) if cluster is not None else ""
    try:
        user, password = (cluster.role.user, cluster.role.password) if cluster is not None else \
            (config.cluster_user, config.cluster_password)
        session = await connection.create_session(username=user, password=password)
        moved = await asyncio.wait_for(_move(core.engine, server, session, target_sf), 120.0)
        LOG.info("scaled down", extra={"target": node_id, "messages": moved})
    except (ClientError, OSError, TimeoutError) as exc:
        LOG.error("scale-down failed; what was not moved stays in this node's journal",
                  extra={"target": node_id, "reason": str(exc)})
    finally:
        with contextlib.suppress(ClientError, OSError, TimeoutError):
            await asyncio.wait_for(connection.close(), 5.0)
