"""End to end in a real browser: the committed evidence of two real reference runs -> the site and the allure
HTML report -> Debian's Chromium, headless, from ``file://`` as a user opens them.

The tests assert on the DOM Chromium built (``--dump-dom``, after scripts ran) and keep screenshots of the
front page, a diff page and a failing case page as artifacts in ``$CCK_ARTIFACT_DIR`` (tox:
``.tox/artifacts/reports``), else in pytest's tmp dir; the screenshots are also checked to show the verdict
colours.  Chromium or Node.js missing skips them with the reason, unless ``CCK_REQUIRE_BROWSER=1`` (set in the
``reports`` tox env, which CI runs after ``make setup`` installed both), where that is a failure.
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

from cck.reports._site import SiteData, render_site

from .conftest import EVIDENCE, SiteBuild
from .test_case_page import case_page
from .test_glance_site import DIFF, GROUPS, KNOWN, MATRIX

#: Seconds one Chromium page load may take (about 2 s here).
BROWSER_TIMEOUT = 120.0
WINDOW = (1280, 1000)
#: Cell colours (reports/templates/base.html.j2): PASS, PASS_LENIENT (only the legend shows it on the front page), FAIL.
PASS_RGB, LENIENT_RGB, FAIL_RGB = (0xC8, 0xE6, 0xC9), (0xF0, 0xF4, 0xC3), (0xFF, 0xCD, 0xD2)
#: Heat map colours (the same template): a group with at least 90%, and with at least half, of its cases conforming.
HEAT90_RGB, HEAT50_RGB = (0xE6, 0xEF, 0xC0), (0xFF, 0xDC, 0xB0)


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


def _seen(node: html.HtmlElement) -> str:
    """What a reader sees of ``node``: its texts, each piece apart (a cell, a line break)."""
    return " ".join(" ".join(node.itertext()).split())


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

    # the heat map above it: per group, the cases whose latest verdict conforms (backoff's second case is
    # UNSUPPORTED) with the share and its colour, and the column's total; its link opens the group's cases
    heat = {(td.get("data-group"), td.get("data-column")): td
            for td in dom.xpath('//table[@id="broker-heatmap"]//td[@data-column]')}
    assert set(heat) == {(group, "reference@0.1.0") for group in ("backoff", "reattach", "restart", "window", "")}
    backoff = heat[("backoff", "reference@0.1.0")]
    assert _seen(backoff) == "1/2 50% 1 unsupported"
    assert backoff.get("class") == "heat heat-50"
    assert _seen(heat[("window", "reference@0.1.0")]) == "1/1 100%"
    assert _seen(heat[("", "reference@0.1.0")]) == "4/5 80% 1 unsupported"
    group_page = html.fromstring((site / backoff.xpath("a/@href")[0]).read_text(encoding="utf-8"))
    assert [_seen(td) for td in group_page.xpath('//table[@id="group-cases"]/tbody/tr/td[1]')] == [
        "backoff.multiplier.stock.2", "backoff.interval.2"]  # the worst verdict first
    # one column: nothing to diff; two runs of it: each run's share, oldest first, and no case changed verdict
    assert _seen(dom.get_element_by_id("broker-pairs-empty")).startswith("One broker column (reference 0.1.0)")
    [trend] = dom.xpath('//table[@id="column-trends"]/tbody/tr')
    assert _seen(trend) == "broker reference 0.1.0 2 80% \N{RIGHTWARDS ARROW} 100%"
    assert _seen(dom.get_element_by_id("no-flakes")).startswith("2 case(s) ran more than once")

    shot = artifacts / "report-index.png"
    _browse(site / "index.html", screenshot=shot)
    with Image.open(shot) as image:
        assert image.size == WINDOW
        pixels = {colour: count for count, colour in
                  image.convert("RGB").getcolors(maxcolors=WINDOW[0] * WINDOW[1]) or ()}
    # The legends and the totals show each colour once or twice; the heat map's three all-conforming cells and
    # the trend's 100% add far more green (10k pixels here) than the legend's lone PASS_LENIENT swatch has
    # yellow (1.5k), and backoff's half-conforming cell more orange (3.7k) than the heat legend's "≥ 90%" swatch,
    # which no cell has, shows of its colour (0.8k).
    assert pixels.get(LENIENT_RGB, 0) > 0, f"no legend in the screenshot {shot}"
    assert pixels.get(PASS_RGB, 0) > 4 * pixels[LENIENT_RGB], f"no all-conforming cells in the screenshot {shot}"
    assert pixels.get(HEAT90_RGB, 0) > 0, f"no heat map legend in the screenshot {shot}"
    assert pixels.get(HEAT50_RGB, 0) > 2 * pixels[HEAT90_RGB], f"no half-conforming cell in the screenshot {shot}"


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


@pytest.fixture(scope="module")
def two_columns(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed evidence has one column, so no pair to diff: the diff is opened on a site rendered (no Spark,
    milliseconds) from the rows test_glance_site.py shapes as the jobs give them, two versions of one target."""
    out = tmp_path_factory.mktemp("two-columns")
    render_site(SiteData(evidence="ev", runs=[], matrix=MATRIX, groups=GROUPS, diff=DIFF), out)
    return out


def test_chromium_opens_a_diff_page_from_the_front_page(two_columns: Path, artifacts: Path) -> None:
    front = html.fromstring(_browse(two_columns / "index.html"))
    [pair] = front.xpath('//table[@id="broker-pairs"]//a')
    assert _seen(pair) == "2 differ"
    page = two_columns / pair.get("href")
    dom = html.fromstring(_browse(page))
    rows = dom.xpath('//table[@id="diff"]/tbody/tr')
    assert [row.get("data-status") for row in rows] == ["differs", "differs", "only right", "same"]
    first = rows[0].xpath("td")
    assert [_seen(td) for td in first[:4]] == ["reattach.cut.9", "differs", "FAIL (known)", "PASS"]
    assert [td.get("class") for td in first[2:4]] == ["fail", "pass"]
    assert _seen(first[4]).startswith(f"known deviation: {KNOWN}")
    assert (page.parent / first[2].xpath("a/@href")[0]).resolve().as_posix().endswith(
        "cases/broker/artemis@2.9.0/reattach.cut.9.html")

    shot = artifacts / "report-diff.png"
    _browse(page, screenshot=shot)
    with Image.open(shot) as image:
        pixels = {colour: count for count, colour in
                  image.convert("RGB").getcolors(maxcolors=WINDOW[0] * WINDOW[1]) or ()}
    # the two differing rows' FAIL cells are red beside their PASS cells' green
    assert pixels.get(FAIL_RGB, 0) > 0, f"no FAIL cell in the screenshot {shot}"
    assert pixels.get(PASS_RGB, 0) > pixels[FAIL_RGB], f"no PASS cells in the screenshot {shot}"


@pytest.fixture(scope="module")
def failing_case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A failing case's page, rendered (no Spark) from test_case_page.py's rows: a cut of the broker's answer, the
    reconnection and reattach, the replayed send stored twice (a known deviation)."""
    out = tmp_path_factory.mktemp("failing-case")
    page = case_page()
    render_site(SiteData(evidence="ev", runs=[], matrix=[page.summary], case_pages=[page]), out)
    return out / page.path


def test_chromium_shows_a_failing_case_page_story_first_with_the_diagrams_three_lanes(failing_case: Path,
                                                                                    artifacts: Path) -> None:
    dom = html.fromstring(_browse(failing_case))
    sections = [s.get("id") for s in dom.xpath("//body/section|//body/section/section")]
    assert sections.index("clause") < sections.index("verdict") < sections.index("sequence") < sections.index("raw")
    assert _seen(dom.get_element_by_id("case-verdict")) == "FAIL"
    assert _seen(dom.get_element_by_id("case-why")).startswith("a known deviation of this broker: ")
    [svg] = dom.xpath('//section[@id="sequence"]//svg[@id="sequence-diagram"]')
    texts = [_seen(text) for text in svg.xpath(".//text")]
    assert {"client (the kit's)", "fault proxy", "broker"} <= set(texts)  # the three lanes
    assert any(text.startswith("CUT: the proxy resets connection 1") for text in texts)  # the fault at the proxy
    assert "!! k1 DUPLICATED" in texts  # the anomaly's marker beside its frames

    shot = artifacts / "report-case.png"
    _browse(failing_case, screenshot=shot)
    with Image.open(shot) as image:
        pixels = {colour: count for count, colour in
                  image.convert("RGB").getcolors(maxcolors=WINDOW[0] * WINDOW[1]) or ()}
    assert pixels.get(FAIL_RGB, 0) > 0, f"no FAIL verdict in the screenshot {shot}"
