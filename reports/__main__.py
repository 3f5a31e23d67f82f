"""``cck report --evidence DIR --out DIR [--master URL]``: build the report site;
``cck synth --out DIR [--runs N] [--events M] [--seed S]``: write synthetic evidence;
``cck install-allure``: install the pinned allure (npm) the allure HTML report is built with.

Exit status: 0 the site was built (quarantined rows are reported, not fatal); 1 the Spark job failed;
2 bad input or usage (a missing evidence directory, a run of an unreadable schema version, no pyspark).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from ._errors import ReportError

EXIT_OK, EXIT_FAILED, EXIT_INPUT = 0, 1, 2

#: Written into every output directory, so a second build may clean what the first one wrote.
MARKER = ".cck-report"

_EPILOG = """\
examples:
  cck report --evidence evidence --out report
  cck report --evidence .tox/evidence --out report --master spark://host:7077
  cck report --evidence evidence --out report --conf spark.driver.memory=4g

Every directory below --evidence holding run.json or *.jsonl is a run (evidence/<run-id>/ as
`cck run --evidence-dir evidence` writes it, or the tox layout
.tox/evidence/<target>/<run-id>/).  Bad rows are quarantined to OUT/quarantine.jsonl.
Open OUT/index.html in a browser (no server needed).  See docs/reports.md.
"""


def _parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog or "python -m cck.reports", description="The PySpark evidence pipeline of the Core Conformance Kit.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    report = commands.add_parser(
        "report", help="evidence -> Parquet -> matrix, timing, audit, coverage -> static site",
        description="Read conformance evidence, store it as Parquet (partitioned by run and target), run the "
                    "matrix, timing, delivery-audit and coverage jobs and write a static HTML site.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    report.add_argument("--evidence", required=True, type=Path, metavar="DIR",
                        help="directory of runs (<run-id>/run.json and *.jsonl, at any depth)")
    report.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="output directory: index.html and the other pages, quarantine.jsonl, data/ (Parquet)")
    report.add_argument("--master", metavar="URL",
                        help="Spark master URL (spark://host:7077, yarn, local[4], ...); default: local mode "
                             "in this process, every core, small shuffles")
    report.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting (repeatable), e.g. spark.driver.memory=4g")
    report.add_argument("--clause-table", type=Path, metavar="DIR",
                        help="clause table directory (*.toml) for coverage; default: the kit's conformance/clauses")
    report.add_argument("--allure", choices=("auto", "require", "off"), default="auto",
                        help="the allure HTML report (OUT/allure/index.html): auto builds it when the pinned allure "
                             "is installed (cck install-allure) and says why not otherwise; require "
                             "makes its absence an error; off skips it (default: auto)")
    report.add_argument("--results-doc", type=Path, metavar="FILE",
                        help="also write the current results (OUT/results.md) between the generated-results markers "
                             "of FILE, e.g. docs/conformance-results.md; the rest of FILE is kept")
    report.add_argument("-q", "--quiet", action="store_true", help="print only the path of index.html")
    synth = commands.add_parser(
        "synth", help="write seeded synthetic evidence (histories with planted anomalies) for scale tests",
        description="Write N synthetic runs (run.json, cases.jsonl, history.jsonl, history_results.jsonl) with "
                    "about M HISTORY rows in all and lost, duplicated, out-of-order and unexpected messages "
                    "planted at the given per-key rates.  The same seed writes the same files.")
    synth.add_argument("--runs", type=int, default=1, metavar="N", help="runs to write (default 1)")
    synth.add_argument("--events", type=int, default=10_000, metavar="M",
                       help="HISTORY rows in all, about (default 10000)")
    synth.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    synth.add_argument("--out", required=True, type=Path, metavar="DIR", help="a new or empty directory")
    synth.add_argument("--keys-per-history", type=int, default=1000, metavar="K",
                       help="keys sent per history (default 1000)")
    for name in ("lost", "duplicated", "out-of-order", "unexpected"):
        synth.add_argument(f"--{name}", type=float, default=0.001, metavar="RATE",
                           help=f"share of keys {name.replace('-', ' ')} (default 0.001)")
    synth.add_argument("--ack", type=float, default=0.5, metavar="RATE",
                       help="share of received keys acked (default 0.5)")
    synth.add_argument("--clients", type=_names, default=(), metavar="LIST",
                       help="comma-separated clients under test (kit,artemis@2.44.0): one client run each")
    synth.add_argument("--client-cases", type=int, default=10, metavar="N",
                       help="client cases per client run (default 10)")
    synth.add_argument("--kit-errors", type=float, default=0.0, metavar="RATE",
                       help="share of cases recorded as KIT_ERROR (default 0)")
    commands.add_parser(
        "install-allure", help="install the pinned Allure Report 3 (npm, needs Node.js) for the allure HTML report",
        description="Run npm ci with the kit's lockfile (reports/allure/) in $CCK_ALLURE_HOME, by default "
                    "~/.cache/core-conformance-kit/allure/<version>; nothing happens when it is there already.")
    return parser


class _Progress:
    """Steps with their durations on stderr: a rich spinner on a terminal, plain lines elsewhere."""

    def __init__(self, stream: TextIO, quiet: bool) -> None:
        self.quiet = quiet
        self.stream = stream
        try:
            from rich.console import Console
        except ImportError:  # pragma: no cover - rich comes with the reports extra
            self.console = None
        else:
            self.console = Console(file=stream, highlight=False)

    def _print(self, text: str) -> None:
        if self.quiet:
            return
        if self.console is not None:
            self.console.print(text, markup=False, soft_wrap=True)
        else:
            print(text, file=self.stream, flush=True)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        if self.console is not None and not self.quiet:
            with self.console.status(f"{name} ..."):
                yield
        else:
            yield
        self._print(f"done  {name} ({time.monotonic() - started:.1f} s)")

    def note(self, text: str) -> None:
        self._print(f"      {text}")


def _conf(pairs: Sequence[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ReportError(f"--conf {pair!r}: expected KEY=VALUE")
        conf[key.strip()] = value
    return conf


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ReportError(f"{out}: --out is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise ReportError(f"{out}: --out is a non-empty directory that holds no earlier report "
                          f"(no {MARKER}); choose a new or empty directory")


def _report(args: argparse.Namespace, progress: _Progress) -> int:
    if not args.evidence.exists():
        raise ReportError(f"{args.evidence}: evidence directory does not exist")
    if not args.evidence.is_dir():
        raise ReportError(f"{args.evidence}: evidence path is not a directory")
    _check_out(args.out)
    if args.results_doc is not None and not args.results_doc.is_file():
        raise ReportError(f"{args.results_doc}: --results-doc is not a file")
    conf = _conf(args.conf)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise ReportError("pyspark is not installed: pip install 'core-conformance-kit[reports]' "
                          "(or pip install 'pyspark>=3.5')") from None
    import shutil

    from ._coverage import CLAUSE_DIR
    from ._pipeline import build_report
    from ._spark import spark_session

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / MARKER).write_text("written by cck report\n", encoding="utf-8")
    for owned in ("cases", "data", "allure"):
        shutil.rmtree(args.out / owned, ignore_errors=True)
    with progress.step(f"spark session ({args.master or 'local mode'})"):
        spark = spark_session(args.master, conf)
    try:
        result = build_report(spark, args.evidence, args.out, clauses=args.clause_table or CLAUSE_DIR,
                              progress=progress, allure=args.allure, results_doc=args.results_doc)
    finally:
        spark.stop()
    progress.note(f"{result.runs} run(s), {result.quarantined} quarantined row(s), {result.seconds:.1f} s")
    if result.allure_index is not None:
        progress.note(f"allure report: {result.allure_index}")
    print(result.index)
    return EXIT_OK


def _names(text: str) -> tuple[str, ...]:
    """``a,b`` -> ("a", "b") (blanks dropped)."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _synth(args: argparse.Namespace) -> int:
    import json

    from ._synth import Rates, write_evidence

    out: Path = args.out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ReportError(f"{out}: --out must be a new or empty directory")
    try:
        rates = Rates(lost=args.lost, duplicated=args.duplicated, out_of_order=args.out_of_order,
                      unexpected=args.unexpected, ack=args.ack)
        started = time.monotonic()
        synthesis = write_evidence(out, runs=args.runs, events=args.events, seed=args.seed, rates=rates,
                                   keys_per_history=args.keys_per_history, clients=args.clients,
                                   client_cases=args.client_cases, kit_errors=args.kit_errors)
    except ValueError as exc:
        raise ReportError(str(exc)) from None
    summary = synthesis.to_json()
    print(f"{len(synthesis.run_ids)} run(s), {synthesis.events} history rows, planted {summary['planted']} "
          f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
    print(json.dumps(summary))
    return EXIT_OK


def _install_allure() -> int:
    from ._allure_html import ALLURE_VERSION, allure_bin, allure_home, install_allure

    home = allure_home()
    if allure_bin(home) is not None:
        print(f"allure {ALLURE_VERSION} is installed in {home}", file=sys.stderr)
        return EXIT_OK
    started = time.monotonic()
    print(f"installing allure {ALLURE_VERSION} into {home} (npm ci) ...", file=sys.stderr)
    cli = install_allure(home)
    print(f"allure {ALLURE_VERSION} installed ({time.monotonic() - started:.0f} s): {cli}", file=sys.stderr)
    return EXIT_OK


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``prog``: the name usage lines give (``cck`` when the ``cck`` command runs this)."""
    args = _parser(prog).parse_args(argv)
    progress = _Progress(sys.stderr, getattr(args, "quiet", False))
    try:
        if args.command == "synth":
            return _synth(args)
        if args.command == "install-allure":
            return _install_allure()
        return _report(args, progress)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - Spark and Py4J errors: one line, not a JVM stack trace
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"error: the report job failed: {type(exc).__name__}: {first}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
