"""The kit as users install it: build the sdist and the wheel (the wheel from the sdist, as ``python -m build``
does), install the wheel into a clean virtualenv in a temporary directory outside the checkout, and run the
``cck`` command from there (cwd elsewhere, no PYTHONPATH): a small selection of conformance cases against the
reference broker must conform, so everything a run reads (the broker.xml template, the Artemis pins, the
deviations and clause tables, the report templates) comes from the installed package, not from the checkout.

Slow (a build, a virtualenv, the dependencies from the package index or pip's cache, two brokers): it runs in the
``wheel`` tox env (``make test``), which sets ``CCK_WHEEL_TEST=1``; elsewhere it is skipped, saying so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("codec", "reference", "conformance", "reports")

pytestmark = pytest.mark.skipif(os.environ.get("CCK_WHEEL_TEST") != "1",
                                reason="builds and installs the wheel: the `wheel` tox env runs it (CCK_WHEEL_TEST=1)")


def _env() -> dict[str, str]:
    """A user's environment: nothing of the checkout or of the test run on the import path."""
    dropped = ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
    return {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith(("CCK_", "TOX_"))}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # sdist, then the wheel built from the unpacked sdist: the symlinks of cck/ must become files in both
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], check=True, capture_output=True,
                   timeout=600)
    (found,) = out.glob("*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin directory of a fresh virtualenv (outside the checkout) with the wheel installed."""
    home = tmp_path_factory.mktemp("user")
    assert not home.resolve().is_relative_to(ROOT)
    venv.EnvBuilder(with_pip=True, clear=True).create(home / "venv")
    bin_dir = home / "venv" / "bin"
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
                   check=True, capture_output=True, timeout=900, cwd=home, env=_env())
    return bin_dir


def test_the_wheel_holds_one_namespace_and_the_data_a_run_reads(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        links = [i.filename for i in archive.infolist() if (i.external_attr >> 16) & 0o170000 == 0o120000]
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"cck"}
    assert not links
    for data in ("cck/fixtures/brokers/broker.xml.j2", "cck/fixtures/artemis/versions.json",
                 "cck/conformance/deviations/reference.toml", "cck/conformance/clauses/reattach.toml",
                 "cck/reports/templates/base.html.j2", "cck/codec/py.typed", "cck/_cli.py",
                 "cck/conformance/suite/test_reattach.py"):
        assert data in names, f"{data} is not in {wheel.name}"
    assert any(n.startswith("cck/fixtures/java/") and n.endswith(".java") for n in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(entry_points).decode()
    assert "cck = cck._cli:main" in text
    assert "cck = cck.conformance.plugin" in text


def _run(installed: Path, *argv: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(installed / argv[0]), *argv[1:]], capture_output=True, text=True, cwd=cwd,
                          env=_env(), timeout=timeout, check=False)


def test_the_installed_kit_imports_from_the_virtualenv_only(installed: Path, tmp_path: Path) -> None:
    program = ("import importlib.util, sys, cck.conformance.plugin, cck.reference.__main__; "
               "print(cck.__file__); print([p for p in " + repr(PACKAGES) + " if importlib.util.find_spec(p)]); "
               "print(sorted({m.split('.')[0] for m in sys.modules} & set(" + repr(PACKAGES) + ")))")
    done = _run(installed, "python", "-c", program, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    where, bare, loaded = done.stdout.splitlines()
    assert Path(where).is_relative_to(installed.parent)
    assert bare == "[]"
    assert loaded == "[]"


def test_cck_lists_its_commands(installed: Path, tmp_path: Path) -> None:
    done = _run(installed, "cck", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for command in ("run", "cases", "clauses", "timing-check", "explore", "report", "synth", "install-allure",
                    "broker", "artemis"):
        assert f"    {command}" in done.stdout
    explore = _run(installed, "cck", "explore", "--help", cwd=tmp_path)  # its dependencies come with the wheel
    assert explore.returncode == 0, explore.stderr
    assert "--budget" in explore.stdout
    clauses = _run(installed, "cck", "clauses", cwd=tmp_path)
    assert clauses.returncode == 0, clauses.stderr
    assert "reattach." in clauses.stdout
    module = _run(installed, "python", "-m", "cck.conformance.artemis", "--help", cwd=tmp_path)
    assert module.returncode == 0, module.stderr


def test_what_needs_a_checkout_says_so(installed: Path, tmp_path: Path) -> None:
    """The checked-in vectors are the checkout's: regenerating them in place from a wheel is refused by name."""
    done = _run(installed, "cck", "artemis", "vectors", cwd=tmp_path)
    assert done.returncode == 2
    assert "fixtures/vectors of a source checkout" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_selection_conforms_against_the_reference_broker(installed: Path, tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    done = _run(installed, "cck", "run", "--target", "reference", "--case", "reattach.cut.1",
                "--case", "window.counts.*", "--evidence-dir", str(evidence), "--", "-q", "-p", "no:cacheprovider",
                cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    (cases,) = evidence.glob("*/cases.jsonl")
    assert cases.read_text().count('"case_id"') == 4
    # the same selection through python -m and the pytest plugin's entry point
    again = _run(installed, "python", "-m", "cck.conformance", "run", "--target", "reference", "--case",
                 "reattach.cut.1", "--", "-q", "-p", "no:cacheprovider", cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-2000:]
