"""The brokers' logs of a case that did not conform, kept with its evidence.

A node's log lives in the run's temporary directories, which pytest rotates (the last three runs are kept), so
the log that explains a FAIL was often gone by the time someone looked.  When a case's call ends FAIL,
INDETERMINATE or KIT_ERROR, the end of each node's log of every target still open on this process (the case's
own, and those a module keeps between cases) is copied to ``<run>/logs/<case id>/<target>-<node>.log`` and the
case's evidence notes the paths (``node_logs``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from cck.conformance.targets import ManagedTarget
from cck.conformance.verdicts import Verdict

__all__ = ["KEPT_BYTES", "KEPT_VERDICTS", "keep_node_logs"]

#: the end of each log that is kept: a module's broker lives through many cases, and what explains this one is
#: at the end
KEPT_BYTES = 256 * 1024
KEPT_VERDICTS = frozenset({Verdict.FAIL, Verdict.INDETERMINATE, Verdict.KIT_ERROR})


def keep_node_logs(run_dir: Path, case_id: str, targets: Iterable[ManagedTarget]) -> list[str]:
    """Copy the end of every node's log of ``targets``; the copies' paths, relative to ``run_dir``."""
    kept: list[str] = []
    for target in targets:
        for node in target.nodes:
            if not node.log_file.is_file():
                continue
            copy = run_dir / "logs" / case_id / f"{target.workdir.name}-{node.name}.log"
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(_tail(node.log_file))
            kept.append(copy.relative_to(run_dir).as_posix())
    return kept


def _tail(path: Path) -> bytes:
    with path.open("rb") as log:
        size = log.seek(0, 2)
        if size <= KEPT_BYTES:
            log.seek(0)
            return log.read()
        log.seek(size - KEPT_BYTES)
        end = log.read()
    start = end.find(b"\n") + 1  # from the first whole line
    return b"[the first %d bytes of this log are not kept]\n" % (size - len(end) + start) + end[start:]
