"""The kit's reference broker as a target: ``cck broker`` per node, configured by
the same broker.xml (and security files) Artemis would get."""

from __future__ import annotations

import importlib.metadata
import os
import re
import sys
from pathlib import Path

import cck
from cck.codec import CURRENT_VERSION

from ._base import STOP_DEADLINE_S, ManagedTarget, ProcessNode
from ._config import write_etc
from ._errors import TargetError
from ._forkserver import ForkServer, fork_server
from ._ports import PortSource, free_ports
from ._topology import NodeSpec, Topology

__all__ = ["REFERENCE_START_DEADLINE_S", "ReferenceNode", "ReferenceTarget", "kit_version"]

REFERENCE_START_DEADLINE_S = 30.0
_PACKAGE = "core-conformance-kit"
#: The directory holding the ``cck`` package (a checkout, a copy of one, or site-packages).
_SOURCE_ROOT = Path(cck.__file__).absolute().parents[1]


def kit_version() -> str:
    """The reference broker's version: the kit's own package version."""
    try:
        return importlib.metadata.version(_PACKAGE)
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


class ReferenceNode(ProcessNode):
    # printed once the acceptor is bound (reference/__main__.py)
    ready = re.compile(r"reference broker listening on (\S+):(\d+)")
    # a shared-store backup (or a primary whose backup took over) waits for the store's lock
    passive = re.compile(r"reference broker waiting (for the shared store|as the replication backup)")
    # printed once the backup holds its primary's state (reference/__main__.py, _follow)
    synced = re.compile(r"reference broker waiting as the replication backup")
    launch_label = "reference broker"

    def __init__(self, spec: NodeSpec, topology: Topology, node_dir: Path, *, start_deadline_s: float,
                 stop_deadline_s: float, log_level: str, use_fork_server: bool = True) -> None:
        super().__init__(spec, topology, node_dir, start_deadline_s=start_deadline_s, stop_deadline_s=stop_deadline_s)
        self.etc = node_dir / "etc"
        self.log_level = log_level
        self.use_fork_server = use_fork_server

    def _prepare(self) -> None:
        # the reference broker has no topology scanner and no disk monitor
        write_etc(self.topology, self.name, self.etc, topology_scanner=False, max_disk_usage=None)

    def _argv(self) -> list[str]:
        assert self.spec.data_dir is not None
        ha = self.topology.ha
        # the reference broker's own extension: no broker.xml element says it (Artemis has no such setting)
        resume = ["--transparent-resume"] if ha is not None and ha.transparent_resume else []
        return [sys.executable, "-m", "cck.reference", "broker", "--config", str(self.etc / "broker.xml"),
                "--data", str(self.spec.data_dir), "--log-level", self.log_level, *resume]

    def _env(self) -> dict[str, str]:
        # the broker runs from node_dir: put the directory holding the cck package first on
        # its path, so a source checkout that was never installed works as well as an install
        path = [str(_SOURCE_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(path))

    def _fork_server(self, env: dict[str, str] | None) -> ForkServer | None:
        # a start is mostly Python importing the broker: fork it from a server that has (``_forkserver``)
        return fork_server(env or dict(os.environ)) if self.use_fork_server else None

    def _check_ready(self, match: re.Match[str], startup: str) -> None:
        if int(match.group(2)) != self.spec.port:
            raise TargetError(f"node {self.name!r} listens on port {match.group(2)}, not {self.spec.port}")


class ReferenceTarget(ManagedTarget):
    """Every node of the topology as a reference broker process under ``workdir/<node>``."""

    name = "reference"

    def __init__(
        self,
        topology: Topology | None = None,
        workdir: Path | str = ".",
        *,
        start_deadline_s: float = REFERENCE_START_DEADLINE_S,
        stop_deadline_s: float = STOP_DEADLINE_S,
        log_level: str = "info",
        fork_server: bool = True,
        ports: PortSource = free_ports,
    ) -> None:
        self._start_deadline_s = start_deadline_s
        self._fork_server = fork_server
        self._stop_deadline_s = stop_deadline_s
        self._log_level = log_level
        super().__init__(kit_version(), CURRENT_VERSION, topology or Topology(), Path(workdir), ports=ports)

    def _make_node(self, spec: NodeSpec, node_dir: Path) -> ReferenceNode:
        return ReferenceNode(spec, self.topology, node_dir, start_deadline_s=self._start_deadline_s,
                             stop_deadline_s=self._stop_deadline_s, log_level=self._log_level,
                             use_fork_server=self._fork_server)
