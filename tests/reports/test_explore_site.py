"""The Exploration page rendered without Spark from rows shaped as the pipeline gives them (its transforms:
test_explore.py; the pipeline end to end: test_explore_ingest.py): what a reader sees of each exploration, its
finding and its runs' histories, and the page of an evidence without explorations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from lxml import html

from cck.reports._explore_page import duration
from cck.reports._site import SiteData, render_site

REPLAY = ("cck explore --target artemis --artemis-version 2.44.0 --replay "
          "/ev/explore-20250101-120000-seed7/minimal/example.json --tries 20")
FINDING = "finding: 1 duplicated after a confirmed acknowledgement: k1 (to drain, delivery count 1)"
SVG = '<svg xmlns="http://www.w3.org/2000/svg"><text>k1 DUPLICATED</text></svg>\n'


def _row(ident: str, **fields: Any) -> dict[str, Any]:
    """An ``exploration_summary`` row with its ``audit`` and ``diagram_source``, as the pipeline collects it."""
    return {"exploration_id": ident, "target": "artemis", "target_version": "2.44.0",
            "target_args": "--target artemis --artemis-version 2.44.0", "seed": 7, "budget_s": 600.0,
            "max_examples": 1000, "runs": 311, "runs_read": 311, "clean_runs": 290, "finding_runs": 12,
            "indeterminate_runs": 9, "kit_error_runs": 0, "other_runs": 0, "explore_runs": 250, "shrink_runs": 40,
            "retry_runs": 20, "confirm_runs": 1, "exposed_runs": 31, "durable_exposed_runs": 17, "found": False,
            "confirmed": False, "first_finding_run": None, "first_finding_at_s": None, "duration_s": 441.2,
            "runs_per_minute": 42.3, "most_unconfirmed": 34, "most_durable_sends": 33, "most_recent_durable_sends": 12,
            "finding": None,
            "example": None, "replay": None, "regression_case": None, "finished": None, "audit": None,
            "diagram_source": None, **fields}


def _audit(**fields: Any) -> dict[str, Any]:
    return {"histories": 311, "ops": 9000, "lost": 0, "unexpected": 0, "duplicated": 3, "ack_lost": 1,
            "order_violation": 5, "redelivery_mismatch": 2, "unreceived_undrained": 4, "audit_failing": 12,
            "failing_runs": list(range(5, 15)), "checker_failing": 12, "disagreeing": 0, **fields}


@pytest.fixture
def site(tmp_path: Path) -> Path:
    evidence = tmp_path / "evidence" / "explore-20250101-120000-seed7" / "minimal"
    evidence.mkdir(parents=True)
    (evidence / "sequence.svg").write_text(SVG, encoding="utf-8")
    rows = [
        _row("nested/explore-20250101-130000-seed1", target="reference", target_version=None,
             target_args="--target reference", seed=1, runs=1000, runs_read=998, clean_runs=998, finding_runs=0,
             indeterminate_runs=0, most_recent_durable_sends=None,  # evidence older than the third count
             audit=_audit(histories=998, duplicated=0, ack_lost=0, audit_failing=0,
                                                failing_runs=[], checker_failing=0)),
        _row("explore-20250101-120000-seed7", found=True, confirmed=True, first_finding_run=5,
             first_finding_at_s=1.4, finding=FINDING, example="send(q0 x34 durable async) | cut after 9 confirmable",
             replay=REPLAY, regression_case="/ev/explore-20250101-120000-seed7/minimal/test_explore_51d0856b.py",
             audit=_audit(disagreeing=1), diagram_source=str(evidence / "sequence.svg")),
        _row("explore-20250102-090000-seed2", found=True, confirmed=False, first_finding_run=88,
             first_finding_at_s=75.0, finding="finding: 1 lost: confirmed, never received (k3)", runs_per_minute=None,
             most_unconfirmed=None, most_durable_sends=None, most_recent_durable_sends=None, exposed_runs=None,
             durable_exposed_runs=None),
    ]
    out = tmp_path / "site"
    (out / "explorations" / "stale").mkdir(parents=True)  # an earlier report's diagram
    render_site(SiteData(evidence="evidence", runs=[], matrix=[], explorations=rows), out)
    return out


def _text(element: Any) -> str:
    return " ".join(element.text_content().split())


def test_each_exploration_is_a_row_with_its_target_runs_outcomes_result_and_exposure(site: Path) -> None:
    page = html.parse(str(site / "explore.html")).getroot()
    rows = page.xpath('//table[@id="explorations"]/tbody/tr')
    assert [row.get("data-exploration") for row in rows] == [  # in ID (so in time) order
        "explore-20250101-120000-seed7", "explore-20250102-090000-seed2", "nested/explore-20250101-130000-seed1"]
    found, unconfirmed, clean = rows
    cells = [_text(td) for td in found.xpath("td")]
    assert cells == ["explore-20250101-120000-seed7", "artemis 2.44.0", "7", "10 min", "311",
                     "clean 290 finding 12 indeterminate 9", "explore 250, shrink 40, retry 20, confirm 1",
                     "FOUND, confirmed", "run 5, after 1.4 s", "34 / 33 / 12", "31 (17 with durable sends)",
                     "7 min 21 s", "42"]
    assert found.xpath("td[1]/a/@href") == ["#finding-1"]
    assert found.xpath('td[contains(@class, "result")]/@class') == ["result fail"]
    assert found.xpath('td/span[@data-outcome="finding"]/@class') == ["fail"]
    assert unconfirmed.xpath('td[contains(@class, "result")]/@class') == ["result indeterminate"]
    assert _text(unconfirmed.xpath("td")[7]) == "found, not confirmed on replay"
    assert _text(unconfirmed.xpath("td")[12]) == ""  # no pace without a length
    assert [_text(td) for td in unconfirmed.xpath("td")[9:11]] == ["", ""]  # evidence without exposure figures
    # a run the report could not read is said so in red
    assert _text(clean.xpath('td[contains(@class, "runs")]')[0]) == "1000 (998 read)"
    assert clean.xpath('td[contains(@class, "runs")]/span/@class') == ["bad"]
    assert [_text(td) for td in clean.xpath("td")[1:2] + clean.xpath("td")[7:8]] == ["reference", "nothing found"]
    assert _text(clean.xpath("td")[9]) == "34 / 33"  # the two counts it has
    assert not clean.xpath("td[1]/a")


def test_a_finding_shows_its_summary_replay_command_and_the_minimal_runs_diagram(site: Path) -> None:
    page = html.parse(str(site / "explore.html")).getroot()
    sections = page.xpath('//section[@class="finding"]')
    assert [s.get("data-exploration") for s in sections] == ["explore-20250101-120000-seed7",
                                                            "explore-20250102-090000-seed2"]
    confirmed, unconfirmed = sections
    assert confirmed.get("id") == "finding-1"
    assert _text(confirmed.xpath('.//span[contains(@class, "verdict")]')[0]) == "FOUND, confirmed"
    assert _text(confirmed.xpath('.//dd[@class="finding-summary"]')[0]) == FINDING
    assert _text(confirmed.xpath('.//code[@class="minimal-example"]')[0]) == (
        "send(q0 x34 durable async) | cut after 9 confirmable")
    assert _text(confirmed.xpath('.//code[@class="replay"]')[0]) == REPLAY
    [link] = confirmed.xpath('.//a[@class="diagram-link"]/@href')
    assert link == "explorations/explore-20250101-120000-seed7/sequence.svg"
    assert (site / link).read_text(encoding="utf-8") == SVG  # copied into the site: opens from disk
    assert "test_explore_51d0856b.py" in _text(confirmed)
    # an unconfirmed finding without a diagram in the evidence
    assert _text(unconfirmed.xpath('.//dd[@class="finding-summary"]')[0]) == (
        "finding: 1 lost: confirmed, never received (k3)")
    assert unconfirmed.xpath('.//span[@class="no-diagram"]')
    assert not unconfirmed.xpath('.//a[@class="diagram-link"]')
    assert "none: written only for a confirmed finding" in _text(unconfirmed)
    assert not (site / "explorations" / "stale").exists()


def test_the_runs_histories_are_audited_per_exploration(site: Path) -> None:
    page = html.parse(str(site / "explore.html")).getroot()
    rows = {row.get("data-exploration"): row for row in page.xpath('//table[@id="exploration-audit"]/tbody/tr')}
    cells = [_text(td) for td in rows["explore-20250101-120000-seed7"].xpath("td")]
    assert cells == ["explore-20250101-120000-seed7", "311", "9000", "0", "0", "3", "1", "5", "2", "4",
                     "12 (runs 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, ...)", "12", "1"]
    assert rows["explore-20250101-120000-seed7"].xpath("td[13]/@class") == ["num bad"]  # a disagreement: red
    assert [_text(td) for td in rows["nested/explore-20250101-130000-seed1"].xpath("td")][10:] == ["0", "0", "0"]
    assert _text(rows["explore-20250102-090000-seed2"].xpath("td")[1]) == (
        "no histories.jsonl (written by explorations since the report reads them)")


def test_every_page_links_the_exploration_page(site: Path) -> None:
    for name in ("index.html", "timing.html", "audit.html", "coverage.html", "allure.html", "explore.html"):
        page = html.parse(str(site / name)).getroot()
        assert page.xpath('//nav/a[text()="Exploration"]/@href') == ["explore.html"], name


def test_without_explorations_the_page_says_so(tmp_path: Path) -> None:
    render_site(SiteData(evidence="ev", runs=[], matrix=[]), tmp_path)
    page = html.parse(str(tmp_path / "explore.html")).getroot()
    assert not page.xpath('//table[@id="explorations"]')
    [empty] = page.xpath('//p[@id="explorations-empty"]')
    assert _text(empty).startswith("No exploration evidence in ev.")
    assert html.parse(str(tmp_path / "index.html")).getroot().xpath('//nav/a[text()="Exploration"]/@href') == [
        "explore.html"]
    assert not (tmp_path / "explorations").exists()


@pytest.mark.parametrize(("seconds", "text"), [(None, ""), (9.44, "9.4 s"), (64.2, "1 min 4 s"), (600.0, "10 min")])
def test_lengths_read_as_minutes_and_seconds(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text
