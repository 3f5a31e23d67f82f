"""The exploration's wire rules (conformance/explore/_wire.py) on small hand-made wire logs: each rule flags what
breaks it, stays quiet on what conforms, and judges nothing where the proxy's faults leave its premise unknown."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings

from cck.codec import (
    CreateSessionMessage,
    Packet,
    PacketsConfirmedMessage,
    ReattachSessionMessage,
    ReattachSessionResponseMessage,
)
from cck.conformance.explore._judge import judge
from cck.conformance.explore._model import (
    ClientConfig,
    CreateExistingQueue,
    ExampleError,
    Idle,
    Operation,
    Workload,
)
from cck.conformance.explore._strategies import operations
from cck.conformance.explore._wire import CHECK_S, FLUSH_SLACK_S, WireJudgement, judge_wire, with_wire
from cck.conformance.faults import HALF_OPEN, WireRecord
from cck.conformance.oracles import History

S = 1_000_000_000
CH = 10  # the session channel


@dataclass
class Wire:
    """Builds a wire log: frames get positions per connection and direction in the order added."""

    records: list[WireRecord] = field(default_factory=list)
    seqs: dict[tuple[int, str], int] = field(default_factory=dict)

    def add(self, direction: str, type_name: str, *, t: float, size: int = 40, conn: int = 1, channel: int = CH,
            confirmable: bool = False, action: str = "forwarded", packet: Packet | None = None) -> WireRecord:
        seq = self.seqs.get((conn, direction), 0) + 1
        self.seqs[(conn, direction)] = seq
        ts = int(t * S)
        record = WireRecord(ts, ts, conn, direction, seq, channel, type_name, size, confirmable, action,  # type: ignore[arg-type]
                            packet)
        self.records.append(record)
        return record

    def command(self, type_name: str = "SESS_SEND", *, t: float, size: int = 40, conn: int = 1,
                action: str = "forwarded") -> WireRecord:
        return self.add("c2s", type_name, t=t, size=size, conn=conn, confirmable=True, action=action)

    def confirm(self, index: int, *, t: float, direction: str = "s2c", conn: int = 1) -> WireRecord:
        return self.add(direction, "PACKETS_CONFIRMED", t=t, size=11, conn=conn,
                        packet=PacketsConfirmedMessage(index))

    def judge(self, window: int = 100, *, refusals_counted: bool = False) -> WireJudgement:
        return judge_wire(self.records, window=window, refusals_counted=refusals_counted)


def _finding(judgement: WireJudgement, text: str) -> bool:
    return any(text in f for f in judgement.findings)


# ---------------------------------------------------------------------------------------------------- bytes


def test_confirmation_at_the_command_that_fills_the_window_is_clean() -> None:
    wire = Wire()
    for i in range(4):
        wire.command(t=i * 0.01, size=52)
    wire.confirm(1, t=0.05)  # 52 + 52 = 104 >= 100: due at command 1
    wire.confirm(3, t=0.06)
    assert wire.judge().findings == ()


def test_confirmation_counted_without_length_prefixes_is_late() -> None:
    # 48 + 48 = 96 < 100 without the 4-byte prefixes: such a broker confirms command 2, one too late
    wire = Wire()
    for i in range(3):
        wire.command(t=i * 0.01, size=52)
    wire.confirm(2, t=0.05)
    judgement = wire.judge()
    assert _finding(judgement, "window.confirm-bytes"), judgement
    assert _finding(judgement, "at command 1")


def test_a_flush_of_a_partial_window_is_not_late() -> None:
    wire = Wire()
    for i in range(3):
        wire.command(t=i * 0.01, size=20)
    wire.confirm(0, t=0.05)  # early: a flush (ttl check, close) is allowed
    wire.confirm(2, t=0.06)
    assert wire.judge().findings == ()


def test_bytes_rule_only_on_connection_1() -> None:
    wire = Wire()
    wire.add("c2s", "CREATESESSION", t=0, channel=1, packet=CreateSessionMessage("s", CH, 130, None, None))
    wire.command(t=0.1, size=52, conn=2)
    wire.command(t=0.2, size=52, conn=2)
    wire.command(t=0.3, size=52, conn=2)
    wire.add("c2s", "CREATESESSION", t=0, channel=1, conn=2, packet=CreateSessionMessage("s", CH, 130, None, None))
    wire.confirm(2, t=0.4, conn=2)
    assert not _finding(wire.judge(), "window.confirm-bytes")


# ---------------------------------------------------------------------------------------------------- ttl check


def test_command_unconfirmed_past_the_check_interval_while_the_broker_writes() -> None:
    wire = Wire()
    wire.command(t=0)
    wire.add("s2c", "PING", t=CHECK_S + FLUSH_SLACK_S + 1, channel=0)
    judgement = wire.judge()
    assert _finding(judgement, "window.flush: command 0"), judgement


def test_command_flushed_by_the_check_is_clean() -> None:
    wire = Wire()
    wire.command(t=0)
    wire.confirm(0, t=CHECK_S + 0.1)
    wire.add("s2c", "PING", t=CHECK_S + FLUSH_SLACK_S + 1, channel=0)
    assert wire.judge().findings == ()


def test_missing_flush_not_judged_when_the_connection_ends_early() -> None:
    wire = Wire()
    wire.command(t=0)
    wire.add("s2c", "PING", t=CHECK_S + FLUSH_SLACK_S - 0.5, channel=0)
    assert wire.judge().findings == ()


def test_what_the_broker_wrote_after_a_half_open_cut_is_not_taken_for_the_session_still_being_there() -> None:
    wire = Wire()
    wire.command(t=0)
    late = wire.add("s2c", "PING", t=CHECK_S + FLUSH_SLACK_S + 1, channel=0, action="dropped")
    wire.records[-1] = dataclasses.replace(late, rule=f"{HALF_OPEN} cut by CutAfter(...)")
    assert wire.judge().findings == ()  # the session may have moved to the client's new connection by then
    wire.records[-1] = dataclasses.replace(late, rule="blackhole")  # any other dropped write still counts
    assert _finding(wire.judge(), "window.flush: command 0")


def test_a_dropped_command_is_not_counted() -> None:
    wire = Wire()
    wire.command(t=0, action="dropped")  # never reached the broker: owed nothing, numbers nothing
    wire.command(t=0.1)
    wire.confirm(0, t=1.0)
    wire.add("s2c", "PING", t=CHECK_S + FLUSH_SLACK_S + 1, channel=0)
    assert wire.judge().findings == ()


# ---------------------------------------------------------------------------------------------------- close


def _close(confirm_first: bool, after: str = "forwarded") -> Wire:
    wire = Wire()
    wire.command(t=0)
    wire.command("SESS_CLOSE", t=0.1)
    if confirm_first:
        wire.confirm(1, t=0.15)
    wire.add("s2c", "NULL_RESPONSE", t=0.2)
    if not confirm_first:
        wire.confirm(1, t=0.25)
    wire.add("c2s", "PING", t=0.3, channel=0, action=after)
    return wire


def test_close_answered_after_its_confirmation_is_clean() -> None:
    assert _close(confirm_first=True).judge().findings == ()


def test_close_answered_before_its_confirmation() -> None:
    judgement = _close(confirm_first=False).judge()
    assert _finding(judgement, "SESS_CLOSE (command 1"), judgement


def test_close_not_judged_after_a_fault() -> None:
    assert _close(confirm_first=False, after="cut").judge().findings == ()


def test_close_after_a_reattach_is_numbered_from_the_broker_s_last_command() -> None:
    wire = Wire()
    wire.add("c2s", "CREATESESSION", t=0, channel=1, packet=CreateSessionMessage("s", CH, 130, None, None))
    wire.command(t=0.1)
    wire.add("c2s", "REATTACH_SESSION", t=1.0, channel=1, conn=2, packet=ReattachSessionMessage("s", -1))
    wire.add("s2c", "REATTACH_SESSION_RESP", t=1.1, channel=1, conn=2,
             packet=ReattachSessionResponseMessage(4, True))
    wire.command("SESS_CLOSE", t=1.2, conn=2)  # the broker's command 5
    wire.confirm(4, t=1.25, conn=2)
    wire.add("s2c", "NULL_RESPONSE", t=1.3, conn=2)
    judgement = wire.judge()
    assert _finding(judgement, "SESS_CLOSE (command 5"), judgement
    wire.records.insert(-1, WireRecord(int(1.26 * S), int(1.26 * S), 2, "s2c", 2, CH, "PACKETS_CONFIRMED", 11, False,
                                       "forwarded", PacketsConfirmedMessage(5)))
    assert wire.judge().findings == ()


def _rollback_then_close(rollback_answered_first: bool) -> Wire:
    """A rollback, then the close, with one NULL_RESPONSE after the close and no confirmation: the answer is the
    rollback's when the rollback was still waiting (as after a reattach that replays it right before the close)."""
    wire = Wire()
    wire.command(t=0)
    wire.command("SESS_ROLLBACK", t=0.1)
    if rollback_answered_first:
        wire.add("s2c", "NULL_RESPONSE", t=0.15)
    wire.command("SESS_CLOSE", t=0.2)
    wire.add("s2c", "NULL_RESPONSE", t=0.25)
    wire.add("c2s", "PING", t=0.3, channel=0)
    return wire


def test_a_close_whose_answer_may_be_an_earlier_request_s_is_not_judged() -> None:
    assert _rollback_then_close(rollback_answered_first=False).judge().findings == ()
    judgement = _rollback_then_close(rollback_answered_first=True).judge()
    assert _finding(judgement, "SESS_CLOSE (command 2"), judgement


def test_unknown_numbering_and_refusals_are_noted_not_judged() -> None:
    wire = Wire()
    wire.command("SESS_CLOSE", t=0.1, conn=2)  # neither created nor reattached on connection 2
    wire.add("s2c", "NULL_RESPONSE", t=0.2, conn=2)
    wire.command(t=0)
    wire.add("s2c", "EXCEPTION", t=0.1)
    wire.add("s2c", "PING", t=CHECK_S + FLUSH_SLACK_S + 1, channel=0)
    judgement = wire.judge()
    assert judgement.findings == ()
    assert any("connection 2 not judged" in n for n in judgement.notes)
    assert any("EXCEPTION" in n for n in judgement.notes)


# ---------------------------------------------------------------------------------------------------- client PING


def _delivery_then_ping(ping_at: float, confirm: str | None) -> Wire:
    wire = Wire()
    wire.add("s2c", "SESS_RECEIVE_MSG", t=0, confirmable=True)
    if confirm == "before":
        wire.confirm(0, t=ping_at - 0.001, direction="c2s")
    wire.add("c2s", "PING", t=ping_at, channel=0)
    if confirm == "after":
        wire.confirm(0, t=ping_at + 0.001, direction="c2s")
    return wire


def test_ping_without_the_client_s_flush() -> None:
    judgement = _delivery_then_ping(2.0, None).judge()
    assert _finding(judgement, "the client's PING"), judgement


def test_ping_with_the_flush_next_to_it_is_clean() -> None:
    assert _delivery_then_ping(2.0, "before").judge().findings == ()
    assert _delivery_then_ping(2.0, "after").judge().findings == ()


def test_ping_too_soon_after_the_delivery_is_not_judged() -> None:
    assert _delivery_then_ping(0.1, None).judge().findings == ()


def test_ping_after_the_session_closed_is_not_judged() -> None:
    wire = Wire()
    wire.add("s2c", "SESS_RECEIVE_MSG", t=0, confirmable=True)
    wire.command("SESS_CLOSE", t=0.1)
    wire.add("c2s", "PING", t=2.0, channel=0)
    assert not _finding(wire.judge(), "the client's PING")


# ---------------------------------------------------------------------------------------------------- the judge


def test_no_window_judges_nothing() -> None:
    assert _delivery_then_ping(2.0, None).judge(window=-1) == WireJudgement()


def test_wire_findings_make_the_run_a_finding() -> None:
    clean = judge(History(), drain_complete=True, desynchronised=False)
    assert clean.kind == "clean"
    merged = with_wire(clean, WireJudgement(("window.flush: x",), ("a note",)))
    assert merged.kind == "finding"
    assert merged.findings == ("window.flush: x",)
    assert merged.notes[-1] == "a note"
    assert with_wire(clean, WireJudgement()).kind == "clean"


# ---------------------------------------------------------------------------------------------------- refusals


def _with_refusal(confirms: tuple[int, ...]) -> Wire:
    """Sends of 52-byte frames around a refused CREATE_QUEUE (window 100): the broker's numbering without it is
    a0=0, a2=1, a3=2, a4=3, a5=4; with it (a broker that counts it) everything after it is one higher."""
    wire = Wire()
    wire.command(t=0.0, size=52)
    wire.command("CREATE_QUEUE_V2", t=0.1, size=52)
    wire.add("s2c", "EXCEPTION", t=0.15)
    for i in range(4):
        wire.command(t=0.2 + i * 0.01, size=52)
    for n, index in enumerate(confirms):
        wire.confirm(index, t=0.5 + n * 0.01)
    return wire


def test_a_refused_command_is_left_out_of_the_count() -> None:
    assert _with_refusal((1, 3)).judge().findings == ()


def test_a_refused_command_counted_shows_as_a_confirmation_of_a_command_never_sent() -> None:
    judgement = _with_refusal((1, 3, 5)).judge()
    assert _finding(judgement, "window.exception-not-counted"), judgement
    # before protocol 130 a broker counts it: then that is the numbering expected
    assert _with_refusal((1, 3, 5)).judge(refusals_counted=True).findings == ()


def _refused_then_replayed(close_confirmed: int) -> Wire:
    """A CREATE_QUEUE refused and another cut on connection 1; on connection 2 the client replays both back to back
    after the reattach (the broker counted neither), both refused, then a send and the close."""
    wire = Wire()
    wire.add("c2s", "CREATESESSION", t=0, channel=1, packet=CreateSessionMessage("s", CH, 130, None, None))
    wire.command(t=0.0)  # the broker's command 0
    wire.command("CREATE_QUEUE_V2", t=0.1)
    wire.add("s2c", "EXCEPTION", t=0.15)
    wire.command("CREATE_QUEUE_V2", t=0.2, action="cut")
    wire.add("c2s", "REATTACH_SESSION", t=1.0, channel=1, conn=2, packet=ReattachSessionMessage("s", -1))
    wire.add("s2c", "REATTACH_SESSION_RESP", t=1.1, channel=1, conn=2, packet=ReattachSessionResponseMessage(0, True))
    wire.command("CREATE_QUEUE_V2", t=1.2, conn=2)
    wire.command("CREATE_QUEUE_V2", t=1.21, conn=2)
    wire.add("s2c", "EXCEPTION", t=1.25, conn=2)
    wire.add("s2c", "EXCEPTION", t=1.26, conn=2)
    wire.command(t=1.3, conn=2)  # the broker's command 1
    wire.command("SESS_CLOSE", t=1.4, conn=2)  # and 2
    wire.confirm(close_confirmed, t=1.45, conn=2)
    wire.add("s2c", "NULL_RESPONSE", t=1.5, conn=2)
    return wire


def test_refused_commands_replayed_back_to_back_are_each_left_out_of_the_count() -> None:
    # each EXCEPTION answers the oldest CREATE_QUEUE not yet answered: taking the last command before it for both
    # would leave one replayed refusal in the count and expect the close to be command 3
    assert _refused_then_replayed(2).judge().findings == ()
    judgement = _refused_then_replayed(1).judge()
    assert _finding(judgement, "SESS_CLOSE (command 2"), judgement


def test_an_exception_not_known_to_answer_a_create_queue_skips_the_channel() -> None:
    wire = Wire()
    wire.command(t=0.0, size=52)
    wire.add("s2c", "EXCEPTION", t=0.05)
    wire.command(t=0.1, size=52)
    wire.confirm(5, t=0.2)
    judgement = wire.judge()
    assert judgement.findings == ()
    assert any("EXCEPTION" in n for n in judgement.notes)


# ---------------------------------------------------------------------------------------------------- window 0


def _reattach(reattached: bool) -> Wire:
    wire = Wire()
    wire.add("c2s", "CREATESESSION", t=0, channel=1, packet=CreateSessionMessage("s", CH, 130, None, None))
    wire.add("c2s", "REATTACH_SESSION", t=1.0, channel=1, conn=2, packet=ReattachSessionMessage("s", -1))
    wire.add("s2c", "REATTACH_SESSION_RESP", t=1.1, channel=1, conn=2,
             packet=ReattachSessionResponseMessage(-1, reattached))
    return wire


def test_a_window_zero_session_reattached() -> None:
    judgement = _reattach(True).judge(window=0)
    assert _finding(judgement, "window.zero"), judgement
    assert _finding(judgement, "window.mode.6")


def test_a_window_zero_session_refused_or_a_positive_window_reattached_is_clean() -> None:
    assert _reattach(False).judge(window=0).findings == ()
    assert _reattach(True).judge(window=1024).findings == ()


def test_a_window_zero_session_reattached_after_a_half_open_cut_is_only_noted() -> None:
    wire = _reattach(True)
    cut = wire.add("c2s", "SESS_SEND", t=0.5, confirmable=True, action="cut")  # conn 1's, the broker's side left open
    wire.records[-1] = dataclasses.replace(cut, rule=f"{HALF_OPEN} CutAfter(...)")
    judgement = wire.judge(window=0)
    assert judgement.findings == ()
    assert any("window.zero" in note and "half-open" in note for note in judgement.notes)
    assert _finding(wire.judge(window=-1), "reattach.no-window")  # window -1 is never reattached


def test_a_session_without_a_window_reattached_is_found_and_refused_is_clean() -> None:
    judgement = _reattach(True).judge(window=-1)
    assert _finding(judgement, "reattach.no-window"), judgement
    assert not _finding(judgement, "window.zero")
    assert _reattach(False).judge(window=-1).findings == ()


# ---------------------------------------------------------------------------------------------------- the workload


def test_the_refused_and_idle_operations_and_window_0_round_trip() -> None:
    workload = Workload(ClientConfig(window=0, connection_ttl_ms=2_000), (CreateExistingQueue(2), Idle()))
    assert Workload.from_dict(workload.to_dict()) == workload
    assert workload.describe() == "window=0 ttl=2000ms: create-existing-queue(q2), idle(4s)"
    with pytest.raises(ExampleError):
        CreateExistingQueue(3)
    with pytest.raises(ExampleError):
        Workload.from_dict({**workload.to_dict(), "operations": [{"kind": "idle", "queue": 0}]})


def test_the_strategies_draw_the_refused_and_idle_operations() -> None:
    kinds: set[str] = set()

    @settings(max_examples=300, database=None, derandomize=True)
    @given(operations())
    def draw(op: Operation) -> None:
        kinds.add(op.kind)

    draw()
    assert {"create-existing-queue", "idle"} <= kinds


def test_the_window_after_a_flush_is_not_judged() -> None:
    def wire(*confirms: int) -> Wire:
        built = Wire()
        for i in range(6):
            built.command(t=i * 0.01, size=52)
        for n, index in enumerate(confirms):
            built.confirm(index, t=0.1 + n * 0.01)
        return built

    # a flush (0) may have raced the count of command 1: the window after it (late at 3) is not judged
    assert wire(0, 3).judge().findings == ()
    # ... but the window after a full one is: 3 and 4 reached 100 at 4, not 5
    assert wire(0, 2, 4).judge().findings == ()
    assert _finding(wire(0, 2, 5).judge(), "at command 4")
