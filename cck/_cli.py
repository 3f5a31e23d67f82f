"""The ``cck`` command: one entry point to the kit's command-line tools.

    cck run --target reference --case 'reattach.*'      the conformance suite (python -m cck.conformance run)
    cck cases | clauses | timing-check                  the suite's case list, clause table, timing check
    cck explore --target reference --budget 10m         fault exploration (python -m cck.conformance explore)
    cck report --evidence DIR --out DIR                 the report site (python -m cck.reports report; reports extra)
    cck synth | install-allure                          synthetic evidence, the pinned allure (python -m cck.reports)
    cck broker [--config broker.xml]                    the reference broker (python -m cck.reference broker)
    cck artemis fetch | build-tools | vectors | ...     pinned Apache Artemis and its Java tools
                                                        (python -m cck.conformance.artemis)

Each subcommand is the ``python -m`` tool it names, with the same options and exit status (``cck run --help``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["COMMANDS", "main"]


@dataclass(frozen=True)
class Command:
    module: str  # whose ``main(argv, prog=...)`` runs it
    help: str
    whole: bool = False  # the module's whole command line (``cck artemis fetch``), not one of its subcommands


COMMANDS: dict[str, Command] = {
    "run": Command("cck.conformance.__main__", "run the conformance suite against a broker or a client"),
    "cases": Command("cck.conformance.__main__", "list the suite's cases"),
    "clauses": Command("cck.conformance.__main__", "print the clause table"),
    "timing-check": Command("cck.conformance.__main__", "check the backoff oracle fails a schedule 20%% off"),
    "explore": Command("cck.conformance.__main__", "fault exploration of a broker (shrinks and replays)"),
    "report": Command("cck.reports.__main__", "evidence -> Parquet -> the report site (needs the reports extra)"),
    "synth": Command("cck.reports.__main__", "write seeded synthetic evidence for scale tests"),
    "install-allure": Command("cck.reports.__main__", "install the pinned Allure Report 3 (npm)"),
    "broker": Command("cck.reference.__main__", "run the reference broker"),
    "artemis": Command("cck.conformance.artemis.__main__", "fetch pinned Apache Artemis releases, build and run "
                       "the Java tools (fetch, build-tools, vectors, legacy-vectors, decode, bench-java)",
                       whole=True),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cck", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        commands.add_parser(name, help=command.help, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = COMMANDS.get(args[0]) if args else None
    if command is None:  # --help, nothing, or an unknown command: argparse says which and exits
        _parser().parse_args(args)
        return 2
    run: Callable[..., int] = importlib.import_module(command.module).main
    if command.whole:
        return int(run(args[1:], prog=f"cck {args[0]}"))
    return int(run(args, prog="cck"))


if __name__ == "__main__":
    sys.exit(main())
