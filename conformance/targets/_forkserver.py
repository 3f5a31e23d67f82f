"""Reference brokers forked from one process that has already imported them.

A run starts the reference broker over a hundred times (every restart of a node is one), and most of each start is
Python importing the broker (the codec builds its packet formats at import): about 0.4 s of the 0.5 s a start
takes.  So the kit starts one *fork server* per run, which imports ``reference.__main__`` once and forks a child
for each broker start.  The child is the broker a ``python -m cck.reference ...`` process would be: its own process
group (the kit signals it by group as before), its own working directory, environment and arguments, its
output on a pipe the kit reads, the same ``main()``; only the import is shared.

The server is the children's parent, so it reaps them and tells the kit each exit status.  Messages go over a
``SOCK_SEQPACKET`` socket pair (one JSON object per packet; a start request carries the output pipe's write end
as SCM_RIGHTS).  When the kit goes away (the socket closes), the server kills the brokers it still has and exits.
A command line that is not ``<python> -m reference ...`` (a launcher wraps it, say) is not for the server: the
caller runs it with :class:`subprocess.Popen` as before.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ["ForkServer", "ForkedProcess", "serve"]

_PACKET = 1 << 20  # a start request carries the environment: well under this
START_DEADLINE_S = 30.0


class ForkedProcess:
    """A broker forked by the server, with the part of :class:`subprocess.Popen` the kit uses."""

    def __init__(self, pid: int, stdout: IO[str], server: ForkServer) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._server = server
        self._exited = threading.Event()

    def _set_exit(self, code: int) -> None:
        self.returncode = code
        self._exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(f"forked broker {self.pid}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode


class ForkServer:
    """The kit's side: starts the server on first use, sends start requests, hands exit statuses to their
    :class:`ForkedProcess`."""

    def __init__(self, env: Mapping[str, str], module: str = "cck.reference") -> None:
        self.module = module
        self._env = dict(env)
        self._lock = threading.Lock()
        # one request at a time, held while waiting for its answer (the condition below releases _lock): the
        # answers come in request order, so a request must not overtake another between send and answer
        self._requesting = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._children: dict[int, ForkedProcess] = {}
        self._early_exits: dict[int, int] = {}
        self._replies: list[dict[str, Any]] = []
        self._reply = threading.Condition(self._lock)
        self._broken: str | None = None

    def handles(self, argv: Sequence[str]) -> bool:
        """Whether ``argv`` is ``<this python> -m <module> ...`` (what the server can run)."""
        return len(argv) >= 3 and argv[0] == sys.executable and tuple(argv[1:3]) == ("-m", self.module) \
            and self._broken is None

    @property
    def died(self) -> bool:
        """Whether the server process was started and has ended."""
        return self._process is not None and self._process.poll() is not None

    def _ensure(self) -> socket.socket:
        if self._sock is not None:
            return self._sock
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(self._env, PYTHONUNBUFFERED="1")
        code = f"from cck.conformance.targets._forkserver import serve; serve({theirs.fileno()}, {self.module!r})"
        self._process = subprocess.Popen(
            [sys.executable, "-c", code], env=env, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=None, start_new_session=True)  # fmt: skip
        theirs.close()
        self._sock = ours
        threading.Thread(target=self._read, args=(ours,), name="fork server", daemon=True).start()
        return ours

    def spawn(self, argv: Sequence[str], *, cwd: Path | None, env: Mapping[str, str] | None) -> ForkedProcess:
        """Fork a broker running ``argv[3:]`` as ``python -m <module>`` would; its output on ``.stdout``."""
        read_end, write_end = os.pipe()
        try:
            request = json.dumps({"args": list(argv[3:]), "cwd": str(cwd) if cwd else None,
                                  "env": dict(env) if env is not None else None}).encode()
            with self._requesting, self._lock:
                sock = self._ensure()
                socket.send_fds(sock, [request], [write_end])
                reply = self._await_reply()
                if "error" in reply:
                    self._broken = reply["error"]  # later starts go the slow way at once
                    raise OSError(f"the fork server could not start the broker: {reply['error']}")
                pid = int(reply["pid"])
                stdout = io.TextIOWrapper(os.fdopen(read_end, "rb"), encoding="utf-8", errors="replace")
                read_end = -1
                child = ForkedProcess(pid, stdout, self)
                self._children[pid] = child
                if pid in self._early_exits:
                    child._set_exit(self._early_exits.pop(pid))
                return child
        finally:
            os.close(write_end)
            if read_end >= 0:
                os.close(read_end)

    def _await_reply(self) -> dict[str, Any]:
        end = time.monotonic() + START_DEADLINE_S
        while not self._replies:
            if self._broken is not None:
                raise OSError(f"the fork server is gone: {self._broken}")
            left = end - time.monotonic()
            if left <= 0:
                raise OSError(f"the fork server did not answer within {START_DEADLINE_S:.0f}s")
            self._reply.wait(left)
        return self._replies.pop(0)

    def _read(self, sock: socket.socket) -> None:
        try:
            while True:
                data = sock.recv(_PACKET)
                if not data:
                    break
                message = json.loads(data)
                with self._lock:
                    if "exited" in message:
                        pid, code = int(message["exited"]), int(message["code"])
                        child = self._children.pop(pid, None)
                        if child is not None:
                            child._set_exit(code)
                        else:  # exited before spawn() registered it
                            self._early_exits[pid] = code
                    else:
                        self._replies.append(message)
                        self._reply.notify_all()
        except OSError as exc:
            why = str(exc)
        else:
            why = "it closed the connection"
        with self._lock:
            self._broken = why
            self._reply.notify_all()
            orphans = list(self._children.values())
            self._children.clear()
        _watch_orphans(orphans)

    def close(self) -> None:
        """Stop the server; it kills the brokers it still has."""
        with self._lock:
            sock, process = self._sock, self._process
            self._sock = self._process = None
        if sock is not None:
            # shutdown, not just close: the reader thread is blocked in recv on it, and a close alone would
            # neither wake it nor let the server see the end of the connection
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        if process is not None:
            try:
                process.wait(timeout=10.0)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


#: the exit code of a broker whose fork server went away before it: its real one went to init, not to the kit
ORPHAN_EXIT_CODE = -1


def _watch_orphans(orphans: list[ForkedProcess]) -> None:
    """Tell each broker of a fork server that is gone (it crashed, say) when it exits, from a pidfd (readable once
    the process has ended, parent or not), so stopping or killing it does not wait out its deadline."""
    watched: dict[int, ForkedProcess] = {}
    for child in orphans:
        try:
            watched[os.pidfd_open(child.pid)] = child
        except ProcessLookupError:
            child._set_exit(ORPHAN_EXIT_CODE)
    if not watched:
        return

    def watch() -> None:
        while watched:
            ready, _, _ = select.select(list(watched), [], [])
            for fd in ready:
                os.close(fd)
                watched.pop(fd)._set_exit(ORPHAN_EXIT_CODE)

    threading.Thread(target=watch, name="fork server orphans", daemon=True).start()


_servers: dict[tuple[str, str], ForkServer] = {}
_servers_lock = threading.Lock()


def fork_server(env: Mapping[str, str], module: str = "cck.reference") -> ForkServer:
    """The interpreter's fork server for ``module`` with the import path of ``env`` (one per run, made on first
    use, stopped at exit)."""
    key = (module, env.get("PYTHONPATH", ""))
    with _servers_lock:
        server = _servers.get(key)
        if server is None or server.died:  # a server that crashed is replaced (its brokers live on as orphans)
            server = _servers[key] = ForkServer(env, module)
        return server


@atexit.register
def _close_servers() -> None:
    with _servers_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.close()


# ---------------------------------------------------------------------------------------------------- the server


def serve(fd: int, module: str) -> None:
    """The server's loop: import ``module``'s ``__main__``, then fork a child per request until the kit's socket
    closes.  Single-threaded, so forking is safe."""
    import importlib

    main = importlib.import_module(f"{module}.__main__").main
    # fork copies only the calling thread: a thread the import started would be missing (or hold a lock
    # forever) in every broker, so such a server refuses and the kit launches brokers as processes of their own
    unsafe = f"importing {module} started threads" if threading.active_count() != 1 else None
    sock = socket.socket(fileno=fd)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd hears of exits
    children: set[int] = set()
    try:
        while True:
            readable, _, _ = select.select([sock.fileno(), wake_read], [], [])
            if wake_read in readable:
                os.read(wake_read, 4096)
            _reap(sock, children)
            if sock.fileno() in readable:
                data, fds, _, _ = socket.recv_fds(sock, _PACKET, 1)
                if not data:
                    return
                if unsafe is not None:
                    for received in fds:
                        os.close(received)
                    sock.send(json.dumps({"error": unsafe}).encode())
                    continue
                _start(sock, json.loads(data), fds, main, children, wake_read, wake_write)
    finally:
        for pid in children:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        with contextlib.suppress(OSError):
            sock.send(json.dumps({"exited": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


def _start(sock: socket.socket, request: dict[str, Any], fds: list[int], main: Any, children: set[int],
           *private: int) -> None:
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"error": f"a start request carries one descriptor, not {len(fds)}"}).encode())
        return
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(fds[0])
        sock.send(json.dumps({"error": str(exc)}).encode())
        return
    if pid == 0:  # the broker
        _child(request, fds[0], main, sock, private)
    os.close(fds[0])
    children.add(pid)
    sock.send(json.dumps({"pid": pid}).encode())


def _child(request: dict[str, Any], output: int, main: Any, sock: socket.socket, private: Sequence[int]) -> None:
    """Become ``python -m <module> <args>``: never returns."""
    code = 1
    try:
        os.setsid()  # its own process group, as the kit's Popen(start_new_session=True) gives a broker
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        sock.close()
        for fd in private:
            os.close(fd)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        if request["cwd"]:
            os.chdir(request["cwd"])
        if request["env"] is not None:
            os.environ.clear()
            os.environ.update(request["env"])
        import random

        random.seed()  # not the server's sequence
        sys.argv = [sys.executable, *request["args"]]
        try:
            result = main(request["args"])
            code = result if isinstance(result, int) else 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught exception
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
