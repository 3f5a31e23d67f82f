"""The SYN watch the stock-client backoff rows time attempts with: a refused connect is recorded once the
watch has read its queue, even when asked the moment the connect failed (the race a CI run once lost), and
it is timed when it reached ``lo``, not when the watch's thread got round to reading it."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time

import pytest

from cck.conformance.suite._backoff_syn import SynWatch, arrival_ns, syn_watch_available

needs_syn_watch = pytest.mark.skipif(syn_watch_available() is not None, reason=str(syn_watch_available()))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@needs_syn_watch
def test_a_refused_connect_is_recorded_when_asked_right_after_it_failed() -> None:
    port = _closed_port()
    with SynWatch({port}) as watch:
        with socket.socket() as client, pytest.raises(ConnectionRefusedError):
            client.connect(("127.0.0.1", port))
        failed_ns = time.monotonic_ns()
        records = watch.records_until(failed_ns, 5.0)
    assert [r.dport for r in records] == [port]


@needs_syn_watch
def test_syns_to_other_ports_are_not_recorded() -> None:
    watched, other = _closed_port(), _closed_port()
    with SynWatch({watched}) as watch:
        with socket.socket() as client, pytest.raises(ConnectionRefusedError):
            client.connect(("127.0.0.1", other))
        assert watch.records_until(time.monotonic_ns(), 5.0) == []


_CONNECT = """
import socket, sys, time
before = time.monotonic_ns()
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])))
except ConnectionRefusedError:
    print(before, time.monotonic_ns())
"""


def _connect_while_busy(port: int) -> tuple[int, int, int]:
    """Another process makes a refused connect to ``port`` while this one keeps the GIL in a busy loop (the
    watch's thread cannot read meanwhile).  Returns that process's (connect called, connect failed) times and
    when the busy loop ended, all on CLOCK_MONOTONIC (the same in both processes)."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(10.0)  # the watch's thread does not get the GIL before the busy loop ends
    try:
        child = subprocess.Popen([sys.executable, "-c", _CONNECT, str(port)], stdout=subprocess.PIPE, text=True)
        busy_until = time.monotonic_ns() + 1_500_000_000  # the child starts and connects well before, usually
        while time.monotonic_ns() < busy_until:
            pass
    finally:
        sys.setswitchinterval(switch)
    out, _ = child.communicate(timeout=30)
    before_ns, failed_ns = map(int, out.split())
    return before_ns, failed_ns, busy_until


@needs_syn_watch
def test_a_syn_is_timed_when_it_arrived_even_when_the_watch_reads_it_late() -> None:
    """The record falls between the other process's connect call and its failure, and its read time shows the
    lag.  A try whose child connected too close to the end of the busy loop (a slow start on a loaded machine)
    does not exercise a late read; up to three tries."""
    tries = []
    for _ in range(3):
        port = _closed_port()
        with SynWatch({port}) as watch:
            before_ns, failed_ns, busy_until = _connect_while_busy(port)
            [record] = watch.records_until(time.monotonic_ns(), 5.0)
        assert before_ns <= record.ts_ns <= failed_ns
        assert record.read_ns >= record.ts_ns
        tries.append((failed_ns - before_ns, busy_until - failed_ns))
        if busy_until - failed_ns >= 100_000_000:
            assert record.read_ns >= busy_until, "the watch read the SYN during the busy loop"
            assert record.to_json()["read_lag_ms"] >= 100
            return
    pytest.fail(f"the child never connected 100 ms before the busy loop ended (connect ns, margin ns): {tries}")


_STAMP = (socket.SOL_SOCKET, 35)


def _stamp(wall_ns: int) -> tuple[int, int, bytes]:
    return (*_STAMP, struct.pack("@ll", wall_ns // 1_000_000_000, wall_ns % 1_000_000_000))


@pytest.mark.parametrize(("ancillary", "expected"), [
    ([_stamp(1_000_000_000_000 - 3_000_000)], 500_000_000 - 3_000_000),  # arrived 3 ms before the read
    ([], 500_000_000),  # no stamp: the read time
    ([_stamp(1_000_000_000_000 + 1_000)], 500_000_000),  # a stamp after the read: a clock step, not trusted
    ([_stamp(1_000_000_000_000 - 11_000_000_000)], 500_000_000),  # older than 10 s: not trusted
    ([(socket.SOL_SOCKET, 29, b"\x00" * 16)], 500_000_000),  # another kind of ancillary data
], ids=["stamped", "none", "future", "too-old", "other-cmsg"])
def test_arrival_is_the_kernel_stamp_moved_onto_the_monotonic_clock(
        ancillary: list[tuple[int, int, bytes]], expected: int) -> None:
    assert arrival_ns(ancillary, read_ns=500_000_000, wall_ns=1_000_000_000_000) == expected
