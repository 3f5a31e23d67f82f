"""Package boundaries, read from the source with ``ast`` (docs/architecture.md, "Packages and what they may import").

* Nothing imports a private module (a ``_name`` segment) of another package: ``reference.cluster`` may import
  ``reference._clock`` (private to ``reference``, which it is inside) but not ``reference.broker._cluster``
  (private to ``reference.broker``); ``conformance`` imports ``reference.discovery``, not its ``_multicast``.
* ``reports`` imports of ``conformance`` exactly the evidence schema and the clause table
  (:data:`REPORTS_MAY_IMPORT`), and those import nothing but the standard library and themselves.
* ``reference.client`` and ``reference.cluster`` do not import each other (discovery, which both use, is
  ``reference.discovery``), and ``reference.discovery`` imports neither; no cycle among ``reference``'s parts.

``tests/reports/test_imports.py`` checks the second rule again at run time (what importing ``reports`` loads).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("codec", "reference", "conformance", "reports")

#: What ``reports`` may import of ``conformance``: standard-library-only modules holding the data contract
#: between the kit and its report pipeline (design.md §2: "the evidence schema only").
REPORTS_MAY_IMPORT = ("conformance.evidence.schema", "conformance.clauses")
#: The subpackages those live in: standard library only, importing nothing else of the kit.
STDLIB_ONLY = ("conformance.evidence", "conformance.clauses")

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
        return f"{self.module.replace('.', '/')}.py:{self.line}"


def _module_name(path: Path) -> tuple[str, str]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports_in(path: Path) -> Iterator[Import]:
    module, package = _module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

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
    if parts[0] not in PACKAGES:
        return None
    for i, part in enumerate(parts):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            owner = ".".join(parts[:i])
            return None if _inside(package, owner) else owner
    return None


def test_the_source_is_found() -> None:
    modules = {i.module for i in IMPORTS}
    assert {"reference.client._discovery", "reports._schema", "conformance.suite.test_discovery"} <= modules


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


def test_reports_imports_only_the_evidence_schema_and_the_clause_table_of_conformance() -> None:
    def allowed(i: Import) -> bool:
        # ``from conformance.evidence import schema`` names the package, for its module ``schema`` only
        return i.target in REPORTS_MAY_IMPORT or (i.target == "conformance.evidence" and i.names == ("schema",))

    wrong = [f"{i.where}: {i.target}" for i in IMPORTS
             if _inside(i.module, "reports") and _inside(i.target, "conformance") and not allowed(i)]
    assert not wrong, "reports imports conformance beyond " + ", ".join(REPORTS_MAY_IMPORT) + ":\n" + "\n".join(wrong)


@pytest.mark.parametrize("package", STDLIB_ONLY)
def test_what_reports_imports_of_conformance_is_standard_library_only(package: str) -> None:
    mine = [i for i in IMPORTS if _inside(i.module, package)]
    assert mine
    foreign = [f"{i.where}: {i.target}" for i in mine
               if not _inside(i.target, package)
               and (i.target.split(".")[0] in PACKAGES or i.target.split(".")[0] not in sys.stdlib_module_names)]
    assert not foreign, f"{package} must import only the standard library and itself:\n" + "\n".join(foreign)


def _subpackage_imports(source: str, target: str) -> list[str]:
    return [f"{i.where}: {i.target}" for i in IMPORTS
            if _inside(i.module, source) and _inside(i.target, target) and not i.type_checking]


def test_client_and_cluster_do_not_import_each_other() -> None:
    client_to_cluster = _subpackage_imports("reference.client", "reference.cluster")
    cluster_to_client = _subpackage_imports("reference.cluster", "reference.client")
    both = client_to_cluster + cluster_to_client
    assert not (client_to_cluster and cluster_to_client), "client and cluster import each other:\n" + "\n".join(both)
    assert not client_to_cluster, "reference.client imports reference.cluster:\n" + "\n".join(client_to_cluster)


@pytest.mark.parametrize("other", ["reference.client", "reference.cluster", "reference.broker"])
def test_discovery_is_beneath_client_and_cluster(other: str) -> None:
    assert not _subpackage_imports("reference.discovery", other)


def test_the_parts_of_reference_import_each_other_without_a_cycle() -> None:
    """Between ``reference``'s subpackages and top-level modules (``broker``, ``client``, ``cluster``, ``discovery``,
    ``_server``, ...) the imports form no cycle, ``TYPE_CHECKING``-only imports aside."""
    edges: dict[str, set[str]] = {}
    for i in IMPORTS:
        source, target = i.module.split("."), i.target.split(".")
        if i.type_checking or source[0] != "reference" or target[0] != "reference":
            continue
        if len(source) > 1 and len(target) > 1 and source[1] != target[1]:
            edges.setdefault(source[1], set()).add(target[1])

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
        assert cycle is None, "import cycle: " + " -> ".join(f"reference.{part}" for part in cycle)
