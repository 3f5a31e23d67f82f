"""Target files and their commands: what a file may say and the error for what it may not, the capabilities its
commands give, placeholders, and how a command is run (deadline, exit status, output, a process it leaves behind)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cck.conformance.targets import (
    CommandFailed,
    CommandLog,
    TargetFileError,
    capabilities_of,
    load_target_file,
    parse_target_file,
    unlocking_commands,
)
from cck.conformance.targets._commands import fill, run_command

FULL = {
    "version": "2.44.0", "broker": "artemis",
    "vars": {"home": "/srv/{node}"},
    "commands": {"start": "{home}/bin/artemis-service start", "stop": "{home}/bin/artemis-service stop",
                 "kill": "pkill -9 -f {home}", "log": "tail -n0 -F {home}/log/artemis.log",
                 "apply_config": "cp {etc_dir}/* {home}/etc/"},
    "nodes": [{"name": "a", "url": "tcp://127.0.0.1:61616"}, {"name": "b", "url": "tcp://127.0.0.1:61617"}],
}


def parse(data: dict[str, object]) -> object:
    return parse_target_file(data, Path("brokers.toml"))


def test_a_full_file_offers_every_capability() -> None:
    target_file = parse_target_file(FULL, Path("brokers.toml"))
    assert [n.name for n in target_file.nodes] == ["a", "b"]
    assert target_file.nodes[1].port == 61617
    assert capabilities_of(target_file) == {"config", "control", "kill", "log", "restart"}


@pytest.mark.parametrize(("drop", "lost"), [
    ("kill", {"kill"}),
    ("log", {"log"}),
    ("apply_config", {"config"}),
    ("stop", {"control", "restart", "config"}),
    ("start", {"control", "restart", "kill", "config"}),
])
def test_each_command_gives_its_capabilities(drop: str, lost: set[str]) -> None:
    commands = {k: v for k, v in FULL["commands"].items() if k != drop}  # type: ignore[attr-defined]
    target_file = parse_target_file({**FULL, "commands": commands}, Path("brokers.toml"))
    assert capabilities_of(target_file) == {"config", "control", "kill", "log", "restart"} - lost


def test_a_capability_is_what_every_node_offers() -> None:
    nodes = [{"name": "a", "url": "tcp://h:1"}, {"name": "b", "url": "tcp://h:2", "commands": {"kill": "true"}}]
    commands = {"start": "true", "stop": "true"}
    target_file = parse_target_file({"commands": commands, "nodes": nodes}, Path("f.toml"))
    assert capabilities_of(target_file) == {"control", "restart"}
    assert unlocking_commands("kill", frozenset(commands)) == ("kill",)
    assert unlocking_commands("config", frozenset()) == ("start", "stop", "apply_config")


@pytest.mark.parametrize(("data", "message"), [
    ({}, "nodes: needs at least one [[nodes]] table"),
    ({"nodes": [{"name": "a"}]}, "nodes[0].url: is missing"),
    ({"nodes": [{"url": "http://h:1"}]}, "nodes[0].url: bad broker URL 'http://h:1'"),
    ({"nodes": [{"url": "tcp://h:1", "colour": "red"}]}, "nodes[0].colour: unknown key"),
    ({"colour": 1, "nodes": []}, "colour: unknown key"),
    ({"commands": {"begin": "x"}, "nodes": [{"url": "tcp://h:1"}]}, "commands.begin: unknown key"),
    ({"commands": {"start": "run {nowhere}"}, "nodes": [{"url": "tcp://h:1"}]},
     "commands.start: {nowhere} is not a placeholder here"),
    ({"commands": {"start": "run {etc_dir}"}, "nodes": [{"url": "tcp://h:1"}]},
     "commands.start: {etc_dir} is not a placeholder here"),
    ({"commands": {"start": "awk '{print}'"}, "nodes": [{"url": "tcp://h:1"}]},
     "commands.start: {print} is not a placeholder here"),
    ({"commands": {"stop": " "}, "nodes": [{"url": "tcp://h:1"}]}, "commands.stop: is empty"),
    ({"broker": "activemq", "nodes": [{"url": "tcp://h:1"}]}, "broker: must be one of artemis, reference, other"),
    ({"commands": {"log": "tail -F x"}, "nodes": [{"url": "tcp://h:1"}]}, "patterns.ready: is needed"),
    ({"patterns": {"ready": "("}, "nodes": [{"url": "tcp://h:1"}]}, "patterns.ready: is not a regular expression"),
    ({"deadlines": {"start": 0}, "nodes": [{"url": "tcp://h:1"}]}, "deadlines.start: must be a number of seconds > 0"),
    ({"deadlines": {"start": True}, "nodes": [{"url": "tcp://h:1"}]}, "deadlines.start: must be a number of seconds"),
    ({"vars": {"node": "x"}, "nodes": [{"url": "tcp://h:1"}]}, "vars.node: is a built-in placeholder"),
    ({"nodes": [{"name": "a", "url": "tcp://h:1"}, {"name": "a", "url": "tcp://h:2"}]},
     "nodes: two nodes share a name"),
    ({"nodes": [{"name": "a", "url": "tcp://h:1"}, {"name": "b", "url": "tcp://h:1"}]},
     "nodes: two nodes share a URL"),
    ({"nodes": [{"name": "../x", "url": "tcp://h:1"}]}, "nodes[0].name: '../x' must match"),
], ids=lambda value: value if isinstance(value, str) else "")
def test_a_bad_file_is_refused_naming_the_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(TargetFileError) as raised:
        parse(data)
    assert f"target file brokers.toml: {message}" in str(raised.value)


def test_literal_braces_are_doubled() -> None:
    data = {"commands": {"start": "awk '{{print}}' {node}"}, "nodes": [{"name": "a", "url": "tcp://h:1"}]}
    target_file = parse_target_file(data, Path("f.toml"))
    template = target_file.nodes[0].commands.start
    assert template is not None
    assert fill(template, {"node": "a"}, {}) == "awk '{print}' a"


def test_a_file_that_is_not_toml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("version = \n")
    with pytest.raises(TargetFileError, match=r"bad.toml: is not TOML: .*line 1"):
        load_target_file(path)
    with pytest.raises(TargetFileError, match="cannot be read"):
        load_target_file(tmp_path / "missing.toml")


def test_builtins_are_shell_quoted_and_variables_are_not() -> None:
    filled = fill("cd {home} && echo {data_dir}", {"data_dir": "/a b/data", "node": "n 1"}, {"home": "/srv/{node}"})
    assert filled == "cd /srv/'n 1' && echo '/a b/data'"


def test_a_command_that_fails_names_itself_and_its_status() -> None:
    log = CommandLog()
    with pytest.raises(CommandFailed) as raised:
        run_command("a", "stop", "echo going; exit 3", 5.0, log)
    assert "the stop command of node 'a' exited with status 3: echo going; exit 3" in str(raised.value)
    assert "going" in str(raised.value)
    [record] = log.all()
    assert (record.exit_status, record.timed_out, record.output) == (3, False, "going\n")


def test_a_command_past_its_deadline_is_killed_with_what_it_started() -> None:
    log = CommandLog()
    began = time.monotonic()
    with pytest.raises(CommandFailed, match=r"did not finish within 0\.5 s and was killed"):
        run_command("a", "start", "sleep 30 & sleep 30", 0.5, log)
    assert time.monotonic() - began < 5
    assert log.all()[0].timed_out


def test_a_broker_left_running_with_the_output_does_not_hold_the_command() -> None:
    """A start command that backgrounds a process without redirecting its output is done when its shell is."""
    log = CommandLog()
    began = time.monotonic()
    record = run_command("a", "start", "echo started; sleep 5 &", 10.0, log)
    assert time.monotonic() - began < 3
    assert record.ok
    assert record.output.startswith("started")


def test_variables_may_use_variables_but_not_themselves() -> None:
    assert fill("{home}/bin", {"node": "b0"}, {"root": "/srv", "home": "{root}/{node}"}) == "/srv/b0/bin"
    data: dict[str, object] = {"vars": {"a": "{b}", "b": "{a}"}, "commands": {"start": "{a}"}, "nodes": [{"url": "tcp://h:1"}]}
    with pytest.raises(TargetFileError, match=r"commands.start: variable 'a' refers to itself"):
        parse(data)


@pytest.mark.parametrize("example", sorted(p.name for p in (Path(__file__).parents[2] / "fixtures" / "targets")
                                           .glob("*.toml")))
def test_every_documented_example_loads_with_every_capability(example: str) -> None:
    target_file = load_target_file(Path(__file__).parents[2] / "fixtures" / "targets" / example)
    assert capabilities_of(target_file) == {"config", "control", "kill", "log", "restart"}
