"""Broker restarts in exploration: carrying one out (off the event loop, within a deadline, the client kept off
the broker until the queues were looked at) and the oracle's rules across it.

What a restart lets a conforming broker do, and what it forbids (the clauses in ``conformance/clauses/``):

* ``restart.durable-wiring``: a durable queue exists after the restart, with every durable message confirmed to
  it before (those are the "lost" rule's; a missing queue is a finding of its own, found by a queue query straight
  to the broker before any client could create it again);
* ``restart.non-durable-wiring``: a non-durable queue is gone after the restart (the same query);
* ``restart.non-durable-lost``: a non-durable message the broker held only in memory is gone: it is never
  delivered after the restart, unless the client sent it again after it (the kit's client resends nothing from
  its resend cache on a recreated session, only what it wrote while detached; the wire log shows every frame
  that carried the message, so the rule is judged only where every one of them went before the restart began);
* a non-durable message, or any message to a non-durable queue, sent before the restart ended may be gone
  (not counted lost), and so may a message sent to a non-durable queue after it (the queue is gone and a send
  to its address, which stays, routes nowhere).

Everything here but :func:`restart_broker` is pure: small hand-made histories and wire records test it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cck.codec import CoreMessage
from cck.conformance.faults import FaultProxy, RefuseConnections, WireRecord
from cck.conformance.oracles import Op
from cck.conformance.targets import KILL, RESTART, ManagedTarget
from cck.reference.client import ClientError, ClientSettings, connect

from ._judge import Anomaly, Judgement

__all__ = [
    "RestartFailed",
    "RestartRecord",
    "Restarter",
    "SentMessage",
    "gone_with_restart",
    "judge_restart",
    "restart_broker",
    "restart_share",
    "restarter_of",
    "survivors",
]

#: What restarts the broker under test: called with ``graceful`` (stop, else kill), returns once it accepts
#: connections again, raises when it cannot.  The CLI owns it (it holds the target); a run only calls it.
Restarter = Callable[[bool], None]

#: One example in this many restarts the broker when a restart is quick (the reference broker's fork server
#: restarts it in 0.1 to 0.4 s) ...
RESTART_ONE_IN = 4
#: ... and when it takes a second or more (an Artemis JVM: 3 to 10 s here).  At one in four, an Artemis exploration
#: spent most of its budget restarting (421 runs in 10 minutes against about 1,000 without restarts); at one in
#: forty the restarts take about a fifth of it.
SLOW_RESTART_ONE_IN = 40
#: Where a restart counts as slow: far from both kinds of broker, so a seed draws the same examples run after run.
SLOW_RESTART_S = 1.0


def restart_share(seconds: float) -> int:
    """How rarely examples restart the broker (one in the returned number), from how long one restart took."""
    return SLOW_RESTART_ONE_IN if seconds >= SLOW_RESTART_S else RESTART_ONE_IN


def restarter_of(target: object) -> Restarter | None:
    """What restarts the target's broker (kill, or stop, then start with its data), or None when the kit does not
    run it (a bare URL) or it has more than one node.  The CLI owns it: a run is handed only this callable."""
    if not isinstance(target, ManagedTarget) or len(target.nodes) != 1:
        return None
    if not (target.supports(RESTART) and target.supports(KILL)):
        return None
    node = target.nodes[0]

    def restart(graceful: bool) -> None:
        node.restart(graceful)

    return restart


class RestartFailed(Exception):
    """The restart failed or overran its deadline: the run cannot be judged."""


@dataclass(frozen=True, slots=True)
class SentMessage:
    """A message the workload sent: its queue (index), whether durable, when its send was invoked (ns)."""

    queue: int
    durable: bool
    invoked_ns: int


@dataclass(frozen=True, slots=True)
class RestartRecord:
    """One restart: when it began and when the broker was back (``time.monotonic_ns``), how, and which of the
    example's queues (by index) existed right after it, before any client could reach the broker."""

    graceful: bool
    started_ns: int
    ended_ns: int
    present: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "graceful": self.graceful,
            "started_ns": self.started_ns,
            "ended_ns": self.ended_ns,
            "present": list(self.present),
        }


async def restart_broker(
    restarter: Restarter,
    graceful: bool,
    proxy: FaultProxy,
    url: str,
    queues: tuple[str, ...],
    settings: ClientSettings,
    deadline_s: float,
) -> RestartRecord:
    """Restart the broker (in a thread: it blocks for seconds) with the proxy refusing the client's reconnects,
    then ask the broker straight which of ``queues`` exist, then let the client back in.  RestartFailed when the
    restart or the query fails or overruns ``deadline_s``."""
    handle = proxy.add(RefuseConnections())  # no reconnect may recreate a consumer (or a queue) before the query
    try:
        started = time.monotonic_ns()
        try:
            await asyncio.wait_for(asyncio.to_thread(restarter, graceful), deadline_s)
        except TimeoutError:
            raise RestartFailed(f"restarting the broker took longer than {deadline_s:g} s") from None
        except Exception as exc:  # whatever the target raised: the run is not judged
            raise RestartFailed(f"restarting the broker failed: {exc!r}") from exc
        ended = time.monotonic_ns()
        plain = dataclasses.replace(settings, reconnect_attempts=0)
        try:
            async with asyncio.timeout(deadline_s):
                async with await connect(url, settings=plain, connect_timeout=deadline_s) as connection:
                    session = await connection.create_session()
                    present = tuple([i for i, name in enumerate(queues) if (await session.queue_query(name)).exists])
                    await session.close()
        except (ClientError, TimeoutError) as exc:
            raise RestartFailed(f"asking the restarted broker for its queues failed: {exc!r}") from exc
    finally:
        proxy.remove(handle)
    return RestartRecord(graceful, started, ended, present)


def gone_with_restart(
    sent: Mapping[str, SentMessage], restarts: Iterable[RestartRecord], volatile: Iterable[int]
) -> frozenset[str]:
    """The keys a restart may legitimately have taken: a non-durable message sent before a restart ended, and
    any message to a non-durable queue once there was a restart."""
    ends = [r.ended_ns for r in restarts]
    if not ends:
        return frozenset()
    volatile = frozenset(volatile)
    last = max(ends)
    return frozenset(key for key, m in sent.items() if m.queue in volatile or (not m.durable and m.invoked_ns < last))


def _frames(records: Iterable[WireRecord], direction: str, type_name: str) -> dict[str, list[int]]:
    """When each key's frames of ``type_name`` in ``direction`` were written to the peer (ns); dropped ones are
    left out."""
    frames: dict[str, list[int]] = {}
    for record in records:
        message = getattr(record.packet, "message", None)
        if record.direction != direction or record.type_name != type_name or not isinstance(message, CoreMessage):
            continue
        if not record.reached_peer:
            continue
        value = message.properties.get("key")
        if value is not None:
            frames.setdefault(value.decode() if isinstance(value, bytes) else str(value), []).append(record.ts_ns)
    return frames


def survivors(
    history: Iterable[Op],
    sent: Mapping[str, SentMessage],
    records: Iterable[WireRecord],
    restarts: Iterable[RestartRecord],
    drain: str = "drain",
) -> tuple[str, ...]:
    """Non-durable messages a broker delivered after a restart although every frame that carried them toward it
    reached the old broker before that restart began: only its memory held them (``restart.non-durable-lost``).
    A delivery counts as the restarted broker's when the drain (process ``drain``, straight to the broker after
    the workload) received it, or when the proxy passed a SESS_RECEIVE_MSG carrying it after the restart ended
    (a receipt recorded later may be a delivery the old broker made)."""
    records = list(records)
    sends = _frames(records, "c2s", "SESS_SEND")
    deliveries = _frames(records, "s2c", "SESS_RECEIVE_MSG")
    restarts = list(restarts)
    found: dict[str, None] = {}
    for op in history:
        if op.f != "receive" or op.type != "ok" or op.value is None:
            continue
        key = op.value
        message = sent.get(key)
        times = sends.get(key)
        if message is None or message.durable or not times:
            continue
        for r in restarts:
            after = op.process == drain or any(t > r.ended_ns for t in deliveries.get(key, ()))
            if max(times) < r.started_ns and op.time_ns > r.ended_ns and after:
                found[key] = None
    return tuple(found)


def judge_restart(
    judgement: Judgement,
    history: Iterable[Op],
    sent: Mapping[str, SentMessage],
    records: Iterable[WireRecord],
    restarts: Iterable[RestartRecord],
    volatile: Iterable[int],
    queues: int,
) -> Judgement:
    """``judgement`` with the restart rules' findings added: a durable queue missing or a non-durable queue
    present right after a restart, and non-durable messages that survived one."""
    restarts = list(restarts)
    if not restarts:
        return judgement
    volatile = frozenset(volatile)
    findings = list(judgement.findings)
    anomalies = list(judgement.anomalies)
    for index, restart in enumerate(restarts, 1):
        how = "stop" if restart.graceful else "kill"
        missing = [q for q in range(queues) if q not in volatile and q not in restart.present]
        kept = [q for q in sorted(volatile) if q in restart.present]
        if missing:
            findings.append(
                f"durable queue(s) q{', q'.join(map(str, missing))} gone after restart {index} ({how}); "
                "a durable queue survives a restart (restart.durable-wiring)"
            )
        if kept:
            findings.append(
                f"non-durable queue(s) q{', q'.join(map(str, kept))} still there after restart {index} "
                f"({how}); a non-durable queue does not survive one (restart.non-durable-wiring)"
            )
    survived = survivors(history, sent, records, restarts)
    if survived:
        findings.append(
            f"{len(survived)} non-durable message(s) delivered after a restart although every frame that "
            f"carried them reached the broker before it ({', '.join(survived[:10])}); a non-durable "
            "message does not survive a restart (restart.non-durable-lost)"
        )
        anomalies.extend(Anomaly("unexpected", key) for key in survived)
    if len(findings) == len(judgement.findings):
        return judgement
    return dataclasses.replace(judgement, kind="finding", findings=tuple(findings), anomalies=tuple(anomalies))
