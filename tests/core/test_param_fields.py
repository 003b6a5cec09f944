"""Tests of sds_core.param_fields: FieldSpec rules, and that every core parameter field is
declared once with a spec its class validates from."""

from __future__ import annotations

import dataclasses
import math
from contextlib import nullcontext as does_not_raise
from typing import Any

import pytest

from sds_core.data.params import PrepareParams
from sds_core.errors import SdsInputError, SdsInternalError
from sds_core.evaluation.params import EvaluationParams
from sds_core.marginals.params import DpParams
from sds_core.param_fields import SPEC, FieldSpec, field_specs, interval_text, param
from sds_core.synthesis.generator import SynthesisParams

CORE = (DpParams, SynthesisParams, PrepareParams, EvaluationParams)


@pytest.mark.parametrize(
    ("spec", "rule", "allowed"),
    [
        (FieldSpec("d", "p", int, ge=1, le=10), "an integer in 1..10", "1..10"),
        (FieldSpec("d", "p", int, ge=1), "an integer >= 1", "≥ 1"),
        (FieldSpec("d", "p", int, gt=0, optional=True), "None or an integer > 0", "> 0 or none"),
        (FieldSpec("d", "p", int), "an integer", "any integer"),
        (FieldSpec("d", "p", float, gt=0, le=100), "in (0, 100]", "(0, 100]"),
        (
            FieldSpec("d", "p", float, gt=0, lt=1, optional=True),
            "in (0, 1) or None",
            "(0, 1) or none",
        ),
        (FieldSpec("d", "p", float, gt=0), "a finite number > 0", "> 0"),
        (FieldSpec("d", "p", float), "a finite number", "finite"),
        (FieldSpec("d", "p", bool), "a bool", "true/false"),
        (FieldSpec("d", "p", str, choices=("a", "b")), "one of ('a', 'b')", "`a`, `b`"),
        (FieldSpec("d", "p", dict), "a dict", "`dict`"),
    ],
)
def test_rule_and_allowed_texts(spec: FieldSpec, rule: str, allowed: str) -> None:
    """Error messages and the docs tables state each kind of rule in their own notation."""
    assert spec.rule() == rule
    assert spec.allowed() == allowed


@pytest.mark.parametrize(
    ("spec", "value", "ok"),
    [
        (FieldSpec("d", "p", int, ge=1, le=10), 10, True),
        (FieldSpec("d", "p", int, ge=1, le=10), 11, False),
        (FieldSpec("d", "p", int, ge=1, le=10), 1.0, False),
        (FieldSpec("d", "p", int, ge=1, le=10), True, False),
        (FieldSpec("d", "p", int, ge=1, le=10), None, False),
        (FieldSpec("d", "p", int, ge=1, optional=True), None, True),
        (FieldSpec("d", "p", float, gt=0, lt=1), 0.5, True),
        (FieldSpec("d", "p", float, gt=0, lt=1), 1, False),
        (FieldSpec("d", "p", float, gt=0, lt=1), math.nan, False),
        (FieldSpec("d", "p", float, gt=0), math.inf, False),
        (FieldSpec("d", "p", float, gt=0), 3, True),
        (FieldSpec("d", "p", bool), 1, False),
        (FieldSpec("d", "p", str, choices=("a",)), "b", False),
        (FieldSpec("d", "p"), object(), True),  # kind None: the owner checks
    ],
)
def test_allows(spec: FieldSpec, value: object, ok: bool) -> None:
    """Kinds are strict (no bool or float for int, finite floats); bounds as declared."""
    assert spec.allows(value) is ok


@pytest.mark.parametrize(
    ("make", "expectation"),
    [
        (lambda: FieldSpec("d", "p", int, ge=0), does_not_raise()),
        (lambda: FieldSpec("", "p"), pytest.raises(SdsInternalError, match="needs texts")),
        (lambda: FieldSpec("d", " "), pytest.raises(SdsInternalError, match="needs texts")),
        (lambda: FieldSpec("d", "p", str, ge=0), pytest.raises(SdsInternalError, match="bounds")),
        (lambda: FieldSpec("d", "p", int, ge=0, gt=0), pytest.raises(SdsInternalError)),
        (lambda: FieldSpec("d", "p", int, le=0, lt=0), pytest.raises(SdsInternalError)),
        (lambda: FieldSpec("d", "p", int, choices=("a",)), pytest.raises(SdsInternalError)),
        (lambda: param(0, doc="d", privacy="p", kind=int, ge=1), pytest.raises(SdsInternalError)),
    ],
)
def test_bad_declarations_are_bugs(make: Any, expectation: Any) -> None:
    """A malformed spec, or a default that breaks its own rule, is an internal error."""
    with expectation:
        make()


def test_interval_text_one_sided_upper() -> None:
    """Upper-only ranges read ≤ / <."""
    assert interval_text(True, le=5) == "≤ 5"
    assert interval_text(False, lt=1) == "< 1"


@pytest.mark.parametrize("cls", CORE)
def test_every_core_field_is_declared_with_a_spec(cls: type) -> None:
    """Every field of the core parameter objects carries a FieldSpec with doc and privacy text,
    and the class docstring lists each field (generated from the specs)."""
    for f in dataclasses.fields(cls):
        spec = f.metadata.get(SPEC)
        assert isinstance(spec, FieldSpec), f"{cls.__name__}.{f.name} has no FieldSpec"
        assert spec.doc.strip() and spec.privacy.strip()
        assert f"        {f.name}: " in (cls.__doc__ or "")
    assert set(field_specs(cls)) == {f.name for f in dataclasses.fields(cls)}
    cls()  # the defaults pass the class's own validation


def _outside(spec: FieldSpec) -> list[object]:
    """Values just outside each bound of a numeric spec, and a value of the wrong kind."""
    step = 1 if spec.kind is int else 1e-9
    out: list[object] = ["1"]
    if spec.ge is not None:
        out.append(spec.ge - step)
    if spec.gt is not None:
        out.append(spec.gt)
    if spec.le is not None:
        out.append(spec.le + step)
    if spec.lt is not None:
        out.append(spec.lt)
    if not spec.optional:
        out.append(None)
    return out


def _inside(spec: FieldSpec) -> list[object]:
    """Values on each inclusive bound and just inside each exclusive one."""
    step = 1 if spec.kind is int else 1e-9
    out = [b for b in (spec.ge, spec.le) if b is not None]
    out += [spec.gt + step] if spec.gt is not None else []
    out += [spec.lt - step] if spec.lt is not None else []
    return out


_NUMERIC = [
    (cls, name, spec)
    for cls in CORE
    for name, (_, spec) in field_specs(cls).items()
    if spec.kind in (int, float)
]


@pytest.mark.parametrize(
    ("cls", "name", "spec"), _NUMERIC, ids=[f"{c.__name__}.{n}" for c, n, _ in _NUMERIC]
)
def test_numeric_fields_are_validated_from_their_spec(
    cls: type, name: str, spec: FieldSpec
) -> None:
    """Each numeric field accepts its bounds and rejects values outside them with a message
    naming the class, the field, the rule and the value."""
    for value in _inside(spec):
        cls(**{name: value})
    for value in _outside(spec):
        with pytest.raises(SdsInputError, match=rf"{cls.__name__}\.{name} must be") as e:
            cls(**{name: value})
        assert spec.rule() in str(e.value) and repr(value) in str(e.value)


def test_dp_params_caps_match_the_release_form() -> None:
    """ε <= 100 and R <= 10 are core rules now (the release form had them already)."""
    DpParams(epsilon=100.0, reporting_length=10)
    with pytest.raises(SdsInputError, match=r"DpParams\.epsilon must be in \(0, 100\], got 100.5"):
        DpParams(epsilon=100.5)
    with pytest.raises(SdsInputError, match=r"reporting_length must be an integer in 1\.\.10"):
        DpParams(reporting_length=11)


def test_kind_checks_of_object_and_choice_fields() -> None:
    """Object fields check their class, string fields their choices, bools their type."""
    with pytest.raises(SdsInputError, match=r"DpParams\.accuracy_mode must be an AccuracyMode"):
        DpParams(accuracy_mode="balanced")  # type: ignore[arg-type]
    with pytest.raises(SdsInputError, match=r"fabrication_mode must be a FabricationMode"):
        DpParams(fabrication_mode=None)  # type: ignore[arg-type]
    with pytest.raises(SdsInputError, match="allow_empty_columns must be a bool, got 1"):
        PrepareParams(allow_empty_columns=1)  # type: ignore[arg-type]
    with pytest.raises(SdsInputError, match="subject_id must be a non-empty column name"):
        PrepareParams(subject_id=3)  # type: ignore[arg-type]
