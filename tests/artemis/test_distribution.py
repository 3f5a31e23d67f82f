"""conformance.artemis.distribution: pins, checksum verification, cache reuse.  Fast: no network, no mvn."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cck.conformance.artemis import distribution as d
from cck.conformance.artemis.__main__ import main as cli_main

VERSION = "9.8.7"


def _tarball(version: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"fake jar"
        info = tarfile.TarInfo(f"apache-artemis-{version}/lib/artemis-core-client-{version}.jar")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _versions_file(tmp_path: Path, sha: str) -> Path:
    path = tmp_path / "versions.json"
    path.write_text(
        json.dumps(
            {
                "default": VERSION,
                "versions": {
                    VERSION: {
                        "protocol_version": 136,
                        "artifacts": [
                            {
                                "role": "distribution",
                                "coordinates": f"org.apache.activemq:apache-artemis:{VERSION}:tar.gz:bin",
                                "file": f"apache-artemis-{VERSION}-bin.tar.gz",
                                "sha256": sha,
                            }
                        ],
                    }
                },
            }
        ),
        encoding="utf-8",
    )
    return path


class FakeMaven:
    """Stands in for subprocess.run(["mvn", ...]): writes `payload` as the requested artifact."""

    def __init__(self, payload: bytes, returncode: int = 0, stderr: str = "") -> None:
        self.payload = payload
        self.returncode = returncode
        self.stderr = stderr
        self.calls: list[list[str]] = []

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert "timeout" in kwargs, "every subprocess call needs a timeout"
        self.calls.append(command)
        out_dir = Path(next(a for a in command if a.startswith("-DoutputDirectory=")).split("=", 1)[1])
        if self.returncode == 0:
            (out_dir / f"apache-artemis-{VERSION}-bin.tar.gz").write_bytes(self.payload)
        return subprocess.CompletedProcess(command, self.returncode, "", self.stderr)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(shutil, "which", lambda name: f"/fake/bin/{name}")


def test_unknown_version_names_the_pinned_ones(tmp_path: Path) -> None:
    versions = _versions_file(tmp_path, "0" * 64)
    with pytest.raises(d.UnknownVersionError) as info:
        d.ensure_distribution("1.0.0", versions_file=versions, runner=FakeMaven(b""))
    assert "1.0.0" in str(info.value)
    assert VERSION in str(info.value)


def test_checksum_mismatch_names_file_expected_and_found_and_removes_file(tmp_path: Path) -> None:
    payload = _tarball(VERSION)
    expected = "ab" * 32
    fake = FakeMaven(payload)
    with pytest.raises(d.ChecksumMismatchError) as info:
        d.ensure_distribution(versions_file=_versions_file(tmp_path, expected), runner=fake)
    message = str(info.value)
    assert f"apache-artemis-{VERSION}-bin.tar.gz" in message
    assert expected in message
    assert hashlib.sha256(payload).hexdigest() in message
    assert not info.value.path.exists()
    assert not (d.cache_dir(VERSION) / d.MARKER_NAME).exists()


def test_second_call_reuses_cache_without_mvn(tmp_path: Path) -> None:
    payload = _tarball(VERSION)
    versions = _versions_file(tmp_path, hashlib.sha256(payload).hexdigest())
    fake = FakeMaven(payload)
    first = d.ensure_distribution(versions_file=versions, runner=fake)
    assert len(fake.calls) == 1
    assert "--strict-checksums" in fake.calls[0]
    assert "dependency:copy" in fake.calls[0]
    assert (first.lib / f"artemis-core-client-{VERSION}.jar").is_file()
    marker = json.loads((d.cache_dir(VERSION) / d.MARKER_NAME).read_text(encoding="utf-8"))
    assert marker["version"] == VERSION

    def no_mvn(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise AssertionError("mvn must not run when the cache is complete")

    second = d.ensure_distribution(versions_file=versions, runner=no_mvn)
    assert second == first


def test_mvn_failure_is_explained(tmp_path: Path) -> None:
    fake = FakeMaven(
        b"",
        returncode=1,
        stderr="[ERROR] Could not transfer artifact: UnknownHostException repo.maven.apache.org",
    )
    with pytest.raises(d.FetchError, match="no network access"):
        d.ensure_distribution(versions_file=_versions_file(tmp_path, "0" * 64), runner=fake)


def test_missing_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(d.MavenNotFoundError):
        d.ensure_distribution(versions_file=_versions_file(tmp_path, "0" * 64), runner=FakeMaven(b""))


def test_pinned_table_is_well_formed() -> None:
    default, versions = d.load_versions()
    assert default in versions
    for info in versions.values():
        assert info.distribution_artifact.file.endswith("-bin.tar.gz")
        assert all(len(a.sha256) == 64 for a in info.artifacts)


def test_a_pinned_versions_protocol_is_known_and_any_other_is_not() -> None:
    _default, versions = d.load_versions()
    assert {d.pinned_protocol(v) for v in versions} == {info.protocol_version for info in versions.values()}
    assert d.pinned_protocol("2.44.0") == 136
    assert d.pinned_protocol("9.9.9") is None
    assert d.pinned_protocol(None) is None


def test_cli_reports_unknown_version_without_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["--version", "0.0.1", "fetch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown Artemis version '0.0.1'")
    assert "Traceback" not in err


def test_file_lock_waits_for_the_holder_and_times_out_naming_the_file(tmp_path: Path) -> None:
    lock = tmp_path / "2.44.0.lock"
    with d.file_lock(lock, 5.0):
        started = time.monotonic()
        with pytest.raises(d.ArtemisError, match=r"timed out after 0s waiting for .*2\.44\.0\.lock"), \
                d.file_lock(lock, 0.3):
            pass
        waited = time.monotonic() - started
        assert 0.3 <= waited < 3.0
    with d.file_lock(lock, 1.0):  # released by the holder, and not kept by the waiter that gave up
        pass


def test_file_lock_is_taken_once_the_holder_releases_it(tmp_path: Path) -> None:
    lock = tmp_path / "v.lock"
    holder = d.file_lock(lock, 1.0)
    holder.__enter__()
    released = threading.Timer(0.2, holder.__exit__, (None, None, None))
    released.start()
    started = time.monotonic()
    with d.file_lock(lock, 5.0):
        assert time.monotonic() - started < 4.0
    released.join(5.0)


def _fake_legacy_tool(tmp_path: Path, *, fail: bool = False) -> Path:
    """A stand-in for ``java ... cck.legacy.Vectors --kind K --out FILE``: one vector line, then the summary."""
    script = tmp_path / "fake-java"
    script.write_text(f"""#!{sys.executable}
import json, sys
args = sys.argv[1:]
kind, out = args[args.index("--kind") + 1], args[args.index("--out") + 1]
if {fail!r}:
    sys.stderr.write("vectors of " + kind + " failed: round trip\\n")
    sys.exit(1)
open(out, "w").write(json.dumps({{"id": "PING/x@1-" + kind, "kind": "packet"}}) + "\\n")
print(json.dumps({{"server_version": "S " + kind, "protocol_version": 1, "count": 1,
                  "packet_types_covered": {{"PING": 10}}}}))
""", encoding="utf-8")
    script.chmod(0o755)
    return script


def _fake_ensure_legacy(script: Path) -> Any:
    from cck.conformance.targets import _legacy_launch as legacy

    def ensure(kind: str) -> legacy.LegacyLaunch:
        server = legacy.LEGACY_SERVERS[kind]
        return legacy.LegacyLaunch(server, script.parent, script.parent, script.parent, "cp",
                                   (str(script), "-cp", "cp", legacy.MAIN_CLASS, "--kind", kind))

    return ensure


def test_legacy_vectors_writes_each_kind_s_file_and_keeps_the_other_s_manifest_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cck.conformance.targets as targets

    # the command looks ensure_legacy up in the targets package when it runs
    monkeypatch.setattr(targets, "ensure_legacy", _fake_ensure_legacy(_fake_legacy_tool(tmp_path)))
    out = tmp_path / "legacy"
    assert cli_main(["legacy-vectors", "--kind", "hornetq", "--out", str(out)]) == 0
    assert cli_main(["legacy-vectors", "--kind", "artemis1", "--out", str(out)]) == 0
    assert json.loads((out / "hornetq-2.4.7.Final.jsonl").read_text())["id"] == "PING/x@1-hornetq"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["generator"] == "cck artemis legacy-vectors"
    assert {k: (v["file"], v["count"], v["server_version"]) for k, v in manifest["servers"].items()} == {
        "artemis1": ("artemis-1.5.6.jsonl", 1, "S artemis1"),
        "hornetq": ("hornetq-2.4.7.Final.jsonl", 1, "S hornetq"),
    }


def test_legacy_vectors_reports_a_failed_round_trip_and_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import cck.conformance.targets as targets

    # the command looks ensure_legacy up in the targets package when it runs
    monkeypatch.setattr(targets, "ensure_legacy", _fake_ensure_legacy(_fake_legacy_tool(tmp_path, fail=True)))
    out = tmp_path / "legacy"
    out.mkdir()
    (out / "hornetq-2.4.7.Final.jsonl").write_text("old\n")
    assert cli_main(["legacy-vectors", "--kind", "hornetq", "--out", str(out)]) == 2
    assert "the hornetq vector tool failed (exit 1):\nvectors of hornetq failed: round trip" in capsys.readouterr().err
    assert (out / "hornetq-2.4.7.Final.jsonl").read_text() == "old\n"
