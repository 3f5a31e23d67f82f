"""HA soak (outside CI): seeded kill -9s alternating across the primary and the backup of a shared-store or a
replication pair under load, then a final drain and a judgement of every send and acknowledgement the clients saw.

The pair is ``Topology.ha_pair`` with allow-failback (``--policy``: ``shared-store``, the default, or
``replication``, whose restarted primary checks for a live server: ``conformance/suite/_ha_kit.ha_spec``):
``node0`` the primary, ``node1`` its backup.  ``--producers`` and ``--consumers`` clients of the kit (each on its own
connection, given the primary's URL only: the backup is learnt from the topology; reconnecting every 100 ms,
forever) run the whole time on one durable anycast queue.  A producer sends durable keyed messages, each carrying
its key as duplicate ID (``_AMQ_DUPL_ID``); a send that returned is confirmed (blocking durable sends); one whose
outcome is unknown (FailoverInterrupted, CallTimeout, a refusal during the move) is sent again with the same key
until it is confirmed.  A consumer acknowledges each message individually and blocking (``block_on_acknowledge``):
an acknowledgement that returned is confirmed, one that raised is in doubt, except for a delivery received before
its session was recreated on the other server: the client refuses to acknowledge that one (DeliveryFromLostSession:
known not acknowledged) and the message's redelivery is acknowledged instead.

The kills come from the seed (:func:`schedule`): odd kills hit the primary, even ones the backup.

Shared store.  After a kill of the primary the kit waits until the backup serves (a client's session created on
it), lets it serve alone for a seeded while, then either starts the primary again (it takes the store back:
failback) or, with the ``--both-down`` probability, kills the backup too while it is the one serving: nothing
serves until the kit starts the backup (it activates on the free store), waits for every client to be back on it
(``--eager-failback``: not) and starts the primary (failback).  A kill of the backup while it waits is followed by
its start.

Replication.  The primary is killed only while its backup holds its whole state (the backup said it is
synchronised); the backup then takes over, serves alone for a seeded while, and the kit starts the primary again:
it synchronises from the backup, which hands back to it (failback) and follows it again.  A kill of the backup
leaves the primary serving alone: every client must make progress on it (the primary keeps confirming sends); after
a seeded while the kit starts the backup and waits until it says it is synchronised.  With the ``--both-down``
probability the backup stays down instead and the next kill takes the primary while it serves alone: nothing serves
until the kit starts the primary (it holds the latest state; with nothing live to check for, it activates on its own
journal) and then the backup (synchronised from it).  The schedule never kills the only holder of the latest state
while its partner is not synchronised (a backup serving alone, or a primary whose backup has not synchronised):
a replication pair loses what only that server held (the partner cannot take over, or activates on an older
journal), which is the policy's limit, not a broker's anomaly.

Between kills the pair is whole (replication: a backup started again said it is synchronised), every client has
made progress since the restore (one confirmed send per producer, one receipt per consumer) and is on the primary
with the backup learnt from its topology (a backup that handed back announces itself to the primary again first);
then a seeded pause.  Every wait has a deadline.  A replication backup that handed back synchronises again in the
same process: the kit waits for no log line of it (the target's synchronised line is read from the process's
start), only for its announcement (the reference backup makes it once synchronised); the next kill is the
backup's, which loses nothing, and the primary is killed again only after the backup's next start said it is
synchronised.

At the end the producers stop (each finishes its message), the consumers take every confirmed message, they are
closed, and a final consumer drains the queue up to a fence sent to its tail.  The judgement (:func:`judge`):

* lost: a confirmed send never received;
* stored twice: a key received under two broker message IDs (the store held the message twice: the duplicate ID
  did not stop a retried send), or acknowledged (confirmed) twice;
* ack lost: a message delivered again after its acknowledgement was confirmed;
* unexpected: a receipt of a key never sent;
* left: messages still in the queue after the final drain;
* stalls: the pair or the clients not back within the deadlines;
* exits: a server whose process ended although the soak neither killed nor stopped it.  The soak notes its exit
  status and last log lines, starts it again (as a supervisor would; under replication a backup is waited for
  until it says it is synchronised) and goes on, so that the rest of the run is still measured.

Redeliveries of messages whose acknowledgement was not confirmed are allowed, whatever their delivery count (a
killed server does not persist delivery counts before delivery by default, so they may come back with count 1),
and so is the order of first deliveries across a move (a consumer's buffered messages go to other consumers):
both are counted in the evidence, not judged.  Exit status 0: nothing anomalous; 1: an anomaly (or the soak
aborted); 2: bad arguments.

    python benchmarks/ha_soak.py --target reference --kills 200 --seed 1 --json soak.json
    python benchmarks/ha_soak.py --target reference --policy replication --kills 200 --seed 1
    python benchmarks/ha_soak.py --target artemis --artemis-version 2.44.0 --kills 200 --seed 1
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import json
import logging
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import cck
from cck.codec import CURRENT_VERSION, CoreMessage, RoutingType, TypedProperties
from cck.conformance.oracles import ACK, SEND, History, HistoryResult, check
from cck.conformance.suite._ha_kit import POLICIES, Policy, acceptor, ha_spec
from cck.conformance.targets import (
    ArtemisTarget,
    ManagedTarget,
    ProcessNode,
    ReferenceTarget,
    TargetError,
    Topology,
    pinned_artemis_versions,
)
from cck.reference.client import (
    BrokerRefused,
    CallTimeout,
    ClientError,
    ClientSettings,
    Connection,
    ConnectionFailed,
    Consumer,
    Delivery,
    DeliveryFromLostSession,
    FailoverEvent,
    FailoverInterrupted,
    Producer,
    connect,
)

PRIMARY: Final = "node0"
BACKUP: Final = "node1"
QUEUE = "cck.ha-soak"
#: the property every message carries as its duplicate ID (Artemis's Message.HDR_DUPLICATE_DETECTION_ID)
DUPLICATE_ID = "_AMQ_DUPL_ID"
#: the property of the final drain's fence (never a key)
FENCE = "cck_soak_fence"

#: how long a server may take to serve after a kill or a start (a JVM loading a journal takes seconds)
SERVE_S = 120.0
#: how long every client may take to make progress once the pair is whole again
PROGRESS_S = 120.0
#: how long one message may take to be confirmed, retries included
SEND_S = 300.0
#: how long the consumers may take to receive every confirmed message at the end
DRAIN_S = 300.0
#: a consumer's receive wakes at least this often to notice the end of the soak
RECEIVE_S = 1.0

#: reconnect every 100 ms forever; blocking durable sends and acknowledgements: a call that returned is confirmed
CLIENT = ClientSettings(reconnect_attempts=-1, retry_interval_ms=100, max_retry_interval_ms=100,
                        call_timeout_ms=30_000, call_failover_timeout_ms=90_000,
                        block_on_durable_send=True, block_on_acknowledge=True)

#: what makes a call's outcome unknown (retried with the same duplicate ID, or recorded as in doubt)
IN_DOUBT = (FailoverInterrupted, CallTimeout, ConnectionFailed, BrokerRefused)


# ---------------------------------------------------------------------------------------------------- the schedule

@dataclass(frozen=True)
class Kill:
    """One kill of the schedule."""

    #: 1-based position in the schedule
    index: int
    node: Literal["node0", "node1"]
    #: ``serving``: the server is the active one when killed; ``waiting``: a backup waiting to take over (for the
    #: shared store; under replication, following its primary)
    state: Literal["serving", "waiting"]
    #: seconds between the pair being back (whole, or one server serving alone before a kill of it) and this kill
    pause_s: float
    #: seconds the other server serves alone before the kit starts the killed one again (a kill of the primary; under
    #: replication, of the backup too); None: the next kill takes the server left serving alone, or (a shared-store
    #: backup that waited, a kill that left both servers down) the kit starts the killed one at once
    alone_s: float | None = None
    #: after this kill neither server runs (a shared-store backup serving alone; a replication primary serving
    #: alone, its backup down since the kill before)
    both_down: bool = False

    @property
    def role(self) -> str:
        return "primary" if self.node == PRIMARY else "backup"

    @property
    def label(self) -> str:
        """Its role and state, and a primary's backup already down (what the evidence counts kills by)."""
        return f"{self.role} ({self.state}{', backup down' if self.node == PRIMARY and self.both_down else ''})"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "node": self.node, "role": self.role, "state": self.state,
                "pause_s": self.pause_s, "alone_s": self.alone_s, "both_down": self.both_down}


def schedule(kills: int, seed: int, *, policy: Policy = "shared-store", both_down: float = 0.25,
             pause_s: tuple[float, float] = (0.5, 1.5), alone_s: tuple[float, float] = (0.5, 1.5)) -> tuple[Kill, ...]:
    """``kills`` kills drawn from ``seed``: the primary at odd positions, the backup at even ones; pauses uniform in
    ``pause_s`` and ``alone_s`` (seconds, rounded to ms).  The same arguments give the same schedule.

    ``shared-store``: the backup is killed while it serves alone (both servers down then) with probability
    ``both_down``, else while it waits after the primary took the store back.  ``replication``: every kill of the
    primary finds its backup running (the soak waits for it to synchronise first) and every kill of the backup finds
    it waiting; with probability ``both_down`` the backup stays down until the next kill, of the primary serving
    alone (both servers down then), else it is started again after the primary served alone.  A replication
    backup is never killed while it serves alone: the primary's journal is older than its own, so the pair could
    only come back without what the backup alone confirmed."""
    if kills < 1:
        raise ValueError(f"kills must be >= 1, got {kills}")
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if not 0.0 <= both_down <= 1.0:
        raise ValueError(f"both_down is a probability (0 to 1), got {both_down}")
    for name, (low, high) in (("pause_s", pause_s), ("alone_s", alone_s)):
        if not 0.0 <= low <= high:
            raise ValueError(f"{name} must be 0 <= min <= max, got {low}, {high}")
    rng = random.Random(seed)
    out: list[Kill] = []
    backup_down = False  # replication: the backup kill before this pair left it down
    for index in range(1, kills + 1, 2):
        # four draws per pair of kills whatever is chosen (a fifth under replication): a schedule's prefix does not
        # depend on its length
        pause, alone, next_pause = (round(rng.uniform(*pause_s), 3), round(rng.uniform(*alone_s), 3),
                                    round(rng.uniform(*pause_s), 3))
        draw = rng.random()
        if policy == "replication":
            primary_alone = round(rng.uniform(*alone_s), 3)
            out.append(Kill(index, PRIMARY, "serving", pause, None if backup_down else alone, both_down=backup_down))
            # the backup stays down only when a kill of the primary follows
            backup_down = draw < both_down and index + 2 <= kills
            if index < kills:
                out.append(Kill(index + 1, BACKUP, "waiting", next_pause, None if backup_down else primary_alone))
        elif draw < both_down and index < kills:
            out += [Kill(index, PRIMARY, "serving", pause), Kill(index + 1, BACKUP, "serving", alone, both_down=True)]
        else:
            out.append(Kill(index, PRIMARY, "serving", pause, alone))
            if index < kills:
                out.append(Kill(index + 1, BACKUP, "waiting", next_pause))
    return tuple(out)


# ---------------------------------------------------------------------------------------------------- the judgement

@dataclass(frozen=True)
class Verdict:
    """What the soak found: ``anomalies`` fail it (exit status 1), ``allowed`` are counted for the record."""

    ok: bool
    anomalies: dict[str, int]
    allowed: dict[str, int]
    #: a few keys of each anomaly, to start an investigation from
    examples: dict[str, list[str]]


def judge(result: HistoryResult, message_ids: Mapping[str, set[int]], acks_confirmed: Mapping[str, int], *,
          left: int, stalls: int, aborted: str | None = None, exits: int = 0) -> Verdict:
    """The soak's verdict from the history checker's ``result`` (judged with a complete final drain and duplicates
    allowed), the broker message IDs each key was received under, the confirmed acknowledgements per key, the
    messages left in the queue after the final drain, the stalls and the servers that ended on their own.  See the
    module's docstring."""
    twice = sorted(k for k, ids in message_ids.items() if len(ids) > 1)
    acked_twice = sorted(k for k, n in acks_confirmed.items() if n > 1)
    stored_twice = sorted(set(twice) | set(acked_twice))
    anomalies = {
        "lost": result.lost.count,
        "stored_twice": len(stored_twice),
        "ack_lost": result.ack_lost.count,
        "unexpected": result.unexpected.count,
        "left_in_queue": left,
        "stalls": stalls,
        "exits": exits,
        "aborted": int(aborted is not None),
    }
    allowed = {
        "redelivered": result.duplicated.count,
        "order_violations": result.order_violations.count,
        "redelivery_mismatches": result.redelivery_mismatches.count,
        "indeterminate_sends": result.indeterminate,
        "recovered_sends": result.recovered,
    }
    examples = {
        "lost": [f.key for f in result.lost.examples[:10]],
        "stored_twice": stored_twice[:10],
        "ack_lost": [f.key for f in result.ack_lost.examples[:10]],
        "unexpected": [f.key for f in result.unexpected.examples[:10]],
    }
    return Verdict(not any(anomalies.values()), anomalies, allowed, {k: v for k, v in examples.items() if v})


# ---------------------------------------------------------------------------------------------------- the clients

def _raise_if_failed(task: asyncio.Task[None]) -> None:
    if task.done() and not task.cancelled() and task.exception() is not None:
        raise RuntimeError(f"client {task.get_name()} failed: {task.exception()!r}") from task.exception()


def _key(delivery: Delivery) -> tuple[str, str, int]:
    """(key, producer, seq) of a delivered message."""
    props = delivery.message.properties
    key, seq = props.get("key"), props.get("seq")
    text = key.decode() if isinstance(key, bytes) else str(key)
    return text, text.rpartition(":")[0], int(str(seq))


@dataclass
class _Client:
    """One producer or consumer: what it did, for progress and the evidence."""

    name: str
    done: int = 0  # confirmed sends, or receipts
    in_doubt: int = 0  # sends retried, or acknowledgements in doubt
    failovers: int = 0  # the connection's sessions restored (recreated or reattached)
    connection_failures: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    #: its connection, while it runs (for a stall's diagnosis)
    connection: Connection | None = field(default=None, repr=False, compare=False)

    def where(self) -> str:
        """The server it uses or tries, the backups it would try after it, its last failover events."""
        if self.connection is None:
            return f"{self.name}: no connection"
        machine = self.connection.machine
        # from its last loss on: the candidates its reconnection walks
        events = list(self.connection.events)
        lost = max((i for i, e in enumerate(events) if e.kind == "failed"), default=0)
        shown = [f"{e.kind}@{e.connector} {e.at_ms} {e.detail}".rstrip() for e in events[lost:lost + 8]]
        events_text = ", ".join(shown) + (f" ... ({len(events) - lost} since the loss)" if len(events) > lost + 8
                                          else "")
        return (f"{self.name}: on {machine.connector}, then {[str(b) for b in machine.backups]}, "
                f"{machine.state.value}; events from its last loss: {events_text}")


class Traffic:
    """The producers and consumers, their history, and the waits on their progress."""

    def __init__(self, url: str, settings: ClientSettings, producers: int, consumers: int, rate: float) -> None:
        self.url = url
        self.settings = settings
        self.rate = rate
        self.history = History()
        self.producers = [_Client(f"producer{i}") for i in range(1, producers + 1)]
        self.consumers = [_Client(f"consumer{i}") for i in range(1, consumers + 1)]
        self.confirmed: set[str] = set()
        self.received: set[str] = set()
        self.message_ids: defaultdict[str, set[int]] = defaultdict(set)
        self.acks_confirmed: Counter[str] = Counter()
        self.stop_sending = asyncio.Event()
        self.stop_receiving = asyncio.Event()
        self.changed = asyncio.Condition()
        self.tasks: list[asyncio.Task[None]] = []
        self._ended: list[asyncio.Future[None]] = []

    # -- progress ---------------------------------------------------------------------------------------------

    def mark(self) -> tuple[int, ...]:
        return tuple(c.done for c in (*self.producers, *self.consumers))

    def idle_since(self, since: tuple[int, ...]) -> list[_Client]:
        """The clients that did nothing since ``since`` (a :meth:`mark`)."""
        clients = (*self.producers, *self.consumers)
        return [c for c, then in zip(clients, since, strict=True) if c.done <= then]

    async def progressed(self, since: tuple[int, ...], deadline_s: float) -> bool:
        """Until every client did something since ``since`` (a :meth:`mark`); False at the deadline.  A client
        task that ended (an error) ends the wait at once: its error is raised."""
        def moved() -> bool:
            self._raise_failed()
            return all(now > then for now, then in zip(self.mark(), since, strict=True))
        return await self._wait(moved, deadline_s)

    async def all_received(self, deadline_s: float) -> bool:
        """Until every confirmed send has been received; False at the deadline."""
        return await self._wait(lambda: self._raise_failed() or self.confirmed <= self.received, deadline_s)

    async def wait_until(self, predicate: Callable[[], bool], deadline_s: float) -> bool:
        """Until ``predicate`` holds, looked at whenever a client did something; False at the deadline."""
        return await self._wait(lambda: self._raise_failed() or predicate(), deadline_s)

    async def _wait(self, predicate: Callable[[], bool], deadline_s: float) -> bool:
        async with self.changed:
            try:
                await asyncio.wait_for(self.changed.wait_for(predicate), deadline_s)
            except TimeoutError:
                return False
        return True

    def _raise_failed(self) -> bool:
        for task in self.tasks:
            _raise_if_failed(task)
        return False

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    # -- the clients ------------------------------------------------------------------------------------------

    def start(self) -> None:
        runs = [(c, self._produce) for c in self.producers] + [(c, self._consume) for c in self.consumers]
        for client, run in runs:
            task = asyncio.create_task(run(client), name=client.name)
            # a client that ends (an error) wakes the waits on progress, which raise its error
            task.add_done_callback(lambda _: self._ended.append(asyncio.ensure_future(self._notify())))
            self.tasks.append(task)

    def _watch(self, client: _Client, event: FailoverEvent) -> None:
        if event.kind in ("recreated", "reattached"):
            client.failovers += 1
        elif event.kind == "failed":
            client.connection_failures += 1

    async def _produce(self, client: _Client) -> None:
        loop = asyncio.get_running_loop()
        async with await connect(self.url, settings=self.settings) as connection:
            connection.add_event_listener(lambda event: self._watch(client, event))
            client.connection = connection
            session = await connection.create_session()
            producer = session.create_producer(QUEUE)
            seq, due = 0, loop.time()
            while not self.stop_sending.is_set():
                seq += 1
                await self._send(client, producer, f"{client.name}:{seq}", seq)
                await self._notify()
                if self.rate > 0:
                    due = max(due + 1 / self.rate, loop.time() - 1 / self.rate)
                    await asyncio.sleep(max(0.0, due - loop.time()))  # pacing, not a wait on a condition

    async def _send(self, client: _Client, producer: Producer, key: str, seq: int) -> None:
        """Send until confirmed, always with the same duplicate ID."""
        message = CoreMessage(key.encode(), durable=True,
                              properties=TypedProperties.of({"key": key, "seq": seq, DUPLICATE_ID: key}))
        end = time.monotonic() + SEND_S
        while True:
            self.history.invoke_send(client.name, key, producer=client.name, seq=seq)
            try:
                await producer.send(message)
            except IN_DOUBT as exc:
                self.history.info(client.name, SEND, key, producer=client.name, seq=seq)
                client.in_doubt += 1
                client.errors[type(exc).__name__] += 1
                if time.monotonic() > end:
                    raise RuntimeError(f"{key}: not confirmed within {SEND_S:.0f} s: {exc}") from exc
                continue
            self.history.ok(client.name, SEND, key, producer=client.name, seq=seq)
            self.confirmed.add(key)
            client.done += 1
            return

    async def _consume(self, client: _Client) -> None:
        async with await connect(self.url, settings=self.settings) as connection:
            connection.add_event_listener(lambda event: self._watch(client, event))
            client.connection = connection
            session = await connection.create_session()
            consumer = await session.create_consumer(QUEUE)
            session.start()
            while not self.stop_receiving.is_set():
                delivery = await consumer.receive(RECEIVE_S)
                if delivery is not None:
                    await self.take(client, consumer, delivery)
                    await self._notify()

    async def take(self, client: _Client, consumer: Consumer, delivery: Delivery) -> None:
        """Record a receipt and acknowledge it (blocking: confirmed, or in doubt)."""
        key, producer, seq = _key(delivery)
        self.history.received(client.name, key, delivery_count=delivery.delivery_count,
                              redelivered=delivery.delivery_count > 1, producer=producer, seq=seq)
        self.received.add(key)
        self.message_ids[key].add(delivery.message_id)
        client.done += 1
        self.history.invoke_ack(client.name, key)
        try:
            await consumer.individual_acknowledge(delivery)
        except DeliveryFromLostSession as exc:  # known not acknowledged: the message comes again
            self.history.fail(client.name, ACK, key)
            client.errors[type(exc).__name__] += 1
            return
        except IN_DOUBT as exc:
            self.history.info(client.name, ACK, key)
            client.in_doubt += 1
            client.errors[type(exc).__name__] += 1
            return
        self.history.ok(client.name, ACK, key)
        self.acks_confirmed[key] += 1

    async def stop(self, tasks: Sequence[asyncio.Task[None]], event: asyncio.Event, deadline_s: float) -> None:
        event.set()
        done, pending = await asyncio.wait(tasks, timeout=deadline_s)
        for task in pending:
            task.cancel()
        for task in done:
            _raise_if_failed(task)
        if pending:
            raise RuntimeError(f"{', '.join(t.get_name() for t in pending)} did not stop within {deadline_s:.0f} s")

    async def final_drain(self, client: _Client, deadline_s: float) -> int:
        """Everything left in the queue, through a consumer of a new connection, up to a fence sent to its tail
        (FIFO: every message stored before it comes first); the messages the queue still counts afterwards."""
        async with await connect(self.url, settings=self.settings) as connection:
            session = await connection.create_session()
            token = uuid.uuid4().hex
            await session.create_producer(QUEUE).send(
                CoreMessage(b"", durable=True, priority=0, properties=TypedProperties.of({FENCE: token})))
            consumer = await session.create_consumer(QUEUE)
            session.start()
            end = time.monotonic() + deadline_s
            while True:
                delivery = await consumer.receive(max(0.0, end - time.monotonic()))
                if delivery is None:
                    raise RuntimeError(f"the final drain did not reach its fence within {deadline_s:.0f} s")
                fence = delivery.message.properties.get(FENCE)
                if fence is not None:
                    await consumer.individual_acknowledge(delivery)
                    if (fence.decode() if isinstance(fence, bytes) else fence) == token:
                        break
                    continue
                await self.take(client, consumer, delivery)
            await consumer.close()
            query = await session.queue_query(QUEUE)
            return int(query.message_count)


# ---------------------------------------------------------------------------------------------------- the soak

@dataclass
class StepRecord:
    """What one kill took (ms from the kill, monotonic clock; None: not applicable)."""

    kill: Kill
    at_s: float
    #: ``time.monotonic_ns()`` at the kill: the clock of the history's operations
    at_ns: int = 0
    #: a server serving again when the kill left none serving: the backup (a session created on it), or under
    #: replication after both servers were down the primary
    serving_ms: float | None = None
    #: every client made progress with the backup serving (after a kill of the primary)
    failover_ms: float | None = None
    #: every client made progress with the primary serving alone (replication, after a kill of the backup)
    alone_ms: float | None = None
    #: both servers running again, the primary serving; under replication a backup started again said it is
    #: synchronised (None when the next kill takes the server left serving alone first)
    whole_ms: float | None = None
    #: every client made progress once the pair was whole (from the kill)
    progress_ms: float | None = None
    #: every client, on the primary, has the backup from the topology (from the kill)
    backup_known_ms: float | None = None
    stalled: str | None = None
    #: servers whose process ended on its own during this kill's restore: name, exit status, last log lines
    exited: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**self.kill.to_dict(), "at_s": round(self.at_s, 3), "at_ns": self.at_ns,
                **{name: None if (value := getattr(self, name)) is None else round(value, 1) for name in TIMINGS},
                "stalled": self.stalled, "exited": self.exited}


#: the timings of a :class:`StepRecord`, in the order a kill's restore passes them
TIMINGS = ("serving_ms", "failover_ms", "alone_ms", "whole_ms", "progress_ms", "backup_known_ms")


def _ms_since(start: float) -> float:
    return (time.monotonic() - start) * 1000


class Stalled(Exception):
    """The pair or the clients did not come back within a deadline."""


class Exited(Stalled):
    """A server's process ended although the soak neither killed nor stopped it."""


def _last_records(log: str, count: int = 3) -> list[str]:
    """The last ``count`` records of a server's output, without stack trace lines and the kit's own notes."""
    kept = [line.strip()[:200] for line in log.splitlines()
            if line.strip() and not line.startswith(("\t", " ", "---", "Caused by"))]
    return kept[-count:]


class Soak:
    """The kills of the schedule, one after another, with the traffic running."""

    def __init__(self, target: ManagedTarget, steps: Sequence[Kill], traffic: Traffic, *,
                 policy: Policy = "shared-store", eager_failback: bool = False) -> None:
        self.target = target
        self.steps = steps
        self.policy = policy
        self.eager_failback = eager_failback
        self.traffic = traffic
        self.records: list[StepRecord] = []
        self.started = time.monotonic()
        self.aborted: str | None = None
        #: the servers the soak killed and has not started again: every other one should be running
        self.down: set[str] = set()

    def exited(self) -> list[str]:
        """The servers that should be running and are not: their process ended on its own."""
        return [name for name in (PRIMARY, BACKUP)
                if name not in self.down and not self.target.node(name).is_running]

    async def _serving(self, node: str) -> None:
        """Until ``node`` serves: a session created on it by a client that connects to it alone (a waiting backup
        does not listen), retrying every 50 ms; Stalled after SERVE_S."""
        settings = dataclasses.replace(self.traffic.settings, initial_connect_attempts=-1, reconnect_attempts=0,
                                       retry_interval_ms=50, max_retry_interval_ms=50)

        async def probe() -> None:
            async with await connect(self.target.node(node).url, settings=settings) as connection:
                await connection.create_session()

        try:
            await asyncio.wait_for(probe(), SERVE_S)
        except TimeoutError:
            raise Stalled(f"{node} did not serve within {SERVE_S:.0f} s") from None

    async def _start(self, node: str) -> None:
        """Start ``node``: the target's own wait (its ready line, or its waiting line for a server that waits for
        the store)."""
        self.down.discard(node)
        await asyncio.to_thread(self.target.node(node).start)

    async def _primary_back(self) -> None:
        """Start the primary and wait until it serves (after the failback, when the backup serves: under
        replication once it synchronised from the backup, which then hands back)."""
        await self._start(PRIMARY)
        await asyncio.to_thread(self.target.node(PRIMARY).wait_active, SERVE_S)

    async def _backup_back(self) -> None:
        """Start the backup; under replication, wait until it says it holds the primary's state (NodeStartError
        after SERVE_S, a stall)."""
        await self._start(BACKUP)
        if self.policy == "replication":
            await asyncio.to_thread(self.target.node(BACKUP).wait_synced, SERVE_S)

    async def _backup_known(self) -> None:
        """Until every client is on the primary and has the backup from the topology (woken by the traffic's
        progress, which goes on meanwhile); Stalled after PROGRESS_S."""
        primary, backup = acceptor(self.target, PRIMARY), acceptor(self.target, BACKUP)
        clients = [*self.traffic.producers, *self.traffic.consumers]

        def knows(client: _Client) -> bool:
            machine = client.connection.machine if client.connection is not None else None
            return machine is not None and machine.connector == primary and backup in machine.backups

        # a server that ended on its own (the backup, after handing back) is never announced: not waited for
        done = await self.traffic.wait_until(lambda: all(map(knows, clients)) or bool(self.exited()), PROGRESS_S)
        if ended := self.exited():
            raise Exited(f"{', '.join(ended)} ended on its own")
        if not done:
            unaware = "; ".join(c.where() for c in clients if not knows(c))
            raise Stalled(f"the clients did not learn the backup within {PROGRESS_S:.0f} s: {unaware}")

    async def _progressed(self, what: str) -> None:
        mark = self.traffic.mark()
        if not await self.traffic.progressed(mark, PROGRESS_S):
            idle = "; ".join(c.where() for c in self.traffic.idle_since(mark))
            raise Stalled(f"no progress within {PROGRESS_S:.0f} s of {what}: {idle}")

    async def run(self, progress: Callable[[StepRecord], None]) -> None:
        """Every kill of the schedule; a kill after which the pair or the clients do not come back ends it
        (``aborted``)."""
        self.traffic.start()
        await self._progressed("the start")
        if self.policy == "replication":
            # the first kill of the primary, like every one, finds its backup synchronised and known to the clients
            try:
                await asyncio.to_thread(self.target.node(BACKUP).wait_synced, SERVE_S)
                await self._backup_known()
            except (Stalled, TargetError) as exc:
                self.aborted = f"the start: {type(exc).__name__}: {exc}"
                return
        for step in self.steps:
            record = StepRecord(step, 0.0)
            self.records.append(record)
            await asyncio.sleep(step.pause_s)  # the schedule's pause: time under load before the kill
            killed = time.monotonic()
            record.at_s, record.at_ns = killed - self.started, time.monotonic_ns()
            since = functools.partial(_ms_since, killed)
            try:
                self.down.add(step.node)
                await asyncio.to_thread(self.target.node(step.node).kill)
                try:
                    await self._restore(step, record, since)
                except (Stalled, TargetError):
                    if not self.exited():
                        raise
                    await self._restart_exited(record, since)
            except (Stalled, TargetError) as exc:
                record.stalled = f"{type(exc).__name__}: {exc}"
                self.aborted = f"kill {step.index}, {step.label}: {record.stalled}"
                progress(record)
                return
            progress(record)

    async def _restart_exited(self, record: StepRecord, since: Callable[[], float]) -> None:
        """Note each server that ended on its own (an anomaly), start it again and finish the restore: every client
        progressing, and with the backup up, every client knowing it."""
        for name in self.exited():
            node = self.target.node(name)
            await asyncio.to_thread(node.kill)  # nothing to kill: collects its exit status
            last = " | ".join(_last_records(node.logs(200)))
            code = node.last_exit_code if isinstance(node, ProcessNode) else None
            record.exited.append(f"{name} ended on its own, exit status {code}; last lines: {last}")
            if name == BACKUP:
                await self._backup_back()
            else:
                await self._primary_back()
        await self._progressed("the ended server started again")
        record.progress_ms = since()
        if BACKUP not in self.down:
            await self._backup_known()
            record.backup_known_ms = since()

    async def _restore(self, step: Kill, record: StepRecord, since: Callable[[], float]) -> None:
        """Bring the pair back after ``step``'s kill (as far as the schedule wants it back) and time it."""
        if self.policy == "replication":
            if not await self._replicated_back(step, record, since):
                return
        elif not await self._shared_store_back(step, record, since):
            return
        record.whole_ms = since()
        await self._progressed("the pair being whole")
        record.progress_ms = since()
        # the pair is whole for its clients once they know where to go: a backup that handed back (the store, or
        # under replication the role) announces itself to the primary again, and only then does the primary's
        # topology name it
        await self._backup_known()
        record.backup_known_ms = since()

    async def _backup_took_over(self, record: StepRecord, since: Callable[[], float]) -> None:
        """After the primary's kill: the backup serving, then every client progressing on it (both times recorded)."""
        await self._serving(BACKUP)
        record.serving_ms = since()
        await self._progressed("the backup serving")
        record.failover_ms = since()

    async def _shared_store_back(self, step: Kill, record: StepRecord, since: Callable[[], float]) -> bool:
        """Both servers of a shared-store pair running again after ``step``'s kill, the primary serving; False: the
        next kill takes the backup while it serves alone."""
        if step.node == PRIMARY:
            await self._backup_took_over(record, since)
            if step.alone_s is None:
                return False  # the next kill takes the backup while it serves alone
            await asyncio.sleep(step.alone_s)  # the schedule's pause: the backup serves alone
            await self._primary_back()
        elif step.state == "serving":
            # nothing serves: the backup first (it activates on the free store), then, once every client is back on
            # it, the primary (failback).  A client still reconnecting to the backup when it hands the store back
            # keeps trying the backup alone: its reconnection's candidates were fixed when it lost the backup, which
            # then had no backup of its own (the primary was down).
            await self._start(BACKUP)
            await self._serving(BACKUP)
            record.serving_ms = since()
            if not self.eager_failback:
                await self._progressed("the backup serving again")
                record.failover_ms = since()
            await self._primary_back()
        else:
            await self._backup_back()
        return True

    async def _replicated_back(self, step: Kill, record: StepRecord, since: Callable[[], float]) -> bool:
        """Both servers of a replication pair running again after ``step``'s kill, the primary serving and a backup
        started again synchronised; False: the next kill takes the primary while it serves alone."""
        if step.node == PRIMARY and not step.both_down:
            # the backup held the primary's state (the pair was whole): it takes over
            await self._backup_took_over(record, since)
            assert step.alone_s is not None, "a replication primary killed with its backup up comes back"
            await asyncio.sleep(step.alone_s)  # the schedule's pause: the backup serves alone
            # the primary checks for a live server, synchronises from the backup and takes over from it (failback);
            # the backup follows it again (restart-backup), in the same process: see the module's docstring
            await self._primary_back()
        elif step.node == PRIMARY:
            # nothing serves: the primary first (it holds the latest state: its backup was down since the kill before;
            # with nothing live to check for, it activates on its own journal), then the backup, synchronised from it
            await self._primary_back()
            record.serving_ms = since()
            await self._backup_back()
        else:
            # the primary stops replicating to the killed backup and goes on alone: it must keep confirming sends
            await self._progressed("the primary serving alone")
            record.alone_ms = since()
            if step.alone_s is None:
                return False  # the next kill takes the primary while it serves alone
            await asyncio.sleep(step.alone_s)  # the schedule's pause: the primary serves alone
            await self._backup_back()
        return True

    async def finish(self) -> int:
        """Stop the producers, let the consumers take every confirmed message, stop them, drain the queue; the
        messages the queue still counts."""
        traffic = self.traffic
        producers = [t for t in traffic.tasks if t.get_name().startswith("producer")]
        consumers = [t for t in traffic.tasks if t.get_name().startswith("consumer")]
        await traffic.stop(producers, traffic.stop_sending, SEND_S + 30)
        if not await traffic.all_received(DRAIN_S):
            missing = len(traffic.confirmed - traffic.received)
            print(f"  {missing} confirmed messages not received by the consumers within {DRAIN_S:.0f} s; "
                  "the final drain looks for them", flush=True)
        await traffic.stop(consumers, traffic.stop_receiving, RECEIVE_S + 60)
        return await traffic.final_drain(_Client("drain"), DRAIN_S)


# ---------------------------------------------------------------------------------------------------- the command

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", choices=("reference", "artemis"), required=True, help="the pair's broker")
    parser.add_argument("--policy", choices=POLICIES, default="shared-store",
                        help="the pair's HA policy (default shared-store)")
    parser.add_argument("--artemis-version", help="a pinned Artemis version (default: the pinned default); "
                        "--target artemis only")
    parser.add_argument("--kills", type=int, default=200, help="kills in all (default 200)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the schedule (default 1)")
    parser.add_argument("--producers", type=int, default=3, help="producer clients (default 3)")
    parser.add_argument("--consumers", type=int, default=3, help="consumer clients (default 3)")
    parser.add_argument("--rate", type=float, default=50.0,
                        help="messages per second per producer (default 50; 0: as fast as confirmed)")
    parser.add_argument("--both-down", type=float, default=0.25, metavar="P",
                        help="probability that a kill leaves both servers down (default 0.25): shared-store, the "
                        "backup killed while it serves alone; replication, the backup left down and the primary "
                        "killed next while it serves alone")
    parser.add_argument("--pause", type=float, nargs=2, default=(0.5, 1.5), metavar=("MIN", "MAX"),
                        help="seconds under load between the pair being whole and the next kill (default 0.5 1.5)")
    parser.add_argument("--alone", type=float, nargs=2, default=(0.5, 1.5), metavar=("MIN", "MAX"),
                        help="seconds the backup serves alone before the primary is started (under replication "
                        "also the primary alone before the backup is started) (default 0.5 1.5)")
    parser.add_argument("--eager-failback", action="store_true",
                        help="shared-store: after both servers were down, start the primary as soon as the backup "
                        "serves, not once every client is back on the backup (a client still reconnecting then may "
                        "be stuck)")
    parser.add_argument("--workdir", type=Path, help="where the pair's data goes: a new or empty directory "
                        "(default: a temporary one, deleted afterwards)")
    parser.add_argument("--json", type=Path, help="write the evidence here")
    parser.add_argument("--history", type=Path, help="write the whole history here (JSON Lines)")
    return parser


def _arguments(argv: Sequence[str] | None) -> tuple[argparse.Namespace, tuple[Kill, ...]]:
    parser = _parser()
    args = parser.parse_args(argv)
    for name in ("kills", "producers", "consumers"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.rate < 0:
        parser.error(f"--rate must be >= 0, got {args.rate}")
    if args.eager_failback and args.policy != "shared-store":
        parser.error("--eager-failback goes with --policy shared-store (a replication pair that was down comes back "
                     "primary first)")
    if args.artemis_version is not None:
        if args.target != "artemis":
            parser.error("--artemis-version goes with --target artemis")
        _, pinned = pinned_artemis_versions()
        if args.artemis_version not in pinned:
            parser.error(f"--artemis-version {args.artemis_version} is not pinned (pinned: {', '.join(pinned)})")
    if args.workdir is not None and args.workdir.exists() and (
            not args.workdir.is_dir() or any(args.workdir.iterdir())):
        parser.error(f"--workdir {args.workdir} must be a new or empty directory")
    for path in (args.json, args.history):
        if path is not None and not path.absolute().parent.is_dir():
            parser.error(f"{path}: its directory does not exist")
    try:
        steps = schedule(args.kills, args.seed, policy=args.policy, both_down=args.both_down,
                         pause_s=tuple(args.pause), alone_s=tuple(args.alone))
    except ValueError as exc:
        parser.error(str(exc))
    return args, steps


@contextmanager
def _workdir(path: Path | None) -> Iterator[Path]:
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="cck-ha-soak-") as tmp:
        yield Path(tmp)


def _make_target(args: argparse.Namespace, workdir: Path) -> ManagedTarget:
    """The pair, not started: the same descriptor for either broker."""
    topology = Topology.ha_pair(ha_spec(args.policy, allow_failback=True))
    if args.target == "reference":
        return ReferenceTarget(topology, workdir)
    return ArtemisTarget(topology, workdir, version=args.artemis_version)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _line(record: StepRecord, total: int, traffic: Traffic) -> str:
    """One line per kill."""
    kill = record.kill
    alone = f"clients on the primary alone {_ms(record.alone_ms)}, " if record.alone_ms is not None else ""
    text = (f"[{kill.index:>{len(str(total))}}/{total}] t={record.at_s:7.1f}s kill -9 {kill.label}: "
            f"{alone}serving {_ms(record.serving_ms)}, clients on it {_ms(record.failover_ms)}, "
            f"whole {_ms(record.whole_ms)}, clients on it {_ms(record.progress_ms)}, backup known "
            f"{_ms(record.backup_known_ms)}; "
            f"{len(traffic.confirmed)} confirmed, {len(traffic.received)} received")
    text += "".join(f"  EXITED: {line}" for line in record.exited)
    return text + (f"  STALLED: {record.stalled}" if record.stalled else "")


async def _soak(target: ManagedTarget, steps: Sequence[Kill], args: argparse.Namespace,
                out: dict[str, Any]) -> tuple[Soak, int]:
    """Create the queue, run the kills and the final drain; the soak and the messages left in the queue (-1: no
    final drain)."""
    version = min(CURRENT_VERSION, target.protocol_version or CURRENT_VERSION)
    settings = dataclasses.replace(CLIENT, version=version)
    async with await connect(target.node(PRIMARY).url, settings=settings) as connection:
        session = await connection.create_session()
        await session.create_queue(QUEUE, QUEUE, routing_type=RoutingType.ANYCAST, durable=True)
    traffic = Traffic(target.node(PRIMARY).url, settings, args.producers, args.consumers, args.rate)
    soak = Soak(target, steps, traffic, policy=args.policy, eager_failback=args.eager_failback)
    left = -1
    try:
        await soak.run(lambda record: print(_line(record, len(steps), traffic), flush=True))
        out["kills_s"] = round(time.monotonic() - soak.started, 1)
        if soak.aborted is None:
            left = await soak.finish()
    except (RuntimeError, ClientError, TargetError) as exc:  # a client's or the target's error: reported
        soak.aborted = f"{type(exc).__name__}: {exc}" + (f" ({exc.__cause__!r})" if exc.__cause__ else "")
    finally:
        for task in traffic.tasks:
            task.cancel()
        await asyncio.gather(*traffic.tasks, *traffic._ended, return_exceptions=True)
    return soak, left


def _summary(values: Sequence[float | None]) -> dict[str, float] | None:
    """n, median, p90 and max of the values that are there."""
    kept = sorted(v for v in values if v is not None)
    if not kept:
        return None
    return {"n": len(kept), "median_ms": round(statistics.median(kept), 1),
            "p90_ms": round(kept[min(len(kept) - 1, int(len(kept) * 0.9))], 1), "max_ms": round(kept[-1], 1)}


def _evidence(soak: Soak, result: HistoryResult, verdict: Verdict, left: int) -> dict[str, Any]:
    traffic, records = soak.traffic, soak.records
    clients = [*traffic.producers, *traffic.consumers]
    return {
        "kills_done": len(records),
        "kills_by": dict(Counter(r.kill.label for r in records)),
        "aborted": soak.aborted,
        "client_failovers": sum(c.failovers for c in clients),
        "confirmed_sends": len(traffic.confirmed),
        "receipts": result.receipts,
        "acks_confirmed": result.acks_confirmed,
        "left_in_queue": left,
        "timings": {name: _summary([getattr(r, name) for r in records]) for name in TIMINGS},
        "verdict": dataclasses.asdict(verdict),
        "clients": [{"name": c.name, "done": c.done, "in_doubt": c.in_doubt, "failovers": c.failovers,
                     "connection_failures": c.connection_failures, "errors": dict(c.errors)} for c in clients],
        "checker": result.to_dict(),
        "anomaly_ops": anomaly_ops(traffic.history, verdict.examples, records),
        "steps": [r.to_dict() for r in records],
    }


def anomaly_ops(history: History, examples: Mapping[str, Sequence[str]], steps: Sequence[StepRecord]) -> \
        dict[str, list[dict[str, Any]]]:
    """Every operation on each key the verdict gives as an example, each with the kill it came after (``after_kill``:
    the index of the last kill before it, 0 before the first), so that an anomaly can be placed without the whole
    history (``--history``)."""
    keys = {key for listed in examples.values() for key in listed}
    kills = [(r.at_ns, r.kill.index) for r in steps if r.at_ns]
    found: dict[str, list[dict[str, Any]]] = {key: [] for key in sorted(keys)}
    for op in history:
        if op.value in found:
            after = max((index for at_ns, index in kills if at_ns <= op.time_ns), default=0)
            found[op.value].append({**op.to_dict(), "after_kill": after})
    return found


def _code() -> dict[str, Any]:
    """The commit of the checkout the brokers and the client come from, and the files changed since."""
    root = Path(cck.__file__).resolve().parent.parent

    def git(*argv: str) -> str:
        try:
            done = subprocess.run(["git", "-C", str(root), *argv], capture_output=True, text=True, timeout=30,
                                  check=True)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.strip()

    # the checkout's path is this machine's business, not the evidence's
    return {"commit": git("rev-parse", "HEAD"),
            "changed": git("status", "--porcelain", "--untracked-files=no").splitlines()}


def main(argv: Sequence[str] | None = None) -> int:
    args, steps = _arguments(argv)
    # every lost connection is a client warning: hundreds of lines per run; the evidence counts them per client
    logging.getLogger("cck").setLevel(logging.ERROR)
    command = shlex.join(["python", "benchmarks/ha_soak.py", *(sys.argv[1:] if argv is None else argv)])
    out: dict[str, Any] = {"command": command, "code": _code(), "policy": args.policy, "seed": args.seed,
                           "kills_planned": args.kills,
                           "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                           "machine": {"python": platform.python_version(), "system": platform.platform(),
                                       "cpus": os.cpu_count()}}
    began = time.monotonic()
    with _workdir(args.workdir) as workdir, _make_target(args, workdir) as target:
        out["target"] = target.describe()
        print(f"HA soak: {target.name} {target.version} {args.policy} pair, {len(steps)} kills, seed {args.seed}, "
              f"{args.producers} producers, {args.consumers} consumers, workdir {workdir}", flush=True)
        soak, left = asyncio.run(_soak(target, steps, args, out))
    out["total_s"] = round(time.monotonic() - began, 1)
    traffic = soak.traffic
    result = check(traffic.history, final_drain_complete=left >= 0, allow_duplicates=True)
    verdict = judge(result, traffic.message_ids, traffic.acks_confirmed, left=max(left, 0),
                    stalls=sum(r.stalled is not None for r in soak.records), aborted=soak.aborted,
                    exits=sum(len(r.exited) for r in soak.records))
    out.update(_evidence(soak, result, verdict, left))
    print(f"{len(soak.records)} kills in {out.get('kills_s', '?')} s ({out['total_s']} s in all); "
          f"{out['client_failovers']} client failovers; {len(traffic.confirmed)} confirmed sends, "
          f"{result.receipts} receipts, {result.acks_confirmed} acks confirmed, {left} left in the queue")
    print(f"timings: {out['timings']}")
    print(f"allowed: {verdict.allowed}")
    print(("OK: no anomaly" if verdict.ok else f"FAIL: {verdict.anomalies}; examples {verdict.examples}")
          + (f"; aborted: {soak.aborted}" if soak.aborted else ""), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    if args.history is not None:
        with args.history.open("w", encoding="utf-8") as stream:
            for row in traffic.history.to_dicts():
                stream.write(json.dumps(row) + "\n")
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
