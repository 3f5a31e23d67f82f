"""The protocol-aware fault proxy (design §3 "Faults").

An asyncio TCP proxy between a core client and a broker.  It forwards bytes
unchanged, but decodes each direction with the codec so that faults can be
applied per frame (drop, delay, duplicate by Artemis packet type; cut after N
confirmable commands; reset during reattach) or per connection (refuse,
blackhole), and so that every frame, every accepted connection and how each
connection ended are logged with a monotonic timestamp::

    from cck.conformance.faults import Drop, FaultProxy

    async with FaultProxy("127.0.0.1", 61616) as proxy:
        connection = await connect(proxy.url)
        proxy.add(Drop("s2c", {"NULL_RESPONSE"}, count=1))
        ...
    proxy.wire_log_jsonl("wire.jsonl")

See ``docs/fault-proxy.md`` for what each fault does on the wire.
"""

from __future__ import annotations

from ._proxy import FaultProxy
from ._rules import (
    HALF_OPEN,
    Action,
    Blackhole,
    CutAfter,
    Delay,
    Direction,
    Drop,
    Duplicate,
    FrameView,
    Latency,
    RefuseConnections,
    ResetDuringReattach,
    Rule,
    RuleHandle,
)
from ._wirelog import RAW, AttemptOutcome, AttemptRecord, EndBy, EndHow, EndRecord, WireLog, WireRecord

__all__ = [
    "FaultProxy",
    # rules
    "Blackhole",
    "CutAfter",
    "Delay",
    "Drop",
    "Duplicate",
    "Latency",
    "RefuseConnections",
    "ResetDuringReattach",
    "Rule",
    "RuleHandle",
    "FrameView",
    # evidence
    "HALF_OPEN",
    "Action",
    "AttemptOutcome",
    "AttemptRecord",
    "Direction",
    "EndBy",
    "EndHow",
    "EndRecord",
    "RAW",
    "WireLog",
    "WireRecord",
]
