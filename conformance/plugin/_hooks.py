"""The plugin's pytest hooks.  Every hook but option registration does nothing unless a target is chosen, so the
kit's own tests (and any other pytest run with the kit installed) are unaffected."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Generator
from dataclasses import replace
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest

from cck.codec import CURRENT_VERSION
from cck.conformance.artemis import pinned_protocol
from cck.conformance.cases import Case
from cck.conformance.clauses import CLAUSE_DIR, Clause, ClauseError, load_clauses
from cck.conformance.evidence import EvidenceWriter
from cck.conformance.evidence.schema import format_timestamp
from cck.conformance.targets import LEGACY_SERVERS, kit_version, launch_counts
from cck.conformance.verdicts import Verdict

from ._allure import label_case, label_verdict
from ._deviations import (
    Deviation,
    DeviationError,
    client_deviations_file,
    default_deviations_file,
    find_deviation,
    load_deviations,
)
from ._fixtures import EVIDENCE_KEY, FACTORY_KEY, FRESH_MARKER
from ._judge import Judgement, judge_phase, judge_teardown
from ._node_logs import KEPT_VERDICTS, keep_node_logs
from ._options import add_options, conformance_option_given, settings_from_config
from ._parallel import (
    ALONE_MARKER,
    PARALLEL_CONTROLLER,
    ParallelController,
    register_parallel,
    result_property,
    worker_input,
)
from ._report import header_lines, reach_lines, summary_lines, target_capabilities
from ._run import RUN_KEY, VERDICT_KEY, CaseResult, RunState, case_of, new_run_id, python_version
from ._settings import SETTINGS_KEY, Settings

__all__ = [
    "SUITE_DIR",
    "pytest_addoption",
    "pytest_load_initial_conftests",
    "pytest_configure",
    "pytest_report_header",
    "pytest_make_collect_report",
    "pytest_collection_modifyitems",
    "pytest_collection_finish",
    "pytest_runtest_setup",
    "pytest_runtest_makereport",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
]

#: The kit's conformance suite, run when a conformance option is given without any test path.
#: Not resolved: in a checkout, cck/conformance/suite (collected as cck.conformance.suite.*), not the bare folder.
SUITE_DIR = Path(__file__).absolute().parent.parent / "suite"

_STARTED_KEY = pytest.StashKey[float]()
_DURATION_KEY = pytest.StashKey[float]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """``pytest --broker-url tcp://host:61616`` with no path runs the kit's suite, not the ini's testpaths."""
    namespace = early_config.known_args_namespace
    if getattr(namespace, "help", False) or getattr(namespace, "version", False):
        return
    if conformance_option_given(namespace) and not getattr(namespace, "file_or_dir", None) \
            and not getattr(namespace, "pyargs", False):
        args.append(str(SUITE_DIR))


def _versions(settings: Settings) -> tuple[str | None, int | None]:
    """The target's version and core protocol version, as far as the kit knows them."""
    if settings.target == "reference":
        return kit_version(), CURRENT_VERSION
    server = LEGACY_SERVERS.get(settings.target or "")
    if server is not None:
        return server.version, server.protocol_version
    target_file = settings.target_file
    if target_file is not None and target_file.broker == "reference":
        return target_file.version, target_file.protocol_version or CURRENT_VERSION
    if target_file is not None and target_file.protocol_version is not None:
        return target_file.version, target_file.protocol_version
    return settings.artemis_version, pinned_protocol(settings.artemis_version)


def _deviations_kind(settings: Settings) -> str:
    """Whose known deviations apply: a target file running the reference broker or Artemis is that broker."""
    assert settings.target is not None
    target_file = settings.target_file
    if target_file is not None and target_file.broker in ("reference", "artemis"):
        return "reference" if target_file.broker == "reference" else "url"  # url: Artemis of the declared version
    return settings.target


def _check_clause_selection(settings: Settings, clauses: dict[str, Clause]) -> None:
    for pattern in settings.clauses:
        if not any(ch in pattern for ch in "*?[") and pattern not in clauses:
            raise pytest.UsageError(f"--clause: {pattern!r} is not in the clause table "
                                    f"(from {settings.sources.get('clause', 'default')}; "
                                    "`cck clauses` lists them)")


def parses_badly(version: tuple[int, ...]) -> bool:
    """Whether this Python can raise ``SystemError: AST constructor recursion depth mismatch`` from ``ast.parse``
    (CPython before 3.11.8 and 3.12.2, python/cpython#106905).  pytest parses a failed test's source to show its
    traceback; the error escapes as an INTERNALERROR and ends the whole run, losing every later case's verdict.
    A native traceback (``--tb=native``) parses nothing, so an active run on such a Python uses it unless ``--tb``
    was given."""
    return (3, 11) <= version[:3] < (3, 11, 8) or (3, 12) <= version[:3] < (3, 12, 2)


@pytest.hookimpl(tryfirst=True)  # before allure-pytest's, which reads the allure results directory we may set
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{FRESH_MARKER}: the case gets brokers no case used before it, and none uses "
                            "them after it (it changes a broker in a way a later case could notice)")
    config.addinivalue_line("markers", f"{ALONE_MARKER}: with cases on several processes (cck run --jobs), the case "
                            "runs while no other case does (its verdict compares measured times with a tolerance)")
    settings = settings_from_config(config, os.environ)
    config.stash[SETTINGS_KEY] = settings
    if not settings.active:
        return
    if config.option.tbstyle == "auto" and parses_badly(tuple(sys.version_info[:3])):
        config.option.tbstyle = "native"
    assert settings.target is not None
    try:
        clauses = dict(load_clauses(settings.clause_table))
    except ClauseError as exc:
        raise pytest.UsageError(f"clause table {settings.clause_table or CLAUSE_DIR}: {exc}") from None
    _check_clause_selection(settings, clauses)
    if settings.deviations_file is not None:
        deviations_file: Path | None = settings.deviations_file
    elif settings.client is not None:
        deviations_file = client_deviations_file(settings.client.name)
    else:
        deviations_file = default_deviations_file(_deviations_kind(settings), settings.artemis_version)
    try:
        deviations = load_deviations(deviations_file)
    except DeviationError as exc:
        raise pytest.UsageError(f"known deviations: {exc}") from None
    version, protocol = _versions(settings)
    workerinput = worker_input(config)
    if workerinput is not None:  # an xdist worker: the controller's run
        run_id, started = str(workerinput["cck_run_id"]), datetime.fromisoformat(workerinput["cck_started"])
    else:
        run_id, started = new_run_id(settings.target), datetime.now(UTC)
    writer = EvidenceWriter(settings.evidence_dir, run_id) if settings.evidence_dir is not None else None
    if writer is not None and hasattr(config.option, "allure_report_dir") and not config.option.allure_report_dir:
        config.option.allure_report_dir = str(writer.directory / "allure-results")
    state = RunState(
        settings=settings, run_id=run_id, started=started, clauses=clauses, deviations=deviations,
        deviations_file=deviations_file if deviations_file is not None and deviations_file.exists() else None,
        target_version=version, protocol_version=protocol, writer=writer, worker=workerinput is not None,
    )
    config.stash[RUN_KEY] = state
    register_parallel(config, state)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = config.stash.get(RUN_KEY, None)
    return header_lines(state) if state is not None else None


def _clause_problems(case: Case, nodeid: str, state: RunState) -> list[str]:
    clause = state.clauses.get(case.clause)
    table = state.settings.clause_table or CLAUSE_DIR
    if clause is None:
        return [f"case {case.id} ({nodeid}) cites clause {case.clause!r}, which is not in the clause table ({table})"]
    if case.checks != "both" and not clause.disagreement:
        return [f"case {case.id} ({nodeid}) checks the {case.checks!r} side of clause {case.clause!r}, but the clause "
                "records no implementation disagreement (add `implementation` to it, or use checks='both')"]
    return []


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, pytest.CollectReport,
                                                                           pytest.CollectReport]:
    """A case citing a clause the table lacks is a collection error of its module, naming case and clause."""
    report = yield
    state = collector.config.stash.get(RUN_KEY, None)
    if state is None or not report.passed:
        return report
    problems: list[str] = []
    for node in report.result:
        case = case_of(node) if isinstance(node, pytest.Item) else None
        if case is not None:
            problems.extend(_clause_problems(case, node.nodeid, state))
    if problems:
        report.outcome = "failed"
        report.longrepr = "\n".join(problems)
        report.result = []
    return report


def _selected(case: Case | None, settings: Settings) -> bool:
    if case is None or case.subject != settings.subject:
        return False
    if settings.case_globs and not any(fnmatchcase(case.id, glob) for glob in settings.case_globs):
        return False
    return not settings.clauses or any(fnmatchcase(case.clause, glob) for glob in settings.clauses)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash.get(RUN_KEY, None)
    if state is None:
        return
    # a run judges one subject: the other subject's cases, and the suite's helper tests when a selection is
    # given, are left out (helper tests of the suite, e.g. table checks, run with every unfiltered run)
    selection = bool(state.settings.case_globs or state.settings.clauses)
    selected = [item for item in items if _selected(case_of(item), state.settings)
                or (case_of(item) is None and not selection)]
    deselected = [item for item in items if item not in selected]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


def pytest_collection_finish(session: pytest.Session) -> None:
    """Say, before any case runs, how many of them the target lets give a verdict and what would unlock the rest."""
    state = session.config.stash.get(RUN_KEY, None)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if state is None or reporter is None:
        return
    if session.config.pluginmanager.has_plugin(PARALLEL_CONTROLLER) or state.worker:
        return  # the workers collect; a worker's terminal shows nowhere
    cases = [case for item in session.items if (case := case_of(item)) is not None]
    assert state.settings.target is not None
    capabilities = target_capabilities(state.settings.target, state.settings.target_file)
    for line in reach_lines(cases, capabilities, state.settings.target_file):
        reporter.write_line(line)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    state = item.config.stash.get(RUN_KEY, None)
    case = case_of(item)
    if state is None or case is None:
        return
    client = state.settings.client
    label_case(case, state.clauses.get(case.clause), state.settings.target or "", state.target_version,
               None if client is None else client.name)


def _apply_deviation(judgement: Judgement, deviations: tuple[Deviation, ...], case_id: str) -> Judgement:
    deviation = find_deviation(deviations, case_id)
    if deviation is None:
        return replace(judgement, deviation=None, stale=None)
    if deviation.verdict is judgement.verdict:
        return replace(judgement, deviation=deviation, stale=None)
    if judgement.verdict in (Verdict.UNSUPPORTED, Verdict.KIT_ERROR):  # nothing to confirm or refute
        return replace(judgement, deviation=None, stale=None)
    if deviation.intermittent and judgement.verdict is Verdict.PASS:  # a race that did not happen this time
        return replace(judgement, deviation=None, stale=None)
    return replace(judgement, deviation=None, stale=deviation)


def _show(report: pytest.TestReport, item: pytest.Item, judgement: Judgement) -> None:
    """Make pytest's own display agree with the verdict."""
    verdict = judgement.verdict
    if verdict is Verdict.UNSUPPORTED and not report.skipped:
        path, line = item.reportinfo()[:2]
        report.outcome = "skipped"
        report.longrepr = (os.fspath(path), (line or 0) + 1, f"UNSUPPORTED: {judgement.reason}")
    elif verdict is Verdict.PASS_LENIENT and report.failed:
        report.outcome = "passed"
        report.longrepr = None
    elif verdict is Verdict.FAIL and report.passed:
        report.outcome = "failed"
        report.longrepr = judgement.reason
    if judgement.deviation is not None and verdict in (Verdict.FAIL, Verdict.INDETERMINATE):
        # shown as pytest's "x", with the deviation's reason; the summary section lists it too
        report.outcome = "skipped"
        report.wasxfail = f"{verdict} (known deviation: {judgement.deviation.reason})"


def _message(call: pytest.CallInfo[Any], report: pytest.TestReport) -> str | None:
    if call.excinfo is not None:
        return call.excinfo.exconly()
    return report.longreprtext or None if report.failed else None


def _case_record(state: RunState, item: pytest.Item, case: Case, judgement: Judgement,
                 finished: float) -> dict[str, Any]:
    clause = state.clauses.get(case.clause)
    evidence = item.stash.get(EVIDENCE_KEY, None)
    started = item.stash.get(_STARTED_KEY, finished)
    return {
        "case_id": case.id, "clause_id": case.clause, "clause_level": clause.level if clause else None,
        "subject": case.subject, "client": None if state.settings.client is None else state.settings.client.name,
        "checks": case.checks, "group": case.group, "nodeid": item.nodeid, "description": case.description,
        "expectation": case.expectation, "verdict": str(judgement.verdict), "reason": judgement.reason,
        "known_deviation": judgement.deviation.reason if judgement.deviation else None,
        "kit_error": None if judgement.verdict is not Verdict.KIT_ERROR else {
            "type": judgement.error_type, "where": judgement.error_where},
        "deviation_stale": judgement.stale is not None,
        "should_misses": [miss.message for miss in evidence.should_misses] if evidence else [],
        "params": dict(case.params), "duration_s": item.stash.get(_DURATION_KEY, 0.0),
        "started": format_timestamp(datetime.fromtimestamp(started, UTC)),
        "finished": format_timestamp(datetime.fromtimestamp(finished, UTC)),
    }


def _judge(state: RunState, item: pytest.Item, case: Case, call: pytest.CallInfo[Any],
           report: pytest.TestReport) -> None:
    if report.when == "setup":
        item.stash[_STARTED_KEY] = report.start
    item.stash[_DURATION_KEY] = item.stash.get(_DURATION_KEY, 0.0) + report.duration
    message = _message(call, report)
    if report.when in ("setup", "call"):
        if VERDICT_KEY in item.stash:
            return
        evidence = item.stash.get(EVIDENCE_KEY, None)
        clause = state.clauses.get(case.clause)
        skip_reason = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else None
        judgement = judge_phase(
            report.when, report.outcome, call.excinfo.value if call.excinfo else None, message,
            lenient_clause=clause.lenient if clause is not None else False, strict=state.settings.strict,
            should_misses=[miss.message for miss in evidence.should_misses] if evidence else [],
            skip_reason=skip_reason,
        )
        if judgement is None:
            return
        judgement = _apply_deviation(judgement, state.deviations, case.id)
        item.stash[VERDICT_KEY] = judgement
        _show(report, item, judgement)
        if report.when == "call" and judgement.verdict in KEPT_VERDICTS:
            _keep_logs(state, item, case)
        return
    before = item.stash.get(VERDICT_KEY, None)
    final = judge_teardown(before, report.outcome, call.excinfo.value if call.excinfo else None, message)
    if final is not before:
        final = _apply_deviation(final, state.deviations, case.id)
    item.stash[VERDICT_KEY] = final
    properties = [("cck_case", case.id), ("cck_clause", case.clause), ("cck_verdict", str(final.verdict)),
                  ("cck_reason", final.reason or "")]
    if final.deviation is not None:
        properties.append(("cck_known_deviation", final.deviation.reason))
    item.user_properties.extend(properties)
    report.user_properties.extend(properties)
    result = CaseResult(case, item.nodeid, final)
    state.results.append(result)
    if state.worker:  # to the controller, with the report (cck run --jobs)
        report.user_properties.append(result_property(result))
    label_verdict(final)
    if state.writer is not None:
        state.writer.write_case(_case_record(state, item, case, final, report.stop), item.stash.get(EVIDENCE_KEY, None))


def _keep_logs(state: RunState, item: pytest.Item, case: Case) -> None:
    """The brokers' logs of a case that did not conform, into the evidence while its targets are still open (its
    fixtures close them after this); a copy that fails is noted, never the case's verdict."""
    factory = item.config.stash.get(FACTORY_KEY, None)
    if state.writer is None or factory is None:
        return
    evidence = item.stash.get(EVIDENCE_KEY, None)
    try:
        kept = keep_node_logs(state.writer.directory, case.id, factory.open_targets())
    except OSError as exc:
        if evidence is not None:
            evidence.note("node_logs_error", f"the nodes' logs were not kept: {exc}")
        return
    if evidence is not None and kept:
        evidence.note("node_logs", kept)


# trylast: innermost of the wrappers, so allure-pytest's (and pytest's own) see the report as the verdict left it
@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, pytest.TestReport,
                                                                                        pytest.TestReport]:
    report = yield
    state = item.config.stash.get(RUN_KEY, None)
    if state is None:
        return report
    case = case_of(item)
    if case is None:
        if report.failed:
            state.other_failures += 1
        return report
    _judge(state, item, case, call, report)
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(RUN_KEY, None)
    if state is None or state.worker:  # a worker's cases are the controller's to count and record
        return
    controller = session.config.pluginmanager.get_plugin(PARALLEL_CONTROLLER)
    if isinstance(controller, ParallelController):  # the workers' cases, in case order; any that never ended
        state.results.sort(key=lambda result: result.case.id)
        state.lost = controller.lost()
        state.crashed = list(controller.crashed)
    if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        session.exitstatus = state.verdict_exit_status()
    state.exit_status = int(session.exitstatus)
    if state.writer is not None:
        state.writer.write_run({
            "target": state.settings.target, "target_version": state.target_version,
            "subject": state.settings.subject,
            "client": None if state.settings.client is None else state.settings.client.name,
            "protocol_version": state.protocol_version, "broker_url": state.settings.broker_url,
            "strict": state.settings.strict, "python": f"{platform.python_implementation()} {python_version()}",
            "pytest": pytest.__version__, "kit_version": kit_version(),
            "started": format_timestamp(state.started), "finished": format_timestamp(datetime.now(UTC)),
            "exit_status": state.exit_status,
            "verdict_counts": {str(verdict): count for verdict, count in state.counts().items()},
            "settings": state.settings.public(),
        })


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    state = config.stash.get(RUN_KEY, None)
    if state is None or not (state.results or state.other_failures or state.lost or state.crashed):
        return
    terminalreporter.section("conformance verdicts")
    for line in summary_lines(state):
        terminalreporter.line(line)
    controller = config.pluginmanager.get_plugin(PARALLEL_CONTROLLER)
    launched = controller.launches if isinstance(controller, ParallelController) else launch_counts()
    if launched:  # most of a managed run's time goes to starting brokers: say how many it started
        counted = ", ".join(f"{label} {n}" for label, n in sorted(launched.items()))
        terminalreporter.line(f"processes launched: {counted}")
