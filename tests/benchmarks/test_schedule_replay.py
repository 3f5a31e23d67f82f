"""``python -m benchmarks.schedule_replay``: a run's case durations replayed under xdist's ``load`` and the kit's
scheduler."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.schedule_replay import SUITE, main


def _ids(*selection: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *selection,
                          str(SUITE)], capture_output=True, text=True, check=True, cwd=SUITE.parent.parent)
    return [line.rsplit("[", 1)[-1].rstrip("]") for line in out.stdout.splitlines() if "::" in line and "[" in line]


def test_a_run_is_replayed_under_both_schedulers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    alone = set(_ids("-m", "cck_alone"))
    cases = [case for case in _ids() if case not in alone][:60] + sorted(alone)[:4]
    rows = [{"kind": "case", "case_id": case, "duration_s": 10.0 if case in alone else 1.0} for case in cases]
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{len(cases)} cases, 100 s summed, 4 alone (40 s)" in out
    assert "ordinary cases shared evenly, then the alone ones: 60 s" in out
    kit = float(out.split("alone held back): ")[1].split(" s")[0])
    assert 60 <= kit <= 62  # the alone cases one after another, after the others, within one case


def test_a_directory_without_cases_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path)])
    assert exit_info.value.code == 2
    assert f"{tmp_path / 'cases.jsonl'}: no such file" in capsys.readouterr().err
