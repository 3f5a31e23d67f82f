"""Brokers the user runs, controlled through the commands of a target file (``_target_file``).

The kit never touches such a broker except through those commands: it starts, stops, kills and restarts it by
running them, installs a configuration it rendered with ``apply_config``, and learns what the broker does from
the ``log`` command's output (or, without one, from connecting to it).

The nodes of the file are one set of machines: a :class:`CommandBench` lends them to one :class:`CommandTarget`
at a time.  A case asking for another topology gets a new target, which first takes the nodes back from the one
that held them (stopping its brokers); a target whose nodes were taken reclaims them the next time one of its
nodes is started, installing its own configuration again.  Topology node *i* runs on the file's node *i*.
"""

from __future__ import annotations

import dataclasses
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

from ._artemis import ArtemisNode, etc_options
from ._base import CONFIG, CONTROL, KILL, LOG, LOG_TAIL_LINES, RESTART, ManagedNode, ManagedTarget
from ._commands import CommandFailed, CommandLog, CommandRecord, fill, run_command
from ._config import write_etc
from ._errors import NodeStartError, TargetError, UnsupportedByTarget
from ._process import BrokerProcess, ExitedEarly, NotReady
from ._reference import ReferenceNode
from ._target_file import FileNode, TargetFile, capabilities_of, unlocking_commands
from ._topology import NodeSpec, Topology

__all__ = ["CommandBench", "CommandNode", "CommandTarget"]

#: Without a log command the kit knows a broker is up only by connecting to it; this far apart, until the deadline.
PROBE_INTERVAL_S = 0.1
_PROBE_TIMEOUT_S = 1.0


def _patterns_of(target_file: TargetFile) -> tuple[re.Pattern[str], re.Pattern[str] | None, re.Pattern[str] | None]:
    """The ready, passive and synced lines of the file's kind of broker, as ``[patterns]`` overrides them."""
    known = {"artemis": (ArtemisNode.ready, ArtemisNode.passive, ArtemisNode.synced),
             "reference": (ReferenceNode.ready, ReferenceNode.passive, ReferenceNode.synced)}
    ready, passive, synced = known.get(target_file.broker, (None, None, None))
    given = target_file.patterns
    chosen_ready = re.compile(given.ready) if given.ready is not None else ready
    if chosen_ready is None:  # the file was checked: 'other' without a ready pattern has no log command
        chosen_ready = re.compile(r"(?!)")
    return (chosen_ready, re.compile(given.passive) if given.passive is not None else passive,
            re.compile(given.synced) if given.synced is not None else synced)


class CommandBench:
    """The nodes of one target file and who holds them: one owner per run (the plugin's target factory)."""

    def __init__(self, target_file: TargetFile, log: CommandLog) -> None:
        self.file = target_file
        self.log = log
        self.capabilities = capabilities_of(target_file)
        self._lock = threading.RLock()
        self._holder: CommandTarget | None = None
        #: file node -> the target whose configuration it has installed
        self._configured: dict[str, CommandTarget] = {}
        #: file nodes the kit has stopped or killed itself (so it need not stop them before a start)
        self._down: set[str] = set()

    def claim(self, target: CommandTarget) -> None:
        """Give the nodes to ``target``; the target holding them stops its brokers first."""
        with self._lock:
            holder = self._holder
            if holder is target:
                return
            self._holder = target
        if holder is not None:
            holder.release()

    def holds(self, target: CommandTarget) -> bool:
        with self._lock:
            return self._holder is target

    def configured_for(self, node: str, target: CommandTarget) -> bool:
        with self._lock:
            return self._configured.get(node) is target

    def set_configured(self, node: str, target: CommandTarget) -> None:
        with self._lock:
            self._configured[node] = target

    def known_down(self, node: str) -> bool:
        with self._lock:
            return node in self._down

    def set_down(self, node: str, down: bool) -> None:
        with self._lock:
            if down:
                self._down.add(node)
            else:
                self._down.discard(node)

    def run(self, node: FileNode, name: str, builtins: dict[str, str], *, deadline_s: float | None = None
            ) -> CommandRecord:
        """Run ``node``'s command ``name`` with its placeholders filled in; CommandFailed if it fails."""
        template = node.commands.get(name)
        assert template is not None, f"the caller checked that node {node.name} offers {name}"
        command = fill(template, builtins, dict(node.variables))
        return run_command(node.name, name, command, deadline_s or self.file.deadlines.of(name), self.log)


class CommandNode(ManagedNode):
    """One topology node on one node of the target file."""

    def __init__(self, spec: NodeSpec, topology: Topology, node_dir: Path, *, file_node: FileNode,
                 bench: CommandBench, target: CommandTarget) -> None:
        deadlines = bench.file.deadlines
        super().__init__(spec, topology, node_dir, start_deadline_s=deadlines.start, stop_deadline_s=deadlines.stop)
        self.file_node = file_node
        self._bench = bench
        self._target = target
        self._follower: BrokerProcess | None = None
        #: whether the broker runs, as far as the kit knows (None: not known yet; a connection tells)
        self._up: bool | None = None

    # ---------------------------------------------------------------- what the commands are given

    def _builtins(self, etc: Path | None = None) -> dict[str, str]:
        values = {"node": self.file_node.name, "url": self.file_node.url, "host": self.file_node.host,
                  "port": str(self.file_node.port), "data_dir": str(self.spec.data_dir),
                  "work_dir": str(self.node_dir)}
        if etc is not None:
            values |= {"etc_dir": str(etc), "broker_xml": str(etc / "broker.xml")}
        return values

    def _offers(self, command: str) -> bool:
        return self.file_node.commands.get(command) is not None

    def _refuse(self, capability: str, action: str) -> NoReturn:
        raise UnsupportedByTarget(self._target.name, capability, self._target.capabilities,
                                  f"{action} node {self.name} (the target file offers no "
                                  f"{' or '.join(unlocking_commands(capability, self.file_node.commands.offered()))}"
                                  " command)")

    # ---------------------------------------------------------------- Node

    @property
    def is_running(self) -> bool:
        if self._target.supports(CONTROL):
            # running as this target's broker: started by the kit for it (a broker found running is restarted with
            # the target's configuration, so it counts as not running until then)
            return bool(self._up) and self._bench.holds(self._target)
        if self._up is None:
            self._up = _accepts(self.file_node.host, self.file_node.port)
        return self._up

    def start(self) -> None:
        if not (self._offers("start") and self._offers("stop")):
            self._refuse(CONTROL, "start")
        role = self.topology.ha.role_of(self.name) if self.topology.ha is not None else None
        if role is not None and role[0] == "backup" and not self._offers("log"):
            self._refuse(LOG, "start the HA backup")  # a passive backup accepts no connection: only its log tells
        self._target.claim()
        if self._up:
            raise TargetError(f"node {self.name!r} is already running ({self.url})")
        self.node_dir.mkdir(parents=True, exist_ok=True)
        if not self._bench.known_down(self.file_node.name):
            self._bench.run(self.file_node, "stop", self._builtins())  # a broker of the user's may still run
            self._bench.set_down(self.file_node.name, True)
        if self._target.supports(CONFIG) and not self._bench.configured_for(self.file_node.name, self._target):
            etc = self.node_dir / "etc"
            write_etc(self.topology, self.name, etc, **self._target.etc_options)
            self._bench.run(self.file_node, "apply_config", self._builtins(etc))
            self._bench.set_configured(self.file_node.name, self._target)
        self._launch("start")

    def _launch(self, command: str) -> None:
        """Run ``command`` (start or restart) and wait until the broker is up (or passive, for a backup)."""
        ready, passive, _ = self._patterns()
        began = time.monotonic()
        follower = None
        if self._offers("log"):
            follower = self._follow(ready if passive is None else re.compile(f"{ready.pattern}|{passive.pattern}"))
        self._follower = follower
        self.starts += 1
        self._bench.set_down(self.file_node.name, False)
        self._up = True
        try:
            self._bench.run(self.file_node, command, self._builtins())
            left = max(self.start_deadline_s - (time.monotonic() - began), 0.0)
            if follower is None:
                self._wait_accepting(left)
                self.active = True
                return
            match = follower.wait_ready(left)
            self.active = ready.search(match.group(0)) is not None
        except ExitedEarly as exc:
            self._abandon()
            raise CommandFailed(CommandRecord(
                node=self.file_node.name, name="log", command=" ".join(follower.argv) if follower else "",
                began_ns=time.monotonic_ns(), duration_s=time.monotonic() - began, exit_status=exc.returncode,
                timed_out=False, deadline_s=self.start_deadline_s, output=self.logs(LOG_TAIL_LINES))) from None
        except NotReady as exc:
            self._abandon()
            raise NodeStartError(self.name, f"not up after its {command} command: {exc}",
                                 self.logs(LOG_TAIL_LINES)) from None
        except BaseException:
            self._abandon()
            raise

    def _follow(self, ready: re.Pattern[str]) -> BrokerProcess:
        """Start the log command: what it prints from now on is this run's log."""
        self._end_follower()
        template = self.file_node.commands.log
        assert template is not None
        command = fill(template, self._builtins(), dict(self.file_node.variables))
        return BrokerProcess(["/bin/sh", "-c", command], ready=ready, log_file=self.log_file,
                             tail=self._tail, cwd=self.node_dir, label="log follower")

    def _wait_accepting(self, deadline_s: float) -> None:
        end = time.monotonic() + deadline_s
        while not _accepts(self.file_node.host, self.file_node.port):
            if time.monotonic() >= end:
                raise NotReady(f"{self.url} did not accept a connection within {deadline_s:.0f}s")
            time.sleep(PROBE_INTERVAL_S)  # no log to wait on: a connection is the only sign of a broker that is up

    def _abandon(self) -> None:
        """After a start that failed: bring the broker down as far as the commands can, so the next start is clean."""
        try:
            self._down_with("kill" if self._offers("kill") else "stop")
        except CommandFailed:
            self._up = None  # not known: a connection will tell

    def _down_with(self, command: str) -> None:
        try:
            self._bench.run(self.file_node, command, self._builtins())
        finally:
            self._end_follower()
        self._up = False
        self.active = False
        self._bench.set_down(self.file_node.name, True)

    def _end_follower(self) -> None:
        follower, self._follower = self._follower, None
        if follower is not None:
            follower.kill(5.0)

    def stop(self) -> None:
        if not self._offers("stop"):
            self._refuse(CONTROL, "stop")
        if self._up is False:
            return
        self._down_with("stop")

    def kill(self) -> None:
        if not (self._offers("kill") and self._offers("start")):
            self._refuse(KILL, "kill")
        if self._up is False:
            return
        self._down_with("kill")

    def restart(self, graceful: bool = True) -> None:
        if graceful and self._offers("restart") and self._up:
            self._end_follower()
            self._launch("restart")
            return
        if not graceful and not self._offers("kill"):
            self._refuse(KILL, "kill")
        if not (self._offers("start") and self._offers("stop")):
            self._refuse(RESTART, "restart")
        super().restart(graceful)

    def close(self) -> None:
        """Bring down a broker the kit started (kill, else stop); a failing command is in the command log."""
        if not self._up or not (self._offers("kill") or self._offers("stop")):
            self._end_follower()
            return
        try:
            self._down_with("kill" if self._offers("kill") else "stop")
        except CommandFailed:
            self._up = None

    def wait_active(self, deadline_s: float) -> None:
        if not self._offers("log"):
            self._refuse(LOG, "tell when a backup is active on")
        super().wait_active(deadline_s)

    def wait_synced(self, deadline_s: float) -> None:
        if not self._offers("log"):
            self._refuse(LOG, "tell when a backup is synchronised on")
        super().wait_synced(deadline_s)

    def _log_stream(self) -> BrokerProcess | None:
        return self._follower if self._up else None

    def _patterns(self) -> tuple[re.Pattern[str], re.Pattern[str] | None, re.Pattern[str] | None]:
        return _patterns_of(self._bench.file)


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=_PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


class CommandTarget(ManagedTarget):
    """The topology on the nodes of a target file (the first topology node on the first file node, ...)."""

    name = "command"

    def __init__(self, bench: CommandBench, topology: Topology | None = None, workdir: Path | str = ".") -> None:
        topology = topology or Topology()
        target_file = bench.file
        self._bench = bench
        self.target_file = target_file
        capabilities = bench.capabilities
        if topology.network == "netns":
            raise UnsupportedByTarget("command", "netns", capabilities,
                                      "run a topology in network namespaces (only brokers the kit runs itself can)")
        if len(topology.nodes) > len(target_file.nodes):
            raise UnsupportedByTarget("command", "nodes", capabilities,
                                      f"run a topology of {len(topology.nodes)} nodes (the target file has "
                                      f"{len(target_file.nodes)})")
        if topology.ha is not None and topology.ha.transparent_resume:
            raise UnsupportedByTarget("command", "transparent-resume", capabilities, "turn on transparent resume "
                                      "(a reference-broker command-line flag the kit cannot pass through commands)")
        # the reference broker has no topology scanner; any other broker is rendered for like Artemis of its version
        self.etc_options: dict[str, Any] = ({"topology_scanner": False, "max_disk_usage": None}
                                            if target_file.broker == "reference"
                                            else etc_options(target_file.version))
        super().__init__(target_file.version, target_file.protocol_version, topology, Path(workdir),
                         capabilities=capabilities)

    def _resolve(self, topology: Topology) -> Topology:
        resolved = super()._resolve(topology)  # free UDP ports for discovery groups, data directories
        nodes = []
        for spec, file_node in zip(resolved.nodes, self.target_file.nodes, strict=False):
            original = topology.node(spec.name)
            if original.port and original.port != file_node.port:
                raise UnsupportedByTarget("command", "ports", self.capabilities,
                                          f"run node {spec.name} on port {original.port} (the target file's node "
                                          f"{file_node.name} is {file_node.url})")
            data_dir = spec.data_dir
            if file_node.data_dir is not None:
                node_dir = self.workdir / spec.name
                data_dir = Path(fill(file_node.data_dir, {}, {**dict(file_node.variables), "node": file_node.name,
                                                              "work_dir": str(node_dir)}))
            nodes.append(dataclasses.replace(spec, host=file_node.host, port=file_node.port, data_dir=data_dir))
        placed = dataclasses.replace(resolved, nodes=tuple(nodes))
        if placed.ha is not None and placed.ha.policy == "shared-store":  # the backup's store is its primary's
            by_name = {n.name: n for n in placed.nodes}
            shared = {backup: by_name[primary].data_dir for primary, backup in placed.ha.pairs}
            placed = dataclasses.replace(placed, nodes=tuple(
                dataclasses.replace(n, data_dir=shared[n.name]) if n.name in shared else n for n in placed.nodes))
        return placed

    def _make_node(self, spec: NodeSpec, node_dir: Path) -> CommandNode:
        index = [n.name for n in self.topology.nodes].index(spec.name)
        return CommandNode(spec, self.topology, node_dir, file_node=self.target_file.nodes[index],
                           bench=self._bench, target=self)

    def claim(self) -> None:
        """Take the file's nodes for this target (the target holding them stops its brokers)."""
        self._bench.claim(self)

    def release(self) -> None:
        """Another target takes the nodes: bring down what this one started."""
        for node in self.nodes:
            node.close()

    def start(self) -> None:
        if not self.supports(CONTROL):
            return  # the user's brokers, running as they are (a node that is not is found by the preflight)
        self.claim()
        super().start()

    def close(self) -> None:
        if self._bench.holds(self):
            super().close()

    def describe(self) -> dict[str, object]:
        described = super().describe()
        described["target_file"] = self.target_file.describe()
        return described

