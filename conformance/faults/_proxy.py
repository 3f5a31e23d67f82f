"""The fault proxy: a listening socket, its connections, the installed rules and the logs.

All methods run on the proxy's event loop (the one :meth:`FaultProxy.start`
ran on); rules may be added and removed while traffic flows and take effect
from the next frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections.abc import Callable
from types import TracebackType

from cck.codec import DEFAULT_MAX_FRAME_SIZE

from ._conn import ProxiedConnection, SideProtocol, reset_transport
from ._rules import Blackhole, FrameView, Rule, RuleHandle, Verdict, judge, new_handle, on_accept
from ._wirelog import AttemptRecord, EndRecord, WireLog, WireRecord, write_jsonl

__all__ = ["FaultProxy"]

#: How long the listening socket may take to open.
_LISTEN_DEADLINE_S = 5.0
#: After an orderly close timed out, how long the forced (RST) close may take.
_ABORT_DEADLINE_S = 1.0


class FaultProxy:
    """A TCP proxy between a core client and a broker that decodes, logs and breaks the traffic.

    ::

        async with FaultProxy("127.0.0.1", 61616) as proxy:
            connection = await connect(proxy.url)
            handle = proxy.add(Drop("s2c", {"NULL_RESPONSE"}, count=1))
            ...
            proxy.remove(handle)
            proxy.wire_log_jsonl("wire.jsonl")

    ``connect_timeout`` bounds each upstream connect; ``stop_timeout`` bounds the orderly close of
    every connection in :meth:`stop` (after which the rest are reset).  ``clock_ns`` must advance
    with real time (delays are scheduled on the event loop); it is injected so that records share
    a time base with whatever else a test measures.
    """

    def __init__(self, upstream_host: str, upstream_port: int, *, host: str = "127.0.0.1", port: int = 0,
                 clock_ns: Callable[[], int] = time.monotonic_ns, connect_timeout: float = 5.0,
                 stop_timeout: float = 5.0, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.host = host
        self.port = port
        self.connect_timeout = connect_timeout
        self.stop_timeout = stop_timeout
        self.max_frame_size = max_frame_size
        self.log = WireLog()
        self._clock_ns = clock_ns
        self._handles: list[RuleHandle] = []
        self._conns: set[ProxiedConnection] = set()
        self._indexes = itertools.count(1)
        self._server: asyncio.Server | None = None
        self._started = False
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        return f"tcp://{self.host}:{self.port}"

    @property
    def listening(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        if self._started:
            raise RuntimeError("FaultProxy.start() called twice")
        self._started = True
        await self._listen()

    async def _listen(self) -> None:
        loop = asyncio.get_running_loop()
        server = await asyncio.wait_for(
            loop.create_server(lambda: SideProtocol("client", on_made=self._accepted), self.host, self.port,
                               reuse_address=True),
            _LISTEN_DEADLINE_S)
        self._server = server
        # With port 0 the system chose one; keep it, so resume_listening reopens the same port.
        self.port = server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening and close every connection: orderly first, reset after ``stop_timeout``.  Every
        connection's end is logged by the time it returns (one still not done is logged as the proxy ended it)."""
        if not self._started or self._stopping:
            return
        self._stopping = True
        server, self._server = self._server, None
        if server is not None:
            server.close()
        conns = list(self._conns)
        for conn in conns:
            conn.close(rst=False, reason="proxy stopped")
        pending = [conn.done for conn in conns if not conn.done.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=self.stop_timeout)
            if still:
                for conn in conns:
                    if not conn.done.done():
                        conn.close(rst=True, reason="proxy stopped")
                await asyncio.wait(still, timeout=_ABORT_DEADLINE_S)
        for conn in conns:
            conn.log_end()  # done ones logged theirs already
        if server is not None:
            # The listening socket is closed already; only the server's bookkeeping may still wait.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), _ABORT_DEADLINE_S)

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    async def pause_listening(self) -> None:
        """Close the listening socket: connects are refused by the TCP stack (and not logged)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()  # closes the listening socket at once; live connections are untouched

    async def resume_listening(self) -> None:
        """Listen again on the same port."""
        if self._server is None and not self._stopping:
            await self._listen()

    # ------------------------------------------------------------------ rules

    def add(self, rule: Rule) -> RuleHandle:
        """Install a rule; it applies from the next frame (or connection)."""
        handle = new_handle(rule, self.now_ns())
        self._handles.append(handle)
        if isinstance(rule, Blackhole):
            for conn in list(self._conns):
                if conn.state in ("connecting", "open"):
                    handle.hits += 1
                    conn.kill("blackhole")
        return handle

    def remove(self, handle: RuleHandle) -> None:
        """Uninstall; connections a Blackhole caught stay dead."""
        if handle in self._handles:
            self._handles.remove(handle)
        handle.installed = False

    def clear(self) -> None:
        for handle in list(self._handles):
            self.remove(handle)

    @property
    def rules(self) -> tuple[RuleHandle, ...]:
        return tuple(self._handles)

    def cut_all(self, *, rst: bool = True) -> int:
        """Close every current connection (both sides), with RST or FIN; returns how many."""
        conns = [conn for conn in self._conns if conn.state != "closed"]
        for conn in conns:
            conn.close(rst=rst, reason="cut_all")
        return len(conns)

    def blackhole_all(self) -> int:
        """Blackhole every current connection (new ones are not affected); returns how many."""
        conns = [conn for conn in self._conns if conn.state in ("connecting", "open")]
        for conn in conns:
            conn.kill("blackhole_all")
        return len(conns)

    # ------------------------------------------------------------------ evidence

    @property
    def wire_log(self) -> list[WireRecord]:
        """Every frame seen, in the order its action happened (a live list)."""
        return self.log.records

    @property
    def attempts(self) -> list[AttemptRecord]:
        """Every accepted connection, in accept order (a live list)."""
        return self.log.attempts

    @property
    def ends(self) -> list[EndRecord]:
        """How each accepted connection ended, in the order they ended (a live list): one record per connection,
        logged once it is done (both sockets gone) or the proxy stopped."""
        return self.log.ends

    @property
    def connections(self) -> int:
        """Connections not yet fully closed."""
        return len(self._conns)

    def wire_log_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write the wire log as JSON Lines (packets as their repr); returns the number of records."""
        return write_jsonl(path, [record.to_json() for record in self.log.records])

    def attempts_jsonl(self, path: str | os.PathLike[str]) -> int:
        return write_jsonl(path, [attempt.to_json() for attempt in self.log.attempts])

    def ends_jsonl(self, path: str | os.PathLike[str]) -> int:
        return write_jsonl(path, [end.to_json() for end in self.log.ends])

    async def wait_for_record(self, predicate: Callable[[WireRecord], bool], timeout: float) -> WireRecord:
        """The first wire record matching ``predicate``, waiting up to ``timeout`` s for it."""
        return await self.log.wait_for(predicate, timeout)

    async def wait_for_attempts(self, count: int, timeout: float) -> list[AttemptRecord]:
        """The attempt log once it has ``count`` entries, waiting up to ``timeout`` s."""
        return await self.log.wait_for_attempts(count, timeout)

    async def wait_for_end(self, conn: int, timeout: float) -> EndRecord:
        """The end record of connection ``conn``, waiting up to ``timeout`` s for it to be logged."""
        return await self.log.wait_for_end(conn, timeout)

    # ------------------------------------------------------------------ what connections call

    def now_ns(self) -> int:
        return self._clock_ns()

    def judge(self, view: FrameView) -> Verdict:
        return judge(self._handles, view)

    def forget(self, conn: ProxiedConnection) -> None:
        self._conns.discard(conn)

    def _accepted(self, transport: asyncio.Transport) -> ProxiedConnection | None:
        accepted_ns = self.now_ns()  # first thing: the backoff oracle measures attempts by it
        index = next(self._indexes)
        peer = str(transport.get_extra_info("peername"))
        outcome = None if self._stopping else on_accept(self._handles)
        if self._stopping or outcome == "refuse":
            self.log.add_attempt(AttemptRecord(accepted_ns, index, "refused", peer,
                                               "proxy stopping" if self._stopping else None))
            reset_transport(transport)
            why = "refused: the proxy is stopping" if self._stopping else "refused by RefuseConnections"
            self.log.add_end(EndRecord(self.now_ns(), index, "proxy", "reset", why))
            return None
        conn = ProxiedConnection(self, index, transport, accepted_ns, peer, dead=outcome == "blackhole")
        self._conns.add(conn)
        if outcome == "blackhole":
            self.log.add_attempt(AttemptRecord(accepted_ns, index, "blackholed", peer))
        else:
            conn.connect_upstream(self.upstream_host, self.upstream_port, self.connect_timeout)
        return conn
