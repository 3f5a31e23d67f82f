"""A schedule's faults as the fault proxy's rules (the example's numbers in the proxy's own rules)."""

from __future__ import annotations

from cck.conformance.faults import (
    CutAfter,
    Delay,
    Drop,
    Duplicate,
    RefuseConnections,
    ResetDuringReattach,
    Rule,
)

from ._model import (
    CutAfterCommands,
    CutAtFrame,
    CutHalfOpen,
    CutSettled,
    DelayFrames,
    DropFrames,
    DuplicateFrames,
    Fault,
    RefuseConnects,
    ResetReattach,
)

__all__ = ["rule_of"]


def rule_of(fault: Fault) -> Rule:
    """The proxy rule that carries out ``fault``."""
    if isinstance(fault, CutAfterCommands):
        return CutAfter(fault.n, direction=fault.direction)
    if isinstance(fault, CutHalfOpen):
        return CutAfter(fault.n, direction=fault.direction, half_open=True)
    if isinstance(fault, CutAtFrame | CutSettled):  # a settled cut's hold is the runner's (``_settle``)
        return CutAfter(fault.n, direction=fault.direction, packet_types={fault.packet_type})
    if isinstance(fault, DropFrames):
        return Drop(fault.direction, {fault.packet_type}, count=fault.count)
    if isinstance(fault, DelayFrames):
        return Delay(fault.direction, fault.millis / 1000, {fault.packet_type})
    if isinstance(fault, DuplicateFrames):
        return Duplicate(fault.direction, {fault.packet_type}, count=fault.count)
    if isinstance(fault, ResetReattach):
        return ResetDuringReattach(count=fault.count)
    if isinstance(fault, RefuseConnects):
        return RefuseConnections(count=fault.count)
    raise TypeError(f"not a fault: {fault!r}")
