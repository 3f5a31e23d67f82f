"""The reference broker started on the broker.xml (and users/roles/login files)
that `artemis create` 2.44.0 generates: unsupported elements are reported by
name, declared queues exist, and a stock client authenticates against the users
file."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from .conftest import artemis_cli, start_reference_broker, stop_reference_broker

pytestmark = pytest.mark.artemis
DATA = Path(__file__).parent / "data" / "artemis-2.44.0-create" / "etc"


def test_generated_instance_configuration(tmp_path: Path, artemis_home: Path) -> None:
    etc = tmp_path / "etc"
    shutil.copytree(DATA, etc)
    # The generated admin password is hashed (ENC(...)), which the reference broker does not
    # verify (it says so at start); give the test its own plain-text user.
    (etc / "artemis-users.properties").write_text("tester = secret\n", encoding="utf-8")
    (etc / "artemis-roles.properties").write_text("amq = tester\n", encoding="utf-8")
    broker = start_reference_broker(tmp_path / "data", "--config", str(etc / "broker.xml"), "--host", "127.0.0.1")
    try:
        log = "".join(broker.log)
        for element in ("critical-analyzer", "journal-pool-files", "max-disk-usage"):
            assert f'"element": "{element}"' in log, f"{element} not reported"
        destination = "--destination=queue://DLQ"
        sent = artemis_cli(artemis_home, "producer", "--url", broker.url, "--user", "tester", "--password", "secret",
                           "--message-count=3", destination)
        assert "Produced: 3 messages" in sent.stdout, sent.stdout + sent.stderr
        refused = artemis_cli(artemis_home, "producer", "--url", broker.url, "--user", "tester",
                              "--password", "wrong", "--message-count=1", f"--destination=queue://x.{uuid.uuid4().hex}")
        assert "Produced: 1 messages" not in refused.stdout
        got = artemis_cli(artemis_home, "consumer", "--url", broker.url, "--user", "tester", "--password", "secret",
                          "--message-count=3", destination)
        assert "Consumed: 3 messages" in got.stdout, got.stdout + got.stderr
    finally:
        stop_reference_broker(broker)
