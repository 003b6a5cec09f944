"""Layering: sds_core is pure; release_store is Prefect-free and imports neither tasks nor flows."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import release_store
import sds_core


def _imported_after(package: object, prefix: str) -> set[str]:
    """Top-level packages in sys.modules after importing every module of ``package``."""
    names = [m.name for m in pkgutil.walk_packages(package.__path__, prefix)]  # type: ignore[attr-defined]
    assert names, f"no modules found under {prefix}"
    code = (
        "import importlib, sys\n"
        f"for n in {names!r}: importlib.import_module(n)\n"
        "print(','.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.strip().split(","))


def test_sds_core_imports_no_prefect_or_gx() -> None:
    """Every sds_core module imports in a fresh interpreter without prefect, GX or the store."""
    loaded = _imported_after(sds_core, "sds_core.")
    bad = loaded & {"prefect", "great_expectations", "pydantic", "release_store", "tasks", "flows"}
    assert not bad, f"sds_core pulled in: {sorted(bad)}"


def test_release_store_is_prefect_free() -> None:
    """Every release_store module imports without prefect, tasks or flows (GX is the gate's)."""
    loaded = _imported_after(release_store, "release_store.")
    bad = loaded & {"prefect", "tasks", "flows"}
    assert not bad, f"release_store pulled in: {sorted(bad)}"


@pytest.mark.parametrize("name", ["sds_core", "release_store"])
def test_package_import_is_cheap(name: str) -> None:
    """Importing the package alone loads none of its submodules (the public API is lazy)."""
    code = (
        f"import sys, {name}\nprint(','.join(m for m in sys.modules if m.startswith('{name}.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
