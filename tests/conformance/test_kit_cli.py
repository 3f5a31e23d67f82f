"""``python -m cck.conformance``: the pytest arguments ``run`` builds, and the clause listing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cck.conformance.__main__ import _parser, _run_args, main
from cck.conformance.plugin import SUITE_DIR


def _args(*argv: str) -> list[str]:
    options, extra = _parser().parse_known_args(["run", *argv])
    return _run_args(options, extra)


def test_run_passes_options_to_the_plugin_and_runs_the_suite() -> None:
    args = _args("--broker-url", "tcp://h:1", "--case", "a.*", "--case", "b.c.1", "--strict", "--", "-x")
    assert args == ["--broker-url", "tcp://h:1", "--case", "a.*", "--case", "b.c.1", "--strict-should",
                    str(SUITE_DIR), "-x"]


def test_run_passes_a_target_file_and_the_preflight_switch() -> None:
    args = _args("--target-file", "mine.toml", "--skip-preflight")
    assert args == ["--target-file", "mine.toml", "--skip-preflight", str(SUITE_DIR)]


def test_run_with_a_path_runs_that_path(tmp_path: Path) -> None:
    args = _args("--target", "reference", "--", str(tmp_path))
    assert args == ["--target", "reference", str(tmp_path)]


def test_clauses_lists_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "demo.toml").write_text('[[clause]]\nid = "demo.a"\nlevel = "SHOULD"\nsource = "spec 001"\n'
                                        'text = "quoted"\n')
    assert main(["clauses", "--table", str(tmp_path), "-v"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == ["demo.a  [SHOULD]  spec 001", "    quoted"]
    assert "1 clauses" in out.err
    (tmp_path / "bad.toml").write_text('[[clause]]\nid = "x"\n')
    assert main(["clauses", "--table", str(tmp_path)]) == 1
    assert "bad.toml: clause #1 (x): field 'level' is required" in capsys.readouterr().err


def test_repeat_reruns_the_same_command_and_stops_at_the_first_run_that_does_not_conform(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands: list[list[str]] = []
    statuses = iter([0, 0, 1, 0])

    def fake_run(argv: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        commands.append(argv)
        return subprocess.CompletedProcess(argv, next(statuses))

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert main(["run", "--target", "reference", "--repeat", "5", "--case", "discovery.period.*"]) == 1
    assert len(commands) == 3
    assert all(c[1:] == ["-m", "cck.conformance", "run", "--target", "reference", "--case", "discovery.period.*"]
               for c in commands)
    assert "run 3 of 5 did not conform (2 in a row conformed)" in capsys.readouterr().err


def test_repeat_below_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--repeat", "0"]) == 4
    assert "--repeat 0" in capsys.readouterr().err


def test_jobs_runs_the_cases_on_that_many_processes() -> None:
    assert _args("--target", "reference", "--jobs", "3") == ["--target", "reference", "-n", "3", "--dist", "worksteal",
                                                            str(SUITE_DIR)]
    assert _args("--target", "reference", "--jobs", "1") == ["--target", "reference", str(SUITE_DIR)]


def test_jobs_below_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--jobs", "0"]) == 4
    assert "--jobs 0" in capsys.readouterr().err
