"""Known deviations: one TOML file per target version (``conformance/deviations/``), each entry a case whose
verdict against that target is known, with the reason.  Never a silent xfail: a matched deviation is shown with
its reason, and one that no longer reproduces is reported."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from cck.conformance.targets import LEGACY_SERVERS
from cck.conformance.verdicts import Verdict

__all__ = ["Deviation", "DeviationError", "DEVIATIONS_DIR", "default_deviations_file", "client_deviations_file",
           "load_deviations", "find_deviation"]

DEVIATIONS_DIR = Path(__file__).resolve().parent.parent / "deviations"

_FIELDS = {"case", "verdict", "reason", "link", "intermittent"}
#: A deviation expects a verdict of the subject other than PASS (a PASS needs no excuse; a KIT_ERROR is the kit's
#: defect, never the subject's deviation).
_EXPECTABLE = tuple(v for v in Verdict if v not in (Verdict.PASS, Verdict.KIT_ERROR))


class DeviationError(ValueError):
    """A deviations file that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Deviation:
    #: A case ID or a glob over case IDs.
    case: str
    verdict: Verdict
    reason: str
    link: str | None
    file: Path
    index: int
    #: A race: the case passes in some runs.  Such a PASS is not reported as "no longer reproduces".
    intermittent: bool = False

    def matches(self, case_id: str) -> bool:
        return fnmatchcase(case_id, self.case)

    def describe(self) -> str:
        return f"{self.file.name} entry #{self.index + 1} ({self.case}, {self.verdict})"


def default_deviations_file(target: str, version: str | None) -> Path | None:
    """The kit's file for a target: ``reference.toml``; ``artemis-<version>.toml`` for artemis, and for a url
    target whose user declared an Artemis version (when the kit has a file for it); ``<kind>-<version>.toml`` for an
    older server (hornetq, artemis1)."""
    if target == "reference":
        return DEVIATIONS_DIR / "reference.toml"
    if target in LEGACY_SERVERS:
        return DEVIATIONS_DIR / f"{target}-{LEGACY_SERVERS[target].version}.toml"
    if version is None:
        return None
    path = DEVIATIONS_DIR / f"artemis-{version}.toml"
    if target == "artemis" or path.is_file():
        return path
    return None


def client_deviations_file(client_name: str) -> Path:
    """The kit's file for a client under test: ``client-kit.toml``, ``client-artemis-<version>.toml``."""
    return DEVIATIONS_DIR / f"client-{client_name.replace('@', '-')}.toml"


def _entry(path: Path, index: int, entry: Any) -> Deviation:
    where = f"{path.name}: deviation #{index + 1}"
    if not isinstance(entry, dict):
        raise DeviationError(f"{where}: a [[deviation]] table is expected")
    if isinstance(entry.get("case"), str):
        where = f"{where} ({entry['case']})"
    unknown = sorted(set(entry) - _FIELDS)
    if unknown:
        raise DeviationError(f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(_FIELDS))})")
    for name in ("case", "verdict", "reason"):
        if not isinstance(entry.get(name), str) or not entry[name].strip():
            raise DeviationError(f"{where}: field {name!r} is required and must be non-empty text")
    if entry["verdict"] not in _EXPECTABLE:
        raise DeviationError(f"{where}: verdict {entry['verdict']!r} is not one of {', '.join(_EXPECTABLE)}")
    link = entry.get("link")
    if link is not None and (not isinstance(link, str) or not link.strip()):
        raise DeviationError(f"{where}: field 'link', when present, must be non-empty text")
    intermittent = entry.get("intermittent", False)
    if not isinstance(intermittent, bool):
        raise DeviationError(f"{where}: field 'intermittent', when present, must be true or false")
    return Deviation(case=entry["case"], verdict=Verdict(entry["verdict"]), reason=entry["reason"].strip(),
                     link=link, file=path, index=index, intermittent=intermittent)


def load_deviations(path: Path | None) -> tuple[Deviation, ...]:
    """The entries of a deviations file; none for ``None`` or a file that does not exist (no deviations known)."""
    if path is None or not path.exists():
        return ()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DeviationError(f"{path}: not readable TOML: {exc}") from None
    unknown = sorted(set(data) - {"deviation"})
    if unknown:
        raise DeviationError(f"{path.name}: unknown top-level key(s) {', '.join(unknown)} (only [[deviation]] tables)")
    entries = data.get("deviation", [])
    if not isinstance(entries, list):
        raise DeviationError(f"{path.name}: 'deviation' must be an array of tables ([[deviation]])")
    deviations = tuple(_entry(path, i, e) for i, e in enumerate(entries))
    exact = [d.case for d in deviations]
    twice = sorted({c for c in exact if exact.count(c) > 1})
    if twice:
        raise DeviationError(f"{path.name}: case {twice[0]!r} is listed more than once")
    return deviations


def find_deviation(deviations: tuple[Deviation, ...], case_id: str) -> Deviation | None:
    """The entry for a case: its exact ID if listed, else the first glob that matches."""
    for deviation in deviations:
        if deviation.case == case_id:
            return deviation
    return next((d for d in deviations if d.matches(case_id)), None)
