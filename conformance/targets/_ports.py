"""Where a managed broker's ports come from.

A port picked for a node is free when it is picked, but nothing holds it until the broker binds it, and a
passive backup never binds its acceptor at all (a case probes that it still refuses connections). In one
process that is only the usual race with the rest of the machine. With cases on several processes it is
worse: the kernel hands the port another worker just released to the next worker that asks, so one
worker's broker could listen on the port another worker's backup was given — and that backup would seem
to have become active. So each worker of a run takes its ports from a block of its own, below the range
the kernel picks ephemeral ports from (where no bind to port 0 and no outgoing connection lands).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Protocol

__all__ = ["PORT_BLOCK_FIRST", "PORT_BLOCK_SIZE", "PortBlock", "PortSource", "ephemeral_range", "free_ports"]

#: The first port of the first worker's block (above the well-known and most registered services' ports).
PORT_BLOCK_FIRST = 10000
#: Ports in one worker's block: a worker's cases take a few hundred over a whole run, so a block is not
#: gone round twice while a target that took a port from its previous turn could still be open.
PORT_BLOCK_SIZE = 1000
_EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LINUX_DEFAULT_EPHEMERAL = (32768, 60999)


class PortSource(Protocol):
    """``count`` distinct ports free now, of socket kind ``kind`` (TCP by default)."""

    def __call__(self, count: int, *, kind: int = socket.SOCK_STREAM) -> list[int]: ...


def free_ports(count: int, *, kind: int = socket.SOCK_STREAM, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports the kernel says are free, probed by binding to port 0.

    All probes stay bound until every port is picked, so two nodes never get the same one; the
    port can still be taken by someone else before the broker binds it (the usual race)."""
    probes: list[socket.socket] = []
    try:
        for _ in range(count):
            probe = socket.socket(socket.AF_INET, kind)
            probes.append(probe)
            probe.bind((host, 0))
        return [int(p.getsockname()[1]) for p in probes]
    finally:
        for probe in probes:
            probe.close()


def ephemeral_range(path: Path = _EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The kernel's range of ephemeral ports (Linux's default where the file cannot be read)."""
    try:
        low, high = (int(field) for field in path.read_text(encoding="ascii").split())
    except (OSError, ValueError):
        return _LINUX_DEFAULT_EPHEMERAL
    return low, high


class PortBlock:
    """Ports handed out in turn from ``[first, first + size)``, each one probed by binding it (a port something
    else holds is skipped).  Not shared between processes: each process of a run has a block of its own."""

    def __init__(self, first: int, size: int, host: str = "127.0.0.1") -> None:
        if first < 1024 or size < 1 or first + size > 65536:
            raise ValueError(f"port block [{first}, {first + size}) is not within 1024..65535")
        self.first = first
        self.size = size
        self._host = host
        self._next = 0

    @classmethod
    def for_worker(cls, index: int, ephemeral_low: int | None = None) -> PortBlock:
        """Worker ``index``'s block: the blocks lie one after another from :data:`PORT_BLOCK_FIRST` up to the
        kernel's ephemeral range; a worker index past the last block (workers restarted after a crash get new
        ones) takes the blocks round again, so two workers share one only when as many exist as fit."""
        low = ephemeral_range()[0] if ephemeral_low is None else ephemeral_low
        blocks = (low - PORT_BLOCK_FIRST) // PORT_BLOCK_SIZE
        if blocks < 1:
            raise ValueError(f"the kernel's ephemeral ports start at {low}: no room below them for a block of "
                             f"{PORT_BLOCK_SIZE} ports from {PORT_BLOCK_FIRST} (net.ipv4.ip_local_port_range)")
        return cls(PORT_BLOCK_FIRST + (index % blocks) * PORT_BLOCK_SIZE, PORT_BLOCK_SIZE)

    def __call__(self, count: int, *, kind: int = socket.SOCK_STREAM) -> list[int]:
        if count > self.size:
            raise ValueError(f"{count} ports asked of a block of {self.size}")
        probes: list[socket.socket] = []
        try:
            for _ in range(self.size):
                if len(probes) == count:
                    break
                port = self.first + self._next
                self._next = (self._next + 1) % self.size
                probe = socket.socket(socket.AF_INET, kind)
                try:
                    probe.bind((self._host, port))
                except OSError:  # held by someone (or lingering in TIME_WAIT): the next one
                    probe.close()
                    continue
                probes.append(probe)
            if len(probes) < count:
                raise OSError(f"only {len(probes)} of {count} ports free in [{self.first}, {self.first + self.size})")
            return [int(p.getsockname()[1]) for p in probes]
        finally:
            for probe in probes:
                probe.close()

    def __repr__(self) -> str:
        return f"PortBlock({self.first}, {self.size})"
