"""The security group against a broker the kit cannot configure (a bare URL): every case is UNSUPPORTED and says
security is not configured, none is FAIL (issue 20's acceptance).  The whole group runs through the CLI, as a user
runs it; no broker needs to answer, since each case asks for a configured broker before it connects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_every_security_case_is_unsupported_on_a_url_target(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cck.conformance", "run", "--broker-url", "tcp://127.0.0.1:9", "--skip-preflight",
         "--case", "security.*", "--evidence-dir", str(tmp_path), "--", "-q", "-p", "no:cacheprovider"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [cases_file] = tmp_path.glob("*/cases.jsonl")
    rows = [json.loads(line) for line in cases_file.read_text().splitlines()]
    cases = [row for row in rows if row.get("kind") == "case"]
    assert len(cases) >= 40, f"only {len(cases)} security cases ran"
    wrong = [(row["case_id"], row["verdict"], row["reason"]) for row in cases
             if row["verdict"] != "UNSUPPORTED" or not str(row["reason"]).startswith("security not configured")]
    assert not wrong, wrong[:5]
