"""Connection attempts refused at the TCP level, timed where they arrive: SYNs on the loopback interface.

Artemis's client counts a TCP connect that succeeds as a connection (its Netty connector returns one as
soon as the handshake completes), so a proxy that accepts and then resets is not a refusal to it: the
reset races with the client's own failover and can stall it for ``callTimeout``.  A refusal it counts as
a failed attempt is ECONNREFUSED — nothing listening (``FaultProxy.pause_listening()``) — and such an
attempt never reaches a user-space listener.  :class:`SynWatch` sees it anyway: a packet socket on ``lo``
(needs CAP_NET_RAW) with a kernel filter that passes only SYNs without ACK; each one to a watched port is
timed on the same clock as the proxy's ``AttemptRecord`` (``time.monotonic_ns()``).

The time is the kernel's receive stamp (``SO_TIMESTAMPNS``), not the moment the watch's thread read the
packet: that thread wakes on its own schedule and needs the GIL, and on a loaded two-core machine it has
read a SYN 50 ms after the client had already reported the failure that followed it.  The stamp is on the
wall clock; it becomes a monotonic time by subtracting the wall-clock time elapsed since it from the
monotonic time of the read.  Each record keeps its read time too, so the evidence shows the lag.
"""

from __future__ import annotations

import contextlib
import ctypes
import socket
import struct
import threading
import time
from dataclasses import dataclass

__all__ = ["SynRecord", "SynWatch", "arrival_ns", "syn_watch_available"]

_ETH_P_ALL = 0x0003
_SO_ATTACH_FILTER = 26
_SO_TIMESTAMPNS = 35  # asm-generic SO_TIMESTAMPNS(_OLD): each packet's receive time as a struct timespec
_TIMESPEC = struct.Struct("@ll")  # tv_sec, tv_nsec (native longs, as the _OLD variant sends them)
_PACKET_HOST = 0
#: A stamp further than this from the read (a wall-clock step between them) is not trusted.
_MAX_LAG_NS = 10_000_000_000
# Classic BPF: IPv4, TCP, flags & (SYN|ACK) == SYN; everything else is dropped in the kernel.
_FILTER = (
    (0x28, 0, 0, 12),        # ldh [12]              ethertype
    (0x15, 0, 7, 0x0800),    # jeq #IPv4 else drop
    (0x30, 0, 0, 23),        # ldb [23]              IP protocol
    (0x15, 0, 5, 6),         # jeq #TCP else drop
    (0xB1, 0, 0, 14),        # ldxb 4*([14]&0xf)     IP header length
    (0x50, 0, 0, 27),        # ldb [x+27]            TCP flags
    (0x54, 0, 0, 0x12),      # and #(SYN|ACK)
    (0x15, 0, 1, 0x02),      # jeq #SYN else drop
    (0x06, 0, 0, 0xFFFF),    # ret accept
    (0x06, 0, 0, 0),         # ret drop
)  # fmt: skip


@dataclass(frozen=True)
class SynRecord:
    """One connection attempt: a SYN from ``sport`` to ``dport``."""

    #: When it reached ``lo`` (monotonic, from the kernel's stamp; the read time if the kernel gave none).
    ts_ns: int
    sport: int
    dport: int
    #: When the watch's thread read it (monotonic).
    read_ns: int

    def to_json(self) -> dict[str, object]:
        return {"ts_ns": self.ts_ns, "conn": self.sport, "outcome": "syn", "peer": f"127.0.0.1:{self.sport}",
                "detail": f"SYN to port {self.dport} (seen on lo)",
                "read_lag_ms": round((self.read_ns - self.ts_ns) / 1e6, 3)}


def arrival_ns(ancillary: list[tuple[int, int, bytes]], read_ns: int, wall_ns: int) -> int:
    """The monotonic time a packet arrived: its kernel stamp (wall clock) moved back from ``read_ns`` by the
    wall-clock time elapsed since the stamp (``wall_ns`` read together with ``read_ns``).  ``read_ns`` when
    there is no stamp or it is not plausible (in the future, or older than ``_MAX_LAG_NS``)."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(data)
            elapsed: int = wall_ns - (seconds * 1_000_000_000 + nanoseconds)
            if 0 <= elapsed <= _MAX_LAG_NS:
                return read_ns - elapsed
    return read_ns


def _open_socket() -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
    try:
        program = b"".join(struct.pack("HBBI", *insn) for insn in _FILTER)
        buffer = ctypes.create_string_buffer(program)
        fprog = struct.pack("HL", len(_FILTER), ctypes.addressof(buffer))
        sock.setsockopt(socket.SOL_SOCKET, _SO_ATTACH_FILTER, fprog)
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        sock.bind(("lo", 0))
        sock.settimeout(0.05)
    except BaseException:
        sock.close()
        raise
    return sock


def syn_watch_available() -> str | None:
    """None when a SynWatch can run here, else why not."""
    try:
        _open_socket().close()
    except (OSError, AttributeError) as exc:
        return f"cannot watch SYNs on lo (needs Linux and CAP_NET_RAW): {exc}"
    return None


class SynWatch:
    """Records SYNs to ``ports`` on ``lo`` from a thread, until :meth:`stop` (a context manager too)."""

    def __init__(self, ports: set[int]) -> None:
        self.ports = set(ports)
        self.records: list[SynRecord] = []
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._stop = threading.Event()
        #: When the thread last began a read that found the socket's queue empty (monotonic ns): every SYN
        #: that arrived before then is in ``records``.
        self._drained_ns = 0
        self._sock = _open_socket()
        # Drain whatever the socket saw before the filter applied (a packet socket queues from creation).
        with contextlib.suppress(TimeoutError, BlockingIOError):
            self._sock.setblocking(False)
            while True:
                self._sock.recv(65535)
        self._sock.settimeout(0.05)
        self._thread = threading.Thread(target=self._run, name="syn-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sock = self._sock
        room = socket.CMSG_SPACE(_TIMESPEC.size)
        while not self._stop.is_set():
            # Taken before the read: a read that then times out proves the queue held nothing that had arrived
            # by this moment.  The time after the timeout proves nothing, since the thread may have waited for
            # the GIL in between while a SYN arrived (a CI run lost that race).
            asked_ns = time.monotonic_ns()
            try:
                data, ancillary, _flags, address = sock.recvmsg(65535, room)
            except (TimeoutError, BlockingIOError):
                with self._drained:
                    self._drained_ns = asked_ns
                    self._drained.notify_all()
                continue
            except OSError:
                return
            now, wall = time.monotonic_ns(), time.time_ns()
            if address[2] != _PACKET_HOST or len(data) < 34:
                continue  # the outgoing copy of a loopback packet, or too short to hold IP + TCP ports
            ihl = (data[14] & 0x0F) * 4
            if len(data) < 14 + ihl + 4:
                continue
            sport, dport = struct.unpack_from("!HH", data, 14 + ihl)
            if dport in self.ports:
                with self._lock:
                    if self.records and self.records[-1].sport == sport and self.records[-1].dport == dport:
                        continue  # a retransmitted SYN is the same attempt
                    self.records.append(SynRecord(arrival_ns(ancillary, now, wall), sport, dport, now))

    def records_until(self, since_ns: int, timeout_s: float) -> list[SynRecord]:
        """Every SYN that reached the socket before ``since_ns``, once the thread has read them all (it reads on
        its own schedule: a client that fails within milliseconds can say so before its SYN is read).  Blocks
        at most ``timeout_s``; TimeoutError when the thread did not catch up."""
        with self._drained:
            if not self._drained.wait_for(lambda: self._drained_ns >= since_ns, timeout_s):
                raise TimeoutError(f"the SYN watch did not read its queue within {timeout_s:.1f} s")
            return list(self.records)

    def snapshot(self) -> list[SynRecord]:
        with self._lock:
            return list(self.records)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self._sock.close()

    def __enter__(self) -> SynWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
