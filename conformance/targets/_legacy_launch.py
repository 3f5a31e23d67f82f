"""Older core-protocol servers as embedded Java servers: HornetQ 2.4.7.Final and Apache ActiveMQ Artemis 1.5.6.

Neither is run from a distribution: the server artifact and its dependencies are resolved from Maven Central with
``mvn dependency:copy-dependencies`` into the cache, and a small launcher (``fixtures/java/legacy``) starts ONE
server configured programmatically from a JSON file::

    java -cp <lib>/*:<classes> cck.legacy.Main --kind hornetq|artemis1 --config <file.json>

It prints ``cck legacy server active on <host>:<port> (<kind> <version>)`` once the server is active, logs to
standard output, and exits with 0 after a SIGTERM (the server stopped by a shutdown hook).  The JSON keys are
described in ``fixtures/java/legacy/src/cck/legacy/Config.java``.

Cache layout (``$CCK_CACHE``, default ``~/.cache/core-conformance-kit``)::

    legacy/<kind>-<version>/
        resolve/pom.xml          the one-dependency project mvn resolves
        lib/*.jar                the server and its dependencies
        complete.json            marker: coordinates, jar SHA-256s, the protocol version the jars declare
        src/                     the launcher's common sources plus this kind's (what is compiled)
        classes/ (+ .stamp.json) compiled by java_tools.compile_java, recompiled when a source changes

The launcher's sources are split: ``src/`` (no server classes) and one directory per kind (``hornetq/``,
``artemis1/``), each compiled only against its own kind's jars, so they are staged together per kind.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cck.conformance._data import fixture
from cck.conformance.artemis.distribution import (
    LOCK_TIMEOUT_S,
    MVN_TIMEOUT_S,
    ArtemisError,
    Artifact,
    Distribution,
    Runner,
    _explain_mvn_failure,
    cache_root,
    file_lock,
    sha256_of,
)
from cck.conformance.artemis.java_tools import compile_java

__all__ = [
    "LEGACY_SERVERS",
    "MAIN_CLASS",
    "READY_PREFIX",
    "LegacyError",
    "LegacyLaunch",
    "LegacyServer",
    "declared_protocol_versions",
    "ensure_legacy",
    "legacy_argv",
    "legacy_root",
]

MAIN_CLASS = "cck.legacy.Main"
#: the start of the line the launcher prints once the server is active
READY_PREFIX = "cck legacy server active on "
MARKER_NAME = "complete.json"


class LegacyError(ArtemisError):
    """A legacy server cannot be provided: no mvn/java, a failed download, a compile error, a wrong pin."""


@dataclasses.dataclass(frozen=True)
class LegacyServer:
    """One legacy server kind: what to resolve and what its jars declare."""

    kind: str
    #: ``groupId:artifactId:version`` of the server artifact (its dependencies come with it)
    coordinates: str
    version: str
    #: the core protocol version the server speaks (first of ``incrementingVersion`` in its version properties)
    protocol_version: int
    #: the client versions it accepts (``compatibleVersionList``)
    compatible_versions: tuple[int, ...]
    #: the security permissions its Role has (``_topology.PERMISSIONS`` names): what it checks and can be granted;
    #: the kit's one table of them (the launcher only maps these names to the Role's constructor)
    permissions: frozenset[str]
    #: what its own clients write before the first frame; the acceptor skips exactly these 7 bytes, any other
    #: first bytes are read as a frame length
    preamble: bytes
    #: the properties file (in the core-client jar) that declares the versions, and its key prefix
    version_properties: str
    version_key_prefix: str
    #: the launcher's directory for this kind, beside ``fixtures/java/legacy/src``
    source_dir: str
    #: JVM flags the server needs on Java 17
    jvm_args: tuple[str, ...] = ()

    @property
    def group_id(self) -> str:
        return self.coordinates.split(":")[0]

    @property
    def artifact_id(self) -> str:
        return self.coordinates.split(":")[1]


#: HornetQ 2.4.7's Role: seven permissions; a browser is checked as a consumer (ServerSessionImpl.createConsumer)
_HORNETQ_PERMISSIONS = frozenset({"send", "consume", "createDurableQueue", "deleteDurableQueue",
                                  "createNonDurableQueue", "deleteNonDurableQueue", "manage"})

LEGACY_SERVERS: Mapping[str, LegacyServer] = {
    "hornetq": LegacyServer(
        kind="hornetq",
        coordinates="org.hornetq:hornetq-server:2.4.7.Final",
        version="2.4.7.Final",
        protocol_version=124,  # hornetq.version.incrementingVersion=124,123,122
        compatible_versions=(121, 122, 123, 124),
        permissions=_HORNETQ_PERMISSIONS,
        preamble=b"HORNETQ",
        version_properties="hornetq-version.properties",
        version_key_prefix="hornetq.version.",
        source_dir="hornetq",
        # netty 4.0.13 falls back to heap buffers when it cannot reach java.nio internals (it says so): none needed
    ),
    "artemis1": LegacyServer(
        kind="artemis1",
        coordinates="org.apache.activemq:artemis-server:1.5.6",
        version="1.5.6",
        protocol_version=128,  # activemq.version.incrementingVersion=128,127,...,122
        compatible_versions=(121, 122, 123, 124, 125, 126, 127, 128),
        # + browse (1.4.0, ARTEMIS-628); createAddress and deleteAddress came with 2.0.0's addresses (ARTEMIS-876)
        permissions=_HORNETQ_PERMISSIONS | {"browse"},
        preamble=b"ARTEMIS",
        version_properties="activemq-version.properties",
        version_key_prefix="activemq.version.",
        source_dir="artemis1",
        # netty 4.1.5 fails to initialise (PlatformDependent0, NioEventLoop.openSelector) without these
        jvm_args=("--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED"),
    ),
}


@dataclasses.dataclass(frozen=True)
class LegacyLaunch:
    """A resolved and compiled legacy server: run ``legacy_argv(launch, config)``."""

    server: LegacyServer
    root: Path
    lib: Path
    classes: Path
    classpath: str
    #: ``java <jvm args> -cp <classpath> cck.legacy.Main --kind <kind>``: add ``--config <file>``
    argv_prefix: tuple[str, ...]


def legacy_root(kind: str) -> Path:
    server = _server(kind)
    return cache_root() / "legacy" / f"{server.kind}-{server.version}"


def legacy_argv(launch: LegacyLaunch, config_json_path: Path | str) -> list[str]:
    """The command line that starts the server configured by ``config_json_path``."""
    return [*launch.argv_prefix, "--config", str(config_json_path)]


def ensure_legacy(
    kind: str,
    *,
    runner: Runner = subprocess.run,
    mvn_timeout_s: float = MVN_TIMEOUT_S,
    lock_timeout_s: float = LOCK_TIMEOUT_S,
) -> LegacyLaunch:
    """Resolve the server's jars (once), compile the launcher (when a source changed) and say how to run it."""
    server = _server(kind)
    java = shutil.which("java")
    if java is None:
        raise LegacyError("java was not found on PATH: install a JDK 17 or newer")
    root = legacy_root(kind)
    lib = root / "lib"
    try:
        with file_lock(root.parent / f"{root.name}.lock", lock_timeout_s):
            if not _marker_matches(root, server):
                _resolve(server, root, runner, mvn_timeout_s)
            src = _stage_sources(server, root / "src")
        dist = Distribution(server.version, server.protocol_version, root, root)  # dist.lib == root / "lib"
        classes = compile_java(dist, src, root / "classes")
    except LegacyError:
        raise
    except ArtemisError as exc:  # a lock timeout, javac missing or failing
        raise LegacyError(f"cannot prepare {server.kind} {server.version}: {exc}") from exc
    classpath = os.pathsep.join([str(classes), str(lib / "*")])
    argv = (java, *server.jvm_args, "-cp", classpath, MAIN_CLASS, "--kind", server.kind)
    return LegacyLaunch(server, root, lib, classes, classpath, argv)


def declared_protocol_versions(server: LegacyServer, lib: Path) -> tuple[int, tuple[int, ...]]:
    """``(incrementingVersion's first, compatibleVersionList)`` as the jars in ``lib`` declare them."""
    for jar in sorted(lib.glob("*.jar")):
        try:
            with zipfile.ZipFile(jar) as archive:
                if server.version_properties not in archive.namelist():
                    continue
                text = archive.read(server.version_properties).decode("iso-8859-1")
        except (OSError, zipfile.BadZipFile) as exc:
            raise LegacyError(f"cannot read {jar}: {exc}") from exc
        values = _properties(text)
        try:
            incrementing = values[server.version_key_prefix + "incrementingVersion"]
            compatible = values[server.version_key_prefix + "compatibleVersionList"]
            return (int(incrementing.split(",")[0]),
                    tuple(int(v) for v in compatible.split(",") if v.strip()))
        except (KeyError, ValueError) as exc:
            raise LegacyError(f"{jar.name}!{server.version_properties} has no usable version list: {exc}") from exc
    raise LegacyError(f"no jar in {lib} holds {server.version_properties}")


# ---------------------------------------------------------------------------------------------------------------


def _server(kind: str) -> LegacyServer:
    try:
        return LEGACY_SERVERS[kind]
    except KeyError:
        raise LegacyError(f"unknown legacy server kind {kind!r} (known: {', '.join(sorted(LEGACY_SERVERS))})") \
            from None


def _properties(text: str) -> dict[str, str]:
    """The ``key=value`` lines of a Java properties file (enough for the version files: no continuations)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#!" or "=" not in stripped:
            continue
        key, _, value = stripped.partition("=")
        values[key.strip()] = value.strip()
    return values


def _marker_matches(root: Path, server: LegacyServer) -> bool:
    try:
        recorded: Any = json.loads((root / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    if not isinstance(recorded, dict) or recorded.get("coordinates") != server.coordinates:
        return False
    jars = recorded.get("jars")
    return isinstance(jars, dict) and bool(jars) and all((root / "lib" / name).is_file() for name in jars)


def _pom(server: LegacyServer) -> str:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- written by cck (conformance/targets/_legacy_launch.py): resolves {server.coordinates} and its dependencies -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>cck.legacy</groupId>
  <artifactId>resolve-{server.kind}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>{server.group_id}</groupId>
      <artifactId>{server.artifact_id}</artifactId>
      <version>{server.version}</version>
    </dependency>
  </dependencies>
</project>
"""


def _resolve(server: LegacyServer, root: Path, runner: Runner, timeout_s: float) -> None:
    """mvn copies the server's runtime class path into ``lib`` (through a staging directory); checks that the jars
    declare the protocol version the table names; writes the marker."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LegacyError(f"mvn was not found on PATH: install Apache Maven 3 (it fetches {server.coordinates} "
                          f"and its dependencies from Maven Central)")
    resolve = root / "resolve"
    resolve.mkdir(parents=True, exist_ok=True)
    pom = resolve / "pom.xml"
    pom.write_text(_pom(server), encoding="utf-8")
    staging = root / "lib.partial"
    shutil.rmtree(staging, ignore_errors=True)
    command = [mvn, "-q", "-B", "--strict-checksums", "-f", str(pom), "dependency:copy-dependencies",
               "-DincludeScope=runtime", f"-DoutputDirectory={staging}"]
    try:
        result = runner(command, capture_output=True, text=True, timeout=timeout_s, check=False,
                        stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise LegacyError(f"mvn did not resolve {server.coordinates} within {timeout_s:.0f}s") from None
    artifact = Artifact("server", server.coordinates, "", "", optional=False)
    if result.returncode != 0:
        raise LegacyError(_explain_mvn_failure(artifact, (result.stdout or "") + (result.stderr or "")))
    main_jar = f"{server.artifact_id}-{server.version}.jar"
    if not (staging / main_jar).is_file():
        raise LegacyError(f"mvn reported success but {staging / main_jar} does not exist")
    declared, compatible = declared_protocol_versions(server, staging)
    if (declared, compatible) != (server.protocol_version, server.compatible_versions):
        raise LegacyError(f"{server.coordinates} declares protocol {declared} (compatible {list(compatible)}), "
                          f"LEGACY_SERVERS says {server.protocol_version} ({list(server.compatible_versions)})")
    lib = root / "lib"
    shutil.rmtree(lib, ignore_errors=True)
    staging.rename(lib)
    recorded = {
        "coordinates": server.coordinates,
        "protocol_version": declared,
        "compatible_versions": list(compatible),
        "jars": {jar.name: sha256_of(jar) for jar in sorted(lib.glob("*.jar"))},
    }
    marker = root / MARKER_NAME
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")
    tmp.replace(marker)


def _stage_sources(server: LegacyServer, staged: Path) -> Path:
    """Copy the common sources and this kind's into ``staged`` (rewriting only what changed, removing what
    went away), so compile_java's stamp sees the kind's whole source tree."""
    base = fixture("java", "legacy")
    wanted: dict[Path, bytes] = {}
    for top in (base / "src", base / server.source_dir):
        files = sorted(top.rglob("*.java"))
        if not files:
            raise LegacyError(f"no Java sources under {top}")
        for path in files:
            wanted[path.relative_to(top)] = path.read_bytes()
    for relative, data in wanted.items():
        target = staged / relative
        if not target.is_file() or target.read_bytes() != data:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    for existing in list(staged.rglob("*.java")):
        if existing.relative_to(staged) not in wanted:
            existing.unlink()
    return staged
