"""Crash safety (issue 3): the broker is killed with SIGKILL at seeded random
moments during durable sends and acknowledgements; after each restart every
send the client saw confirmed is present exactly once and every acknowledgement
it saw confirmed stays acknowledged."""

from __future__ import annotations

import random
import signal
import threading
from pathlib import Path

import pytest

from .conftest import start_reference_broker, stop_reference_broker
from .wire_client import WireClient, WireError

ROUNDS = 6
QUEUE = "crash.q"
DRAIN_DEADLINE_S = 10.0


def _kill_later(broker, delay_s: float) -> threading.Timer:  # type: ignore[no-untyped-def]
    timer = threading.Timer(delay_s, lambda: broker.process.send_signal(signal.SIGKILL))
    timer.start()
    return timer


@pytest.mark.parametrize("seed", [1, 2])
def test_confirmed_sends_and_acks_survive_kill_9(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data = tmp_path / "data"
    confirmed_sends: set[int] = set()
    confirmed_acks: set[int] = set()
    in_doubt_acks: set[int] = set()  # the ack in flight when the kill landed: either outcome is right
    next_seq = 0
    for round_no in range(ROUNDS):
        broker = start_reference_broker(data)
        timer = _kill_later(broker, rng.uniform(0.05, 0.6))
        try:
            client = WireClient(broker.host, broker.port)
            if round_no == 0:
                client.create_queue(QUEUE)
            if round_no % 2 == 0:  # a sending round
                while True:
                    seq, next_seq = next_seq, next_seq + 1  # never reused: an in-doubt send may have landed
                    client.send_durable(QUEUE, seq)
                    confirmed_sends.add(seq)
            else:  # an acknowledging round
                client.consume(QUEUE)
                while True:
                    delivery = client.receive()
                    seq = int(delivery.message.properties["seq"])  # type: ignore[arg-type]
                    in_doubt_acks.add(seq)
                    client.ack(delivery)
                    in_doubt_acks.discard(seq)
                    confirmed_acks.add(seq)
        except (WireError, OSError):
            pass  # the kill landed; what the client saw confirmed is what counts
        finally:
            timer.cancel()
            broker.process.wait(timeout=15)
    # Final check: everything confirmed-sent and not confirmed-acked is there exactly once.
    broker = start_reference_broker(data)
    try:
        client = WireClient(broker.host, broker.port)
        client.consume(QUEUE)
        seen: list[int] = []
        client.sock.settimeout(DRAIN_DEADLINE_S / 4)
        try:
            while True:
                seen.append(int(client.receive().message.properties["seq"]))  # type: ignore[arg-type]
        except (WireError, OSError):
            pass  # no more deliveries within the timeout
        client.close()
    finally:
        stop_reference_broker(broker)
    assert len(seen) == len(set(seen)), "a message was delivered twice"
    assert confirmed_sends, "the schedule never let a send through"
    missing = (confirmed_sends - confirmed_acks - in_doubt_acks) - set(seen)
    assert not missing, f"confirmed sends lost: {sorted(missing)[:20]}"
    resurrected = confirmed_acks & set(seen)
    assert not resurrected, f"confirmed acks came back: {sorted(resurrected)[:20]}"
