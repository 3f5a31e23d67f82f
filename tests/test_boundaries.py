"""Package boundaries, read from the source with ``ast`` (docs/architecture.md, "Packages and what they may import").

* Nothing imports a private module (a ``_name`` segment) of another package: ``reference.cluster`` may import
  ``reference._clock`` (private to ``reference``, which it is inside) but not ``reference.broker._cluster``
  (private to ``reference.broker``); ``conformance`` imports ``reference.discovery``, not its ``_multicast``.
* ``reports`` imports of ``conformance`` exactly the evidence schema, the clause table and the sequence diagram
  (:data:`REPORTS_MAY_IMPORT`), and those import nothing but the standard library and themselves.
* ``reference.client`` and ``reference.cluster`` do not import each other (discovery, which both use, is
  ``reference.discovery``), and ``reference.discovery`` imports neither; no cycle among ``reference``'s parts.

* One import namespace: the four packages are ``cck.codec``, ``cck.reference``, ``cck.conformance`` and
  ``cck.reports`` (the folders at the top of the repository, reached through the symlinks in ``cck/``).  Nothing
  imports, runs (``-m reference``) or names in a command the bare ``codec``, ``reference``, ``conformance``
  or ``reports``: in a checkout both names would import, and every class would exist twice.

``tests/reports/test_imports.py`` checks the second rule again at run time (what importing ``reports`` loads).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("codec", "reference", "conformance", "reports")
#: The one import namespace of the kit: ``cck.codec``, ..., whose modules are named here with it.
NAMESPACE = "cck"
#: Every folder of Python code in the repository (``cck`` holds the command and the links to the packages).
CODE = (*PACKAGES, "tests", "benchmarks", NAMESPACE)

#: What ``reports`` may import of ``conformance``: standard-library-only modules holding the data contract
#: between the kit and its report pipeline (design.md §2: "the evidence schema only"), and the sequence diagram
#: drawn from that evidence (a case page draws its wire log with exploration's renderer, not a copy of it).
REPORTS_MAY_IMPORT = ("cck.conformance.evidence.schema", "cck.conformance.clauses", "cck.conformance.sequence")
#: The subpackages those live in: standard library only, importing nothing else of the kit.
STDLIB_ONLY = ("cck.conformance.evidence", "cck.conformance.clauses", "cck.conformance.sequence")

#: Imports of another package's private module that are known and being removed, each with why it is
#: still here.  Empty is the goal; an entry that no longer occurs fails the test, so it cannot go stale.
KNOWN: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    package: str  # the package it is in (itself for an __init__)
    target: str  # the module imported, absolute
    line: int
    type_checking: bool  # inside ``if TYPE_CHECKING:`` only
    names: tuple[str, ...] = ()  # of ``from target import names``

    @property
    def where(self) -> str:
        return f"{self.module.removeprefix(NAMESPACE + '.').replace('.', '/')}.py:{self.line}"


def _module_name(path: Path) -> tuple[str, str]:
    parts = [NAMESPACE, *path.relative_to(ROOT).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _parse(path: Path) -> ast.Module:
    """``ast.parse`` of a source file.  CPython 3.11 can raise a spurious ``SystemError: AST constructor recursion
    depth mismatch`` when an earlier test (hypothesis does) changed the recursion limit; the same parse then
    succeeds, so it is made once more (a second failure is real and raised)."""
    source = path.read_text(encoding="utf-8")
    try:
        return ast.parse(source, filename=str(path))
    except SystemError:
        return ast.parse(source, filename=str(path))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports_in(path: Path) -> Iterator[Import]:
    module, package = _module_name(path)
    tree = _parse(path)

    def visit(node: ast.AST, type_checking: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.body:
                    yield from visit_one(statement, True)
                for statement in child.orelse:
                    yield from visit_one(statement, type_checking)
            else:
                yield from visit_one(child, type_checking)

    def visit_one(node: ast.AST, type_checking: bool) -> Iterator[Import]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, package, alias.name, node.lineno, type_checking)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            yield Import(module, package, source, node.lineno, type_checking, tuple(a.name for a in node.names))
            for alias in node.names:
                if alias.name != "*" and _is_module(f"{source}.{alias.name}"):
                    yield Import(module, package, f"{source}.{alias.name}", node.lineno, type_checking)
        else:
            yield from visit(node, type_checking)

    yield from visit(tree, False)


def _all_imports() -> list[Import]:
    found: list[Import] = []
    for name in PACKAGES:
        for path in sorted((ROOT / name).rglob("*.py")):
            found.extend(_imports_in(path))
    return found


IMPORTS = _all_imports()


def _inside(package: str, owner: str) -> bool:
    return package == owner or package.startswith(owner + ".")


def _private_owner(target: str, package: str) -> str | None:
    """The package whose private module ``target`` is, when ``package`` is not inside it; else None.

    The owner is the public package above the first private segment: ``codec._packets._base`` is private to
    ``codec`` (``_packets`` is codec's own, private subpackage, its modules codec's internals)."""
    parts = target.split(".")
    if parts[0] != NAMESPACE or len(parts) < 2 or parts[1] not in PACKAGES:
        return None
    for i, part in enumerate(parts):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            owner = ".".join(parts[:i])
            return None if _inside(package, owner) else owner
    return None


def test_the_source_is_found() -> None:
    modules = {i.module for i in IMPORTS}
    assert {"cck.reference.client._discovery", "cck.reports._schema", "cck.conformance.suite.test_discovery"} <= modules


def test_no_import_of_another_packages_private_module() -> None:
    crossing: dict[tuple[str, str], list[str]] = {}
    for i in IMPORTS:
        owner = _private_owner(i.target, i.package)
        if owner is not None:
            crossing.setdefault((i.module, i.target), []).append(f"{i.where}: {i.target} is private to {owner}")
    unexpected = [line for key, lines in sorted(crossing.items()) if key not in KNOWN for line in lines]
    assert not unexpected, "imports of another package's private module:\n" + "\n".join(unexpected)
    stale = sorted(set(KNOWN) - set(crossing))
    assert not stale, f"KNOWN lists imports that no longer occur (remove them): {stale}"


def test_reports_imports_only_the_evidence_schema_the_clause_table_and_the_diagram_of_conformance() -> None:
    def allowed(i: Import) -> bool:
        # ``from conformance.evidence import schema`` names the package, for its module ``schema`` only
        return i.target in REPORTS_MAY_IMPORT or (i.target == "cck.conformance.evidence" and i.names == ("schema",))

    wrong = [f"{i.where}: {i.target}" for i in IMPORTS
             if _inside(i.module, "reports") and _inside(i.target, "conformance") and not allowed(i)]
    assert not wrong, "reports imports conformance beyond " + ", ".join(REPORTS_MAY_IMPORT) + ":\n" + "\n".join(wrong)


@pytest.mark.parametrize("package", STDLIB_ONLY)
def test_what_reports_imports_of_conformance_is_standard_library_only(package: str) -> None:
    mine = [i for i in IMPORTS if _inside(i.module, package)]
    assert mine
    foreign = [f"{i.where}: {i.target}" for i in mine
               if not _inside(i.target, package)
               and (i.target.split(".")[0] in (NAMESPACE, *PACKAGES)
                    or i.target.split(".")[0] not in sys.stdlib_module_names)]
    assert not foreign, f"{package} must import only the standard library and itself:\n" + "\n".join(foreign)


def _subpackage_imports(source: str, target: str) -> list[str]:
    return [f"{i.where}: {i.target}" for i in IMPORTS
            if _inside(i.module, source) and _inside(i.target, target) and not i.type_checking]


def test_client_and_cluster_do_not_import_each_other() -> None:
    client_to_cluster = _subpackage_imports("cck.reference.client", "cck.reference.cluster")
    cluster_to_client = _subpackage_imports("cck.reference.cluster", "cck.reference.client")
    both = client_to_cluster + cluster_to_client
    assert not (client_to_cluster and cluster_to_client), "client and cluster import each other:\n" + "\n".join(both)
    assert not client_to_cluster, "reference.client imports reference.cluster:\n" + "\n".join(client_to_cluster)


@pytest.mark.parametrize("other", ["cck.reference.client", "cck.reference.cluster", "cck.reference.broker"])
def test_discovery_is_beneath_client_and_cluster(other: str) -> None:
    assert not _subpackage_imports("cck.reference.discovery", other)


def test_the_parts_of_reference_import_each_other_without_a_cycle() -> None:
    """Between ``reference``'s subpackages and top-level modules (``broker``, ``client``, ``cluster``, ``discovery``,
    ``_server``, ...) the imports form no cycle, ``TYPE_CHECKING``-only imports aside."""
    edges: dict[str, set[str]] = {}
    for i in IMPORTS:
        if i.type_checking or not _inside(i.module, "cck.reference") or not _inside(i.target, "cck.reference"):
            continue
        source, target = i.module.split(".")[1:], i.target.split(".")[1:]  # reference, its part, ...
        if len(source) > 1 and len(target) > 1 and source[1] != target[1]:
            edges.setdefault(source[1], set()).add(target[1])

    cycle = _cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(f"reference.{part}" for part in cycle)


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the directed graph ``edges`` (its nodes in order, the first repeated last), or None."""

    def cycle_from(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node):], node]
        for after in sorted(edges.get(node, ())):
            found = cycle_from(after, [*path, node])
            if found:
                return found
        return None

    for start in sorted(edges):
        cycle = cycle_from(start, [])
        if cycle is not None:
            return cycle
    return None


@pytest.mark.parametrize("package", ["cck.reference.broker", "cck.reference.client"])
def test_the_modules_of_the_broker_and_client_import_each_other_without_a_cycle(package: str) -> None:
    """Inside the broker and the client the modules form no import cycle, ``TYPE_CHECKING``-only imports (and the
    package's ``__init__``, which only re-exports) aside."""
    edges: dict[str, set[str]] = {}
    for i in IMPORTS:
        if i.type_checking or i.module == package or not _inside(i.module, package):
            continue
        if _inside(i.target, package) and i.target != package:
            edges.setdefault(i.module, set()).add(i.target)
    assert edges, f"no imports found inside {package}"
    cycle = _cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# ------------------------------------------------------------------------------------------------ one namespace

_BARE = "|".join(PACKAGES)
#: Code in a string (``"from cck.conformance.targets._forkserver import serve"``), a module run as a subprocess
#: (``"-m", "cck.reference"``), a command in the docs or the CI files (``cck run``).
_BARE_IN_STRING = re.compile(rf"""["'](?:from|import) ({_BARE})\b|["']-m["'],\s*["']({_BARE})\b""")
_BARE_COMMAND = re.compile(rf"python3? -m ({_BARE})\b")


def _python_files() -> list[Path]:
    return [p for name in CODE for p in sorted((ROOT / name).rglob("*.py")) if not p.is_relative_to(ROOT / "cck")
            or p.parent == ROOT / "cck"]  # cck/'s links lead to the packages, listed already


def test_nothing_imports_the_bare_package_names() -> None:
    bare: list[str] = []
    for path in _python_files():
        where = path.relative_to(ROOT)
        for node in ast.walk(_parse(path)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            bare += [f"{where}:{node.lineno}: {name}" for name in names if name.split(".")[0] in PACKAGES]
        text = path.read_text(encoding="utf-8") if path != Path(__file__).resolve() else ""  # this file names them
        bare += [f"{where}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
                 for m in _BARE_IN_STRING.finditer(text)]
    assert not bare, "bare package names (import cck.<package>, run python -m cck.<package>):\n" + "\n".join(bare)


def test_no_command_runs_the_bare_package_names() -> None:
    files = [ROOT / "tox.ini", ROOT / "Makefile", ROOT / "README.md", ROOT / "pyproject.toml",
             *sorted((ROOT / ".ci").glob("*")), *sorted((ROOT / "docs").rglob("*.md")),
             *sorted((ROOT / "fixtures").rglob("README.md")),
             *(p for p in _python_files() if p != Path(__file__).resolve())]  # this file names them
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in files if p.is_file()
             for m in _BARE_COMMAND.finditer(p.read_text(encoding="utf-8"))]
    assert not found, "commands with the bare package names (cck run, cck report, python -m cck.<package>):\n" + \
        "\n".join(found)


def test_importing_the_kit_loads_nothing_under_the_bare_names() -> None:
    program = ("import sys, cck._cli, cck.codec.scapy, cck.conformance.plugin, cck.conformance.suite, "
               "cck.conformance.artemis.__main__, cck.reference.__main__, cck.reports.__main__; "
               "print(' '.join(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=ROOT,
                          timeout=120)
    modules = done.stdout.split()
    assert "cck.conformance.plugin" in modules
    assert not [m for m in modules if m.split(".")[0] in PACKAGES]
