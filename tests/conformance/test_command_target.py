"""Brokers the user runs, controlled only through the commands of a target file: the reference broker through the
documented local example (the suite's restart and HA cases give verdicts through it), a failing command as the
kit's error, the header that says what the file unlocks, and the preflight that stops a run against a broker that
is not there, not a core server, or refuses the credentials."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from cck.codec import CURRENT_VERSION
from cck.conformance.cases import Case
from cck.conformance.plugin import Settings
from cck.conformance.plugin._report import reach_lines
from cck.conformance.plugin._targets import PreflightError, check_broker
from cck.conformance.targets import (
    CommandBench,
    CommandFailed,
    CommandLog,
    SecuritySpec,
    Topology,
    User,
    example_text,
    free_ports,
    load_target_file,
    make_target,
    parse_target_file,
)

RUN_S = 600


def reference_file(tmp_path: Path, nodes: int = 3) -> Path:
    path = tmp_path / "reference.toml"
    path.write_text(example_text("reference-local.toml", ports=free_ports(nodes),
                                 variables={"root": str(tmp_path / "brokers"), "python": sys.executable}))
    return path


def run_suite(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=RUN_S, check=False)


def cases_of(evidence: Path) -> dict[str, dict[str, object]]:
    [run] = list(evidence.iterdir())
    return {r["case_id"]: r for r in map(json.loads, (run / "cases.jsonl").read_text().splitlines())}


def test_the_suite_runs_on_the_reference_broker_through_the_documented_commands(tmp_path: Path) -> None:
    """A restart case (kill -9, restart), a three-node cluster case and an HA case (a passive backup known only from
    its log) give the reference broker's verdicts, and each case's evidence holds the commands run for it."""
    target_file = reference_file(tmp_path)
    evidence = tmp_path / "evidence"
    done = run_suite("--target-file", str(target_file), "--evidence-dir", str(evidence), "--case", "restart.recreate.1",
                     "--case", "cluster.topology.1", "--case", "ha.kill.1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "3 of 3 cases can give a verdict with what the target offers (config, control, kill, log, restart)" \
        in done.stdout
    assert "preflight: tcp://127.0.0.1:" in done.stdout
    cases = cases_of(evidence)
    assert {case: record["verdict"] for case, record in cases.items()} == {
        "restart.recreate.1": "PASS", "cluster.topology.1": "PASS", "ha.kill.1": "PASS"}
    notes = [json.loads(line) for line in next(evidence.iterdir()).joinpath("notes.jsonl").read_text().splitlines()]
    commands = [c for n in notes if n.get("key") == "commands" for c in n["value"]]
    assert {c["name"] for c in commands} >= {"apply_config", "start", "kill"}
    assert all(c["exit_status"] == 0 for c in commands)


def test_artemis_instances_made_by_artemis_create_run_cases_through_their_commands(tmp_path: Path) -> None:
    """The documented local Artemis example, on instances the distribution's own `artemis create` made: the kit
    reaches them only through the file's commands (a kill -9 and restart, an HA backup waiting and taking over)."""
    from cck.conformance.artemis import ensure_distribution
    from cck.conformance.artemis.instances import make_instances

    target_file = make_instances(ensure_distribution("2.44.0"), tmp_path / "instances", free_ports(2))
    evidence = tmp_path / "evidence"
    done = run_suite("--target-file", str(target_file), "--evidence-dir", str(evidence), "--case", "restart.recreate.1",
                     "--case", "ha.kill.1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "artemis 2.44.0 of target file" in done.stdout
    assert {case: record["verdict"] for case, record in cases_of(evidence).items()} == {
        "restart.recreate.1": "PASS", "ha.kill.1": "PASS"}


def test_a_case_needing_what_the_file_does_not_offer_is_unsupported_naming_the_command(tmp_path: Path) -> None:
    text = reference_file(tmp_path).read_text()
    without_kill = "\n".join(line for line in text.splitlines() if not line.startswith("kill = "))
    path = tmp_path / "no-kill.toml"
    path.write_text(without_kill)
    evidence = tmp_path / "evidence"
    done = run_suite("--target-file", str(path), "--evidence-dir", str(evidence), "--case", "ha.kill.1",
                     "-rs", cwd=tmp_path)
    assert "0 of 1 cases can give a verdict" in done.stdout
    assert "1 more need kill: kill command in no-kill.toml" in done.stdout
    record = cases_of(evidence)["ha.kill.1"]
    assert record["verdict"] == "UNSUPPORTED"
    assert "no kill command" in str(record["reason"])


def test_a_failing_command_is_the_kits_error_naming_the_command_and_status(tmp_path: Path) -> None:
    text = reference_file(tmp_path, nodes=1).read_text()
    broken = text.replace('apply_config = "mkdir', 'apply_config = "echo no room >&2; exit 7; mkdir')
    bench = CommandBench(parse_target_file(tomllib.loads(broken), tmp_path / "t.toml"), CommandLog())
    target = make_target("command", bench=bench, workdir=tmp_path / "work", topology=Topology.single())
    with pytest.raises(CommandFailed) as raised:
        target.start()
    target.close()
    assert "the apply_config command of node 'node0' exited with status 7" in str(raised.value)
    assert "no room" in str(raised.value)


def test_a_failing_command_during_a_run_is_a_kit_error_not_a_fail(tmp_path: Path) -> None:
    """The start command fails after the first start: the case that needs the broker back gets KIT_ERROR naming the
    command and its status, and the run exits 3."""
    text = reference_file(tmp_path, nodes=1).read_text()
    flag = tmp_path / "started-once"
    broken = text.replace('start = "cd {home}', f'start = "test ! -e {flag} || exit 9; touch {flag}; cd {{home}}')
    path = tmp_path / "flaky.toml"
    path.write_text(broken)
    evidence = tmp_path / "evidence"
    done = run_suite("--target-file", str(path), "--evidence-dir", str(evidence), "--case", "restart.recreate.1",
                     cwd=tmp_path)
    assert done.returncode == 3, done.stdout[-4000:]
    record = cases_of(evidence)["restart.recreate.1"]
    assert record["verdict"] == "KIT_ERROR"
    assert "the start command of node 'node0' exited with status 9" in str(record["reason"])


def test_topologies_take_the_nodes_in_turn(tmp_path: Path) -> None:
    """A target for another topology takes the nodes from the one that had them, which gets them back (with its
    own configuration again) when one of its nodes is started."""
    log = CommandLog()
    bench = CommandBench(load_target_file(reference_file(tmp_path)), log)
    single = make_target("command", bench=bench, workdir=tmp_path / "a", topology=Topology.single())
    pair = make_target("command", bench=bench, workdir=tmp_path / "b", topology=Topology.cluster_of(2))
    try:
        single.start()
        assert [n.is_running for n in single.nodes] == [True]
        pair.start()
        assert [n.is_running for n in pair.nodes] == [True, True]
        assert [n.is_running for n in single.nodes] == [False]  # its broker was stopped for the pair
        single.nodes[0].start()
        assert [n.is_running for n in pair.nodes] == [False, False]
        configured = [r.node for r in log.all() if r.name == "apply_config"]
        assert configured == ["node0", "node0", "node1", "node0"] or sorted(configured) == [
            "node0", "node0", "node0", "node1"]
    finally:
        single.close()
        pair.close()


def test_the_header_names_what_unlocks_the_rest() -> None:
    cases = [Case(f"g.c.{i}", "c", "d", "e", needs=needs) for i, needs in
             enumerate([(), ("kill",), ("config", "kill"), ("config",), ("config", "log")], 1)]
    lines = reach_lines(cases, frozenset(), None)
    assert lines[0] == "core conformance: 1 of 5 cases can give a verdict with what the target offers (none " \
                       "(black box))"
    assert lines[1:] == [
        "core conformance:   3 more need config: a target file (--target-file) with start, stop, apply_config commands",
        "core conformance:   1 more need kill: a target file (--target-file) with start, kill commands"]
    target_file = parse_target_file({"commands": {"start": "true", "stop": "true"},
                                     "nodes": [{"url": "tcp://h:1"}]}, Path("mine.toml"))
    lines = reach_lines(cases, frozenset({"control", "restart"}), target_file)
    assert "core conformance:   3 more need config: apply_config command in mine.toml (install the configuration " \
           "the kit rendered in {etc_dir} (run while the broker is stopped))" in lines


# ---------------------------------------------------------------------------------------------------- preflight


def test_a_url_nobody_listens_on_ends_the_run_at_once_as_a_usage_error(tmp_path: Path) -> None:
    began = time.monotonic()
    done = run_suite("--broker-url", "tcp://127.0.0.1:1", cwd=tmp_path)
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-2000:]
    assert time.monotonic() - began < 60
    assert "preflight failed: tcp://127.0.0.1:1: connection refused (nothing listens on that port)" in \
        done.stdout + done.stderr
    assert not re.search(r"\d+ (passed|failed)", done.stdout), "no case ran"


def test_a_node_whose_commands_fail_ends_the_run_before_any_case(tmp_path: Path) -> None:
    text = reference_file(tmp_path, nodes=2).read_text()
    failing = 'commands = { start = "echo no such instance >&2; exit 2" }'
    broken = text.replace('name = "node1"', f'name = "node1"\n{failing}')
    path = tmp_path / "broken.toml"
    path.write_text(broken)
    done = run_suite("--target-file", str(path), "--case", "restart.recreate.1", cwd=tmp_path)
    assert done.returncode == 4, done.stdout[-3000:]
    assert "preflight failed: the nodes of" in done.stdout + done.stderr
    assert "the start command of node 'node1' exited with status 2" in done.stdout + done.stderr


@pytest.fixture
def not_core() -> Iterator[str]:
    """A TCP server that answers every connection with an HTTP error and closes it."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(2)
    server.close()


def test_a_server_that_is_not_a_core_server_is_named_so(not_core: str) -> None:
    began = time.monotonic()
    with pytest.raises(PreflightError, match=rf"{not_core}: (not a core-protocol server|no answer|cannot connect)"):
        check_broker(not_core, Settings(target="url", broker_url=not_core), CURRENT_VERSION)
    assert time.monotonic() - began < 25


def test_wrong_credentials_are_named_as_such(tmp_path: Path) -> None:
    security = SecuritySpec(enabled=True, users=(User("kit", "right"),))
    with make_target("reference", workdir=tmp_path, topology=Topology.single(security=security)) as target:
        check_broker(target.url, Settings(target="url", user="kit", password="right"), CURRENT_VERSION)
        with pytest.raises(PreflightError, match=r"the broker refused the credentials \(user 'kit'"):
            check_broker(target.url, Settings(target="url", user="kit", password="wrong"), CURRENT_VERSION)
