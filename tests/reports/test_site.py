"""End to end: the committed evidence of two real reference runs -> Parquet -> the site, asserted on its HTML.

(The same site rendered in headless Chromium, with the allure HTML report: test_browser.py.)
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")


from lxml import html
from pyspark.sql import SparkSession

from cck.reports import _pipeline as pipeline
from cck.reports._pipeline import _windowed_history
from cck.reports._site import CasePage, MatrixColumn, SiteData, case_page_path, render_site
from cck.reports._svg import Attempt, schedule_plot

from .conftest import EVIDENCE, SiteBuild, Table


class _Cells(HTMLParser):
    """A matrix's cells: (case, [(class, link, text), ...]) per row of the table ``table_id``."""

    def __init__(self, table_id: str = "broker-matrix") -> None:
        super().__init__()
        self.table_id = table_id
        self.rows: list[tuple[str, list[tuple[str, str, str]]]] = []
        self._in_matrix = False
        self._cell: list[str] | None = None
        self._row: list[list[str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "table":
            self._in_matrix = attributes.get("id") == self.table_id
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


def test_evidence_without_subjects_is_all_broker_cases(site: Path) -> None:
    """The committed runs predate subjects: every case is in the broker matrix, the client matrix is empty."""
    index = (site / "index.html").read_text(encoding="utf-8")
    totals = _totals(index, "broker")
    verdicts = [verdict for versions in _cases().values() for verdict in versions]
    assert sum(totals.values()) == len(_cases())
    assert totals["KIT_ERROR"] == totals["FAIL"] == 0
    assert totals["PASS"] > 0
    assert set(verdicts) <= {"PASS", "UNSUPPORTED"}
    assert 'id="client-matrix"' not in index
    assert '<p class="empty" id="client-empty">No client cases in this evidence.</p>' in index
    assert sum(_totals(index, "client").values()) == 0


def _totals(index: str, subject: str) -> dict[str, int]:
    """A matrix's summary: verdict -> count, from its ``<subject>-totals`` paragraph."""
    paragraph = re.search(rf'<p class="totals" id="{subject}-totals">(.*?)</p>', index, re.S)
    assert paragraph, f"no summary of the {subject} matrix"
    return {verdict: int(count) for verdict, count in
            re.findall(r'data-verdict="([^"]+)">\1 (\d+)</span>', paragraph.group(1))}


def _matrix(index: str, subject: str) -> _Cells:
    cells = _Cells(f"{subject}-matrix")
    cells.feed(index)
    return cells


def _cell(subject: str, case_id: str, verdict: str, **fields: Any) -> dict[str, Any]:
    """A matrix row as ``conformance_matrix`` gives it (one run)."""
    counts = dict.fromkeys(("pass", "unsupported", "pass_lenient", "indeterminate", "kit_error", "fail"), 0)
    counts[verdict.lower()] = 1
    return {"subject": subject, "target": "reference", "target_version": "0.1.0", "client": None,
            "case_id": case_id, "clause_id": f"clause.{case_id}", "group": "g", "latest_verdict": verdict,
            "latest_run_id": "r1", "latest_reason": None, "latest_kit_error_type": None,
            "latest_kit_error_where": None, "latest_known_deviation": None, "modal_verdict": verdict, "runs": 1,
            **counts, "other": 0, "flake_rate": 0.0, "first_seen": "t0", "last_seen": "t0", **fields}


WHERE = "conformance/suite/test_backoff.py:88 in test_interval"
TWO_SUBJECTS = [
    _cell("broker", "window.1", "PASS"),
    _cell("broker", "window.2", "FAIL", latest_reason="no confirmation"),
    _cell("broker", "window.1", "PASS", target="artemis", target_version="2.44.0"),
    _cell("client", "backoff.1", "PASS", client="kit"),
    _cell("client", "backoff.1", "KIT_ERROR", client="artemis@2.44.0", latest_kit_error_type="KitError",
          latest_kit_error_where=WHERE, latest_reason=f"kit error in call: KitError: harness died (at {WHERE})"),
    _cell("client", "backoff.2", "KIT_ERROR", client="kit", latest_kit_error_type="TypeError",
          latest_kit_error_where="reference/client/_session.py:10 in send"),
]


@pytest.fixture(scope="module")
def two_subjects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site (no Spark) of a broker matrix and a client matrix, with KIT_ERROR cells and their pages."""
    out = tmp_path_factory.mktemp("two-subjects")
    runs = [{"run_id": "r1", "subject": "client", "target": "reference", "target_version": "0.1.0",
             "kit_error_type": "KitError", "kit_error_where": WHERE, "run_started": "t0", "verdict": "KIT_ERROR",
             "reason": "kit error"}]
    pages = [CasePage(column=MatrixColumn.of(cell), case_id=cell["case_id"], summary=cell,
                      runs=runs if cell["latest_verdict"] == "KIT_ERROR" else [], record=None, evidence={})
             for cell in TWO_SUBJECTS]
    render_site(SiteData(evidence="ev", runs=[], matrix=TWO_SUBJECTS, case_pages=pages), out)
    return out


def test_the_index_shows_a_broker_and_a_client_matrix_each_with_its_summary(two_subjects: Path) -> None:
    index = (two_subjects / "index.html").read_text(encoding="utf-8")
    assert index.index('id="broker-matrix"') < index.index('id="client-matrix"')
    assert "<h2>Broker matrix <small>targets \N{MULTIPLICATION SIGN} broker cases</small></h2>" in index
    assert "<h2>Client matrix <small>clients \N{MULTIPLICATION SIGN} client cases</small></h2>" in index
    broker, client = _matrix(index, "broker"), _matrix(index, "client")
    assert [case for case, _ in broker.rows] == ["window.1", "window.2"]
    assert [case for case, _ in client.rows] == ["backoff.1", "backoff.2"]
    heads = re.findall(r'<table class="matrix" id="(\w+)-matrix">\n<thead><tr><th>case</th><th>clause</th>(.*?)</tr>',
                       index)
    assert [(subject, re.findall(r"<th>(.*?)</th>", cells)) for subject, cells in heads] == [
        ("broker", ["artemis 2.44.0", "reference 0.1.0"]), ("client", ["artemis@2.44.0", "kit"])]
    assert _totals(index, "broker") == {"FAIL": 1, "KIT_ERROR": 0, "INDETERMINATE": 0, "PASS_LENIENT": 0,
                                        "UNSUPPORTED": 0, "PASS": 2}
    assert _totals(index, "client") == {"FAIL": 0, "KIT_ERROR": 2, "INDETERMINATE": 0, "PASS_LENIENT": 0,
                                        "UNSUPPORTED": 0, "PASS": 1}
    kit_errors = [cell for _, cells in client.rows for cell in cells if cell[2] == "KIT_ERROR"]
    assert [css for css, _, _ in kit_errors] == ["kit-error", "kit-error"]
    assert '<span class="kit-error">KIT_ERROR</span>' in index  # in the legend
    assert f"kit error KitError at {WHERE}" in index  # the cell's tooltip


def test_kit_error_has_its_own_colour(two_subjects: Path) -> None:
    base = (Path(__file__).resolve().parents[2] / "reports/templates/base.html.j2").read_text(encoding="utf-8")
    colours = dict(re.findall(r"\.([a-z-]+) \{ background: (#[0-9a-f]{6});", base))
    assert colours["kit-error"] not in {colours[name] for name in ("pass", "lenient", "unsupported", "indeterminate",
                                                                   "fail", "other")}


def test_a_kit_error_case_page_names_the_type_and_where(two_subjects: Path) -> None:
    column = MatrixColumn("client", "artemis@2.44.0")
    page = (two_subjects / case_page_path(column, "backoff.1")).read_text(encoding="utf-8")
    assert '<code id="kit-error-type">KitError</code>' in page
    assert f'<code id="kit-error-where">{WHERE}</code>' in page
    assert "client artemis@2.44.0, against reference 0.1.0" in page
    assert f"<td>KitError at {WHERE}</td>" in page  # in the verdict per run
    passed = (two_subjects / case_page_path(MatrixColumn("client", "kit"), "backoff.1")).read_text(encoding="utf-8")
    assert 'id="kit-error"' not in passed


def test_a_broker_column_and_a_client_column_of_one_name_have_their_own_pages(two_subjects: Path) -> None:
    broker = case_page_path(MatrixColumn("broker", "artemis", "2.44.0"), "backoff.1")
    client = case_page_path(MatrixColumn("client", "artemis@2.44.0"), "backoff.1")
    assert broker == "cases/broker/artemis@2.44.0/backoff.1.html"
    assert client == "cases/client/artemis@2.44.0/backoff.1.html"
    index = (two_subjects / "index.html").read_text(encoding="utf-8")
    links = {link for subject in ("broker", "client") for _, cells in _matrix(index, subject).rows
             for _, link, _ in cells if link}
    assert len(links) == len(TWO_SUBJECTS)
    assert all((two_subjects / link).is_file() for link in links)


def test_case_pages_link_their_wire_log(site: Path) -> None:
    page = (site / "cases/broker/reference@0.1.0/window.flush-close.1.html").read_text(encoding="utf-8")
    assert 'id="evidence-wire"' in page
    link = re.search(r'href="(window\.flush-close\.1\.wire\.jsonl)"', page)
    assert link
    rows = (site / "cases/broker/reference@0.1.0" / link.group(1)).read_text(encoding="utf-8").splitlines()
    assert rows
    assert all(json.loads(row)["kind"] == "wire" for row in rows)


def test_a_case_page_spark_built_tells_its_story_with_the_historys_operations(site: Path) -> None:
    """The pipeline's side of a case page (the clause looked up in the table, the history rows of the diagram's
    span read from Parquet): reattach.loss.5's diagram draws its sends' confirmations and the drain's receipts."""
    dom = html.fromstring((site / "cases/broker/reference@0.1.0/reattach.loss.5.html").read_text(encoding="utf-8"))

    def text(element_id: str) -> str:
        return " ".join(" ".join(dom.get_element_by_id(element_id).itertext()).split())

    assert "100% transparently" in text("clause-text")
    assert text("case-verdict") == "PASS"
    assert text("sequence-window").startswith(
        "Frames 6 to 38 of 38 the fault proxy logged, around the first frame it dropped (frame 26)")
    [svg] = dom.xpath('//svg[@id="sequence-diagram"]')
    texts = [" ".join(t.itertext()) for t in svg.xpath(".//*[local-name()='text']")]
    operations = [t for t in texts if t.startswith(("producer-1 send", "drain received"))]
    assert operations == [*(f"producer-1 send k{n} confirmed" for n in range(4)),
                          *(f"drain received k{n} (delivery 1), ack confirmed" for n in range(4))]
    assert texts.index("REATTACH_SESSION ch1 last_confirmed=7") < texts.index("producer-1 send k3 confirmed")
    assert "not ok" not in text("history-findings-table")
    restart = (site / "cases/broker/reference@0.1.0/restart.messages.4.html").read_text(encoding="utf-8")
    assert "No wire log: the case used no fault proxy." in restart  # its history is not read: no diagram


def test_the_history_read_for_a_case_page_is_the_diagrams_span_of_its_run_and_case(
        spark: SparkSession, table: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    def wire(ms: int, action: str = "forwarded") -> dict[str, Any]:
        return {"label": None, "ts_ns": ms * 1_000_000, "seq": ms, "action": action, "packet": "PING()"}

    def op(run_id: str, case_id: str, ms: int, index: int) -> dict[str, Any]:
        return {"run_id": run_id, "case_id": case_id, "index": index, "type": "ok", "f": "send",
                "value": f"k{index}", "process": "p", "time_ns": ms * 1_000_000}

    # a cut at 50 ms of 100 frames (1 a ms): frames 30 to 99 drawn, the log's end open; of 200 frames, 30 to 110
    evidence = {("r1", "a"): {"wire": [wire(ms, "cut" if ms == 50 else "forwarded") for ms in range(100)]},
                ("r1", "b"): {"wire": [wire(ms, "cut" if ms == 50 else "forwarded") for ms in range(200)]},
                ("r1", "c"): {"history_result": [{"ok": True}]}}  # no wire rows: no diagram, no history read
    history = table("history", op("r1", "a", 29, 0), op("r1", "a", 30, 1), op("r1", "a", 500, 2),
                    op("r2", "a", 40, 3), op("r1", "b", 29, 4), op("r1", "b", 110, 5), op("r1", "b", 111, 6),
                    op("r1", "c", 40, 7))
    read = _windowed_history(history, spark, evidence)
    assert {key: [row["index"] for row in rows] for key, rows in read.items()} == {("r1", "a"): [1, 2],
                                                                                 ("r1", "b"): [5]}
    monkeypatch.setattr(pipeline, "HISTORY_DRAWN", 1)  # the first operations of the span only
    assert [row["index"] for row in _windowed_history(history, spark, evidence)[("r1", "a")]] == [1]


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
        ["allure", "attempt", "case", "end", "history", "history_result", "note", "run", "timing", "wire"])


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
