"""A TCP proxy for tests that can cut every connection through it (RST, as a
dropped link looks to both ends) and keeps accepting new ones."""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType

__all__ = ["CutProxy"]

START_DEADLINE_S = 10.0


class CutProxy:
    """Runs in its own thread with its own event loop; use as a context manager."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.bytes_to_target = 0
        self.connections = 0
        self._pairs: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.base_events.Server | None = None

    def __enter__(self) -> CutProxy:
        self._thread.start()
        if not self._ready.wait(START_DEADLINE_S):
            raise RuntimeError("proxy did not start")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        # End every pump before the loop stops: a pump left pending is collected later, on a closed loop, as an
        # "Exception ignored in: <coroutine CutProxy._pump>" warning.
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(START_DEADLINE_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(START_DEADLINE_S)
        if not self._thread.is_alive():
            self._loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            a.transport.abort()
            b.transport.abort()
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._pairs.append((writer, up_writer))
        await asyncio.gather(self._pump(reader, up_writer, count=True), self._pump(up_reader, writer, count=False),
                             return_exceptions=True)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, count: bool) -> None:
        try:
            while data := await reader.read(65536):
                if count:
                    self.bytes_to_target += len(data)
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    def cut(self) -> int:
        """Abort every connection now; returns how many were cut."""
        done = threading.Event()
        result: list[int] = []

        def abort_all() -> None:
            pairs, self._pairs = self._pairs, []
            for a, b in pairs:
                a.transport.abort()
                b.transport.abort()
            result.append(len(pairs))
            done.set()

        self._loop.call_soon_threadsafe(abort_all)
        if not done.wait(START_DEADLINE_S):
            raise RuntimeError("proxy did not cut in time")
        return result[0]
