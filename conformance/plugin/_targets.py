"""The run's targets: one factory that makes each of them (of the run's kind, for a case's topology), and the
preflight that checks, before any case, that the brokers the user named answer as core-protocol servers and that
there is room for the brokers the kit starts.

The factory owns what all targets of a run share: for target ``command``, the nodes of the target file (one
:class:`CommandBench`, lent to one target at a time) and the log of every command run (each case's evidence
takes the runs made while it ran).
"""

from __future__ import annotations

import asyncio
import errno
import shutil
import weakref
from collections.abc import Callable
from pathlib import Path

import pytest

from cck.codec import CodecError, ExceptionType
from cck.conformance.targets import (
    CommandBench,
    CommandFailed,
    CommandLog,
    ManagedTarget,
    NodeSpec,
    PortSource,
    Target,
    Topology,
    capabilities_of,
    free_ports,
    make_target,
)
from cck.conformance.verdicts import Indeterminate, Unsupported
from cck.reference.client import BrokerRefused, ClientError, ClientSettings, ConnectFailed, connect

from ._settings import Settings

__all__ = ["MIN_FREE_BYTES", "PREFLIGHT_S", "PreflightError", "TargetFactory", "check_broker", "check_room", "exit_for",
           "preflight"]

#: How long the preflight waits for each broker to connect and open a session.
PREFLIGHT_S = 10.0
#: The least free space a run that starts brokers needs where it keeps them: a node pre-allocates journal files
#: (Artemis: two of 10 MiB in the journal, two in the bindings), and a run keeps up to a few dozen nodes' data.
MIN_FREE_BYTES = 1 << 30

_NEEDS_CONFIG = "the case needs a broker configured by the kit (target reference, artemis, or command with an " \
                "apply_config command)"


class TargetFactory:
    """Makes the run's targets, not started.  ``workdir(prefix)`` gives a fresh directory for each, ``ports`` the
    free ports of the brokers it runs (this process's own block when the run has several, see ``port_source``)."""

    def __init__(self, settings: Settings, workdir: Callable[[str], Path], ports: PortSource = free_ports) -> None:
        self.settings = settings
        self._workdir = workdir
        self._ports = ports
        #: whether the case in progress measures no times, so that the JVM brokers made for it may start C1-only
        #: (the plugin sets it around each case; see ``Settings.quick_start``)
        self.quick = False
        self.commands = CommandLog()
        #: the managed targets made, as long as something holds them (a case that fails has their logs kept)
        self._made: weakref.WeakSet[ManagedTarget] = weakref.WeakSet()
        target_file = settings.target_file
        self.bench = CommandBench(target_file, self.commands) if target_file is not None else None

    @property
    def configures(self) -> bool:
        """Whether the run's brokers can take a topology of a case's own."""
        if self.settings.target == "url":
            return False
        if self.bench is not None:
            return "config" in self.bench.capabilities
        return True

    def new(self, topology: Topology | None, *, quick: bool | None = None) -> Target:
        """A target of the run's kind for ``topology`` (None: the broker as the run's default one; a url target, or a
        command target without apply_config, takes no topology of a case's own: UNSUPPORTED); its JVMs started
        C1-only if ``quick`` (None: as :attr:`quick` says for the case in progress)."""
        kind = self.settings.target
        assert kind is not None
        if kind == "url":
            if topology is not None:
                raise Unsupported(_NEEDS_CONFIG)
            return make_target("url", url=self.settings.broker_url, version=self.settings.artemis_version)
        if topology is not None and not self.configures:
            raise Unsupported(_NEEDS_CONFIG.replace("(target", "(the target file offers no apply_config command; "
                                                    "target"))
        workdir = self._workdir(f"{kind}-")
        if kind == "command":
            made = make_target("command", bench=self.bench, workdir=workdir, topology=topology or Topology.single())
        else:
            version = self.settings.artemis_version if kind == "artemis" else None
            made = make_target(kind, version=version, workdir=workdir, topology=topology or Topology.single(),
                               ports=self._ports, quick_start=self.quick if quick is None else quick)
        if isinstance(made, ManagedTarget):
            self._made.add(made)
        return made

    def open_targets(self) -> list[ManagedTarget]:
        """The managed targets made here and not closed since they last started."""
        return [target for target in self._made if not target.closed]

    def flavour(self, topology: Topology) -> tuple[Topology, bool]:
        """What a started target kept for reuse must match to serve the case in progress: its topology and how
        its JVMs were started."""
        return topology, self.quick

    def started(self, topology: Topology | None, *, quick: bool | None = None) -> Target:
        """:meth:`new`, started.  A broker that does not start leaves the case's verdict open (INDETERMINATE); a
        target-file command that fails is the kit's set-up error (CommandFailed, KIT_ERROR), never the broker's."""
        target = self.new(topology, quick=quick)
        try:
            target.start()
        except CommandFailed:
            target.close()
            raise
        except Exception as exc:
            target.close()
            raise Indeterminate(f"the target did not start: {exc}") from exc
        return target

    def ports(self, count: int) -> list[int]:
        """The acceptor ports the first ``count`` nodes of a target made next will have (a case that must know them
        before the brokers start: fault proxies standing between them)."""
        if self.bench is None:
            return self._ports(count)
        nodes = self.bench.file.nodes
        if count > len(nodes):
            raise Unsupported(f"the case needs {count} nodes; the target file has {len(nodes)}")
        return [node.port for node in nodes[:count]]


class PreflightError(Exception):
    """A broker the user named does not answer as a core-protocol server would; the message names it and why."""


def _why(url: str, exc: BaseException, user: str | None) -> str:
    if isinstance(exc, BrokerRefused):
        if exc.type in (ExceptionType.SECURITY_EXCEPTION, ExceptionType.CLUSTER_SECURITY_EXCEPTION):
            who = f"user {user!r}" if user else "no user (anonymous)"
            return f"{url}: the broker refused the credentials ({who}; --broker-user/--broker-password): " \
                   f"{exc.broker_message}"
        if exc.type is ExceptionType.INCOMPATIBLE_CLIENT_SERVER_VERSIONS:
            return f"{url}: the broker refused the kit's protocol version ({exc.broker_message}); declare the " \
                   "broker's version (--artemis-version, or version/protocol_version in the target file)"
        return f"{url}: the broker refused to open a session: {exc}"
    if isinstance(exc, ConnectFailed):
        if _refused(exc):
            return f"{url}: connection refused (nothing listens on that port)"
        return f"{url}: cannot connect ({exc.reason})"
    if isinstance(exc, TimeoutError):
        return f"{url}: no answer within {PREFLIGHT_S:.0f} s (an unreachable host, a firewall, or a server that " \
               "does not speak the core protocol)"
    if isinstance(exc, ClientError | CodecError):
        return f"{url}: not a core-protocol server, or not its core acceptor ({exc})"
    if isinstance(exc, OSError):
        return f"{url}: cannot connect ({exc.strerror or exc})"
    raise exc


def _refused(exc: BaseException) -> bool:
    """Whether a failed connect was refused at the TCP level (the client keeps only the text of its last attempt)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError) and not isinstance(seen, ConnectFailed):
            return True
        text = str(seen)
        if f"[Errno {errno.ECONNREFUSED}]" in text or "Connection refused" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


async def _open_session(url: str, settings: Settings, version: int) -> None:
    client = ClientSettings(version=version, call_timeout_ms=int(PREFLIGHT_S * 1000),
                            topology_timeout_ms=int(PREFLIGHT_S * 1000))
    connection = await connect(url, settings=client, connect_timeout=PREFLIGHT_S)
    try:
        session = await connection.create_session(username=settings.user, password=settings.password)
        await session.close()
    finally:
        await connection.close()


def check_broker(url: str, settings: Settings, version: int) -> None:
    """Connect to ``url`` and open a session within :data:`PREFLIGHT_S` (twice that in all); PreflightError
    naming the URL and the cause otherwise."""
    try:
        asyncio.run(asyncio.wait_for(_open_session(url, settings, version), 2 * PREFLIGHT_S))
    except Exception as exc:
        raise PreflightError(_why(url, exc, settings.user)) from exc


def preflight(settings: Settings, factory: TargetFactory, version: int) -> list[str]:
    """Check every broker the user named (url, command); the lines saying what was checked.  PreflightError for a
    broker that does not answer, or a target file whose commands cannot bring one up.

    A target file whose brokers the kit can start has each node started (as a broker of its own, configured by the
    kit when the file can install a configuration), opened a session on and stopped again; the others must be
    running already."""
    if settings.target == "url":
        assert settings.broker_url is not None
        check_broker(settings.broker_url, settings, version)
        return [f"preflight: {settings.broker_url} opened a session"]
    if settings.target != "command":
        return []
    target_file = settings.target_file
    assert target_file is not None
    if "control" not in capabilities_of(target_file):
        for node in target_file.nodes:
            check_broker(node.url, settings, version)
        return [f"preflight: {node.url} ({node.name}) opened a session" for node in target_file.nodes]
    # every node at once, each a broker of its own (no cluster): the commands of every node are tried
    topology = Topology(nodes=tuple(NodeSpec(name=f"node{i}") for i in range(len(target_file.nodes))))
    try:
        target = factory.started(topology)
    except (CommandFailed, Indeterminate) as exc:
        raise PreflightError(f"the nodes of {target_file.path} did not start: {exc}") from exc
    try:
        for started in target.nodes:
            check_broker(started.url, settings, version)
    finally:
        target.close()
    return [f"preflight: {file_node.url} ({file_node.name}) started through its commands, opened a session, stopped"
            for file_node in target_file.nodes]


def check_room(directory: Path, minimum: int | None = None) -> str:
    """The line saying how much room the brokers the kit starts have in ``directory``; PreflightError when it is
    less than ``minimum`` bytes, :data:`MIN_FREE_BYTES` by default (a broker short of disk blocks its producers,
    and every case would time out)."""
    minimum = MIN_FREE_BYTES if minimum is None else minimum
    free = shutil.disk_usage(directory).free
    if free < minimum:
        raise PreflightError(
            f"{directory} has {free / 2**20:.0f} MiB free; the brokers the kit starts keep their journals there and "
            f"the run needs at least {minimum / 2**20:.0f} MiB (free some space, or give pytest a --basetemp on "
            "another disk)")
    return f"preflight: {free / 2**30:.1f} GiB free in {directory} for the brokers the kit starts"


def exit_for(error: PreflightError) -> None:
    """End the run: a broker that does not answer is a usage error, not a verdict on it."""
    pytest.exit(f"preflight failed: {error}", returncode=pytest.ExitCode.USAGE_ERROR)
