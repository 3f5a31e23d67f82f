"""Command line: ``python -m cck.conformance.artemis COMMAND``.

Commands: fetch, instances, build-tools, vectors, legacy-vectors, decode, bench-java."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cck.conformance._data import MissingFixture, checkout_fixture
from cck.conformance.artemis.distribution import (
    ArtemisError,
    Distribution,
    ensure_distribution,
    load_versions,
)
from cck.conformance.artemis.instances import make_instances
from cck.conformance.artemis.java_tools import build_tools, run_tool

VECTOR_FILES = (
    "primitives.jsonl",
    "typed_properties.jsonl",
    "structures.jsonl",
    "packets.jsonl",
    "packets_cross_version.jsonl",
)
VECTORS_TIMEOUT_S = 300.0
#: the older servers' vector files under fixtures/vectors/legacy, by legacy server kind
LEGACY_VECTOR_FILES = {"hornetq": "hornetq-2.4.7.Final.jsonl", "artemis1": "artemis-1.5.6.jsonl"}
LEGACY_VECTORS_MAIN = "cck.legacy.Vectors"
DECODE_TIMEOUT_S = 600.0


def _default_vectors_dir() -> Path:
    # the checked-in vectors: a source checkout only (an installed kit writes them where --out says)
    return checkout_fixture("vectors", what="vectors without --out")


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")


def _prepare(version: str | None, *, include_optional: bool = False) -> tuple[Distribution, Path]:
    dist = ensure_distribution(version, include_optional=include_optional)
    return dist, build_tools(dist)


def _cmd_fetch(args: argparse.Namespace) -> int:
    dist = ensure_distribution(args.version, include_optional=args.all)
    _say(f"Artemis {dist.version} (protocol {dist.protocol_version}) ready in {dist.home}")
    return 0


def _cmd_instances(args: argparse.Namespace) -> int:
    dist = ensure_distribution(args.version)
    ports = [args.base_port + i for i in range(args.nodes)]
    path = make_instances(dist, args.dir, ports)
    _say(f"{args.nodes} Artemis {dist.version} instances under {args.dir.absolute()}; their target file: {path}")
    _say(f"run the suite against them: cck run --target-file {path}")
    return 0


def _cmd_build_tools(args: argparse.Namespace) -> int:
    dist = ensure_distribution(args.version)
    classes = build_tools(dist, force=args.force)
    _say(f"tools compiled against Artemis {dist.version}: {classes}")
    return 0


def _count_lines(path: Path) -> int:
    with path.open(encoding="utf-8") as handle:
        return sum(1 for line in handle if line.strip())


def _packet_types(path: Path) -> dict[str, int]:
    types: dict[str, int] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record: Any = json.loads(line)
                types[str(record["name"])] = int(record["type"])
    return dict(sorted(types.items()))


def _cmd_vectors(args: argparse.Namespace) -> int:
    dist, classes = _prepare(args.version)
    out_dir: Path = args.out or _default_vectors_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cck-vectors-", dir=out_dir.parent) as tmp:
        result = run_tool(dist, classes, ["vectors", tmp], timeout_s=VECTORS_TIMEOUT_S)
        summary: Any = json.loads(result.stdout.decode("utf-8").strip().splitlines()[-1])
        staged = Path(tmp)
        counts = {name: _count_lines(staged / name) for name in VECTOR_FILES}
        packet_types = _packet_types(staged / "packets.jsonl")
        for name in VECTOR_FILES:
            shutil.move(str(staged / name), str(out_dir / name))
    manifest = {
        "generator": "cck artemis vectors",
        "artemis_version": dist.version,
        "artemis_version_reported": summary["artemis_version"],
        "protocol_version": summary["protocol_version"],
        "generated_at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        "counts": counts,
        "packet_types_covered": packet_types,
        "packet_types_missing": summary["packet_types_missing"],
        "notes": summary["notes"],
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    total = sum(counts.values())
    _say(f"wrote {total} vectors ({len(packet_types)} packet types) made by Artemis {dist.version} to {out_dir}")
    return 0


def _cmd_legacy_vectors(args: argparse.Namespace) -> int:
    # imported here: the legacy launcher is a target module, which imports this package
    from cck.conformance.targets import ensure_legacy

    out_dir: Path = args.out or _default_vectors_dir() / "legacy"
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = out_dir / "manifest.json"
    try:
        manifest: Any = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        manifest = {}
    servers: dict[str, Any] = dict(manifest.get("servers", {}))
    for kind in args.kind or sorted(LEGACY_VECTOR_FILES):
        launch = ensure_legacy(kind)
        name = LEGACY_VECTOR_FILES[kind]
        with tempfile.TemporaryDirectory(prefix="cck-legacy-vectors-", dir=out_dir.parent) as tmp:
            staged = Path(tmp) / name
            command = [launch.argv_prefix[0], *launch.server.jvm_args, "-cp", launch.classpath, LEGACY_VECTORS_MAIN,
                       "--kind", kind, "--out", str(staged)]
            try:
                result = subprocess.run(command, capture_output=True, text=True, timeout=VECTORS_TIMEOUT_S,
                                        check=False, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                raise ArtemisError(f"the {kind} vector tool did not finish within {VECTORS_TIMEOUT_S:.0f}s") from None
            if result.returncode != 0:
                raise ArtemisError(f"the {kind} vector tool failed (exit {result.returncode}):\n"
                                   + (result.stderr or result.stdout).strip())
            summary: Any = json.loads(result.stdout.strip().splitlines()[-1])
            shutil.move(str(staged), str(out_dir / name))
        servers[kind] = {
            "file": name,
            "server_version": summary["server_version"],
            "protocol_version": summary["protocol_version"],
            "generated_at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
            "count": summary["count"],
            "packet_types_covered": summary["packet_types_covered"],
        }
        _say(f"wrote {summary['count']} vectors made by {summary['server_version']} to {out_dir / name}")
    manifest = {"generator": "cck artemis legacy-vectors", "servers": dict(sorted(servers.items()))}
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return 0


def _cmd_decode(args: argparse.Namespace) -> int:
    dist, classes = _prepare(args.version)
    sys.stdout.flush()
    run_tool(dist, classes, ["decode"], timeout_s=args.timeout, stdin=sys.stdin.buffer, stdout=sys.stdout.buffer)
    return 0


def _cmd_bench_java(args: argparse.Namespace) -> int:
    dist, classes = _prepare(args.version)
    frames = Path(args.frames).resolve()
    if not frames.is_file():
        raise ArtemisError(f"--frames {frames}: no such file")
    budget = 60.0 + 4.0 * (args.seconds + args.warmup) * max(1, _count_names(frames))
    result = run_tool(
        dist,
        classes,
        [str(frames), str(args.seconds), str(args.warmup)],
        timeout_s=budget,
        main="cck.tools.CodecBench",
    )
    sys.stdout.write(result.stdout.decode("utf-8"))
    return 0


def _count_names(frames: Path) -> int:
    names: set[str] = set()
    with frames.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                try:
                    names.add(str(json.loads(line).get("name")))
                except (json.JSONDecodeError, AttributeError):
                    raise ArtemisError(f"{frames}: not JSON Lines of objects") from None
    return len(names)


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    default, versions = load_versions()
    parser = argparse.ArgumentParser(
        prog=prog or "python -m cck.conformance.artemis",
        description=(
            "Fetch pinned Apache Artemis releases (via mvn, verified by SHA-256, cached outside git in "
            "$CCK_CACHE or ~/.cache/core-conformance-kit) and run the Java tools built on Artemis's own "
            "classes: regenerate the byte vectors, decode frames the way Artemis does, "
            "benchmark Artemis's codec."
        ),
    )
    parser.add_argument(
        "--version",
        default=None,
        help=f"Artemis version (pinned: {', '.join(sorted(versions))}; default {default})",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("fetch", help="fetch, verify and unpack the release (no-op when cached)")
    p.add_argument("--all", action="store_true", help="also fetch optional artifacts (client jars)")
    p.set_defaults(func=_cmd_fetch)

    p = sub.add_parser("instances", help="artemis create N instances on this machine and write a target file that "
                                         "runs the suite against them through commands (docs/targets.md)")
    p.add_argument("--dir", type=Path, required=True, help="where the instances go (DIR/node0, ...; DIR/target.toml)")
    p.add_argument("--nodes", type=int, default=3, help="how many instances (default 3: the suite's clusters)")
    p.add_argument("--base-port", type=int, default=61616, help="node i's core acceptor port is BASE+i")
    p.set_defaults(func=_cmd_instances)

    p = sub.add_parser("build-tools", help="compile fixtures/java/src against the release")
    p.add_argument("--force", action="store_true", help="recompile even if no source changed")
    p.set_defaults(func=_cmd_build_tools)

    p = sub.add_parser("vectors", help="regenerate every checked-in vector file and manifest.json")
    p.add_argument("--out", type=Path, default=None, help="output directory (default fixtures/vectors)")
    p.set_defaults(func=_cmd_vectors)

    p = sub.add_parser("legacy-vectors",
                       help="regenerate fixtures/vectors/legacy: vectors made by HornetQ 2.4.7's and Artemis 1.5.6's "
                            "own classes (fetched from Maven Central; --version does not apply)")
    p.add_argument("--kind", action="append", choices=sorted(LEGACY_VECTOR_FILES), default=None,
                   help="only this server kind (repeatable; default both)")
    p.add_argument("--out", type=Path, default=None, help="output directory (default fixtures/vectors/legacy)")
    p.set_defaults(func=_cmd_legacy_vectors)

    p = sub.add_parser(
        "decode",
        help="stdin JSON Lines {id, kind, version, hex[, encoding]} -> stdout JSON Lines: Artemis's decoding",
    )
    p.add_argument("--timeout", type=float, default=DECODE_TIMEOUT_S, help="seconds allowed for the whole batch")
    p.set_defaults(func=_cmd_decode)

    p = sub.add_parser("bench-java", help="frames/s of Artemis's own decode and encode per packet name")
    p.add_argument("--frames", required=True, help='JSON Lines {"name", "version", "hex"}')
    p.add_argument("--seconds", type=float, default=3.0, help="measurement time per name and direction")
    p.add_argument("--warmup", type=float, default=1.5, help="warm-up time per name and direction")
    p.set_defaults(func=_cmd_bench_java)
    return parser


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``prog``: the name usage lines give (``cck artemis`` when the ``cck`` command runs this)."""
    try:
        parser = build_parser(prog)
        args = parser.parse_args(argv)
        code: int = args.func(args)
        return code
    except (ArtemisError, MissingFixture) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
