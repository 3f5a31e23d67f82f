"""How a run on several processes (``cck run --jobs N``) hands its cases out: pytest-xdist's work stealing, with
the cases marked alone held back until the others have all gone out.

An alone case runs with nothing else in progress (``_parallel.CaseGate``).  Handed out with the others, it waits
at the gate while another process still has a queue of ordinary cases, and that process's cases then run one at
a time between the alone ones: an Artemis 2.44.0 run once spent its last 33 s on twelve HA cases on one process
of three, after its alone cases had ended.  Here the ordinary cases go out first, each process a run of
consecutive ones (a module's cases stay where the brokers they keep between cases are), an idle process takes
half of the longest queue, and only when no queue has a case left to take do the alone cases go out, so they run
one after another at the end.

The controller collects nothing: the workers name their alone cases in a file (:func:`write_alone`) it reads when
the collections are in."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from xdist.scheduler import WorkStealingScheduling  # type: ignore[import-untyped]  # (xdist ships no types)

__all__ = ["AloneLastScheduling", "read_alone", "write_alone"]

_ALONE_FILE = "alone-cases"
#: The cases an xdist worker holds to keep going: the one it runs and the next (it runs a case once it knows the
#: next, or is told to shut down); ``worksteal`` never takes these.
_KEEPS = 2


def write_alone(directory: Path, nodeids: Iterable[str]) -> None:
    """Name the cases marked alone for the controller (every worker collects the same ones; the last write wins,
    whole, through a rename)."""
    path = directory / _ALONE_FILE
    partial = path.with_name(f"{_ALONE_FILE}.{os.getpid()}")
    partial.write_text("".join(f"{nodeid}\n" for nodeid in nodeids), encoding="utf-8")
    partial.replace(path)


def read_alone(directory: Path) -> frozenset[str]:
    """The cases the workers named alone; none when no worker wrote the file (then nothing is held back, and the
    gate alone keeps them apart)."""
    try:
        return frozenset((directory / _ALONE_FILE).read_text(encoding="utf-8").splitlines())
    except FileNotFoundError:
        return frozenset()


class AloneLastScheduling(WorkStealingScheduling):  # type: ignore[misc]  # (an untyped base)
    """xdist's ``worksteal`` that hands the alone cases out only once no process has an ordinary case left to
    give up (where ``worksteal`` would shut an idle process down)."""

    def __init__(self, config: Any, log: Any = None, gate_dir: Path | None = None) -> None:
        super().__init__(config, log)
        self._gate_dir = gate_dir
        self._held: list[int] | None = None  # known once the collection is: the alone cases not yet handed out

    def check_schedule(self) -> None:
        if self._held is None and self.collection is not None:
            alone = read_alone(self._gate_dir) if self._gate_dir is not None else frozenset()
            self._held = [index for index in self.pending if self.collection[index] in alone]
            self.pending[:] = [index for index in self.pending if self.collection[index] not in alone]
        if self._held and self._nothing_left_to_take():
            self.pending.extend(self._held)
            self._held = []
        super().check_schedule()

    def _nothing_left_to_take(self) -> bool:
        """Whether ``worksteal``, having shared the cases waiting among its idle processes (those holding fewer
        than two), would find no queue to take from (none holds more than two: a process keeps its current case
        and the next) and shut the idle ones down: then the alone cases go out instead."""
        if self.steal_requested_from_node is not None:
            return False
        queued = [len(pending) for node, pending in self.node2pending.items() if not node.shutting_down]
        if not queued:  # no process left to give them to: as worksteal would, leave them pending
            return True
        idle = [i for i, count in enumerate(queued) if count < _KEEPS]
        waiting = len(self.pending)
        for n, i in enumerate(idle):  # as worksteal shares them: an equal part to each idle process in turn
            part = waiting // (len(idle) - n)
            queued[i] += part
            waiting -= part
        return bool(idle) and waiting == 0 and all(count <= _KEEPS for count in queued)

    @property
    def tests_finished(self) -> bool:
        return not self._held and bool(super().tests_finished)

    @property
    def has_pending(self) -> bool:
        return bool(self._held) or bool(super().has_pending)
