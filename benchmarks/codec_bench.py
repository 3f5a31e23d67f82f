"""Frames/s of the codec against a hand-written ``struct`` baseline and Artemis's Java codec.

For each frame set of :mod:`benchmarks.frame_sets` (SESS_SEND, SESS_RECEIVE_MSG,
PACKETS_CONFIRMED, mixed) it measures, in this one process:

* decode: whole frame bytes -> ``Frame`` with the packet dataclass
  (``codec.decode_frame`` vs ``struct_baseline.decode_frame``);
* encode: packet dataclass -> whole frame bytes
  (``codec.encode_packet`` vs ``struct_baseline.encode_packet``);
* for the mixed set also decode-stream: all frames concatenated, fed to
  ``codec.FrameDecoder`` at once and iterated (vs ``struct_baseline.iter_frames``);

then runs ``cck artemis bench-java`` on the very same frames
(Artemis's own Java codec classes) unless ``--no-java``.  A missing or failing
Java harness is reported as "java: unavailable (reason)", never as a crash.

Method: per (set, direction) every implementation is calibrated to a repetition
of about ``seconds / reps``, warmed up, then the implementations run their
repetitions interleaved (A B A B ..., order alternating) so drift of the
machine hits all of them alike.  The garbage collector is disabled during a
timed repetition (as ``timeit`` does) and run between repetitions.  Reported:
the median frames/s over repetitions and the spread (min..max, and
(max - min) / median).

    python benchmarks/codec_bench.py --seconds 2 --json reports/bench.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_REPO_ROOT = Path(__file__).resolve().parents[1]
if str(_REPO_ROOT) not in sys.path:  # run as a script: make `codec` and `benchmarks` importable
    sys.path.insert(0, str(_REPO_ROOT))

from benchmarks import struct_baseline as baseline  # noqa: E402
from benchmarks.frame_sets import SET_NAMES, VERSION, FrameSet, build_sets  # noqa: E402
from cck import codec  # noqa: E402

#: A timed body: runs ``passes`` passes over its frame set, returns the frames processed.
Body = Callable[[int], int]

CODEC = "codec"
STRUCT = "struct"
JAVA = "java"
DECODE = "decode"
ENCODE = "encode"
STREAM = "decode-stream"
DECODE_GOAL = 0.5


def _say(message: str) -> None:
    print(message, flush=True)


# ---------------------------------------------------------------------- bodies


def _decode_bodies(fs: FrameSet) -> dict[str, Body]:
    frames = fs.frames
    n = len(frames)
    decode_frame = codec.decode_frame
    base_decode = baseline.decode_frame
    version = VERSION

    def codec_body(passes: int) -> int:
        for _ in range(passes):
            for f in frames:
                decode_frame(f, version=version)
        return passes * n

    def struct_body(passes: int) -> int:
        for _ in range(passes):
            for f in frames:
                base_decode(f)
        return passes * n

    return {CODEC: codec_body, STRUCT: struct_body}


def _encode_bodies(fs: FrameSet) -> dict[str, Body]:
    pairs = tuple(zip(fs.packets, fs.channels, strict=True))
    n = len(pairs)
    encode_packet = codec.encode_packet
    base_encode = baseline.encode_packet
    version = VERSION

    def codec_body(passes: int) -> int:
        for _ in range(passes):
            for p, c in pairs:
                encode_packet(p, c, version=version)
        return passes * n

    def struct_body(passes: int) -> int:
        for _ in range(passes):
            for p, c in pairs:
                base_encode(p, c)
        return passes * n

    return {CODEC: codec_body, STRUCT: struct_body}


def _stream_bodies(fs: FrameSet) -> dict[str, Body]:
    stream = fs.stream
    n = len(fs.frames)
    frame_decoder = codec.FrameDecoder
    iter_frames = baseline.iter_frames
    version = VERSION

    def codec_body(passes: int) -> int:
        count = 0
        for _ in range(passes):
            decoder = frame_decoder(version=version)
            decoder.feed(stream)
            for _frame in decoder:
                count += 1
        assert count == passes * n
        return count

    def struct_body(passes: int) -> int:
        count = 0
        for _ in range(passes):
            for _frame in iter_frames(stream):
                count += 1
        assert count == passes * n
        return count

    return {CODEC: codec_body, STRUCT: struct_body}


# ---------------------------------------------------------------------- timing


@dataclass
class Measurement:
    """Frames/s of one implementation over the repetitions of one (set, direction)."""

    fps: list[float] = field(default_factory=list)
    #: The same repetitions timed by this thread's CPU time (``time.thread_time_ns``): blind to
    #: time spent descheduled, so less disturbed by other load on the machine.
    cpu_fps: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.fps)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_fps)

    @property
    def spread_pct(self) -> float:
        return 100.0 * (max(self.fps) - min(self.fps)) / self.median

    def as_json(self) -> dict[str, Any]:
        return {
            "median_fps": round(self.median, 1),
            "min_fps": round(min(self.fps), 1),
            "max_fps": round(max(self.fps), 1),
            "spread_pct": round(self.spread_pct, 2),
            "reps_fps": [round(x, 1) for x in self.fps],
            "cpu_median_fps": round(self.cpu_median, 1),
            "cpu_reps_fps": [round(x, 1) for x in self.cpu_fps],
        }


def paired_ratio(a: Measurement, b: Measurement) -> float:
    """Median over repetitions of a/b, each pair timed back to back (robust to slow drift)."""
    return statistics.median(x / y for x, y in zip(a.fps, b.fps, strict=True))


def _timed(body: Body, passes: int) -> tuple[int, int, int]:
    """(frames, wall-clock ns, thread CPU ns) of one repetition, GC off while timing."""
    gc.collect()
    gc.disable()
    try:
        cpu_start = time.thread_time_ns()
        start = time.perf_counter_ns()
        frames = body(passes)
        elapsed = time.perf_counter_ns() - start
        cpu = time.thread_time_ns() - cpu_start
    finally:
        gc.enable()
    return frames, max(elapsed, 1), max(cpu, 1)


def _calibrate(body: Body, rep_s: float) -> int:
    """Passes per repetition so that one repetition lasts about ``rep_s``."""
    passes = 1
    while True:
        _, ns, _ = _timed(body, passes)
        if ns >= 20_000_000 or ns >= rep_s * 1e9:  # long enough to extrapolate
            return max(1, round(passes * rep_s * 1e9 / ns))
        passes *= 4


def measure(bodies: dict[str, Body], *, seconds: float, reps: int, warmup: float) -> dict[str, Measurement]:
    """Interleaved repetitions of every body; ``seconds`` of measurement per body."""
    rep_s = seconds / reps
    passes = {name: _calibrate(body, rep_s) for name, body in bodies.items()}
    for name, body in bodies.items():
        deadline = time.perf_counter() + warmup
        while time.perf_counter() < deadline:
            body(max(1, passes[name] // 4))
    results = {name: Measurement() for name in bodies}
    names = list(bodies)
    for r in range(reps):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            frames, ns, cpu_ns = _timed(bodies[name], passes[name])
            results[name].fps.append(frames * 1e9 / ns)
            results[name].cpu_fps.append(frames * 1e9 / cpu_ns)
    return results


# ---------------------------------------------------------------------- java


@dataclass
class JavaResult:
    available: bool
    reason: str | None = None
    command: str | None = None
    fps: dict[str, dict[str, float]] = field(default_factory=dict)
    raw: Any = None
    elapsed_s: float | None = None


def _parse_java_output(stdout: str) -> Any:
    text = stdout.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    for line in reversed(text.splitlines()):  # tolerate log lines before the JSON
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    raise ValueError(f"no JSON object in its output: {text[-300:]!r}")


def run_java(sets: dict[str, FrameSet], *, seconds: float, timeout: float) -> JavaResult:
    """Artemis's Java codec on the same frames, via the bench-java CLI; never raises."""
    with tempfile.TemporaryDirectory(prefix="cck-bench-") as tmp:
        frames_file = Path(tmp) / "frames.jsonl"
        with frames_file.open("w", encoding="utf-8") as out:
            for name, fs in sets.items():
                for frame in fs.frames:
                    out.write(json.dumps({"name": name, "version": VERSION, "hex": frame.hex()}) + "\n")
        argv = [sys.executable, "-m", "cck.conformance.artemis", "bench-java"]
        argv += ["--frames", str(frames_file), "--seconds", f"{seconds:g}"]
        shown = shlex.join(["python", *argv[1:4], "--frames", "FRAMES.jsonl", "--seconds", f"{seconds:g}"])
        started = time.perf_counter()
        try:
            proc = subprocess.run(
                argv,
                cwd=_REPO_ROOT,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return JavaResult(False, f"bench-java did not finish within {timeout:.0f}s", shown)
        except OSError as exc:
            return JavaResult(False, f"could not start bench-java: {exc}", shown)
        elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        tail = " | ".join(line.strip() for line in proc.stderr.strip().splitlines()[-3:] if line.strip())
        return JavaResult(False, f"bench-java exit {proc.returncode}: {tail[:400]}", shown, elapsed_s=elapsed)
    try:
        raw = _parse_java_output(proc.stdout)
    except ValueError as exc:
        return JavaResult(False, f"bench-java: {exc}", shown, elapsed_s=elapsed)
    fps: dict[str, dict[str, float]] = {}
    if isinstance(raw, dict):
        for name, entry in raw.items():
            if not isinstance(entry, dict):
                continue
            got = {
                direction: float(entry[key])
                for direction, key in ((DECODE, "decode_fps"), (ENCODE, "encode_fps"))
                if isinstance(entry.get(key), (int, float)) and entry[key] > 0
            }
            if got:
                fps[str(name)] = got
    if not fps:
        reason = "bench-java printed no decode_fps/encode_fps"
        return JavaResult(False, reason, shown, raw=raw, elapsed_s=elapsed)
    return JavaResult(True, None, shown, fps, raw, elapsed)


def _java_version() -> str | None:
    try:
        proc = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return lines[0] if lines else None


# ---------------------------------------------------------------------- report


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _git_revision() -> str | None:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=_REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "codec"],
            cwd=_REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        return None
    return f"{head}{' (codec/ modified)' if dirty else ''}" if head else None


def machine_info() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": _cpu_model(),
        "git_revision": _git_revision(),
        "load_average_at_start": _load_average(),
    }


def _load_average() -> list[float] | None:
    """1/5/15-minute load: other work on the machine skews absolute numbers (ratios less so)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _fmt_fps(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def _fmt_ratio(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}x" if x < 0.1 else f"{x:.2f}x"


def print_table(rows: list[dict[str, Any]]) -> None:
    header = (
        f"{'set':<18} {'direction':<13} {'codec f/s':>11} {'±':>6} {'struct f/s':>11} {'±':>6} "
        f"{'java f/s':>12} {'codec/struct':>13} {'paired':>7} {'cpu':>6} {'codec/java':>11}"
    )
    _say(header)
    _say("-" * len(header))
    for row in rows:
        _say(
            f"{row['set']:<18} {row['direction']:<13} {_fmt_fps(row['codec']):>11} "
            f"{row['codec_spread']:>5.1f}% {_fmt_fps(row['struct']):>11} {row['struct_spread']:>5.1f}% "
            f"{_fmt_fps(row['java']):>12} {_fmt_ratio(row['codec/struct']):>13} "
            f"{_fmt_ratio(row['codec/struct paired']):>7} {_fmt_ratio(row['codec/struct cpu']):>6} "
            f"{_fmt_ratio(row['codec/java']):>11}"
        )
    _say("± = (max - min) / median over the repetitions; codec/struct = ratio of the medians;")
    _say("paired = median of per-repetition ratios (back-to-back); cpu = ratio of thread-CPU-time medians")


# ---------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/codec_bench.py",
        description=(
            "Frames/s of codec.decode_frame / encode_packet / FrameDecoder against a hand-written struct "
            "baseline (benchmarks/struct_baseline.py, same dataclasses) and Artemis's Java codec "
            "(cck artemis bench-java) on the same frames: SESS_SEND, SESS_RECEIVE_MSG, "
            "PACKETS_CONFIRMED and a mixed stream, protocol version 136."
        ),
        epilog="Example: python benchmarks/codec_bench.py --seconds 2 --json bench.json",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 0.3 s per measurement, 3 repetitions, short warm-up"
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="measurement time per (set, direction, implementation), split over the repetitions "
        "(default 1.0; 0.3 with --quick); also passed to bench-java",
    )
    parser.add_argument(
        "--reps", type=int, default=None, help="repetitions per measurement (default 7; 3 with --quick)"
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="warm-up seconds per implementation (default 0.3; 0.05 with --quick)",
    )
    parser.add_argument("--size", type=int, default=200, help="distinct frames per set (default 200)")
    parser.add_argument("--seed", type=int, default=20240601, help="seed of frame contents and mixed order")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write all numbers here as JSON")
    parser.add_argument("--no-java", action="store_true", help="skip Artemis's Java codec (bench-java)")
    parser.add_argument(
        "--java-timeout", type=float, default=900.0, help="seconds allowed for bench-java (default 900)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else (0.3 if args.quick else 1.0)
    reps = args.reps if args.reps is not None else (3 if args.quick else 7)
    warmup = args.warmup if args.warmup is not None else (0.05 if args.quick else 0.3)
    if seconds <= 0 or reps < 1 or warmup < 0 or args.size < 1:
        parser.error("--seconds must be > 0, --reps >= 1, --warmup >= 0, --size >= 1")
    command = shlex.join(["python", *(sys.argv if argv is None else ["benchmarks/codec_bench.py", *argv])])
    started_at = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    machine = machine_info()
    _say(f"codec benchmark: {command}")
    _say(
        f"python {machine['python']} on {machine['platform']}, {machine['cpu_count']} CPUs "
        f"({machine['cpu_model']}), codec {machine['git_revision']}, load {machine['load_average_at_start']}"
    )
    _say(f"{seconds:g} s per measurement in {reps} repetitions, {warmup:g} s warm-up, {args.size} frames/set")

    sets = build_sets(args.size, args.seed)
    for name in SET_NAMES:
        fs = sets[name]
        composition = Counter(type(p).TYPE.name for p in fs.packets)
        _say(
            f"  set {name}: {len(fs.frames)} frames, {len(fs.stream):,} bytes "
            f"({', '.join(f'{k} {v}' for k, v in composition.most_common())})"
        )
        # The comparison is only honest when both decode to the same objects and bytes.
        for frame, packet, channel in zip(fs.frames, fs.packets, fs.channels, strict=True):
            if baseline.decode_frame(frame) != codec.decode_frame(frame, version=VERSION):
                raise SystemExit(f"baseline and codec disagree on a {name} frame")
            if baseline.encode_packet(packet, channel) != frame:
                raise SystemExit(f"baseline encodes a {name} packet differently")

    plan: list[tuple[str, str, dict[str, Body]]] = []
    for name in SET_NAMES:
        plan.append((name, DECODE, _decode_bodies(sets[name])))
        plan.append((name, ENCODE, _encode_bodies(sets[name])))
    plan.append(("mixed", STREAM, _stream_bodies(sets["mixed"])))

    results: dict[str, dict[str, dict[str, Measurement]]] = {}
    for i, (name, direction, bodies) in enumerate(plan, 1):
        _say(f"[{i}/{len(plan)}] {name} {direction} ...")
        got = measure(bodies, seconds=seconds, reps=reps, warmup=warmup)
        results.setdefault(name, {})[direction] = got
        c, s = got[CODEC], got[STRUCT]
        _say(
            f"        codec {c.median:>12,.0f} f/s (±{c.spread_pct:.1f}%)   struct {s.median:>12,.0f} f/s "
            f"(±{s.spread_pct:.1f}%)   codec/struct {c.median / s.median:.2f}x "
            f"(paired {paired_ratio(c, s):.2f}x, cpu {c.cpu_median / s.cpu_median:.2f}x)"
        )

    if args.no_java:
        java = JavaResult(False, "skipped (--no-java)")
    else:
        _say(f"[java] running bench-java on the same {sum(len(s.frames) for s in sets.values())} frames ...")
        java = run_java(sets, seconds=seconds, timeout=args.java_timeout)
    if java.available:
        _say(f"[java] done in {java.elapsed_s:.0f} s: {', '.join(sorted(java.fps))}")
    else:
        _say(f"java: unavailable ({java.reason})")

    rows: list[dict[str, Any]] = []
    for name, directions in results.items():
        for direction, got in directions.items():
            c_fps, s_fps = got[CODEC].median, got[STRUCT].median
            j_fps = java.fps.get(name, {}).get(direction) if java.available else None
            rows.append(
                {
                    "set": name,
                    "direction": direction,
                    "codec": c_fps,
                    "codec_spread": got[CODEC].spread_pct,
                    "struct": s_fps,
                    "struct_spread": got[STRUCT].spread_pct,
                    "java": j_fps,
                    "codec/struct": c_fps / s_fps,
                    "codec/struct paired": paired_ratio(got[CODEC], got[STRUCT]),
                    "codec/struct cpu": got[CODEC].cpu_median / got[STRUCT].cpu_median,
                    "codec/java": c_fps / j_fps if j_fps else None,
                }
            )
    _say("")
    print_table(rows)
    if not java.available:
        _say(f"java: unavailable ({java.reason})")
    _say("")
    for row in rows:
        if row["direction"] in (DECODE, STREAM):
            ok = row["codec/struct"] >= DECODE_GOAL
            _say(
                f"decode goal codec >= {DECODE_GOAL}x struct: {row['set']} {row['direction']}: "
                f"{row['codec/struct']:.2f}x {'met' if ok else 'MISSED'}"
            )

    if args.json is not None:
        report = {
            "command": command,
            "started_at": started_at,
            "machine": machine
            | {"load_average_at_end": _load_average(), "java": _java_version() if java.available else None},
            "settings": {
                "seconds": seconds,
                "reps": reps,
                "warmup": warmup,
                "set_size": args.size,
                "seed": args.seed,
                "protocol_version": VERSION,
                "gc": "disabled during each timed repetition, collected between",
                "clock": "time.perf_counter_ns (wall); also time.thread_time_ns (cpu_* fields)",
                "statistic": "median frames/s over repetitions; spread = (max - min) / median; "
                "'codec/struct paired' = median of per-repetition ratios",
            },
            "sets": {
                name: {
                    "frames": len(sets[name].frames),
                    "bytes": len(sets[name].stream),
                    "composition": dict(Counter(type(p).TYPE.name for p in sets[name].packets)),
                }
                for name in SET_NAMES
            },
            "results": {
                name: {
                    direction: {impl: m.as_json() for impl, m in got.items()}
                    | {"java": {"fps": java.fps.get(name, {}).get(direction)}}
                    for direction, got in directions.items()
                }
                for name, directions in results.items()
            },
            "ratios": {
                row["set"] + " " + row["direction"]: {
                    "codec/struct": round(row["codec/struct"], 4),
                    "codec/struct paired": round(row["codec/struct paired"], 4),
                    "codec/struct cpu": round(row["codec/struct cpu"], 4),
                    "codec/java": None if row["codec/java"] is None else round(row["codec/java"], 5),
                }
                for row in rows
            },
            "java": {
                "available": java.available,
                "reason": java.reason,
                "command": java.command,
                "elapsed_s": None if java.elapsed_s is None else round(java.elapsed_s, 1),
                "raw": java.raw,
            },
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        _say(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
