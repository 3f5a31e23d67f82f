"""Making and starting Artemis instances fast: a broker under test lives for seconds, and a run starts hundreds.

Two things, each measured on a 2-core machine (start = process launched to AMQ221007):

* C1 only (``-XX:TieredStopAtLevel=1``) about halves a start (4.5 s -> 2.4 s) and the CPU of a short life, but
  with it a 2.44.0 node made a third series of connection attempts to a killed peer, at a fixed retry-interval,
  and the ``cluster.bridge-backoff.*`` cases failed in most runs (with the default JIT, in about one run of five).
  So only the nodes of a case that measures no times start C1-only (the target's ``java_args``, chosen by the
  plugin: a case marked ``cck_alone`` gets the default compilers); the archive below is made per set of flags.
* **One instance template per version**: ``artemis create`` is a JVM run of its own (about 1 s).  It writes the
  same files for every node except the instance and data paths (in ``bin/artemis``, ``etc/*.profile`` and
  ``etc/bootstrap.xml``) and the files :func:`write_etc` replaces anyway (broker.xml, login.config, users,
  roles), so it runs once per version into the cache and each node gets a copy with its own paths.
* **A class-data-sharing archive** (JDK 13+ dynamic AppCDS) of what a broker loads when it starts, made once per
  version and Java runtime by a training run of the template (started, then stopped: the JVM writes the archive
  as it exits) and given to every later JVM; a further 20 % off a start.  A JVM that cannot use it (another
  build, other flags) says so in its log and starts without it; a training run that writes no archive leaves a
  marker, so the kit does not train again on every run.

Everything made lives under the version's cache directory (``$CCK_CACHE/artemis/<version>/``) and is made under
a file lock, so parallel nodes and parallel runs make it once.
"""

from __future__ import annotations

import collections
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cck.conformance.artemis.distribution import Distribution, file_lock

from ._ports import free_ports
from ._process import BrokerProcess, ExitedEarly, NotReady, count_launch

__all__ = ["FAST_START_JAVA_ARGS", "LaunchError", "LaunchKit", "TrainingEtc", "instantiate", "prepare_launch_kit"]

#: JVM flags for a short-lived broker (see the module docstring); heap kept small so a 3-node cluster fits
FAST_START_JAVA_ARGS = "-Xms64m -Xmx512m"  # not C1 only: see the module docstring
CREATE_FLAGS = (
    "--silent", "--no-web", "--nio", "--no-autotune", "--no-amqp-acceptor", "--no-mqtt-acceptor",
    "--no-stomp-acceptor", "--no-hornetq-acceptor",
)  # fmt: skip
CREATE_DEADLINE_S = 180.0
TRAIN_DEADLINE_S = 120.0
LOCK_DEADLINE_S = 600.0
# the files of an instance that name its own path or its data directory
_PATH_FILES = ("bin/artemis", "bin/artemis-service", "etc/artemis.profile", "etc/artemis-utility.profile",
               "etc/bootstrap.xml")
_PROFILE_PATH = re.compile(r"^ARTEMIS_(INSTANCE|DATA_DIR)='([^']*)'$", re.MULTILINE)

#: writes a single node's ``etc/`` for the training run: (etc directory, data directory, port)
TrainingEtc = Callable[[Path, Path, int], None]


class LaunchError(Exception):
    """The template could not be made (``artemis create`` failed); the message carries its output."""


@dataclass(frozen=True)
class LaunchKit:
    """What a node of one version starts from: the template instance, and the class archive if there is one."""

    template: Path
    archive: Path | None

    def java_args_append(self) -> str:
        """``JAVA_ARGS_APPEND`` for ``bin/artemis`` (empty without an archive)."""
        return f"-XX:SharedArchiveFile={self.archive}" if self.archive is not None else ""


def _java() -> Path | None:
    """The java ``bin/artemis`` runs: ``$JAVA_HOME/bin/java``, else the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found is not None else None


def _runtime_key(java_args: str) -> str:
    """Names the archive: one per Java runtime and JVM flags (a JVM checks both against the archive anyway)."""
    java = _java()
    stat = java.stat() if java is not None else None
    seed = f"{java}|{stat.st_size if stat else 0}|{stat.st_mtime_ns if stat else 0}|{java_args}"
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def _create(home: Path, instance: Path, data: Path, java_args: str, log: Path) -> None:
    # the user, name, host and port only shape files write_etc replaces: placeholders
    argv = [str(home / "bin" / "artemis"), "create", str(instance), *CREATE_FLAGS, "--allow-anonymous",
            "--user", "admin", "--password", "admin", "--name", "template", "--host", "127.0.0.1",
            "--default-port", "61616", "--data", str(data)]  # fmt: skip
    count_launch("artemis create")
    try:
        created = subprocess.run(argv, capture_output=True, text=True, timeout=CREATE_DEADLINE_S, check=False,
                                 env=dict(os.environ, JAVA_ARGS=java_args), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"artemis create did not finish within {CREATE_DEADLINE_S:.0f}s") from None
    output = created.stdout + created.stderr
    log.write_text(f"--- artemis create (exit {created.returncode})\n{output}", encoding="utf-8")
    if created.returncode != 0:
        raise LaunchError(f"artemis create exited with {created.returncode}:\n{output}")


def instantiate(kit: LaunchKit, instance: Path, data: Path) -> None:
    """Copy the template to ``instance`` with its instance and data paths (as its ``etc/artemis.profile`` names
    them) turned into ``instance`` and ``data``: what ``artemis create`` would have written there, but for the
    files write_etc replaces."""
    profile = (kit.template / "etc" / "artemis.profile").read_text(encoding="utf-8")
    named = dict(_PROFILE_PATH.findall(profile))
    if set(named) != {"INSTANCE", "DATA_DIR"}:
        raise LaunchError(f"{kit.template}/etc/artemis.profile does not name ARTEMIS_INSTANCE and ARTEMIS_DATA_DIR")
    shutil.copytree(kit.template, instance, symlinks=True)
    for name in _PATH_FILES:
        path = instance / name
        if path.exists():
            text = path.read_text(encoding="utf-8")
            # the longer path first, so one that extends the other is not half replaced
            for old, new in sorted(((named["INSTANCE"], str(instance)), (named["DATA_DIR"], str(data))),
                                   key=lambda pair: -len(pair[0])):
                text = text.replace(old, new)
            path.write_text(text, encoding="utf-8")


def _train(kit: LaunchKit, archive: Path, java_args: str, render: TrainingEtc) -> bool:
    """Start a copy of the template once with ``-XX:ArchiveClassesAtExit`` and stop it gracefully (the JVM writes
    the archive as it exits); True if it wrote one."""
    with tempfile.TemporaryDirectory(prefix="training-", dir=archive.parent) as scratch:
        instance, data = Path(scratch) / "instance", Path(scratch) / "data"
        instantiate(kit, instance, data)
        render(instance / "etc", data, free_ports(1)[0])
        partial = archive.with_suffix(f".{os.getpid()}.partial")
        env = dict(os.environ, JAVA_ARGS=java_args, JAVA_ARGS_APPEND=f"-XX:ArchiveClassesAtExit={partial}")
        process = BrokerProcess([str(instance / "bin" / "artemis"), "run"], ready=re.compile(r"AMQ221007"),
                                log_file=archive.parent / "training.log", tail=collections.deque(maxlen=200),
                                cwd=Path(scratch), env=env, label="artemis training run")
        try:
            process.wait_ready(TRAIN_DEADLINE_S)
            process.signal_group(signal.SIGTERM)
            trained = process.wait(TRAIN_DEADLINE_S) is not None
        except (ExitedEarly, NotReady):
            trained = False
        finally:
            process.kill(TRAIN_DEADLINE_S)
        if trained and partial.exists() and partial.stat().st_size > 0:
            partial.replace(archive)
            return True
        partial.unlink(missing_ok=True)
        return False


def prepare_launch_kit(dist: Distribution, java_args: str, render: TrainingEtc) -> LaunchKit:
    """The version's template (made if missing) and class archive (trained if missing and not failed before)."""
    root = dist.root / "instances"
    template = root / "template"
    key = _runtime_key(java_args)
    archive, failed = root / f"classes-{key}.jsa", root / f"classes-{key}.failed"
    with file_lock(dist.root / "instances.lock", LOCK_DEADLINE_S):
        root.mkdir(parents=True, exist_ok=True)
        if not (template / "bin" / "artemis").exists():
            shutil.rmtree(template, ignore_errors=True)
            staging = root / f"template.{os.getpid()}.partial"
            shutil.rmtree(staging, ignore_errors=True)
            _create(dist.home, staging, root / "template-data", java_args, root / "create.log")
            staging.rename(template)  # its files name the staging path: instantiate reads them from the profile
        kit = LaunchKit(template, None)
        if not archive.exists() and not failed.exists() and not _train(kit, archive, java_args, render):
            failed.write_text("the training run wrote no class archive (its output: training.log): nodes start "
                              "without one; delete this file to train again\n", encoding="utf-8")
    return LaunchKit(template, archive if archive.exists() else None)
