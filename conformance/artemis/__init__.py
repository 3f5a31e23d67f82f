"""Apache Artemis as a first-class target: pinned distributions and the Java vector tools.

``distribution`` fetches a pinned release with ``mvn``, verifies it against
``fixtures/artemis/versions.json`` and unpacks it into a cache outside git.
``java_tools`` compiles ``fixtures/java/src`` against that release and runs the
tools (vector generation, decoding, benchmarks).  ``python -m cck.conformance.artemis``
is the command line for both.
"""

from __future__ import annotations

from cck.conformance.artemis.distribution import (
    ArtemisError,
    Artifact,
    ChecksumMismatchError,
    Distribution,
    FetchError,
    MavenNotFoundError,
    UnknownVersionError,
    VersionInfo,
    cache_dir,
    ensure_distribution,
    load_versions,
    pinned_protocol,
)
from cck.conformance.artemis.java_tools import ToolError, build_tools, run_tool

__all__ = [
    "Artifact",
    "ArtemisError",
    "ChecksumMismatchError",
    "Distribution",
    "FetchError",
    "MavenNotFoundError",
    "ToolError",
    "UnknownVersionError",
    "VersionInfo",
    "build_tools",
    "cache_dir",
    "ensure_distribution",
    "load_versions",
    "pinned_protocol",
    "run_tool",
]
