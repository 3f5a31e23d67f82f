"""Counting the connections other processes hold to a listener (the premise of the bridge-backoff cases: node0
has finished connecting to node1): another process's connections count, closed ones and the kit's own do not."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys

import pytest

from cck.conformance.suite._tcp_kill import connections_to

pytestmark = pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) is not installed")

# connects N times to the port given, says so on stdout, then holds the connections until its stdin closes
_HOLDER = """
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
print("connected", flush=True)
sys.stdin.read()
"""


def test_another_process_connections_count_and_stop_counting_when_closed() -> None:
    with socket.create_server(("127.0.0.1", 0), backlog=8) as server:
        port = server.getsockname()[1]
        holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(port), "3"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout is not None
            # the connecting ends are established once connect() returned, before the holder says so
            assert holder.stdout.readline().strip() == "connected"
            assert connections_to(port) == 3
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(10)
        # the holder's sockets were closed when it exited: their ends are past ESTABLISHED (FIN sent)
        assert connections_to(port) == 0


def test_this_process_connections_are_left_out() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as mine:
            accepted, _ = server.accept()
            with accepted:
                assert mine.getpeername()[1] == port
                assert connections_to(port) == 0
