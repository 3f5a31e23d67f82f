"""python -m tests.sensitivity.draws [--seed S] [--examples N] [--per N]: what the exploration loop draws, counted
per ``--per`` runs: the rounds and faults the mutation set's rarest rules need, with a runner that runs nothing.

Whether a mutant dies in a short exploration depends first on whether an example its rule judges comes up in time;
hypothesis draws in bursts (docs/exploration.md, "Aiming at exposure"), so the count per hundred runs says more
than the total.  Nothing runs, so no exposure is reported and the target phase does not start: the counts are those
of generation alone.  Security examples are counted beside the reliability ones.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cck.conformance.explore import AnyExample, CutHalfOpen, Example, Receive
from cck.conformance.explore._explore import ExploreConfig, explore
from cck.conformance.explore._model import Xa
from cck.conformance.explore._runner import Outcome

#: A run's simulated length: only the budget reads the clock, and it must outlast ``--examples`` runs.
_RUN_S = 1.0


def _rolled_back(example: Example) -> bool:
    """A transacted, acknowledging receive followed by a rollback before any commit: what rule 2 of ``_redelivery``
    judges (the runner preloads the queue of a transacted receive that would otherwise find it empty)."""
    operations = example.workload.operations
    for index, op in enumerate(operations):
        if isinstance(op, Receive) and op.tx and op.ack:
            ended = next((later.kind for later in operations[index + 1:] if later.kind in ("commit", "rollback")), None)
            if ended == "rollback":
                return True
    return False


def _forgotten(example: Example) -> bool:
    """Any XA forget: the runner forgets a completed branch, or else an Xid never started, and the broker knows
    neither (``dtx.completed-forgotten``)."""
    return any(isinstance(op, Xa) and op.action == "forget" for op in example.workload.operations)


def _half_open_without_window(example: Example) -> bool:
    """A half-open cut of a connection whose sessions have no window (-1 or 0): the reattach reaches a broker that
    still holds a session it must not reattach."""
    return example.workload.config.window <= 0 and any(isinstance(f, CutHalfOpen) for f in example.schedule.faults)


#: What is counted, by column name.
COUNTED: dict[str, Callable[[Example], bool]] = {"rolled back after a tx receive": _rolled_back,
                                                  "forget": _forgotten,
                                                  "half-open cut, no window": _half_open_without_window}


@dataclass(frozen=True, slots=True)
class Draws:
    """Per run, in order: whether it was a reliability example and which of :data:`COUNTED` it held."""

    runs: tuple[tuple[bool, frozenset[str]], ...]

    def table(self, per: int) -> str:
        names = list(COUNTED)
        lines = ["| runs | reliability | " + " | ".join(names) + " |", "|---" * (len(names) + 2) + "|"]
        for start in range(0, len(self.runs), per):
            part = self.runs[start:start + per]
            counts = [sum(name in held for _, held in part) for name in names]
            lines.append(f"| {start}-{start + len(part) - 1} | {sum(r for r, _ in part)} | "
                         + " | ".join(map(str, counts)) + " |")
        totals = [sum(name in held for _, held in self.runs) for name in names]
        lines.append(f"| all {len(self.runs)} | {sum(r for r, _ in self.runs)} | " + " | ".join(map(str, totals))
                     + " |")
        return "\n".join(lines)


def draws(seed: int, examples: int, *, restart: bool = True, security: bool = True) -> Draws:
    """Run the exploration loop for ``examples`` examples with a runner that runs nothing, as ``cck explore
    --target reference`` would draw them (it can restart its broker and has the security family)."""
    now = [0.0]
    runs: list[tuple[bool, frozenset[str]]] = []

    def run(example: AnyExample) -> Outcome:
        now[0] += _RUN_S
        if isinstance(example, Example):
            runs.append((True, frozenset(name for name, holds in COUNTED.items() if holds(example))))
        else:
            runs.append((False, frozenset()))
        return Outcome(example, "clean", 0.0)

    config = ExploreConfig(examples * _RUN_S * 2, seed=seed, max_examples=examples, restart=restart,
                           security=security)
    explore(run, config, io.StringIO(), clock=lambda: now[0])
    return Draws(tuple(runs))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sensitivity.draws", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1, help="hypothesis's seed (default 1, the mutation set's)")
    parser.add_argument("--examples", type=int, default=1000, help="max_examples (default 1000, cck explore's)")
    parser.add_argument("--per", type=int, default=100, help="runs per row (default 100)")
    options = parser.parse_args(argv)
    if options.examples < 1 or options.per < 1:
        parser.error("--examples and --per must be at least 1")
    print(draws(options.seed, options.examples).table(options.per))
    return 0


if __name__ == "__main__":
    sys.exit(main())
