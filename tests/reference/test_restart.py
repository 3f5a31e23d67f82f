"""What survives a kill -9 of the reference broker (spec 004): durable messages
on durable queues come back; non-durable messages do not."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

import pytest

from .conftest import artemis_cli, start_reference_broker, stop_reference_broker

pytestmark = pytest.mark.artemis


def test_durable_messages_survive_kill_9_and_non_durable_do_not(tmp_path: Path, artemis_home: Path) -> None:
    data = tmp_path / "data"
    destination = f"--destination=queue://restart.{uuid.uuid4().hex[:8]}"
    broker = start_reference_broker(data)
    try:
        durable = artemis_cli(artemis_home, "producer", "--url", broker.url, "--message-count=40", destination)
        assert "Produced: 40 messages" in durable.stdout, durable.stdout + durable.stderr
        transient = artemis_cli(artemis_home, "producer", "--url", broker.url, "--message-count=9",
                                "--non-persistent", destination)
        assert "Produced: 9 messages" in transient.stdout, transient.stdout + transient.stderr
    finally:
        broker.process.send_signal(signal.SIGKILL)
        broker.process.wait(timeout=15)
    broker = start_reference_broker(data)
    try:
        recovered = [line for line in broker.log if '"msg": "recovered"' in line]
        assert recovered, "".join(broker.log)
        assert '"messages": 40' in recovered[0]
        consumed = artemis_cli(artemis_home, "consumer", "--url", broker.url, "--message-count=100",
                               "--receive-timeout=1000", "--break-on-null", destination)
        assert "Consumed: 40 messages" in consumed.stdout, consumed.stdout + consumed.stderr
    finally:
        assert stop_reference_broker(broker) == 0
