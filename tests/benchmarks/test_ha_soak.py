"""benchmarks/ha_soak.py: the schedule drawn from a seed, the order of a soak's kills, starts and waits under each
policy (on stand-in nodes), the final judgement and the arguments (no broker is started)."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any, cast

import pytest

from benchmarks.ha_soak import (
    BACKUP,
    CLIENT,
    PRIMARY,
    TIMINGS,
    Kill,
    Soak,
    StepRecord,
    Traffic,
    _arguments,
    _Client,
    anomaly_ops,
    judge,
    schedule,
)
from cck.codec import CoreMessage, TypedProperties
from cck.conformance.oracles import ACK, History, HistoryResult, OpType, check
from cck.conformance.suite._ha_kit import Policy
from cck.conformance.targets import ManagedTarget
from cck.reference.client import Delivery, DeliveryFromLostSession


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    assert schedule(200, 7) == schedule(200, 7)
    assert schedule(200, 7) != schedule(200, 8)


def test_a_shorter_schedule_is_a_prefix_of_a_longer_one_up_to_its_last_pair() -> None:
    # the last kill of an odd count is a primary kill the pair comes back from: only its pair may differ
    assert schedule(10, 3) == schedule(200, 3)[:10]
    assert schedule(9, 3)[:8] == schedule(200, 3)[:8]


def test_the_shared_store_schedule_of_seed_1_is_the_one_the_published_figures_ran() -> None:
    # docs/benchmarks.md: 100 kills of the serving primary, 68 of the waiting backup, 32 of the backup serving alone
    steps = schedule(200, 1)
    assert Counter(s.label for s in steps) == {"primary (serving)": 100, "backup (waiting)": 68,
                                               "backup (serving)": 32}
    assert steps[:2] == (Kill(1, PRIMARY, "serving", 0.634, 1.347), Kill(2, BACKUP, "waiting", 1.264))
    assert schedule(200, 1, policy="shared-store") == steps
    # both servers are down after exactly the kills of a backup serving alone
    assert [s.index for s in steps if s.both_down] == [s.index for s in steps if s.label == "backup (serving)"]


@pytest.mark.parametrize("policy", ["shared-store", "replication"])
@pytest.mark.parametrize("kills", [1, 2, 9, 200])
def test_kills_alternate_between_the_primary_and_the_backup(kills: int, policy: Policy) -> None:
    steps = schedule(kills, 11, policy=policy)
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


def test_replication_never_kills_a_backup_serving_alone_and_kills_the_primary_with_its_backup_up_or_down() -> None:
    steps = schedule(400, 5, policy="replication", both_down=0.5)
    assert {s.state for s in steps if s.node == BACKUP} == {"waiting"}
    for before, primary in zip(steps[1::2], steps[2::2], strict=False):
        # a backup kill that leaves it down (no time alone before its start) is followed by a kill of the primary
        # serving alone, both servers down then, started again at once
        assert primary.both_down == (before.alone_s is None)
        assert (primary.alone_s is None) == primary.both_down
    assert any(s.both_down for s in steps)
    assert not steps[0].both_down
    assert all(s.alone_s is not None for s in steps if s.node == PRIMARY and not s.both_down)


@pytest.mark.parametrize("kills", [2, 3, 10, 11])
def test_a_replication_schedule_does_not_end_with_a_server_left_alone(kills: int) -> None:
    steps = schedule(kills, 2, policy="replication", both_down=1.0)
    # every backup kill but a last one leaves it down, and the primary kill after it finds both servers down
    assert [s.index for s in steps if s.node == BACKUP and s.alone_s is None] == list(range(2, kills, 2))
    assert [s.index for s in steps if s.both_down] == list(range(3, kills + 1, 2))
    # the last kill is one the pair comes back from: a backup started again, or a primary started again
    assert steps[-1].alone_s is not None or steps[-1].both_down


def test_replication_with_no_both_down_starts_every_killed_server_again() -> None:
    steps = schedule(40, 4, policy="replication", both_down=0.0)
    assert not any(s.both_down for s in steps)
    assert all(s.alone_s is not None for s in steps)


def test_a_shorter_replication_schedule_is_a_prefix_of_a_longer_one_up_to_its_last_kill() -> None:
    # the last backup kill of a schedule never leaves it down: only that kill may differ
    assert schedule(10, 3, policy="replication")[:9] == schedule(200, 3, policy="replication")[:9]
    assert schedule(9, 3, policy="replication") == schedule(200, 3, policy="replication")[:9]


def test_pauses_stay_within_their_bounds() -> None:
    steps = schedule(200, 4, pause_s=(0.2, 0.3), alone_s=(1.0, 2.0))
    assert all(0.2 <= s.pause_s <= 0.3 for s in steps if s.state == "waiting" or s.node == PRIMARY)
    assert all(1.0 <= s.alone_s <= 2.0 for s in steps if s.alone_s is not None)
    # a serving backup's pause is the time it serves alone
    assert all(1.0 <= s.pause_s <= 2.0 for s in steps if s.node == BACKUP and s.state == "serving")


def test_replication_pauses_stay_within_their_bounds() -> None:
    steps = schedule(200, 4, policy="replication", pause_s=(0.2, 0.3), alone_s=(1.0, 2.0))
    assert all(0.2 <= s.pause_s <= 0.3 for s in steps)
    assert all(1.0 <= s.alone_s <= 2.0 for s in steps if s.alone_s is not None)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kills": 0}, "kills must be >= 1"),
    ({"policy": "nowhere"}, "policy must be one of shared-store, replication"),
    ({"both_down": 1.5}, "probability"),
    ({"pause_s": (2.0, 1.0)}, "pause_s must be"),
    ({"alone_s": (-1.0, 1.0)}, "alone_s must be"),
])
def test_a_bad_schedule_is_refused(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"kills": 10, "seed": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        schedule(**arguments)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------- the soak's steps

class _Node:
    """A stand-in node: what the soak asked of it goes to the shared log."""

    def __init__(self, name: str, log: list[tuple[str, str]]) -> None:
        self.name, self.log = name, log
        self.is_running = True
        self.last_exit_code: int | None = None

    def kill(self) -> None:
        self.log.append(("kill", self.name))
        if self.is_running:
            self.last_exit_code = -9
        self.is_running = False

    def start(self) -> None:
        self.log.append(("start", self.name))
        self.is_running = True

    def logs(self, lines: int = 200) -> str:
        return ("AMQ221002: stopped\nAMQ221039: Restarting as replicating backup server after primary restart\n"
                "AMQ222154: Error checking DLQ\n\tat org.example.Queue.check(Queue.java:1)\n--- exited with code 0\n")

    def wait_active(self, deadline_s: float) -> None:
        self.log.append(("active", self.name))

    def wait_synced(self, deadline_s: float) -> None:
        self.log.append(("synced", self.name))


class _Target:
    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.nodes = {name: _Node(name, self.log) for name in (PRIMARY, BACKUP)}

    def node(self, name: str) -> _Node:
        return self.nodes[name]


class _Traffic:
    def __init__(self) -> None:
        self.producers: list[Any] = []
        self.consumers: list[Any] = []

    def start(self) -> None:
        pass

    async def wait_until(self, predicate: Any, deadline_s: float) -> bool:
        return bool(predicate())


def _steps_of(steps: tuple[Kill, ...], policy: Policy, monkeypatch: pytest.MonkeyPatch,
              target: _Target | None = None) -> list[tuple[str, str]]:
    """What a soak of ``steps`` asks of the nodes, with the clients' waits standing in as log entries."""
    target = target or _Target()

    async def serving(self: Soak, node: str) -> None:
        target.log.append(("serving", node))

    async def progressed(self: Soak, what: str) -> None:
        target.log.append(("progress", what))

    async def backup_known(self: Soak) -> None:
        target.log.append(("backup known", ""))

    monkeypatch.setattr(Soak, "_serving", serving)
    monkeypatch.setattr(Soak, "_progressed", progressed)
    monkeypatch.setattr(Soak, "_backup_known", backup_known)
    soak = Soak(cast(ManagedTarget, target), steps, cast(Any, _Traffic()), policy=policy)
    records: list[StepRecord] = []
    asyncio.run(soak.run(records.append))
    assert soak.aborted is None
    assert [r.kill for r in records] == list(steps)
    return target.log


def _fast(kills: int, seed: int, policy: Policy, both_down: float) -> tuple[Kill, ...]:
    return schedule(kills, seed, policy=policy, both_down=both_down, pause_s=(0.0, 0.0), alone_s=(0.0, 0.0))


def test_a_replication_soak_kills_the_primary_only_once_its_backup_said_it_is_synchronised(
        monkeypatch: pytest.MonkeyPatch) -> None:
    steps = _fast(60, 8, "replication", 0.4)
    assert any(s.both_down for s in steps)
    log = _steps_of(steps, "replication", monkeypatch)
    backup = "started"  # with the pair; the soak waits for its synchronisation before the first kill
    assert log[:3] == [("progress", "the start"), ("synced", BACKUP), ("backup known", "")]
    kills = iter(steps)
    for action, node in log:
        if (action, node) == ("kill", PRIMARY):
            step = next(kills)
            # a kill of the primary finds its backup synchronised since its last start, or down (both down then)
            assert backup == ("down" if step.both_down else "synced"), (step, backup)
        elif (action, node) == ("kill", BACKUP):
            next(kills)
            backup = "down"
        elif (action, node) == ("start", BACKUP):
            backup = "started"
        elif (action, node) == ("synced", BACKUP):
            assert backup == "started"
            backup = "synced"
        elif (action, node) == ("active", PRIMARY) and backup == "synced":
            backup = "handed back"  # it follows the primary again: not known to be synchronised
        elif (action, node) == ("start", PRIMARY):
            # the primary comes back while the backup serves (failback), or first after both were down
            assert backup in ("synced", "down"), backup
    assert next(kills, None) is None


def test_a_replication_soak_waits_for_each_stage_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = _fast(6, 1, "replication", 0.5)
    assert [(s.node, s.alone_s is None, s.both_down) for s in steps] == [
        (PRIMARY, False, False), (BACKUP, True, False), (PRIMARY, True, True), (BACKUP, True, False),
        (PRIMARY, True, True), (BACKUP, False, False)]
    log = _steps_of(steps, "replication", monkeypatch)
    whole = [("progress", "the pair being whole"), ("backup known", "")]
    assert log == [
        ("progress", "the start"), ("synced", BACKUP), ("backup known", ""),
        # the backup takes over, serves alone, the primary comes back from it
        ("kill", PRIMARY), ("serving", BACKUP), ("progress", "the backup serving"), ("start", PRIMARY),
        ("active", PRIMARY), *whole,
        # the primary serves alone; the backup stays down
        ("kill", BACKUP), ("progress", "the primary serving alone"),
        # both down: the primary first, then the backup, synchronised from it
        ("kill", PRIMARY), ("start", PRIMARY), ("active", PRIMARY), ("start", BACKUP), ("synced", BACKUP), *whole,
        ("kill", BACKUP), ("progress", "the primary serving alone"),
        ("kill", PRIMARY), ("start", PRIMARY), ("active", PRIMARY), ("start", BACKUP), ("synced", BACKUP), *whole,
        # the backup started again after the primary served alone
        ("kill", BACKUP), ("progress", "the primary serving alone"), ("start", BACKUP), ("synced", BACKUP), *whole,
    ]


def test_a_backup_that_ends_on_its_own_is_an_exit_started_again_and_the_soak_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Artemis 2.44.0's backup after handing back (AMQ221039) may end its JVM with status 0 (docs/benchmarks.md)
    steps = _fast(2, 1, "replication", 0.5)
    target = _Target()
    backup = target.nodes[BACKUP]
    records: list[StepRecord] = []
    known = Soak._backup_known

    async def backup_known(self: Soak) -> None:
        if ("active", PRIMARY) in target.log and not any(r.exited for r in records) and \
                ("start", BACKUP) not in target.log:
            backup.is_running, backup.last_exit_code = False, None  # ended by itself, after the failback
        await known(self)  # the soak's own wait, with traffic whose clients all know the backup
        target.log.append(("backup known", ""))

    monkeypatch.setattr(Soak, "_serving", lambda self, node: _logged(target, "serving", node))
    monkeypatch.setattr(Soak, "_progressed", lambda self, what: _logged(target, "progress", what))
    monkeypatch.setattr(Soak, "_backup_known", backup_known)
    monkeypatch.setattr("benchmarks.ha_soak.acceptor", lambda target, node: node)  # stand-in nodes have no ports
    soak = Soak(cast(ManagedTarget, target), steps, cast(Any, _Traffic()), policy="replication")
    asyncio.run(soak.run(records.append))
    assert soak.aborted is None
    assert [r.kill for r in records] == list(steps)
    assert target.log[3:14] == [
        ("kill", PRIMARY), ("serving", BACKUP), ("progress", "the backup serving"), ("start", PRIMARY),
        ("active", PRIMARY), ("progress", "the pair being whole"),
        # the backup is found ended: its exit status collected, started again, synchronised, then known
        ("kill", BACKUP), ("start", BACKUP), ("synced", BACKUP), ("progress", "the ended server started again"),
        ("backup known", "")]
    assert len(records[0].exited) == 1
    assert records[0].exited[0].startswith(f"{BACKUP} ended on its own")
    assert records[0].exited[0].endswith("last lines: AMQ221002: stopped | AMQ221039: Restarting as replicating "
                                          "backup server after primary restart | AMQ222154: Error checking DLQ")
    assert records[0].backup_known_ms is not None
    assert records[1].exited == []
    assert records[0].to_dict()["exited"] == records[0].exited


async def _logged(target: _Target, action: str, what: str) -> None:
    target.log.append((action, what))


def test_a_server_the_soak_killed_is_not_an_exit() -> None:
    target = _Target()
    soak = Soak(cast(ManagedTarget, target), (), cast(Any, _Traffic()), policy="replication")
    target.nodes[BACKUP].is_running = False
    assert soak.exited() == [BACKUP]
    soak.down.add(BACKUP)
    assert soak.exited() == []


def test_a_shared_store_soak_waits_for_no_synchronisation(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = _fast(4, 1, "shared-store", 1.0)
    log = _steps_of(steps, "shared-store", monkeypatch)
    whole = [("progress", "the pair being whole"), ("backup known", "")]
    assert log == [
        ("progress", "the start"),
        ("kill", PRIMARY), ("serving", BACKUP), ("progress", "the backup serving"),
        # the backup killed while it serves alone: it comes back first, on the free store, then the primary
        ("kill", BACKUP), ("start", BACKUP), ("serving", BACKUP), ("progress", "the backup serving again"),
        ("start", PRIMARY), ("active", PRIMARY), *whole,
        ("kill", PRIMARY), ("serving", BACKUP), ("progress", "the backup serving"),
        ("kill", BACKUP), ("start", BACKUP), ("serving", BACKUP), ("progress", "the backup serving again"),
        ("start", PRIMARY), ("active", PRIMARY), *whole,
    ]


def test_a_kill_is_recorded_with_its_label_and_every_timing() -> None:
    record = StepRecord(Kill(3, PRIMARY, "serving", 0.5, both_down=True), 12.3456, serving_ms=81.25, alone_ms=None)
    row = record.to_dict()
    assert record.kill.label == "primary (serving, backup down)"
    assert Kill(2, BACKUP, "serving", 0.5, both_down=True).label == "backup (serving)"
    assert {k: row[k] for k in ("index", "both_down", "at_s", "serving_ms", "alone_ms")} == {
        "index": 3, "both_down": True, "at_s": 12.346, "serving_ms": 81.2, "alone_ms": None}
    assert set(TIMINGS) <= set(row)


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


class _RecreatedUnderIt:
    """A consumer whose session was recreated since ``stale`` arrived: the client refuses that acknowledgement."""

    def __init__(self, stale: Delivery) -> None:
        self.stale = stale
        self.acked: list[Delivery] = []

    async def individual_acknowledge(self, delivery: Delivery) -> None:
        if delivery is self.stale:
            raise DeliveryFromLostSession(delivery.message_id)
        self.acked.append(delivery)


def _delivery(key: str, count: int) -> Delivery:
    properties = TypedProperties.of({"key": key, "seq": int(key.rpartition(":")[2])})
    return Delivery(CoreMessage(b"", durable=True, message_id=10, properties=properties), 1, count, 100)


def test_a_delivery_from_a_recreated_session_is_known_not_acknowledged_and_its_redelivery_is_taken() -> None:
    # The soak's one "ack lost" on Artemis: the ack of a delivery from before the recreate hit the redelivery.
    traffic = Traffic("tcp://127.0.0.1:1", CLIENT, 1, 1, 1.0)
    client = _Client("consumer1")
    _sent(traffic.history, "producer1:1")
    stale, again = _delivery("producer1:1", 1), _delivery("producer1:1", 2)
    consumer = _RecreatedUnderIt(stale)
    for delivery in (stale, again):
        asyncio.run(traffic.take(client, cast(Any, consumer), delivery))
    assert consumer.acked == [again]
    assert [op.type for op in traffic.history if op.f == ACK] == ["invoke", "fail", "invoke", "ok"]
    assert client.errors == Counter({"DeliveryFromLostSession": 1})
    assert _judged(traffic.history, {"producer1:1": {10}})[1:] == ({}, True)


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
    verdict = judge(check(History(), final_drain_complete=True, allow_duplicates=True), {}, {}, left=0, stalls=0,
                    exits=1)
    assert ({k: v for k, v in verdict.anomalies.items() if v}, verdict.ok) == ({"exits": 1}, False)


def test_an_anomalys_operations_are_kept_with_the_kill_each_came_after() -> None:
    history = History()
    history.op("producer1", "ok", "send", "producer1:7", time_ns=100)
    history.op("consumer1", "ok", ACK, "producer1:7", time_ns=250)
    history.op("consumer1", "ok", "receive", "producer1:7", time_ns=400)
    history.op("consumer2", "ok", "receive", "producer1:8", time_ns=410)  # no anomaly: left out
    steps = [StepRecord(Kill(1, PRIMARY, "serving", 0.5), 1.0, at_ns=200),
             StepRecord(Kill(2, BACKUP, "waiting", 0.5), 2.0, at_ns=300)]
    kept = anomaly_ops(history, {"ack_lost": ["producer1:7"]}, steps)
    assert list(kept) == ["producer1:7"]
    assert [(op["f"], op["time_ns"], op["after_kill"]) for op in kept["producer1:7"]] == [
        ("send", 100, 0), (ACK, 250, 1), ("receive", 400, 2)]


# ---------------------------------------------------------------------------------------------------- arguments

@pytest.mark.parametrize(("argv", "message"), [
    (["--target", "reference", "--kills", "0"], "--kills must be at least 1"),
    (["--target", "reference", "--consumers", "0"], "--consumers must be at least 1"),
    (["--target", "reference", "--artemis-version", "2.44.0"], "goes with --target artemis"),
    (["--target", "artemis", "--artemis-version", "1.0.0"], "is not pinned"),
    (["--target", "reference", "--both-down", "2"], "probability"),
    (["--target", "reference", "--pause", "3", "1"], "pause_s must be"),
    (["--target", "nowhere"], "invalid choice"),
    (["--target", "reference", "--policy", "nowhere"], "invalid choice"),
    (["--target", "reference", "--policy", "replication", "--eager-failback"], "goes with --policy shared-store"),
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
    assert (args.producers, args.consumers, args.policy, len(steps)) == (3, 3, "shared-store", 12)
    assert steps == schedule(12, 9)


def test_the_replication_policy_gives_its_schedule() -> None:
    args, steps = _arguments(["--target", "artemis", "--policy", "replication", "--kills", "12", "--seed", "9",
                              "--both-down", "0.5"])
    assert args.policy == "replication"
    assert steps == schedule(12, 9, policy="replication", both_down=0.5)
    assert steps != schedule(12, 9, both_down=0.5)
