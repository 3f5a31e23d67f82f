"""What a broadcast carries (notes §12): the TransportConfiguration Artemis builds from a broker.xml
``<connector>``, with its parameters in ``java.util.HashMap`` order so the bytes are Artemis's."""

from __future__ import annotations

from collections.abc import Iterable

from cck.codec import TransportConfiguration, TransportParam, TransportParamType

from ..config import Connector

__all__ = [
    "INVM_CONNECTOR_FACTORY",
    "NETTY_CONNECTOR_FACTORY",
    "NETTY_CONNECTOR_KEYS",
    "connector_transport_configuration",
    "java_hash_map_order",
]

NETTY_CONNECTOR_FACTORY = "org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory"
INVM_CONNECTOR_FACTORY = "org.apache.activemq.artemis.core.remoting.impl.invm.InVMConnectorFactory"

#: The query keys a ``tcp://`` connector keeps as parameters (Netty ``TransportConstants``
#: ALLOWABLE_CONNECTOR_KEYS, the same 57 keys in 2.28.0 and 2.44.0); any other key travels as an
#: extra property (``$.EP.`` prefix on the wire).
NETTY_CONNECTOR_KEYS = frozenset({
    "activemq.passwordcodec", "activemq.usemaskedpassword", "activemqServerName", "batchDelay",
    "connect-timeout-millis", "crlPath", "enabledCipherSuites", "enabledProtocols", "forceSSLParameters",
    "handshake-timeout", "host", "httpClientIdleScanPeriod", "httpClientIdleTime", "httpEnabled",
    "httpRequiresSessionId", "httpUpgradeEnabled", "httpUpgradeEndpoint", "keyStoreAlias", "keyStorePassword",
    "keyStorePath", "keyStoreProvider", "keyStoreType", "localAddress", "localPort", "nioRemotingThreads",
    "port", "remotingThreads", "servletPath", "sniHost", "socksEnabled", "socksHost", "socksPassword",
    "socksPort", "socksRemoteDNS", "socksUsername", "socksVersion", "sslEnabled", "sslProvider", "tcpNoDelay",
    "tcpReceiveBufferSize", "tcpSendBufferSize", "trustAll", "trustManagerFactoryPlugin", "trustStorePassword",
    "trustStorePath", "trustStoreProvider", "trustStoreType", "useDefaultSslContext", "useEpoll",
    "useGlobalWorkerPool", "useKQueue", "useNio", "useNioGlobalWorkerPool", "useServlet", "verifyHost",
    "writeBufferHighWaterMark", "writeBufferLowWaterMark",
})  # fmt: skip


def _java_string_hash(text: str) -> int:
    """``String.hashCode()``: over UTF-16 code units, 32-bit wrap-around (unsigned here)."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_map_order(keys: Iterable[str]) -> list[str]:
    """The order a ``java.util.HashMap`` created empty iterates ``keys`` put in that order.

    Buckets are ``(h ^ h >>> 16) & (capacity - 1)`` with the capacity doubling from 16 while the
    size exceeds 3/4 of it; a bucket keeps the order its keys were first put in (a resize splits
    buckets without reordering them).  Buckets turned into trees (8 colliding keys in a table of
    64 or more) are not modelled.
    """
    order = list(dict.fromkeys(keys))
    capacity = 16
    while len(order) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = _java_string_hash(key)
        return (h ^ (h >> 16)) & (capacity - 1)

    return [key for _, _, key in sorted((bucket(k), i, k) for i, k in enumerate(order))]


def _raw_authority(uri: str) -> tuple[str, str]:
    """Host and port of a transport URI as ``java.net.URI`` gives them to Artemis: an IPv6 host
    keeps its brackets, a missing port is ``-1``, an authority without a host is ``null``/``-1``."""
    rest = uri.strip().partition("://")[2].partition("#")[0]
    q = rest.rfind("?")
    authority = (rest[:q] if q >= 0 else rest).split("/", 1)[0]
    if authority.startswith("["):
        end = authority.find("]")
        host, tail = (authority[: end + 1], authority[end + 1 :]) if end >= 0 else (authority, "")
    else:
        host, sep, port = authority.partition(":")
        tail = sep + port
    port = tail[1:] if tail.startswith(":") and tail[1:].isdigit() else "-1"
    if not host:
        return "null", "-1"
    return host, port


def connector_transport_configuration(connector: Connector) -> TransportConfiguration:
    """The TransportConfiguration Artemis builds from a broker.xml ``<connector>`` and broadcasts.

    For ``tcp://``: the connector's name, the Netty connector factory, and every value a
    **string**: ``host`` and ``port`` from the URI's authority, then the query parameters (which
    may override them); query keys outside :data:`NETTY_CONNECTOR_KEYS` become extra properties.
    Parameters and extra properties are each in ``HashMap`` order, so the bytes are Artemis's
    (``tcp://127.0.0.1:58023`` encodes ``port`` before ``host``).  For ``vm://N``: the in-VM
    factory with ``serverId`` = N (Artemis drops the query of a ``vm://`` connector).
    """
    if connector.scheme == "vm":
        server_id = _raw_authority(connector.uri)[0]
        return TransportConfiguration(
            connector.name, INVM_CONNECTOR_FACTORY, (TransportParam("serverId", TransportParamType.STRING, server_id),)
        )
    host, port = _raw_authority(connector.uri)
    params: dict[str, str] = {"host": host, "port": port}
    extra: dict[str, str] = {}
    # Artemis reads the query into a HashMap first, so that map's order is the order of the puts.
    for key in java_hash_map_order(connector.params):
        (params if key in NETTY_CONNECTOR_KEYS else extra)[key] = connector.params[key]
    return TransportConfiguration(
        connector.name,
        NETTY_CONNECTOR_FACTORY,
        tuple(TransportParam(k, TransportParamType.STRING, params[k]) for k in java_hash_map_order(params)),
        tuple(TransportParam(k, TransportParamType.STRING, extra[k]) for k in java_hash_map_order(extra)),
    )
