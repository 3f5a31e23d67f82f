"""What steers exploration: how much confirmable work a broker held unconfirmed when a connection broke.

A reattach is where a broker and a client must agree on which commands each has: the broker says which it has
confirmed, the client replays the rest, and the broker must recognise what it already had.  The more commands
reached the broker after its last confirmation on a connection that then broke, the more a reattach has to get
right, and durable sends among them are journal work the replay may meet half done.  A random draw seldom makes a
long batch of those (a long durable asynchronous batch with a cut landing inside it is a fraction of a percent of
examples), so exploration reports these two counts to hypothesis as targets, and its optimiser mutates the examples
that scored highest towards higher scores.  The counts are read from the proxy's wire log alone, so they measure
what happened on the wire rather than what the example asked for.  The loop reports them only for examples with a
confirmation window (``_explore._can_reattach``): without one the session is recreated, not reattached.

What a broker is still doing matters most: work that reached it just before the break may still be being written
when the client comes back to reattach, so the durable sends of the last :data:`RECENT_NS` before the cut are a
third count.

A command is counted when the proxy wrote it to the broker after the last PACKETS_CONFIRMED the broker sent on that
connection (written on or not: the broker had confirmed no further either way), on a connection the proxy then cut.
A confirmation covers only what the broker had received when it sent it, so nothing counted was confirmed: the
count is a lower bound of what the broker held unconfirmed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RECENT_NS", "Exposure", "exposure"]

#: What the proxy did with a frame that reached the other side (``WireRecord.reached_peer``).
_REACHED = frozenset({"forwarded", "delayed", "duplicated"})
#: How long before a break a durable send counts as recent: about one journal write and sync.
RECENT_NS = 5_000_000
#: A durable send, as the codec's ``CoreMessage`` repr in the wire log spells it.
_DURABLE = "durable=True"


@dataclass(frozen=True, slots=True)
class Exposure:
    """Over the connections the proxy cut, the most confirmable commands that reached the broker after its last
    confirmation on one connection (``unconfirmed``), and the most durable sends among such (``durable_sends``)."""

    unconfirmed: int = 0
    durable_sends: int = 0
    #: Of those durable sends, the most that reached the broker within :data:`RECENT_NS` before the cut.
    recent_durable_sends: int = 0

    def describe(self) -> str:
        return (f"{self.unconfirmed} unconfirmed command(s), {self.durable_sends} durable send(s) at a break, "
                f"{self.recent_durable_sends} of them just before it")


def exposure(wire: Iterable[Mapping[str, Any]]) -> Exposure:
    """The exposure of one run, from its wire log's JSON rows (``WireRecord.to_json``)."""
    by_conn: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for row in wire:
        by_conn[row["conn"]].append(row)
    unconfirmed = durable = recent = 0
    for rows in by_conn.values():
        cut_ns = min((r["seen_ns"] for r in rows if r["action"] == "cut"), default=None)
        if cut_ns is None:
            continue
        rows = sorted(rows, key=lambda r: r["seen_ns"])
        confirmed_at = max((r["seen_ns"] for r in rows
                            if r["direction"] == "s2c" and r["type"] == "PACKETS_CONFIRMED"), default=-1)
        held = [r for r in rows if r["direction"] == "c2s" and r["confirmable"] and r["action"] in _REACHED
                and r["seen_ns"] > confirmed_at]
        unconfirmed = max(unconfirmed, len(held))
        sends = [r for r in held if r["type"] == "SESS_SEND" and _DURABLE in (r["packet"] or "")]
        durable = max(durable, len(sends))
        recent = max(recent, sum(1 for r in sends if r["seen_ns"] >= cut_ns - RECENT_NS))
    return Exposure(unconfirmed, durable, recent)
