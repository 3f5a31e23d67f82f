"""The mutants' edits (edits.toml) still match the current tree, and every patch is exactly what its edits make of
it: a refactor that moves a mutant's code fails here, naming the edit to move (then ``python -m tests.sensitivity
--regenerate NAME`` writes the patch again)."""

from __future__ import annotations

import difflib
import subprocess
from pathlib import Path

import pytest

from tests.sensitivity._regenerate import PATCHES, EditError, load_edits, regenerate, render_patches
from tests.sensitivity._runner import load_mutants

MUTANTS = [m.name for m in load_mutants()]


@pytest.fixture(scope="module")
def rendered() -> tuple[dict[str, str], dict[str, str]]:
    return render_patches(MUTANTS)


def test_every_mutant_has_edits_and_only_those() -> None:
    assert sorted(load_edits()) == sorted(MUTANTS)


def test_the_patches_are_the_files_the_runner_applies() -> None:
    assert {m.name: m.patch.resolve() for m in load_mutants()} == {n: (PATCHES / f"{n}.patch").resolve()
                                                                   for n in MUTANTS}


@pytest.mark.parametrize("name", MUTANTS)
def test_edits_match_and_make_the_stored_patch(name: str, rendered: tuple[dict[str, str], dict[str, str]]) -> None:
    patches, errors = rendered
    if name in errors:
        pytest.fail(errors[name], pytrace=False)
    stored = (PATCHES / f"{name}.patch").read_text()
    if patches[name] != stored:
        drift = "".join(difflib.unified_diff(stored.splitlines(keepends=True), patches[name].splitlines(keepends=True),
                                             f"mutants/{name}.patch (stored)", "made from edits.toml now"))
        pytest.fail(f"mutants/{name}.patch is not what edits.toml makes of the current tree; check the edit still "
                    f"makes the same fault, then run `python -m tests.sensitivity --regenerate {name}`:\n{drift}",
                    pytrace=False)


# ------------------------------------------------------------------------------------------------ on a toy tree

def _toy(tmp_path: Path, edits: str) -> tuple[Path, Path, Path]:
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "m.py").write_text("def f(x):\n    return x + 1\n\n\ndef g(x):\n    return x + 1\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "pkg/m.py"], cwd=root, check=True)
    table = tmp_path / "edits.toml"
    table.write_text(edits)
    out = tmp_path / "mutants"
    out.mkdir()
    return root, table, out


def test_regenerate_writes_the_diff_and_leaves_the_tree(tmp_path: Path) -> None:
    root, table, out = _toy(tmp_path, "[[off]]\npath = 'pkg/m.py'\nold = '''\ndef f(x):\n    return x + 1'''\n"
                                      "new = '''\ndef f(x):\n    return x + 2'''\n")
    before = (root / "pkg" / "m.py").read_bytes()
    changed, errors = regenerate(root=root, edits_file=table, out_dir=out)
    assert (changed, errors) == (["off"], {})
    patch = (out / "off.patch").read_text()
    assert patch.startswith("diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1,5 +1,5 @@")
    assert "-    return x + 1\n+    return x + 2\n" in patch
    assert (root / "pkg" / "m.py").read_bytes() == before
    subprocess.run(["git", "apply", "--check", str(out / "off.patch")], cwd=root, check=True)
    assert regenerate(root=root, edits_file=table, out_dir=out) == ([], {})  # the same bytes: unchanged


@pytest.mark.parametrize(("old", "count"), [("return x + 3", 0), ("return x + 1", 2)])
def test_an_edit_that_does_not_match_once_names_the_mutant_file_and_text(tmp_path: Path, old: str,
                                                                         count: int) -> None:
    root, table, out = _toy(tmp_path, f"[[off]]\npath = 'pkg/m.py'\nold = '{old}'\nnew = 'return 0'\n")
    changed, errors = regenerate(root=root, edits_file=table, out_dir=out)
    assert changed == []
    assert f"mutant 'off', edit 1: the old text occurs {count} times in pkg/m.py" in errors["off"]
    assert f"| {old}" in errors["off"]
    assert not (out / "off.patch").exists()


def test_an_edit_of_an_untracked_file_is_named(tmp_path: Path) -> None:
    root, table, out = _toy(tmp_path, "[[off]]\npath = 'pkg/gone.py'\nold = 'a'\nnew = 'b'\n")
    _, errors = regenerate(root=root, edits_file=table, out_dir=out)
    assert "mutant 'off': pkg/gone.py is not a tracked file" in errors["off"]


def test_a_malformed_edit_is_named(tmp_path: Path) -> None:
    _, table, _ = _toy(tmp_path, "[[off]]\npath = 'pkg/m.py'\nold = 'a'\n")
    with pytest.raises(EditError, match=r"mutant 'off', edit 1: needs exactly the fields path, old and new"):
        load_edits(table)
