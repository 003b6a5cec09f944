"""The synthesizer name is typed once (sds_release/store/config/fields.py ``SynthesizerName``,
``AGGREGATE_SEEDED``): ``ReleaseParams.synthesizer`` is that Literal (the Prefect form offers
the names), and the SDS method's name is written as a string in its definition and the
registry only; everything else asks ``params.aggregate_seeded``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sds_release.store.config.fields import AGGREGATE_SEEDED, SYNTHESIZERS, SynthesizerName
from sds_release.store.config.release_params import ReleaseParams

PROJECT = Path(__file__).resolve().parents[3]
PRODUCT = ("sds_core", "sds_release")


def _modules_writing(name: str) -> list[str]:
    """The product modules with ``name`` as a whole string constant."""
    found = []
    for package in PRODUCT:
        for path in sorted((PROJECT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            if any(isinstance(n, ast.Constant) and n.value == name for n in ast.walk(tree)):
                found.append(str(path.relative_to(PROJECT)))
    return found


def test_the_sds_name_is_written_in_its_definition_and_the_registry_only() -> None:
    """``"aggregate-seeded"`` as a string: the synthesizer's class and the names' registry."""
    assert _modules_writing(AGGREGATE_SEEDED) == [
        "sds_core/synthesizers/aggregate_seeded.py",
        "sds_release/store/config/fields.py",
    ]
    assert _modules_writing("histogram-1way")  # the scan finds names (so the above can fail)


def test_the_parameter_is_the_literal_of_the_names() -> None:
    """The field's type is the names' Literal; its JSON schema (the Prefect form) lists them."""
    assert ReleaseParams.model_fields["synthesizer"].annotation == SynthesizerName
    schema = ReleaseParams.model_json_schema()["properties"]["synthesizer"]
    assert schema["enum"] == list(SYNTHESIZERS) and schema["default"] == AGGREGATE_SEEDED


@pytest.mark.parametrize(("name", "sds"), [(AGGREGATE_SEEDED, True), ("mst", False)])
def test_aggregate_seeded_says_whether_the_sds_stages_run(name: str, sds: bool) -> None:
    """``aggregate_seeded`` is the one test of the synthesizer's kind."""
    params = ReleaseParams(input="x.csv", dataset="d", synthesizer=name)  # type: ignore[arg-type]
    assert params.aggregate_seeded is sds


def test_an_unknown_name_is_refused_with_the_choices() -> None:
    """A name outside the Literal: the message lists every name (checked before the type)."""
    with pytest.raises(ValueError, match="unknown synthesizer 'sds'; choose one of aggregate-"):
        ReleaseParams(input="x.csv", dataset="d", synthesizer="sds")  # type: ignore[arg-type]
