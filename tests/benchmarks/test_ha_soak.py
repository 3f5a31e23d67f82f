"""benchmarks/ha_soak.py: the schedule drawn from a seed, the final judgement and the arguments (no broker is
started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.ha_soak import BACKUP, PRIMARY, Kill, _arguments, judge, schedule
from cck.conformance.oracles import ACK, History, HistoryResult, OpType, check


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    assert schedule(200, 7) == schedule(200, 7)
    assert schedule(200, 7) != schedule(200, 8)


def test_a_shorter_schedule_is_a_prefix_of_a_longer_one_up_to_its_last_pair() -> None:
    # the last kill of an odd count is a primary kill the pair comes back from: only its pair may differ
    assert schedule(10, 3) == schedule(200, 3)[:10]
    assert schedule(9, 3)[:8] == schedule(200, 3)[:8]


@pytest.mark.parametrize("kills", [1, 2, 9, 200])
def test_kills_alternate_between_the_primary_and_the_backup(kills: int) -> None:
    steps = schedule(kills, 11)
    assert [s.index for s in steps] == list(range(1, kills + 1))
    assert [s.node for s in steps] == [PRIMARY if i % 2 else BACKUP for i in range(1, kills + 1)]
    assert all(s.state == "serving" for s in steps if s.node == PRIMARY)


def test_a_backup_killed_while_serving_follows_a_primary_kill_that_left_it_alone() -> None:
    steps = schedule(400, 5, both_down=0.5)
    pairs = list(zip(steps[::2], steps[1::2], strict=True))
    serving = [(p, b) for p, b in pairs if b.state == "serving"]
    waiting = [(p, b) for p, b in pairs if b.state == "waiting"]
    assert serving
    assert waiting
    assert all(p.alone_s is None for p, _ in serving)
    assert all(p.alone_s is not None for p, _ in waiting)


@pytest.mark.parametrize(("both_down", "state"), [(0.0, "waiting"), (1.0, "serving")])
def test_the_both_down_probability_at_its_ends(both_down: float, state: str) -> None:
    steps = schedule(20, 1, both_down=both_down)
    assert {s.state for s in steps if s.node == BACKUP} == {state}


def test_the_last_kill_of_an_odd_count_hits_the_primary_and_the_pair_comes_back() -> None:
    last = schedule(7, 2, both_down=1.0)[-1]
    assert last == Kill(7, PRIMARY, "serving", last.pause_s, last.alone_s)
    assert last.alone_s is not None


def test_pauses_stay_within_their_bounds() -> None:
    steps = schedule(200, 4, pause_s=(0.2, 0.3), alone_s=(1.0, 2.0))
    assert all(0.2 <= s.pause_s <= 0.3 for s in steps if s.state == "waiting" or s.node == PRIMARY)
    assert all(1.0 <= s.alone_s <= 2.0 for s in steps if s.alone_s is not None)
    # a serving backup's pause is the time it serves alone
    assert all(1.0 <= s.pause_s <= 2.0 for s in steps if s.node == BACKUP and s.state == "serving")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kills": 0}, "kills must be >= 1"),
    ({"both_down": 1.5}, "probability"),
    ({"pause_s": (2.0, 1.0)}, "pause_s must be"),
    ({"alone_s": (-1.0, 1.0)}, "alone_s must be"),
])
def test_a_bad_schedule_is_refused(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"kills": 10, "seed": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        schedule(**arguments)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------- judgement

def _sent(history: History, key: str, outcome: OpType = "ok") -> None:
    history.invoke_send("producer1", key, producer="producer1", seq=int(key.rpartition(":")[2]))
    history.op("producer1", outcome, "send", key, producer="producer1", seq=int(key.rpartition(":")[2]))


def _taken(history: History, consumer: str, key: str, count: int = 1, ack: OpType = "ok") -> None:
    history.received(consumer, key, delivery_count=count, redelivered=count > 1)
    history.invoke_ack(consumer, key)
    history.op(consumer, ack, ACK, key)


def _judged(history: History, ids: dict[str, set[int]], *, left: int = 0, stalls: int = 0,
            aborted: str | None = None) -> tuple[HistoryResult, dict[str, int], bool]:
    result = check(history, final_drain_complete=True, allow_duplicates=True)
    acks: dict[str, int] = {}
    for op in history:
        if op.f == ACK and op.type == "ok" and op.value is not None:
            acks[op.value] = acks.get(op.value, 0) + 1
    verdict = judge(result, ids, acks, left=left, stalls=stalls, aborted=aborted)
    return result, {k: v for k, v in verdict.anomalies.items() if v}, verdict.ok


def test_every_confirmed_send_taken_once_is_ok() -> None:
    history = History()
    for n in (1, 2):
        _sent(history, f"producer1:{n}")
        _taken(history, "consumer1", f"producer1:{n}")
    assert _judged(history, {"producer1:1": {10}, "producer1:2": {11}})[1:] == ({}, True)


def test_a_redelivery_after_an_ack_in_doubt_is_allowed_even_with_count_one() -> None:
    history = History()
    _sent(history, "producer1:1", "info")  # in doubt, sent again with the same duplicate ID
    _sent(history, "producer1:1")
    _taken(history, "consumer1", "producer1:1", ack="info")
    _taken(history, "consumer2", "producer1:1", count=1)  # a killed server kept no delivery count
    _, anomalies, ok = _judged(history, {"producer1:1": {10}})
    assert (anomalies, ok) == ({}, True)


def test_a_confirmed_send_never_received_is_lost() -> None:
    history = History()
    _sent(history, "producer1:1")
    _, anomalies, ok = _judged(history, {})
    assert (anomalies, ok) == ({"lost": 1}, False)


def test_a_key_under_two_message_ids_is_stored_twice() -> None:
    history = History()
    _sent(history, "producer1:1")
    _taken(history, "consumer1", "producer1:1", ack="info")
    _taken(history, "consumer2", "producer1:1")
    _, anomalies, _ = _judged(history, {"producer1:1": {10, 12}})
    assert anomalies == {"stored_twice": 1}


def test_a_key_acknowledged_twice_is_stored_twice_and_a_delivery_after_a_confirmed_ack_is_an_ack_lost() -> None:
    history = History()
    _sent(history, "producer1:1")
    _taken(history, "consumer1", "producer1:1")
    _taken(history, "consumer2", "producer1:1", count=2)
    _, anomalies, _ = _judged(history, {"producer1:1": {10}})
    assert anomalies == {"stored_twice": 1, "ack_lost": 1}


def test_left_messages_stalls_and_an_abort_fail_the_soak() -> None:
    _, anomalies, ok = _judged(History(), {}, left=2, stalls=1, aborted="kill 3: backup did not serve")
    assert (anomalies, ok) == ({"left_in_queue": 2, "stalls": 1, "aborted": 1}, False)


# ---------------------------------------------------------------------------------------------------- arguments

@pytest.mark.parametrize(("argv", "message"), [
    (["--target", "reference", "--kills", "0"], "--kills must be at least 1"),
    (["--target", "reference", "--consumers", "0"], "--consumers must be at least 1"),
    (["--target", "reference", "--artemis-version", "2.44.0"], "goes with --target artemis"),
    (["--target", "artemis", "--artemis-version", "1.0.0"], "is not pinned"),
    (["--target", "reference", "--both-down", "2"], "probability"),
    (["--target", "reference", "--pause", "3", "1"], "pause_s must be"),
    (["--target", "nowhere"], "invalid choice"),
])
def test_bad_arguments_are_named(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _arguments(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_workdir_with_something_in_it_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "leftover").write_text("x")
    with pytest.raises(SystemExit):
        _arguments(["--target", "reference", "--workdir", str(tmp_path)])
    assert "must be a new or empty directory" in capsys.readouterr().err


def test_good_arguments_give_the_seeded_schedule() -> None:
    args, steps = _arguments(["--target", "reference", "--kills", "12", "--seed", "9"])
    assert (args.producers, args.consumers, len(steps)) == (3, 3, 12)
    assert steps == schedule(12, 9)
