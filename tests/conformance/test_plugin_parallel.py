"""Cases on several processes (``cck run --jobs``, xdist's ``-n``): one run, the same verdicts and exit status as
one process, one evidence directory, and a ``cck_alone`` case never beside another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cck.conformance.plugin._parallel import CaseGate, GateTimeout
from cck.conformance.targets import PortBlock

from .test_plugin_verdicts import ALL, kit, suite  # noqa: F401  (kit: a fixture)

pytest_plugins = ["pytester"]

#: The reference target: a url or command target's brokers are the user's and are refused with --jobs; these
#: cases never ask for a broker, so none starts.
TARGET = ("-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning", "--target", "reference",
          "--clause-table", "clauses")


def _summary(result: pytest.RunResult) -> list[str]:
    """The verdict summary, through its exit status line (what follows counts launches, which an in-process run
    shares with the tests before it)."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "conformance verdicts" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("exit status "))
    return lines[start + 1:end + 1]


def test_two_processes_give_the_verdicts_and_exit_status_of_one(kit: pytest.Pytester) -> None:  # noqa: F811
    suite(kit, *ALL)
    one = kit.runpytest_subprocess(*TARGET, "-p", "no:xdist", ".")
    two = kit.runpytest_subprocess(*TARGET, "-n", "2", ".")
    assert one.ret == two.ret == 1
    assert _summary(two) == _summary(one)
    assert "6 broker cases against reference broker" in _summary(two)[0]


def test_two_processes_write_one_run(kit: pytest.Pytester) -> None:  # noqa: F811
    suite(kit, *ALL)
    result = kit.runpytest_subprocess(*TARGET, "--evidence-dir", "ev", "-n", "2", ".")
    assert result.ret == 1
    (run_dir,) = (kit.path / "ev").iterdir()
    cases = [json.loads(line) for line in (run_dir / "cases.jsonl").read_text().splitlines()]
    assert sorted(row["case_id"] for row in cases) == [f"demo.run.{n}" for n in range(1, 7)]
    assert {row["run_id"] for row in cases} == {run_dir.name}
    record = json.loads((run_dir / "run.json").read_text())
    assert record["run_id"] == run_dir.name
    assert record["exit_status"] == 1
    assert record["verdict_counts"] == {"PASS": 1, "PASS_LENIENT": 2, "UNSUPPORTED": 1, "INDETERMINATE": 1,
                                        "FAIL": 1}
    assert (run_dir / "allure-results").is_dir()


TIMED_SUITE = '''
import time, fcntl, json, pytest
from cck.conformance.cases import Case, cases

TABLE = tuple(Case(f"demo.run.{n}", "demo.must", "sleeps", "it passes", params={"alone": n % 3 == 0})
              for n in range(1, 10))

def _log(case, began, ended):
    with open("intervals.jsonl", "a") as out:
        fcntl.flock(out, fcntl.LOCK_EX)
        out.write(json.dumps([case.id, case.params["alone"], began, ended]) + "\\n")

@cases(*(case for case in TABLE if not case.params["alone"]))
def test_beside(case):
    began = time.monotonic(); time.sleep(0.3); _log(case, began, time.monotonic())

@cases(*(case for case in TABLE if case.params["alone"]))
@pytest.mark.cck_alone
def test_alone(case):
    began = time.monotonic(); time.sleep(0.3); _log(case, began, time.monotonic())
'''


@pytest.mark.parametrize("dist", ["worksteal", "load"])  # the kit's scheduler (cck run --jobs), xdist's own
def test_an_alone_case_runs_while_no_other_case_does(kit: pytest.Pytester, dist: str) -> None:  # noqa: F811
    kit.makepyfile(test_demo=TIMED_SUITE)
    result = kit.runpytest_subprocess(*TARGET, "-n", "3", "--dist", dist, ".")
    assert result.ret == 0
    rows = [json.loads(line) for line in (kit.path / "intervals.jsonl").read_text().splitlines()]
    assert len(rows) == 9
    beside = [row for row in rows if not row[1]]
    # the ordinary cases did run side by side (else the check below would hold trivially)
    assert any(a[2] < b[3] and b[2] < a[3] for a in beside for b in beside if a is not b)
    for alone in (row for row in rows if row[1]):
        for other in rows:
            if other is not alone:
                assert not (alone[2] < other[3] and other[2] < alone[3]), f"{alone[0]} overlapped {other[0]}"


CRASH_SUITE = '''
import os
from cck.conformance.cases import Case, cases

@cases(*(Case(f"demo.run.{n}", "demo.must", "passes or dies", "it passes", params={"n": n}) for n in range(1, 5)))
def test_demo(case):
    if case.params["n"] == 3:
        os._exit(1)  # the worker process dies mid-case, as the kit's own process might
'''


def test_a_case_whose_worker_died_is_the_kits_error(kit: pytest.Pytester) -> None:  # noqa: F811
    kit.makepyfile(test_demo=CRASH_SUITE)
    result = kit.runpytest_subprocess(*TARGET, "-n", "2", "--evidence-dir", "ev", ".")
    assert result.ret == 3
    result.stdout.fnmatch_lines([
        "3 broker cases against reference broker*: PASS 3",
        "a worker process died (the kit's error, no verdict): gw*",
        "1 collected items ended in no report (their worker died; the kit's error, no verdict): "
        "test_demo.py::test_demo[[]demo.run.3[]]",
        "exit status 3: *",
    ])
    (run_dir,) = (kit.path / "ev").iterdir()
    assert json.loads((run_dir / "run.json").read_text())["exit_status"] == 3


PORTS_SUITE = '''
import fcntl, json, os
from cck.conformance.cases import Case, cases

@cases(*(Case(f"demo.run.{n}", "demo.must", "asks for ports", "it passes") for n in range(1, 7)))
def test_demo(case, cck_targets):
    with open("ports.jsonl", "a") as out:
        fcntl.flock(out, fcntl.LOCK_EX)
        out.write(json.dumps([os.environ["PYTEST_XDIST_WORKER"], cck_targets.ports(3)]) + "\\n")
'''


def test_each_process_takes_ports_from_a_block_of_its_own(kit: pytest.Pytester) -> None:  # noqa: F811
    """A passive backup's port is bound by nobody: another process must never be handed it."""
    kit.makepyfile(test_demo=PORTS_SUITE)
    result = kit.runpytest_subprocess(*TARGET, "-n", "2", ".")
    assert result.ret == 0
    rows = [json.loads(line) for line in (kit.path / "ports.jsonl").read_text().splitlines()]
    assert len(rows) == 6
    by_worker: dict[str, set[int]] = {}
    for worker, ports in rows:
        block = PortBlock.for_worker(int(worker.removeprefix("gw")))
        assert all(block.first <= port < block.first + block.size for port in ports), (worker, ports, block)
        by_worker.setdefault(worker, set()).update(ports)
    assert sum(len(ports) for ports in by_worker.values()) == 18  # no port handed out twice in the run
    assert len(set().union(*by_worker.values())) == 18


def test_the_brokers_of_a_url_or_command_target_are_not_shared_out(kit: pytest.Pytester) -> None:  # noqa: F811
    suite(kit, "pass")
    result = kit.runpytest_subprocess("-p", "no:cacheprovider", "--broker-url", "tcp://127.0.0.1:9", "--skip-preflight",
                                      "--clause-table", "clauses", "-n", "2", ".")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--jobs / -n: a url target's brokers are yours*run them in one process"])


def test_gate_an_alone_case_cannot_start_while_a_case_is_in_progress(tmp_path: Path) -> None:
    quick = CaseGate(tmp_path, deadline_s=0.3)
    with CaseGate(tmp_path).hold(False, "ordinary"):
        with quick.hold(False, "beside it"):  # ordinary cases share the gate
            pass
        with pytest.raises(GateTimeout, match=r"waited 0.3 s for the cases in progress to end before alone"), \
                quick.hold(True, "alone"):
            pass
    # the case in progress ended: the alone case's turn; now none may start beside it
    with quick.hold(True, "alone"), pytest.raises(GateTimeout, match=r"a case running alone \(ordinary\)"), \
            quick.hold(False, "ordinary"):
        pass
