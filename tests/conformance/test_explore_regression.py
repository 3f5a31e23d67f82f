"""The pytest case file written for a confirmed finding: valid Python whose embedded example round-trips, whose
docstring gives the command that runs it, whose test fails on a finding and passes on a clean run; run as that
command says (pytest with the kit's plugin, ``--broker-url``), it replays the example against the broker."""

from __future__ import annotations

import ast
import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cck.conformance.explore import (
    ClientConfig,
    CutAtFrame,
    Example,
    FaultSchedule,
    Outcome,
    Receive,
    Send,
    Workload,
    judge,
    regression_case,
    regression_file_name,
)
from cck.conformance.oracles import History
from cck.reference._server import BrokerServer
from cck.reference.broker import BrokerCore, BrokerSettings

EXAMPLE = Example(Workload(ClientConfig(window=1024, connection_ttl_ms=10_000), (Send(0, 2, blocking=False),
                                                                                   Receive(0, 1))),
                  FaultSchedule((CutAtFrame(0, "c2s", "SESS_SEND", at=0),)))
FINDINGS = ("1 lost: confirmed, never received (0badcafe-2)",)
TARGET = ("--target", "artemis", "--artemis-version", "2.44.0")


def _module(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "generated_case"}
    exec(compile(source, "generated_case.py", "exec"), namespace)  # the file under test
    return namespace


def _test_function(namespace: dict[str, Any]) -> Callable[[Any], None]:
    (name,) = [n for n in namespace if n.startswith("test_")]
    function: Callable[[Any], None] = namespace[name]
    return function


def test_the_case_file_is_python_and_its_example_round_trips() -> None:
    source = regression_case(EXAMPLE, findings=FINDINGS, target_args=TARGET, seed=7)
    tree = ast.parse(source)
    (test,) = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert [arg.arg for arg in test.args.args] == ["cck_target"]  # the plugin's target
    namespace = _module(source)
    assert namespace["EXAMPLE"] == EXAMPLE
    assert Example.from_dict(json.loads(namespace["EXAMPLE_JSON"])) == EXAMPLE
    assert regression_file_name(EXAMPLE).startswith("test_explore_")
    assert regression_file_name(EXAMPLE) == regression_file_name(Example.from_dict(EXAMPLE.to_dict()))
    other = Example(EXAMPLE.workload, FaultSchedule())
    assert regression_file_name(other) != regression_file_name(EXAMPLE)


def test_the_docstring_gives_the_command_and_the_finding() -> None:
    source = regression_case(EXAMPLE, findings=FINDINGS, target_args=TARGET, seed=7)
    doc = ast.get_docstring(ast.parse(source)) or ""
    assert doc.startswith("Regression case from cck explore: a confirmed finding, replayed.\n\n* 1 lost: confirmed, "
                          "never received (0badcafe-2)\n")
    assert f"pytest {regression_file_name(EXAMPLE)} --target artemis --artemis-version 2.44.0" in doc
    assert "cck explore --target artemis --artemis-version 2.44.0 --seed 7" in doc


def _outcome(kind: str) -> Outcome:
    history = History()
    history.send("plain", "k1", producer="P", seq=0)
    if kind == "clean":
        history.received("drain", "k1", delivery_count=1, redelivered=False)
    judgement = judge(history, drain_complete=True, desynchronised=False)
    return Outcome(EXAMPLE, judgement.kind, 0.0, judgement, tuple(history))


def test_the_case_fails_on_a_finding_and_passes_on_a_clean_run() -> None:
    namespace = _module(regression_case(EXAMPLE, findings=FINDINGS))
    target = SimpleNamespace(url="tcp://127.0.0.1:1", protocol_version=None)
    replayed: list[tuple[Example, Any]] = []
    for kind in ("finding", "clean"):
        def replay(example: Example, on: Any, kind: str = kind) -> Outcome:
            replayed.append((example, on))
            return _outcome(kind)

        namespace["replay"] = replay
        if kind == "finding":
            with pytest.raises(AssertionError, match="finding: 1 lost: confirmed, never received"):
                _test_function(namespace)(target)
        else:
            _test_function(namespace)(target)
    assert replayed == [(EXAMPLE, target), (EXAMPLE, target)]


@pytest.fixture
def broker_url() -> Iterator[str]:
    """The in-process reference broker, on an event loop in a thread of its own (the case file's replay runs an
    event loop of its own, and the subprocess below connects from outside)."""
    loop = asyncio.new_event_loop()
    ready: list[str] = []
    started = threading.Event()
    stop = asyncio.Event()

    async def serve() -> None:
        async with BrokerServer(BrokerCore(BrokerSettings(node_id="n1")), "127.0.0.1", 0) as server:
            ready.append(f"tcp://127.0.0.1:{server.bound_port}")
            started.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(10), "the broker did not start"
    try:
        yield ready[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


def test_the_case_file_run_as_its_docstring_says_replays_against_the_broker(tmp_path: Path, broker_url: str) -> None:
    case = tmp_path / regression_file_name(EXAMPLE)
    case.write_text(regression_case(EXAMPLE, findings=FINDINGS), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", case.name,
                           "--broker-url", broker_url], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]  # the reference broker: clean
    assert "1 passed" in done.stdout
    skipped = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", case.name],
                             cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert "no conformance target chosen" in skipped.stdout  # the plugin is inert without a target
