"""kill -9: a child process appends with sync() after each step and prints what is acknowledged; the parent
SIGKILLs it at a seeded random point, recovers, and checks that nothing acknowledged is lost or duplicated.

The child also commits transactions, updates, deletes ("acks") and compacts, on small files so that they
rotate: a kill can land in the middle of any of these.
"""

from __future__ import annotations

import os
import random
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cck.reference.journal import Journal

REPO_ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 60.0  # per child; a healthy child needs well under a second
FILE_SIZE = 2048
STEPS = 300

CHILD = r"""
import sys
from pathlib import Path
from cck.reference.journal import Journal

directory, start, steps, file_size = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
journal = Journal(directory, file_size=file_size)
recovery = journal.open()
live = {record.record_id for record in recovery.records}

def ack(*lines):
    journal.sync()
    for line in lines:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()

def intend(line):  # printed before a delete: after a kill it may or may not have happened
    sys.stdout.write(line + "\n")
    sys.stdout.flush()

def payload(record_id, version):
    return b"%d:%d:" % (record_id, version) + bytes(record_id % 97)

for i in range(start, start + steps):
    mode = i % 5
    if mode == 0:
        journal.add(i, 1, payload(i, 1))
        live.add(i)
        ack(f"add {i} 1")
    elif mode == 1:  # a transaction: send i, ack (delete) i - 1
        intend(f"try {i - 1}")
        journal.add_tx(i, i, 1, payload(i, 1))
        journal.delete_tx(i, i - 1)
        journal.commit(i)
        live.add(i)
        live.discard(i - 1)
        ack(f"add {i} 1", f"del {i - 1}")
    elif mode == 2:
        journal.add(i, 1, payload(i, 1))
        journal.update(i, 2, payload(i, 2))
        live.add(i)
        ack(f"add {i} 2")
    elif mode == 3:  # an abandoned transaction: never acknowledged, must not show
        journal.add_tx(i, i, 1, payload(i, 1))
        journal.add(i + 1_000_000, 1, payload(i + 1_000_000, 1))
        live.add(i + 1_000_000)
        ack(f"add {i + 1_000_000} 1")
    else:
        intend(f"try {i - 2}")
        journal.delete(i - 2)
        live.discard(i - 2)
        ack(f"del {i - 2}")
        if i % 40 == 4:
            intend("compacting")
            journal.compact()
            ack("compacted")
journal.close()
print("done", flush=True)
"""


def payload(record_id: int, version: int) -> bytes:
    return b"%d:%d:" % (record_id, version) + bytes(record_id % 97)


@dataclass
class Acked:
    """What the children acknowledged, across all their lives."""

    live: dict[int, int] = field(default_factory=dict)  # record id -> acknowledged version
    deleted: set[int] = field(default_factory=set)
    tried: set[int] = field(default_factory=set)  # deletes started: done or not, unknown until acknowledged

    def apply(self, line: str) -> None:
        words = line.split()
        if words[0] == "add":
            self.live[int(words[1])] = int(words[2])
        elif words[0] == "del":
            self.live.pop(int(words[1]), None)
            self.deleted.add(int(words[1]))
        elif words[0] == "try":
            self.tried.add(int(words[1]))


def run_child_and_kill(directory: Path, start: int, kill_after: int, acked: Acked, *, on: str = "") -> bool:
    """Run one child; SIGKILL it after ``kill_after`` lines (lines starting with ``on``, if given).

    Returns True if the child was killed (rather than finishing first).
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory), str(start), str(STEPS), str(FILE_SIZE)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    deadline = time.monotonic_ns() + int(DEADLINE_S * 1e9)
    buffer = b""
    lines = 0
    killed = False
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    try:
        while True:
            remaining = (deadline - time.monotonic_ns()) / 1e9
            if remaining <= 0:
                process.kill()
                pytest.fail(f"child did not finish within {DEADLINE_S}s")
            if not selector.select(timeout=remaining):
                continue
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                break  # EOF: the child exited or was killed; a line cut short is no acknowledgement
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for raw in complete:
                line = raw.decode()
                acked.apply(line)
                lines += line.startswith(on)
                if lines == kill_after and not killed:
                    process.send_signal(signal.SIGKILL)
                    killed = True
    finally:
        selector.close()
        process.stdout.close()
        stderr = process.stderr.read().decode(errors="replace")
        process.stderr.close()
        returncode = process.wait(timeout=max(1.0, (deadline - time.monotonic_ns()) / 1e9))
    if killed:
        assert returncode == -signal.SIGKILL
    else:
        assert returncode == 0, stderr
    return killed


def check_recovered(directory: Path, acked: Acked, highest_id: int) -> None:
    journal = Journal(directory, file_size=FILE_SIZE)
    recovery = journal.open()
    journal.close()
    ids = [record.record_id for record in recovery.records]
    assert len(ids) == len(set(ids)), "a record is present twice"
    present = {record.record_id: record for record in recovery.records}
    for record_id, version in list(acked.live.items()):
        if record_id not in present:
            assert record_id in acked.tried, f"acknowledged record {record_id} lost"
            acked.live.pop(record_id)  # the delete in flight at the kill did happen
            continue
        assert present[record_id].payload == payload(record_id, version)
    for record_id in acked.deleted:
        assert record_id not in present, f"acknowledged delete of {record_id} undone"
    for record in recovery.records:
        assert record.record_id % 1_000_000 <= highest_id, f"record {record.record_id} was never written"
        assert record.record_id % 5 != 3 or record.record_id >= 1_000_000, "an abandoned transaction's add showed"
        version = int(record.payload.split(b":")[1])
        assert record.payload == payload(record.record_id, version)
    assert recovery.prepared == ()


@pytest.mark.parametrize("seed", range(3))
def test_acknowledged_appends_survive_kill_9(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    acked = Acked()
    kills = 0
    for life in range(6):
        start = (life + 1) * 10_000
        if life % 2:  # kill anywhere in the first ~2/3 of the child's output (~1.7 lines per step)
            killed = run_child_and_kill(tmp_path, start, rng.randint(1, STEPS), acked)
        else:  # kill just as the child starts a compaction: it is then most likely in the middle of it
            killed = run_child_and_kill(tmp_path, start, rng.randint(1, STEPS // 40), acked, on="compacting")
        kills += killed
        check_recovered(tmp_path, acked, start + STEPS)
    assert kills >= 4, "the kill should land before the child finishes in most lives"
