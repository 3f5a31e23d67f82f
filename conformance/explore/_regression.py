"""A confirmed finding as a pytest case for a regression suite, and :func:`replay`, what the case calls.

:func:`regression_case` fills a template with the example embedded as JSON: the case replays exactly that
example (workload and fault schedule) against the target the kit's pytest plugin gives (``cck_target``: the
``--target`` / ``--broker-url`` the run names) and asserts that the run is clean, so it fails while the bug is
there and passes once it is fixed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from string import Template
from typing import Protocol

from ._model import Example
from ._restart import restarter_of
from ._runner import Limits, Outcome, run_example_sync
from ._security_model import AnyExample

__all__ = ["Reachable", "regression_case", "regression_file_name", "replay"]


class Reachable(Protocol):
    """What :func:`replay` needs of a target: the plugin's and ``make_target``'s targets have it."""

    @property
    def url(self) -> str: ...

    @property
    def protocol_version(self) -> int | None: ...


def replay(example: Example, target: Reachable | str, *, limits: Limits | None = None) -> Outcome:
    """Run ``example`` once against ``target`` (a started target, or a broker's ``tcp://host:port``) through a
    fault proxy of its own, and judge it: what ``cck explore --replay`` does, on an event loop of its own."""
    limits = Limits() if limits is None else limits
    if isinstance(target, str):
        return run_example_sync(target, example, limits=limits)
    return run_example_sync(target.url, example, limits=limits, protocol_version=target.protocol_version,
                            restarter=restarter_of(target))


def _digest(example: AnyExample) -> str:
    canonical = json.dumps(example.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:8]


def regression_file_name(example: AnyExample) -> str:
    """``test_explore_<8 hex digits of the example>.py``: two findings' cases can sit in one directory."""
    return f"test_explore_{_digest(example)}.py"


_TEMPLATE = Template('''\
"""Regression case from cck explore: a confirmed finding, replayed.

$findings
Found by ``$found`` and confirmed by a replay (the message
keys differ from run to run).

The test replays exactly this example (workload and fault schedule, embedded below as the JSON that
``cck explore --replay`` reads) through the kit's fault proxy against the target the kit's pytest plugin gives
(``cck_target``), and asserts the run is clean: it fails while the bug is there and passes once it is fixed.
An indeterminate run (the broker not reachable, the example past its deadline) fails too, with the reason.

Run it with the kit installed (its pytest plugin comes with it, and is inert without a target)::

    pytest $file $target_args
    pytest $file --broker-url tcp://HOST:PORT    # a broker you run

The evidence of the finding (sequence.svg, history.jsonl, wire.jsonl, findings.json) was written beside this
file.
"""

from __future__ import annotations

import json

from cck.conformance.explore import Example, replay
from cck.conformance.targets import Target

#: The example, as ``Example.to_dict()`` wrote it.
EXAMPLE_JSON = """
$example_json
"""

EXAMPLE = Example.from_dict(json.loads(EXAMPLE_JSON))


def test_explore_${digest}_runs_clean(cck_target: Target) -> None:
    """$describe"""
    outcome = replay(EXAMPLE, cck_target)
    assert outcome.kind == "clean", outcome.describe()
''')


def _safe(text: str) -> str:
    """Text that may stand inside a triple-quoted string of the generated file."""
    return text.replace("\\", "/").replace('"""', "'''")


def regression_case(example: Example, *, findings: Sequence[str] = (), target_args: Sequence[str] = ("--target",
                                                                                                      "reference"),
                    seed: int | None = None) -> str:
    """The source of a pytest module that replays ``example`` and asserts the run is clean
    (``findings``: the judgement's lines, for its docstring; ``target_args``, ``seed``: how it was found)."""
    example_json = json.dumps(example.to_dict(), indent=2, sort_keys=True)
    if '"""' in example_json or "\\" in example_json:  # the model's values never hold either
        raise ValueError(f"the example cannot be embedded in a triple-quoted string: {example_json}")
    found = " ".join(["cck explore", *target_args] + ([f"--seed {seed}"] if seed is not None else []))
    digest = _digest(example)
    listed = "".join(f"* {_safe(line)}\n" for line in findings)
    return _TEMPLATE.substitute(
        findings=listed or "* (the finding's lines were not given)\n", found=_safe(found),
        file=regression_file_name(example),
        target_args=_safe(" ".join(target_args)), example_json=example_json, digest=digest,
        describe=_safe(example.describe()))
