"""A throughput client built on the kit's own Python client, shaped like ``artemis perf client``.

One producer process and one consumer process (like the perf client's producer and consumer
threads, they can use both cores), one anycast queue, ``--message-size`` byte bodies, at most
``--max-pending`` sends not yet answered by the broker.  Both processes start on the same
``CLOCK_MONOTONIC`` instant (shared by every process on Linux) and count per one-second
interval; the parent prints the counts in the perf client's own output format, so the same
parser reads both clients:

    --- warmup false
    --- sent:          12345 msg/sec
    --- completed:     12345 msg/sec
    --- received:      12340 msg/sec
    ...
    --- SUMMARY
    --- result:              success
    --- total sent:          ...

    python benchmarks/kit_perf_client.py --url tcp://127.0.0.1:61616 --persistent --duration 15 --warmup 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[1]
if str(_REPO_ROOT) not in sys.path:  # run as a script: make `reference` and `codec` importable
    sys.path.insert(0, str(_REPO_ROOT))

READY_DEADLINE_S = 60.0
SLACK_S = 60.0  # on top of warmup + duration for a role process to report
START_DELAY_S = 0.5  # both roles start this long after the parent says go
#: the JMS session's acknowledgement batch in bytes (ServerLocator ackBatchSize, default 1 MiB)
ACK_BATCH_BYTES = 1024 * 1024

StartSource = Callable[[], Awaitable[float]]


@dataclass(frozen=True)
class Plan:
    url: str
    queue: str
    message_size: int
    max_pending: int
    durable: bool
    warmup: int
    duration: int

    @property
    def seconds(self) -> int:
        return self.warmup + self.duration


def _interval(start: float, now: float, seconds: int) -> int | None:
    index = int(now - start)
    return index if 0 <= index < seconds else None


async def _producer(plan: Plan, get_start: StartSource) -> dict[str, list[int]]:
    from cck.codec import CoreMessage
    from cck.reference.client import connect

    sent = [0] * plan.seconds
    completed = [0] * plan.seconds
    async with await connect(plan.url) as connection:  # the URL's parameters are the client's settings
        session = await connection.create_session()
        producer = session.create_producer(plan.queue)
        body = os.urandom(plan.message_size)
        message = CoreMessage(body, address=plan.queue, durable=plan.durable)
        pending = asyncio.Semaphore(plan.max_pending)
        print("ready", flush=True)
        start = await get_start()
        end = start + plan.seconds

        def answered(_: object) -> None:
            pending.release()
            index = _interval(start, time.monotonic(), plan.seconds)
            if index is not None:
                completed[index] += 1

        await asyncio.sleep(max(0.0, start - time.monotonic()))
        while (now := time.monotonic()) < end:
            await pending.acquire()
            future = await producer.send_async(message)
            index = _interval(start, now, plan.seconds)
            if index is not None:
                sent[index] += 1
            if future is None:  # no confirmation window: nothing will answer
                answered(None)
            else:
                future.add_done_callback(answered)
        for _ in range(plan.max_pending):  # let every send in flight be answered before closing
            await asyncio.wait_for(pending.acquire(), SLACK_S)
    return {"sent": sent, "completed": completed}


async def _consumer(plan: Plan, get_start: StartSource) -> dict[str, list[int]]:
    from cck.codec import RoutingType
    from cck.reference.client import BrokerRefused, connect

    received = [0] * plan.seconds
    async with await connect(plan.url) as connection:  # the URL's parameters are the client's settings
        session = await connection.create_session()
        with contextlib.suppress(BrokerRefused):  # already there
            await session.create_queue(plan.queue, plan.queue, routing_type=RoutingType.ANYCAST, durable=True)
        consumer = await session.create_consumer(plan.queue)
        session.start()
        print("ready", flush=True)
        start = await get_start()
        end = start + plan.seconds
        unacked_bytes, last = 0, None
        while (remaining := end - time.monotonic()) > 0:
            delivery = await consumer.receive(remaining)
            if delivery is None:
                continue
            # As the perf client's JMS AUTO_ACKNOWLEDGE session does: one cumulative acknowledgement per
            # ackBatchSize bytes (Artemis's default, 1 MiB), not one per message.
            last, unacked_bytes = delivery, unacked_bytes + plan.message_size
            if unacked_bytes >= ACK_BATCH_BYTES:
                await consumer.acknowledge(delivery)
                unacked_bytes = 0
            index = _interval(start, time.monotonic(), plan.seconds)
            if index is not None:
                received[index] += 1
        if unacked_bytes and last is not None:
            await consumer.acknowledge(last)
    return {"received": received}


def _role_main(role: str, plan: Plan) -> int:
    """A role process: connect, print "ready", read the start instant from stdin, run, print the counts."""

    async def get_start() -> float:
        line = await asyncio.wait_for(asyncio.to_thread(sys.stdin.readline), READY_DEADLINE_S)
        return float(line)

    body = _producer if role == "producer" else _consumer
    counts = asyncio.run(body(plan, get_start))
    print(json.dumps(counts), flush=True)
    return 0


def _await_ready(process: subprocess.Popen[str], role: str) -> None:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], READY_DEADLINE_S)
    line = process.stdout.readline() if ready else ""
    if line.strip() != "ready":
        process.kill()
        _, err = process.communicate(timeout=10)
        raise RuntimeError(f"kit perf {role} not ready within {READY_DEADLINE_S:g}s (said {line!r}):\n{err[-3000:]}")


def run_client(plan: Plan) -> str:
    """Run both roles and return the output in the perf client's format."""
    processes = {}
    for role in ("consumer", "producer"):  # the consumer creates the queue
        processes[role] = subprocess.Popen(
            [sys.executable, __file__, "--role", role, *_plan_args(plan)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
    try:
        for role, process in processes.items():
            _await_ready(process, role)
        start = time.monotonic() + START_DELAY_S
        for process in processes.values():
            assert process.stdin is not None
            process.stdin.write(f"{start!r}\n")
            process.stdin.flush()
        counts: dict[str, list[int]] = {}
        for role, process in processes.items():
            try:
                out, err = process.communicate(timeout=START_DELAY_S + READY_DEADLINE_S + plan.seconds + SLACK_S)
            except subprocess.TimeoutExpired:
                raise TimeoutError(f"kit perf {role} did not finish in time") from None
            if process.returncode != 0:
                raise RuntimeError(f"kit perf {role} exited {process.returncode}:\n{err[-3000:]}")
            lines = [line for line in out.splitlines() if line.startswith("{")]
            if not lines:
                raise RuntimeError(f"kit perf {role} printed no counts:\n{out[-2000:]}\n{err[-2000:]}")
            counts |= json.loads(lines[-1])
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
    return format_perf_output(plan, counts)


def format_perf_output(plan: Plan, counts: dict[str, list[int]]) -> str:
    lines = []
    for i in range(plan.seconds):
        lines.append(f"--- warmup {'true' if i < plan.warmup else 'false'}")
        for name in ("sent", "completed", "received"):
            lines.append(f"--- {name}: {counts[name][i]:>14} msg/sec")
    totals = {name: sum(counts[name]) for name in ("sent", "completed", "received")}
    lines.append("--- SUMMARY")
    lines.append(f"--- result: {'success' if totals['received'] > 0 else 'fail'}")
    for name, total in totals.items():
        lines.append(f"--- total {name}: {total}")
    return "\n".join(lines) + "\n"


def _plan_args(plan: Plan) -> list[str]:
    args = [f"--url={plan.url}", f"--queue={plan.queue}", f"--message-size={plan.message_size}",
            f"--max-pending={plan.max_pending}", f"--warmup={plan.warmup}", f"--duration={plan.duration}"]  # fmt: skip
    return [*args, "--persistent"] if plan.durable else args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--url", default="tcp://127.0.0.1:61616?confirmationWindowSize=1048576")
    parser.add_argument("--queue", default="BENCH")
    parser.add_argument("--message-size", type=int, default=1024)
    parser.add_argument("--max-pending", type=int, default=100)
    parser.add_argument("--persistent", action="store_true", help="durable messages")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--duration", type=int, default=15)
    parser.add_argument("--role", choices=["producer", "consumer"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    plan = Plan(args.url, args.queue, args.message_size, args.max_pending, args.persistent, args.warmup,
                args.duration)  # fmt: skip
    if args.role is not None:
        return _role_main(args.role, plan)
    print(run_client(plan), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
