"""The confirmation window (spec 000 "100% Transparent session re-attachment"; artemis-core-notes §9.1-§9.3).

Every case runs the kit's client through the fault proxy and judges the proxy's wire log: which confirmable
commands the broker counted on the session channel, their full frame sizes, and the PACKETS_CONFIRMED ids it
sent back (``_window_model.judge_cadence``).  What a broker must do: confirm each time the counted bytes reach
the client's window, count only confirmable packets, flush a partial window, keep only unconfirmed packets in
its resend cache, and treat -1 as "no window" and 0 as "confirm every command".
"""

from __future__ import annotations

import time
from typing import Any

from cck.codec import (
    ARTEMIS_2_7_0_VERSION,
    CreateQueueMessage,
    CreateQueueMessage_V2,
    NullResponseMessage,
    PacketsConfirmedMessage,
    ReattachSessionMessage,
    ReattachSessionResponseMessage,
    RoutingType,
    SessionCloseMessage,
    SessionSendMessage,
)
from cck.conformance.cases import Case, cases
from cck.conformance.clients import ClientUnderTest
from cck.conformance.evidence import CaseEvidence
from cck.conformance.faults import Drop, FaultProxy, WireRecord
from cck.conformance.plugin import Settings
from cck.conformance.targets import Target
from cck.conformance.verdicts import indeterminate
from cck.reference.client import BrokerRefused

from ._kit import key_of, run
from ._reattach_kit import (
    SETTLE_S,
    confirmable_session_frames,
    outage,
    producer_elsewhere,
    proxied_scenario,
    server_replay_problems,
    wait_event,
)
from ._window_model import Cadence, judge_cadence

KIB = 1024
MIB = 1024 * KIB
#: Artemis's default connection-ttl-check-interval, at which the broker flushes partial windows (notes §9.3).
CHECK_S = 2.0


def _confirms(log: list[WireRecord], direction: str, channel: int, conn: int = 1) -> list[WireRecord]:
    return sorted((r for r in log if r.direction == direction and r.conn == conn and r.channel == channel
                   and isinstance(r.packet, PacketsConfirmedMessage)), key=lambda r: r.seq)  # fmt: skip


def _broker_cadence(log: list[WireRecord], channel: int, window: int, excluded: frozenset[int] = frozenset()
                    ) -> Cadence:
    """The broker's confirmations of the client's commands on ``channel`` (connection 1)."""
    commands = confirmable_session_frames(log, direction="c2s", conn=1, channel=channel)
    sizes = [r.size for i, r in enumerate(commands) if i not in excluded]
    ids = [r.packet.command_id for r in _confirms(log, "s2c", channel) if isinstance(r.packet, PacketsConfirmedMessage)]
    return judge_cadence(sizes, ids, window)


async def _settled_cadence(proxy: FaultProxy, channel: int, window: int, timeout: float,
                           excluded: frozenset[int] = frozenset(), *, sends: int = 0) -> Cadence:
    """Wait (bounded) until the proxy has passed at least ``sends`` SESS_SENDs on the channel (what the case sent:
    a cadence judged on fewer judges nothing) and no confirmation is still owed for what the broker counted, then
    judge."""

    def ready(_record: WireRecord) -> bool:
        log = list(proxy.wire_log)
        sent = sum(1 for r in confirmable_session_frames(log, direction="c2s", conn=1, channel=channel)
                   if r.type_name == "SESS_SEND")
        return sent >= sends and _broker_cadence(log, channel, window, excluded).complete

    await proxy.wait_for_record(ready, timeout)
    return _broker_cadence(list(proxy.wire_log), channel, window, excluded)


def _judge(cadence: Cadence, elapsed_s: float, evidence: CaseEvidence) -> None:
    evidence.note("cadence", cadence.to_dict())
    evidence.note("elapsed_s", elapsed_s)
    assert cadence.ok, "; ".join(cadence.errors)
    # A partial window is flushed only by the ttl check (every CHECK_S), a close or a DISCONNECT: more flushes
    # than that mean the broker confirmed early, i.e. counted bytes the window does not count.
    allowed = int(elapsed_s / CHECK_S) + 1
    assert len(cadence.flushes) <= allowed, (
        f"{len(cadence.flushes)} partial confirmations {cadence.flushes[:10]} in {elapsed_s:.1f} s "
        f"(at most {allowed} flushes expected): the broker confirmed before the window filled")


# ---------------------------------------------------------------------------------------------------- cadence

CADENCE = tuple(
    Case(f"window.cadence.{i}", "window.confirm-bytes",
         f"{count} {'blocking durable' if blocking else 'asynchronous non-durable'} sends of {body}-byte bodies "
         f"with confirmationWindowSize {window}",
         "PACKETS_CONFIRMED names exactly the command at which the full frame sizes of the counted commands since "
         "the previous confirmation reach the window; no other confirmations but rare flushes of a partial window",
         checks="implementation",
         params={"window": window, "body": body, "count": count, "blocking": blocking})
    for i, (window, body, count, blocking) in enumerate((
        (1 * KIB, 100, 60, False),
        (1 * KIB, 2000, 20, False),
        (10 * KIB, 1000, 60, False),
        (10 * KIB, 100, 300, False),
        (64 * KIB, 1000, 200, False),
        (64 * KIB, 10_000, 30, False),
        (1 * MIB, 20_000, 80, False),
        (1 * MIB, 50_000, 45, False),
        (10 * KIB, 500, 50, True),
        (64 * KIB, 5000, 40, True),
        (1, 100, 20, False),
    ), start=1)
)  # fmt: skip


@cases(*CADENCE)
def test_confirmation_cadence(case: Case, cck_target: Target, cck_settings: Settings, evidence: CaseEvidence) -> None:
    p = case.params
    deadline = cck_settings.deadline

    async def scenario() -> None:
        async with (proxied_scenario(cck_target, evidence, case.id, durable=p["blocking"], body=b"c" * p["body"],
                                     confirmation_window_size=p["window"]) as sc,
                    sc.connection):
            started = time.monotonic()
            for _ in range(p["count"]):
                await sc.flow.send(p["blocking"])
            await sc.flow.settled(deadline(SETTLE_S))
            cadence = await _settled_cadence(sc.proxy, sc.channel, p["window"], deadline(SETTLE_S), sends=p["count"])
            _judge(cadence, time.monotonic() - started, evidence)
            if sum(r.size for r in confirmable_session_frames(sc.proxy.wire_log, direction="c2s",
                                                              channel=sc.channel)) >= p["window"]:
                if not cadence.window_confirms and cadence.flushes:
                    # _judge found no stretch between confirmations that reached the window: a flush (the broker
                    # answering a PING) split the sends before they filled it, so there was no window to confirm
                    indeterminate(f"a flush of a partial window (PACKETS_CONFIRMED at {cadence.flushes}) came before "
                                  "the sends filled the window, and the rest did not fill it: no window confirmation "
                                  "to judge")
                assert cadence.window_confirms, "the window filled but no PACKETS_CONFIRMED came for it"
            await sc.session.delete_queue(sc.queue)

    run(cck_settings, scenario())


# ---------------------------------------------------------------------------------------------------- what counts

COUNTS = (
    Case("window.counts.1", "window.what-counts",
         "150 blocking durable sends (100-byte bodies, window 1 KiB) while the client PINGs every 20 ms and flushes "
         "its own PACKETS_CONFIRMED on the session channel with each PING",
         "the broker's cadence counts only the confirmable commands: PINGs and the client's PACKETS_CONFIRMED do "
         "not move it", checks="implementation", params={"window": 1 * KIB, "mode": "pings"}),
    Case("window.counts.2", "window.exception-not-counted",
         "window 1 KiB: sends interleaved with CREATE_QUEUE requests the broker refuses (the queue exists)",
         "the refused commands (answered with EXCEPTION) are not counted: the cadence matches the other "
         "commands alone (from protocol 130; an older server counts them like any other)", checks="implementation",
         params={"window": 1 * KIB, "mode": "exceptions"}),
    Case("window.counts.3", "window.exception-not-counted",
         "window 0 (a confirmation per counted command): sends interleaved with refused CREATE_QUEUE requests",
         "PACKETS_CONFIRMED ids run 0, 1, 2, ... over the commands that were not refused; a refused one gets no "
         "id of its own (from protocol 130; an older server counts it like any other)", checks="implementation",
         params={"window": 0, "mode": "exceptions"}),
)


@cases(*COUNTS)
def test_what_counts(case: Case, cck_target: Target, cck_settings: Settings, evidence: CaseEvidence) -> None:
    p = case.params
    deadline = cck_settings.deadline
    window = p["window"]

    async def scenario() -> None:
        extra: dict[str, Any] = {"client_failure_check_period_ms": 20} if p["mode"] == "pings" else {}
        async with (proxied_scenario(cck_target, evidence, case.id, durable=True, body=b"w" * 100,
                                     confirmation_window_size=window, **extra) as sc,
                    sc.connection):
            started = time.monotonic()
            refused = 0
            if p["mode"] == "pings":
                for _ in range(150):
                    await sc.flow.send_blocking()
            else:
                for _ in range(12):
                    await sc.flow.send_blocking()
                    try:
                        await sc.session.create_queue(sc.queue, sc.queue, routing_type=RoutingType.ANYCAST)
                    except BrokerRefused as exc:
                        refused += 1
                        evidence.note("refusal", str(exc))
                    else:
                        raise AssertionError("the broker created a queue that already exists")
            commands = confirmable_session_frames(sc.proxy.wire_log, direction="c2s", conn=1, channel=sc.channel)
            # the first CREATE_QUEUE(_V2) is the scenario's own (accepted); every later one was refused (before 129
            # the client creates queues with the version 1 packet)
            creates = [i for i, r in enumerate(commands)
                       if isinstance(r.packet, (CreateQueueMessage, CreateQueueMessage_V2))]
            # before 130 (2.7.0, ARTEMIS-1545) a refused command is counted like any other
            refusals_uncounted = p["mode"] == "exceptions" and sc.settings.version >= ARTEMIS_2_7_0_VERSION
            excluded = frozenset(creates[1:]) if refusals_uncounted else frozenset()
            assert len(creates[1:]) == refused
            cadence = await _settled_cadence(sc.proxy, sc.channel, window, deadline(SETTLE_S), excluded,
                                             sends=150 if p["mode"] == "pings" else 12)
            _judge(cadence, time.monotonic() - started, evidence)
            if p["mode"] == "pings":
                pings = [r for r in sc.proxy.wire_log if r.direction == "c2s" and r.type_name == "PING"]
                client_confirms = _confirms(sc.proxy.wire_log, "c2s", sc.channel)
                evidence.note("client_pings", len(pings))
                evidence.note("client_confirms", len(client_confirms))
                assert len(pings) > 1, "the client did not PING during the batch: nothing was tested"
                assert client_confirms, "the client sent no PACKETS_CONFIRMED: nothing was tested"
            await sc.session.delete_queue(sc.queue)

    run(cck_settings, scenario())


# ---------------------------------------------------------------------------------------------------- flushes

FLUSH_CLOSE = tuple(
    Case(f"window.flush-close.{i}", "window.flush",
         f"{k} asynchronous sends (less than the {window}-byte window), then SESS_CLOSE",
         "before answering the close the broker confirms everything, the close included: PACKETS_CONFIRMED(index "
         "of SESS_CLOSE) precedes the close's NULL_RESPONSE",
         checks="implementation", params={"window": window, "k": k})
    for i, (window, k) in enumerate(((10 * KIB, 1), (64 * KIB, 5), (1 * MIB, 20)), start=1)
)


@cases(*FLUSH_CLOSE)
def test_flush_on_close(case: Case, cck_target: Target, cck_settings: Settings, evidence: CaseEvidence) -> None:
    p = case.params
    deadline = cck_settings.deadline

    async def scenario() -> None:
        async with proxied_scenario(cck_target, evidence, case.id, durable=False,
                                    confirmation_window_size=p["window"]) as sc:
            async with sc.connection:
                cleanup = await sc.connection.create_session()
                for _ in range(p["k"]):
                    await sc.flow.send_async()
                await sc.flow.settled(deadline(SETTLE_S))
                await sc.session.close()
                await cleanup.delete_queue(sc.queue)
            log = list(sc.proxy.wire_log)
            commands = confirmable_session_frames(log, direction="c2s", conn=1, channel=sc.channel)
            close_index = next(i for i, r in enumerate(commands) if isinstance(r.packet, SessionCloseMessage))
            close_seq = commands[close_index].seq
            s2c = sorted((r for r in log if r.direction == "s2c" and r.conn == 1 and r.channel == sc.channel),
                         key=lambda r: r.seq)
            # every send was answered before the close went out, so the first answer after it is the close's
            close = commands[close_index]
            answer = next(r for r in s2c if isinstance(r.packet, NullResponseMessage) and _after(r, close))
            confirms = [r for r in s2c if isinstance(r.packet, PacketsConfirmedMessage) and r.seq < answer.seq]
            evidence.note("close_command_index", close_index)
            evidence.note("confirms_before_close_answer",
                          [r.packet.command_id for r in confirms if isinstance(r.packet, PacketsConfirmedMessage)])
            evidence.note("close_c2s_seq", close_seq)
            assert confirms, "no PACKETS_CONFIRMED before the answer to SESS_CLOSE"
            last = confirms[-1].packet
            assert isinstance(last, PacketsConfirmedMessage)
            assert last.command_id == close_index, (
                f"the last confirmation before the close's answer names command {last.command_id}; SESS_CLOSE is "
                f"command {close_index}")

    run(cck_settings, scenario())


def _after(response: WireRecord, request: WireRecord) -> bool:
    """The response was seen by the proxy after the request was (one monotonic clock for both directions)."""
    return response.seen_ns >= request.seen_ns


FLUSH_CHECK = tuple(
    Case(f"window.flush-check.{i}", "window.flush",
         f"{k} asynchronous sends, far less than the {window}-byte window, then nothing",
         "the broker flushes the partial window at its connection-ttl check (every 2 s by default): "
         "PACKETS_CONFIRMED(last command) arrives within one check interval, and the client's resend cache "
         "is then empty", checks="implementation", params={"window": window, "k": k})
    for i, (window, k) in enumerate(((64 * KIB, 3), (1 * MIB, 10)), start=1)
)


@cases(*FLUSH_CHECK)
def test_flush_on_ttl_check(case: Case, cck_target: Target, cck_settings: Settings, evidence: CaseEvidence) -> None:
    p = case.params
    deadline = cck_settings.deadline

    async def scenario() -> None:
        async with (proxied_scenario(cck_target, evidence, case.id, durable=False,
                                     confirmation_window_size=p["window"]) as sc,
                    sc.connection):
            for _ in range(p["k"]):
                await sc.flow.send_async()
            await sc.flow.settled(deadline(SETTLE_S))
            commands = confirmable_session_frames(sc.proxy.wire_log, direction="c2s", conn=1, channel=sc.channel)
            last_index, last_sent = len(commands) - 1, commands[-1]
            flush = await sc.proxy.wait_for_record(
                lambda r: r.direction == "s2c" and r.channel == sc.channel
                and isinstance(r.packet, PacketsConfirmedMessage) and r.packet.command_id == last_index,
                deadline(2 * CHECK_S + 2))
            delay_s = (flush.ts_ns - last_sent.ts_ns) / 1e9
            evidence.note("flush_delay_s", delay_s)
            assert delay_s <= deadline(CHECK_S + 1.0), f"the partial window was flushed after {delay_s:.2f} s"
            # A blocking query answered after the flush proves the client processed it: its cache must
            # then hold the query alone.
            await sc.session.queue_query(sc.queue)
            window = sc.session.core.send_window
            evidence.note("client_cache", {"first_stored": window.first_stored, "cached": len(window.cache)})
            assert window.first_stored == last_index + 1, (
                f"the client's cache starts at command {window.first_stored}, expected {last_index + 1}")
            assert len(window.cache) == 1, f"{len(window.cache)} commands cached, expected only the query"
            await sc.session.delete_queue(sc.queue)

    run(cck_settings, scenario())


FLUSH_PING = tuple(
    Case(f"window.flush-ping.{i}", "window.flush",
         f"a consumer (window {window} bytes, PING every {period} ms) receives {k} messages, less than a window",
         "the client flushes its partial window with the next PING: a PACKETS_CONFIRMED naming the last broker "
         "packet it processed follows a PING within one ping period (the kit's client, notes §9.3)",
         checks="implementation", subject="client", params={"window": window, "k": k, "period": period})
    for i, (window, k, period) in enumerate(((64 * KIB, 3, 200), (1 * MIB, 10, 300)), start=1)
)


@cases(*FLUSH_PING)
def test_client_flush_on_ping(case: Case, cck_client: ClientUnderTest, cck_target: Target, cck_settings: Settings,
                              evidence: CaseEvidence) -> None:
    cck_client.require_kit("the case drives a consumer of the kit's client through the fault proxy")
    p = case.params
    deadline = cck_settings.deadline

    async def scenario() -> None:
        async with (proxied_scenario(cck_target, evidence, case.id, durable=True, confirmation_window_size=p["window"],
                                     client_failure_check_period_ms=p["period"]) as sc,
                    sc.connection):
            consumer = await sc.session.create_consumer(sc.queue)
            sc.session.start()
            async with producer_elsewhere(cck_target, sc.settings, sc) as flow:
                for _ in range(p["k"]):
                    await flow.send_blocking()
            for _ in range(p["k"]):
                delivery = await consumer.receive(deadline(SETTLE_S))
                assert delivery is not None
            pushed = confirmable_session_frames(sc.proxy.wire_log, direction="s2c", conn=1, channel=sc.channel)
            last_index = len(pushed) - 1
            got_at = pushed[-1].ts_ns
            flush = await sc.proxy.wait_for_record(
                lambda r: r.direction == "c2s" and r.channel == sc.channel and r.ts_ns >= got_at
                and isinstance(r.packet, PacketsConfirmedMessage) and r.packet.command_id == last_index,
                deadline(3 * p["period"] / 1000 + 2))
            # written together with a PING: right before it (the kit's client) or right after (Artemis's)
            neighbours = {r.seq - flush.seq: r.type_name for r in sc.proxy.wire_log
                          if r.direction == "c2s" and r.conn == 1 and abs(r.seq - flush.seq) == 1}
            evidence.note("flush_delay_s", (flush.ts_ns - got_at) / 1e9)
            evidence.note("flush_neighbours", neighbours)
            assert "PING" in neighbours.values(), f"the flush was written next to {neighbours}, not a PING"
            await consumer.close()
            await sc.session.delete_queue(sc.queue)

    run(cck_settings, scenario())


# ---------------------------------------------------------------------------------------------------- resend caches

RELEASE_CLIENT = tuple(
    Case(f"window.release-client.{i}", "window.release",
         f"{count} asynchronous sends of {body}-byte bodies with a {window}-byte window",
         "each PACKETS_CONFIRMED the client has processed frees its resend cache up to that command: after the "
         "last answer the cache holds exactly the commands after the last confirmation that preceded it",
         subject="client", params={"window": window, "count": count, "body": body})
    for i, (window, count, body) in enumerate(((1 * KIB, 50, 100), (10 * KIB, 100, 500)), start=1)
)


@cases(*RELEASE_CLIENT)
def test_client_cache_release(case: Case, cck_client: ClientUnderTest, cck_target: Target, cck_settings: Settings,
                              evidence: CaseEvidence) -> None:
    cck_client.require_kit("the case reads the client's resend cache, which only the kit's client exposes")
    p = case.params
    deadline = cck_settings.deadline

    async def scenario() -> None:
        async with (proxied_scenario(cck_target, evidence, case.id, durable=False, body=b"r" * p["body"],
                                     confirmation_window_size=p["window"]) as sc,
                    sc.connection):
            for _ in range(p["count"]):
                await sc.flow.send_async()
            await sc.flow.settled(deadline(SETTLE_S))
            # A blocking query: everything the broker sent before its answer has been processed once it returns.
            await sc.session.queue_query(sc.queue)
            log = list(sc.proxy.wire_log)
            s2c = sorted((r for r in log if r.direction == "s2c" and r.conn == 1 and r.channel == sc.channel),
                         key=lambda r: r.seq)
            answer = max(r.seq for r in s2c if r.type_name.startswith("SESS_QUEUEQUERY_RESP"))
            seen = [r.packet.command_id for r in s2c
                    if isinstance(r.packet, PacketsConfirmedMessage) and r.seq < answer]
            commands = confirmable_session_frames(log, direction="c2s", conn=1, channel=sc.channel)
            window = sc.session.core.send_window
            expected_first = (max(seen) + 1) if seen else 0
            evidence.note("client_cache", {"first_stored": window.first_stored, "cached": len(window.cache),
                                           "confirmed_ids": seen})
            assert seen, "the broker confirmed nothing although the window filled"
            assert window.first_stored == expected_first, (
                f"the cache starts at command {window.first_stored}; the broker had confirmed up to {max(seen)}")
            assert len(window.cache) == len(commands) - expected_first
            await sc.session.delete_queue(sc.queue)

    run(cck_settings, scenario())


RELEASE_BROKER = tuple(
    Case(f"window.release-broker.{i}", "window.broker-release",
         f"a consumer (window {window} bytes) processes {total - lost} deliveries and confirms them; {lost} more "
         "are lost on the way; the connection is reset and the session reattached",
         "the broker has released what the client confirmed: on the new connection it replays first the "
         f"{lost} packet(s) the client never processed, and nothing it had",
         checks="implementation", params={"window": window, "total": total, "lost": lost})
    for i, (window, total, lost) in enumerate(((1 * KIB, 20, 0), (64 * KIB, 20, 0), (1 * KIB, 20, 4),
                                               (1 * MIB, 10, 2)), start=1)
)


@cases(*RELEASE_BROKER)
def test_broker_cache_release(case: Case, cck_target: Target, cck_settings: Settings, evidence: CaseEvidence) -> None:
    p = case.params
    deadline = cck_settings.deadline

    async def scenario() -> None:
        async with (proxied_scenario(cck_target, evidence, case.id, durable=True,
                                     confirmation_window_size=p["window"]) as sc,
                    sc.connection):
            consumer = await sc.session.create_consumer(sc.queue)
            sc.session.start()
            received: list[str] = []
            async with producer_elsewhere(cck_target, sc.settings, sc) as flow:
                for _ in range(p["total"] - p["lost"]):
                    await flow.send_blocking()
                for _ in range(p["total"] - p["lost"]):
                    delivery = await consumer.receive(deadline(SETTLE_S))
                    assert delivery is not None
                    received.append(key_of(delivery.message))
                drop = sc.proxy.add(Drop("s2c"))
                for _ in range(p["lost"]):
                    await flow.send_blocking()
                if p["lost"]:
                    count = 0

                    def lost_all(r: WireRecord) -> bool:
                        nonlocal count
                        count += r.action == "dropped" and r.type_name == "SESS_RECEIVE_MSG"
                        return bool(count >= p["lost"])

                    await sc.proxy.wait_for_record(lost_all, deadline(SETTLE_S))
                sc.proxy.remove(drop)
                assert sc.proxy.cut_all() >= 1
                event = await wait_event(sc.connection, ("reattached", "recreated"), deadline(SETTLE_S))
                assert event.kind == "reattached", f"{event.kind}: {event.detail}"
                for _ in range(p["lost"]):
                    delivery = await consumer.receive(deadline(SETTLE_S))
                    assert delivery is not None, "a lost delivery was not replayed"
                    assert delivery.delivery_count == 1
                    received.append(key_of(delivery.message))
            log = list(sc.proxy.wire_log)
            processed = confirmable_session_frames(log, direction="s2c", conn=1, channel=sc.channel)
            dropped = confirmable_session_frames(log, direction="s2c", conn=1, channel=sc.channel,
                                                 actions=("dropped",))
            request = next(r for r in log if isinstance(r.packet, ReattachSessionMessage))
            answer = next(r for r in log if isinstance(r.packet, ReattachSessionResponseMessage))
            later = confirmable_session_frames(log, direction="s2c", conn=answer.conn, channel=sc.channel)
            assert isinstance(request.packet, ReattachSessionMessage)
            evidence.note("client_last_processed", request.packet.last_confirmed_command_id)
            evidence.note("client_confirms", [r.packet.command_id for r in _confirms(log, "c2s", sc.channel)
                                              if isinstance(r.packet, PacketsConfirmedMessage)])
            evidence.note("replayed_before_response", [r.type_name for r in later if r.seen_ns < answer.seen_ns])
            evidence.note("dropped", [r.type_name for r in dropped])
            assert request.packet.last_confirmed_command_id == len(processed) - 1
            problems = server_replay_problems(processed, dropped, later)
            assert not problems, " | ".join(problems)
            assert len(received) == len(set(received)) == p["total"]
            await consumer.close()
            await sc.session.delete_queue(sc.queue)

    run(cck_settings, scenario())


# ---------------------------------------------------------------------------------------------------- -1, 0, > 0

MODES = (
    Case("window.mode.1", "window.disabled",
         "window -1: 50 asynchronous non-durable sends and a blocking durable one",
         "no buffering: no PACKETS_CONFIRMED in either direction; the non-durable sends ask for no answer",
         params={"window": -1, "cut": False}),
    Case("window.mode.2", "window.zero",
         "window 0: 30 asynchronous non-durable sends",
         "a window of 0 bytes is filled by every command: PACKETS_CONFIRMED(0), (1), (2), ... one per counted "
         "command", checks="implementation", params={"window": 0, "cut": False}),
    Case("window.mode.3", "window.zero",
         "window 0: the connection is reset while the session is idle and the link stays down for 0.5 s",
         "the broker does not keep a window-0 session after the TCP drop (only windows > 0 support reconnect): "
         "REATTACH_SESSION is answered reattached=false and the client recreates the session",
         checks="implementation", params={"window": 0, "cut": True, "expect": "recreated", "outage": 0.5}),
    Case("window.mode.4", "window.disabled",
         "window -1: the connection is reset while the session is idle",
         "no re-attachment: REATTACH_SESSION_RESP(-1, false), the session is recreated",
         params={"window": -1, "cut": True, "expect": "recreated"}),
    Case("window.mode.5", "window.enabled",
         "window 1 byte (the smallest positive window): the connection is reset while the session is idle",
         "any window > 0 buffers and keeps the session: it is reattached",
         params={"window": 1, "cut": True, "expect": "reattached"}),
    Case("window.mode.6", "window.zero",
         "window 0: the connection is reset while the session is idle and the client reconnects at once (as "
         "Artemis's client does: the first reconnect attempt is immediate)",
         "the window-0 session is gone however quickly the client comes back: reattached=false, recreate",
         checks="implementation", params={"window": 0, "cut": True, "expect": "recreated"}),
)


@cases(*MODES)
def test_window_modes(case: Case, cck_target: Target, cck_settings: Settings, evidence: CaseEvidence) -> None:
    p = case.params
    deadline = cck_settings.deadline
    window = p["window"]

    async def scenario() -> None:
        async with (proxied_scenario(cck_target, evidence, case.id, durable=False,
                                     confirmation_window_size=window) as sc,
                    sc.connection):
            if p["cut"]:
                await sc.flow.send_blocking()
                await outage(sc.proxy, p.get("outage", 0.0))
                event = await wait_event(sc.connection, ("reattached", "recreated"), deadline(SETTLE_S))
                answers = [r.packet for r in sc.proxy.wire_log if isinstance(r.packet, ReattachSessionResponseMessage)]
                evidence.note("reattach_responses", [repr(a) for a in answers])
                assert event.kind == p["expect"], f"{event.kind}: {event.detail}"
                assert answers, "no REATTACH_SESSION_RESP"
                if p["expect"] == "recreated":
                    assert answers[-1] == ReattachSessionResponseMessage(-1, False)
                await sc.flow.send_blocking()
            elif window == -1:
                for _ in range(50):
                    await sc.flow.send_async()
                sc.flow.durable = True
                await sc.flow.send_blocking()
                confirms = [r for r in sc.proxy.wire_log if isinstance(r.packet, PacketsConfirmedMessage)]
                unanswered = [r for r in sc.proxy.wire_log if isinstance(r.packet, SessionSendMessage)
                              and not r.packet.requires_response]
                evidence.note("packets_confirmed", len(confirms))
                assert not confirms, f"{len(confirms)} PACKETS_CONFIRMED with the window disabled"
                assert len(unanswered) == 50
            else:
                started = time.monotonic()
                for _ in range(30):
                    await sc.flow.send_async()
                await sc.flow.settled(deadline(SETTLE_S))
                cadence = await _settled_cadence(sc.proxy, sc.channel, 0, deadline(SETTLE_S), sends=30)
                _judge(cadence, time.monotonic() - started, evidence)
                assert not cadence.flushes
                commands = confirmable_session_frames(sc.proxy.wire_log, direction="c2s", conn=1, channel=sc.channel)
                assert cadence.window_confirms == list(range(len(commands)))
            await sc.session.delete_queue(sc.queue)

    run(cck_settings, scenario())
