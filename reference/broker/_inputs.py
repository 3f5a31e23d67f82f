"""Everything that changes a :class:`~._core.BrokerCore` from outside, as values: a connection made, bytes
received, a connection lost, a timer tick, a delivery pass.  The server feeds its core through
:func:`apply_input` only, so whatever it fed can be fed again, in the same order and with the same times, to
another core that started from the same state, and that core ends in the same state (the core is deterministic:
no I/O, no clock of its own, storage calls that complete synchronously).  That is how a reference backup mirrors
its primary's sessions (``reference/ha``, transparent resume).

A graceful stop (``BrokerCore.shutdown``) is deliberately not an input: it ends the sessions of the server that
stops, not the state a backup keeps for the clients to resume."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._core import BrokerCore

__all__ = ["CoreInput", "InputKind", "apply_input"]


class InputKind(IntEnum):
    """What happened (the numbers are those of KIT_REPLICA_INPUT)."""

    MADE = 0
    RECEIVED = 1
    LOST = 2
    TICK = 3
    DELIVER = 4


@dataclass(frozen=True, slots=True)
class CoreInput:
    """One input: ``conn_id`` for the connection kinds, ``data`` the bytes received (or, for MADE, the remote
    address, UTF-8, and after a NUL byte the client certificate the peer presented, DER, if any), ``now_ms`` the
    core's time (monotonic milliseconds)."""

    kind: InputKind
    now_ms: int
    conn_id: int = 0
    data: bytes = b""


def apply_input(core: BrokerCore, event: CoreInput) -> None:
    """Feed ``event`` to ``core``."""
    match event.kind:
        case InputKind.MADE:
            remote, _, certificate = event.data.partition(b"\0")
            core.connection_made(event.conn_id, event.now_ms, remote.decode("utf-8", "replace"), certificate or None)
        case InputKind.RECEIVED:
            core.receive(event.conn_id, event.data, event.now_ms)
        case InputKind.LOST:
            core.connection_lost(event.conn_id, event.now_ms)
        case InputKind.TICK:
            core.tick(event.now_ms)
        case InputKind.DELIVER:
            core.deliver_all()
