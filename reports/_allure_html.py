"""The allure HTML report: the pinned Allure Report 3 from npm (Node.js only, no Java), installed once
into a cache and run with a deadline.

``reports/allure/package.json`` and its ``package-lock.json`` pin the version; :func:`install_allure`
runs ``npm ci`` with them in ``$CCK_ALLURE_HOME`` (default ``~/.cache/core-conformance-kit/allure/<version>``),
so every machine builds with the same tree.  :func:`build_allure_report` writes one self-contained
``index.html`` (allure's ``singleFile`` option: a multi-file allure report loads its data with ``fetch``,
which browsers refuse for ``file://`` pages) and removes the analytics tag allure 3.18 always puts in, so
a report opened from disk asks nothing of the network.

No pyspark here: ``cck install-allure`` works without it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ._errors import ReportError

__all__ = ["ALLURE_VERSION", "PACKAGE_DIR", "allure_home", "allure_bin", "install_allure",
           "build_allure_report", "strip_analytics"]

PACKAGE_DIR = Path(__file__).resolve().parent / "allure"
ALLURE_VERSION: str = json.loads((PACKAGE_DIR / "package.json").read_text(encoding="utf-8"))["dependencies"]["allure"]

#: Seconds ``npm ci`` may take (about 15 s here) and seconds one report build may take (2 s for 300 results).
INSTALL_TIMEOUT = 300.0
BUILD_TIMEOUT = 300.0

# The tag allure's page template adds unconditionally (Google Analytics, 3.18.0): the loader and its config.
_ANALYTICS = re.compile(
    r"<script async src=\"https://www\.googletagmanager\.com/[^\"]*\"></script>\s*<script>[^<]*?gtag\([^<]*?</script>",
    re.DOTALL)


def allure_home() -> Path:
    """Where the pinned allure is installed: ``$CCK_ALLURE_HOME`` or the kit's cache."""
    configured = os.environ.get("CCK_ALLURE_HOME")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "core-conformance-kit" / "allure" / ALLURE_VERSION


def allure_bin(home: Path | None = None) -> Path | None:
    """The installed allure CLI, or None when :func:`install_allure` has not run (or Node.js is missing)."""
    cli = (home or allure_home()) / "node_modules" / "allure" / "cli.js"
    if cli.is_file() and shutil.which("node"):
        return cli
    return None


def _run(command: Sequence[str], *, cwd: Path, timeout: float, what: str) -> None:
    try:
        done = subprocess.run(list(command), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              check=False, env={**os.environ, "NO_COLOR": "1"})
    except subprocess.TimeoutExpired:
        raise ReportError(f"{what}: no answer within {timeout:.0f} s ({' '.join(command)} in {cwd})") from None
    except OSError as exc:
        raise ReportError(f"{what}: cannot run {command[0]}: {exc}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise ReportError(f"{what}: {' '.join(command)} exited with {done.returncode}: " + " | ".join(tail))


def install_allure(home: Path | None = None, *, timeout: float = INSTALL_TIMEOUT) -> Path:
    """Install the pinned allure into ``home`` (``npm ci`` with the kit's lockfile); the CLI's path.

    Does nothing when that version is there already."""
    home = home or allure_home()
    existing = allure_bin(home)
    if existing is not None:
        return existing
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise ReportError("Node.js and npm are needed for the allure HTML report (Debian: apt-get install nodejs "
                          "npm); the rest of the report needs neither")
    home.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(PACKAGE_DIR / name, home / name)
    _run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=home, timeout=timeout,
         what=f"installing allure {ALLURE_VERSION} into {home}")
    cli = allure_bin(home)
    if cli is None:
        raise ReportError(f"installing allure {ALLURE_VERSION} into {home}: npm ci ran but left no allure/cli.js")
    return cli


def strip_analytics(html: str) -> tuple[str, bool]:
    """The page without allure's analytics tag, and whether there was one."""
    stripped, count = _ANALYTICS.subn("", html)
    return stripped, count > 0


def build_allure_report(results: Sequence[Path], out: Path, *, cli: Path, name: str,
                        timeout: float = BUILD_TIMEOUT) -> Path:
    """One self-contained allure report of the ``results`` directories in ``out``; its ``index.html``."""
    if not results:
        raise ReportError("no allure-results directories to build the allure report from")
    node = shutil.which("node")
    if node is None:
        raise ReportError("Node.js is needed for the allure HTML report and was not found on PATH")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    config = out.parent / f".{out.name}-allurerc.json"
    config.write_text(json.dumps({
        "name": name, "output": str(out.resolve()),
        "plugins": {"awesome": {"options": {"singleFile": True, "reportName": name, "reportLanguage": "en"}}},
    }), encoding="utf-8")
    try:
        _run([node, str(cli), "generate", "--config", str(config.resolve()), *(str(r.resolve()) for r in results)],
             cwd=out.parent, timeout=timeout, what=f"building the allure report in {out}")
    finally:
        config.unlink(missing_ok=True)
    index = out / "index.html"
    if not index.is_file():
        raise ReportError(f"building the allure report in {out}: allure wrote no index.html")
    html, _ = strip_analytics(index.read_text(encoding="utf-8"))
    index.write_text(html, encoding="utf-8")
    return index
