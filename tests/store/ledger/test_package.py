"""The ledger package's shape: modules that fit in a head, each named in the package map."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sds_release.store.ledger

PACKAGE = Path(sds_release.store.ledger.__file__).parent
MODULES = sorted(p for p in PACKAGE.glob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_ledger_module_fits_in_a_head(path: Path) -> None:
    """Every ledger module is at most 600 lines and opens with a docstring saying what it holds."""
    text = path.read_text()
    assert len(text.splitlines()) <= 600, f"{path.name}: split it by concept"
    assert ast.get_docstring(ast.parse(text)), f"{path.name} has no docstring"


def test_package_map_names_every_module() -> None:
    """The package docstring maps every module of sds_release/store/ledger/ (``name``: what)."""
    doc = sds_release.store.ledger.__doc__ or ""
    missing = [p.stem for p in MODULES if f"- ``{p.stem}``:" not in doc]
    assert missing == []
