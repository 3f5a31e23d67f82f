"""The fault proxy against the in-process reference broker (and, where exact bytes matter, a
recording upstream).  Every scenario runs under one overall deadline; waits are on events,
futures and the proxy's own records, never on sleeps."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Self

import pytest

from cck.codec import (
    PREAMBLE,
    CoreMessage,
    PacketsConfirmedMessage,
    Ping,
    ReattachSessionMessage,
    SessionSendMessage,
    encode_packet,
    raw,
)
from cck.conformance.faults import (
    HALF_OPEN,
    RAW,
    Blackhole,
    CutAfter,
    Delay,
    Drop,
    Duplicate,
    FaultProxy,
    Latency,
    RefuseConnections,
    ResetDuringReattach,
    WireRecord,
)
from cck.conformance.faults._rules import FrameView, judge, new_handle
from cck.conformance.faults._stream import FrameSplitter
from cck.reference._server import BrokerServer
from cck.reference.broker import BrokerCore, BrokerSettings
from cck.reference.client import CallTimeout, ClientError, ClientSettings, Connection, connect

SCENARIO_DEADLINE_S = 30.0
WAIT_S = 5.0
UNKNOWN_TYPE = -100  # no packet has this type code (Artemis's go down to -22, the kit's own are -128..-124)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(scenario(), SCENARIO_DEADLINE_S)

    asyncio.run(bounded())


def broker() -> BrokerServer:
    """An in-process reference broker on a free port (``async with broker() as server``)."""
    return BrokerServer(BrokerCore(BrokerSettings(node_id="n1")), "127.0.0.1", 0)


@contextlib.asynccontextmanager
async def proxied_broker(**options: Any) -> AsyncIterator[FaultProxy]:
    async with broker() as server, FaultProxy("127.0.0.1", server.bound_port, **options) as proxy:
        yield proxy


class Upstream:
    """A loopback server standing for the broker (``async with``): its port, and on exit it stops accepting and
    closes the sockets its ``_serve`` kept in ``_writers``."""

    def __init__(self) -> None:
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


class Recorder(Upstream):
    """An upstream that keeps what reaches it and can answer with fixed bytes."""

    def __init__(self, reply: bytes = b"", farewell: bytes | None = None) -> None:
        super().__init__()
        self.reply = reply
        self.farewell = farewell  # written after the client's FIN, then the socket is closed
        self.data = bytearray()
        self.errors: list[BaseException] = []
        self._changed = asyncio.Event()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        if self.reply:
            writer.write(self.reply)
        try:
            while chunk := await reader.read(65536):  # ends when the proxy or __aexit__ closes it
                self.data += chunk
                self._changed.set()
        except ConnectionError as exc:
            self.errors.append(exc)
        else:
            if self.farewell is not None:
                writer.write(self.farewell)
                writer.close()
        self._changed.set()

    async def wait_bytes(self, count: int) -> bytes:
        async with asyncio.timeout(WAIT_S):
            while len(self.data) < count:
                self._changed.clear()
                await self._changed.wait()
        return bytes(self.data)

    async def wait_error(self) -> BaseException:
        async with asyncio.timeout(WAIT_S):
            while not self.errors:
                self._changed.clear()
                await self._changed.wait()
        return self.errors[0]


def frames(*packets_on_channels: tuple[Any, int]) -> bytes:
    return b"".join(encode_packet(packet, channel) for packet, channel in packets_on_channels)


async def read_until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything until EOF (or the reset, which propagates)."""
    received = bytearray()
    async with asyncio.timeout(WAIT_S):
        while chunk := await reader.read(65536):
            received += chunk
    return bytes(received)


def failure_event(connection: Connection) -> asyncio.Future[ClientError]:
    future: asyncio.Future[ClientError] = asyncio.get_running_loop().create_future()

    def failed(error: ClientError) -> None:
        if not future.done():
            future.set_result(error)

    connection.add_failure_listener(failed)
    return future


def since(proxy: FaultProxy, ns: int) -> list[WireRecord]:
    return [r for r in proxy.wire_log if r.seen_ns >= ns]


# ---------------------------------------------------------------------- transparent forwarding


def test_a_full_session_passes_through_and_every_frame_is_logged() -> None:
    async def scenario() -> None:
        async with proxied_broker() as proxy:
            connection = await connect(proxy.url)
            session = await connection.create_session()
            await session.create_queue("q")
            producer = session.create_producer("q")
            await producer.send(CoreMessage(b"hello", durable=True))
            consumer = await session.create_consumer("q")
            session.start()
            delivery = await consumer.receive(WAIT_S)
            assert delivery is not None
            assert delivery.message.body == b"hello"
            await connection.close()
            await proxy.wait_for_record(lambda r: r.direction == "s2c" and r.type_name == "NULL_RESPONSE"
                                        and r.seen_ns > 0 and r.seq > 3, WAIT_S)

            log = proxy.wire_log
            assert [a.outcome for a in proxy.attempts] == ["forwarded"]
            assert {r.conn for r in log} == {1}
            assert all(r.action == "forwarded" for r in log)
            c2s = [r.type_name for r in log if r.direction == "c2s"]
            s2c = [r.type_name for r in log if r.direction == "s2c"]
            assert c2s[:3] == ["PING", "SUBSCRIBE_TOPOLOGY_V2", "CREATESESSION_V2"]
            assert {"CREATE_QUEUE_V2", "SESS_SEND", "SESS_CREATECONSUMER", "SESS_START", "SESS_CLOSE"} <= set(c2s)
            assert {"PING", "CREATESESSION_RESP", "NULL_RESPONSE", "SESS_RECEIVE_MSG"} <= set(s2c)
            send = next(r for r in log if r.type_name == "SESS_SEND")
            assert isinstance(send.packet, SessionSendMessage)
            assert send.packet.message.body == b"hello"
            assert send.channel is not None
            assert send.channel >= 10
            assert send.confirmable
            assert send.size == len(encode_packet(send.packet, send.channel))
            # Records are appended as their actions happen, on one monotonic clock.
            stamps = [r.ts_ns for r in log]
            assert stamps == sorted(stamps)
            assert all(r.seen_ns <= r.ts_ns for r in log)
            # seq numbers each direction's frames 1, 2, ...
            assert [r.seq for r in log if r.direction == "c2s"] == list(range(1, len(c2s) + 1))

    run(scenario)


def test_bytes_arrive_unchanged_across_segment_boundaries() -> None:
    sent = PREAMBLE + frames((Ping(1000), 0), (PacketsConfirmedMessage(7), 0), (Ping(2000), 0))

    async def scenario() -> None:
        async with Recorder() as upstream, FaultProxy("127.0.0.1", upstream.port) as proxy:
            _, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            for index in range(0, len(sent), 5):  # frames split across many small writes
                writer.write(sent[index : index + 5])
                await writer.drain()
            assert await upstream.wait_bytes(len(sent)) == sent
            assert [r.type_name for r in proxy.wire_log] == ["PING", "PACKETS_CONFIRMED", "PING"]
            writer.close()

    run(scenario)


def test_a_fin_is_passed_on_after_the_bytes_before_it() -> None:
    sent = PREAMBLE + frames((Ping(1), 0))
    farewell = frames((Ping(2), 0))

    async def scenario() -> None:
        async with Recorder(farewell=farewell) as upstream, FaultProxy("127.0.0.1", upstream.port) as proxy:
            proxy.add(Delay("c2s", 0.1, {"PING"}))  # the FIN must wait for the delayed PING
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(sent)
            writer.write_eof()
            # The broker side saw the PING, then the half-close; its answer still reaches the client.
            assert await read_until_closed(reader) == farewell
            assert bytes(upstream.data) == sent
            assert [(r.direction, r.action) for r in proxy.wire_log] == [("c2s", "delayed"), ("s2c", "forwarded")]
            writer.close()
            await asyncio.wait_for(proxy.stop(), WAIT_S)
            assert proxy.connections == 0

    run(scenario)


def test_splitter_yields_the_same_units_whatever_the_chunking() -> None:
    stream = PREAMBLE + frames((Ping(1), 0), (ReattachSessionMessage("s", 3), 1), (PacketsConfirmedMessage(2), 10))
    whole = list(FrameSplitter(expect_preamble=True, version=136).feed(stream))
    splitter = FrameSplitter(expect_preamble=True, version=136)
    pieces = [unit for byte in stream for unit in splitter.feed(bytes([byte]))]
    assert [(u.kind, u.data) for u in pieces] == [(u.kind, u.data) for u in whole]
    assert b"".join(u.data for u in whole) == stream
    assert [u.kind for u in whole] == ["preamble", "frame", "frame", "frame"]


# ---------------------------------------------------------------------- per-frame faults


def test_dropped_null_response_makes_the_durable_send_time_out() -> None:
    async def scenario() -> None:
        async with proxied_broker() as proxy:
            connection = await connect(proxy.url, settings=ClientSettings(call_timeout_ms=500))
            session = await connection.create_session()
            await session.create_queue("q")
            producer = session.create_producer("q")
            handle = proxy.add(Drop("s2c", {"NULL_RESPONSE"}, count=1))
            with pytest.raises(CallTimeout):
                await producer.send(CoreMessage(b"x", durable=True))
            assert handle.hits == 1
            assert handle.remaining == 0
            dropped = [r for r in proxy.wire_log if r.action == "dropped"]
            assert [(r.direction, r.type_name) for r in dropped] == [("s2c", "NULL_RESPONSE")]
            # The SESS_SEND itself went through: the broker answered, the answer was lost.
            assert any(r.type_name == "SESS_SEND" and r.reached_peer for r in proxy.wire_log)
            await connection.close()

    run(scenario)


def test_delay_is_visible_in_the_wire_log_timestamps() -> None:
    async def scenario() -> None:
        async with proxied_broker() as proxy:
            connection = await connect(proxy.url)
            session = await connection.create_session()
            await session.create_queue("q")
            producer = session.create_producer("q")
            proxy.add(Delay("s2c", 0.3, {"NULL_RESPONSE"}))
            await producer.send(CoreMessage(b"x", durable=True))
            delayed = [r for r in proxy.wire_log if r.action == "delayed"]
            assert [r.type_name for r in delayed] == ["NULL_RESPONSE"]
            assert delayed[0].held_ns >= 300_000_000
            await connection.close()

    run(scenario)


def test_frames_behind_a_delayed_frame_keep_their_order() -> None:
    sent = PREAMBLE + frames((Ping(1000), 0), (PacketsConfirmedMessage(7), 0))

    async def scenario() -> None:
        async with Recorder() as upstream, FaultProxy("127.0.0.1", upstream.port) as proxy:
            proxy.add(Delay("c2s", 0.2, {"PING"}))
            _, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(sent)
            assert await upstream.wait_bytes(len(sent)) == sent
            ping, confirmed = proxy.wire_log
            assert (ping.type_name, ping.action) == ("PING", "delayed")
            assert (confirmed.type_name, confirmed.action) == ("PACKETS_CONFIRMED", "forwarded")
            assert ping.held_ns >= 200_000_000
            assert confirmed.ts_ns >= ping.ts_ns  # it waited behind the PING although no rule held it
            writer.close()

    run(scenario)


def test_latency_holds_every_frame() -> None:
    async def scenario() -> None:
        async with proxied_broker() as proxy:
            handle = proxy.add(Latency(0.1))
            connection = await connect(proxy.url)
            await connection.create_session()
            log = proxy.wire_log
            assert {r.type_name for r in log} >= {"PING", "CREATESESSION_V2", "CREATESESSION_RESP"}
            assert all(r.action == "delayed" and r.held_ns >= 100_000_000 for r in log)
            proxy.remove(handle)
            await connection.close()

    run(scenario)


def test_duplicated_send_is_delivered_twice() -> None:
    async def scenario() -> None:
        async with proxied_broker() as proxy:
            connection = await connect(proxy.url)
            session = await connection.create_session()
            await session.create_queue("q")
            producer = session.create_producer("q")
            proxy.add(Duplicate("c2s", {"SESS_SEND"}, count=1))
            await producer.send(CoreMessage(b"twice", durable=False))
            await producer.send(CoreMessage(b"once", durable=True))  # answered after both copies were stored
            consumer = await session.create_consumer("q")
            session.start()
            bodies = []
            for _ in range(3):
                delivery = await consumer.receive(WAIT_S)
                assert delivery is not None
                bodies.append(delivery.message.body)
            assert bodies == [b"twice", b"twice", b"once"]
            sends = [r.action for r in proxy.wire_log if r.type_name == "SESS_SEND"]
            assert sends == ["duplicated", "forwarded"]
            await connection.close()

    run(scenario)


def test_cut_after_n_confirmable_commands() -> None:
    async def scenario() -> None:
        async with proxied_broker() as proxy:
            connection = await connect(proxy.url)
            failed = failure_event(connection)
            session = await connection.create_session()
            await session.create_queue("q")
            producer = session.create_producer("q")
            await producer.send(CoreMessage(b"before", durable=True))  # credits granted before counting starts
            async def send_until_cut() -> None:
                for index in range(10):  # the client also sends confirmable credit requests: count frames
                    await producer.send(CoreMessage(f"m{index}".encode(), durable=True))

            handle = proxy.add(CutAfter(3))
            with pytest.raises(ClientError):
                await send_until_cut()
            await asyncio.wait_for(failed, WAIT_S)

            session_commands = [r for r in since(proxy, handle.added_ns) if r.direction == "c2s" and r.confirmable
                                and r.channel is not None and r.channel >= 10]
            *passed, cut = session_commands  # nothing after the cut frame was read from the dead socket
            assert len(passed) == 3
            assert all(r.reached_peer for r in passed)
            assert cut.action == "cut"
            assert not cut.reached_peer
            assert handle.spent
            sends_through = [r for r in passed if r.type_name == "SESS_SEND"]
            assert sends_through  # the rule did cut a producer in the middle of its work

            # The broker holds exactly what reached it.
            direct = await connect(f"tcp://127.0.0.1:{proxy.upstream_port}")
            check = await direct.create_session()
            assert (await check.queue_query("q")).message_count == 1 + len(sends_through)
            await direct.close()

    run(scenario)


def test_reset_during_reattach_never_forwards_the_reattach() -> None:
    before = PREAMBLE + frames((Ping(1000), 0))
    reattach = frames((ReattachSessionMessage("session-1", 4), 1))

    async def scenario() -> None:
        async with Recorder() as upstream, FaultProxy("127.0.0.1", upstream.port) as proxy:
            proxy.add(ResetDuringReattach())
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(before)
            await upstream.wait_bytes(len(before))
            writer.write(reattach)
            with pytest.raises(ConnectionResetError):
                await read_until_closed(reader)
            assert isinstance(await upstream.wait_error(), ConnectionResetError)
            assert bytes(upstream.data) == before
            cut = await proxy.wait_for_record(lambda r: r.action == "cut", WAIT_S)
            assert (cut.direction, cut.type_name, cut.channel) == ("c2s", "REATTACH_SESSION", 1)
            writer.close()

    run(scenario)


# ---------------------------------------------------------------------- connection faults


def test_blackhole_is_detected_by_the_client_ttl_and_new_connections_work_after_removal() -> None:
    settings = ClientSettings(connection_ttl_ms=600, client_failure_check_period_ms=200)

    async def scenario() -> None:
        async with proxied_broker() as proxy:
            connection = await connect(proxy.url, settings=settings)
            failed = failure_event(connection)
            await connection.create_session()
            handle = proxy.add(Blackhole())
            error = await asyncio.wait_for(failed, WAIT_S)
            assert "connection TTL" in str(error)  # a timeout, not a close: no FIN or RST reached it
            assert handle.hits == 1
            assert any(r.rule == "blackhole" and r.direction == "c2s" and r.type_name == "PING"
                       for r in proxy.wire_log)

            # While the rule is installed, new connections are swallowed too.
            with pytest.raises((ConnectionRefusedError, ClientError)):  # no answer to the handshake in time
                await connect(proxy.url, settings=ClientSettings(topology_timeout_ms=300))
            assert [a.outcome for a in proxy.attempts] == ["forwarded", "blackholed"]

            proxy.remove(handle)
            again = await connect(proxy.url)
            await again.create_session()
            assert [a.outcome for a in proxy.attempts] == ["forwarded", "blackholed", "forwarded"]
            await again.close()

    run(scenario)


def test_blackhole_all_sends_nothing_either_way() -> None:
    async def scenario() -> None:
        async with Recorder(reply=frames((Ping(5), 0))) as upstream, \
                FaultProxy("127.0.0.1", upstream.port) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(PREAMBLE + frames((Ping(1), 0)))
            await upstream.wait_bytes(len(PREAMBLE) + 21)
            assert await asyncio.wait_for(reader.readexactly(21), WAIT_S) == frames((Ping(5), 0))
            assert proxy.blackhole_all() == 1
            writer.write(frames((Ping(2), 0)))
            record = await proxy.wait_for_record(lambda r: r.action == "dropped", WAIT_S)
            assert (record.type_name, record.rule) == ("PING", "blackhole_all")
            assert len(upstream.data) == len(PREAMBLE) + 21
            writer.close()

    run(scenario)


def test_refused_connections_are_reset_and_logged() -> None:
    async def scenario() -> None:
        async with proxied_broker() as proxy:
            handle = proxy.add(RefuseConnections())
            with pytest.raises(ConnectionRefusedError, match="reset"):
                await connect(proxy.url)
            attempts = await proxy.wait_for_attempts(1, WAIT_S)
            assert [a.outcome for a in attempts] == ["refused"]
            assert handle.hits == 1

            proxy.remove(handle)
            connection = await connect(proxy.url)
            assert [a.outcome for a in proxy.attempts] == ["refused", "forwarded"]
            assert proxy.attempts[0].ts_ns < proxy.attempts[1].ts_ns
            await connection.close()

    run(scenario)


def test_pause_listening_refuses_at_the_tcp_level_and_resume_reopens_the_same_port() -> None:
    async def scenario() -> None:
        async with proxied_broker() as proxy:
            port = proxy.port
            await proxy.pause_listening()
            assert not proxy.listening
            with pytest.raises(ConnectionRefusedError):
                await connect(proxy.url)
            assert proxy.attempts == []  # the TCP stack refused it; the proxy never saw it

            await proxy.resume_listening()
            assert proxy.port == port
            connection = await connect(proxy.url)
            await connection.create_session()
            assert [a.outcome for a in proxy.attempts] == ["forwarded"]
            await connection.close()

    run(scenario)


def test_unreachable_upstream_closes_the_client_with_fin() -> None:
    with socket.socket() as probe:  # a port with nothing listening on it
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]

    async def scenario() -> None:
        async with FaultProxy("127.0.0.1", closed_port) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(PREAMBLE + frames((Ping(1), 0)))
            assert await read_until_closed(reader) == b""  # EOF, not a reset
            attempts = await proxy.wait_for_attempts(1, WAIT_S)
            assert attempts[0].outcome == "upstream-unreachable"
            writer.close()

    run(scenario)


@pytest.mark.parametrize(("rst", "expect_reset"), [(True, True), (False, False)])
def test_cut_all_closes_with_rst_or_fin(rst: bool, expect_reset: bool) -> None:
    async def scenario() -> None:
        async with Recorder() as upstream, FaultProxy("127.0.0.1", upstream.port) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(PREAMBLE + frames((Ping(1), 0)))
            await upstream.wait_bytes(len(PREAMBLE) + 21)
            assert proxy.cut_all(rst=rst) == 1
            if expect_reset:
                with pytest.raises(ConnectionResetError):
                    await read_until_closed(reader)
            else:
                assert await read_until_closed(reader) == b""
            writer.close()

    run(scenario)


# ---------------------------------------------------------------------- connection ends


class Closer(Upstream):
    """An upstream that reads until it has ``after`` bytes, then closes its socket: with a FIN, or a reset."""

    def __init__(self, after: int, *, rst: bool) -> None:
        super().__init__()
        self.after = after
        self.rst = rst
        self.closed_ns: list[int] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(self.after)
        self.closed_ns.append(time.monotonic_ns())
        if self.rst:
            reset(writer)
        else:
            writer.close()


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0)."""
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def test_a_client_fin_ends_the_connection_by_the_client() -> None:
    hello = PREAMBLE + frames((Ping(1), 0))

    async def scenario() -> None:
        async with Recorder(farewell=b"") as upstream, FaultProxy("127.0.0.1", upstream.port) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(hello)
            await upstream.wait_bytes(len(hello))
            before = time.monotonic_ns()
            writer.write_eof()
            assert await read_until_closed(reader) == b""  # the broker answered the FIN passed on with its own
            after = time.monotonic_ns()
            writer.close()
            end = await proxy.wait_for_end(1, WAIT_S)
            assert (end.conn, end.by, end.how, end.reason) == (1, "client", "fin", None)
            assert before <= end.ts_ns <= after  # the client's FIN, not the broker's answer or the last close
            assert proxy.ends == [end]

    run(scenario)


@pytest.mark.parametrize(("rst", "how"), [(False, "fin"), (True, "reset")])
def test_a_broker_close_ends_the_connection_by_the_broker(rst: bool, how: str) -> None:
    hello = PREAMBLE + frames((Ping(1), 0))

    async def scenario() -> None:
        async with Closer(len(hello), rst=rst) as upstream, FaultProxy("127.0.0.1", upstream.port) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(hello)
            if rst:  # passed on as a reset
                with pytest.raises(ConnectionResetError):
                    await read_until_closed(reader)
            else:
                assert await read_until_closed(reader) == b""
            writer.close()
            end = await proxy.wait_for_end(1, WAIT_S)
            assert (end.by, end.how) == ("broker", how)
            assert end.ts_ns >= upstream.closed_ns[0]
            assert (end.reason is None) == (not rst)  # a reset says the socket's error
            assert len(proxy.ends) == 1

    run(scenario)


def test_a_client_reset_ends_the_connection_by_the_client_and_is_passed_on() -> None:
    hello = PREAMBLE + frames((Ping(1), 0))

    async def scenario() -> None:
        async with Recorder() as upstream, FaultProxy("127.0.0.1", upstream.port) as proxy:
            _, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(hello)
            await upstream.wait_bytes(len(hello))
            reset(writer)
            assert isinstance(await upstream.wait_error(), ConnectionResetError)
            end = await proxy.wait_for_end(1, WAIT_S)
            assert (end.by, end.how) == ("client", "reset")
            assert "reset" in (end.reason or "")

    run(scenario)


def test_a_cut_ends_the_connection_by_the_proxy_naming_the_rule() -> None:
    async def scenario() -> None:
        async with Recorder() as upstream, FaultProxy("127.0.0.1", upstream.port) as proxy:
            rule = CutAfter(1, packet_types={"PING"})
            proxy.add(rule)
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(PREAMBLE + frames((Ping(1), 0), (Ping(2), 0)))
            with pytest.raises(ConnectionResetError):
                await read_until_closed(reader)
            cut = await proxy.wait_for_record(lambda r: r.action == "cut", WAIT_S)
            end = await proxy.wait_for_end(1, WAIT_S)
            assert (end.by, end.how, end.reason) == ("proxy", "reset", f"connection cut by {rule!r}")
            assert end.ts_ns >= cut.ts_ns
            writer.close()

    run(scenario)


def test_a_half_open_cut_resets_the_client_and_leaves_the_broker_side_open_and_silent() -> None:
    async def scenario() -> None:
        async with Recorder() as upstream, FaultProxy("127.0.0.1", upstream.port) as proxy:
            rule = CutAfter(1, packet_types={"PING"}, half_open=True)
            proxy.add(rule)
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(PREAMBLE + frames((Ping(1), 0), (Ping(2), 0)))
            with pytest.raises(ConnectionResetError):
                await read_until_closed(reader)
            cut = await proxy.wait_for_record(lambda r: r.action == "cut", WAIT_S)
            assert (cut.rule or "").startswith(HALF_OPEN)
            # the broker's side is still open: what it writes now is read and dropped, and it heard of no close
            upstream._writers[0].write(frames((Ping(3), 0)))
            late = await proxy.wait_for_record(lambda r: r.direction == "s2c" and r.action == "dropped", WAIT_S)
            assert late.rule == cut.rule
            assert upstream.errors == []
            writer.close()
        end = proxy.ends[0]
        assert (end.by, end.how) == ("proxy", "reset")
        assert (end.reason or "").startswith("client side cut by")

    run(scenario)


def test_every_connection_ends_exactly_once(tmp_path: Path) -> None:
    """Connections of every fate: refused, cut by cut_all, closed by the client, blackholed then closed by the
    client, blackholed and open at stop, open at stop; each has one end, and stop logs the ones still open."""
    hello = PREAMBLE + frames((Ping(1), 0))
    out = tmp_path / "ends.jsonl"

    async def opened(proxy: FaultProxy, upstream: Recorder) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(hello)
        await upstream.wait_bytes(len(upstream.data) + len(hello))
        return reader, writer

    async def scenario() -> None:
        async with Recorder(farewell=b"") as upstream:
            proxy = FaultProxy("127.0.0.1", upstream.port, stop_timeout=2.0)
            await proxy.start()
            refusal = proxy.add(RefuseConnections(count=1))
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)  # 1: refused
            with pytest.raises(ConnectionResetError):
                await read_until_closed(reader)
            writer.close()
            proxy.remove(refusal)
            cut_reader, cut_writer = await opened(proxy, upstream)  # 2: cut_all (the only one open then)
            assert proxy.cut_all(rst=False) == 1
            assert await read_until_closed(cut_reader) == b""
            cut_writer.close()
            _, closing = await opened(proxy, upstream)  # 3: the client closes
            closing.close()
            await proxy.wait_for_end(3, WAIT_S)
            dead_reader, dead_closing = await opened(proxy, upstream)  # 4: blackholed, then the client closes
            _, dead_open = await opened(proxy, upstream)  # 5: blackholed, still open at stop
            assert proxy.blackhole_all() == 2
            dead_closing.write_eof()
            assert await read_until_closed(dead_reader) == b""  # not passed on: the proxy just closed that socket
            dead_closing.close()
            _, live = await opened(proxy, upstream)  # 6: open at stop
            # 4's broker side is still open (nothing told it): its end is logged once it is done, here at stop
            assert [end.conn for end in proxy.ends] == [1, 2, 3]
            await asyncio.wait_for(proxy.stop(), 4.0)
            await proxy.stop()  # idempotent: nothing logged twice
            for writer in (dead_open, live):
                writer.close()
            assert proxy.ends_jsonl(out) == 6

        ends = {end.conn: end for end in proxy.ends}
        assert sorted(ends) == [a.conn for a in proxy.attempts] == [1, 2, 3, 4, 5, 6]
        assert len(proxy.ends) == 6
        assert [end.ts_ns for end in proxy.ends] == sorted(end.ts_ns for end in proxy.ends)
        assert {conn: (e.by, e.how, e.reason) for conn, e in ends.items()} == {
            1: ("proxy", "reset", "refused by RefuseConnections"),
            2: ("proxy", "fin", "cut_all"),
            3: ("client", "fin", None),
            4: ("client", "fin", "not passed on: blackholed by blackhole_all"),
            5: ("proxy", "fin", "proxy stopped; blackholed by blackhole_all before"),
            6: ("proxy", "fin", "proxy stopped"),
        }
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert rows == [end.to_json() for end in proxy.ends]
        assert set(rows[0]) == {"ts_ns", "conn", "by", "how", "reason"}

    run(scenario)


# ---------------------------------------------------------------------- bad bytes


@pytest.mark.parametrize(
    ("garbage", "error_part"),
    [
        (raw.frame(UNKNOWN_TYPE, b"abc", channel_id=10), "unknown packet type"),
        (struct.pack(">i", 2**31 - 1) + b"\x0a" * 12, "oversized"),
        (raw.frame(10, b"\x00"), "malformed PING"),
    ],
    ids=["unknown-type", "lying-length", "short-body"],
)
def test_undecodable_bytes_are_forwarded_raw_and_logged(garbage: bytes, error_part: str) -> None:
    first = PREAMBLE + frames((Ping(1000), 0))
    later = frames((Ping(2000), 0))  # well-formed, but after the damage it is not decoded any more
    reply = b"\xff\xff\xff\xff broker-side nonsense"

    async def scenario() -> None:
        async with Recorder(reply=reply) as upstream, FaultProxy("127.0.0.1", upstream.port) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(first + garbage)
            await upstream.wait_bytes(len(first + garbage))
            writer.write(later)
            assert await upstream.wait_bytes(len(first + garbage + later)) == first + garbage + later
            assert await asyncio.wait_for(reader.readexactly(len(reply)), WAIT_S) == reply

            c2s = [r for r in proxy.wire_log if r.direction == "c2s"]
            assert [r.type_name for r in c2s] == ["PING", RAW, RAW]
            assert error_part in (c2s[1].error or "")
            assert c2s[1].size == len(garbage)
            assert (c2s[2].size, c2s[2].packet) == (len(later), None)
            assert "not decoded" in (c2s[2].error or "")
            s2c = [r for r in proxy.wire_log if r.direction == "s2c"]
            assert [r.type_name for r in s2c] == [RAW]
            writer.close()

    run(scenario)


def test_garbage_through_to_the_broker_does_not_disturb_the_proxy() -> None:
    async def scenario() -> None:
        async with proxied_broker() as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(PREAMBLE + raw.frame(UNKNOWN_TYPE, b"junk", channel_id=10))
            await read_until_closed(reader)  # the broker answers what it likes and closes
            assert proxy.wire_log[0].type_name == RAW
            connection = await connect(proxy.url)  # the next connection is proxied as usual
            await connection.create_session()
            await connection.close()
            writer.close()

    run(scenario)


# ---------------------------------------------------------------------- evidence and shutdown


def test_wire_log_jsonl(tmp_path: Path) -> None:
    out = tmp_path / "wire.jsonl"

    async def scenario() -> None:
        async with proxied_broker() as proxy:
            connection = await connect(proxy.url)
            await connection.create_session()
            await connection.close()
            assert proxy.wire_log_jsonl(out) == len(proxy.wire_log)

    run(scenario)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["type"] == "PING"
    assert rows[0]["packet"].startswith("Ping(")
    assert {"ts_ns", "seen_ns", "conn", "direction", "seq", "channel", "size", "confirmable", "action"} <= set(rows[0])
    assert all(isinstance(row["ts_ns"], int) for row in rows)


def test_stop_with_live_connections_finishes_within_its_deadline() -> None:
    async def scenario() -> None:
        async with broker() as server:
            proxy = FaultProxy("127.0.0.1", server.bound_port, stop_timeout=2.0)
            await proxy.start()
            connection = await connect(proxy.url)
            failed = failure_event(connection)
            await connection.create_session()
            blackholed = await connect(proxy.url)
            await blackholed.create_session()
            proxy.blackhole_all()
            live = await connect(proxy.url)
            _, idle_writer = await asyncio.open_connection("127.0.0.1", proxy.port)  # never says a word
            assert proxy.connections == 4
            await asyncio.wait_for(proxy.stop(), 4.0)
            assert proxy.connections == 0
            await asyncio.wait_for(failed, WAIT_S)
            for other in (blackholed, live):
                other.core.closed = True  # the proxy is gone: nothing to close politely
                await other.close()
            idle_writer.close()
            await proxy.stop()  # idempotent

    run(scenario)


def test_rule_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="direction"):
        Drop("sideways")
    with pytest.raises(ValueError, match="SESS_SNED"):
        Drop("c2s", {"SESS_SNED"})
    with pytest.raises(ValueError, match="seconds"):
        Delay("c2s", -1)
    with pytest.raises(ValueError, match="confirmable_commands"):
        CutAfter(-1)
    # A bare name is taken as one name, not as a set of letters.
    assert Drop("c2s", "SESS_SEND").packet_types == frozenset({"SESS_SEND"})  # type: ignore[arg-type]


def test_rules_combine_in_the_order_they_were_added() -> None:
    send = FrameView(1, "c2s", 10, "SESS_SEND", True)
    ping = FrameView(1, "c2s", 0, "PING", False)
    delay, drop, dup, cut = (new_handle(Delay("c2s", 0.1), 0), new_handle(Drop("c2s", {"SESS_SEND"}, count=1), 0),
                             new_handle(Duplicate("both", None, count=5), 0), new_handle(CutAfter(1), 0))
    handles = [delay, drop, dup, cut]
    first = judge(handles, send)  # the drop decides; the duplicate's count is not spent on it
    assert first.action == "dropped"
    assert (drop.remaining, dup.remaining, cut.counted) == (0, 5, 0)
    second = judge(handles, send)  # the drop is spent: delayed and duplicated, and counted by CutAfter
    assert (second.action, second.delay_s, second.copies) == ("duplicated", 0.1, 2)
    assert (dup.remaining, cut.counted) == (4, 1)
    assert judge(handles, ping).action == "duplicated"  # not confirmable: CutAfter does not count it
    assert judge(handles, send).action == "cut"
    assert cut.spent
    assert judge(handles, send).action == "duplicated"  # CutAfter fires once
