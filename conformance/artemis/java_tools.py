"""Compile and run the Java tools in ``fixtures/java/src`` against a pinned Artemis.

The tools use Artemis's own classes (packet encoders/decoders, CoreMessage,
TypedProperties, TransportConfiguration ...) from ``<dist>/lib``.  Classes are
compiled with ``javac --release 17`` into the cache directory of that Artemis
version; a stamp file holding the SHA-256 of every source (plus the javac
version and the jar list) decides whether a recompile is needed.
:func:`compile_java` does that for any source tree (the JMS interop program,
the stock-client backoff program).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from cck.conformance._data import fixture
from cck.conformance.artemis.distribution import ArtemisError, Distribution, file_lock

__all__ = [
    "JAVAC_TIMEOUT_S",
    "MAIN_CLASS",
    "ToolError",
    "build_tools",
    "compile_java",
    "classpath",
    "run_tool",
    "sources_dir",
]

MAIN_CLASS = "cck.tools.Main"
JAVAC_TIMEOUT_S = 300.0


class ToolError(ArtemisError):
    """javac/java missing, a compile error, a tool failure or a timeout."""


def sources_dir() -> Path:
    return fixture("java", "src")  # package data: an installed kit compiles the same sources


def _sources(src: Path) -> list[Path]:
    files = sorted(src.rglob("*.java"))
    if not files:
        raise ToolError(f"no Java sources under {src}")
    return files


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ToolError(f"{tool} was not found on PATH: install a JDK 17 or newer")
    return path


def _javac_version(javac: str) -> str:
    try:
        result = subprocess.run([javac, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        raise ToolError("javac -version did not answer within 60s") from None
    return (result.stdout + result.stderr).strip()


def classpath(dist: Distribution, classes: Path | None = None) -> str:
    lib = dist.lib
    if not lib.is_dir():
        raise ToolError(f"{lib} does not exist: the Artemis distribution is incomplete")
    parts = [str(lib / "*")]
    if classes is not None:
        parts.insert(0, str(classes))
    return os.pathsep.join(parts)


def _stamp(dist: Distribution, src: Path, javac_version: str) -> dict[str, object]:
    return {
        "javac": javac_version,
        "artemis": dist.version,
        "jars": sorted(p.name for p in dist.lib.glob("*.jar")),
        "sources": {str(p.relative_to(src)): hashlib.sha256(p.read_bytes()).hexdigest() for p in _sources(src)},
    }


def build_tools(dist: Distribution, *, src: Path | None = None, force: bool = False) -> Path:
    """Compile the tools if a source changed; return the classes directory."""
    return compile_java(dist, src or sources_dir(), dist.root / "tools" / "classes", force=force)


def compile_java(dist: Distribution, src: Path, out: Path, *, force: bool = False) -> Path:
    """Compile every ``.java`` under ``src`` against ``dist``'s jars into ``out`` and return ``out``.

    Skipped when the stamp beside ``out`` (source hashes, javac version, jar list) still matches.  Concurrent
    processes are serialised by a lock file beside ``out``; the classes are compiled into a temporary directory
    and swapped in, so a reader never sees half a compile."""
    javac = _require("javac")
    out.parent.mkdir(parents=True, exist_ok=True)
    stamp_path = out.with_name(out.name + ".stamp.json")
    with file_lock(out.with_name(out.name + ".lock"), JAVAC_TIMEOUT_S + 60.0):
        wanted = _stamp(dist, src, _javac_version(javac))
        if not force and out.is_dir() and stamp_path.is_file():
            with contextlib.suppress(json.JSONDecodeError):
                if json.loads(stamp_path.read_text(encoding="utf-8")) == wanted:
                    return out
        staging = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
        command = [
            javac, "--release", "17", "-encoding", "UTF-8", "-Xlint:all,-serial,-processing,-options",
            "-d", str(staging), "-cp", classpath(dist), *[str(p) for p in _sources(src)],
        ]  # fmt: skip
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=JAVAC_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            shutil.rmtree(staging, ignore_errors=True)
            raise ToolError(f"javac did not finish within {JAVAC_TIMEOUT_S:.0f}s") from None
        if result.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise ToolError("javac failed:\n" + (result.stdout + result.stderr).strip())
        shutil.rmtree(out, ignore_errors=True)
        os.replace(staging, out)
        stamp_path.write_text(json.dumps(wanted, indent=2) + "\n", encoding="utf-8")
        return out


def java_command(dist: Distribution, classes: Path, args: Sequence[str], main: str = MAIN_CLASS) -> list[str]:
    java = _require("java")
    return [
        java,
        # Artemis logs through slf4j/log4j; keep tool output clean.
        "-Dlog4j2.level=OFF",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=off",
        "-cp",
        classpath(dist, classes),
        main,
        *args,
    ]


def run_tool(
    dist: Distribution,
    classes: Path,
    args: Sequence[str],
    *,
    timeout_s: float,
    stdin: IO[bytes] | bytes | None = None,
    stdout: IO[bytes] | None = None,
    main: str = MAIN_CLASS,
) -> subprocess.CompletedProcess[bytes]:
    """Run a tool and raise ToolError on failure.

    ``stdin`` may be bytes, a real file (streamed) or an in-memory stream (read first).  Standard
    output goes to ``stdout`` when given, else it is captured in the result.
    """
    command = java_command(dist, classes, args, main)
    data: bytes | None = None
    stdin_file: IO[bytes] | int = subprocess.DEVNULL
    if isinstance(stdin, bytes | bytearray):
        data = bytes(stdin)
    elif stdin is not None:
        try:
            stdin.fileno()
            stdin_file = stdin
        except (OSError, AttributeError, io.UnsupportedOperation):
            data = stdin.read()
    try:
        result = subprocess.run(
            command,
            input=data,
            stdin=None if data is not None else stdin_file,
            stdout=stdout if stdout is not None else subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ToolError(f"{main} {' '.join(args[:1])} did not finish within {timeout_s:.0f}s") from None
    if result.returncode != 0:
        err = result.stderr.decode("utf-8", "replace").strip()
        raise ToolError(f"{main} {' '.join(args[:1])} failed (exit {result.returncode}):\n{err[-4000:]}")
    return result
