"""The plugin end to end, on tiny inline suites run by ``pytester``: verdicts, exit statuses, --strict-should,
known deviations, selection, the header, clause-table errors, evidence and allure files, and the suite run
when no path is given.  Almost every run uses a url target nobody listens on and cases that never connect, so
no broker is needed; one runs a real case against the reference broker."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from cck.conformance.evidence import schema
from cck.conformance.plugin._hooks import parses_badly

# Here rather than in a conftest: a conftest below the rootdir may not declare plugins when `pytest tests` runs.
pytest_plugins = ["pytester"]

CLAUSES = '''
[[clause]]
id = "demo.must"
level = "MUST"
source = "spec 000 (demo), paragraph 1"
text = "The broker must answer."

[[clause]]
id = "demo.should"
level = "SHOULD"
source = "https://example.org/manual#should"
text = "The broker should answer fast."

[[clause]]
id = "demo.disputed"
level = "MUST"
source = "spec 000 (demo), paragraph 2"
text = "The documents say one thing."
implementation = "Artemis does another."
implementation_source = "artemis-core-notes §1"
'''

SUITE = '''
from cck.conformance.cases import Case, cases
from cck.conformance.verdicts import indeterminate, unsupported

TABLE = (
    Case("demo.run.1", "demo.must", "passes", "it passes", params={"do": "pass"}),
    Case("demo.run.2", "demo.must", "fails", "it passes", params={"do": "fail"}),
    Case("demo.run.3", "demo.should", "fails a SHOULD", "it passes", params={"do": "fail"}),
    Case("demo.run.4", "demo.must", "cannot run here", "it passes", params={"do": "unsupported"}),
    Case("demo.run.5", "demo.must", "cannot tell", "it passes", params={"do": "indeterminate"}),
    Case("demo.run.6", "demo.disputed", "misses a SHOULD", "it passes", checks="implementation",
         params={"do": "should"}),
)

def rows(*wanted):
    return [case for case in TABLE if case.params["do"] in wanted]

@cases(*rows(*{wanted}))
def test_demo(case, evidence):
    evidence.note("did", case.params["do"])
    if case.params["do"] == "fail":
        assert case.params["do"] == "pass", "the broker did not answer"
    elif case.params["do"] == "unsupported":
        unsupported("needs a broker the kit can kill")
    elif case.params["do"] == "indeterminate":
        indeterminate("the machine was too slow to judge")
    elif case.params["do"] == "should":
        evidence.should(False, "the broker should have answered in 1 s")
'''

ALL = ("pass", "fail", "unsupported", "indeterminate", "should")


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A directory with a clause table and no CCK_* variables from the outer run."""
    for name in list(os.environ):
        if name.startswith("CCK_"):
            monkeypatch.delenv(name)
    (pytester.path / "clauses").mkdir()
    (pytester.path / "clauses" / "demo.toml").write_text(CLAUSES)
    return pytester


def suite(pytester: pytest.Pytester, *wanted: str) -> None:
    pytester.makepyfile(test_demo=SUITE.replace("{wanted}", repr(wanted)))


def run(pytester: pytest.Pytester, *args: str, path: str | None = ".") -> pytest.RunResult:
    """The inner run, on ``path`` (without one, the plugin picks the suite): a url target nobody listens on."""
    # in-process runs import the kit once; pytest's note that it cannot rewrite it again is noise here
    return pytester.runpytest("-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning",
                              "--broker-url", "tcp://127.0.0.1:9", "--skip-preflight", "--clause-table", "clauses",
                              *args,
                              *([path] if path else []))


def test_each_verdict_and_exit_status_1(kit: pytest.Pytester) -> None:
    suite(kit, *ALL)
    result = run(kit, "-rA")
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "*conformance verdicts*",
        "6 broker cases against url tcp://127.0.0.1:9*: PASS 1, PASS_LENIENT 2, UNSUPPORTED 1, INDETERMINATE 1, FAIL 1",
        "  demo.run.2  FAIL  AssertionError: the broker did not answer",
        "  demo.run.3  PASS_LENIENT  SHOULD not met: AssertionError: the broker did not answer",
        "  demo.run.4  UNSUPPORTED  needs a broker the kit can kill",
        "  demo.run.5  INDETERMINATE  the machine was too slow to judge",
        "  demo.run.6  PASS_LENIENT  SHOULD missed: the broker should have answered in 1 s",
        "exit status 1: a case failed",
    ])
    # pytest's own display agrees: UNSUPPORTED is a skip with its reason, lenient passes are passes
    result.assert_outcomes(passed=3, failed=2, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*UNSUPPORTED: needs a broker the kit can kill"])


def test_verdict_is_in_user_properties(kit: pytest.Pytester) -> None:
    suite(kit, "unsupported")
    kit.makeconftest('''
def pytest_runtest_logreport(report):
    if report.when == "teardown":
        print("PROPS", dict(report.user_properties))
''')
    result = run(kit, "-s")
    result.stdout.fnmatch_lines(["*PROPS*'cck_verdict': 'UNSUPPORTED'*"])


def test_all_conforming_exits_0(kit: pytest.Pytester) -> None:
    suite(kit, "pass", "unsupported", "should")
    result = run(kit)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["exit status 0: every case conforms"])


def test_indeterminate_without_failures_exits_2(kit: pytest.Pytester) -> None:
    suite(kit, "pass", "indeterminate")
    result = run(kit)
    assert result.ret == 2
    result.stdout.fnmatch_lines(["exit status 2: no case failed, but some were indeterminate"])


def test_strict_should_turns_should_misses_into_fail(kit: pytest.Pytester) -> None:
    suite(kit, "fail", "should")
    result = run(kit, "--strict-should", "--case", "demo.run.[36]")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["  demo.run.3  FAIL  AssertionError*", "  demo.run.6  FAIL  SHOULD missed (strict)*"])
    assert run(kit, "--case", "demo.run.[36]").ret == 0


def test_known_deviations_match_and_go_stale(kit: pytest.Pytester) -> None:
    suite(kit, "pass", "fail", "indeterminate")
    kit.makefile(".toml", deviations='''
[[deviation]]
case = "demo.run.2"
verdict = "FAIL"
reason = "Artemis does not answer this"

[[deviation]]
case = "demo.run.[15]"
verdict = "FAIL"
reason = "was broken once"
link = "https://example.org/issue/1"
''')
    result = run(kit, "--deviations", "deviations.toml", "-rx")
    # demo.run.5 is INDETERMINATE, not the FAIL its entry expects: still open, so exit 2
    assert result.ret == 2
    result.stdout.fnmatch_lines([
        "*; 2 known deviations (deviations.toml)",
        "  demo.run.2  FAIL (known deviation: Artemis does not answer this)",
        "known deviations that did not reproduce (remove or correct them):",
        "  demo.run.1: expected FAIL, got PASS (deviations.toml entry #2 (demo.run.[15], FAIL))",
        "  demo.run.5: expected FAIL, got INDETERMINATE*",
        "XFAIL*demo.run.2*FAIL (known deviation: Artemis does not answer this)",
    ])


def test_known_failure_alone_exits_0(kit: pytest.Pytester) -> None:
    suite(kit, "fail")
    kit.makefile(".toml", deviations='[[deviation]]\ncase = "demo.run.*"\nverdict = "FAIL"\nreason = "known"\n')
    result = run(kit, "--deviations", "deviations.toml", "--case", "demo.run.2")
    assert result.ret == 0
    result.assert_outcomes(xfailed=1, deselected=1)


@pytest.mark.parametrize(("text", "message"), [
    ('[[deviation]]\ncase = "demo.run.2"\nverdict = "FAIL"\n', "deviation #1 (demo.run.2): field 'reason' is "
                                                              "required"),
    ('[[deviation]]\ncase = "x.y.1"\nverdict = "PASS"\nreason = "r"\n', "deviation #1 (x.y.1): verdict 'PASS' is "
                                                                         "not one of"),
    ('[[deviation]]\ncase = "x.y.1"\nverdict = "FAIL"\nreason = "r"\nwhy = 1\n',
     "deviation #1 (x.y.1): unknown field(s) why"),
])
def test_bad_deviation_file_is_a_usage_error(kit: pytest.Pytester, text: str, message: str) -> None:
    suite(kit, "pass")
    kit.makefile(".toml", deviations=text)
    result = run(kit, "--deviations", "deviations.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: known deviations: deviations.toml: {message}*"])


def test_case_and_clause_selection(kit: pytest.Pytester) -> None:
    suite(kit, *ALL)
    result = run(kit, "--case", "demo.run.[12]", "--case", "demo.run.6")
    result.assert_outcomes(passed=2, failed=1, deselected=3)
    result = run(kit, "--clause", "demo.should")
    result.assert_outcomes(passed=1, deselected=5)
    result = run(kit, "--clause", "demo.*", "--case", "demo.run.1")
    result.assert_outcomes(passed=1, deselected=5)


def test_clause_selection_names_an_unknown_clause(kit: pytest.Pytester) -> None:
    suite(kit, "pass")
    result = run(kit, "--clause", "demo.nothing")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--clause: 'demo.nothing' is not in the clause table (from --clause*"])


def test_selection_from_the_environment(kit: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    suite(kit, *ALL)
    monkeypatch.setenv("CCK_CASE", "demo.run.1,demo.run.4")
    run(kit).assert_outcomes(passed=1, skipped=1, deselected=4)


def test_header_names_target_mode_timing_and_evidence(kit: pytest.Pytester) -> None:
    suite(kit, "pass")
    result = run(kit, "--artemis-version", "2.44.0", "--timing-scale", "2", "--strict-should",
                 "--evidence-dir", "ev")
    result.stdout.fnmatch_lines([
        "core conformance: broker cases against url tcp://127.0.0.1:9, declared version 2.44.0 (black box); "
        "run *-url-*",
        "core conformance: strict (a missed SHOULD is FAIL); timing scale x2, tolerance ±(25 ms + 5%) x 2 (an expected "
        "interval under 56 ms cannot be told from no wait at all)",
        "core conformance: evidence ev*; * known deviations (*artemis-2.44.0.toml)",
    ])


def test_clause_missing_from_the_table_is_a_collection_error(kit: pytest.Pytester) -> None:
    kit.makepyfile(test_bad='''
from cck.conformance.cases import Case, cases

@cases(Case("demo.bad.1", "demo.absent", "d", "e"))
def test_bad(case):
    pass
''')
    result = run(kit)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "*ERROR collecting test_bad.py*",
        "case demo.bad.1 (test_bad.py::test_bad[demo.bad.1]) cites clause 'demo.absent', which is not in the "
        "clause table (clauses)",
    ])


def test_checking_one_side_needs_a_recorded_disagreement(kit: pytest.Pytester) -> None:
    kit.makepyfile(test_side='''
from cck.conformance.cases import Case, cases

@cases(Case("demo.side.1", "demo.must", "d", "e", checks="spec"))
def test_side(case):
    pass
''')
    result = run(kit)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["case demo.side.1 * checks the 'spec' side of clause 'demo.must', but the clause "
                                 "records no implementation disagreement*"])


@pytest.mark.parametrize(("text", "message"), [
    ('[[clause]]\nid = "x.y"\nlevel = "MUSTNT"\nsource = "s"\ntext = "t"\n',
     "bad.toml: clause #1 (x.y): level 'MUSTNT' is not one of MUST, SHOULD, MAY"),
    ('[[clause]]\nid = "x.y"\nlevel = "MUST"\nsource = "s"\n',
     "bad.toml: clause #1 (x.y): field 'text' is required"),
    ('[[clause]]\nid = "demo.must"\nlevel = "MUST"\nsource = "s"\ntext = "t"\n',
     "demo.toml: clause 'demo.must' is already defined in bad.toml"),
])
def test_bad_clause_table_is_a_usage_error(kit: pytest.Pytester, text: str, message: str) -> None:
    suite(kit, "pass")
    (kit.path / "clauses" / "bad.toml").write_text(text)
    result = run(kit)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_evidence_and_allure_results(kit: pytest.Pytester) -> None:
    suite(kit, *ALL)
    result = run(kit, "--evidence-dir", "ev")
    assert result.ret == 1
    (run_dir,) = (kit.path / "ev").iterdir()
    run_record = json.loads((run_dir / "run.json").read_text())
    assert schema.validate(run_record) == []
    assert run_record["exit_status"] == 1
    assert run_record["verdict_counts"] == {"PASS": 1, "FAIL": 1, "PASS_LENIENT": 2, "UNSUPPORTED": 1,
                                            "INDETERMINATE": 1}
    assert run_record["settings"]["sources"]["target"] == "implied by --broker-url"
    rows = {kind: [json.loads(line) for line in (run_dir / name).read_text().splitlines()]
            for kind, name in schema.FILES.items() if kind != "run" and (run_dir / name).exists()}
    assert set(rows) == {"case", "note"}
    for kind, records in rows.items():
        for record in records:
            assert schema.validate(record, kind) == [], record
    verdicts = {r["case_id"]: r["verdict"] for r in rows["case"]}
    assert verdicts == {"demo.run.1": "PASS", "demo.run.2": "FAIL", "demo.run.3": "PASS_LENIENT",
                        "demo.run.4": "UNSUPPORTED", "demo.run.5": "INDETERMINATE", "demo.run.6": "PASS_LENIENT"}
    assert {r["case_id"]: r["value"] for r in rows["note"]}["demo.run.4"] == "unsupported"
    results = [json.loads(p.read_text()) for p in (run_dir / "allure-results").glob("*-result.json")]
    assert len(results) == 6
    by_id = {next(lb["value"] for lb in r["labels"] if lb["name"] == "case_id"): r for r in results}
    labels = {(lb["name"], lb["value"]) for lb in by_id["demo.run.3"]["labels"]}
    assert {("story", "demo.should"), ("suite", "demo"), ("severity", "normal"), ("verdict", "PASS_LENIENT"),
            ("target", "url unknown")} <= labels
    assert by_id["demo.run.3"]["links"][0]["url"] == "https://example.org/manual#should"
    assert ("clause_source", "spec 000 (demo), paragraph 1") in {
        (lb["name"], lb["value"]) for lb in by_id["demo.run.1"]["labels"]}


def test_unsupported_on_a_url_target_when_the_case_needs_its_own_broker(kit: pytest.Pytester) -> None:
    kit.makepyfile(test_topology='''
from cck.conformance.cases import Case, cases
from cck.conformance.targets import Topology

@cases(Case("demo.topo.1", "demo.must", "needs a broker configured by the kit", "it runs"))
def test_topology(case, cck_make_target):
    cck_make_target(Topology.single())
''')
    result = run(kit, "-rs")
    assert result.ret == 0
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*UNSUPPORTED: the case needs a broker configured by the kit*"])


def test_inert_without_a_target(kit: pytest.Pytester) -> None:
    suite(kit, "fail", "pass")
    result = kit.runpytest("-p", "no:cacheprovider")
    assert result.ret == 1
    result.assert_outcomes(passed=1, failed=2)  # no lenient SHOULD, no verdicts: plain pytest
    assert "core conformance" not in result.stdout.str()
    assert "conformance verdicts" not in result.stdout.str()


def test_no_path_runs_the_suite(kit: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    suite_dir = kit.mkdir("kit_suite")
    (suite_dir / "test_in_suite.py").write_text(SUITE.replace("{wanted}", repr(("pass",))))
    (kit.path / "test_outside.py").write_text("def test_outside():\n    pass\n")
    monkeypatch.setattr("cck.conformance.plugin._hooks.SUITE_DIR", Path(suite_dir))
    result = run(kit, "--collect-only", "-q", path=None)
    result.stdout.fnmatch_lines(["kit_suite/test_in_suite.py::test_demo[demo.run.1]"])
    assert "test_outside" not in result.stdout.str()
    # with a path, that path; without a conformance option, pytest's usual choice
    assert "test_in_suite" not in run(kit, "--collect-only", "-q", path="test_outside.py").stdout.str()
    assert "test_outside" in kit.runpytest("-p", "no:cacheprovider", "--collect-only", "-q").stdout.str()


def test_a_real_case_against_the_reference_broker(kit: pytest.Pytester) -> None:
    kit.makepyfile(test_real='''
from cck.conformance.cases import Case, cases

@cases(Case("demo.real.1", "demo.must", "connects", "the broker listens"))
def test_real(case, cck_target, cck_settings):
    assert cck_settings.target == "reference"
    assert cck_target.nodes[0].url.startswith("tcp://")
''')
    result = kit.runpytest("-p", "no:cacheprovider", "--target", "reference", "--clause-table", "clauses",
                               "test_real.py")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["core conformance: broker cases against reference broker * (protocol *), managed by "
                                 "the kit*",
                                 "1 broker cases against reference broker*: PASS 1"])


def test_a_case_that_fails_keeps_its_brokers_logs(kit: pytest.Pytester) -> None:
    kit.makepyfile(test_logs='''
from cck.conformance.cases import Case, cases
from cck.conformance.targets import Topology

@cases(Case("demo.logs.1", "demo.must", "a broker, then nothing wrong", "it runs"),
       Case("demo.logs.2", "demo.must", "a broker, then a broken clause", "it runs"))
def test_logs(case, cck_make_target, evidence):
    cck_make_target(Topology.single())
    assert case.id.endswith(".1"), "the clause is broken"
''')
    result = kit.runpytest("-p", "no:cacheprovider", "--target", "reference", "--clause-table", "clauses",
                           "--evidence-dir", "ev", "test_logs.py")
    assert result.ret == 1, result.stdout.str()
    (run_dir,) = (kit.path / "ev").iterdir()
    (kept,) = (run_dir / "logs" / "demo.logs.2").iterdir()  # the one node of the failing case; none of the other
    assert kept.name.endswith("-node0.log")
    assert "demo.logs.1" not in {p.name for p in (run_dir / "logs").iterdir()}
    assert kept.read_text().strip(), "the node's log is empty"
    notes = [json.loads(line) for line in (run_dir / "notes.jsonl").read_text().splitlines()]
    (paths,) = [n["value"] for n in notes if n["case_id"] == "demo.logs.2" and n["key"] == "node_logs"]
    assert paths == [kept.relative_to(run_dir).as_posix()]


POOL = '''
import pytest

from cck.conformance.cases import Case, cases
from cck.conformance.targets import Topology

SEEN = []
TOPOLOGY = Topology.single()


def one(n, what):
    return cases(Case(f"demo.pool.{n}", "demo.must", what, "it runs"))


@one(1, "asks for a topology")
def test_first(case, cck_make_target):
    SEEN.append(cck_make_target(TOPOLOGY).url)


@one(2, "asks for it again")
def test_again(case, cck_make_target):
    SEEN.append(cck_make_target(TOPOLOGY).url)


@one(3, "asks for it, but fresh")
@pytest.mark.cck_fresh_broker
def test_fresh(case, cck_make_target):
    SEEN.append(cck_make_target(TOPOLOGY).url)


@one(4, "asks for it and restarts the node")
def test_restarts(case, cck_make_target):
    target = cck_make_target(TOPOLOGY)
    SEEN.append(target.url)
    target.nodes[0].restart()


@one(5, "asks for it and fails")
def test_fails(case, cck_make_target):
    SEEN.append(cck_make_target(TOPOLOGY).url)
    assert False, "the broker did not answer"


@one(6, "asks for it after all that")
def test_after(case, cck_make_target):
    SEEN.append(cck_make_target(TOPOLOGY).url)
    first, again, fresh, restarted, failed, after = SEEN
    assert first == again == restarted, "a target left as found is handed to the next case asking for it"
    assert fresh not in (first, failed, after), "a fresh case gets brokers of its own"
    assert failed != restarted, "a restarted target is not kept"
    assert after != failed, "a failed case's target is not kept"
'''


def test_a_target_left_as_found_is_handed_to_the_next_case(kit: pytest.Pytester) -> None:
    kit.makepyfile(test_pool=POOL)
    result = kit.runpytest("-p", "no:cacheprovider", "--target", "reference", "--clause-table", "clauses",
                           "test_pool.py")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["*demo.pool.5*FAIL*"])
    assert "demo.pool.6" not in result.stdout.str(), result.stdout.str()

FLAVOUR = '''
import pytest

from cck.conformance.cases import Case, cases
from cck.conformance.targets import Topology

SEEN = []
TOPOLOGY = Topology.single()


def one(n, what):
    return cases(Case(f"demo.jvm.{n}", "demo.must", what, "it runs"))


@one(1, "measures no times")
def test_untimed(case, cck_make_target, cck_targets):
    SEEN.append((cck_targets.quick, cck_make_target(TOPOLOGY).url))


@one(2, "measures times")
@pytest.mark.cck_alone
def test_timed(case, cck_make_target, cck_targets):
    SEEN.append((cck_targets.quick, cck_make_target(TOPOLOGY).url))


@one(3, "measures no times again")
def test_untimed_again(case, cck_make_target, cck_targets):
    SEEN.append((cck_targets.quick, cck_make_target(TOPOLOGY).url))


@one(4, "looks back")
def test_look(case, cck_settings):
    (q1, url1), (q2, url2), (q3, url3) = SEEN
    if cck_settings.quick_start:
        assert (q1, q2, q3) == (True, False, True)
        assert url2 != url1 and url3 == url1, "a quick target is kept for quick cases only"
    else:
        assert (q1, q2, q3) == (False, False, False)
        assert url1 == url2 == url3
'''


@pytest.mark.parametrize("full_jit", [False, True])
def test_a_case_that_measures_times_gets_brokers_started_for_timing(kit: pytest.Pytester, full_jit: bool) -> None:
    kit.makepyfile(test_flavour=FLAVOUR)
    result = kit.runpytest("-p", "no:cacheprovider", "--target", "reference", "--clause-table", "clauses",
                           *(["--full-jit"] if full_jit else []), "test_flavour.py")
    result.assert_outcomes(passed=4)


# -- the cause decides: a kit error is never FAIL, PASS or PASS_LENIENT ------------------------------------------

CAUSES = '''
import asyncio
import pytest

from cck.conformance.cases import Case, cases
from cck.conformance.oracles import History, check
from cck.conformance.suite._kit import judged_afterwards, run
from cck.conformance.verdicts import NotObserved
from cck.reference.client import connect


@cases(Case("demo.cause.1", "demo.should", "a SHOULD case whose own code has a bug", "it passes"))
def test_kit_bug(case):
    "nothing" + 1


@cases(Case("demo.cause.2", "demo.must", "a broker that closes every connection", "a session opens"))
def test_broker_closes(case):
    async def scenario():
        async def close_at_once(reader, writer):
            writer.close()
        server = await asyncio.start_server(close_at_once, "127.0.0.1", 0)
        async with server:
            port = server.sockets[0].getsockname()[1]
            connection = await connect(f"tcp://127.0.0.1:{port}", connect_timeout=5)
            await connection.create_session()
    asyncio.run(scenario())


@cases(Case("demo.cause.3", "demo.must", "a wire check fails before the history is judged", "nothing lost"))
def test_history_after_a_wire_check(case, evidence):
    history = History()
    history.invoke_send("producer-1", "m1", producer="P1", seq=0)
    history.ok("producer-1", "send", "m1", producer="P1", seq=0)  # confirmed, never received: lost

    def judge():
        result = check(history)
        evidence.history(history, result, label="demo")
        assert result.ok, result.explanation

    async def scenario():
        async with judged_afterwards(judge):
            assert False, "the broker named a command it never received"
    asyncio.run(scenario())


@cases(Case("demo.cause.4", "demo.must", "a wait of the kit that names nothing", "it passes"))
def test_bare_timeout(case):
    raise TimeoutError()


@cases(Case("demo.cause.5", "demo.must", "the subject does not do it in time", "it is done within 1 s"))
def test_not_observed(case):
    raise NotObserved("no PACKETS_CONFIRMED within 1 s")


@cases(Case("demo.cause.6", "demo.must", "a case slow everywhere", "it ends"))
def test_overall_deadline(case, cck_settings):
    run(cck_settings, asyncio.sleep(30), 0.2)


@pytest.fixture
def broken_cleanup():
    yield
    raise KeyError("port")


@cases(Case("demo.cause.7", "demo.must", "the check passes, the kit's cleanup breaks", "it passes"))
def test_cleanup(case, broken_cleanup):
    pass
'''


def test_the_cause_decides_the_verdict(kit: pytest.Pytester) -> None:
    kit.makepyfile(test_causes=CAUSES)
    result = run(kit, "--evidence-dir", "ev")
    result.stdout.fnmatch_lines([
        "*conformance verdicts*",
        "7 broker cases against *: INDETERMINATE 1, FAIL 3, KIT_ERROR 3",
        # a TypeError in a SHOULD case: the kit's error, not a missed SHOULD, named with where it was raised
        "  demo.cause.1  KIT_ERROR  kit error in call: TypeError: can only concatenate str *(at *test_causes.py:13 "
        "in test_kit_bug)",
        # the broker closed the connection: the kit's client's error is a failed check of the broker
        "  demo.cause.2  FAIL  cck.reference.client._errors.ConnectFailed: connection failed: the TCP connection * "
        "closed*",
        "  demo.cause.3  FAIL  AssertionError: the broker named a command it never received",
        "  demo.cause.4  KIT_ERROR  kit error in call: TimeoutError*",
        "  demo.cause.5  FAIL  cck.conformance.verdicts.NotObserved: no PACKETS_CONFIRMED within 1 s",
        "  demo.cause.6  INDETERMINATE  the case did not finish within its overall deadline of 0 s",
        "  demo.cause.7  KIT_ERROR  kit error in teardown: KeyError: 'port'*",
        "exit status 1: a case failed",
    ])
    (run_dir,) = (kit.path / "ev").iterdir()
    cases_ = {r["case_id"]: r for r in map(json.loads, (run_dir / "cases.jsonl").read_text().splitlines())}
    assert cases_["demo.cause.1"]["kit_error"] == {"type": "TypeError",
                                                    "where": cases_["demo.cause.1"]["kit_error"]["where"]}
    assert cases_["demo.cause.1"]["kit_error"]["where"].endswith("test_causes.py:13 in test_kit_bug")
    assert cases_["demo.cause.2"]["kit_error"] is None
    # the history was judged and written although the wire check failed first, and the failure names both
    assert "and afterwards: AssertionError:" in cases_["demo.cause.3"]["reason"]
    assert "lost" in cases_["demo.cause.3"]["reason"]
    (judged,) = [json.loads(line) for line in (run_dir / "history_results.jsonl").read_text().splitlines()]
    assert judged["case_id"] == "demo.cause.3"
    assert judged["ok"] is False
    for record in cases_.values():
        assert schema.validate(record, "case") == [], record


def test_kit_error_without_failures_exits_3(kit: pytest.Pytester) -> None:
    kit.makepyfile(test_causes=CAUSES)
    result = run(kit, "--case", "demo.cause.1", "--case", "demo.cause.6")
    assert result.ret == 3
    result.stdout.fnmatch_lines(["exit status 3: no case failed, but the kit itself erred in some (KIT_ERROR*"])


def test_a_kit_error_matches_no_known_deviation(kit: pytest.Pytester) -> None:
    kit.makepyfile(test_causes=CAUSES)
    kit.makefile(".toml", deviations='[[deviation]]\ncase = "demo.cause.1"\nverdict = "FAIL"\nreason = "known"\n')
    result = run(kit, "--deviations", "deviations.toml", "--case", "demo.cause.1")
    assert result.ret == 3
    assert "did not reproduce" not in result.stdout.str()
    kit.makefile(".toml", deviations='[[deviation]]\ncase = "x.y.1"\nverdict = "KIT_ERROR"\nreason = "r"\n')
    result = run(kit, "--deviations", "deviations.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*verdict 'KIT_ERROR' is not one of*"])


# -- subjects: a run judges the broker, or the client under test --------------------------------------------------

SUBJECTS = '''
from cck.conformance.cases import Case, cases


@cases(Case("demo.broker.1", "demo.must", "the broker answers", "it does"))
def test_broker(case):
    pass


@cases(Case("demo.client.1", "demo.must", "the client backs off", "it does", subject="client"),
       Case("demo.client.2", "demo.must", "the client's cache", "it is released", subject="client"))
def test_client(case, cck_client):
    if case.id == "demo.client.2":
        cck_client.require_kit("the case reads the kit client's resend cache")
    print("CLIENT", cck_client.name)
'''


def test_a_broker_run_runs_broker_cases_only(kit: pytest.Pytester) -> None:
    kit.makepyfile(test_subjects=SUBJECTS)
    result = run(kit, "--evidence-dir", "ev")
    assert result.ret == 0
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(["1 broker cases against url *: PASS 1"])
    (run_dir,) = (kit.path / "ev").iterdir()
    run_record = json.loads((run_dir / "run.json").read_text())
    assert (run_record["subject"], run_record["client"]) == ("broker", None)
    (case,) = [json.loads(line) for line in (run_dir / "cases.jsonl").read_text().splitlines()]
    assert (case["subject"], case["client"]) == ("broker", None)


def test_a_client_run_runs_client_cases_only(kit: pytest.Pytester) -> None:
    kit.makepyfile(test_subjects=SUBJECTS)
    result = run(kit, "--client", "kit", "--evidence-dir", "ev", "-s")
    assert result.ret == 0
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(["core conformance: client cases of the kit's client (kit) against url *",
                                 "*CLIENT kit*",
                                 "2 client cases of the kit's client (kit) against url *: PASS 2"])
    (run_dir,) = (kit.path / "ev").iterdir()
    run_record = json.loads((run_dir / "run.json").read_text())
    assert (run_record["subject"], run_record["client"]) == ("client", "kit")
    rows = [json.loads(line) for line in (run_dir / "cases.jsonl").read_text().splitlines()]
    assert {(r["case_id"], r["subject"], r["client"]) for r in rows} == {
        ("demo.client.1", "client", "kit"), ("demo.client.2", "client", "kit")}


def test_a_case_the_stock_client_cannot_be_driven_through_is_unsupported(kit: pytest.Pytester) -> None:
    kit.makepyfile(test_subjects=SUBJECTS)
    result = run(kit, "--client", "artemis@2.44.0", "-s")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "*CLIENT artemis@2.44.0*",
        "2 client cases of the stock Apache Artemis 2.44.0 client (artemis@2.44.0) against *: PASS 1, UNSUPPORTED 1",
        "  demo.client.2  UNSUPPORTED  the stock Apache Artemis 2.44.0 client cannot be driven here: the case reads "
        "the kit client's resend cache",
    ])


def test_a_client_run_implies_the_reference_broker(kit: pytest.Pytester) -> None:
    kit.makepyfile(test_subjects=SUBJECTS)
    result = kit.runpytest("-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning",
                           "--client", "kit", "--clause-table", "clauses", "test_subjects.py")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["core conformance: client cases of the kit's client (kit) against reference broker*",
                                 "*; 0 known deviations (*client-kit.toml)"])


def test_a_run_that_starts_brokers_checks_their_room_first(kit: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    kit.makepyfile(test_real='''
from cck.conformance.cases import Case, cases

@cases(Case("demo.real.1", "demo.must", "connects", "the broker listens"))
def test_real(case, cck_target):
    raise AssertionError("a case ran although the preflight should have stopped the run")
''')
    monkeypatch.setattr("cck.conformance.plugin._targets.MIN_FREE_BYTES", 1 << 60)  # more than any disk
    result = kit.runpytest("-p", "no:cacheprovider", "--target", "reference", "--clause-table", "clauses",
                           "test_real.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stdout.fnmatch_lines(["*preflight failed: * MiB free; the brokers the kit starts keep their journals "
                                 "there and the run needs at least * MiB*"])
    assert "a case ran" not in result.stdout.str()


@pytest.mark.parametrize(("version", "bad"), [
    ((3, 11, 7, "final", 0), True), ((3, 11, 8, "final", 0), False), ((3, 12, 1, "final", 0), True),
    ((3, 12, 2, "final", 0), False), ((3, 13, 0, "final", 0), False), ((3, 11, 0, "final", 0), True),
])
def test_pythons_whose_ast_parse_can_crash_a_run_get_native_tracebacks(version: tuple[int, ...], bad: bool) -> None:
    assert parses_badly(version) is bad


def test_an_active_run_on_such_a_python_shows_native_tracebacks_unless_told(kit: pytest.Pytester) -> None:
    suite(kit, "fail")
    default = run(kit)
    assert default.ret == 1
    native = "Traceback (most recent call last)" in default.stdout.str()
    assert native is parses_badly(tuple(sys.version_info[:3])), default.stdout.str()
    told = run(kit, "--tb=short")
    assert told.ret == 1
    assert "Traceback (most recent call last)" not in told.stdout.str()
