"""The project's import graph: no cycles (function-level and TYPE_CHECKING imports included) and
dependencies that point one way: flows -> tasks -> release_store -> sds_core."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parent.parent
PACKAGES = ("sds_core", "release_store", "tasks", "flows")
LAYER = {"sds_core": 0, "release_store": 1, "tasks": 2, "flows": 3}


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((PROJECT / pkg).rglob("*.py")):
            parts = list(path.relative_to(PROJECT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module a dotted import name refers to (longest known prefix), or None."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _edges(module: str, path: Path) -> set[str]:
    """Every project module imported anywhere in the file (any depth, any branch)."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_pkg else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import sub`` imports the submodule when there is one
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names
            ]
        else:
            continue
        for t in targets:
            r = _resolve(t)
            if r is not None and r != module:
                out.add(r)
    return out


GRAPH = {m: _edges(m, p) for m, p in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read() -> None:
    """The walker sees the modules and a known edge (so the other tests can fail)."""
    assert "sds_core.marginals.engine" in GRAPH
    assert "sds_core.marginals.privacy_report" in GRAPH["sds_core.marginals.engine"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    """No two modules import each other, directly or through others, at any depth."""
    assert _cycles(GRAPH) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_dependencies_point_down(module: str) -> None:
    """sds_core imports only itself; release_store neither tasks nor flows; tasks not flows."""
    mine = LAYER[module.split(".")[0]]
    upward = sorted(m for m in GRAPH[module] if LAYER[m.split(".")[0]] > mine)
    assert upward == [], f"{module} imports a higher layer: {upward}"
