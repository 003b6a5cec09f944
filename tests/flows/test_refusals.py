"""A refusal before anything is read or charged is caught in one place
(sds_release/flows/refusals.py) and told by each entry point its own way."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sds_core.errors import SdsInputError
from sds_release.flows.refusals import refusals

FLOWS = Path(__file__).resolve().parents[2] / "sds_release" / "flows"


def test_a_refusal_is_told_then_raised_again() -> None:
    """The block's refusal goes to the teller, then propagates unchanged."""
    told: list[str] = []
    with pytest.raises(SdsInputError, match="no budget"), refusals(lambda e: told.append(str(e))):
        raise SdsInputError("no budget")
    assert told == ["no budget"]


def test_the_teller_may_raise_another_exception_instead() -> None:
    """What the teller returns is raised in the refusal's place (the CLI's exit)."""
    with pytest.raises(SystemExit), refusals(lambda e: SystemExit(2)):
        raise SdsInputError("bad option")


def test_other_errors_pass_untold() -> None:
    """An internal error is not a refusal: the teller is not called."""
    told: list[BaseException] = []
    with pytest.raises(RuntimeError), refusals(told.append):  # type: ignore[arg-type]
        raise RuntimeError("bug")
    assert told == []


def test_the_flows_catch_refusals_in_two_places_at_most() -> None:
    """``except SdsInputError`` in sds_release/flows: the refusals helper and the CLI's one
    error handler, nowhere else."""
    found = []
    for path in sorted(FLOWS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ExceptHandler) and "SdsInputError" in ast.unparse(
                node.type or ast.Constant(None)
            ):
                found.append(f"{path.relative_to(FLOWS)}:{node.lineno}")
    assert len(found) == 2, found
    assert {f.split(":")[0] for f in found} == {"refusals.py", "cli/common.py"}
