"""Layering: sds_core is pure; the store (sds_release.store) is Prefect-free and imports neither
the tasks nor the flows."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import sds_core
import sds_release.store


def _imported_after(package: object, prefix: str, depth: int = 1) -> set[str]:
    """Packages in sys.modules (their first ``depth`` name parts) after importing every module
    of ``package``."""
    names = [m.name for m in pkgutil.walk_packages(package.__path__, prefix)]  # type: ignore[attr-defined]
    assert names, f"no modules found under {prefix}"
    code = (
        "import importlib, sys\n"
        f"for n in {names!r}: importlib.import_module(n)\n"
        f"print(','.join(sorted({{'.'.join(m.split('.')[:{depth}]) for m in sys.modules}})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.strip().split(","))


def test_sds_core_imports_no_prefect_or_gx() -> None:
    """Every sds_core module imports in a fresh interpreter without prefect, GX or the store."""
    loaded = _imported_after(sds_core, "sds_core.")
    bad = loaded & {"prefect", "great_expectations", "pydantic", "sds_release"}
    assert not bad, f"sds_core pulled in: {sorted(bad)}"


def test_the_store_is_prefect_free() -> None:
    """Every sds_release.store module imports without prefect, the tasks or the flows (GX is
    the gate's)."""
    loaded = _imported_after(sds_release.store, "sds_release.store.", depth=2)
    bad = loaded & {"prefect", "sds_release.tasks", "sds_release.flows"}
    assert not bad, f"sds_release.store pulled in: {sorted(bad)}"


@pytest.mark.parametrize("name", ["sds_core", "sds_release", "sds_release.store"])
def test_package_import_is_cheap(name: str) -> None:
    """Importing the package alone loads none of its submodules (the public API is lazy)."""
    code = (
        f"import sys, {name}\nprint(','.join(m for m in sys.modules if m.startswith('{name}.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
