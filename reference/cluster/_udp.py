"""The broker's broadcast and discovery groups: the asyncio layer around :mod:`reference.discovery`'s
sans-IO core.  It owns the UDP sockets and the clock, nothing else.

Sockets come from :mod:`reference.discovery` (made as Artemis's ``UDPBroadcastEndpointFactory``
makes them) and are handed to ``loop.create_datagram_endpoint``: the broadcaster's bound to
``local-bind-address``/``local-bind-port`` (the wildcard, an ephemeral port by default), the
receiver's bound to the group and port and joined on ``local-bind-address`` (or any interface).

A group that cannot start (an address not on this host, a port in use) is logged and left stopped,
as Artemis logs "unable to start broadcast group" and goes on; a malformed datagram is logged and
ignored; a failing send is logged and retried at the next period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import uuid
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from .._clock import monotonic_ms
from ..config import BroadcastGroup, BrokerConfig, ConfigError, DiscoveryGroup
from ..discovery import (
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
    notifies_listeners,
    open_multicast_receiver,
    open_multicast_sender,
)

__all__ = ["BroadcastEndpoint", "DiscoveryEndpoint", "DiscoveryListener", "UdpGroups", "monotonic_ms"]

LOG = logging.getLogger("cck.reference.cluster")

#: Called with every entry of the table when a node appeared or expired (Artemis's
#: ``DiscoveryListener.connectorsChanged``).
DiscoveryListener = Callable[[tuple[DiscoveryEntry, ...]], None]


def _connector_text(change: NodeFound | NodeExpired | ConnectorChanged | DiscoveryEntry) -> str:
    connector = change.new if isinstance(change, ConnectorChanged) else change.connector
    host, port = connector.param("host"), connector.param("port")
    if host is None and port is None:
        return connector.name
    return f"{host}:{port}"


def _sender_text(sender: Sender) -> str:
    return f"{sender[0]}:{sender[1]}"


async def _resolve(host: str, port: int) -> tuple[socket.AddressFamily, tuple[Any, ...]]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    if not infos:  # pragma: no cover - getaddrinfo raises instead
        raise OSError(f"cannot resolve {host}")
    family, _, _, _, address = infos[0]
    return family, address


# --------------------------------------------------------------------------- broadcasting


class _BroadcastProtocol(asyncio.DatagramProtocol):
    def __init__(self, endpoint: BroadcastEndpoint) -> None:
        self.endpoint = endpoint

    def error_received(self, exc: Exception) -> None:
        self.endpoint._send_failed(exc)


class BroadcastEndpoint:
    """Runs one ``<broadcast-group>``: a :class:`Broadcaster` on a UDP socket.

    ``connectors`` are the TransportConfigurations of the group's connector-refs, as Artemis builds
    them; ``broadcaster`` is the sans-IO core, made at :meth:`start`."""

    def __init__(
        self,
        group: BroadcastGroup,
        config: BrokerConfig,
        node_id: str,
        *,
        clock_ms: Callable[[], int] = monotonic_ms,
    ) -> None:
        if group.group_address is None or group.group_port == -1:
            raise ConfigError(
                f"broadcast-group '{group.name}' needs <group-address> and <group-port>",
                file=config.source, element="broadcast-group",
                path=f"core/broadcast-groups/broadcast-group[{group.name}]",
            )  # fmt: skip
        connectors = []
        for ref in group.connector_refs:
            try:
                connectors.append(config.connector(ref))
            except KeyError:
                raise ConfigError(
                    f"broadcast-group '{group.name}' refers to an undefined connector",
                    file=config.source, element="connector-ref", found=ref,
                    path=f"core/broadcast-groups/broadcast-group[{group.name}]/connector-ref",
                ) from None  # fmt: skip
        self.group = group
        self.node_id = node_id
        self.connectors = tuple(connector_transport_configuration(c) for c in connectors)
        #: Made once per instance, as Artemis's BroadcastGroupImpl does (a broker start makes a new one).
        self.unique_id = str(uuid.uuid4())
        self.broadcaster: Broadcaster | None = None
        self._clock = clock_ms
        self._transport: asyncio.DatagramTransport | None = None
        self._task: asyncio.Task[None] | None = None
        self._destination: tuple[Any, ...] = ()
        self._errors = 0
        self._failing = False

    @property
    def name(self) -> str:
        return self.group.name

    @property
    def running(self) -> bool:
        return self._task is not None

    @property
    def local_address(self) -> tuple[Any, ...] | None:
        """Where the socket is bound (``None`` when not running)."""
        return None if self._transport is None else tuple(self._transport.get_extra_info("sockname"))

    async def start(self) -> None:
        """Open the socket and send the first datagram at once; raises ``OSError`` when the socket cannot be made."""
        if self._task is not None:
            return
        group = self.group
        assert group.group_address is not None
        family, self._destination = await _resolve(group.group_address, group.group_port)
        local_port = None if group.local_bind_port == -1 else group.local_bind_port
        sock = open_multicast_sender(family, group.local_bind_address, local_port)
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await loop.create_datagram_endpoint(lambda: _BroadcastProtocol(self), sock=sock)
        except BaseException:
            sock.close()
            raise
        self._transport = transport
        self.broadcaster = Broadcaster(
            self.node_id, self.connectors, group.broadcast_period, now_ms=self._clock(), unique_id=self.unique_id
        )
        self._task = loop.create_task(self._run(self.broadcaster), name=f"broadcast-group {group.name}")
        LOG.info("broadcast group started", extra={
            "group": group.name, "address": group.group_address, "port": group.group_port,
            "period_ms": group.broadcast_period, "local": _sender_text(self.local_address or ("?", 0)),
            "unique_id": self.broadcaster.unique_id,
            "connectors": [f"{c.name}={c.param('host')}:{c.param('port')}" for c in self.connectors],
        })  # fmt: skip

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._transport is not None:
            self._transport.close()
            self._transport = None
            LOG.info("broadcast group stopped", extra={"group": self.group.name})

    async def _run(self, broadcaster: Broadcaster) -> None:
        try:
            while True:
                payload = broadcaster.poll(self._clock())
                if payload is not None and self._transport is not None:
                    errors = self._errors
                    self._transport.sendto(payload, self._destination)  # a failure comes to _send_failed
                    if self._errors == errors and self._failing:
                        self._failing = False
                        LOG.info("broadcast group sending again", extra={"group": self.group.name})
                await asyncio.sleep(max(0, broadcaster.next_deadline() - self._clock()) / 1000)
        except Exception:  # never let the broker's shutdown trip over a dead broadcaster
            LOG.exception("broadcast group failed", extra={"group": self.group.name})

    def _send_failed(self, exc: Exception) -> None:
        self._errors += 1
        level = logging.DEBUG if self._failing else logging.WARNING
        self._failing = True
        LOG.log(level, "broadcast failed", extra={
            "group": self.group.name, "address": self.group.group_address, "port": self.group.group_port,
            "detail": str(exc),
        })  # fmt: skip


# --------------------------------------------------------------------------- discovery


class _DiscoveryProtocol(asyncio.DatagramProtocol):
    def __init__(self, endpoint: DiscoveryEndpoint) -> None:
        self.endpoint = endpoint

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.endpoint.datagram_received(data, (str(addr[0]), int(addr[1])))

    def error_received(self, exc: Exception) -> None:
        LOG.warning("discovery receive failed", extra={"group": self.endpoint.name, "detail": str(exc)})


class DiscoveryEndpoint:
    """Runs one ``<discovery-group>``: a UDP receiver feeding a :class:`DiscoveryTable`.

    ``node_id`` is the broker's own (its own broadcasts are ignored).  Listeners added with
    :meth:`subscribe` get every entry of the table when a node appears or expires."""

    def __init__(self, group: DiscoveryGroup, node_id: str, *, clock_ms: Callable[[], int] = monotonic_ms) -> None:
        if group.group_address is None or group.group_port == -1:
            raise ConfigError(f"discovery-group '{group.name}' needs <group-address> and <group-port>",
                              element="discovery-group", path=f"core/discovery-groups/discovery-group[{group.name}]")
        self.group = group
        self.table = DiscoveryTable(node_id, group.refresh_timeout)
        self._clock = clock_ms
        self._listeners: list[DiscoveryListener] = []
        self._transport: asyncio.DatagramTransport | None = None

    @property
    def name(self) -> str:
        return self.group.name

    @property
    def running(self) -> bool:
        return self._transport is not None

    @property
    def entries(self) -> tuple[DiscoveryEntry, ...]:
        return self.table.entries

    @property
    def local_address(self) -> tuple[Any, ...] | None:
        return None if self._transport is None else tuple(self._transport.get_extra_info("sockname"))

    def subscribe(self, listener: DiscoveryListener) -> Callable[[], None]:
        """Call ``listener(entries)`` whenever a node appears or expires; returns the unsubscribe function."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return unsubscribe

    async def start(self) -> None:
        """Open the socket and join the group; raises ``OSError`` when that fails."""
        if self._transport is not None:
            return
        group = self.group
        assert group.group_address is not None
        _, address = await _resolve(group.group_address, group.group_port)
        sock = open_multicast_receiver(address[0], group.group_port, group.local_bind_address)
        try:
            transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
                lambda: _DiscoveryProtocol(self), sock=sock
            )
        except BaseException:
            sock.close()
            raise
        self._transport = transport
        LOG.info("discovery group started", extra={
            "group": group.name, "address": group.group_address, "port": group.group_port,
            "refresh_timeout_ms": group.refresh_timeout,
            "interface": group.local_bind_address or "any",
        })  # fmt: skip

    async def stop(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
            LOG.info("discovery group stopped", extra={"group": self.group.name})

    def datagram_received(self, data: bytes, sender: Sender) -> tuple[DiscoveryChange, ...]:
        """Feed one datagram to the table (the socket calls this); log and notify as Artemis does."""
        changes = self.table.receive(data, sender, self._clock())
        for change in changes:
            self._log(change)
        if notifies_listeners(changes):
            entries = self.table.entries
            for listener in list(self._listeners):
                try:
                    listener(entries)
                except Exception:  # a listener's bug must not stop discovery
                    LOG.exception("discovery listener failed", extra={"group": self.group.name})
        return changes

    def _log(self, change: DiscoveryChange) -> None:
        group = self.group.name
        if isinstance(change, NodeFound):
            LOG.info("node discovered", extra={"group": group, "node_id": change.node_id,
                                               "connector": _connector_text(change),
                                               "sender": _sender_text(change.sender)})
        elif isinstance(change, NodeExpired):
            LOG.info("node expired", extra={"group": group, "node_id": change.node_id,
                                            "connector": _connector_text(change),
                                            "refresh_timeout_ms": self.table.refresh_timeout_ms})
        elif isinstance(change, ConnectorChanged):
            LOG.info("node connector changed", extra={"group": group, "node_id": change.node_id,
                                                      "connector": _connector_text(change),
                                                      "sender": _sender_text(change.sender)})
        elif isinstance(change, SameNodeNewUniqueId):
            LOG.warning("multiple servers broadcasting the same node id", extra={
                "group": group, "node_id": change.node_id, "sender": _sender_text(change.sender),
                "old_unique_id": change.old_unique_id, "new_unique_id": change.new_unique_id,
            })  # fmt: skip
        elif isinstance(change, MalformedDatagram):
            LOG.warning("malformed discovery datagram ignored", extra={
                "group": group, "sender": _sender_text(change.sender), "detail": str(change.error),
                "offset": change.error.offset,
            })  # fmt: skip


# --------------------------------------------------------------------------- the broker's groups


class UdpGroups:
    """Every UDP broadcast group and discovery group of a broker.xml, started and stopped together.

    Made before the broker listens (a group that cannot work is a :class:`ConfigError` then);
    :meth:`start` starts each group, logging (not raising) when one cannot start; JGroups groups
    are reported and skipped.  ``discovery[name]`` is the group a cluster connection subscribes to.
    """

    def __init__(self, config: BrokerConfig, node_id: str, *, clock_ms: Callable[[], int] = monotonic_ms) -> None:
        self.node_id = node_id
        broadcast: dict[str, BroadcastEndpoint] = {}
        discovery: dict[str, DiscoveryEndpoint] = {}
        for group in config.broadcast_groups:
            if not group.is_jgroups:
                broadcast[group.name] = BroadcastEndpoint(group, config, node_id, clock_ms=clock_ms)
        for d in config.discovery_groups:
            if not d.is_jgroups:
                discovery[d.name] = DiscoveryEndpoint(d, node_id, clock_ms=clock_ms)
        #: The JGroups groups, which are not started (reported at :meth:`start`).
        groups: list[BroadcastGroup | DiscoveryGroup] = [*config.broadcast_groups, *config.discovery_groups]
        self.jgroups: tuple[BroadcastGroup | DiscoveryGroup, ...] = tuple(g for g in groups if g.is_jgroups)
        self.broadcast: Mapping[str, BroadcastEndpoint] = MappingProxyType(broadcast)
        self.discovery: Mapping[str, DiscoveryEndpoint] = MappingProxyType(discovery)

    async def start(self) -> None:
        for group in self.jgroups:
            kind = "broadcast group" if isinstance(group, BroadcastGroup) else "discovery group"
            LOG.warning(f"JGroups {kind} not started", extra={
                "group": group.name, "jgroups_file": group.jgroups_file,
                "detail": "the reference broker supports UDP groups only",
            })  # fmt: skip
        for endpoint in self._endpoints():
            try:
                await endpoint.start()
            except OSError as exc:
                kind = "broadcast group" if isinstance(endpoint, BroadcastEndpoint) else "discovery group"
                LOG.error(f"{kind} not started", extra={
                    "group": endpoint.name, "address": endpoint.group.group_address, "port": endpoint.group.group_port,
                    "detail": str(exc),
                })  # fmt: skip

    async def stop(self) -> None:
        for endpoint in self._endpoints():
            await endpoint.stop()

    def _endpoints(self) -> list[BroadcastEndpoint | DiscoveryEndpoint]:
        return [*self.discovery.values(), *self.broadcast.values()]
