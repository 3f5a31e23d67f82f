"""The front page's heat maps, pairs and trends, the drill-down and the diff pages, rendered without Spark from
rows shaped as the jobs give them (their transforms: test_glance.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from lxml import html

from cck.reports._glance import HeatCell, diff_pages, heat_class, trends
from cck.reports._site import MatrixColumn, SiteData, case_page_path, render_site

KNOWN = "durable sends replayed after a reattach are stored twice"
OLD, NEW = MatrixColumn("broker", "artemis", "2.9.0"), MatrixColumn("broker", "artemis", "2.10.0")


def _cell(case_id: str, verdict: str, version: str, **fields: Any) -> dict[str, Any]:
    """A matrix row (``conformance_matrix``) of a broker column of artemis."""
    counts = dict.fromkeys(("pass", "unsupported", "pass_lenient", "indeterminate", "kit_error", "fail"), 0)
    counts[verdict.lower()] = 1
    return {"subject": "broker", "target": "artemis", "target_version": version, "client": None, "case_id": case_id,
            "clause_id": f"clause.{case_id}", "group": case_id.split(".")[0], "latest_verdict": verdict,
            "latest_run_id": "r", "latest_reason": None, "latest_kit_error_type": None,
            "latest_kit_error_where": None, "latest_known_deviation": None, "modal_verdict": verdict, "runs": 1,
            **counts, "other": 0, "flake_rate": 0.0, "first_seen": "t", "last_seen": "t", **fields}


def _group(version: str, group: str, cases: int, conforming: int, **counts: int) -> dict[str, Any]:
    """A ``group_summary`` row."""
    names = ("pass", "unsupported", "pass_lenient", "indeterminate", "kit_error", "fail", "fail_known", "other")
    return {"subject": "broker", "target": "artemis", "target_version": version, "client": None, "group": group,
            "cases": cases, "conforming": conforming, **{n: counts.get(n, 0) for n in names},
            "share": conforming / cases}


def _diff(case_id: str, status: str, left: str | None, right: str | None, **fields: Any) -> dict[str, Any]:
    """A ``column_diff`` row as the job pairs them: in text order, 2.10.0 before 2.9.0."""
    return {"subject": "broker", "left_name": "artemis", "left_version": "2.10.0", "right_name": "artemis",
            "right_version": "2.9.0", "case_id": case_id, "status": status, "left_verdict": left,
            "right_verdict": right, "left_known_deviation": None, "right_known_deviation": None,
            "left_reason": None, "right_reason": None, **fields}


MATRIX = [
    _cell("reattach.cut.9", "FAIL", "2.9.0", latest_known_deviation=KNOWN, latest_reason="2 stored twice"),
    _cell("reattach.cut.10", "FAIL", "2.9.0", latest_reason="1 lost"),
    _cell("reattach.cut.1", "PASS", "2.9.0"),
    _cell("reattach.cut.9", "PASS", "2.10.0"),
    _cell("reattach.cut.10", "PASS", "2.10.0"),
    _cell("reattach.cut.1", "PASS", "2.10.0"),
    _cell("window.mode.1", "PASS_LENIENT", "2.10.0"),
]
GROUPS = [_group("2.9.0", "reattach", 3, 1, fail=2, fail_known=1, **{"pass": 1}),
          _group("2.10.0", "reattach", 3, 3, **{"pass": 3}),
          _group("2.10.0", "window", 1, 1, pass_lenient=1)]
DIFF = [
    _diff("reattach.cut.1", "same", "PASS", "PASS"),
    _diff("reattach.cut.9", "differs", "PASS", "FAIL", right_known_deviation=KNOWN, right_reason="2 stored twice"),
    _diff("reattach.cut.10", "differs", "PASS", "FAIL", right_reason="1 lost"),
    _diff("window.mode.1", "only left", "PASS_LENIENT", None),
]


def _ts(minute: int) -> datetime:
    return datetime(2026, 11, 1, 12, minute, tzinfo=UTC)


TRENDS = [{"subject": "broker", "target": "artemis", "target_version": "2.9.0", "client": None, "run_id": run,
           "run_started": _ts(minute), "cases": 3, "conforming": conforming, "share": conforming / 3}
          for run, minute, conforming in (("r2", 2, 1), ("r1", 1, 3))]
SEQUENCES = [
    {"subject": "broker", "target": "artemis", "target_version": "2.9.0", "client": None, "case_id": "reattach.cut.9",
     "runs": 2, "verdicts": ["PASS", "FAIL"], "flaky": True, "flake_rate": 0.5},
    {"subject": "broker", "target": "artemis", "target_version": "2.9.0", "client": None, "case_id": "reattach.cut.1",
     "runs": 2, "verdicts": ["PASS", "PASS"], "flaky": False, "flake_rate": 0.0},
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("glance")
    render_site(SiteData(evidence="ev", runs=[], matrix=MATRIX, groups=GROUPS, diff=DIFF, sequences=SEQUENCES,
                         trends=TRENDS), out)
    return out


def _dom(path: Path) -> Any:
    return html.fromstring(path.read_text(encoding="utf-8"))


def _text(node: Any) -> str:
    """What a reader sees of ``node``: its texts, each piece apart (a cell, a line break)."""
    return " ".join(" ".join(node.itertext()).split())


def test_the_heat_map_shows_groups_by_columns_with_counts_share_and_colour(site: Path) -> None:
    dom = _dom(site / "index.html")
    table = dom.get_element_by_id("broker-heatmap")
    assert [_text(th) for th in table.xpath("thead/tr/th")] == ["group", "artemis 2.9.0", "artemis 2.10.0"]
    assert [_text(th) for th in table.xpath("tbody/tr/th")] == ["reattach", "window"]
    cells = {(td.get("data-group"), td.get("data-column")): td for td in table.xpath(".//td[@data-column]")}
    old = cells[("reattach", "artemis@2.9.0")]
    assert _text(old) == "1/3 33% 2 FAIL (1 known)"
    assert old.get("class") == "heat heat-0"
    assert "bad" in old.xpath("span")[0].get("class")  # a FAIL no deviation explains
    assert old.get("title") == "1 of 3 cases conform: FAIL 2, PASS 1, 1 of the FAILs known deviations"
    assert old.xpath("a/@href") == ["groups/broker/artemis@2.9.0/reattach.html"]
    assert cells[("reattach", "artemis@2.10.0")].get("class") == "heat heat-100"
    assert ("window", "artemis@2.9.0") not in cells  # that column ran no window case: an empty cell
    assert _text(cells[("", "artemis@2.10.0")]) == "4/4 100%"  # the column's total
    # the group's name links to its rows in the matrix below, every column
    assert table.xpath("tbody/tr/th/a/@href") == ["#broker-group-reattach", "#broker-group-window"]
    assert [tbody.get("id") for tbody in dom.xpath('//table[@id="broker-matrix"]/tbody')] == [
        "broker-group-reattach", "broker-group-window"]
    assert _text(dom.get_element_by_id("client-heatmap-empty")) == "No client cases in this evidence."


def test_a_heat_map_cell_drills_down_to_its_groups_cases_worst_first(site: Path) -> None:
    dom = _dom(site / "groups/broker/artemis@2.9.0/reattach.html")
    assert _text(dom.get_element_by_id("group-summary")).startswith("1 of 3 cases conform")
    rows = dom.xpath('//table[@id="group-cases"]/tbody/tr')
    assert [_text(row.xpath("td")[0]) for row in rows] == ["reattach.cut.9", "reattach.cut.10", "reattach.cut.1"]
    assert _text(rows[0].xpath("td")[3]) == KNOWN
    link = rows[0].xpath("td[3]/a/@href")[0]
    assert link == "../../../" + case_page_path(OLD, "reattach.cut.9")


def test_the_front_page_links_every_pair_and_its_page_lists_differing_verdicts_first(site: Path) -> None:
    dom = _dom(site / "index.html")
    [link] = dom.xpath('//table[@id="broker-pairs"]//a')
    # natural order: 2.9.0 is the left column, though the job paired the two in text order
    assert (link.get("data-left"), link.get("data-right")) == ("artemis@2.9.0", "artemis@2.10.0")
    assert _text(link) == "2 differ"
    assert _text(dom.get_element_by_id("client-pairs-empty")) == "No client columns."
    page = _dom(site / link.get("href"))
    assert [_text(th) for th in page.xpath('//table[@id="diff"]/thead/tr/th')][2:4] == [
        "artemis 2.9.0", "artemis 2.10.0"]
    rows = [[_text(td) for td in tr.xpath("td")] for tr in page.xpath('//table[@id="diff"]/tbody/tr')]
    assert rows == [
        ["reattach.cut.9", "differs", "FAIL (known)", "PASS", f"known deviation: {KNOWN} 2 stored twice", ""],
        ["reattach.cut.10", "differs", "FAIL", "PASS", "1 lost", ""],
        ["window.mode.1", "only right", "not run", "PASS_LENIENT", "", ""],
        ["reattach.cut.1", "same", "PASS", "PASS", "", ""],
    ]
    assert _text(page.get_element_by_id("diff-totals")) == "differs 2 only left 0 only right 1 same 1"
    [first] = page.xpath('//table[@id="diff"]/tbody/tr[1]/td[3]/a/@href')
    assert first == "../../" + case_page_path(OLD, "reattach.cut.9")


def test_the_trends_show_each_runs_share_in_order_and_the_flaky_cases(site: Path) -> None:
    dom = _dom(site / "index.html")
    [row] = dom.xpath('//table[@id="column-trends"]/tbody/tr')
    assert _text(row) == "broker artemis 2.9.0 2 100% \N{RIGHTWARDS ARROW} 33%"  # oldest first
    assert [span.get("class") for span in row.xpath(".//span")] == ["run heat-100", "run heat-0"]
    [flaky] = dom.xpath('//table[@id="flaky"]/tbody/tr')
    assert _text(flaky) == "broker artemis 2.9.0 reattach.cut.9 2 FAIL 1 PASS 1 P F 50%"


def test_without_repeated_runs_the_trends_say_so(tmp_path: Path) -> None:
    index = render_site(SiteData(evidence="ev", runs=[], matrix=MATRIX[:1]), tmp_path).read_text(encoding="utf-8")
    assert '<p class="empty" id="no-repeats">No repeated runs in this evidence' in index
    assert "One broker column (artemis 2.9.0): nothing to compare." in index


def test_repeated_runs_without_a_changed_verdict_say_so() -> None:
    shaped = trends(TRENDS, SEQUENCES[1:])
    assert shaped.flaky == []
    assert shaped.repeated_cases == 1
    assert [run["run_id"] for run in shaped.columns[0].runs] == ["r1", "r2"]


def test_diff_pages_orient_pairs_naturally_and_swap_their_sides() -> None:
    [page] = diff_pages(DIFF)
    assert (page.left, page.right) == (OLD, NEW)
    assert page.path == "diff/broker/artemis@2.9.0_vs_artemis@2.10.0.html"
    assert page.rows[0]["left_known_deviation"] == KNOWN
    assert page.counts == [("differs", 2), ("only left", 0), ("only right", 1), ("same", 1)]


@pytest.mark.parametrize(("share", "css"), [(1.0, "heat-100"), (0.995, "heat-90"), (0.9, "heat-90"),
                                            (0.8, "heat-75"), (0.5, "heat-50"), (0.49, "heat-0"), (0.0, "heat-0"),
                                            (None, "heat-none")])
def test_heat_class_steps(share: float | None, css: str) -> None:
    assert heat_class(share) == css


def test_colours_of_the_heat_steps_are_distinct() -> None:
    base = (Path(__file__).resolve().parents[2] / "reports/templates/base.html.j2").read_text(encoding="utf-8")
    colours = dict(re.findall(r"\.(heat-[a-z0-9]+) \{ background: (#[0-9a-f]{6});", base))
    assert len(colours) == 6
    assert len(set(colours.values())) == 6


def test_a_group_a_column_could_not_run_at_all_is_grey_not_red(tmp_path: Path) -> None:
    stock = {**_group("2.9.0", "cluster", 2, 0, unsupported=2), "subject": "client", "target": None,
             "target_version": None, "client": "artemis@2.28.0"}
    index = _dom(render_site(SiteData(evidence="ev", runs=[], matrix=[], groups=[stock]), tmp_path))
    [cell] = index.xpath('//table[@id="client-heatmap"]/tbody//td[@data-column="artemis@2.28.0"]')
    assert _text(cell) == "0/2 0% 2 unsupported"
    assert cell.get("class") == "heat heat-none"
    one_judged = HeatCell(MatrixColumn("client", "kit"), "cluster", {**stock, "unsupported": 1, "fail": 1})
    assert one_judged.css == "heat-0"
