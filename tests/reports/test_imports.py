"""What importing ``reports`` loads of the kit: the evidence schema, the clause table and the sequence diagram,
nothing else of ``conformance`` (design.md §2; ``tests/test_boundaries.py`` checks the same from the source)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from cck import reports

#: The subpackages of ``conformance`` that ``reports`` may load (standard library only).
ALLOWED = ("cck.conformance.evidence", "cck.conformance.clauses", "cck.conformance.sequence")

PROGRAM = """
import importlib, json, pkgutil, sys
from cck import reports
for info in pkgutil.iter_modules(reports.__path__, "cck.reports."):
    importlib.import_module(info.name)
print(json.dumps(sorted(sys.modules)))
"""


def _loaded() -> list[str]:
    root = Path(reports.__file__).absolute().parents[2]  # the directory holding cck
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True, cwd=root,
                          timeout=120)
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    return modules


def test_importing_every_reports_module_loads_only_the_schema_clauses_and_diagram_of_the_kit() -> None:
    loaded = _loaded()
    expected = {"cck.reports._pipeline", "cck.reports._coverage", "cck.reports._story",
                "cck.conformance.evidence.schema", "cck.conformance.clauses", "cck.conformance.sequence"}
    assert expected <= set(loaded)
    kit = [m for m in loaded if m.split(".")[:2] in (["cck", "conformance"], ["cck", "reference"], ["cck", "codec"])]
    beyond = [m for m in kit if m != "cck.conformance" and not any(m == a or m.startswith(a + ".") for a in ALLOWED)]
    assert not beyond, f"importing reports loads {beyond}"
