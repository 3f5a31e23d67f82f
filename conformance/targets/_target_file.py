"""The target file: a broker the user runs, described in TOML with the commands the kit may run to control it.

::

    version = "2.44.0"          # what the broker is: picks the known deviations (default "unknown")
    broker = "artemis"          # how its log says it is up: artemis, reference or other (give [patterns])

    [commands]                  # for every node (a node's own [nodes.commands] wins)
    start = "..."               # start it; the kit then waits until it is up
    stop = "..."                # stop it gracefully, returning once it has exited
    kill = "..."                # kill -9 it, returning once it has exited
    log = "..."                 # print the broker's log from now on, until stopped (tail -F, docker logs -f)
    apply_config = "..."        # install the kit's broker.xml etc. from {etc_dir} (the broker is stopped)

    [[nodes]]
    name = "node0"
    url = "tcp://127.0.0.1:61616"

:func:`load_target_file` checks everything it can before a run starts, and says where a problem is
(``nodes[1].commands.start: ...``).  The capabilities a target offers follow from the commands it has
(:func:`capabilities_of`).
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from cck.conformance._data import fixture

from ._base import CONFIG, CONTROL, KILL, LOG, RESTART
from ._commands import BUILTIN_PLACEHOLDERS, fill, placeholders_of
from ._url import check_url

__all__ = ["COMMANDS", "Commands", "Deadlines", "FileNode", "Patterns", "TargetFile", "TargetFileError",
           "capabilities_of", "example_text", "load_target_file", "parse_target_file", "unlocking_commands"]

BrokerKind = Literal["artemis", "reference", "other"]
BROKER_KINDS: tuple[BrokerKind, ...] = ("artemis", "reference", "other")

#: The commands a node may offer, and what each is for (``--help`` and the docs say the same).
COMMANDS: Mapping[str, str] = {
    "start": "start the broker (the kit then waits until it is up)",
    "stop": "stop it gracefully (clients get DISCONNECT), returning once it has exited",
    "kill": "kill it as a crash would (SIGKILL), returning once it has exited",
    "restart": "stop it gracefully and start it again (default: stop, then start)",
    "log": "print the broker's log from now on until the kit stops it (tail -n0 -F, docker logs -f --since 0s)",
    "apply_config": "install the configuration the kit rendered in {etc_dir} (run while the broker is stopped)",
}
#: What each capability needs, in the order the header proposes them.
NEEDED: Final[Mapping[str, tuple[str, ...]]] = {
    CONTROL: ("start", "stop"),
    RESTART: ("start", "stop"),
    KILL: ("start", "kill"),
    CONFIG: ("start", "stop", "apply_config"),
    LOG: ("log",),
}
_TOP_KEYS = {"version", "broker", "protocol_version", "user", "password", "deadlines", "patterns", "vars",
             "commands", "nodes"}
_NODE_KEYS = {"name", "url", "data_dir", "vars", "commands"}
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class TargetFileError(ValueError):
    """A target file that cannot be used; the message names the file and the key."""

    def __init__(self, path: Path, where: str, problem: str) -> None:
        self.path = path
        self.where = where
        super().__init__(f"target file {path}: {where + ': ' if where else ''}{problem}")


@dataclass(frozen=True)
class Commands:
    """A node's commands (None: not offered)."""

    start: str | None = None
    stop: str | None = None
    kill: str | None = None
    restart: str | None = None
    log: str | None = None
    apply_config: str | None = None

    def get(self, name: str) -> str | None:
        value: str | None = getattr(self, name)
        return value

    def offered(self) -> frozenset[str]:
        return frozenset(name for name in COMMANDS if self.get(name) is not None)


@dataclass(frozen=True)
class Deadlines:
    """Seconds each kind of command may take (``[deadlines]``); ``start`` includes waiting until the broker is up."""

    start: float = 120.0
    stop: float = 60.0
    kill: float = 30.0
    apply_config: float = 60.0

    def of(self, command: str) -> float:
        return {"start": self.start, "restart": self.stop + self.start, "stop": self.stop, "kill": self.kill,
                "apply_config": self.apply_config}.get(command, self.stop)


@dataclass(frozen=True)
class Patterns:
    """The log lines that say a broker is up (``ready``), waits as a backup (``passive``) or holds its primary's
    state (``synced``); regular expressions, searched in each line."""

    ready: str | None = None
    passive: str | None = None
    synced: str | None = None


@dataclass(frozen=True)
class FileNode:
    name: str
    url: str
    commands: Commands
    #: where the broker keeps its data, as the broker sees it (None: a directory of the kit's own per topology)
    data_dir: str | None = None
    variables: tuple[tuple[str, str], ...] = ()

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 0


@dataclass(frozen=True)
class TargetFile:
    path: Path
    nodes: tuple[FileNode, ...]
    version: str = "unknown"
    broker: BrokerKind = "other"
    protocol_version: int | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    deadlines: Deadlines = Deadlines()
    patterns: Patterns = Patterns()

    def node(self, name: str) -> FileNode:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def describe(self) -> dict[str, object]:
        return {"file": str(self.path), "broker": self.broker, "version": self.version,
                "nodes": {n.name: {"url": n.url, "commands": sorted(n.commands.offered())} for n in self.nodes}}


def capabilities_of(target_file: TargetFile) -> frozenset[str]:
    """What every node of the file lets the kit do."""
    offered = frozenset.intersection(*(n.commands.offered() for n in target_file.nodes))
    return frozenset(cap for cap, needed in NEEDED.items()
                     if all(c in offered or (cap == RESTART and "restart" in offered and c == "stop")
                            for c in needed))


def unlocking_commands(capability: str, offered: frozenset[str]) -> tuple[str, ...]:
    """The commands a file offering ``offered`` still lacks for ``capability``."""
    return tuple(c for c in NEEDED.get(capability, ()) if c not in offered)


def example_text(name: str, *, variables: Mapping[str, str], ports: Sequence[int], version: str | None = None) -> str:
    """One of the documented target files (``fixtures/targets/<name>``) made concrete: the ``[vars]`` given set
    (each must be in the example), its nodes replaced by ``node0``, ``node1``, ... on 127.0.0.1 at ``ports``, and
    its version set when given."""
    text = fixture("targets").joinpath(name).read_text(encoding="utf-8")
    head, _, _ = text.partition("[[nodes]]")
    if version is not None:
        head, count = re.subn(r'(?m)^version = ".*"$', lambda _: f'version = "{version}"', head)
        if count != 1:
            raise ValueError(f"example {name} has no version line")
    for key, value in variables.items():
        line = f'{key} = "{value}"'
        head, count = re.subn(rf'(?m)^{re.escape(key)} = "[^"]*"', lambda _, line=line: line, head)  # type: ignore[misc]
        if count != 1:
            raise ValueError(f"example {name} has no variable {key!r} of its own")
    nodes = "".join(f'[[nodes]]\nname = "node{i}"\nurl = "tcp://127.0.0.1:{port}"\n\n' for i, port in enumerate(ports))
    return head + nodes.rstrip("\n") + "\n"


def load_target_file(path: Path) -> TargetFile:
    """Read and check a target file; TargetFileError naming the file and the key for anything wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TargetFileError(path, "", f"cannot be read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TargetFileError(path, "", f"is not TOML: {exc}") from None
    return parse_target_file(data, path)


def _type(path: Path, where: str, value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, kind):  # TOML's true/false is never a number or text here
        raise TargetFileError(path, where, f"must be {what}, not {value!r}")
    return value


def _unknown(path: Path, where: str, table: Mapping[str, Any], known: set[str] | Mapping[str, Any]) -> None:
    extra = sorted(set(table) - set(known))
    if extra:
        raise TargetFileError(path, f"{where}.{extra[0]}" if where else extra[0],
                              f"unknown key (known: {', '.join(sorted(known))})")


def _strings(path: Path, where: str, table: Any) -> dict[str, str]:
    _type(path, where, table, dict, "a table")
    for key, value in table.items():
        _type(path, f"{where}.{key}", value, str, "a string")
    return dict(table)


def _commands(path: Path, where: str, table: Any, variables: Mapping[str, str]) -> dict[str, str]:
    found = _strings(path, where, table)
    _unknown(path, where, found, COMMANDS)
    for name, command in found.items():
        _check_placeholders(path, f"{where}.{name}", command, variables, apply_config=name == "apply_config")
    return found


def _check_placeholders(path: Path, where: str, text: str, variables: Mapping[str, str], *,
                        apply_config: bool = False) -> None:
    if not text.strip():
        raise TargetFileError(path, where, "is empty (leave the key out when the command is not offered)")
    builtins = {n: n for n in BUILTIN_PLACEHOLDERS if apply_config or n not in ("etc_dir", "broker_xml")}
    try:
        for name in placeholders_of(text):
            if name not in variables and name not in builtins:
                raise ValueError(f"{{{name}}} is not a placeholder here (built in: {', '.join(sorted(builtins))}; "
                                 "or define it under [vars])")
        for name in variables:
            placeholders_of(variables[name])
        fill(text, builtins, variables)  # every variable it uses, at any depth, resolves
    except KeyError as exc:
        raise TargetFileError(path, where, f"{{{exc.args[0]}}} (in a variable it uses) is not a placeholder "
                                           f"here") from None
    except ValueError as exc:
        raise TargetFileError(path, where, str(exc)) from None


def _deadlines(path: Path, table: Any) -> Deadlines:
    table = _type(path, "deadlines", table, dict, "a table")
    _unknown(path, "deadlines", table, {"start", "stop", "kill", "apply_config"})
    values: dict[str, float] = {}
    for key, value in table.items():
        _type(path, f"deadlines.{key}", value, (int, float), "a number of seconds")
        if not math.isfinite(value) or value <= 0:
            raise TargetFileError(path, f"deadlines.{key}", f"must be a number of seconds > 0, not {value!r}")
        values[key] = float(value)
    return Deadlines(**values)


def _patterns(path: Path, table: Any) -> Patterns:
    found = _strings(path, "patterns", table)
    _unknown(path, "patterns", found, {"ready", "passive", "synced"})
    for key, value in found.items():
        try:
            re.compile(value)
        except re.error as exc:
            raise TargetFileError(path, f"patterns.{key}", f"is not a regular expression: {exc}") from None
    return Patterns(**found)


def parse_target_file(data: Mapping[str, Any], path: Path) -> TargetFile:
    """A :class:`TargetFile` from parsed TOML (``path`` is for messages and relative paths)."""
    _unknown(path, "", data, _TOP_KEYS)
    version = _type(path, "version", data.get("version", "unknown"), str, "a string")
    broker = data.get("broker", "other")
    if broker not in BROKER_KINDS:
        raise TargetFileError(path, "broker", f"must be one of {', '.join(BROKER_KINDS)}, not {broker!r}")
    protocol = data.get("protocol_version")
    if protocol is not None:
        _type(path, "protocol_version", protocol, int, "an integer")
    user = data.get("user")
    password = data.get("password")
    for key, value in (("user", user), ("password", password)):
        if value is not None:
            _type(path, key, value, str, "a string")
    shared_vars = _strings(path, "vars", data.get("vars", {}))
    for key in shared_vars:
        if key in BUILTIN_PLACEHOLDERS:
            raise TargetFileError(path, f"vars.{key}", "is a built-in placeholder; pick another name")
    shared = _commands(path, "commands", data.get("commands", {}), shared_vars)
    patterns = _patterns(path, data.get("patterns", {}))
    nodes_data = data.get("nodes")
    if not isinstance(nodes_data, list) or not nodes_data:
        raise TargetFileError(path, "nodes", "needs at least one [[nodes]] table (name and url)")
    nodes: list[FileNode] = []
    for index, raw in enumerate(nodes_data):
        where = f"nodes[{index}]"
        _type(path, where, raw, dict, "a table")
        _unknown(path, where, raw, _NODE_KEYS)
        name = _type(path, f"{where}.name", raw.get("name", f"node{index}"), str, "a string")
        if not _NODE_NAME.fullmatch(name):
            raise TargetFileError(path, f"{where}.name", f"{name!r} must match {_NODE_NAME.pattern}")
        if "url" not in raw:
            raise TargetFileError(path, f"{where}.url", "is missing (the node's core acceptor, tcp://host:port)")
        url = _type(path, f"{where}.url", raw["url"], str, "a string")
        try:
            check_url(url)
        except ValueError as exc:
            raise TargetFileError(path, f"{where}.url", str(exc)) from None
        variables = {**shared_vars, **_strings(path, f"{where}.vars", raw.get("vars", {}))}
        for key in variables:
            if key in BUILTIN_PLACEHOLDERS:
                raise TargetFileError(path, f"{where}.vars.{key}", "is a built-in placeholder; pick another name")
        for key, command in shared.items():  # the shared commands, checked again with the node's own variables
            _check_placeholders(path, f"commands.{key} (for {where})", command, variables,
                                apply_config=key == "apply_config")
        own = _commands(path, f"{where}.commands", raw.get("commands", {}), variables)
        data_dir = raw.get("data_dir")
        if data_dir is not None:
            _type(path, f"{where}.data_dir", data_dir, str, "a string")
            _check_placeholders(path, f"{where}.data_dir", data_dir, variables)
        nodes.append(FileNode(name=name, url=url, commands=Commands(**{**shared, **own}), data_dir=data_dir,
                              variables=tuple(sorted(variables.items()))))
    if broker == "other" and patterns.ready is None and any(n.commands.log is not None for n in nodes):
        raise TargetFileError(path, "patterns.ready", "is needed with a log command when broker is 'other' "
                                                       "(the log line that says the broker is up)")
    names = [n.name for n in nodes]
    if len(names) != len(set(names)):
        raise TargetFileError(path, "nodes", f"two nodes share a name: {names}")
    endpoints = [(n.host, n.port) for n in nodes]
    if len(endpoints) != len(set(endpoints)):
        raise TargetFileError(path, "nodes", f"two nodes share a URL: {[n.url for n in nodes]}")
    return TargetFile(path=path, nodes=tuple(nodes), version=version, broker=broker, protocol_version=protocol,
                      user=user, password=password, deadlines=_deadlines(path, data.get("deadlines", {})),
                      patterns=patterns)
