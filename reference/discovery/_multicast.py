"""The UDP sockets of discovery (notes §12), made as Artemis's ``UDPBroadcastEndpointFactory`` makes
them: one place for the broker's broadcast and discovery groups, the kit client's ``udp://`` receiver
and the conformance suite's listener.  Both return a non-blocking socket, ready for
``loop.create_datagram_endpoint(..., sock=sock)``; on failure the socket is closed and the
``OSError`` names the address or the group.
"""

from __future__ import annotations

import ipaddress
import socket
import struct

__all__ = ["open_multicast_receiver", "open_multicast_sender"]


def _bind(sock: socket.socket, address: tuple[str, int]) -> None:
    try:
        sock.bind(address)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot bind to {address[0] or '*'}:{address[1]}: {exc.strerror}") from exc


def open_multicast_receiver(group: str, port: int, interface: str | None = None) -> socket.socket:
    """A socket that receives the datagrams sent to ``group:port``.

    ``group`` is a numeric IPv4 or IPv6 address (an IPv6 one may carry a ``%scope``); ``interface``
    is the IPv4 address of the interface the group is joined on (``None``: any).

    * ``SO_REUSEADDR`` and, where there is one, ``SO_REUSEPORT``: several receivers on one host
      (brokers, clients, the suite's listener) share the group port, as Java's ``MulticastSocket``
      allows;
    * bound to (group, port), so only the group's datagrams arrive, not unicast traffic to that
      port; the wildcard address where the system refuses to bind to a multicast address;
    * ``IP_ADD_MEMBERSHIP`` (``IPV6_JOIN_GROUP`` on any interface for IPv6): without joining, the
      kernel delivers no multicast datagram; on ``interface`` so a group on loopback needs no
      multicast route.  A group address that is not multicast is bound but not joined;
    * non-blocking, for asyncio.
    """
    group_ip = ipaddress.ip_address(group.split("%", 1)[0])
    family = socket.AF_INET6 if group_ip.version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        reuse_port = getattr(socket, "SO_REUSEPORT", None)
        if reuse_port is not None:
            sock.setsockopt(socket.SOL_SOCKET, reuse_port, 1)
        try:
            sock.bind((group, port))
        except OSError:
            _bind(sock, ("::" if family == socket.AF_INET6 else "", port))
        if group_ip.is_multicast:
            try:
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, group_ip.packed + struct.pack("@I", 0))
                else:
                    address = socket.inet_aton(interface or "0.0.0.0")  # noqa: S104 - INADDR_ANY
                    sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, group_ip.packed + address)
            except OSError as exc:
                where = interface or "any interface"
                raise OSError(exc.errno, f"cannot join {group} on {where}: {exc.strerror}") from exc
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def open_multicast_sender(
    family: socket.AddressFamily, local_address: str | None = None, local_port: int | None = None
) -> socket.socket:
    """A socket that sends to a multicast group, bound to ``local_address`` (``None``: the wildcard)
    and ``local_port`` (``None``: an ephemeral port).

    * ``SO_REUSEADDR`` with a fixed local port only, as a ``MulticastSocket`` has it (a restarted
      broker can bind the port again at once);
    * IPv4: ``SO_BROADCAST`` (a Java ``DatagramSocket``'s default) and ``IP_MULTICAST_LOOP`` on, so
      receivers on this host hear it; with a local address, ``IP_MULTICAST_IF`` set to it, so the
      datagrams leave on that interface (loopback included) without a multicast route.  IPv6:
      ``IPV6_MULTICAST_LOOP`` on.  The TTL is the system's default;
    * non-blocking, for asyncio.
    """
    sock = socket.socket(family, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        if local_port is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        wildcard = "::" if family == socket.AF_INET6 else "0.0.0.0"  # noqa: S104 - Artemis's default bind
        _bind(sock, (local_address or wildcard, local_port or 0))
        if family == socket.AF_INET:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
            if local_address:
                interface = socket.inet_aton(sock.getsockname()[0])
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, interface)
        else:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 1)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock
