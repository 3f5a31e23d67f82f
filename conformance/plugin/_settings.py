"""The resolved settings of a conformance run (from the command line, the environment or the ini file;
``_options.resolve_settings`` makes them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cck.conformance.cases import Subject
from cck.conformance.clients import ClientUnderTest
from cck.conformance.oracles import DEFAULT_TOLERANCE, Tolerance
from cck.conformance.targets import TargetFile

__all__ = ["Settings", "SETTINGS_KEY"]


@dataclass(frozen=True)
class Settings:
    #: ``url``, ``reference``, ``artemis`` or ``command``; ``None`` when no conformance option was given (inert).
    target: str | None = None
    #: Target ``command``: the brokers the user runs and the commands that control them (``--target-file``).
    target_file: TargetFile | None = None
    artemis_version: str | None = None
    broker_url: str | None = None
    user: str | None = None
    password: str | None = None
    #: Every deadline of a case is multiplied by this (a slow machine or network asks for more than 1).
    timing_scale: float = 1.0
    #: The timing oracle's tolerance for this run, already widened by ``timing_scale`` (its ``scale``):
    #: pass it to ``check_schedule`` as it is.
    tolerance: Tolerance = DEFAULT_TOLERANCE
    case_globs: tuple[str, ...] = ()
    clauses: tuple[str, ...] = ()
    strict: bool = False
    #: Check, before the first case, that the brokers named (url, command) answer (``--skip-preflight``: no).
    preflight: bool = True
    #: Start the JVM brokers of a case that measures no times C1-only, which halves their CPU (``--full-jit``:
    #: every node with the JVM's default compilers).  Cases marked ``cck_alone`` always get the default ones.
    quick_start: bool = True
    evidence_dir: Path | None = None
    #: A known-deviations file replacing the kit's file for the target (``conformance/deviations/``).
    deviations_file: Path | None = None
    #: A clause table directory replacing the kit's (``conformance/clauses/``).
    clause_table: Path | None = None
    #: The client under test (``--client``): the run judges client cases with it; None for a broker run.
    client: ClientUnderTest | None = None
    #: Where each value came from ("--target", "env CCK_TARGET", "ini cck_target", "default"), for messages.
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def active(self) -> bool:
        return self.target is not None

    @property
    def subject(self) -> Subject:
        """What this run judges: the client under test when one is named, else the broker."""
        return "broker" if self.client is None else "client"

    def public(self) -> dict[str, object]:
        """The settings as plain JSON-ready data for the evidence's run record (the password left out)."""
        return {
            "target": self.target, "artemis_version": self.artemis_version, "broker_url": self.broker_url,
            "target_file": None if self.target_file is None else str(self.target_file.path),
            "subject": self.subject, "client": None if self.client is None else self.client.name,
            "user": self.user, "password": None if self.password is None else "***",
            "timing_scale": self.timing_scale, "tolerance": self.tolerance.to_dict(),
            "case_globs": list(self.case_globs), "clauses": list(self.clauses), "strict": self.strict,
            "preflight": self.preflight, "quick_start": self.quick_start,
            "evidence_dir": None if self.evidence_dir is None else str(self.evidence_dir),
            "deviations_file": None if self.deviations_file is None else str(self.deviations_file),
            "clause_table": None if self.clause_table is None else str(self.clause_table),
            "sources": dict(self.sources),
        }

    def deadline(self, seconds: float) -> float:
        """A case's deadline in seconds, scaled for this run."""
        return seconds * self.timing_scale


SETTINGS_KEY = pytest.StashKey[Settings]()
