"""sds_core stays pure: importing every module pulls in neither Prefect nor Great Expectations."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import sds_core


def test_sds_core_imports_no_prefect_or_gx() -> None:
    """Every sds_core module imports in a fresh interpreter without prefect/GX/pathlib I/O deps."""
    names = [m.name for m in pkgutil.walk_packages(sds_core.__path__, "sds_core.")]
    assert names, "no sds_core modules found"
    code = (
        "import importlib, sys\n"
        f"for n in {names!r}: importlib.import_module(n)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('prefect', 'great_expectations')]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"sds_core pulled in: {out.stdout.strip()}"
