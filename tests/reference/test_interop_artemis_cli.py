"""Stock Artemis clients against the reference broker: the ``artemis producer``
and ``artemis consumer`` commands of the pinned distribution, 1,000 messages,
durable and not; nothing lost, nothing duplicated."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from .conftest import RunningBroker, artemis_cli

pytestmark = pytest.mark.artemis
MESSAGES = 1000


@pytest.mark.parametrize("persistence", ["durable", "non-durable"])
def test_artemis_cli_producer_and_consumer(reference_broker: RunningBroker, artemis_home: Path,
                                           persistence: str) -> None:
    destination = f"--destination=queue://interop.{uuid.uuid4().hex[:8]}"
    flags = ["--non-persistent"] if persistence == "non-durable" else []
    produced = artemis_cli(artemis_home, "producer", "--url", reference_broker.url,
                           f"--message-count={MESSAGES}", destination, *flags)
    assert f"Produced: {MESSAGES} messages" in produced.stdout, produced.stdout + produced.stderr
    consumed = artemis_cli(artemis_home, "consumer", "--url", reference_broker.url,
                           f"--message-count={MESSAGES}", destination)
    assert f"Consumed: {MESSAGES} messages" in consumed.stdout, consumed.stdout + consumed.stderr
    # Nothing left over (no duplicate, nothing unacknowledged): a further consumer finds the queue empty.
    leftover = artemis_cli(artemis_home, "consumer", "--url", reference_broker.url, "--message-count=1",
                           "--receive-timeout=500", "--break-on-null", destination)
    assert "Consumed: 0 messages" in leftover.stdout, leftover.stdout + leftover.stderr
