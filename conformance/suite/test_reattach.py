"""Reattachment and replay (spec 000/001 "100% Transparent session re-attachment" and "Session
reconnection"; artemis-core-notes §9.4, §9.5).

The kit's client talks to the target through the fault proxy, which cuts, drops and resets; the proxy's
wire log shows what each side numbered, confirmed and replayed, and a Jepsen-style history of every send
and receipt, drained straight from the broker afterwards, is checked for anything lost, duplicated or out
of order.  What a broker must do: keep a session across a TCP drop shorter than connection-ttl, report the
last command it received, replay what the client missed and take the client's replay exactly once; refuse
the reattach (so the client recreates) when the session is gone or the window is -1.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack

from cck.codec import CreateSessionMessage, ReattachSessionResponseMessage, SessionSendMessage
from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.faults import CutAfter, Drop, ResetDuringReattach, WireRecord
from cck.conformance.oracles import History
from cck.conformance.plugin import Settings
from cck.conformance.targets import CONFIG, NodeSpec, Target, Topology
from cck.reference.client import Consumer, TransactionRolledBack

from ._kit import key_of, message, record_receipt, run
from ._reattach_kit import (
    RESTORE_S,
    SETTLE_S,
    Scenario,
    confirmable_session_frames,
    outage,
    producer_elsewhere,
    proxied_scenario,
    send_keys,
    send_through_a_cut,
    server_replay_problems,
    wait_event,
    warm_up,
)

KIB = 1024
MIB = 1024 * KIB
#: The fixture ``cck_make_target``: a started target of the run's kind with the given topology.
MakeTarget = Callable[[Topology], Target]
#: The ttl-check interval the kit configures for the after-ttl cases (Artemis's default is 2000 ms).
TTL_CHECK_MS = 200


def _reattach_response(log: list[WireRecord], conn: int | None = None) -> list[ReattachSessionResponseMessage]:
    return [r.packet for r in log
            if isinstance(r.packet, ReattachSessionResponseMessage) and r.direction == "s2c"
            and (conn is None or r.conn == conn)]  # fmt: skip


# ---------------------------------------------------------------------------------------------------- cut mid-batch

CUT = tuple(
    Case(f"reattach.cut.{i}", "reattach.last-received",
         f"{'blocking' if blocking else 'asynchronous'} {'durable' if durable else 'non-durable'} sends of {body}-byte "
         f"bodies with a {window}-byte window; the proxy resets the connection when confirmable command {n + 1} "
         f"arrives ({total} sends in all)",
         "the client reattaches; the broker's REATTACH_SESSION_RESP names no command it did not receive; the "
         "client's replay starts at the command after it, in order; every send is answered once; the queue "
         "holds each message exactly once, in send order",
         params={"window": window, "cut_after": n, "total": total, "durable": durable, "blocking": blocking,
                 "body": body})
    for i, (window, n, total, durable, blocking, body) in enumerate((
        (1 * KIB, 1, 10, False, False, 100),
        (1 * KIB, 5, 30, False, False, 100),
        (10 * KIB, 20, 60, False, False, 500),
        (64 * KIB, 50, 120, False, False, 200),
        (1 * MIB, 50, 120, False, False, 2000),
        (1 * KIB, 5, 20, True, True, 100),
        (64 * KIB, 20, 40, True, True, 1000),
        (1 * MIB, 3, 10, True, True, 100),
        (10 * KIB, 10, 40, True, False, 100),
        (64 * KIB, 40, 80, True, False, 500),
        (1 * KIB, 2, 10, True, False, 100),
        (64 * KIB, 10, 30, False, True, 100),
    ), start=1)
)  # fmt: skip


@cases(*CUT)
def test_cut_mid_batch(case: Case, cck_target: Target, cck_settings: Settings, evidence: CaseEvidence) -> None:
    p = case.params

    async def scenario() -> None:
        async with (proxied_scenario(cck_target, evidence, case.id, durable=p["durable"], body=b"x" * p["body"],
                                     confirmation_window_size=p["window"]) as sc,
                    sc.judged(cck_target.url, evidence, cck_settings),
                    sc.connection):
            event = await send_through_a_cut(sc, evidence, cck_settings, cut_after=p["cut_after"], total=p["total"],
                                             blocking=p["blocking"])
            assert event.kind == "reattached", f"the session was not reattached: {event.kind} {event.detail}"
            sc.problems += _check_replay(sc, sc.proxy.wire_log, evidence)

    run(cck_settings, scenario())


def _check_replay(sc: Scenario, log: list[WireRecord], evidence: CaseEvidence) -> list[str]:
    """What the broker said it received against what reached it, and what the client replayed; returns the
    problems found (the history is judged before they are raised)."""
    responses = [r for r in log if isinstance(r.packet, ReattachSessionResponseMessage)]
    assert responses, "no REATTACH_SESSION_RESP on the wire"
    answer = responses[-1]
    assert isinstance(answer.packet, ReattachSessionResponseMessage)
    last = answer.packet.last_confirmed_command_id
    reached = confirmable_session_frames(log, direction="c2s", conn=1, channel=sc.channel)
    sent_before = confirmable_session_frames(log, direction="c2s", conn=1, channel=sc.channel,
                                             actions=("forwarded", "delayed", "duplicated", "cut", "dropped"))
    replayed = [r for r in confirmable_session_frames(log, direction="c2s", channel=sc.channel)
                if r.conn == answer.conn and r.seq > 0]
    evidence.note("broker_last_confirmed", last)
    evidence.note("commands_reaching_broker_before_cut", len(reached))
    evidence.note("broker_lag_commands", len(reached) - 1 - last)
    stray = sc.stray_answers()
    evidence.note("stray_answers", [repr(p) for p in stray])
    assert last <= len(reached) - 1, (
        f"the broker says it received command {last}, but only {len(reached)} confirmable commands "
        f"(0..{len(reached) - 1}) reached it before the cut")
    # The client replays its cache from command last+1: the first replayed frame is the one it numbered so.
    if last + 1 < len(sent_before) and replayed:
        first = replayed[0].packet
        expected = sent_before[last + 1].packet
        assert first == expected, f"the replay began with {first!r}, expected command {last + 1}: {expected!r}"
    seqs = [int(str(r.packet.message.properties.get("seq"))) for r in replayed
            if isinstance(r.packet, SessionSendMessage)]
    assert seqs == sorted(set(seqs)), f"sends on the new connection out of order or repeated: {seqs}"
    return [f"the broker answered {len(stray)} command(s) twice: {stray[:3]}"] if stray else []


# ---------------------------------------------------------------------------------------------------- within ttl

WITHIN_TTL = tuple(
    Case(f"reattach.within-ttl.{i}", "reattach.within-ttl",
         f"confirmed durable sends, then the link is down for {down_s} s (connection-ttl {ttl} ms, window 64 KiB), "
         "then more sends",
         "the client reattaches the same session (no recreate); every message arrives once, in order",
         params={"outage": down_s, "ttl": ttl})
    for i, (down_s, ttl) in enumerate(((0.0, 10_000), (0.5, 10_000), (1.5, 10_000), (3.0, 10_000)), start=1)
)


@cases(*WITHIN_TTL)
def test_reattach_within_ttl(case: Case, cck_target: Target, cck_settings: Settings, evidence: CaseEvidence) -> None:
    p = case.params
    deadline = cck_settings.deadline

    async def scenario() -> None:
        async with (proxied_scenario(cck_target, evidence, case.id, durable=True, confirmation_window_size=64 * KIB,
                                     connection_ttl_ms=p["ttl"], client_failure_check_period_ms=p["ttl"] // 4) as sc,
                    sc.judged(cck_target.url, evidence, cck_settings),
                    sc.connection):
            for _ in range(10):
                await sc.flow.send_blocking()
            await outage(sc.proxy, p["outage"])
            event = await wait_event(sc.connection, ("reattached", "recreated"), deadline(RESTORE_S))
            assert event.kind == "reattached", f"{event.kind}: {event.detail}"
            for _ in range(10):
                await sc.flow.send_blocking()
            answers = _reattach_response(sc.proxy.wire_log)
            evidence.note("reattach_responses", [repr(a) for a in answers])
            assert answers, "no REATTACH_SESSION_RESP on the wire"
            assert answers[-1].reattached
            assert not sc.stray_answers()

    run(cck_settings, scenario())


# ---------------------------------------------------------------------------------------------------- session gone

GONE = (
    Case("reattach.after-ttl.1", "reattach.session-gone",
         "confirmed durable sends with a 64 KiB window and connection-ttl 500 ms; the link is down longer than the "
         "ttl (broker ttl check every 200 ms); then more sends",
         "REATTACH_SESSION is answered reattached=false; the client recreates the session with CREATESESSION; "
         "messages confirmed before and sent after all arrive once",
         needs=(CONFIG,), params={"window": 64 * KIB, "ttl": 500, "consumer": False}),
    Case("reattach.after-ttl.2", "reattach.session-gone",
         "as reattach.after-ttl.1 with connection-ttl 1000 ms",
         "reattached=false, the session is recreated, nothing confirmed is lost",
         needs=(CONFIG,), params={"window": 64 * KIB, "ttl": 1000, "consumer": False}),
    Case("reattach.after-ttl.3", "reattach.session-gone",
         "a consumer session with a 10 KiB window and connection-ttl 500 ms; the link is down past the ttl; a "
         "producer on its own connection keeps sending",
         "reattach refused, the session and its consumer are recreated and keep receiving every message",
         needs=(CONFIG,), params={"window": 10 * KIB, "ttl": 500, "consumer": True}),
    Case("reattach.no-window.1", "reattach.no-window",
         "confirmed durable sends with confirmationWindowSize -1; the proxy resets the connection; more sends",
         "no reattachment: REATTACH_SESSION answered reattached=false, the session is recreated, nothing "
         "confirmed is lost", params={"window": -1, "ttl": 60_000, "consumer": False}),
    Case("reattach.no-window.2", "reattach.no-window",
         "a consumer session with window -1; the connection is reset while a producer elsewhere keeps sending",
         "the reattach is refused, the consumer is recreated and receives every message",
         params={"window": -1, "ttl": 60_000, "consumer": True}),
    Case("reattach.no-window.3", "reattach.no-window",
         "window -1 and connection-ttl 60 s: the link is down for 0.5 s, well within the ttl",
         "still no reattachment (the window, not the ttl, decides): reattached=false, recreate",
         params={"window": -1, "ttl": 60_000, "consumer": False, "outage": 0.5}),
)


def _gone_target(case: Case, cck_target: Target, make: MakeTarget) -> Target:
    if CONFIG in case.needs:
        cck_target.require(CONFIG, action="configure a short connection-ttl-check-interval")
        return make(Topology.single(NodeSpec(connection_ttl_check_interval_ms=TTL_CHECK_MS)))
    return cck_target


@cases(*GONE)
def test_session_gone_is_recreated(case: Case, cck_target: Target, cck_make_target: MakeTarget, cck_settings: Settings,
                                   evidence: CaseEvidence) -> None:
    p = case.params
    deadline = cck_settings.deadline
    target = _gone_target(case, cck_target, cck_make_target)
    ttl = p["ttl"]
    # past the ttl by three broker checks and a margin, or the case's own outage
    down_s = p.get("outage", (ttl + 3 * TTL_CHECK_MS) / 1000 + 0.5 if p["window"] != -1 else 0.0)

    async def scenario() -> None:
        failures: list[str] = []
        await warm_up(target)
        async with (proxied_scenario(target, evidence, case.id, durable=True, confirmation_window_size=p["window"],
                                     connection_ttl_ms=ttl, client_failure_check_period_ms=max(50, ttl // 4),
                                     block_on_acknowledge=True) as sc,
                    sc.judged(target.url, evidence, cck_settings),
                    sc.connection):
            sc.connection.add_failure_listener(lambda error: failures.append(str(error)))
            consumer = None
            async with AsyncExitStack() as stack:
                if p["consumer"]:
                    consumer = await sc.session.create_consumer(sc.queue)
                    sc.session.start()
                    sc.flow = await stack.enter_async_context(producer_elsewhere(target, sc.settings, sc))
                for _ in range(5):
                    await sc.flow.send_blocking()
                if consumer is not None:
                    await _receive(consumer, sc.history, 5, deadline(RESTORE_S))
                await outage(sc.proxy, down_s)
                event = await wait_event(sc.connection, ("reattached", "recreated"),
                                         deadline(RESTORE_S + down_s))
                evidence.note("events", [(e.kind, e.detail) for e in sc.connection.events])
                assert event.kind == "recreated", f"expected a recreate, got {event.kind}: {event.detail}"
                answers = _reattach_response(sc.proxy.wire_log)
                assert answers, "no REATTACH_SESSION_RESP on the wire"
                assert not answers[-1].reattached, f"REATTACH_SESSION_RESP: {answers}"
                created = [r for r in sc.proxy.wire_log
                           if isinstance(r.packet, CreateSessionMessage) and r.conn > 1]
                assert created, "no CREATESESSION on the new connection"
                assert failures, "the failure listener was not called"
                for _ in range(5):
                    await sc.flow.send_blocking()
                if consumer is not None:
                    await _receive(consumer, sc.history, 5, deadline(RESTORE_S))

    run(cck_settings, scenario())


async def _receive(consumer: Consumer, history: History, count: int, timeout: float) -> None:
    for _ in range(count):
        delivery = await consumer.receive(timeout)
        assert delivery is not None, "a message did not arrive"
        record_receipt(history, "consumer-1", delivery, producer="P1")
        await consumer.acknowledge(delivery)
        history.ack("consumer-1", key_of(delivery))


# ---------------------------------------------------------------------------------------------------- loss, then cut

LOSS = tuple(
    Case(f"reattach.loss.{i}", "reattach.replay" if what == "c2s" else "reattach.server-replay",
         {"c2s": f"{k} asynchronous {'durable' if durable else 'non-durable'} sends never reach the broker "
                 f"(every client frame dropped), then the connection is reset; window {window} bytes",
          "s2c": f"the broker's answers to {k} asynchronous non-durable sends are dropped, then the connection "
                 f"is reset; window {window} bytes (below protocol 130 the sends ask for an answer, as every "
                 "windowed send does from 130)",
          "deliveries": f"{k} deliveries to a consumer are dropped on the way, then the connection is reset; "
                        f"window {window} bytes"}[what],
         {"c2s": "the broker reports a last command before the lost ones; the client replays every lost send on "
                 "the new connection; each is answered once and stored once",
          "s2c": "the broker's first packets on the new connection's session channel are exactly the confirmable "
                 "packets the client never got (the lost answers), and nothing it had is re-sent; every send "
                 "completes once, nothing is stored twice",
          "deliveries": "the broker replays the lost deliveries first, and none the client had processed; the "
                        "consumer gets each message once, as a first delivery (delivery count 1), in order"}[what],
         checks="implementation" if what != "c2s" else "both",
         params={"what": what, "k": k, "durable": durable, "window": window})
    for i, (what, k, durable, window) in enumerate((
        ("c2s", 1, False, 64 * KIB),
        ("c2s", 5, False, 1 * KIB),
        ("c2s", 20, False, 64 * KIB),
        ("c2s", 5, True, 10 * KIB),
        ("s2c", 1, False, 64 * KIB),
        ("s2c", 5, False, 1 * KIB),
        ("s2c", 20, False, 64 * KIB),
        ("deliveries", 3, True, 64 * KIB),
        ("deliveries", 10, True, 1 * KIB),
    ), start=1)
)  # fmt: skip


def _counter(predicate: Callable[[WireRecord], bool], n: int) -> Callable[[WireRecord], bool]:
    """A wire-log predicate true at the n-th record matching ``predicate`` (each record is seen once)."""
    seen = 0

    def nth(record: WireRecord) -> bool:
        nonlocal seen
        if predicate(record):
            seen += 1
        return seen >= n

    return nth


@cases(*LOSS)
def test_loss_before_the_cut(case: Case, cck_target: Target, cck_settings: Settings, evidence: CaseEvidence) -> None:
    p = case.params
    deadline = cck_settings.deadline
    what, k = p["what"], p["k"]

    async def scenario() -> None:
        async with (proxied_scenario(cck_target, evidence, case.id, durable=p["durable"],
                                     confirmation_window_size=p["window"], block_on_acknowledge=True) as sc,
                    sc.judged(cck_target.url, evidence, cck_settings),
                    sc.connection,
                    AsyncExitStack() as stack):
            consumer = None
            if what == "deliveries":
                consumer = await sc.session.create_consumer(sc.queue)
                sc.session.start()
                sc.flow = await stack.enter_async_context(producer_elsewhere(cck_target, sc.settings, sc))
            for _ in range(3):  # some traffic both ways before the loss, all of it answered
                await sc.flow.send_blocking()
            await sc.flow.settled(deadline(SETTLE_S))
            if consumer is not None:
                await _receive(consumer, sc.history, 3, deadline(RESTORE_S))
            lost_type = {"c2s": "SESS_SEND", "s2c": "NULL_RESPONSE", "deliveries": "SESS_RECEIVE_MSG"}[what]
            drop = sc.proxy.add(Drop("c2s" if what == "c2s" else "s2c"))
            for _ in range(k):
                if what == "deliveries":
                    await sc.flow.send_blocking()
                else:
                    await sc.flow.send_async()
            await sc.proxy.wait_for_record(
                _counter(lambda r: r.action == "dropped" and r.type_name == lost_type, k), deadline(RESTORE_S))
            sc.proxy.remove(drop)
            assert sc.proxy.cut_all() >= 1
            event = await wait_event(sc.connection, ("reattached", "recreated"), deadline(RESTORE_S))
            assert event.kind == "reattached", f"{event.kind}: {event.detail}"
            await sc.flow.settled(deadline(SETTLE_S))
            if consumer is not None:
                await _receive(consumer, sc.history, k, deadline(RESTORE_S))
                assert all(op.delivery_count == 1 for op in sc.history if op.f == "receive"), \
                    "a replayed delivery came as a redelivery"
            log = list(sc.proxy.wire_log)
            sc.problems += (_check_c2s_replay if what == "c2s" else _check_s2c_replay)(sc, log, evidence)

    run(cck_settings, scenario())


def _check_c2s_replay(sc: Scenario, log: list[WireRecord], evidence: CaseEvidence) -> list[str]:
    dropped = confirmable_session_frames(log, direction="c2s", conn=1, channel=sc.channel, actions=("dropped",))
    reached = confirmable_session_frames(log, direction="c2s", conn=1, channel=sc.channel)
    answer = [r for r in log if isinstance(r.packet, ReattachSessionResponseMessage)][-1]
    assert isinstance(answer.packet, ReattachSessionResponseMessage)
    last = answer.packet.last_confirmed_command_id
    evidence.note("broker_last_confirmed", last)
    evidence.note("commands_reaching_broker", len(reached))
    assert last <= len(reached) - 1, f"the broker claims command {last}; only {len(reached)} reached it"
    replayed = send_keys(r for r in confirmable_session_frames(log, direction="c2s", channel=sc.channel)
                         if r.conn == answer.conn)
    missing = [key for key in send_keys(dropped) if key not in replayed]
    evidence.note("replayed_sends", replayed)
    problems = [f"lost sends not replayed: {missing}"] if missing else []
    if sc.stray_answers():
        problems.append(f"the broker answered command(s) twice: {sc.stray_answers()[:3]}")
    return problems


def _check_s2c_replay(sc: Scenario, log: list[WireRecord], evidence: CaseEvidence) -> list[str]:
    dropped = confirmable_session_frames(log, direction="s2c", conn=1, channel=sc.channel, actions=("dropped",))
    processed = confirmable_session_frames(log, direction="s2c", conn=1, channel=sc.channel)
    answer = [r for r in log if isinstance(r.packet, ReattachSessionResponseMessage)][-1]
    later = confirmable_session_frames(log, direction="s2c", conn=answer.conn, channel=sc.channel)
    evidence.note("dropped_s2c", [r.type_name for r in dropped])
    evidence.note("replayed_s2c_before_response", [r.type_name for r in later if r.seen_ns < answer.seen_ns])
    problems = server_replay_problems(processed, dropped, later)
    if sc.stray_answers():
        problems.append(f"answered twice: {sc.stray_answers()[:3]}")
    return problems


# ---------------------------------------------------------------------------------------------------- second failure

SECOND = tuple(
    Case(f"reattach.second-failure.{i}", "reattach.transparent",
         f"{'blocking durable' if blocking else 'asynchronous non-durable'} sends; the connection is reset after "
         f"{n} confirmable commands, and the next {resets} REATTACH_SESSION(s) are reset on the wire too",
         "the session survives the failed reattach attempts: a later attempt reattaches it and every message "
         "arrives once, in order",
         params={"n": n, "resets": resets, "blocking": blocking})
    for i, (n, resets, blocking) in enumerate(((5, 1, False), (5, 2, True), (20, 3, False)), start=1)
)


@cases(*SECOND)
def test_second_failure_during_reattach(case: Case, cck_target: Target, cck_settings: Settings,
                                        evidence: CaseEvidence) -> None:
    p = case.params
    deadline = cck_settings.deadline

    async def scenario() -> None:
        async with (proxied_scenario(cck_target, evidence, case.id, durable=p["blocking"],
                                     confirmation_window_size=10 * KIB) as sc,
                    sc.judged(cck_target.url, evidence, cck_settings),
                    sc.connection):
            sc.proxy.add(ResetDuringReattach(count=p["resets"]))
            sc.proxy.add(CutAfter(p["n"], channel=sc.channel))
            for _ in range(p["n"] + 10):
                await sc.flow.send(p["blocking"])
            event = await wait_event(sc.connection, ("reattached", "recreated"), deadline(RESTORE_S))
            await sc.flow.settled(deadline(SETTLE_S))
            evidence.note("events", [(e.kind, e.detail) for e in sc.connection.events])
            assert event.kind == "reattached", f"{event.kind}: {event.detail}"
            resets = [r for r in sc.proxy.wire_log if r.type_name == "REATTACH_SESSION" and r.action == "cut"]
            assert len(resets) == p["resets"], f"{len(resets)} reattach attempts were reset"
            sc.problems += _check_replay(sc, list(sc.proxy.wire_log), evidence)

    run(cck_settings, scenario())


# ---------------------------------------------------------------------------------------------------- transactions

TX = tuple(
    Case(f"reattach.tx.{i}", "reattach.transparent" if mode == "reattach" else "reattach.tx-recreate",
         f"a transacted session sends {m} {'durable' if durable else 'non-durable'} message(s); the connection is "
         + {"reattach": "reset (window 64 KiB, within ttl); then commit",
            "no-window": "reset with window -1 (the session is recreated); then commit",
            "ttl": "down past connection-ttl 500 ms (recreate); then commit"}[mode],
         "the transaction survives the reattach: commit succeeds and every message arrives once"
         if mode == "reattach" else
         "the transaction is lost with the session: commit raises a transaction-rolled-back error and none of "
         "its messages arrive; a new transaction on the same session commits",
         needs=(CONFIG,) if mode == "ttl" else (),
         params={"mode": mode, "m": m, "durable": durable})
    for i, (mode, m, durable) in enumerate((
        ("reattach", 1, False), ("reattach", 10, True),
        ("no-window", 1, False), ("no-window", 10, True), ("ttl", 5, True),
    ), start=1)
)  # fmt: skip


@cases(*TX)
def test_transaction_across_failover(case: Case, cck_target: Target, cck_make_target: MakeTarget,
                                     cck_settings: Settings, evidence: CaseEvidence) -> None:
    p = case.params
    deadline = cck_settings.deadline
    mode = p["mode"]
    target = _gone_target(case, cck_target, cck_make_target)
    window = -1 if mode == "no-window" else 64 * KIB
    ttl = 500 if mode == "ttl" else 60_000
    down_s = (ttl + 3 * TTL_CHECK_MS) / 1000 + 0.5 if mode == "ttl" else 0.0

    async def scenario() -> None:
        await warm_up(target)
        async with proxied_scenario(target, evidence, case.id, durable=p["durable"], transacted=True,
                                    confirmation_window_size=window, connection_ttl_ms=ttl,
                                    client_failure_check_period_ms=max(50, ttl // 4)) as sc:
            h = sc.history
            async with (sc.judged(target.url, evidence, cck_settings, sent=p["m"]),
                        sc.connection):
                keys = []
                for seq in range(p["m"]):
                    in_tx = sc.flow.message(seq)
                    keys.append(key_of(in_tx))
                    h.invoke_send("producer-1", keys[-1], producer="P1", seq=seq)
                    await sc.flow.producer.send(in_tx)
                await outage(sc.proxy, down_s)
                event = await wait_event(sc.connection, ("reattached", "recreated"), deadline(RESTORE_S + down_s))
                evidence.note("events", [(e.kind, e.detail) for e in sc.connection.events])
                if mode == "reattach":
                    assert event.kind == "reattached", f"{event.kind}: {event.detail}"
                    await sc.session.commit()
                    for seq, key in enumerate(keys):
                        h.ok("producer-1", "send", key, producer="P1", seq=seq)
                else:
                    assert event.kind == "recreated", f"{event.kind}: {event.detail}"
                    try:
                        await sc.session.commit()
                    except TransactionRolledBack as exc:
                        evidence.note("commit_error", str(exc))
                    else:
                        raise AssertionError("commit after the session was recreated succeeded")
                    for seq, key in enumerate(keys):
                        h.fail("producer-1", "send", key, producer="P1", seq=seq)
                    after = message(f"{case.id}-after", p["m"], body=b"after")
                    h.invoke_send("producer-1", f"{case.id}-after", producer="P1", seq=p["m"])
                    await sc.flow.producer.send(after)
                    await sc.session.commit()
                    h.ok("producer-1", "send", f"{case.id}-after", producer="P1", seq=p["m"])

    run(cck_settings, scenario())


# ---------------------------------------------------------------------------------------------------- consumers

CONSUME = tuple(
    Case(f"reattach.consumer.{i}", "reattach.transparent",
         f"a consumer (window {window} bytes, blocking acks) receives {first} of {total} messages; its connection "
         "is reset; a producer on another connection sends the rest",
         "the consumer's session is reattached and the consumer keeps receiving: every message once, in order, "
         "none redelivered",
         params={"window": window, "first": first, "total": total, "durable": durable})
    for i, (window, first, total, durable) in enumerate(((1 * KIB, 5, 20, True), (64 * KIB, 25, 50, False),
                                                          (1 * MIB, 10, 30, True)), start=1)
)


@cases(*CONSUME)
def test_consumer_keeps_receiving(case: Case, cck_target: Target, cck_settings: Settings,
                                  evidence: CaseEvidence) -> None:
    p = case.params
    deadline = cck_settings.deadline

    async def scenario() -> None:
        async with proxied_scenario(cck_target, evidence, case.id, durable=p["durable"],
                                    confirmation_window_size=p["window"], block_on_acknowledge=True) as sc:
            async with (sc.judged(cck_target.url, evidence, cck_settings),
                        sc.connection):
                consumer = await sc.session.create_consumer(sc.queue)
                sc.session.start()
                async with producer_elsewhere(cck_target, sc.settings, sc) as flow:
                    sc.flow = flow
                    for _ in range(p["first"]):
                        await flow.send_blocking()
                    await _receive(consumer, sc.history, p["first"], deadline(RESTORE_S))
                    assert sc.proxy.cut_all() >= 1
                    event = await wait_event(sc.connection, ("reattached", "recreated"), deadline(RESTORE_S))
                    assert event.kind == "reattached", f"{event.kind}: {event.detail}"
                    for _ in range(p["total"] - p["first"]):
                        await flow.send_blocking()
                    await _receive(consumer, sc.history, p["total"] - p["first"], deadline(RESTORE_S))
                assert not sc.stray_answers()
            assert all(op.delivery_count == 1 for op in sc.history if op.f == "receive"), "a message was redelivered"

    run(cck_settings, scenario())
