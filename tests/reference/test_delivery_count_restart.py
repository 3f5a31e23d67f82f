"""Without ``persist-delivery-count-before-delivery`` (Artemis's default) a cancelled delivery's count survives a
restart (Artemis writes it on cancel); one never cancelled does not, and a clean consumer close does not count the
delivery (Artemis decrements it: the client did not consume it).  With it (the reference broker's default) the count
is stored before each delivery, so it survives a kill while the message is out for delivery too."""

from __future__ import annotations

from pathlib import Path

import pytest

from cck.codec import (
    CoreMessage,
    CreateQueueMessage_V2,
    NullResponseMessage,
    RollbackMessage,
    RoutingType,
    SessionConsumerCloseMessage,
    SessionConsumerFlowCreditMessage,
    SessionCreateConsumerMessage,
    SessionReceiveMessage,
    SessionSendMessage,
    SessionStart,
)
from cck.reference.broker import BrokerCore, BrokerSettings
from cck.reference.broker._journal_storage import JournalStorage, open_journal

from .harness import Wire, connect, open_session

QUEUE = "counted"


def _broker(data: Path, *, before_delivery: bool | None) -> tuple[BrokerCore, JournalStorage]:
    """``before_delivery`` None: the storage's default (counts stored before delivery)."""
    journal, recovery = open_journal(data, sync=False)
    storage = (JournalStorage(journal) if before_delivery is None
               else JournalStorage(journal, count_before_delivery=before_delivery))
    core = BrokerCore(BrokerSettings(node_id="node-1"), storage=storage)
    storage.recover(recovery, post_office=core.post_office, transactions=core.transactions, cluster=core.cluster)
    return core, storage


def _consume_one(wire: Wire) -> SessionReceiveMessage:
    wire.send(SessionCreateConsumerMessage(0, QUEUE))
    wire.send(SessionConsumerFlowCreditMessage(0, -1))
    frames = wire.send(SessionStart())
    deliveries = [f.packet for f in frames if isinstance(f.packet, SessionReceiveMessage)]
    assert len(deliveries) == 1, frames
    return deliveries[0]


@pytest.mark.parametrize(("before_delivery", "cancel", "redelivered_count"), [
    (False, "rollback", 2), (False, "consumer-close", 1), (False, "none", 1),
    # the rolled-back message goes straight back to the open consumer: a second delivery, stored before it went
    (True, "rollback", 3), (True, "consumer-close", 1), (True, "none", 2),
    (None, "none", 2),  # the storage's default: counts stored before delivery (Artemis's default is not to)
], ids=["rolled-back-then-restart", "closed-cleanly-then-restart", "killed-while-delivered",
        "before-delivery-rolled-back", "before-delivery-closed-cleanly", "before-delivery-killed-while-delivered",
        "default-killed-while-delivered"])
def test_delivery_count_after_restart(tmp_path: Path, before_delivery: bool | None, cancel: str,
                                      redelivered_count: int) -> None:
    core, storage = _broker(tmp_path, before_delivery=before_delivery)
    wire = connect(core)
    open_session(wire)
    assert wire.send(CreateQueueMessage_V2(QUEUE, QUEUE, routing_type=RoutingType.ANYCAST))[-1].packet == \
        NullResponseMessage(-1)
    wire.send(SessionSendMessage(CoreMessage(b"m", address=QUEUE, durable=True), True, -2, 0))
    assert _consume_one(wire).delivery_count == 1
    if cancel == "rollback":
        wire.send(RollbackMessage(False))  # the delivery goes back, counted
    elif cancel == "consumer-close":
        wire.send(SessionConsumerCloseMessage(0))  # goes back uncounted
    storage.journal.sync()
    storage.journal.close()  # a restart; without the cancel this is a kill with the message out for delivery

    core, storage = _broker(tmp_path, before_delivery=before_delivery)
    wire = connect(core)
    open_session(wire)
    redelivered = _consume_one(wire)
    assert redelivered.delivery_count == redelivered_count
    storage.journal.close()
