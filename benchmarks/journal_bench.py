"""Appends/s of the reference broker's journal: an fsync per append against group commit.

Four modes, each adding ``--payload``-byte records to a fresh journal in ``--dir``
(which must be on the disk you care about: a tmpfs makes fsync free):

* ``sync-each``: ``add`` then ``sync()`` -- one fsync per append;
* ``group-N``: ``N`` adds then one ``sync()`` (group commit, N = ``--group``);
* ``threaded-N``: as the broker does it: ``begin_sync()`` after ``N`` adds, its fsync in a
  worker thread while the next ``N`` adds are made, at most one fsync in flight;
* ``no-fsync``: ``Journal(sync=False)``, ``sync()`` every N -- the writes alone, the ceiling.

Each mode runs for about ``--seconds``; reported: appends/s and the ratio of each to
``sync-each``.

    python benchmarks/journal_bench.py --seconds 3 --payload 1024 --group 100
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[1]
if str(_REPO_ROOT) not in sys.path:  # run as a script: make `reference` importable
    sys.path.insert(0, str(_REPO_ROOT))

from cck.reference.journal import Journal, PendingSync  # noqa: E402


def run(directory: Path, *, group: int, fsync: bool, payload: bytes, seconds: float) -> float:
    """Appends/s: batches of ``group`` adds, each batch followed by one sync(), for about ``seconds``."""
    journal = Journal(directory, sync=fsync)
    journal.open()
    record_id = 0
    deadline_ns = int(seconds * 1e9)
    start = time.monotonic_ns()
    elapsed = 0
    while elapsed < deadline_ns:
        for _ in range(group):
            journal.add(record_id, 1, payload)
            record_id += 1
        journal.sync()
        elapsed = time.monotonic_ns() - start
    journal.close()
    return record_id / (elapsed / 1e9)


def run_threaded(directory: Path, *, group: int, payload: bytes, seconds: float) -> float:
    """Appends/s with each group's fsync in a worker thread, overlapping the next group's adds."""
    journal = Journal(directory)
    journal.open()
    record_id = 0
    deadline_ns = int(seconds * 1e9)
    start = time.monotonic_ns()
    elapsed = 0
    in_flight: tuple[PendingSync, Future[None]] | None = None
    with ThreadPoolExecutor(max_workers=1) as worker:
        while elapsed < deadline_ns:
            for _ in range(group):
                journal.add(record_id, 1, payload)
                record_id += 1
            if in_flight is not None:  # at most one fsync in flight: the next waits for it
                pending, future = in_flight
                future.result()
                pending.done()
            started = journal.begin_sync()
            assert started is not None
            in_flight = started, worker.submit(started.wait)
            elapsed = time.monotonic_ns() - start
        if in_flight is not None:
            in_flight[1].result()
            in_flight[0].done()
    journal.close()
    return record_id / (elapsed / 1e9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per mode (default 2)")
    parser.add_argument("--payload", type=int, default=1024, help="record payload bytes (default 1024)")
    parser.add_argument("--group", type=int, default=100, help="appends per sync() in group mode (default 100)")
    parser.add_argument("--dir", type=Path, default=None, help="parent folder of the scratch journals")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)

    payload = bytes(args.payload)
    scratch = Path(tempfile.mkdtemp(prefix="journal-bench-", dir=args.dir))
    modes = [("sync-each", 1, True), (f"group-{args.group}", args.group, True), ("no-fsync", args.group, False)]
    results: dict[str, float] = {}
    try:
        for name, group, fsync in modes:
            results[name] = run(scratch / name, group=group, fsync=fsync, payload=payload, seconds=args.seconds)
        threaded = f"threaded-{args.group}"
        results[threaded] = run_threaded(scratch / threaded, group=args.group, payload=payload, seconds=args.seconds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    base = results["sync-each"]
    print(f"journal appends/s, {args.payload}-byte payloads, {args.seconds:g} s per mode, in {scratch.parent}")
    for name, rate in results.items():
        print(f"  {name:<12} {rate:>12,.0f} appends/s   {rate / base:>8.1f}x sync-each")
    if args.json is not None:
        args.json.write_text(json.dumps({"payload": args.payload, "appends_per_s": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
