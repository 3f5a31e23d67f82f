"""The confirmation-window oracle: given the confirmable commands a receiver counted (their frame sizes, in
order) and the PACKETS_CONFIRMED ids it sent back, say whether each confirmation came exactly when the
counted bytes reached the window (notes §9.2), and which ones were flushes of a partial window (§9.3).

Pure computation over wire-log figures: no sockets, no clocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Cadence", "judge_cadence"]


@dataclass
class Cadence:
    """The verdict on one channel direction's confirmations."""

    window: int
    commands: int
    #: ids confirmed because the window filled / because a partial window was flushed
    window_confirms: list[int] = field(default_factory=list)
    flushes: list[int] = field(default_factory=list)
    #: the commands after the last confirmation and their bytes (less than a window when nothing is missing)
    pending: int = 0
    pending_bytes: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def complete(self) -> bool:
        """No confirmation is still owed: what is unconfirmed is less than a window."""
        return self.pending_bytes < self.window or self.pending == 0

    def to_dict(self) -> dict[str, Any]:
        return {"window": self.window, "commands": self.commands, "window_confirms": self.window_confirms,
                "flushes": self.flushes, "pending": self.pending, "pending_bytes": self.pending_bytes,
                "errors": self.errors}  # fmt: skip


def judge_cadence(sizes: Sequence[int], confirms: Sequence[int], window: int) -> Cadence:
    """``sizes[i]``: the full frame size (length field included) of counted command ``i``; ``confirms``: the
    ids of the PACKETS_CONFIRMED the receiver sent, in the order sent.

    A confirmation is due at the first command where the bytes counted since the previous confirmation reach
    ``window``; it must name exactly that command.  A confirmation naming a command before that point is a
    flush of a partial window (allowed: ttl check, close, ping).  Going backwards, naming a command that was
    never counted, or confirming past a point where one was due are errors."""
    result = Cadence(window, len(sizes))
    position = 0  # first command not yet confirmed
    for confirmed in confirms:
        if confirmed < position:
            result.errors.append(f"PACKETS_CONFIRMED({confirmed}) goes back: {position - 1} was already confirmed")
            continue
        if confirmed >= len(sizes):
            result.errors.append(f"PACKETS_CONFIRMED({confirmed}) names a command never counted "
                                 f"(only {len(sizes)}: 0..{len(sizes) - 1})")
            return result
        counted = 0
        due = None
        for index in range(position, confirmed + 1):
            counted += sizes[index]
            if counted >= window:
                due = index
                break
        if due is not None and due < confirmed:
            result.errors.append(f"PACKETS_CONFIRMED was due at command {due} ({counted} bytes >= window {window}) "
                                 f"but the next one named {confirmed}")
        elif due == confirmed:
            result.window_confirms.append(confirmed)
        else:
            result.flushes.append(confirmed)
        position = confirmed + 1
    result.pending = len(sizes) - position
    result.pending_bytes = sum(sizes[position:])
    if not result.complete:
        counted = 0
        for index in range(position, len(sizes)):
            counted += sizes[index]
            if counted >= window:
                result.errors.append(f"no PACKETS_CONFIRMED for command {index} ({counted} bytes >= window {window})")
                break
    return result
