"""End to end in a real browser: the committed evidence of two real reference runs -> the site and the allure
HTML report -> Debian's Chromium, headless, from ``file://`` as a user opens them.

The tests assert on the DOM Chromium built (``--dump-dom``, after scripts ran) and keep a screenshot of the
index as an artifact in ``$CCK_ARTIFACT_DIR`` (tox: ``.tox/artifacts/reports``), else in pytest's tmp dir;
the screenshot is also checked to show the matrix's verdict colours.  Chromium or Node.js missing skips them
with the reason, unless ``CCK_REQUIRE_BROWSER=1`` (set in the ``reports`` tox env, which CI runs after
``make setup`` installed both), where that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from lxml import html
from PIL import Image

from .conftest import EVIDENCE, SiteBuild

#: Seconds one Chromium page load may take (about 2 s here).
BROWSER_TIMEOUT = 120.0
WINDOW = (1280, 1000)
#: Cell colours (reports/templates/base.html.j2): PASS, and PASS_LENIENT, which only the legend shows here.
PASS_RGB, LENIENT_RGB = (0xC8, 0xE6, 0xC9), (0xF0, 0xF4, 0xC3)


def _missing(what: str) -> None:
    if os.environ.get("CCK_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{what} (CCK_REQUIRE_BROWSER=1: `make setup` installs it)")
    pytest.skip(what)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    _missing("no Chromium on PATH (Debian: apt-get install chromium)")
    raise AssertionError("unreachable")


def _browse(page: Path, *, screenshot: Path | None = None, budget_ms: int = 5000) -> str:
    """``page`` rendered by headless Chromium: the DOM after its scripts ran (and a screenshot if asked)."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--virtual-time-budget={budget_ms}", "--hide-scrollbars"]
    action = [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
    done = subprocess.run([_chromium(), *flags, *action, page.resolve().as_uri()], capture_output=True, text=True,
                          timeout=BROWSER_TIMEOUT, check=False)
    assert done.returncode == 0, f"chromium exited with {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("CCK_ARTIFACT_DIR")
    where = Path(configured) if configured else tmp_path_factory.mktemp("artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture(scope="module")
def site(committed_site: SiteBuild) -> Path:
    problem = committed_site.allure_problem
    if problem is not None:
        if problem.startswith("no Node.js"):
            _missing(problem)
        pytest.fail(problem)
    assert committed_site.result.allure_index == committed_site.out / "allure" / "index.html"
    return committed_site.out


def _case_verdicts() -> dict[str, str]:
    """Case -> verdict of the newest committed run that has it (what the matrix's latest cell shows)."""
    latest: dict[str, tuple[str, str]] = {}
    for path in EVIDENCE.glob("*/cases.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record["case_id"] not in latest or latest[record["case_id"]][0] < record["run_id"]:
                latest[record["case_id"]] = (record["run_id"], record["verdict"])
    return {case: verdict for case, (_, verdict) in latest.items()}


def test_chromium_renders_the_matrix_with_a_linked_coloured_cell_per_case(site: Path, artifacts: Path) -> None:
    dom = html.fromstring(_browse(site / "index.html"))
    rows = dom.xpath('//table[@id="broker-matrix"]/tbody/tr')
    shown = {row.xpath("string(td[1])").strip(): row for row in rows}
    verdicts = _case_verdicts()
    assert set(shown) == set(verdicts)
    for case, row in shown.items():
        cell = row.xpath("td[3]")[0]
        assert cell.xpath("string(a)").strip() == verdicts[case]
        assert cell.get("class") == {"PASS": "pass", "UNSUPPORTED": "unsupported"}[verdicts[case]]
        link = cell.xpath("a/@href")[0]
        assert (site / link).is_file(), f"{case}: the cell links to {link}, which is not there"
    assert dom.xpath('//nav/a[@id="allure-report"]/@href') == ["allure/index.html"]

    shot = artifacts / "report-index.png"
    _browse(site / "index.html", screenshot=shot)
    with Image.open(shot) as image:
        assert image.size == WINDOW
        pixels = {colour: count for count, colour in
                  image.convert("RGB").getcolors(maxcolors=WINDOW[0] * WINDOW[1]) or ()}
    # The legend and the totals show each colour once or twice; the matrix's four PASS cells add far more
    # green (12k pixels here, 2k without them) than the legend's lone PASS_LENIENT swatch has yellow (1.5k).
    assert pixels.get(LENIENT_RGB, 0) > 0, f"no legend in the screenshot {shot}"
    assert pixels.get(PASS_RGB, 0) > 4 * pixels[LENIENT_RGB], f"no PASS cells in the screenshot {shot}"


def test_chromium_renders_the_allure_report_from_disk(site: Path, artifacts: Path) -> None:
    page = site / "allure" / "index.html"
    text = _browse(page, budget_ms=10_000)
    assert "googletagmanager" not in page.read_text(encoding="utf-8")
    dom = html.fromstring(text)
    for code in dom.xpath("//script|//style"):
        code.drop_tree()
    rendered = " ".join(dom.text_content().split())
    # The report's own code drew its summary from the data embedded in the file (before that, the page holds
    # only a loader): one test per case (allure counts a case's result in the older run as a retry), with
    # the latest run's statuses.
    verdicts = _case_verdicts()
    summary = re.search(r"Total ?(\d+) ?Passed ?(\d+) ?Skipped ?(\d+) ?Sort by", rendered)
    assert summary is not None, f"no results summary in what Chromium rendered: {rendered[:500]}"
    assert tuple(int(n) for n in summary.groups()) == (
        len(verdicts), sum(v == "PASS" for v in verdicts.values()), sum(v == "UNSUPPORTED" for v in verdicts.values()))
    _browse(page, screenshot=artifacts / "allure-index.png", budget_ms=10_000)


def test_chromium_renders_the_allure_cross_check(site: Path) -> None:
    dom = html.fromstring(_browse(site / "allure.html"))
    assert dom.xpath('//p[@id="allure-link"]/a/@href') == ["allure/index.html"]
    counts = dom.xpath('//table[@id="allure-counts"]/tbody/tr')
    assert len(counts) == len(list(EVIDENCE.iterdir()))
    assert dom.xpath('string(//span[@id="allure-problem-count"])').strip() == "0 disagree"
