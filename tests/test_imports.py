"""Imports among policylab's modules point one way: no import cycles (DESIGN.md, issue #14).

Every module under src/policylab is read with `ast`; module-level and function-level imports
both count (a cycle is a cycle), exactly as /work/shared/tools/import_cycles.py counts them.
`from a import b` is an edge to module a.b when b is a module, else to a."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "src" / "policylab"


def module_graph(root: Path) -> dict[str, set[str]]:
    """module name → the package's modules it imports (itself excluded)."""
    pkg = root.name
    mods: dict[str, Path] = {}
    for f in root.rglob("*.py"):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        is_pkg = f.name == "__init__.py"
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = m.split(".") if is_pkg else m.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names
                ]
            else:
                continue
            for t in targets:
                if t.split(".")[0] != pkg:
                    continue
                r = resolve(t)
                if r and r != m:
                    edges[m].add(r)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_cycle_through_a_function_level_import(tmp_path):
    # pkg.a imports pkg.b at module level; pkg.b imports pkg.a inside a function.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.a import x\n")
    (pkg / "c.py").write_text("from . import a\n")  # one way only: no cycle
    assert cycles(module_graph(pkg)) == [["pkg.a", "pkg.b"]]


def test_policylab_has_no_import_cycles():
    edges = module_graph(ROOT)
    assert len(edges) > 50  # the walk found the package
    found = cycles(edges)
    if found:
        pytest.fail("import cycles:\n" + "\n".join(" ↔ ".join(c) for c in found))


def test_trainers_import_neither_the_api_nor_the_package_root():
    edges = module_graph(ROOT)
    for module, targets in edges.items():
        if module.startswith("policylab.trainers"):
            assert not targets & {"policylab", "policylab.api"}, (module, targets)
