"""``make_target``: one entry point for the plugin's ``--target`` / ``--target-version`` /
``--target-url`` options, refusing combinations that make no sense with a message that says why."""

from __future__ import annotations

from pathlib import Path

from cck.conformance.artemis.distribution import pinned_protocol

from ._artemis import DEFAULT_JAVA_ARGS, QUICK_START_JAVA_ARGS, ArtemisTarget, pinned_artemis_versions
from ._base import Target
from ._command import CommandBench, CommandTarget
from ._legacy import LEGACY_TARGETS
from ._ports import PortSource, free_ports
from ._reference import ReferenceTarget, kit_version
from ._topology import Topology
from ._url import UrlTarget

__all__ = ["TARGET_KINDS", "make_target"]

TARGET_KINDS = ("url", "reference", "artemis", "command", *LEGACY_TARGETS)


def make_target(
    kind: str,
    *,
    version: str | None = None,
    url: str | None = None,
    workdir: Path | None = None,
    topology: Topology | None = None,
    bench: CommandBench | None = None,
    ports: PortSource = free_ports,
    quick_start: bool = False,
) -> Target:
    """A target, not started yet (use it as a context manager, or ``start()`` and ``close()``).

    * ``url``: needs ``url``; ``version`` is whatever the user says it is (default "unknown"); a pinned Artemis
      version also gives the target its protocol version, which the kit's clients then speak;
      a topology or workdir is refused: the kit does not configure that broker.
    * every managed kind: ``ports`` picks the nodes' free ports (default: the kernel's; a run on several processes
      gives each its own block, see ``_ports``); a command target's nodes have their ports in the target file.
    * ``quick_start``: target ``artemis`` starts its JVMs C1-only (``QUICK_START_JAVA_ARGS``), for a case that
      measures no times; the other kinds start as they always do.
    * ``reference``: needs ``workdir``; ``version`` may only be the kit's own.
    * ``artemis``: needs ``workdir``; ``version`` is a pinned one (default: the pins' default).
    * ``command``: needs ``bench`` (the nodes of a target file) and ``workdir``; the version is the file's.
    * ``hornetq``, ``artemis1``: HornetQ 2.4.7.Final, Artemis 1.5.6 (embedded by the kit's launcher); ``workdir``.
    """
    if kind not in TARGET_KINDS:
        raise ValueError(f"unknown target kind {kind!r}: use one of {', '.join(TARGET_KINDS)}")
    if kind == "url":
        if not url:
            raise ValueError("target 'url' needs the broker's URL (tcp://host:port)")
        if topology is not None:
            raise ValueError("target 'url' takes no topology: the kit does not configure a broker it does not run "
                             "(use 'reference' or 'artemis' for cases that need one)")
        if workdir is not None:
            raise ValueError("target 'url' takes no workdir: the kit runs no broker for it")
        return UrlTarget(url, version=version, protocol_version=pinned_protocol(version))
    if url is not None:
        raise ValueError(f"target {kind!r} runs its own brokers and picks their ports; a URL is only for target 'url'")
    if workdir is None:
        raise ValueError(f"target {kind!r} needs a workdir for its brokers' configuration, data and logs")
    if kind == "command":
        if bench is None:
            raise ValueError("target 'command' needs the nodes of a target file (a CommandBench)")
        if version is not None:
            raise ValueError("target 'command' is the version its target file says")
        return CommandTarget(bench, topology, workdir)
    if kind in LEGACY_TARGETS:
        if version is not None:
            raise ValueError(f"target {kind!r} is one version of one server; it takes no version")
        return LEGACY_TARGETS[kind](topology, workdir, ports=ports)
    if kind == "reference":
        mine = kit_version()
        if version is not None and version != mine:
            raise ValueError(f"the reference broker is this kit's own, version {mine}; it has no version {version!r}")
        return ReferenceTarget(topology, workdir, ports=ports)
    default, pinned = pinned_artemis_versions()
    if version is not None and version not in pinned:
        raise ValueError(f"Artemis {version} is not pinned: use one of {', '.join(pinned)} "
                         f"(default {default}; pins live in fixtures/artemis/versions.json)")
    java_args = QUICK_START_JAVA_ARGS if quick_start else DEFAULT_JAVA_ARGS
    return ArtemisTarget(topology, workdir, version=version, ports=ports, java_args=java_args)
