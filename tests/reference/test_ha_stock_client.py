"""The stock Artemis JMS client (the pinned distribution's artemis-jms-client) fails over from a reference primary
to its reference backup, with a shared store and with replication: the program sends persistent messages, each
with its own duplicate ID, through a factory with ha=true; the primary is killed (SIGKILL) while it sends; every
message is then on the backup exactly once (a send cut off by the kill is sent again with the same ID, which the
backup, holding the primary's journal, drops when the primary had stored it)."""

from __future__ import annotations

import queue
import subprocess
import threading
from pathlib import Path

import pytest

from cck.conformance.artemis.distribution import Distribution, ensure_distribution

from .ha_pair import DEADLINE_S, LISTENING, kill, pair, write_configs
from .jms_tool import build_jms, jms_command, parse_check, run_jms

pytestmark = pytest.mark.artemis

COUNT = 200
#: the primary is killed once the program reports this many messages sent
KILL_AFTER = 60
PROGRAM_S = 120.0


@pytest.fixture(scope="module")
def dist() -> Distribution:
    return ensure_distribution()


@pytest.mark.parametrize("policy", ["shared-store", "replication"])
def test_the_stock_client_fails_over_to_the_backup_and_nothing_is_lost_or_doubled(tmp_path: Path, dist: Distribution,
                                                                                   policy: str) -> None:
    classes = build_jms(dist)
    ports = write_configs(tmp_path, policy=policy)
    primary, backup = pair(tmp_path)
    try:
        command = jms_command(dist, classes, f"tcp://127.0.0.1:{ports[0]}", "ha", "ha-send", count=COUNT,
                              scenario_deadline_s=PROGRAM_S)
        program = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue[str | None] = queue.Queue()
        output: list[str] = []

        def pump() -> None:
            assert program.stdout is not None
            for line in program.stdout:
                output.append(line)
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        killed = False
        while True:
            try:
                line = lines.get(timeout=PROGRAM_S)
            except queue.Empty:
                program.kill()
                raise AssertionError(f"the program printed nothing for {PROGRAM_S:.0f} s: {''.join(output)}") from None
            if line is None:
                break
            check = parse_check(line)
            if check is not None and check.check == "progress" and int(check.detail) >= KILL_AFTER and not killed:
                kill(primary)
                killed = True
        code = program.wait(timeout=PROGRAM_S)
        stderr = program.stderr.read() if program.stderr is not None else ""
        assert killed, f"the primary was never killed (no progress line past {KILL_AFTER}): {''.join(output)}"
        assert code == 0, f"the sending program failed ({code}): {''.join(output)}\n{stderr[-3000:]}"
        backup.wait_for(LISTENING, DEADLINE_S)  # it serves (the client reached it, so it did already)
        received = run_jms(dist, classes, f"tcp://127.0.0.1:{ports[1]}", "ha", "ha-receive", count=COUNT)
        check = received.check("ha-receive", "received")
        assert check is not None, received.report()
        bodies = check.detail.split(",") if check.detail else []
        duplicated = sorted({b for b in bodies if bodies.count(b) > 1})
        missing = sorted({f"ha-{i}" for i in range(COUNT)} - set(bodies))
        assert not duplicated, f"{len(duplicated)} message(s) on the backup twice: {duplicated[:20]}"
        assert not missing, f"{len(missing)} message(s) lost: {missing[:20]}"
    finally:
        kill(primary, backup)
