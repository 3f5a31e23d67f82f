"""The plugin's options: one table, registered as one pytest option group with an environment variable and an
ini key each, and :func:`resolve_settings`, the pure function that applies CLI > env > ini > default.

Every value is parsed and checked here, whatever its source, so a bad value gets the same message everywhere:
``--timing-scale: 'abc' is not a positive number (from env CCK_TIMING_SCALE)``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from cck.conformance.clients import ClientUnderTest, parse_client
from cck.conformance.oracles import DEFAULT_TOLERANCE, Tolerance
from cck.conformance.targets import (
    TARGET_KINDS,
    TargetFile,
    TargetFileError,
    check_url,
    load_target_file,
    pinned_artemis_versions,
)

from ._settings import Settings

__all__ = ["Option", "OPTIONS", "GROUP", "add_options", "resolve_settings", "settings_from_config",
           "conformance_option_given"]

GROUP = "core conformance"

Kind = Literal["value", "multi", "flag"]


@dataclass(frozen=True)
class Option:
    #: The key in :func:`resolve_settings`'s mappings (and ``config.option.cck_<key>``).
    key: str
    flag: str
    help: str
    kind: Kind = "value"
    metavar: str | None = None

    @property
    def env(self) -> str:
        return "CCK_" + self.key.upper()

    @property
    def ini(self) -> str:
        return "cck_" + self.key

    @property
    def dest(self) -> str:
        return "cck_" + self.key


OPTIONS: tuple[Option, ...] = (
    Option("target", "--target", f"the broker under test: {', '.join(TARGET_KINDS)} (default: url when --broker-url "
           "is given, command when --target-file is; without a target the plugin is inert)",
           metavar="{" + ",".join(TARGET_KINDS) + "}"),
    Option("target_file", "--target-file", "target command: a TOML file naming the brokers you run and the commands "
           "that start, stop, kill, configure them and read their log (implies --target command; see "
           "docs/targets.md)", metavar="FILE"),
    Option("client", "--client", "judge a client instead of the broker: kit (the kit's own client) or "
           "artemis[@V] (the stock Artemis client of a pinned version); runs the client cases only, against "
           "--target (default: reference)", metavar="CLIENT"),
    Option("artemis_version", "--artemis-version", "target artemis: a pinned version (default: the pins' default); "
           "target url: the version the broker is declared to be (picks its known-deviations file)", metavar="V"),
    Option("broker_url", "--broker-url", "target url: the broker's core acceptor, tcp://host:port[?params] "
           "(implies --target url)", metavar="URL"),
    Option("broker_user", "--broker-user", "user name the kit connects as", metavar="USER"),
    Option("broker_password", "--broker-password", "password the kit connects with (never printed)",
           metavar="PASSWORD"),
    Option("timing_scale", "--timing-scale", "multiply every deadline and timing tolerance by F (> 0; a slow "
           "machine or network asks for more than 1; default 1)", metavar="F"),
    Option("timing_tolerance", "--timing-tolerance", "the timing oracle's two-sided tolerance per attempt, "
           f"ABS_MS,REL (e.g. 100,0.1 or 100,10%%; default {DEFAULT_TOLERANCE.absolute_ms:g},"
           f"{DEFAULT_TOLERANCE.relative:g})", metavar="ABS_MS,REL"),
    Option("case", "--case", "run only cases whose ID matches GLOB (repeatable; env/ini: comma-separated)",
           kind="multi", metavar="GLOB"),
    Option("clause", "--clause", "run only cases of clauses matching ID or GLOB (repeatable; env/ini: "
           "comma-separated)", kind="multi", metavar="ID_OR_GLOB"),
    # Not plain --strict: pytest itself owns that option (all of its strictness settings).
    Option("skip_preflight", "--skip-preflight", "do not check, before the first case, that the brokers named by "
           "--broker-url or --target-file answer and open a session (the run then judges whatever answers)",
           kind="flag"),
    Option("full_jit", "--full-jit", "target artemis: start every node's JVM with its default compilers (by "
           "default a case that measures no times gets nodes started C1-only, -XX:TieredStopAtLevel=1, which "
           "halves their CPU; a case marked cck_alone always gets the default compilers)", kind="flag"),
    Option("strict", "--strict-should", "count a missed SHOULD (or MAY) as FAIL (default: PASS_LENIENT)",
           kind="flag"),
    Option("evidence_dir", "--evidence-dir", "write evidence (JSON Lines, allure results) under DIR/<run-id>/",
           metavar="DIR"),
    Option("deviations", "--deviations", "a known-deviations TOML file to use instead of the kit's file for the "
           "target", metavar="FILE"),
    Option("clause_table", "--clause-table", "a directory of clause TOML files to use instead of the kit's",
           metavar="DIR"),
)

_BY_KEY = {o.key: o for o in OPTIONS}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def add_options(parser: pytest.Parser) -> None:
    """Register the option group and the ini keys (every value is checked later, by resolve_settings)."""
    group = parser.getgroup(GROUP, "core conformance (env CCK_<OPTION>, ini cck_<option>; CLI > env > ini)")
    for option in OPTIONS:
        help_text = f"{option.help} [env {option.env}, ini {option.ini}]"
        if option.kind == "flag":
            group.addoption(option.flag, action="store_true", default=None, dest=option.dest, help=help_text)
        elif option.kind == "multi":
            group.addoption(option.flag, action="append", default=None, dest=option.dest, metavar=option.metavar,
                            help=help_text)
        else:
            group.addoption(option.flag, action="store", default=None, dest=option.dest, metavar=option.metavar,
                            help=help_text)
        parser.addini(option.ini, f"core conformance: {option.help}", type="string", default="")


def conformance_option_given(namespace: Any) -> bool:
    """Whether the command line (an argparse namespace) set any of the plugin's options."""
    return any(getattr(namespace, o.dest, None) not in (None, []) for o in OPTIONS)


class _Raw:
    """One option's raw value and where it came from."""

    def __init__(self, option: Option, value: Any, source: str) -> None:
        self.option = option
        self.value = value
        self.source = source

    def error(self, problem: str, shown: Any = None) -> pytest.UsageError:
        shown = self.value if shown is None else shown
        return pytest.UsageError(f"{self.option.flag}: {shown!r} {problem} (from {self.source})")


def _split(text: str) -> list[str]:
    return [part for part in re.split(r"[,\s]+", text) if part]


def _pick(option: Option, cli: Mapping[str, Any], env: Mapping[str, str], ini: Mapping[str, Any]) -> _Raw | None:
    value = cli.get(option.key)
    if value not in (None, [], ()):
        return _Raw(option, list(value) if option.kind == "multi" else value, option.flag)
    text = env.get(option.env)
    if text is not None and text.strip():
        return _Raw(option, _split(text) if option.kind == "multi" else text.strip(), f"env {option.env}")
    text = ini.get(option.key)
    if isinstance(text, str) and text.strip():
        return _Raw(option, _split(text) if option.kind == "multi" else text.strip(), f"ini {option.ini}")
    return None


def _positive(raw: _Raw) -> float:
    try:
        value = float(raw.value)
    except (TypeError, ValueError):
        raise raw.error("is not a positive number") from None
    if not math.isfinite(value) or value <= 0:
        raise raw.error("is not a positive number")
    return value


def _tolerance(raw: _Raw) -> Tolerance:
    parts = [p.strip() for p in str(raw.value).split(",")]
    problem = "is not ABS_MS,REL (two numbers >= 0, e.g. 100,0.1 or 100,10%)"
    if len(parts) != 2:
        raise raw.error(problem)
    try:
        absolute = float(parts[0].removesuffix("ms"))
        relative = float(parts[1][:-1]) / 100 if parts[1].endswith("%") else float(parts[1])
        return Tolerance(absolute_ms=absolute, relative=relative)
    except ValueError:
        raise raw.error(problem) from None


def _flag(raw: _Raw) -> bool:
    if isinstance(raw.value, bool):
        return raw.value
    text = str(raw.value).lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise raw.error("is not a yes/no value (1/0, true/false, yes/no, on/off)")


def _globs(raw: _Raw) -> tuple[str, ...]:
    globs = tuple(str(v).strip() for v in raw.value)
    if any(not g for g in globs):
        raise raw.error("holds an empty pattern")
    return globs


def _path(raw: _Raw, ini_dir: Path | None) -> Path:
    path = Path(str(raw.value)).expanduser()
    if raw.source.startswith("ini ") and ini_dir is not None and not path.is_absolute():
        path = ini_dir / path  # an ini file's paths are relative to the ini file, as pytest's own are
    return path


def _target(raw: _Raw) -> str:
    if raw.value not in TARGET_KINDS:
        raise raw.error(f"is not a target: use one of {', '.join(TARGET_KINDS)}")
    return str(raw.value)


def _client(raw: _Raw, default_version: str, pins: tuple[str, ...]) -> ClientUnderTest:
    try:
        return parse_client(str(raw.value), default_version, pins)
    except ValueError as exc:
        raise raw.error(str(exc)) from None


def _target_file(raw: _Raw, ini_dir: Path | None) -> TargetFile:
    try:
        return load_target_file(_path(raw, ini_dir))
    except TargetFileError as exc:
        raise pytest.UsageError(f"{raw.option.flag}: {exc} (from {raw.source})") from None


def _url(raw: _Raw) -> str:
    try:
        return check_url(str(raw.value))
    except ValueError as exc:
        raise raw.error(f"is not a broker URL: {exc}") from None


def resolve_settings(cli: Mapping[str, Any], env: Mapping[str, str], ini: Mapping[str, Any],
                     *, ini_dir: Path | None = None,
                     pinned: Callable[[], tuple[str, tuple[str, ...]]] = pinned_artemis_versions) -> Settings:
    """The run's settings from the command line (``cli``: option key -> parsed value, None when absent), the
    environment and the ini file (key -> text, "" when absent): CLI > env > ini > default.

    Raises ``pytest.UsageError`` naming the option, the value and its source for any bad value."""
    raws = {o.key: _pick(o, cli, env, ini) for o in OPTIONS}
    sources = {key: raw.source for key, raw in raws.items() if raw is not None}
    values: dict[str, Any] = {}

    def get(key: str, parse: Callable[[_Raw], Any], default: Any = None) -> Any:
        raw = raws[key]
        return default if raw is None else parse(raw)

    target: str | None = get("target", _target)
    default_version, pins = pinned()
    client: ClientUnderTest | None = get("client", lambda raw: _client(raw, default_version, pins))
    url: str | None = get("broker_url", _url)
    if url is not None and target is None:
        target = "url"
        sources["target"] = f"implied by {sources['broker_url']}"
    if client is not None and target is None:
        target = "reference"  # a client is judged against the kit's reference broker unless told otherwise
        sources["target"] = f"implied by {sources['client']}"
    target_file: TargetFile | None = get("target_file", lambda raw: _target_file(raw, ini_dir))
    if target_file is not None and target is None:
        target = "command"
        sources["target"] = f"implied by {sources['target_file']}"
    file_raw = raws["target_file"]
    if file_raw is not None and target != "command":
        raise file_raw.error(f"is only for target command, but the target is {target!r} (from {sources['target']})")
    if target == "command" and target_file is None:
        raise pytest.UsageError(f"--target: 'command' needs a target file: --target-file, env CCK_TARGET_FILE or ini "
                                f"cck_target_file (target from {sources['target']})")
    url_raw = raws["broker_url"]
    if url_raw is not None and target != "url":
        raise url_raw.error(f"is only for target url, but the target is {target!r} (from {sources['target']})",
                            shown=url)
    if target == "url" and url is None:
        raise pytest.UsageError(f"--target: 'url' needs the broker's URL: --broker-url, env CCK_BROKER_URL or "
                                f"ini cck_broker_url (target from {sources['target']})")
    version: str | None = get("artemis_version", lambda raw: str(raw.value))
    if target == "artemis":
        version_raw = raws["artemis_version"]
        if version_raw is None:
            version = default_version
            sources["artemis_version"] = "default"
        elif version not in pins:
            raise version_raw.error(f"is not a pinned Artemis version: use one of {', '.join(pins)} "
                                    "(pins: fixtures/artemis/versions.json)")
    elif target == "reference":
        version = None  # the reference broker is the kit's own version; nothing to choose
    elif target == "command":
        assert target_file is not None
        if raws["artemis_version"] is not None:
            raise raws["artemis_version"].error("is not for target command: its target file says its version")
        version = target_file.version
    scale: float = get("timing_scale", _positive, 1.0)
    tolerance: Tolerance = get("timing_tolerance", _tolerance, DEFAULT_TOLERANCE)
    values.update(
        target=target, artemis_version=version, broker_url=url, client=client, target_file=target_file,
        user=get("broker_user", lambda raw: str(raw.value), target_file.user if target_file else None),
        password=get("broker_password", lambda raw: str(raw.value), target_file.password if target_file else None),
        timing_scale=scale, tolerance=tolerance.scaled(scale),
        case_globs=get("case", _globs, ()), clauses=get("clause", _globs, ()),
        strict=get("strict", _flag, False), preflight=not get("skip_preflight", _flag, False),
        quick_start=not get("full_jit", _flag, False),
        evidence_dir=get("evidence_dir", lambda raw: _path(raw, ini_dir)),
        deviations_file=get("deviations", lambda raw: _path(raw, ini_dir)),
        clause_table=get("clause_table", lambda raw: _path(raw, ini_dir)),
    )
    for path_key, must_be in (("deviations", "file"), ("clause_table", "directory")):
        raw = raws[path_key]
        field = "deviations_file" if path_key == "deviations" else "clause_table"
        path = values[field]
        if raw is not None and not (path.is_file() if must_be == "file" else path.is_dir()):
            raise raw.error(f"is not an existing {must_be}", shown=str(path))
    for key in _BY_KEY:
        sources.setdefault(key, "default")
    return Settings(**values, sources=sources)


def settings_from_config(config: pytest.Config, env: Mapping[str, str]) -> Settings:
    """:func:`resolve_settings` over a pytest config's options and ini values."""
    cli = {o.key: getattr(config.option, o.dest, None) for o in OPTIONS}
    ini = {o.key: config.getini(o.ini) for o in OPTIONS}
    ini_dir = config.inipath.parent if config.inipath is not None else None
    return resolve_settings(cli, env, ini, ini_dir=ini_dir)
