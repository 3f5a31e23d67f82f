"""TCP connections seen from outside the processes that hold them, through ``ss`` (iproute2).

Cutting: ``ss -K`` (the kernel's SOCK_DESTROY, root and CONFIG_INET_DIAG_DESTROY needed).  The destroyed
socket's owner sees ECONNABORTED, its peer a reset: a network failure in the middle of a connection, without a
proxy in the path (how the kit cuts the bridges between two nodes of a cluster, which connect to each other
directly).  Counting: :func:`connections_to`, how many connections other processes hold to a listener (how the
kit sees that one node finished connecting to another)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterable

__all__ = ["connections_to", "kill_tcp", "tcp_kill_unavailable"]

_SS_TIMEOUT_S = 10.0


def _run(*args: str) -> list[str]:
    ss = shutil.which("ss")
    if ss is None:
        raise OSError("ss (iproute2) is not installed")
    done = subprocess.run([ss, *args], capture_output=True, text=True, timeout=_SS_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise OSError(f"ss {' '.join(args)!r} exited {done.returncode}: {done.stderr.strip()}")
    return [line for line in done.stdout.splitlines() if line.strip()]


def kill_tcp(to_ports: Iterable[int], *, spare_local_ports: Iterable[int] = ()) -> int:
    """Destroy every established loopback-visible TCP socket whose peer port is one of ``to_ports`` (the
    connecting side of connections to those listeners), except sockets on ``spare_local_ports``; returns how
    many were destroyed."""
    ports = sorted(set(to_ports))
    if not ports:
        return 0
    expression = "( " + " or ".join(f"dport = :{p}" for p in ports) + " )"
    spare = sorted(set(spare_local_ports))
    if spare:
        expression += " and not ( " + " or ".join(f"sport = :{p}" for p in spare) + " )"
    return len(_run("-K", "-t", "-n", "-H", expression))


def connections_to(port: int) -> int:
    """How many established TCP connections to ``port`` (any local address) other processes hold: the
    connecting ends, those of this process (the kit's own clients) left out."""
    mine = f"pid={os.getpid()},"
    lines = _run("-t", "-n", "-H", "-p", "state", "established", f"( dport = :{port} )")
    return sum(1 for line in lines if mine not in line)


def tcp_kill_unavailable() -> str | None:
    """Why :func:`kill_tcp` cannot work here, or ``None`` when a trial connection was cut."""
    try:
        with socket.create_server(("127.0.0.1", 0)) as server:
            port = server.getsockname()[1]
            with socket.create_connection(("127.0.0.1", port), timeout=5.0) as client:
                accepted, _ = server.accept()
                with accepted:
                    killed = kill_tcp([port])
                    client.settimeout(2.0)
                    try:
                        client.recv(1)
                    except OSError:
                        return None
                    return f"ss -K reported {killed} socket(s) but the trial connection still works"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot destroy TCP sockets with ss -K (root and a kernel with SOCK_DESTROY needed): {exc}"
