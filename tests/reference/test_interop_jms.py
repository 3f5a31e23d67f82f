"""A JMS program on the stock artemis-jms-client (``fixtures/java/jms``) against the reference broker
and, to prove the program itself, against a real Apache Artemis broker of the pinned distribution:
a transacted session (commit and rollback), CLIENT_ACKNOWLEDGE with redelivery after recover, and
XA start/end/prepare, a broker restart (SIGTERM or SIGKILL), then recover and commit."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cck.conformance.artemis.distribution import Distribution, ensure_distribution

from .jms_tool import JmsRun, build_jms, run_jms
from .targets import ArtemisTarget, Broker, ReferenceTarget

pytestmark = pytest.mark.artemis

# Every check each scenario must report: a program that silently skips one does not pass.
EXPECTED_CHECKS: dict[str, set[str]] = {
    "transacted": {
        "rolled-back-sends-invisible", "committed-sends-delivered", "first-delivery-flags",
        "rollback-redelivers-same", "redelivered-flags", "nothing-after-commit", "queue-empty-fresh-consumer",
    },
    "client-ack": {
        "first-delivery", "first-delivery-flags", "recover-redelivers-same", "redelivered-flag",
        "nothing-after-ack", "acked-gone-fresh-consumer",
    },
    "xa-prepare": {"xid", "prepare", "prepared-sends-invisible"},
    "xa-recover-commit": {
        "recover-finds-prepared", "commit", "committed-messages-delivered", "messages-durable", "nothing-more",
        "no-longer-in-doubt",
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def dist() -> Distribution:
    return ensure_distribution()


@pytest.fixture(scope="module")
def jms_classes(dist: Distribution) -> Path:
    return build_jms(dist)


@pytest.fixture(params=["reference", "artemis"])
def broker(request: pytest.FixtureRequest, tmp_path: Path, dist: Distribution) -> Iterator[Broker]:
    target: ReferenceTarget | ArtemisTarget
    if request.param == "reference":
        target = ReferenceTarget(tmp_path / "data")
    else:
        target = ArtemisTarget(dist.home, tmp_path / "artemis-instance")
    target.start()
    try:
        yield target
    finally:
        target.stop(signal.SIGKILL)


def _queue_name() -> str:
    return f"jms.interop.{uuid.uuid4().hex[:10]}"


def assert_all_ok(run: JmsRun, broker: Broker, *scenarios: str) -> None:
    """Every check ok, none missing, exit status 0; the message lists the failing lines first."""
    message = f"{' '.join(scenarios)} against {broker.url}\n{run.report()}\nbroker log (tail):\n{broker.diagnostics()}"
    assert not run.failed(), message
    for scenario in scenarios:
        reported = {c.check for c in run.checks if c.scenario == scenario}
        missing = EXPECTED_CHECKS[scenario] - reported
        assert not missing, f"{scenario}: checks never reported: {sorted(missing)}\n{message}"
    assert run.returncode == 0, message


@pytest.mark.parametrize("scenario", ["transacted", "client-ack"])
def test_jms_local_scenarios(broker: Broker, dist: Distribution, jms_classes: Path, scenario: str) -> None:
    run = run_jms(dist, jms_classes, broker.url, _queue_name(), scenario)
    assert_all_ok(run, broker, scenario)


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_jms_xa_prepare_restart_recover_commit(
    broker: Broker, dist: Distribution, jms_classes: Path, stop_signal: signal.Signals
) -> None:
    destination = _queue_name()
    prepared = run_jms(dist, jms_classes, broker.url, destination, "xa-prepare")
    assert_all_ok(prepared, broker, "xa-prepare")
    xid = prepared.check("xa-prepare", "xid")
    assert xid is not None, prepared.report()

    broker.stop(stop_signal)
    broker.start()

    recovered = run_jms(dist, jms_classes, broker.url, destination, "xa-recover-commit", xid=xid.detail)
    assert_all_ok(recovered, broker, "xa-recover-commit")
