"""What every target offers the suite: nodes with URLs, capabilities, and lifecycle.

A *target* is the system under test: one broker or several (a cluster).  A *node* is one broker
of it.  The kit controls the nodes of a managed target (reference, artemis) and only connects to
those of a url target; a case asks ``target.require("kill")`` first, and a target without the
capability raises :class:`UnsupportedByTarget`, which the suite reports as UNSUPPORTED.
"""

from __future__ import annotations

import collections
import functools
import re
import signal
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Final, Self

from ._errors import NodeStartError, NodeStopError, TargetError, UnsupportedByTarget
from ._forkserver import ForkServer
from ._netns import NetnsNetwork, netns_unavailable, plan_netns
from ._ports import PortSource, free_ports
from ._process import LOG_LINES_KEPT, BrokerProcess, ExitedEarly, NotReady
from ._topology import PERMISSIONS, NodeSpec, Topology

__all__ = [
    "ALL_CAPABILITIES",
    "CONFIG",
    "CONTROL",
    "KILL",
    "RESTART",
    "LOG",
    "ManagedNode",
    "ManagedTarget",
    "Node",
    "ProcessNode",
    "Target",
]

#: start and stop nodes (graceful stop sends clients DISCONNECT)
CONTROL: Final = "control"
#: stop and start a node keeping its data (journal, node ID)
RESTART: Final = "restart"
#: SIGKILL a node (a crash: no DISCONNECT, journal as the disk has it)
KILL: Final = "kill"
#: the kit generates the broker configuration from the topology
CONFIG: Final = "config"
#: the kit reads the broker's log as it writes it (an HA backup says it is passive, synchronised, active only there)
LOG: Final = "log"
ALL_CAPABILITIES: Final = frozenset({CONTROL, RESTART, KILL, CONFIG, LOG})

STOP_DEADLINE_S = 30.0
LOG_TAIL_LINES = 60


class Node(ABC):
    """One broker of a target."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    @abstractmethod
    def url(self) -> str:
        """``tcp://host:port`` of its core acceptor."""

    @property
    @abstractmethod
    def is_running(self) -> bool: ...

    @abstractmethod
    def start(self) -> None:
        """Start the broker and return once it accepts connections."""

    @abstractmethod
    def stop(self) -> None:
        """Graceful stop (SIGTERM: the broker sends DISCONNECT); a no-op if not running."""

    @abstractmethod
    def kill(self) -> None:
        """SIGKILL: the broker dies as in a crash; a no-op if not running."""

    @abstractmethod
    def restart(self, graceful: bool = True) -> None:
        """Stop (or kill) and start again with the same data and port."""

    @abstractmethod
    def logs(self, lines: int = 200) -> str:
        """The last ``lines`` lines the broker wrote (for diagnostics and evidence)."""

    @abstractmethod
    def close(self) -> None:
        """Release the node: kill it if it still runs.  Never raises for a node already gone."""

    def __enter__(self) -> Self:
        if not self.is_running:
            self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.url}>"


class ManagedNode(Node):
    """A broker the kit starts, stops and configures from a topology node (``spec``): a process of its own
    (:class:`ProcessNode`) or one the user runs, controlled through the commands of a target file."""

    def __init__(
        self, spec: NodeSpec, topology: Topology, node_dir: Path, *, start_deadline_s: float, stop_deadline_s: float
    ) -> None:
        super().__init__(spec.name)
        self.spec = spec
        self.topology = topology
        self.node_dir = node_dir
        #: everything the broker wrote, every run of it (the kit appends; a case that fails has it copied to the
        #: evidence)
        self.log_file = node_dir / "broker.log"
        self.start_deadline_s = start_deadline_s
        self.stop_deadline_s = stop_deadline_s
        #: how many times the broker was started: a case that left it as it found it left this unchanged
        self.starts = 0
        #: whether the running server serves (False: it started passive and has not taken over yet)
        self.active = False
        #: the last lines the broker wrote (what errors quote, and ``logs``)
        self._tail: collections.deque[str] = collections.deque(maxlen=LOG_LINES_KEPT)

    @property
    def url(self) -> str:
        return self.spec.url

    def restart(self, graceful: bool = True) -> None:
        if graceful:
            self.stop()
        else:
            self.kill()
        self.start()

    def logs(self, lines: int = 200) -> str:
        kept = list(self._tail)
        return "".join(kept[-lines:] if lines > 0 else kept)

    @abstractmethod
    def _log_stream(self) -> BrokerProcess | None:
        """What reads the broker's output of its current run (None: it is not running)."""

    @abstractmethod
    def _patterns(self) -> tuple[re.Pattern[str], re.Pattern[str] | None, re.Pattern[str] | None]:
        """The lines that say the broker is active, passive (an HA backup) and synchronised (a replication backup)."""

    def wait_active(self, deadline_s: float) -> None:
        """Until a passive server (a backup) says it is active; at once if it already is (its last line saying
        either way says active: a backup that took over and handed back is passive again).  NodeStartError when
        it ends or stays passive past the deadline (the process is left as it is)."""
        process = self._log_stream()
        ready, passive, _ = self._patterns()
        if process is None or not process.running:
            raise NodeStartError(self.name, "is not running, so it cannot become active", self.logs(LOG_TAIL_LINES))
        since = 0
        if passive is not None:
            for index, line in enumerate(process.later_lines()):
                if passive.search(line):
                    self.active, since = False, index + 1
                elif ready.search(line):
                    self.active, since = True, index + 1
        if self.active:
            return
        try:
            process.wait_line(ready, deadline_s, since=since)
        except (ExitedEarly, NotReady) as exc:
            raise NodeStartError(self.name, f"did not become active: {exc}", self.logs(LOG_TAIL_LINES)) from None
        self.active = True

    def wait_synced(self, deadline_s: float) -> None:
        """Until a replication backup says it holds its primary's state (the line may be the one its start
        waited for); NodeStartError when it ends first or the deadline passes."""
        process = self._log_stream()
        synced = self._patterns()[2]
        if synced is None:
            raise TargetError(f"node {self.name!r}: this kind of broker says nothing the kit reads as synchronised")
        if process is None or not process.running:
            raise NodeStartError(self.name, "is not running, so it cannot synchronise", self.logs(LOG_TAIL_LINES))
        if synced.search("".join(process.startup)):
            return
        try:
            process.wait_line(synced, deadline_s)
        except (ExitedEarly, NotReady) as exc:
            raise NodeStartError(self.name, f"did not synchronise: {exc}", self.logs(LOG_TAIL_LINES)) from None



class ProcessNode(ManagedNode):
    """A broker process the kit runs: subclasses say how to prepare, launch and recognise it."""

    ready: ClassVar[re.Pattern[str]]
    #: the line of a server that started passive (an HA backup waiting to take over); None: it always activates
    passive: ClassVar[re.Pattern[str] | None] = None
    #: the line of a replication backup that holds its primary's whole state (it can take over from then on)
    synced: ClassVar[re.Pattern[str] | None] = None
    #: what the run's count of launched processes calls this kind of broker
    launch_label: ClassVar[str] = "broker"
    clean_exit_codes: ClassVar[frozenset[int]] = frozenset({0})

    def __init__(
        self, spec: NodeSpec, topology: Topology, node_dir: Path, *, start_deadline_s: float, stop_deadline_s: float
    ) -> None:
        super().__init__(spec, topology, node_dir, start_deadline_s=start_deadline_s, stop_deadline_s=stop_deadline_s)
        self.last_exit_code: int | None = None
        self._process: BrokerProcess | None = None
        self._prepared = False
        #: turns the broker's command line into one that runs it elsewhere (a network namespace)
        self.launcher: Callable[[list[str]], list[str]] | None = None

    # ---------------------------------------------------------------- what a kind of broker defines

    @abstractmethod
    def _prepare(self) -> None:
        """One-time setup before the first start (write configuration, create an instance)."""

    @abstractmethod
    def _argv(self) -> list[str]: ...

    def _env(self) -> dict[str, str] | None:
        return None

    def _fork_server(self, env: dict[str, str] | None) -> ForkServer | None:
        """A server that forks this broker from an interpreter that has imported it already (None: launch it)."""
        return None

    def _log_stream(self) -> BrokerProcess | None:
        return self._process

    def _patterns(self) -> tuple[re.Pattern[str], re.Pattern[str] | None, re.Pattern[str] | None]:
        return self.ready, self.passive, self.synced

    def _check_ready(self, match: re.Match[str], startup: str) -> None:
        """Called with the ready line's match and this run's output up to it; raise TargetError if
        they show something wrong."""

    # ---------------------------------------------------------------- Node

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.running

    def start(self) -> None:
        if self.is_running:
            raise TargetError(f"node {self.name!r} is already running ({self.url})")
        if not self._prepared:
            self.node_dir.mkdir(parents=True, exist_ok=True)
            self._prepare()
            self._prepared = True
        self.starts += 1
        argv, env = self._argv(), self._env()
        ready = self.ready if self.passive is None else re.compile(f"{self.ready.pattern}|{self.passive.pattern}")
        process = BrokerProcess(argv if self.launcher is None else self.launcher(argv), ready=ready,
                                log_file=self.log_file, tail=self._tail, cwd=self.node_dir, env=env,
                                label=self.launch_label,
                                fork_server=self._fork_server(env) if self.launcher is None else None)
        self._process = process
        try:
            match = process.wait_ready(self.start_deadline_s)
            self.active = self.ready.search(match.group(0)) is not None
            if self.active:
                self._check_ready(self.ready.search(match.group(0)) or match, "".join(process.startup))
        except ExitedEarly as exc:
            self.last_exit_code = process.wait(self.stop_deadline_s)
            raise NodeStartError(self.name, f"the broker {exc}", self.logs(LOG_TAIL_LINES)) from None
        except NotReady as exc:
            self.last_exit_code = process.kill(self.stop_deadline_s)
            raise NodeStartError(self.name, f"not ready: {exc}; it was killed", self.logs(LOG_TAIL_LINES)) from None
        except TargetError as exc:  # _check_ready saw something wrong in the ready line
            self.last_exit_code = process.kill(self.stop_deadline_s)
            raise NodeStartError(self.name, f"{exc}; it was killed", self.logs(LOG_TAIL_LINES)) from None
        except BaseException:
            self.last_exit_code = process.kill(self.stop_deadline_s)
            raise

    def stop(self) -> None:
        process = self._process
        if process is None or not process.running:
            self._reap()
            return
        process.signal_group(signal.SIGTERM)
        code = process.wait(self.stop_deadline_s)
        if code is None:
            self.last_exit_code = process.kill(self.stop_deadline_s)
            raise NodeStopError(self.name, f"ignored SIGTERM for {self.stop_deadline_s:.0f}s and was killed",
                                self.logs(LOG_TAIL_LINES))
        self.last_exit_code = code
        if code not in self.clean_exit_codes:
            raise NodeStopError(self.name, f"exited with code {code} on SIGTERM", self.logs(LOG_TAIL_LINES))

    def kill(self) -> None:
        process = self._process
        if process is None or not process.running:
            self._reap()
            return
        code = process.kill(self.stop_deadline_s)
        if code is None:
            raise NodeStopError(self.name, f"still running {self.stop_deadline_s:.0f}s after SIGKILL",
                                self.logs(LOG_TAIL_LINES))
        self.last_exit_code = code

    def close(self) -> None:
        process = self._process
        if process is not None and process.running:
            self.last_exit_code = process.kill(self.stop_deadline_s)
        self._reap()

    def _reap(self) -> None:
        # a broker that died on its own: collect its exit code and close its log
        if self._process is not None and not self._process.running:
            self.last_exit_code = self._process.wait(0)


class Target(ABC):
    """The system under test: its nodes, what the kit may do to them, and its broker version."""

    name: ClassVar[str]
    #: the security permissions (``PERMISSIONS`` names) the broker has and checks; a case exercising another one
    #: is UNSUPPORTED (a grant of it configures nothing there).  Every one but on the older servers.
    permissions: ClassVar[frozenset[str]] = frozenset(PERMISSIONS)

    def __init__(
        self, version: str, capabilities: frozenset[str], topology: Topology | None, protocol_version: int | None
    ) -> None:
        unknown = capabilities - ALL_CAPABILITIES
        if unknown:
            raise ValueError(f"unknown capabilities {sorted(unknown)} (known: {sorted(ALL_CAPABILITIES)})")
        self.version = version
        #: the newest core protocol version the broker accepts (None: not known for a url target);
        #: a client must not announce a newer one (Artemis refuses it: INCOMPATIBLE_CLIENT_SERVER_VERSIONS)
        self.protocol_version = protocol_version
        self.capabilities = capabilities
        self.topology = topology

    @property
    @abstractmethod
    def nodes(self) -> tuple[Node, ...]: ...

    @property
    def url(self) -> str:
        """The first node's URL (the only one of a single-node target)."""
        return self.nodes[0].url

    @property
    def urls(self) -> tuple[str, ...]:
        return tuple(n.url for n in self.nodes)

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"target {self.name!r} has no node {name!r} (nodes: {', '.join(n.name for n in self.nodes)})")

    def supports(self, capability: str) -> bool:
        return capability in self.capabilities

    def require(self, *capabilities: str, action: str | None = None) -> None:
        """Raise :class:`UnsupportedByTarget` naming the first capability the target lacks."""
        for capability in capabilities:
            if capability not in ALL_CAPABILITIES:
                raise ValueError(f"unknown capability {capability!r} (known: {sorted(ALL_CAPABILITIES)})")
            if capability not in self.capabilities:
                raise UnsupportedByTarget(self.name, capability, self.capabilities, action)

    @abstractmethod
    def start(self) -> None:
        """Make every node reachable (start the managed ones that are not running)."""

    @abstractmethod
    def stop(self) -> None:
        """Stop every running node gracefully."""

    @abstractmethod
    def close(self) -> None:
        """Kill whatever still runs; safe to call twice and after a failed start."""

    def describe(self) -> dict[str, object]:
        """What a report header or evidence record says about the target."""
        return {
            "target": self.name,
            "version": self.version,
            "protocol_version": self.protocol_version,
            "capabilities": sorted(self.capabilities),
            "nodes": {n.name: n.url for n in self.nodes},
        }

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.version} {', '.join(self.urls)}>"


class ManagedTarget(Target):
    """A target whose nodes the kit runs from a topology, each under ``workdir/<node>``."""

    topology: Topology  # resolved: every port and data directory chosen

    def __init__(self, version: str, protocol_version: int | None, topology: Topology, workdir: Path, *,
                 capabilities: frozenset[str] = ALL_CAPABILITIES, ports: PortSource = free_ports) -> None:
        super().__init__(version, capabilities, None, protocol_version)
        self.workdir = workdir.absolute()
        self._ports = ports
        #: closed (its nodes released) since it was last started
        self.closed = False
        self.network: NetnsNetwork | None = None
        if topology.network == "netns":
            why = netns_unavailable()
            if why is not None:
                raise TargetError(f"topology network 'netns': {why}")
            topology, plan = plan_netns(topology)
            self.network = NetnsNetwork(plan)
        # ports and data directories are fixed now: a restarted node keeps its URL and its data,
        # and the nodes of a cluster name each other in their configuration
        self.topology = self._resolve(topology)
        self._nodes = tuple(self._make_node(spec, self.workdir / spec.name) for spec in self.topology.nodes)
        if self.network is not None:
            for node in self._nodes:
                assert isinstance(node, ProcessNode), "only a broker the kit runs itself runs in a namespace"
                node.launcher = functools.partial(self.network.wrap, node.name)

    def _resolve(self, topology: Topology) -> Topology:
        """The topology with every port and data directory chosen (free ports from the target's port source; data
        under the workdir)."""
        return topology.resolve(self.workdir, self._ports, lambda n: self._ports(n, kind=socket.SOCK_DGRAM))

    @property
    def kit_address(self) -> str:
        """The kit's own address on the nodes' network (where it joins multicast groups, say)."""
        return self.network.plan.gateway if self.network is not None else "127.0.0.1"

    @abstractmethod
    def _make_node(self, spec: NodeSpec, node_dir: Path) -> ManagedNode: ...

    @property
    def nodes(self) -> tuple[ManagedNode, ...]:
        return self._nodes

    def node(self, name: str) -> ManagedNode:
        found = super().node(name)
        assert isinstance(found, ManagedNode)
        return found

    def start(self) -> None:
        """Start the stopped nodes in parallel (a JVM takes seconds; a cluster's nodes wait for each
        other anyway).  If one fails, the nodes this call started are killed and its error raised."""
        stopped = [n for n in self._nodes if not n.is_running]
        self.closed = False
        if self.network is not None and not self.network.created:
            self.network.create()
        ha = self.topology.ha
        backups = {backup for _, backup in ha.pairs} if ha is not None else set()
        try:
            # an HA pair's primary first: a backup started with it could take the shared store, or find no one
            # to replicate from
            _run_all([n for n in stopped if n.name not in backups], lambda node: node.start())
            _run_all([n for n in stopped if n.name in backups], lambda node: node.start())
        except BaseException:
            for node in stopped:
                node.close()
            raise

    def stop(self) -> None:
        _run_all([n for n in self._nodes if n.is_running], lambda node: node.stop())

    def close(self) -> None:
        self.closed = True
        for node in self._nodes:
            node.close()
        if self.network is not None:
            self.network.destroy()


def _run_all(nodes: Iterable[ManagedNode], action: Callable[[ManagedNode], None]) -> None:
    """Run ``action`` on every node at once; re-raise the first failure after all have finished."""
    chosen = list(nodes)
    if len(chosen) <= 1:
        for node in chosen:
            action(node)
        return
    with ThreadPoolExecutor(max_workers=len(chosen), thread_name_prefix="target") as pool:
        futures = [pool.submit(action, node) for node in chosen]
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error
