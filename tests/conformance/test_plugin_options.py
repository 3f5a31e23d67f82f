"""The plugin's settings: CLI > env > ini > default, and a message naming option, value and source for each
bad value.  ``resolve_settings`` is pure, so no pytest run is needed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from cck.conformance.oracles import DEFAULT_TOLERANCE, Tolerance
from cck.conformance.plugin import OPTIONS, resolve_settings
from cck.conformance.plugin._options import conformance_option_given
from cck.conformance.targets import TARGET_KINDS


def _pins() -> tuple[str, tuple[str, ...]]:
    return "2.44.0", ("2.28.0", "2.44.0")


def resolve(cli: dict[str, Any] | None = None, env: dict[str, str] | None = None, ini: dict[str, Any] | None = None,
            **kwargs: Any) -> Any:
    return resolve_settings(cli or {}, env or {}, ini or {}, pinned=_pins, **kwargs)


def test_nothing_given_is_inert_with_defaults() -> None:
    settings = resolve()
    assert not settings.active
    assert settings.timing_scale == 1.0
    assert settings.tolerance == DEFAULT_TOLERANCE
    assert settings.strict is False
    assert settings.quick_start is True
    assert settings.case_globs == ()
    assert set(settings.sources.values()) == {"default"}
    assert set(settings.sources) == {o.key for o in OPTIONS}


def test_cli_beats_env_beats_ini() -> None:
    ini = {"target": "artemis", "timing_scale": "3"}
    env = {"CCK_TARGET": "reference", "CCK_TIMING_SCALE": "2"}
    settings = resolve({"target": "url", "broker_url": "tcp://h:1"}, env, ini)
    assert settings.target == "url"
    assert settings.sources["target"] == "--target"
    assert settings.timing_scale == 2.0
    assert settings.sources["timing_scale"] == "env CCK_TIMING_SCALE"
    assert resolve(env={}, ini=ini).target == "artemis"
    assert resolve(env={}, ini=ini).sources["target"] == "ini cck_target"
    assert resolve(env={"CCK_TARGET": "reference"}, ini=ini).target == "reference"


def test_empty_env_value_counts_as_absent() -> None:
    settings = resolve(env={"CCK_TARGET": " "}, ini={"target": "reference"})
    assert settings.target == "reference"


def test_broker_url_implies_target_url() -> None:
    settings = resolve(env={"CCK_BROKER_URL": "tcp://broker:61616"})
    assert settings.target == "url"
    assert settings.broker_url == "tcp://broker:61616"
    assert settings.sources["target"] == "implied by env CCK_BROKER_URL"


def test_artemis_version_defaults_to_the_pinned_default() -> None:
    settings = resolve({"target": "artemis"})
    assert settings.artemis_version == "2.44.0"
    assert settings.sources["artemis_version"] == "default"
    assert resolve({"target": "artemis", "artemis_version": "2.28.0"}).artemis_version == "2.28.0"


def test_url_target_keeps_a_declared_version_and_reference_ignores_it() -> None:
    assert resolve({"broker_url": "tcp://h:1", "artemis_version": "9.9"}).artemis_version == "9.9"
    assert resolve({"target": "reference"}, {"CCK_ARTEMIS_VERSION": "2.44.0"}).artemis_version is None


def test_tolerance_is_parsed_and_widened_by_the_timing_scale() -> None:
    settings = resolve(cli={"timing_tolerance": "50,10%", "timing_scale": "2"})
    assert settings.tolerance == Tolerance(absolute_ms=50.0, relative=0.1, scale=2.0)
    assert resolve(ini={"timing_tolerance": "20ms, 0.05"}).tolerance == Tolerance(20.0, 0.05)


def test_multi_value_options_from_each_source() -> None:
    assert resolve(cli={"case": ["a.*", "b.c.1"]}).case_globs == ("a.*", "b.c.1")
    assert resolve(env={"CCK_CASE": "a.*, b.c.1"}).case_globs == ("a.*", "b.c.1")
    assert resolve(ini={"clause": "x.y\nz.*"}).clauses == ("x.y", "z.*")


@pytest.mark.parametrize(("text", "expected"), [("1", True), ("yes", True), ("off", False), ("FALSE", False)])
def test_strict_from_env(text: str, expected: bool) -> None:
    assert resolve(env={"CCK_STRICT": text}).strict is expected


def test_full_jit_turns_quick_starts_off() -> None:
    assert resolve(cli={"full_jit": True}).quick_start is False
    settings = resolve(env={"CCK_FULL_JIT": "yes"})
    assert settings.quick_start is False
    assert settings.sources["full_jit"] == "env CCK_FULL_JIT"


def test_strict_from_the_command_line() -> None:
    settings = resolve(cli={"strict": True}, env={"CCK_STRICT": "0"})
    assert settings.strict is True
    assert settings.sources["strict"] == "--strict-should"


def test_paths_in_the_ini_file_are_relative_to_it(tmp_path: Path) -> None:
    settings = resolve(ini={"evidence_dir": "evidence"}, ini_dir=tmp_path)
    assert settings.evidence_dir == tmp_path / "evidence"
    assert resolve(env={"CCK_EVIDENCE_DIR": "evidence"}, ini_dir=tmp_path).evidence_dir == Path("evidence")


@pytest.mark.parametrize(
    ("cli", "env", "ini", "message"),
    [
        ({}, {"CCK_TIMING_SCALE": "abc"}, {},
         "--timing-scale: 'abc' is not a positive number (from env CCK_TIMING_SCALE)"),
        ({"timing_scale": "0"}, {}, {}, "--timing-scale: '0' is not a positive number (from --timing-scale)"),
        ({}, {}, {"timing_scale": "-1"}, "--timing-scale: '-1' is not a positive number (from ini cck_timing_scale)"),
        ({"timing_tolerance": "100"}, {}, {}, "--timing-tolerance: '100' is not ABS_MS,REL"),
        ({}, {"CCK_TIMING_TOLERANCE": "a,b"}, {}, "(from env CCK_TIMING_TOLERANCE)"),
        ({"timing_tolerance": "-5,0.1"}, {}, {}, "--timing-tolerance: '-5,0.1' is not ABS_MS,REL"),
        ({"target": "rabbit"}, {}, {}, f"--target: 'rabbit' is not a target: use one of {', '.join(TARGET_KINDS)} "
                                       "(from --target)"),
        ({}, {"CCK_BROKER_URL": "http://h:1"}, {}, "--broker-url: 'http://h:1' is not a broker URL"),
        ({}, {}, {"broker_url": "tcp://h"}, "(from ini cck_broker_url)"),
        ({"target": "reference"}, {"CCK_BROKER_URL": "tcp://h:1"}, {},
         "--broker-url: 'tcp://h:1' is only for target url, but the target is 'reference' (from --target)"),
        ({"target": "url"}, {}, {}, "--target: 'url' needs the broker's URL"),
        ({"target": "artemis", "artemis_version": "1.0"}, {}, {},
         "--artemis-version: '1.0' is not a pinned Artemis version: use one of 2.28.0, 2.44.0"),
        ({}, {"CCK_STRICT": "maybe"}, {}, "--strict-should: 'maybe' is not a yes/no value"),
        ({}, {}, {"deviations": "no-such.toml"}, "--deviations:"),
        ({"clause_table": "no-such-dir"}, {}, {}, "--clause-table: 'no-such-dir' is not an existing directory"),
    ],
)
def test_bad_values_name_option_value_and_source(cli: dict[str, Any], env: dict[str, str], ini: dict[str, Any],
                                                 message: str) -> None:
    with pytest.raises(pytest.UsageError) as raised:
        resolve(cli, env, ini)
    assert message in str(raised.value)


def test_conformance_option_given_reads_a_namespace() -> None:
    class Namespace:
        cck_case: list[str] | None = None
        cck_target: str | None = None

    namespace = Namespace()
    assert not conformance_option_given(namespace)
    namespace.cck_target = "reference"
    assert conformance_option_given(namespace)


def test_client_names_the_client_under_test_and_implies_the_reference_broker() -> None:
    settings = resolve({"client": "artemis@2.28.0"})
    assert settings.client is not None
    assert (settings.client.kind, settings.client.version, settings.client.name) == ("artemis", "2.28.0",
                                                                                     "artemis@2.28.0")
    assert settings.subject == "client"
    assert settings.target == "reference"
    assert settings.sources["target"] == "implied by --client"
    assert resolve(env={"CCK_CLIENT": "artemis"}).client.name == "artemis@2.44.0"  # type: ignore[union-attr]
    assert resolve({"client": "kit", "broker_url": "tcp://h:1"}).target == "url"
    assert resolve({"target": "artemis"}).subject == "broker"
    assert resolve({"client": "kit"}).public()["client"] == "kit"


@pytest.mark.parametrize(("value", "problem"), [
    ("artemis@9.9.9", "Artemis 9.9.9 is not pinned: use one of 2.28.0, 2.44.0"),
    ("kit@1.0", "is not a client: use kit, artemis or artemis@<pinned version>"),
    ("qpid", "is not a client"),
])
def test_a_bad_client_is_a_usage_error(value: str, problem: str) -> None:
    with pytest.raises(pytest.UsageError, match=f"--client: '{value}' {problem}"):
        resolve({"client": value})


def test_the_default_tolerance_is_from_the_measured_error() -> None:
    # the kit's and the stock client's timing error is a p99 of about 14 ms: the default may be at most
    # ±(25 ms + 5 %), and no expected interval of 50 ms or more may have a band that reaches 0 ms
    assert DEFAULT_TOLERANCE.absolute_ms <= 25
    assert DEFAULT_TOLERANCE.relative <= 0.05
    assert all(DEFAULT_TOLERANCE.allowed_ms(expected) < expected for expected in range(50, 10_001))
    assert DEFAULT_TOLERANCE.blind_below_ms() < 50
    assert resolve({"timing_scale": "2"}).tolerance.blind_below_ms() == pytest.approx(50 / 0.9)


def test_a_target_file_implies_target_command_and_says_its_version(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('version = "2.44.0"\nbroker = "artemis"\nuser = "u"\n[[nodes]]\nurl = "tcp://h:1"\n')
    settings = resolve({"target_file": str(path)})
    assert (settings.target, settings.artemis_version, settings.user) == ("command", "2.44.0", "u")
    assert settings.sources["target"] == "implied by --target-file"
    assert resolve({"target_file": str(path), "broker_user": "me"}).user == "me"


@pytest.mark.parametrize(("cli", "message"), [
    ({"target": "command"}, "--target: 'command' needs a target file"),
    ({"target": "reference", "target_file": "{path}"}, "is only for target command, but the target is 'reference'"),
    ({"target_file": "{missing}"}, "--target-file: target file {missing}: cannot be read"),
    ({"target_file": "{path}", "artemis_version": "2.44.0"}, "is not for target command: its target file says"),
])
def test_target_file_mistakes_are_usage_errors(tmp_path: Path, cli: dict[str, str], message: str) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('[[nodes]]\nurl = "tcp://h:1"\n')
    values = {"path": str(path), "missing": str(tmp_path / "nope.toml")}
    with pytest.raises(pytest.UsageError, match=re.escape(message.format(**values))):
        resolve({key: value.format(**values) for key, value in cli.items()})
