"""The project's import graph: no cycles (function-level and TYPE_CHECKING imports included) and
dependencies that point one way, between the layers and between the packages inside them.

The allowed order is written once, in :data:`ORDER`: a package may import only itself and the
packages before it."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parent.parent
PACKAGES = ("sds_core", "sds_release")
LAYERS = ("sds_core", "sds_release.store", "sds_release.tasks", "sds_release.flows")
"""The layers from the bottom up (a module of ``sds_release`` outside them, its package map and
``__main__``, is ordered by :data:`ORDER` alone)."""

ORDER = (
    "sds_core",  # the pure DP core (its own stage order is its packages' business)
    "sds_release",  # its __init__ only: the product's package map, no imports
    "sds_release.store",  # its __init__ only: the package map, no imports
    "sds_release.store.workspace",  # the home on disk: layout, atomic writes, manifest, integrity
    "sds_release.store.storage",  # object storage: s3:// URLs, listing, reading, publishing copies
    "sds_release.store.ledger",  # the privacy-budget ledger
    "sds_release.store.config",  # ReleaseParams, config files, declared schema, core objects
    "sds_release.store.inputs",  # reading the input, pre-flight, schema checks, the GX gate
    "sds_release.store.run",  # the running release: stage runner, registry, workdir, progress
    "sds_release.store.executor",  # the executor interface, the local executor
    "sds_release.store.cluster",  # the Dask executor
    "sds_release.store.report",  # report.html and explorer.html
    "sds_release.store.publish",  # the publish stage's files
    "sds_release.store.audit",  # audit, replay, signatures
    "sds_release.store.series",  # a dataset's DP counts across its periods (published files)
    "sds_release.store.compare",  # sds evaluate outside a release
    "sds_release.tasks",  # one Prefect task per stage
    "sds_release.flows",  # the flows (release, replay)
    "sds_release.flows.local",  # running a release on this machine: server, warm runner, launch
    "sds_release.flows.cli",  # the sds command
    "sds_release.__main__",  # python -m sds_release: the sds command
)
"""Packages from the bottom up; a package imports only itself and the ones listed before it."""


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


@functools.cache
def _graph() -> dict[str, set[str]]:
    """Each project module's imports of project modules, read when a test first asks (not at
    collection, which every test process does)."""
    return {m: _edges(m, p) for m, p in MODULES.items()}


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
    assert "sds_core.marginals.engine" in _graph()
    assert "sds_core.marginals.privacy_report" in _graph()["sds_core.marginals.engine"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    """No two modules import each other, directly or through others, at any depth."""
    assert _cycles(_graph()) == []


def _layer(module: str) -> int:
    """The index in :data:`LAYERS` of the layer ``module`` is in (-1: none, the package map)."""
    found = [
        i for i, layer in enumerate(LAYERS) if module == layer or module.startswith(layer + ".")
    ]
    return found[-1] if found else -1


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) >= 0))
def test_dependencies_point_down(module: str) -> None:
    """sds_core imports only itself; the store neither tasks nor flows; tasks not flows."""
    mine = _layer(module)
    upward = sorted(m for m in _graph()[module] if _layer(m) > mine)
    assert upward == [], f"{module} imports a higher layer: {upward}"


def _unit(module: str) -> str:
    """The entry of :data:`ORDER` a module belongs to (its longest listed prefix)."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in ORDER:
            return ".".join(parts[:i])
    raise AssertionError(f"{module} belongs to no package of ORDER: add its package there")


def _unit_graph() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {u: set() for u in ORDER}
    for module, deps in _graph().items():
        out[_unit(module)] |= {_unit(d) for d in deps} - {_unit(module)}
    return out


def test_every_package_is_ordered() -> None:
    """Every module belongs to a package of ORDER, and every package of the store is listed."""
    for module in MODULES:
        _unit(module)
    listed = {u.split(".")[2] for u in ORDER if u.startswith("sds_release.store.")}
    assert _graph()["sds_release"] == set() and _graph()["sds_release.store"] == set()
    on_disk = {
        p.stem if p.is_file() else p.name
        for p in (PROJECT / "sds_release" / "store").iterdir()
        if (p.is_dir() and (p / "__init__.py").exists())
        or (p.suffix == ".py" and p.stem != "__init__")
    }
    assert on_disk == listed


def test_package_graph_is_acyclic() -> None:
    """No two packages import each other, directly or through others."""
    assert _cycles(_unit_graph()) == []


@pytest.mark.parametrize("unit", ORDER)
def test_packages_import_only_those_below(unit: str) -> None:
    """A package imports only the packages listed before it in ORDER."""
    mine = ORDER.index(unit)
    upward = sorted(u for u in _unit_graph()[unit] if ORDER.index(u) > mine)
    assert upward == [], f"{unit} imports a package above it: {upward}"


def test_the_order_is_enforced() -> None:
    """The package check sees a known downward edge (so it can fail)."""
    assert "sds_release.store.ledger" in _unit_graph()["sds_release.store.run"]
