"""The fixtures conformance cases use: the run's settings, the target under test, and per-case evidence.

* ``cck_settings`` — :class:`Settings` of the run.
* ``cck_target`` — the target (one node, default topology), started once per run; before each case any node a
  previous case stopped or killed is started again, so cases may crash it freely.
* ``cck_make_target`` — a factory for a target of the run's kind with a topology of the case's own (started,
  closed after the case); UNSUPPORTED on a ``url`` target.
* ``cck_client`` — the client under test of a client run (:class:`ClientUnderTest`, from ``--client``).
* ``evidence`` — the case's :class:`CaseEvidence`; the plugin writes it out when the case ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from conformance.clients import ClientUnderTest
from conformance.evidence import CaseEvidence
from conformance.targets import Target, Topology, make_target
from conformance.verdicts import Indeterminate, KitError, Unsupported

from ._settings import SETTINGS_KEY, Settings

__all__ = ["cck_settings", "cck_target", "cck_make_target", "cck_client", "evidence", "EVIDENCE_KEY"]

EVIDENCE_KEY = pytest.StashKey[CaseEvidence]()


@pytest.fixture(scope="session")
def cck_settings(pytestconfig: pytest.Config) -> Settings:
    settings = pytestconfig.stash.get(SETTINGS_KEY, None)
    if settings is None or not settings.active:
        pytest.skip("no conformance target chosen (--target / --broker-url)")
    return settings


def _new_target(settings: Settings, tmp: pytest.TempPathFactory, topology: Topology | None) -> Target:
    kind = settings.target
    assert kind is not None
    if kind == "url":
        if topology is not None:
            raise Unsupported("the case needs a broker configured by the kit (target reference or artemis)")
        return make_target("url", url=settings.broker_url, version=settings.artemis_version)
    version = settings.artemis_version if kind == "artemis" else None
    return make_target(kind, version=version, workdir=tmp.mktemp(f"{kind}-"), topology=topology or Topology.single())


def _start(target: Target) -> Target:
    try:
        target.start()
    except Exception as exc:  # a broker that will not start leaves the verdict open, it is not a FAIL of the case
        target.close()
        raise Indeterminate(f"the target did not start: {exc}") from exc
    return target


@pytest.fixture(scope="session")
def _cck_session_target(cck_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    target = _start(_new_target(cck_settings, tmp_path_factory, None))
    try:
        yield target
    finally:
        target.close()


@pytest.fixture
def cck_target(_cck_session_target: Target) -> Target:
    for node in _cck_session_target.nodes:
        if not node.is_running:  # an earlier case stopped or killed it
            try:
                node.start()
            except Exception as exc:
                raise Indeterminate(f"node {node.name} did not come back after an earlier case: {exc}") from exc
    return _cck_session_target


@pytest.fixture
def cck_make_target(
    cck_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[Topology], Target]]:
    made: list[Target] = []

    def make(topology: Topology) -> Target:
        target = _start(_new_target(cck_settings, tmp_path_factory, topology))
        made.append(target)
        return target

    try:
        yield make
    finally:
        for target in reversed(made):
            target.close()


@pytest.fixture(scope="session")
def cck_client(cck_settings: Settings) -> ClientUnderTest:
    if cck_settings.client is None:  # client cases are deselected in broker runs: a broker case asked for it
        raise KitError("a broker case asked for the client under test; only client cases (subject 'client', run "
                       "with --client) have one")
    return cck_settings.client


@pytest.fixture
def evidence(request: pytest.FixtureRequest) -> CaseEvidence:
    case = getattr(request.node, "callspec", None)
    case_id = getattr(case.params.get("case"), "id", request.node.nodeid) if case is not None else request.node.nodeid
    recorder = CaseEvidence(case_id)
    request.node.stash[EVIDENCE_KEY] = recorder
    return recorder
