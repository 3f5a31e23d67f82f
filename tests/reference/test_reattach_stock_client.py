"""Reattachment with a stock Artemis client: the TCP link is cut under load
(the broker keeps running) and the client, with a confirmation window, reattaches
its session; nothing is lost or duplicated."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from .conftest import CLI_DEADLINE_S, RunningBroker, artemis_cli
from .cut_proxy import CutProxy

pytestmark = pytest.mark.artemis
MESSAGES = 3000
TRAFFIC_DEADLINE_S = 60.0


def _wait_for(predicate, deadline_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + deadline_s
    tick = threading.Event()
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline_s}s waiting for {what}")
        tick.wait(0.02)


def _produce_through_a_cut(broker: RunningBroker, artemis_home: Path, destination: str, window: int,
                           *flags: str) -> tuple[str, CutProxy]:
    with CutProxy(broker.host, broker.port) as proxy:
        url = (f"tcp://127.0.0.1:{proxy.port}?confirmationWindowSize={window}&reconnectAttempts=-1"
               "&retryInterval=100&retryIntervalMultiplier=1.0")
        producer = subprocess.Popen(
            [str(artemis_home / "bin" / "artemis"), "producer", "--url", url, f"--message-count={MESSAGES}",
             f"--destination={destination}", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, JAVA_ARGS="-Xmx256m"),
        )  # fmt: skip
        try:
            # Cut once real traffic flows (well past the handshake).
            _wait_for(lambda: proxy.bytes_to_target > 200_000, TRAFFIC_DEADLINE_S, "the producer's traffic")
            assert proxy.cut() >= 1
            output, _ = producer.communicate(timeout=CLI_DEADLINE_S)
        finally:
            if producer.poll() is None:
                producer.kill()
    assert proxy.connections >= 2  # it came back through a new connection
    return output, proxy


@pytest.mark.parametrize("persistence", ["non-durable", "durable"])
def test_stock_client_reattaches_after_a_cut_under_load(reference_broker: RunningBroker, artemis_home: Path,
                                                        persistence: str) -> None:
    destination = f"queue://reattach.{uuid.uuid4().hex[:8]}"
    flags = ["--non-persistent"] if persistence == "non-durable" else []
    output, _ = _produce_through_a_cut(reference_broker, artemis_home, destination, 65536, *flags)
    assert f"Produced: {MESSAGES} messages" in output, output
    reattached = [line for line in reference_broker.log if '"msg": "session reattached"' in line]
    assert reattached, "no reattach in the broker log"
    consumed = artemis_cli(artemis_home, "consumer", "--url", reference_broker.url, f"--message-count={MESSAGES}",
                           f"--destination={destination}")
    assert f"Consumed: {MESSAGES} messages" in consumed.stdout, consumed.stdout + consumed.stderr
    leftover = artemis_cli(artemis_home, "consumer", "--url", reference_broker.url, "--message-count=1",
                           "--receive-timeout=500", "--break-on-null", f"--destination={destination}")
    assert "Consumed: 0 messages" in leftover.stdout, leftover.stdout + leftover.stderr


def test_without_a_window_the_client_reconnects_and_recreates(reference_broker: RunningBroker,
                                                              artemis_home: Path) -> None:
    """confirmationWindowSize=-1: the broker drops the session with the link, the
    reattach fails and the client creates a new session (spec 000: "forcing reconnect")."""
    destination = f"queue://recreate.{uuid.uuid4().hex[:8]}"
    _produce_through_a_cut(reference_broker, artemis_home, destination, -1, "--non-persistent")
    log = "".join(reference_broker.log)
    assert '"msg": "session reattached"' not in log
    assert log.count('"msg": "session created"') >= 2, log
