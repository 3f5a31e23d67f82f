"""The mutant set: mutants.toml parses, names its patches, cites clauses that exist, and every patch applies
cleanly to a copy of the current tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from cck.conformance.clauses import load_clauses
from tests.sensitivity._runner import MANIFEST, Selection, apply_patch, copy_tree, load_mutants, tree_files

MUTANTS = load_mutants()


def test_at_least_25_mutants_over_broker_and_client() -> None:
    assert len(MUTANTS) >= 25
    subjects = {m.selection.subject for m in MUTANTS}
    assert subjects == {"broker", "client"}
    assert sum(m.smoke for m in MUTANTS) == 3


def test_every_patch_file_is_listed_once() -> None:
    listed = {m.patch.resolve() for m in MUTANTS}
    on_disk = {p.resolve() for p in (MANIFEST.parent / "mutants").glob("*.patch")}
    assert listed == on_disk


def test_clauses_exist() -> None:
    clauses = load_clauses()
    assert {m.clause for m in MUTANTS} <= set(clauses)


def test_selection_argv() -> None:
    assert Selection("broker", ("a.*", "b.1")).argv() == ["--target", "reference", "--case", "a.*", "--case", "b.1"]
    assert Selection("client", ("backoff.*",)).argv() == ["--client", "kit", "--case", "backoff.*"]


def test_bad_manifest_entry_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "mutants.toml"
    bad.write_text('[[mutant]]\nname = "x"\npatch = "x.patch"\n')
    with pytest.raises(ValueError, match=r"mutant 1 \(x\).*missing fields"):
        load_mutants(bad)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_tree(tmp_path_factory.mktemp("tree"), tree_files())


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_patch_applies_to_the_current_tree(mutant: object, tree: Path) -> None:
    from tests.sensitivity._runner import Mutant

    assert isinstance(mutant, Mutant)
    assert apply_patch(mutant.patch, tree, check_only=True) is None


def test_a_patch_that_does_not_apply_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text("a = 1\n")
    patch = tmp_path / "p.patch"
    patch.write_text("--- a/f.py\n+++ b/f.py\n@@ -1 +1 @@\n-a = 2\n+a = 3\n")
    error = apply_patch(patch, tmp_path)
    assert error is not None
    assert "p.patch does not apply" in error
