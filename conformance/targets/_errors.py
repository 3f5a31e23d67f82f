"""What a target raises.  ``UnsupportedByTarget`` is not a failure: the suite turns it into an
UNSUPPORTED verdict, so it carries the capability by name for the report."""

from __future__ import annotations

__all__ = ["NodeStartError", "NodeStopError", "TargetError", "UnsupportedByTarget"]


class TargetError(Exception):
    """Base class of every error a target raises."""


class UnsupportedByTarget(TargetError):
    """A case asked a target for something it cannot do (kill a broker the kit does not run, ...)."""

    def __init__(self, target: str, capability: str, capabilities: frozenset[str], action: str | None = None) -> None:
        self.target = target
        self.capability = capability
        self.capabilities = capabilities
        self.action = action or capability
        have = ", ".join(sorted(capabilities)) or "none"
        super().__init__(
            f"target {target!r} cannot {self.action}: it lacks the {capability!r} capability (it has: {have})"
        )


class _NodeError(TargetError):
    def __init__(self, node: str, what: str, log_tail: str) -> None:
        self.node = node
        self.log_tail = log_tail
        tail = log_tail.rstrip() or "(the broker wrote nothing)"
        super().__init__(f"node {node!r}: {what}\n--- last lines of its log ---\n{tail}")


class NodeStartError(_NodeError):
    """A broker exited while starting or was not ready within its deadline (it has been killed)."""


class NodeStopError(_NodeError):
    """A broker ignored a graceful stop within its deadline (it has been killed) or exited badly."""
