"""The command line: errors that need no Spark in process, one real run as a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from cck.reports.__main__ import main

from .conftest import EVIDENCE

REPO = Path(__file__).resolve().parents[2]


def test_help_names_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["report", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for option in ("--evidence DIR", "--out DIR", "--master URL", "--conf KEY=VALUE", "spark://host:7077"):
        assert option in out


def test_a_missing_evidence_directory_is_exit_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-evidence"
    assert main(["report", "--evidence", str(missing), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"error: {missing}: evidence directory does not exist\n"
    assert not (tmp_path / "out").exists()


def test_bad_conf_and_a_foreign_out_directory_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--evidence", str(EVIDENCE), "--out", str(tmp_path / "o"), "--conf", "nokey"]) == 2
    assert "--conf 'nokey': expected KEY=VALUE" in capsys.readouterr().err
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("x", encoding="utf-8")
    assert main(["report", "--evidence", str(EVIDENCE), "--out", str(tmp_path / "mine")]) == 2
    assert "non-empty directory that holds no earlier report" in capsys.readouterr().err


def test_report_command_builds_the_site_and_quarantines_a_bad_line(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    shutil.copytree(EVIDENCE, evidence)
    run = sorted(evidence.iterdir())[0]
    with (run / "notes.jsonl").open("a", encoding="utf-8") as notes:
        notes.write('{"kind": "note", "schema_ver')  # a writer killed mid-line
    out = tmp_path / "site"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "cck.reports", "report", "--evidence", str(evidence),
                           "--out", str(out)], capture_output=True, text=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out / "index.html")
    for step in ("done  ingest", "done  conformance matrix", "done  delivery audit", "done  site"):
        assert step in done.stderr
    assert "quarantined 1" in done.stderr
    [bad] = [json.loads(line) for line in (out / "quarantine.jsonl").read_text(encoding="utf-8").splitlines()]
    assert bad["file"] == f"{run.name}/notes.jsonl"
    assert bad["reason"].startswith("not JSON (truncated?)")
    assert '<a class="bad" href="quarantine.jsonl">1 rows</a>' in (out / "index.html").read_text(encoding="utf-8")
