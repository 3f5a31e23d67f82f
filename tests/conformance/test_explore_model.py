"""The exploration's model and strategies: every example round-trips through JSON exactly, describes itself in
one line, maps onto the fault proxy's rules, and malformed input is refused with a message naming the field."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cck.conformance.explore import (
    ClientConfig,
    CutAfterCommands,
    CutAtFrame,
    CutSettled,
    DropFrames,
    DuplicateFrames,
    Example,
    ExampleError,
    FaultSchedule,
    Receive,
    Send,
    Workload,
    examples,
    rule_of,
)
from cck.conformance.faults import CutAfter, Drop, FrameView
from cck.conformance.faults._rules import judge, new_handle

FAST = settings(max_examples=60, deadline=None, database=None)


@FAST
@given(examples())
def test_an_example_round_trips_through_json(example: Example) -> None:
    again = Example.from_dict(json.loads(json.dumps(example.to_dict())))
    assert again == example
    assert again.to_dict() == example.to_dict()


@FAST
@given(examples(max_operations=5, max_faults=2))
def test_the_strategies_draw_valid_bounded_examples(example: Example) -> None:
    faults, operations = example.size
    assert 1 <= operations <= 5
    assert 1 <= faults <= 2
    assert all(f.at < operations for f in example.schedule.faults)
    for fault in example.schedule.faults:
        rule_of(fault)  # every fault is a rule the proxy can install
        if isinstance(fault, DuplicateFrames):  # never a counted frame: that would store a message twice
            assert fault.packet_type in ("PING", "PACKETS_CONFIRMED")
    line = example.describe()
    assert "\n" not in line
    assert " | " in line


def test_faults_become_the_proxys_rules() -> None:
    assert rule_of(CutAfterCommands(3, "s2c")) == CutAfter(3, direction="s2c")
    assert rule_of(DropFrames("s2c", "NULL_RESPONSE", 2)) == Drop("s2c", {"NULL_RESPONSE"}, count=2)
    assert rule_of(CutAtFrame(1, "s2c", "SESS_RECEIVE_MSG")) == CutAfter(1, direction="s2c",
                                                                          packet_types={"SESS_RECEIVE_MSG"})


def test_cut_at_frame_lets_n_frames_of_its_type_through_then_cuts_once() -> None:
    handle = new_handle(CutAfter(1, direction="s2c", packet_types={"PING"}), 0)
    ping = FrameView(1, "s2c", 0, "PING", False)
    other = FrameView(1, "s2c", 11, "SESS_RECEIVE_MSG", True)
    assert [judge([handle], v).action for v in (ping, other, other, ping, ping)] == [
        "forwarded", "forwarded", "forwarded", "cut", "forwarded"]


def test_a_drop_of_a_counted_frame_desynchronises_the_schedule() -> None:
    assert FaultSchedule((DropFrames("c2s", "SESS_SEND"),)).desynchronises
    assert not FaultSchedule((DropFrames("c2s", "PACKETS_CONFIRMED"), CutAfterCommands(2))).desynchronises


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["workload"]["operations"].append({"kind": "xa-start"}), "unknown operation"),
    (lambda d: d["workload"]["operations"][0].update(count=41), "'count' must be an integer in [1, 40]"),
    (lambda d: d["workload"]["config"].update(window=7), "'window' must be one of"),
    (lambda d: d["schedule"]["faults"].append({"kind": "drop", "direction": "c2s", "packet_type": "NOPE",
                                                "count": 1, "at": 0}), "packet type 'NOPE'"),
    (lambda d: d["schedule"]["faults"].append({"kind": "meteor"}), "unknown fault"),
    (lambda d: d.update(extra=1), "unknown field(s) ['extra']"),
    (lambda d: d["workload"].update(operations=[]), "1 to 12 operations"),
])
def test_malformed_examples_are_refused_naming_what_is_wrong(change: object, message: str) -> None:
    data = Example(Workload(ClientConfig(), (Send(0, 2), Receive(0))), FaultSchedule((CutAfterCommands(1),))).to_dict()
    assert callable(change)
    change(data)
    with pytest.raises(ExampleError) as caught:
        Example.from_dict(data)
    assert message in str(caught.value)


def test_a_receive_left_unacknowledged_round_trips_and_older_examples_read_as_acknowledged() -> None:
    data = {"config": {"window": -1, "connection_ttl_ms": 2000},
            "operations": [{"kind": "receive", "queue": 0, "count": 1, "tx": False}]}
    assert Workload.from_dict(data).operations == (Receive(0, 1),)  # written before ``ack`` existed
    unacked = Receive(0, 2, tx=True, ack=False)
    workload = Workload(ClientConfig(), (unacked,))
    assert Workload.from_dict(json.loads(json.dumps(workload.to_dict()))) == workload
    assert unacked.describe() == "receive(q0 x2 tx unacked)"
    cut = CutSettled(1, "c2s", "SESS_SEND", at=2)
    assert cut.describe() == "cut at c2s SESS_SEND #2, settled @op2"


def test_a_transacted_receive_before_any_send_to_its_queue_has_messages_preloaded() -> None:
    from cck.conformance.explore import Send
    from cck.conformance.explore._model import Rollback, Xa

    def preloaded(*operations: object) -> dict[int, int]:
        return Workload(ClientConfig(), operations).preloaded  # type: ignore[arg-type]

    assert preloaded(Receive(1, 2, tx=True), Rollback(), Receive(1, 3, tx=True)) == {1: 2}  # the first one's count
    assert preloaded(Send(0, 1), Receive(0, 2, tx=True)) == {}  # a send came first
    assert preloaded(Xa("send", 0, 2, 1), Receive(2, 1, tx=True), Receive(0, 3, tx=True, ack=False)) == {0: 3}
    assert preloaded(Receive(0, 2), Receive(1, 1, tx=True), Send(1, 1)) == {1: 1}  # plain receives get none


def _shaped_by_settled_cuts(data: st.DataObject) -> Example:
    from cck.conformance.explore._strategies import fault_schedules, settled_cuts, workloads

    workload = data.draw(workloads(max_operations=5))
    base = Example(workload, data.draw(fault_schedules(2, max_at=len(workload.operations) - 1)))
    return data.draw(settled_cuts(base))


@FAST
@given(st.data())
def test_the_settled_cut_shape_comes_last_without_a_window(data: st.DataObject) -> None:
    # the shape rule 3 judges: a delivery left unacknowledged, then the cut at the next send, settled (judged on the
    # shape itself: the free mix may draw the same cut after a workload of another form)
    example = _shaped_by_settled_cuts(data)
    settled = [f for f in example.schedule.faults if isinstance(f, CutSettled)]
    assert settled[-1] == CutSettled(0, "c2s", "SESS_SEND", len(example.workload.operations) - 1)
    *_, send, receive, last = example.workload.operations
    assert example.workload.config.window == -1
    assert isinstance(receive, Receive)
    assert not receive.ack
    assert isinstance(send, Send)
    assert isinstance(last, Send)
    assert example.schedule.refuse_initial == 0
