"""The suite kit's pure parts: the deadline waits, the drain, the message keys, the client settings per target
and the judging end of a scenario (no broker: fakes stand in for a consumer)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from cck.codec import CURRENT_VERSION, CoreMessage, TypedProperties
from cck.conformance.evidence import CaseEvidence
from cck.conformance.oracles import History
from cck.conformance.plugin._judge import cause_of
from cck.conformance.suite._kit import (
    POLL_S,
    REATTACHING,
    RESTARTING,
    Fence,
    client_settings,
    drain,
    fence_behind,
    judged,
    key_of,
    message,
    poll,
    poll_value,
    protocol_version,
    queue_for,
    repeated,
    send_fence,
    send_keyed,
    seq_of,
    settle_sends,
    signalled,
    wait_until,
)
from cck.conformance.targets import UrlTarget
from cck.conformance.verdicts import CheckFailed, NotObserved
from cck.reference.client import Consumer, Delivery, Producer, SessionOptions

# ---------------------------------------------------------------------------------------------- waits


def test_wait_until_returns_once_the_condition_holds() -> None:
    looks = []

    def ready() -> bool:
        looks.append(1)
        return len(looks) >= 3

    asyncio.run(wait_until(ready, 5.0, "the third look"))
    assert len(looks) == 3


def test_a_wait_that_runs_out_is_a_failed_check_naming_what() -> None:
    with pytest.raises(NotObserved, match=r"the broker's count: not within 0\.1 s") as caught:
        asyncio.run(wait_until(lambda: False, 0.05, "the broker's count"))
    assert cause_of(caught.value) == "check"


def test_a_poll_names_what_it_last_saw() -> None:
    seen: list[int] = []

    async def count() -> bool:
        seen.append(len(seen))
        return False

    with pytest.raises(NotObserved, match=r"last saw [2-9]"):
        asyncio.run(poll(count, 2.5 * POLL_S, lambda: f"last saw {seen[-1]}"))


def test_a_poll_does_not_ask_more_often_than_its_interval() -> None:
    seen: list[int] = []

    async def count() -> bool:
        seen.append(1)
        return False

    with pytest.raises(NotObserved):
        asyncio.run(poll(count, 5 * POLL_S, lambda: "never"))
    assert len(seen) <= 7  # one look at once, then at most one per interval until the deadline


def test_poll_value_keeps_every_value_and_stops_at_the_wanted_one() -> None:
    values = iter([3, 2, 0, 9])

    async def ask() -> int:
        return next(values)

    assert asyncio.run(poll_value(ask, lambda n: n == 0, 5.0)) == [3, 2, 0]


def test_poll_value_does_not_raise_when_it_runs_out() -> None:
    async def ask() -> int:
        return 1

    seen = asyncio.run(poll_value(ask, lambda n: n == 0, 2 * POLL_S))
    assert seen[-1] == 1
    assert len(seen) >= 2


def test_signalled_rechecks_on_each_signal_without_polling() -> None:
    async def case() -> tuple[bool, int]:
        changed = asyncio.Event()
        log: list[str] = []
        looks = 0

        def holds() -> bool:
            nonlocal looks
            looks += 1
            return "done" in log

        async def producer() -> None:
            for item in ("a", "b", "done"):
                await asyncio.sleep(3 * POLL_S)  # a poller would look several times per gap
                log.append(item)
                changed.set()

        task = asyncio.ensure_future(producer())
        ok = await signalled(changed, holds, 5.0)
        await task
        return ok, looks

    ok, looks = asyncio.run(case())
    assert ok
    # once at first, then once per signal (two signals may share a wake-up on a loaded machine): never between
    assert 2 <= looks <= 4


def test_signalled_is_false_after_its_deadline() -> None:
    assert asyncio.run(signalled(asyncio.Event(), lambda: False, 0.02)) is False


# ---------------------------------------------------------------------------------------------- messages


def test_message_keys_and_sequence_numbers() -> None:
    made = message("c.1:4", 4, durable=False)
    assert (key_of(made), seq_of(made), made.durable, made.body) == ("c.1:4", 4, False, b"c.1:4")
    delivery = Delivery(made, consumer_id=1, delivery_count=2, size=100)
    assert (key_of(delivery), seq_of(delivery)) == ("c.1:4", 4)
    assert message("k", 0, body=b"x").body == b"x"


def test_a_key_read_back_as_bytes_is_the_same_key() -> None:
    raw = CoreMessage(b"", properties=TypedProperties.of(key=b"k-1", seq=1))
    assert key_of(raw) == "k-1"


def test_every_run_of_a_case_gets_a_queue_of_its_own() -> None:
    first, second = queue_for("restart.messages.1"), queue_for("restart.messages.1")
    assert first != second
    assert first.startswith("cck.restart.messages.1.")


def test_repeated_keys_across_receipts() -> None:
    assert repeated(["a", "b"], ["b", "c", "c"]) == ["b", "c"]
    assert repeated(["a"], []) == []


# ---------------------------------------------------------------------------------------------- client settings


@pytest.mark.parametrize(("announced", "spoken"), [
    (None, CURRENT_VERSION),  # a URL target that does not say: the codec's own
    (134, 134),  # Artemis 2.28.0 refuses a newer client than itself
    (CURRENT_VERSION, CURRENT_VERSION),  # the reference broker, Artemis 2.44.0
    (CURRENT_VERSION + 5, CURRENT_VERSION),  # newer than the codec knows: it accepts older clients
])
def test_the_protocol_version_per_target(announced: int | None, spoken: int) -> None:
    target = UrlTarget("tcp://127.0.0.1:61616", protocol_version=announced)
    assert protocol_version(target) == spoken
    for profile in (REATTACHING, RESTARTING):
        assert client_settings(target, profile).version == spoken


def test_a_profile_keeps_its_own_settings_and_takes_the_cases_changes() -> None:
    target = UrlTarget("tcp://127.0.0.1:61616", protocol_version=134)
    reattaching = client_settings(target, REATTACHING, confirmation_window_size=1024)
    restarting = client_settings(target, RESTARTING, reconnect_attempts=0)
    assert (reattaching.confirmation_window_size, reattaching.call_timeout_ms) == (1024, 15_000)
    assert (restarting.reconnect_attempts, restarting.block_on_non_durable_send) == (0, True)


# ---------------------------------------------------------------------------------------------- traffic


class _FakeConsumer:
    """Hands out the deliveries it was given, then nothing; records the acknowledgements."""

    def __init__(self, deliveries: list[Delivery]) -> None:
        self.deliveries = list(deliveries)
        self.timeouts: list[float] = []
        self.acked: list[tuple[str, str]] = []

    async def receive(self, timeout: float) -> Delivery | None:
        self.timeouts.append(timeout)
        return self.deliveries.pop(0) if self.deliveries else None

    async def individual_acknowledge(self, delivery: Delivery) -> None:
        self.acked.append(("individual", key_of(delivery)))

    async def acknowledge(self, delivery: Delivery) -> None:
        self.acked.append(("cumulative", key_of(delivery)))


class _FakeProducer:
    def __init__(self) -> None:
        self.sent: list[CoreMessage] = []

    async def send(self, sent: CoreMessage) -> None:
        self.sent.append(sent)


def _deliveries(*counts: int) -> list[Delivery]:
    return [Delivery(message(f"k:{i}", i), consumer_id=1, delivery_count=c, size=10) for i, c in enumerate(counts)]


def _ops(history: History) -> list[dict[str, Any]]:
    return [op.to_dict() for op in history]


def test_drain_waits_long_for_the_expected_then_listens_for_quiet() -> None:
    fake = _FakeConsumer(_deliveries(1, 2))
    history = History()
    got = asyncio.run(drain(cast(Consumer, fake), history, "verifier", expected=2, quiet_s=0.5, receive_s=10.0))
    assert [key_of(d) for d in got] == ["k:0", "k:1"]
    assert fake.timeouts == [10.0, 10.0, 0.5]
    assert fake.acked == [("individual", "k:0"), ("individual", "k:1")]
    receipts = [op for op in _ops(history) if op["f"] == "receive"]
    assert [(op["value"], op.get("delivery_count"), op.get("redelivered")) for op in receipts] == [
        ("k:0", 1, False), ("k:1", 2, True)]


def test_a_cumulative_drain_records_its_acks_and_the_producers_order() -> None:
    fake = _FakeConsumer(_deliveries(1, 1))
    history = History()
    asyncio.run(drain(cast(Consumer, fake), history, "drain", quiet_s=0.5, ack="cumulative", producer="P1"))
    ops = _ops(history)
    assert [op["f"] for op in ops if op["type"] == "ok"] == ["receive", "ack", "receive", "ack"]
    assert [(op.get("producer"), op.get("seq")) for op in ops if op["f"] == "receive"] == [("P1", 0), ("P1", 1)]
    assert fake.acked == [("cumulative", "k:0"), ("cumulative", "k:1")]


def _fence_delivery(fence: Fence) -> Delivery:
    marker = CoreMessage(b"", priority=0, properties=TypedProperties.of(cck_fence=fence.token))
    return Delivery(marker, consumer_id=1, delivery_count=1, size=10)


def test_a_fence_after_the_expected_ends_the_drain_without_a_quiet_window() -> None:
    fence = Fence("f1")
    fake = _FakeConsumer([*_deliveries(1, 1), _fence_delivery(fence), *_deliveries(1)])
    history = History()
    got = asyncio.run(drain(cast(Consumer, fake), history, "verifier", expected=2, quiet_s=0.5, receive_s=10.0,
                            fence=fence))
    assert [key_of(d) for d in got] == ["k:0", "k:1"]
    assert fake.timeouts == [10.0, 10.0, 0.5]  # the third receive is the fence; no wait after it
    assert len(fake.acked) == 3  # the fence is acknowledged too ...
    assert [op["value"] for op in _ops(history) if op["f"] == "receive"] == ["k:0", "k:1"]  # ... but not recorded


def test_a_fence_that_overtook_an_expected_message_leaves_the_quiet_window() -> None:
    fence = Fence("f1")
    fake = _FakeConsumer([*_deliveries(1), _fence_delivery(fence), *_deliveries(1, 1)[1:]])
    got = asyncio.run(drain(cast(Consumer, fake), History(), "verifier", expected=2, quiet_s=0.5, receive_s=10.0,
                            fence=fence))
    assert [key_of(d) for d in got] == ["k:0", "k:1"]
    assert fake.timeouts == [10.0, 10.0, 10.0, 0.5]


def test_another_drains_fence_is_an_ordinary_message() -> None:
    fake = _FakeConsumer([_fence_delivery(Fence("theirs"))])
    got = asyncio.run(drain(cast(Consumer, fake), History(), "verifier", quiet_s=0.5, fence=Fence("mine")))
    assert len(got) == 1


class _FakeQueueSession:
    def __init__(self, **query: Any) -> None:
        self.query = {"exists": True, "address": "q", "consumer_count": 0, "routing_type": 1,
                      "filter_string": None, **query}
        self.producer = _FakeProducer()
        self.closed = False

    async def close(self) -> None:
        self.closed = True

    async def queue_query(self, queue: str) -> Any:
        return type("Answer", (), self.query)()

    def create_producer(self, address: str) -> _FakeProducer:
        return self.producer


@pytest.mark.parametrize(("query", "sent"), [
    ({}, True),  # an anycast queue named as its address, nobody consuming: the fence can only reach the drain
    ({"consumer_count": 1}, False),  # another consumer could take the fence
    ({"address": "a"}, False),  # a send to the queue's name would not reach it
    ({"routing_type": 0}, False),  # multicast: every subscription would get a fence
    ({"filter_string": "x > 1"}, False),  # the filter could hold the fence back
    ({"exists": False}, False),
])
def test_a_fence_is_sent_only_where_it_can_reach_only_the_drain(query: dict[str, Any], sent: bool) -> None:
    session = _FakeQueueSession(**query)
    fence = asyncio.run(send_fence(cast(Any, session), "q"))
    assert (fence is not None) == sent
    assert len(session.producer.sent) == int(sent)
    if fence is not None:
        marker = session.producer.sent[0]
        assert marker.priority == 0
        assert not marker.durable
        assert fence.marks(Delivery(marker, consumer_id=1, delivery_count=1, size=10))


class _FakeOpenConsumer:
    """A consumer already open on queue ``q``: its session's options and a connection that opens plain sessions."""

    def __init__(self, *, transacted: bool = False, xa: bool = False, consumers: int = 1) -> None:
        self.opened: list[_FakeQueueSession] = []
        options = SessionOptions("s", xa=xa, auto_commit_sends=not transacted, auto_commit_acks=not transacted)
        self.core = type("Core", (), {"queue": "q"})()
        self.session = type("Session", (), {"core": type("SessionCore", (), {"options": options})(),
                                            "connection": self})()
        self._consumers = consumers

    async def create_session(self) -> _FakeQueueSession:
        session = _FakeQueueSession(consumer_count=self._consumers)
        self.opened.append(session)
        return session


@pytest.mark.parametrize(("consumer", "sent"), [
    (_FakeOpenConsumer(), True),  # the queue's only consumer is the drain's: the fence reaches it behind the rest
    (_FakeOpenConsumer(consumers=2), False),  # another consumer could take the fence
    (_FakeOpenConsumer(transacted=True), False),  # its acknowledgement of the fence could be rolled back
    (_FakeOpenConsumer(xa=True), False),
])
def test_a_fence_behind_an_open_consumer(consumer: _FakeOpenConsumer, sent: bool) -> None:
    fence = asyncio.run(fence_behind(cast(Consumer, consumer)))
    assert (fence is not None) == sent
    assert sum(len(s.producer.sent) for s in consumer.opened) == int(sent)
    assert all(s.closed for s in consumer.opened)  # the session that sent it is closed again


def test_a_drain_that_does_not_acknowledge() -> None:
    fake = _FakeConsumer(_deliveries(1))
    asyncio.run(drain(cast(Consumer, fake), History(), "client", quiet_s=0.1, ack="none"))
    assert fake.acked == []


def test_keyed_sends_and_their_outcomes() -> None:
    fake = _FakeProducer()
    history = History()
    keys = asyncio.run(send_keyed(cast(Producer, fake), history, "c.1", [True, False], name="T", process="tx",
                                  confirmed=False))
    assert keys == ["c.1:0", "c.1:1"]
    assert [(m.durable, key_of(m)) for m in fake.sent] == [(True, "c.1:0"), (False, "c.1:1")]
    settle_sends(history, keys, [True, False], name="T", process="tx")
    assert [(op["type"], op["value"]) for op in _ops(history)] == [
        ("invoke", "c.1:0"), ("invoke", "c.1:1"), ("ok", "c.1:0"), ("fail", "c.1:1")]


# ---------------------------------------------------------------------------------------------- judging


def _lost_history() -> History:
    history = History()
    history.invoke_send("p", "k:0", producer="P", seq=0)
    history.ok("p", "send", "k:0", producer="P", seq=0)
    return history


def test_the_history_is_judged_and_written_even_when_the_block_failed() -> None:
    evidence = CaseEvidence("demo.kit.1")

    async def case() -> None:
        async with judged(_lost_history(), evidence, label="after"):
            raise AssertionError("a wire-level check failed")

    with pytest.raises(AssertionError, match="a wire-level check failed") as caught:
        asyncio.run(case())
    assert [r["label"] for r in evidence.history_results] == ["after"]
    assert any("lost" in note for note in caught.value.__notes__)


def test_problems_and_late_findings_fail_a_block_that_passed() -> None:
    evidence = CaseEvidence("demo.kit.2")
    history = History()
    ran: list[str] = []

    async def case() -> None:
        problems: list[str] = []
        async with judged(history, evidence, before=lambda: ran.append("drain"), problems=problems,
                          also=lambda: ["k:3 delivered twice after the restart"]):
            problems.append("the broker answered twice")

    with pytest.raises(CheckFailed, match=r"the broker answered twice \| k:3 delivered twice") as caught:
        asyncio.run(case())
    assert ran == ["drain"]
    assert cause_of(caught.value) == "check"


def test_a_clean_history_passes() -> None:
    evidence = CaseEvidence("demo.kit.3")

    async def case() -> None:
        async with judged(History(), evidence):
            pass

    asyncio.run(case())
    assert evidence.history_results[0]["ok"] is True
