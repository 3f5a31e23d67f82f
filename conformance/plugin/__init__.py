"""The conformance pytest plugin (entry point ``cck``): options, fixtures, verdicts, evidence, report.

Inert unless a target is chosen (``--target``, ``--broker-url``, env ``CCK_TARGET`` / ``CCK_BROKER_URL`` or
ini ``cck_target`` / ``cck_broker_url``); then:

* ``config.stash[SETTINGS_KEY]`` — the run's :class:`Settings` (always set; ``settings.active`` says whether a
  target is chosen);
* ``config.stash[RUN_KEY]`` — the run's :class:`RunState` (run ID, clause table, known deviations, results);
* a run judges one subject: the broker (the target), or with ``--client`` the client under test; the other
  subject's cases are deselected;
* ``item.stash[VERDICT_KEY]`` — a case's :class:`Judgement` (verdict, reason, matched or stale deviation),
  final after its teardown; the verdict is also in ``report.user_properties`` as ``("cck_verdict", ...)``.

See docs/conformance.md.
"""

from __future__ import annotations

from ._fixtures import (
    EVIDENCE_KEY,
    _cck_jvm_flavour,  # noqa: F401  (a fixture: pytest finds it by name)
    _cck_preflight,  # noqa: F401  (a fixture: pytest finds it by name)
    _cck_session_target,  # noqa: F401  (a fixture: pytest finds it by name)
    _cck_target_pool,  # noqa: F401  (a fixture: pytest finds it by name)
    cck_client,
    cck_make_target,
    cck_settings,
    cck_target,
    cck_targets,
    evidence,
)
from ._hooks import (
    SUITE_DIR,
    pytest_addoption,
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_load_initial_conftests,
    pytest_make_collect_report,
    pytest_report_header,
    pytest_runtest_makereport,
    pytest_runtest_setup,
    pytest_sessionfinish,
    pytest_terminal_summary,
)
from ._judge import Judgement
from ._options import OPTIONS, resolve_settings
from ._run import RUN_KEY, VERDICT_KEY, RunState, case_of
from ._settings import SETTINGS_KEY, Settings
from ._targets import TargetFactory

__all__ = [
    # fixtures
    "cck_settings",
    "cck_target",
    "cck_targets",
    "cck_make_target",
    "cck_client",
    "evidence",
    # settings and state
    "Settings",
    "SETTINGS_KEY",
    "TargetFactory",
    "RunState",
    "RUN_KEY",
    "Judgement",
    "VERDICT_KEY",
    "EVIDENCE_KEY",
    "OPTIONS",
    "resolve_settings",
    "SUITE_DIR",
    "case_of",
    # hooks
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
