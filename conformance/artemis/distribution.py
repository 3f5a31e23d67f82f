"""Fetch, verify and unpack pinned Apache Artemis releases.

The pins live in ``fixtures/artemis/versions.json`` (Maven coordinates plus the
SHA-256 of every file).  Files are fetched with ``mvn dependency:copy`` — this
machine, like most CI runners, reaches Maven Central only through Maven — into a
cache outside the repository::

    $CCK_CACHE/artemis/<version>/            (default ~/.cache/core-conformance-kit)
        download/<artifact files>
        dist/apache-artemis-<version>/       (the unpacked bin tar.gz)
        complete.json                        (marker: what was verified)

A second call finds ``complete.json`` and returns without running ``mvn``.  An
``fcntl`` lock on ``<version>.lock`` keeps two processes from fetching at once.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cck.conformance._data import fixture

__all__ = [
    "Artifact",
    "ArtemisError",
    "ChecksumMismatchError",
    "Distribution",
    "FetchError",
    "MavenNotFoundError",
    "Runner",
    "UnknownVersionError",
    "VersionInfo",
    "cache_dir",
    "cache_root",
    "default_versions_file",
    "ensure_distribution",
    "load_versions",
    "pinned_protocol",
    "sha256_of",
]

#: Signature of ``subprocess.run`` as used here; tests pass a fake.
Runner = Callable[..., "subprocess.CompletedProcess[str]"]

MARKER_NAME = "complete.json"
MVN_TIMEOUT_S = 900.0
LOCK_TIMEOUT_S = 1200.0


class ArtemisError(Exception):
    """Base class: anything that stops us from providing a verified Artemis release."""


class UnknownVersionError(ArtemisError):
    def __init__(self, version: str, known: Sequence[str]) -> None:
        self.version = version
        self.known = tuple(known)
        super().__init__(
            f"unknown Artemis version {version!r}: versions.json pins {', '.join(self.known) or 'nothing'}"
        )


class ChecksumMismatchError(ArtemisError):
    def __init__(self, path: Path, expected: str, found: str) -> None:
        self.path = path
        self.expected = expected
        self.found = found
        super().__init__(
            f"SHA-256 mismatch for {path.name}: expected {expected}, found {found} "
            f"(the file was removed; fetch again, or update versions.json if the pin is wrong)"
        )


class MavenNotFoundError(ArtemisError):
    def __init__(self) -> None:
        super().__init__(
            "mvn was not found on PATH: install Apache Maven 3 (it is used to fetch Artemis from Maven Central)"
        )


class FetchError(ArtemisError):
    """mvn ran but did not produce the artifact (network, missing artifact, timeout)."""


@dataclasses.dataclass(frozen=True)
class Artifact:
    role: str
    coordinates: str
    file: str
    sha256: str
    optional: bool


@dataclasses.dataclass(frozen=True)
class VersionInfo:
    version: str
    protocol_version: int
    artifacts: tuple[Artifact, ...]

    @property
    def distribution_artifact(self) -> Artifact:
        for artifact in self.artifacts:
            if artifact.role == "distribution":
                return artifact
        raise ArtemisError(f"versions.json: version {self.version} has no 'distribution' artifact")


@dataclasses.dataclass(frozen=True)
class Distribution:
    """A verified, unpacked Artemis release."""

    version: str
    protocol_version: int
    root: Path  # cache directory of this version
    home: Path  # unpacked apache-artemis-<version>

    @property
    def lib(self) -> Path:
        return self.home / "lib"

    def file(self, artifact: Artifact) -> Path:
        return self.root / "download" / artifact.file


def default_versions_file() -> Path:
    return fixture("artemis", "versions.json")  # package data


def load_versions(path: Path | None = None) -> tuple[str, dict[str, VersionInfo]]:
    """Return ``(default_version, {version: VersionInfo})`` from versions.json."""
    source = path or default_versions_file()
    try:
        raw: Any = json.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ArtemisError(f"cannot read {source}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ArtemisError(f"{source}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    try:
        versions: dict[str, VersionInfo] = {}
        for version, entry in raw["versions"].items():
            artifacts = tuple(
                Artifact(
                    role=str(a["role"]),
                    coordinates=str(a["coordinates"]),
                    file=str(a["file"]),
                    sha256=str(a["sha256"]).lower(),
                    optional=bool(a.get("optional", False)),
                )
                for a in entry["artifacts"]
            )
            versions[version] = VersionInfo(version, int(entry["protocol_version"]), artifacts)
        default = str(raw["default"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtemisError(f"{source}: malformed pin table ({type(exc).__name__}: {exc})") from exc
    if default not in versions:
        raise ArtemisError(f"{source}: default version {default!r} is not pinned")
    return default, versions


def pinned_protocol(version: str | None) -> int | None:
    """The core protocol version of ``version`` when it is a pinned Artemis version (versions.json), else None."""
    info = load_versions()[1].get(version or "")
    return info.protocol_version if info is not None else None


def version_info(version: str | None, versions_file: Path | None = None) -> VersionInfo:
    default, versions = load_versions(versions_file)
    wanted = version or default
    if wanted not in versions:
        raise UnknownVersionError(wanted, sorted(versions))
    return versions[wanted]


def cache_root() -> Path:
    env = os.environ.get("CCK_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "core-conformance-kit"


def cache_dir(version: str) -> Path:
    return cache_root() / "artemis" / version


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, expected: str) -> None:
    """Raise ChecksumMismatchError (after deleting the file) when the hash differs."""
    found = sha256_of(path)
    if found != expected.lower():
        path.unlink(missing_ok=True)
        raise ChecksumMismatchError(path, expected.lower(), found)


def _flock_within(handle_fd: int, timeout_s: float) -> bool:
    """Take an exclusive flock on ``handle_fd``'s open file, waiting at most ``timeout_s``; False on timeout.

    The blocking flock runs in a thread on a duplicate descriptor (flock has no timeout of its own); a thread
    that gets the lock after the caller gave up closes its descriptor at once, which releases it."""
    fd = os.dup(handle_fd)
    state = threading.Lock()
    acquired = threading.Event()
    abandoned = False

    def take() -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with state:
                if not abandoned:
                    acquired.set()
        finally:
            os.close(fd)  # the caller's descriptor keeps the lock while it holds it; alone, closing releases it

    threading.Thread(target=take, name=f"flock-{handle_fd}", daemon=True).start()
    if acquired.wait(timeout_s):
        return True
    with state:
        abandoned = True
        return acquired.is_set()


@contextmanager
def file_lock(lock_path: Path, timeout_s: float) -> Iterator[None]:
    """An exclusive flock on ``lock_path`` across processes, waited for at most ``timeout_s``."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a+") as handle:
        if not _flock_within(handle.fileno(), timeout_s):
            raise ArtemisError(f"timed out after {timeout_s:.0f}s waiting for {lock_path} (another fetch is running?)")
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _marker_matches(marker: Path, info: VersionInfo, wanted: Sequence[Artifact]) -> bool:
    try:
        recorded: Any = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    files = recorded.get("files", {}) if isinstance(recorded, dict) else {}
    if not isinstance(files, dict) or recorded.get("version") != info.version:
        return False
    return all(files.get(a.file) == a.sha256 for a in wanted)


def _mvn_fetch(artifact: Artifact, out_dir: Path, runner: Runner, timeout_s: float) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenNotFoundError()
    command = [
        mvn,
        "-q",
        "-B",
        "--strict-checksums",
        "dependency:copy",
        f"-Dartifact={artifact.coordinates}",
        f"-DoutputDirectory={out_dir}",
    ]
    try:
        result = runner(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise FetchError(f"mvn did not finish fetching {artifact.coordinates} within {timeout_s:.0f}s") from None
    if result.returncode != 0:
        raise FetchError(_explain_mvn_failure(artifact, (result.stdout or "") + (result.stderr or "")))
    if not (out_dir / artifact.file).is_file():
        raise FetchError(f"mvn reported success but {out_dir / artifact.file} does not exist")


def _explain_mvn_failure(artifact: Artifact, output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if "[ERROR]" in line and line.strip() != "[ERROR]"]
    detail = lines[0].replace("[ERROR]", "").strip() if lines else "no error output"
    lowered = output.lower()
    if "unknownhost" in lowered or "connect timed out" in lowered or "network is unreachable" in lowered:
        cause = "no network access to Maven Central"
    elif "could not find artifact" in lowered or "not found" in lowered:
        cause = "the artifact does not exist on Maven Central"
    elif "checksum" in lowered:
        cause = "Maven Central's checksum for the artifact is missing or wrong"
    else:
        cause = "mvn failed"
    return f"cannot fetch {artifact.coordinates}: {cause} ({detail[:400]})"


def _extract(archive: Path, dest: Path) -> None:
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(tmp, filter="data")
    except (tarfile.TarError, OSError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ArtemisError(f"cannot unpack {archive.name}: {exc}") from exc
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def _find_home(dist_dir: Path, version: str) -> Path:
    expected = dist_dir / f"apache-artemis-{version}"
    if (expected / "lib").is_dir():
        return expected
    candidates = [p for p in dist_dir.iterdir() if (p / "lib").is_dir()] if dist_dir.is_dir() else []
    if len(candidates) == 1:
        return candidates[0]
    raise ArtemisError(f"unpacked distribution in {dist_dir} has no apache-artemis-*/lib directory")


def ensure_distribution(
    version: str | None = None,
    *,
    include_optional: bool = False,
    versions_file: Path | None = None,
    runner: Runner = subprocess.run,
    mvn_timeout_s: float = MVN_TIMEOUT_S,
    lock_timeout_s: float = LOCK_TIMEOUT_S,
) -> Distribution:
    """Return the verified, unpacked release, fetching it on first use."""
    info = version_info(version, versions_file)
    root = cache_dir(info.version)
    wanted = [a for a in info.artifacts if include_optional or not a.optional]
    marker = root / MARKER_NAME
    dist_dir = root / "dist"

    if _marker_matches(marker, info, wanted):
        return Distribution(info.version, info.protocol_version, root, _find_home(dist_dir, info.version))

    with file_lock(root.parent / f"{info.version}.lock", lock_timeout_s):
        # Another process may have finished while we waited for the lock.
        if _marker_matches(marker, info, wanted):
            return Distribution(info.version, info.protocol_version, root, _find_home(dist_dir, info.version))
        download = root / "download"
        download.mkdir(parents=True, exist_ok=True)
        for artifact in wanted:
            target = download / artifact.file
            if not (target.is_file() and sha256_of(target) == artifact.sha256):
                target.unlink(missing_ok=True)
                _mvn_fetch(artifact, download, runner, mvn_timeout_s)
            verify(target, artifact.sha256)
        _extract(download / info.distribution_artifact.file, dist_dir)
        home = _find_home(dist_dir, info.version)
        recorded = {
            "version": info.version,
            "protocol_version": info.protocol_version,
            "files": {a.file: a.sha256 for a in wanted},
            "home": home.name,
        }
        tmp_marker = marker.with_suffix(".tmp")
        tmp_marker.write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")
        tmp_marker.replace(marker)
        return Distribution(info.version, info.protocol_version, root, home)
