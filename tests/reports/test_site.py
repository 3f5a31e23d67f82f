"""End to end: the committed evidence of two real reference runs -> Parquet -> the site, asserted on its HTML.

(The same site rendered in headless Chromium, with the allure HTML report: test_browser.py.)
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")


from reports._site import SiteData, render_site
from reports._svg import Attempt, schedule_plot

from .conftest import EVIDENCE, SiteBuild


class _Cells(HTMLParser):
    """The matrix's cells: (case, [(class, link, text), ...]) per row of table#matrix."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, list[tuple[str, str, str]]]] = []
        self._in_matrix = False
        self._cell: list[str] | None = None
        self._row: list[list[str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "table":
            self._in_matrix = attributes.get("id") == "matrix"
        elif self._in_matrix and tag == "tr":
            self._row = []
        elif self._in_matrix and tag == "td":
            self._cell = [attributes.get("class") or "", "", ""]
            self._row.append(self._cell)
        elif self._cell is not None and tag == "a":
            self._cell[1] = attributes.get("href") or ""

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell[2] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None
        elif tag == "tr" and self._in_matrix and self._row:
            self.rows.append((self._row[0][2], [(c[0], c[1], c[2].strip()) for c in self._row[2:]]))
        elif tag == "table":
            self._in_matrix = False


def _cases() -> dict[str, set[str]]:
    verdicts: dict[str, set[str]] = {}
    for path in EVIDENCE.glob("*/cases.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            verdicts.setdefault(record["case_id"], set()).add(record["verdict"])
    return verdicts


@pytest.fixture(scope="module")
def site(committed_site: SiteBuild) -> Path:
    result = committed_site.result
    assert result.index == committed_site.out / "index.html"
    assert result.runs == 2
    assert result.quarantined == 0
    return committed_site.out


def test_index_shows_the_matrix_with_a_coloured_linked_cell_per_case(site: Path) -> None:
    parser = _Cells()
    parser.feed((site / "index.html").read_text(encoding="utf-8"))
    expected = _cases()
    assert sorted(case for case, _ in parser.rows) == sorted(expected)
    classes = {"PASS": "pass", "UNSUPPORTED": "unsupported"}
    for case, cells in parser.rows:
        [(css, link, text)] = cells  # one column: reference 0.1.0
        verdict = text.split()[0]
        assert verdict in expected[case]
        assert css == classes[verdict]
        assert not link.startswith(("/", "file:", "http"))  # relative: opens from disk
        page = (site / link).read_text(encoding="utf-8")
        assert f"<h1>{case} " in page
    cells = dict(parser.rows)
    assert "(2 runs)" in cells["backoff.interval.2"][0][2]


def test_case_pages_link_their_wire_log(site: Path) -> None:
    page = (site / "cases/reference@0.1.0/window.flush-close.1.html").read_text(encoding="utf-8")
    assert 'id="evidence-wire"' in page
    link = re.search(r'href="(window\.flush-close\.1\.wire\.jsonl)"', page)
    assert link
    rows = (site / "cases/reference@0.1.0" / link.group(1)).read_text(encoding="utf-8").splitlines()
    assert rows
    assert all(json.loads(row)["kind"] == "wire" for row in rows)


def test_timing_audit_and_coverage_pages(site: Path) -> None:
    timing = (site / "timing.html").read_text(encoding="utf-8")
    assert 'id="timing-summary"' in timing
    assert re.search(r'<figure class="plot" id="plot-reference-backoff\.interval\.2-[^"]*">'
                     r'<figcaption>[^<]*</figcaption><svg ', timing)
    audit = (site / "audit.html").read_text(encoding="utf-8")
    row = re.search(r"<tr><td>[^<]*</td><td>reference</td><td>reattach\.loss\.5</td>.*?</tr>", audit)
    assert row
    assert "FAIL" not in row.group(0)
    coverage = (site / "coverage.html").read_text(encoding="utf-8")
    assert "<td>window.confirm-bytes</td>" in coverage
    assert (site / "quarantine.jsonl").read_text(encoding="utf-8") == ""
    assert sorted(p.name for p in (site / "data").iterdir()) == sorted(
        ["allure", "attempt", "case", "history", "history_result", "note", "run", "timing", "wire"])


def test_the_quarantine_count_links_its_file(tmp_path: Path) -> None:
    data = SiteData(evidence="ev", runs=[], matrix=[], quarantine_count=3,
                    quarantine_sample=[{"file": "r/cases.jsonl", "line": 9, "reason": "not JSON"}])
    index = render_site(data, tmp_path).read_text(encoding="utf-8")
    assert '<a href="quarantine.jsonl">quarantine.jsonl</a>' in index
    assert "3 evidence rows were quarantined" in index


def test_schedule_plot_marks_attempts_outside_the_tolerance() -> None:
    svg = schedule_plot([Attempt(0, 0.0, 1.0, 100.0), Attempt(1, 100.0, 260.0, 110.0, outside=True)], title="x<y")
    assert svg.startswith("<svg")
    assert svg.endswith("</svg>")
    assert svg.count('class="observed"') == 2
    assert 'fill="#c62828"' in svg  # the attempt outside the tolerance
    assert "x&lt;y" in svg
