"""The mutants' patches made from their edits (``edits.toml``): each mutant is a few (path, old, new) text
replacements; applied to a copy of the tracked files they name, ``git diff`` of the copy is the mutant's patch
(``mutants/<name>.patch``, the artefact the runner applies).

After a refactor, a mutant whose ``old`` text no longer occurs exactly once is an :class:`EditError` naming the
mutant, the edit, the file and the text: move that edit to where the logic lives now, then
``python -m tests.sensitivity --regenerate NAME`` writes the patch again.  The working tree is only read.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ._runner import HERE, REPO_ROOT

__all__ = ["EDITS", "PATCHES", "Edit", "EditError", "load_edits", "regenerate", "render_patches"]

EDITS = HERE / "edits.toml"
PATCHES = HERE / "mutants"
_FIELDS = {"path", "old", "new"}


class EditError(ValueError):
    """A mutant's edit does not match the tree (or edits.toml is malformed)."""


@dataclasses.dataclass(frozen=True)
class Edit:
    path: str
    old: str
    new: str


def load_edits(path: Path = EDITS) -> dict[str, list[Edit]]:
    """The edits of every mutant, in the file's order; a malformed entry is an :class:`EditError` naming it."""
    with path.open("rb") as f:
        data = tomllib.load(f)
    edits: dict[str, list[Edit]] = {}
    for name, entries in data.items():
        if not isinstance(entries, list) or not entries:
            raise EditError(f"{path.name}: mutant {name!r}: expected one or more [[{name}]] tables")
        edits[name] = []
        for i, entry in enumerate(entries, 1):
            where = f"{path.name}: mutant {name!r}, edit {i}"
            if not isinstance(entry, dict) or set(entry) != _FIELDS:
                keys = sorted(entry) if isinstance(entry, dict) else entry
                raise EditError(f"{where}: needs exactly the fields path, old and new (has {keys})")
            if not all(isinstance(entry[k], str) for k in _FIELDS):
                raise EditError(f"{where}: path, old and new must be strings")
            if not entry["old"] or entry["old"] == entry["new"]:
                raise EditError(f"{where}: old must be non-empty and differ from new")
            edits[name].append(Edit(entry["path"], entry["old"], entry["new"]))
    return edits


def _excerpt(text: str, limit: int = 6) -> str:
    lines = text.splitlines() or [""]
    shown = "\n".join(f"    | {line}" for line in lines[:limit])
    return shown + (f"\n    | ... ({len(lines) - limit} more lines)" if len(lines) > limit else "")


def mutate(name: str, edits: Sequence[Edit], originals: Mapping[str, str]) -> dict[str, str]:
    """The files ``edits`` change, with the edits applied in order; each ``old`` must occur exactly once in its
    file as it is by then."""
    changed: dict[str, str] = {}
    for i, edit in enumerate(edits, 1):
        text = changed.get(edit.path, originals[edit.path])
        count = text.count(edit.old)
        if count != 1:
            raise EditError(
                f"{EDITS.name}: mutant {name!r}, edit {i}: the old text occurs {count} times in {edit.path} (it "
                f"must occur exactly once); move this edit to where that code lives now:\n{_excerpt(edit.old)}")
        changed[edit.path] = text.replace(edit.old, edit.new)
    return changed


def _git(cwd: Path, *args: str) -> str:
    # no user or system configuration: the diff's form must not depend on the machine
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"}
    done = subprocess.run(["git", "-c", "core.autocrlf=false", "-c", "core.quotePath=true", *args], cwd=cwd,
                          env=env, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode()


def _tracked(root: Path, paths: Iterable[str]) -> set[str]:
    wanted = sorted(set(paths))
    listed = _git(root, "ls-files", "-z", "--", *wanted)
    return {p for p in listed.split("\0") if p}


def _patch_text(diff: str) -> str:
    """``git diff`` without its ``index`` lines (blob IDs would change with any edit anywhere in the file)."""
    return "".join(line for line in diff.splitlines(keepends=True) if not line.startswith("index "))


def render_patches(names: Sequence[str], *, root: Path = REPO_ROOT,
                   edits_file: Path = EDITS) -> tuple[dict[str, str], dict[str, str]]:
    """``(patches, errors)`` by mutant name: each mutant's edits applied to a copy of the tracked files they
    name (as the working tree has them), and its patch, or why it could not be made."""
    table = load_edits(edits_file)
    unknown = sorted(set(names) - set(table))
    if unknown:
        raise EditError(f"{edits_file.name}: no edits for {', '.join(unknown)}")
    paths = {e.path for name in names for e in table[name]}
    tracked = _tracked(root, paths)
    patches: dict[str, str] = {}
    errors: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="cck-mutants-") as scratch:
        copy = Path(scratch)
        originals: dict[str, str] = {}
        for rel in sorted(paths & tracked):
            target = copy / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            originals[rel] = (root / rel).read_bytes().decode("utf-8")
            target.write_bytes((root / rel).read_bytes())
        _git(copy, "init", "-q")
        if originals:
            _git(copy, "add", "--", *sorted(originals))
        for name in names:
            missing = sorted({e.path for e in table[name]} - tracked)
            if missing:
                errors[name] = (f"{edits_file.name}: mutant {name!r}: {', '.join(missing)} is not a tracked file "
                                f"of the tree; move its edits to where that code lives now")
                continue
            try:
                changed = mutate(name, table[name], originals)
            except EditError as exc:
                errors[name] = str(exc)
                continue
            for rel, text in changed.items():
                (copy / rel).write_bytes(text.encode("utf-8"))
            try:
                patches[name] = _patch_text(_git(copy, "diff", "--no-color", "--no-ext-diff", "--no-renames",
                                                 "--src-prefix=a/", "--dst-prefix=b/", "-U3"))
            finally:
                for rel in changed:
                    (copy / rel).write_bytes((root / rel).read_bytes())
    return patches, errors


def regenerate(names: Sequence[str] = (), *, root: Path = REPO_ROOT, edits_file: Path = EDITS,
               out_dir: Path = PATCHES) -> tuple[list[str], dict[str, str]]:
    """Write ``out_dir/<name>.patch`` for ``names`` (default: every mutant of ``edits_file``); returns the names
    whose patch changed and the errors of those that could not be made (their patches are left as they are)."""
    chosen = list(names) or list(load_edits(edits_file))
    patches, errors = render_patches(chosen, root=root, edits_file=edits_file)
    changed: list[str] = []
    for name, text in patches.items():
        target = out_dir / f"{name}.patch"
        if not target.exists() or target.read_bytes() != text.encode():
            target.write_bytes(text.encode())
            changed.append(name)
    return changed, errors
