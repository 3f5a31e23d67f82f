"""The fixtures conformance cases use: the run's settings, the target under test, and per-case evidence.

* ``cck_settings`` — :class:`Settings` of the run.
* ``cck_target`` — the target (one node, default topology), started once per run; before each case any node a
  previous case stopped or killed is started again, so cases may crash it freely.
* ``cck_make_target`` — a factory for a started target of the run's kind with a topology of the case's own;
  UNSUPPORTED on a ``url`` target.  Targets are kept between the cases of a module (:class:`TargetPool`): a case
  that asks for a topology an earlier case left as it found it gets that target, still running; a case marked
  ``@pytest.mark.cck_fresh_broker`` (it changes a broker in a way the next case could notice) gets brokers of
  its own, and they are not kept after it.
* ``cck_client`` — the client under test of a client run (:class:`ClientUnderTest`, from ``--client``).
* ``evidence`` — the case's :class:`CaseEvidence`; the plugin writes it out when the case ends.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass

import pytest

from cck.codec import CURRENT_VERSION
from cck.conformance.clients import ClientUnderTest
from cck.conformance.evidence import CaseEvidence
from cck.conformance.targets import CommandFailed, ManagedTarget, Target, Topology, UnsupportedByTarget
from cck.conformance.verdicts import Indeterminate, KitError, Verdict

from ._parallel import ALONE_MARKER, port_source
from ._run import RUN_KEY, VERDICT_KEY
from ._settings import SETTINGS_KEY, Settings
from ._targets import PreflightError, TargetFactory, check_room, exit_for, preflight

__all__ = ["cck_settings", "cck_targets", "cck_target", "cck_make_target", "cck_client", "evidence", "EVIDENCE_KEY",
           "FRESH_MARKER", "TargetPool"]

EVIDENCE_KEY = pytest.StashKey[CaseEvidence]()
#: a case that needs brokers nobody used before it and nobody uses after it
FRESH_MARKER = "cck_fresh_broker"
#: at most this many idle nodes are kept running for later cases (a JVM holds a few hundred MB)
IDLE_NODES = 3


@pytest.fixture(scope="session")
def cck_settings(pytestconfig: pytest.Config) -> Settings:
    settings = pytestconfig.stash.get(SETTINGS_KEY, None)
    if settings is None or not settings.active:
        pytest.skip("no conformance target chosen (--target / --broker-url)")
    return settings


#: the run's target factory, once a case asked for it (the evidence of each case takes its command runs from it)
FACTORY_KEY = pytest.StashKey[TargetFactory]()


@pytest.fixture(scope="session")
def cck_targets(cck_settings: Settings, tmp_path_factory: pytest.TempPathFactory,
                pytestconfig: pytest.Config) -> TargetFactory:
    """What makes every target of the run (and owns what they share: a target file's nodes, the command log)."""
    factory = TargetFactory(cck_settings, tmp_path_factory.mktemp, port_source(pytestconfig))
    pytestconfig.stash[FACTORY_KEY] = factory
    return factory


@pytest.fixture(scope="session")
def _cck_session_target(cck_targets: TargetFactory) -> Iterator[Target]:
    # shared by cases that measure times and cases that do not, and alive the whole run: the default compilers
    target = cck_targets.started(None, quick=False)
    try:
        yield target
    finally:
        target.close()


@pytest.fixture(scope="session", autouse=True)
def _cck_preflight(pytestconfig: pytest.Config, request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> None:
    """Before the first test of an active run: against brokers the user names (url, command) each of them answers
    and opens a session; for brokers the kit starts, there is room for their journals.  Otherwise the run ends at
    once with a usage error naming the broker or the directory and the cause."""
    settings = pytestconfig.stash.get(SETTINGS_KEY, None)
    if settings is None or not settings.active or not settings.preflight:
        return
    state = pytestconfig.stash.get(RUN_KEY, None)
    version = min(CURRENT_VERSION, state.protocol_version or CURRENT_VERSION) if state else CURRENT_VERSION
    try:
        lines = [] if settings.target == "url" else [check_room(tmp_path_factory.getbasetemp())]
        if settings.target in ("url", "command"):
            lines += preflight(settings, request.getfixturevalue("cck_targets"), version)
    except PreflightError as exc:
        exit_for(exc)
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    # the terminal, not the first test's captured output: the run's header says what the preflight found
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        reporter.write_line("")
        for line in lines:
            reporter.write_line(line)


@pytest.fixture
def cck_target(_cck_session_target: Target) -> Target:
    for node in _cck_session_target.nodes:
        if not node.is_running:  # an earlier case stopped or killed it
            try:
                node.start()
            except (CommandFailed, UnsupportedByTarget):  # the kit's set-up, or a node it may not start: as they are
                raise
            except Exception as exc:
                raise Indeterminate(f"node {node.name} did not come back after an earlier case: {exc}") from exc
    return _cck_session_target


@pytest.fixture(autouse=True)
def _cck_jvm_flavour(request: pytest.FixtureRequest) -> Iterator[None]:
    """While a case runs, the target factory knows whether the case measures times (marked ``cck_alone``): the
    JVM brokers of one that does not start C1-only unless the run says ``--full-jit``."""
    settings = request.config.stash.get(SETTINGS_KEY, None)
    if settings is None or not settings.active or not settings.quick_start:
        yield
        return
    factory: TargetFactory = request.getfixturevalue("cck_targets")
    factory.quick = request.node.get_closest_marker(ALONE_MARKER) is None
    try:
        yield
    finally:
        factory.quick = False


@dataclass(frozen=True)
class _Lent:
    """A target handed to a case, with what its nodes looked like then."""

    key: Hashable
    target: Target
    starts: tuple[int, ...]


def _starts(target: Target) -> tuple[int, ...]:
    return tuple(n.starts for n in target.nodes) if isinstance(target, ManagedTarget) else ()


class TargetPool:
    """Started targets kept between the cases of a module that ask ``cck_make_target`` for them, by topology.

    Starting brokers is most of a managed run's time (a JVM takes seconds), and many cases ask for the same
    topology.  A target goes back into the pool after a case only if the case left it as it found it: it passed,
    every node still runs the process it ran when the case got it (no stop, kill or restart), and the case is
    not marked ``cck_fresh_broker``.  Cases name their queues and addresses after themselves, so what one case
    created does not meet the next.  At most :data:`IDLE_NODES` idle nodes are kept, the least recently used
    going first."""

    def __init__(self, make: Callable[[Topology], Target], flavour: Callable[[Topology], Hashable] = lambda t: t,
                 idle_nodes: int = IDLE_NODES) -> None:
        self._make = make
        self._flavour = flavour
        self._idle_nodes = idle_nodes
        self._idle: list[tuple[Hashable, Target]] = []  # least recently used first
        self.made = 0
        self.reused = 0

    def take(self, topology: Topology, *, fresh: bool = False) -> _Lent:
        """A started target of ``topology`` (and of the flavour the case in progress asks for: its JVM flags): an
        idle one when there is one (and ``fresh`` is false), else new."""
        key = self._flavour(topology)
        for i, (kept, target) in enumerate(self._idle):
            if kept == key and not fresh:
                del self._idle[i]
                if all(n.is_running for n in target.nodes):
                    self.reused += 1
                    return _Lent(key, target, _starts(target))
                target.close()  # a broker that died on its own while idle: not what the case asks for
                break
        target = self._make(topology)
        self.made += 1
        return _Lent(key, target, _starts(target))

    def give_back(self, lent: _Lent, *, reusable: bool) -> None:
        """Keep ``lent.target`` for a later case if ``reusable`` and its nodes run the processes they ran when lent;
        close it otherwise."""
        target = lent.target
        if not (reusable and _starts(target) == lent.starts and all(n.is_running for n in target.nodes)):
            target.close()
            return
        self._idle.append((lent.key, target))
        while sum(len(t.nodes) for _, t in self._idle) > self._idle_nodes:
            _, oldest = self._idle.pop(0)
            oldest.close()

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for _, target in idle:
            target.close()


# per module: the cases asking for one topology sit together in their group's module, and idle brokers kept
# beyond it would only take CPU from the groups after it
@pytest.fixture(scope="module")
def _cck_target_pool(cck_targets: TargetFactory) -> Iterator[TargetPool]:
    pool = TargetPool(cck_targets.started, cck_targets.flavour)
    try:
        yield pool
    finally:
        pool.close()


def _left_as_found(request: pytest.FixtureRequest) -> bool:
    """Whether the case may have left its brokers as it found them: it passed (a case that failed half way may
    have left consumers, messages or a broker in a state of its own) and is not marked fresh."""
    judgement = request.node.stash.get(VERDICT_KEY, None)
    passed = judgement is not None and judgement.verdict is Verdict.PASS
    return passed and request.node.get_closest_marker(FRESH_MARKER) is None


@pytest.fixture
def cck_make_target(
    cck_targets: TargetFactory, _cck_target_pool: TargetPool, request: pytest.FixtureRequest
) -> Iterator[Callable[[Topology], Target]]:
    if not cck_targets.configures:  # before the pool: a url target has no topology to make
        def refuse(topology: Topology) -> Target:
            return cck_targets.new(topology)  # raises Unsupported, naming what the target lacks

        yield refuse
        return
    fresh = request.node.get_closest_marker(FRESH_MARKER) is not None
    lent: list[_Lent] = []

    def make(topology: Topology) -> Target:
        lent.append(_cck_target_pool.take(topology, fresh=fresh))
        return lent[-1].target

    try:
        yield make
    finally:
        reusable = _left_as_found(request)
        for one in reversed(lent):
            _cck_target_pool.give_back(one, reusable=reusable)


@pytest.fixture(scope="session")
def cck_client(cck_settings: Settings) -> ClientUnderTest:
    if cck_settings.client is None:  # client cases are deselected in broker runs: a broker case asked for it
        raise KitError("a broker case asked for the client under test; only client cases (subject 'client', run "
                       "with --client) have one")
    return cck_settings.client


@pytest.fixture
def evidence(request: pytest.FixtureRequest) -> Iterator[CaseEvidence]:
    case = getattr(request.node, "callspec", None)
    case_id = getattr(case.params.get("case"), "id", request.node.nodeid) if case is not None else request.node.nodeid
    recorder = CaseEvidence(case_id)
    request.node.stash[EVIDENCE_KEY] = recorder
    began = time.monotonic_ns()
    yield recorder
    # the target-file commands run while the case ran (a later fixture's teardown may add more: those belong to
    # the case after it, which is when the broker they concern is used again)
    factory = request.config.stash.get(FACTORY_KEY, None)
    commands = factory.commands.since(began) if factory is not None else []
    if commands:
        recorder.note("commands", [record.to_json() for record in commands])
