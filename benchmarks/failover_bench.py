"""Failover time of an HA pair (shared store and replication): the reference broker against Apache Artemis, same
machine, same run, same client.

For each repetition and broker a fresh pair is started from one descriptor (``Topology.ha_pair``: ``node0`` the
primary, ``node1`` its backup, a cluster connection between them; one store, or with replication one each); the
kit's client connects to the
primary only (reconnecting every 50 ms, forever), learns the backup from the topology and sends confirmed durable
messages; the primary is killed (SIGKILL) and the time from the kill to the first send confirmed by the backup is
the failover time (ms, monotonic clock).  Repetitions are interleaved (reference, artemis, artemis, reference,
...).  Reported per policy: the median per broker and the ratio reference/Artemis (the goal: at most 2).  Every
wait has a deadline; every broker is killed in ``finally``.

    python benchmarks/failover_bench.py --reps 5
    python benchmarks/failover_bench.py --reps 5 --policy replication
    python benchmarks/failover_bench.py --reps 3 --json docs/benchmarks-failover.json   (both policies)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

from cck.codec import CoreMessage, RoutingType
from cck.conformance.targets import ArtemisTarget, HASpec, ManagedTarget, ReferenceTarget, Topology
from cck.reference.client import ClientSettings, Connector, connect, connector_of

Policy = Literal["shared-store", "replication"]
POLICIES: tuple[Policy, ...] = ("shared-store", "replication")

#: how long the backup may take to serve the client after the kill
FAILOVER_S = 60.0
#: how long the primary's topology may take to name the backup
TOPOLOGY_S = 30.0


async def _one_failover(target: ManagedTarget) -> float:
    primary, backup = (target.topology.node(n) for n in ("node0", "node1"))
    settings = ClientSettings(reconnect_attempts=-1, retry_interval_ms=50, max_retry_interval_ms=50,
                              call_timeout_ms=int(FAILOVER_S * 1000), call_failover_timeout_ms=int(FAILOVER_S * 1000))
    async with await connect(primary.url, settings=settings) as connection:
        wanted = Connector(backup.host, backup.port)

        def paired() -> bool:
            return any(m.backup is not None and connector_of(m.backup) == wanted
                       for m in connection.core.topology.values())

        changed = asyncio.Event()
        connection.core.topology_listeners.append(lambda *_: changed.set())
        loop = asyncio.get_running_loop()
        end = loop.time() + TOPOLOGY_S
        while True:
            changed.clear()  # before the look: a change after it wakes the wait below
            if paired():
                break
            await asyncio.wait_for(changed.wait(), max(0.0, end - loop.time()))
        session = await connection.create_session()
        await session.create_queue("bench", "bench", routing_type=RoutingType.ANYCAST, durable=True)
        producer = session.create_producer("bench")
        for _ in range(10):
            await producer.send(CoreMessage(b"before", durable=True))
        killed = time.monotonic()
        await asyncio.to_thread(target.node("node0").kill)
        await asyncio.wait_for(producer.send(CoreMessage(b"after", durable=True)), FAILOVER_S)
        return (time.monotonic() - killed) * 1000


def _measure(kind: str, policy: Policy, workdir: Path) -> float:
    topology = Topology.ha_pair(HASpec(policy))
    target: ManagedTarget = (ReferenceTarget(topology, workdir) if kind == "reference"
                             else ArtemisTarget(topology, workdir))
    with target:
        return asyncio.run(_one_failover(target))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5, help="failovers per broker (default 5)")
    parser.add_argument("--policy", choices=POLICIES, action="append",
                        help="the HA policy to measure (repeatable; default: both)")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error(f"--reps must be at least 1, got {args.reps}")
    results = {policy: _policy_figures(policy, args.reps) for policy in (args.policy or POLICIES)}
    if args.json is not None:
        args.json.write_text(json.dumps({
            "machine": {"python": platform.python_version(), "system": platform.platform()},
            "reps": args.reps, "policies": results,
        }, indent=2) + "\n", encoding="utf-8")
    return 0


def _policy_figures(policy: Policy, reps: int) -> dict[str, object]:
    times: dict[str, list[float]] = {"reference": [], "artemis": []}
    order = itertools.islice(itertools.cycle(["reference", "artemis", "artemis", "reference"]), 2 * reps)
    for n, kind in enumerate(order):
        with tempfile.TemporaryDirectory(prefix=f"cck-failover-{kind}-") as workdir:
            ms = _measure(kind, policy, Path(workdir))
        times[kind].append(ms)
        print(f"[{policy} {n + 1}/{2 * reps}] {kind}: failover {ms:.0f} ms", file=sys.stderr, flush=True)
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    ratio = medians["reference"] / medians["artemis"]
    print(f"{policy}: median failover: reference {medians['reference']:.0f} ms, Artemis {medians['artemis']:.0f} ms; "
          f"reference/Artemis {ratio:.2f} (goal <= 2)")
    return {"failover_ms": times, "median_ms": medians, "ratio_reference_to_artemis": round(ratio, 3)}


if __name__ == "__main__":
    sys.exit(main())
