"""Apache Artemis as a target: per node, an instance of the pinned distribution (what ``artemis create`` writes,
copied from a template made once per version: ``_artemis_launch``), its configuration replaced by the
topology's, run with ``artemis run``.

The instance keeps what ``artemis create`` writes for the JVM (``bin/``, ``artemis.profile``,
``bootstrap.xml``, logging); broker.xml, login.config and the users and roles files are the
rendered ones, byte for byte what a reference node of the same topology reads.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from pathlib import Path
from typing import Any

from cck.conformance.artemis.distribution import ArtemisError, Distribution, ensure_distribution, load_versions

from ._artemis_launch import FAST_START_JAVA_ARGS, LaunchError, LaunchKit, instantiate, prepare_launch_kit
from ._base import STOP_DEADLINE_S, ManagedTarget, ProcessNode
from ._config import LEGACY_LOCK_MANAGER_CLASS, LOCK_MANAGER_CLASS, write_etc
from ._errors import NodeStartError, TargetError
from ._ports import PortSource, free_ports
from ._topology import NodeSpec, Topology

__all__ = ["ARTEMIS_START_DEADLINE_S", "DEFAULT_JAVA_ARGS", "QUICK_START_JAVA_ARGS", "ArtemisNode", "ArtemisTarget",
           "etc_options", "pinned_artemis_versions"]

ARTEMIS_START_DEADLINE_S = 90.0
# small heaps so a three-node cluster fits beside the test run; the default JIT for a case that measures times
# (C1 only changed a bridge-backoff verdict: ``_artemis_launch``); replaces artemis.profile's defaults
DEFAULT_JAVA_ARGS = FAST_START_JAVA_ARGS
#: For the nodes of a case that measures no times: C1 only, half the CPU of a start and of a short life (see
#: ``_artemis_launch``); what the broker does is the same, only the timing of its work differs.
QUICK_START_JAVA_ARGS = f"{FAST_START_JAVA_ARGS} -XX:TieredStopAtLevel=1"


def pinned_artemis_versions() -> tuple[str, tuple[str, ...]]:
    """``(default, all pinned versions)`` from fixtures/artemis/versions.json."""
    default, versions = load_versions()
    return default, tuple(sorted(versions))


#: The first Artemis with the cluster connection's topology scanner (ARTEMIS-5382).
TOPOLOGY_SCANNER_SINCE = (2, 41, 0)
#: The first Artemis whose file-based lock manager is artemis-lockmanager-ri's (before: artemis-quorum-ri's).
LOCK_MANAGER_RENAMED = (2, 37, 0)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3])


def etc_options(version: str) -> dict[str, Any]:
    """``write_etc``'s version-dependent arguments for Artemis ``version`` (a version the kit cannot read, such as
    "unknown", is taken to be a current one)."""
    try:
        key = _version_key(version)
    except ValueError:
        key = (999,)
    return {"topology_scanner": key >= TOPOLOGY_SCANNER_SINCE,
            "lock_manager_class": LOCK_MANAGER_CLASS if key >= LOCK_MANAGER_RENAMED else LEGACY_LOCK_MANAGER_CLASS}


def _protocol_version(version: str) -> int:
    return load_versions()[1][version].protocol_version


class _DistributionOnce:
    """The distribution and its launch kit (template instance, class archive), made at most once per target even
    when nodes start in parallel."""

    def __init__(self, version: str, java_args: str) -> None:
        self.version = version
        self.java_args = java_args
        self._lock = threading.Lock()
        self._dist: Distribution | None = None
        self._kit: LaunchKit | None = None

    def get(self) -> Distribution:
        with self._lock:
            if self._dist is None:
                self._dist = ensure_distribution(self.version)
            return self._dist

    def launch_kit(self) -> LaunchKit:
        dist = self.get()
        with self._lock:
            if self._kit is None:
                scanner = _version_key(self.version) >= TOPOLOGY_SCANNER_SINCE
                self._kit = prepare_launch_kit(dist, self.java_args, functools.partial(_training_etc, scanner))
            return self._kit


def _training_etc(topology_scanner: bool, etc: Path, data: Path, port: int) -> None:
    """The training run's configuration: one node as the kit renders it, so it loads what a node loads."""
    write_etc(Topology.single(NodeSpec(port=port, data_dir=data)), "node0", etc, topology_scanner=topology_scanner)


class ArtemisNode(ProcessNode):
    # AMQ221007 "Server is now active" (2.44.0) / "Server is now live" (2.28.0): the same message id
    ready = re.compile(r"AMQ221007")
    # an HA backup: AMQ221109 "Backup Server ... started; waiting for primary to fail" (shared store), AMQ221024
    # "Backup server ... is synchronized with primary server" (replication)
    passive = re.compile(r"AMQ221109|AMQ221024")
    # AMQ221024 "Backup server ... is synchronized with primary server" (ReplicationEndpoint, both versions)
    synced = re.compile(r"AMQ221024")
    launch_label = "artemis broker"
    # the JVM's shutdown hook stops the server on SIGTERM; the JVM then reports the signal (128 + 15)
    clean_exit_codes = frozenset({0, 143})

    def __init__(self, spec: NodeSpec, topology: Topology, node_dir: Path, *, distribution: _DistributionOnce,
                 start_deadline_s: float, stop_deadline_s: float, java_args: str) -> None:
        super().__init__(spec, topology, node_dir, start_deadline_s=start_deadline_s, stop_deadline_s=stop_deadline_s)
        self.instance = node_dir / "instance"
        self.java_args = java_args
        self._distribution = distribution
        self._kit: LaunchKit | None = None

    def _prepare(self) -> None:
        try:
            kit = self._distribution.launch_kit()
        except (ArtemisError, LaunchError) as exc:
            what = f"Artemis {self._distribution.version} is not available: {exc}"
            raise NodeStartError(self.name, what, "") from exc
        self._kit = kit
        if not (self.instance / "bin" / "artemis").exists():
            assert self.spec.data_dir is not None
            instantiate(kit, self.instance, self.spec.data_dir)
        write_etc(self.topology, self.name, self.instance / "etc", **etc_options(self._distribution.version))

    def _argv(self) -> list[str]:
        return [str(self.instance / "bin" / "artemis"), "run"]

    def _env(self) -> dict[str, str]:
        append = " ".join(filter(None, (os.environ.get("JAVA_ARGS_APPEND", ""),
                                        self._kit.java_args_append() if self._kit is not None else "")))
        return dict(os.environ, JAVA_ARGS=self.java_args, JAVA_ARGS_APPEND=append)

    def _check_ready(self, match: re.Match[str], startup: str) -> None:
        # AMQ221020 "Started <transport> Acceptor at host:port for protocols [CORE]" precedes the
        # ready line; without it the port was taken and no one can connect
        if not re.search(rf"AMQ221020.*:{self.spec.port}\b", startup):
            raise TargetError(f"Artemis became active without an acceptor on port {self.spec.port}")


class ArtemisTarget(ManagedTarget):
    """Every node of the topology as an Artemis instance of a pinned version under ``workdir/<node>``."""

    name = "artemis"

    def __init__(
        self,
        topology: Topology | None = None,
        workdir: Path | str = ".",
        *,
        version: str | None = None,
        start_deadline_s: float = ARTEMIS_START_DEADLINE_S,
        stop_deadline_s: float = STOP_DEADLINE_S,
        java_args: str = DEFAULT_JAVA_ARGS,
        ports: PortSource = free_ports,
    ) -> None:
        default, pinned = pinned_artemis_versions()
        chosen = version or default
        if chosen not in pinned:
            raise ValueError(f"Artemis {chosen} is not pinned (fixtures/artemis/versions.json has {', '.join(pinned)})")
        self._distribution = _DistributionOnce(chosen, java_args)
        self._start_deadline_s = start_deadline_s
        self._stop_deadline_s = stop_deadline_s
        self._java_args = java_args
        super().__init__(chosen, _protocol_version(chosen), topology or Topology(), Path(workdir), ports=ports)

    def _make_node(self, spec: NodeSpec, node_dir: Path) -> ArtemisNode:
        return ArtemisNode(spec, self.topology, node_dir, distribution=self._distribution,
                           start_deadline_s=self._start_deadline_s, stop_deadline_s=self._stop_deadline_s,
                           java_args=self._java_args)

    def distribution(self) -> Distribution:
        """The pinned release (fetched with mvn on first use)."""
        return self._distribution.get()

