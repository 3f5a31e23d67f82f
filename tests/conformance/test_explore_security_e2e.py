"""The security family end to end against the in-process reference broker, configured from the family's own
topology (both realms): every login and attempt of the name space is answered allowed or refused as the model
predicts, so the oracle judges each of them and finds nothing (the unmutated broker conforms)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cck.conformance.explore import Attempt, Login, SecurityExample, run_security, security_topology
from cck.conformance.explore._security_model import ACTIONS, MAX_ATTEMPTS
from cck.conformance.explore._security_oracle import CREDENTIALS, PLACES, QUEUES, Realm
from cck.conformance.targets._config import write_etc
from cck.reference.__main__ import broker_settings
from cck.reference._server import BrokerServer
from cck.reference.broker import BrokerCore
from cck.reference.config import load_config

DEADLINE_S = 120.0
EVERY_ATTEMPT = tuple(
    Attempt(action, place)
    for action in ACTIONS
    for place in (range(len(QUEUES), len(PLACES)) if action.startswith("create") else range(len(QUEUES)))
)


@pytest.mark.parametrize("realm", ["strict", "guest"])
def test_every_answer_is_judged_and_as_the_model_says(realm: Realm, tmp_path: Path) -> None:
    # the port and data directory are only rendered: the broker below listens where the test binds it
    topology = security_topology(realm).resolve(
        tmp_path, lambda n: list(range(61700, 61700 + n)), lambda n: list(range(61800, 61800 + n))
    )
    config = load_config(write_etc(topology, topology.nodes[0].name, tmp_path / "etc"))

    async def scenario() -> list[str]:
        problems: list[str] = []
        async with BrokerServer(BrokerCore(broker_settings(config, "n1")), "127.0.0.1", 0) as server:
            urls = {realm: f"tcp://127.0.0.1:{server.bound_port}"}
            for credentials in CREDENTIALS:
                for start in range(0, len(EVERY_ATTEMPT), MAX_ATTEMPTS):
                    example = SecurityExample(realm, (Login(credentials, EVERY_ATTEMPT[start : start + MAX_ATTEMPTS]),))
                    outcome = await run_security(urls, example)
                    judgement = outcome.judgement
                    if judgement is None or judgement.findings or judgement.notes:
                        problems.append(
                            f"{example.describe()}: {outcome.describe()} "
                            f"{judgement.notes if judgement else outcome.reason}"
                        )
        return problems

    assert asyncio.run(asyncio.wait_for(scenario(), DEADLINE_S)) == []
