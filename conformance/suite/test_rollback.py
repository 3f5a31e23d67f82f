"""An explicit rollback of a local transaction (spec 003 "JMS Failover": an aborted transaction recovers what it
consumed, and recovered messages are marked redelivered; notes, packet table: SESS_ROLLBACK).

No failure is involved: a transacted session receives messages, acknowledges some inside its transaction and calls
``rollback()``.  The acknowledgements travel on the session channel before the SESS_ROLLBACK, so the broker has
them in the transaction when it rolls back (unlike a cut connection, which may come before they arrive).  What a
broker must do: put the acknowledged messages back, first unacknowledged first, each delivered again with a
delivery count one higher (the core JMS layer's JMSRedelivered); nothing lost, nothing extra; a commit after the
redelivery empties the queue.
"""

from __future__ import annotations

from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.plugin import Settings
from cck.conformance.targets import Target
from cck.reference.client import Consumer, Delivery, Session, connect

from ._kit import RECEIVE_S, RESTARTING, client_settings, key_of, message, observed, poll, queue_for, run
from ._restart_support import ensure_queue

CASE_S = 60.0
COUNT = 5
#: how long the queue's message count may take to show the final commit
SETTLE_S = 5.0

REDELIVERED = tuple(
    Case(f"rollback.redelivered.{n}", "rollback.redelivery",
         f"a transacted session receives {COUNT} {'durable' if durable else 'non-durable'} messages, acknowledges "
         f"{'all of them' if acked == COUNT else f'the first {acked}'} inside the transaction and rolls back"
         + (f", {rollbacks} times in a row (receiving and acknowledging them again each time)" if rollbacks > 1
            else "") + "; then it receives them again, acknowledges them and commits",
         f"after each rollback the {COUNT} messages are delivered again, in their order; each acknowledged one with "
         "a delivery count one higher than before the rollback (redelivered); the commit leaves the queue empty",
         params={"durable": durable, "acked": acked, "rollbacks": rollbacks})
    for n, (durable, acked, rollbacks) in enumerate(((True, COUNT, 1), (False, COUNT, 1), (True, 3, 1),
                                                      (True, COUNT, 2)), 1)
)


async def _receive(consumer: Consumer, count: int, seconds: float, what: str) -> list[Delivery]:
    got: list[Delivery] = []
    for i in range(count):
        delivery = await observed(consumer.receive(seconds), seconds, f"{what}: delivery {i + 1} of {count}")
        if delivery is None:
            break
        got.append(delivery)
    return got


@cases(*REDELIVERED)
def test_rollback_redelivers(case: Case, cck_target: Target, cck_settings: Settings, evidence: CaseEvidence) -> None:
    durable, acked, rollbacks = case.params["durable"], case.params["acked"], case.params["rollbacks"]
    queue = queue_for(case.id)
    receive_s = cck_settings.deadline(RECEIVE_S)

    async def scenario() -> None:
        settings = client_settings(cck_target, RESTARTING, reconnect_attempts=0)
        async with await connect(cck_target.nodes[0].url, settings=settings) as connection:
            plain = await connection.create_session()
            await ensure_queue(plain, queue)
            producer = plain.create_producer(queue)
            keys = [f"{case.id}:{seq}" for seq in range(COUNT)]
            for seq, key in enumerate(keys):
                await producer.send(message(key, seq, durable=durable))
            session: Session = await connection.create_session(transacted=True)
            consumer = await session.create_consumer(queue)
            session.start()
            counts: dict[str, int] = {}
            acked_keys = set(keys[:acked])
            rounds: list[list[tuple[str, int]]] = []
            for attempt in range(rollbacks + 1):
                got = await _receive(consumer, COUNT, receive_s, f"round {attempt + 1}")
                seen = [(key_of(d), d.delivery_count) for d in got]
                rounds.append(seen)
                evidence.note("rounds", rounds)
                assert [k for k, _ in seen] == keys, (
                    f"round {attempt + 1} (after {attempt} rollback(s)) delivered {[k for k, _ in seen]}, "
                    f"expected {keys} in that order")
                if attempt > 0:
                    late = [f"{k}: delivery count {c}, was {counts[k]} before the rollback"
                            for k, c in seen if k in acked_keys and c <= counts[k]]
                    assert not late, ("messages acknowledged inside the rolled-back transaction came back without "
                                      "their delivery count incremented (not marked redelivered): " + "; ".join(late))
                counts = dict(seen)
                if attempt < rollbacks:
                    for delivery in got[:acked]:
                        await consumer.individual_acknowledge(delivery)
                    await session.rollback()
                else:
                    for delivery in got:
                        await consumer.individual_acknowledge(delivery)
                    await session.commit()

            remaining: list[int] = []

            async def emptied() -> bool:
                remaining.append((await plain.queue_query(queue)).message_count)
                return remaining[-1] == 0

            try:
                await poll(emptied, cck_settings.deadline(SETTLE_S), lambda: "the queue emptied by the final commit")
            finally:
                evidence.note("message_counts_after_commit", remaining)

    run(cck_settings, scenario(), CASE_S)
