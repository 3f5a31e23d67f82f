"""The state of one conformance run, kept in ``config.stash[RUN_KEY]`` (absent when the plugin is inert)."""

from __future__ import annotations

import secrets
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cck.conformance.cases import Case
from cck.conformance.clauses import Clause
from cck.conformance.evidence import EvidenceWriter
from cck.conformance.verdicts import Verdict

from ._deviations import Deviation
from ._judge import Judgement
from ._settings import Settings

__all__ = ["RunState", "CaseResult", "RUN_KEY", "VERDICT_KEY", "new_run_id", "case_of", "target_description",
           "subject_description"]


@dataclass(frozen=True)
class CaseResult:
    case: Case
    nodeid: str
    judgement: Judgement


@dataclass
class RunState:
    settings: Settings
    run_id: str
    started: datetime
    clauses: Mapping[str, Clause]
    deviations: tuple[Deviation, ...]
    deviations_file: Path | None
    #: Target version and protocol version as the header states them.
    target_version: str | None
    protocol_version: int | None
    writer: EvidenceWriter | None = None
    results: list[CaseResult] = field(default_factory=list)
    #: Failed items of the run that are not conformance cases (a helper test in the suite, say).
    other_failures: int = 0
    exit_status: int | None = None
    #: An xdist worker's state (``cck run --jobs``): its cases go to the controller, which records the run.
    worker: bool = False
    #: The controller's: items collected whose end no report told (their worker died), and the workers that died.
    lost: list[str] = field(default_factory=list)
    crashed: list[str] = field(default_factory=list)

    def counts(self) -> Counter[Verdict]:
        return Counter(r.judgement.verdict for r in self.results)

    def verdict_exit_status(self) -> int:
        """0 every case conforms, 1 a FAIL (or a failed non-case test), 3 no FAIL but a KIT_ERROR (or a case whose
        worker died), 2 neither but an INDETERMINATE."""
        open_ = {r.judgement.verdict for r in self.results if not r.judgement.conforms}
        if self.other_failures or Verdict.FAIL in open_:
            return 1
        if Verdict.KIT_ERROR in open_ or self.lost or self.crashed:  # a worker of the kit's died: not a verdict
            return 3
        return 2 if open_ else 0


RUN_KEY = pytest.StashKey[RunState]()
#: On each case item: the judgement decided so far (setup or call), final after teardown.
VERDICT_KEY = pytest.StashKey[Judgement]()
#: On each case item: wall-clock start of its setup.
STARTED_KEY = pytest.StashKey[float]()


def new_run_id(target: str, now: datetime | None = None) -> str:
    """``<UTC time>-<target>-<random>``: sortable by time, unique across machines sharing an evidence dir."""
    now = now or datetime.now(UTC)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{target}-{secrets.token_hex(3)}"


def case_of(item: pytest.Item) -> Case | None:
    """The :class:`Case` an item was parametrised with (``conformance.cases.cases``), or None."""
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("case") if callspec is not None else None
    return case if isinstance(case, Case) else None


def subject_description(state: RunState) -> str:
    """What the run judges: "broker cases" of its target, or "client cases" of the client under test."""
    client = state.settings.client
    if client is None:
        return f"broker cases against {target_description(state)}"
    return f"client cases of {client.describe()} ({client.name}) against {target_description(state)}"


def target_description(state: RunState) -> str:
    settings = state.settings
    if settings.target == "artemis":
        return f"Apache Artemis {state.target_version} (protocol {state.protocol_version}), managed by the kit"
    if settings.target == "reference":
        return f"reference broker {state.target_version} (protocol {state.protocol_version}), managed by the kit"
    if settings.target in ("hornetq", "artemis1"):
        name = "HornetQ" if settings.target == "hornetq" else "Apache Artemis"
        return f"{name} {state.target_version} (protocol {state.protocol_version}), embedded and managed by the kit"
    target_file = settings.target_file
    if target_file is not None:
        return (f"{target_file.broker} {state.target_version or 'unknown'} of target file {target_file.path} "
                f"({len(target_file.nodes)} node{'s' if len(target_file.nodes) > 1 else ''}, run by its commands)")
    return f"url {settings.broker_url}, declared version {state.target_version or 'unknown'} (black box)"


def python_version() -> str:
    return sys.version.split()[0]
