"""Known deviations: the intermittent flag (a race that passes in some runs is not 'no longer reproduces')."""

from __future__ import annotations

from pathlib import Path

import pytest

from cck.conformance.plugin._deviations import DeviationError, load_deviations
from cck.conformance.plugin._hooks import _apply_deviation
from cck.conformance.plugin._judge import Judgement
from cck.conformance.verdicts import Verdict


def _file(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "artemis-9.9.9.toml"
    path.write_text(f'[[deviation]]\ncase = "reattach.cut.9"\nverdict = "FAIL"\nreason = "a race"\n{extra}')
    return path


@pytest.mark.parametrize(("intermittent", "stale"), [(True, False), (False, True)])
def test_a_passing_case_is_stale_only_when_its_deviation_is_not_intermittent(
        tmp_path: Path, intermittent: bool, stale: bool) -> None:
    deviations = load_deviations(_file(tmp_path, f"intermittent = {str(intermittent).lower()}\n"))
    judged = _apply_deviation(Judgement(Verdict.PASS), deviations, "reattach.cut.9")
    assert (judged.stale is not None) is stale
    assert judged.deviation is None
    failed = _apply_deviation(Judgement(Verdict.FAIL, "dup"), deviations, "reattach.cut.9")
    assert failed.deviation is not None
    assert failed.conforms


def test_intermittent_must_be_a_boolean(tmp_path: Path) -> None:
    where = r"artemis-9\.9\.9\.toml: deviation #1 \(reattach\.cut\.9\): field 'intermittent'"
    with pytest.raises(DeviationError, match=where):
        load_deviations(_file(tmp_path, 'intermittent = "yes"\n'))


def test_each_target_kind_has_its_deviations_file() -> None:
    from cck.conformance.plugin._deviations import DEVIATIONS_DIR, default_deviations_file

    assert default_deviations_file("reference", None) == DEVIATIONS_DIR / "reference.toml"
    assert default_deviations_file("artemis", "2.44.0") == DEVIATIONS_DIR / "artemis-2.44.0.toml"
    assert default_deviations_file("hornetq", None) == DEVIATIONS_DIR / "hornetq-2.4.7.Final.toml"
    assert default_deviations_file("artemis1", None) == DEVIATIONS_DIR / "artemis1-1.5.6.toml"
    assert default_deviations_file("url", None) is None
