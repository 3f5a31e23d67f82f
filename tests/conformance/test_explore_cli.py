"""``cck explore``'s arguments: help, and bad input refused with a clear message and exit status 2 (before any
broker is started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cck.conformance.__main__ import main
from cck.conformance.explore import parse_budget


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as caught:
        main(["explore", *argv], prog="cck")
    assert caught.value.code == 2
    return capsys.readouterr().err


def test_help_says_what_it_does(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["explore", "--help"], prog="cck")
    assert caught.value.code == 0
    text = capsys.readouterr().out
    assert "usage: cck explore" in text
    assert "--replay FILE" in text
    assert "Exit status" in text


@pytest.mark.parametrize(("argv", "message"), [
    ([], "the following arguments are required: --target"),
    (["--target", "url"], "invalid choice: 'url'"),
    (["--target", "reference", "--budget", "soon"], "'soon' is not a duration"),
    (["--target", "reference", "--budget", "0s"], "more than 0 s"),
    (["--target", "reference", "--max-examples", "0"], "must be at least 1"),
    (["--target", "reference", "--seed", "-1"], "must be 0 or more"),
    (["--target", "reference", "--artemis-version", "2.44.0"], "--artemis-version is for --target artemis"),
    (["--target", "reference", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["--target", "reference", "--ignore-clause", "Window zero"], "is not a clause"),
    (["--target", "reference", "--ignore-clause", "window.zero", "--replay", "x.json"],
     "--ignore-clause is for an exploration"),
])
def test_bad_arguments_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert message in _refused(argv, capsys)


def test_a_replay_file_that_is_not_an_example_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.json"
    assert "cannot read" in _refused(["--target", "reference", "--replay", str(missing)], capsys)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert "is not JSON" in _refused(["--target", "reference", "--replay", str(broken)], capsys)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"example": {"workload": {}, "schedule": {"faults": []}}}')
    assert "workload 'operations' must be a list" in _refused(["--target", "reference", "--replay", str(wrong)], capsys)


def test_budgets() -> None:
    assert [parse_budget(t) for t in ("90s", "10m", "1h", "2m30s", "45", "1.5s")] == [90, 600, 3600, 150, 45, 1.5]
