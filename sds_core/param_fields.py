"""Parameter fields declared once: each setting's default, bounds, meaning and privacy effect.

The core parameter objects (``DpParams``, ``SynthesisParams``, ``EvaluationParams``,
``PrepareParams``) declare every field with :func:`param`, which keeps a :class:`FieldSpec` in the
dataclass field's metadata. The objects validate themselves from it (:func:`check_fields`), and
``sds_release.store.config`` builds the release form (pydantic) and the docs tables from it.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from dataclasses import dataclass
from typing import Any, TypeVar

from sds_core.errors import SdsInputError, invariant

SPEC = "sds_core.param_fields.FieldSpec"
"""Key of the :class:`FieldSpec` in a dataclass field's ``metadata``."""

_C = TypeVar("_C", bound=type)


def interval_text(
    integer: bool,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
) -> str:
    """Compact notation of a numeric range, as the docs tables show it.

    >>> interval_text(True, ge=1, le=10), interval_text(False, gt=0, le=100)
    ('1..10', '(0, 100]')
    >>> interval_text(True, gt=0), interval_text(False, ge=0), interval_text(False)
    ('> 0', '≥ 0', 'finite')
    """
    low, left = (ge, "[") if gt is None else (gt, "(")
    high, right = (le, "]") if lt is None else (lt, ")")
    if low is not None and high is not None:
        if integer and gt is None and lt is None:
            return f"{low}..{high}"
        return f"{left}{low}, {high}{right}"
    if low is not None:
        return f"{'≥' if gt is None else '>'} {low}"
    if high is not None:
        return f"{'≤' if lt is None else '<'} {high}"
    return "any integer" if integer else "finite"


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """How one parameter may be set and what it means (kept in its dataclass field's metadata).

    Args:
        doc: what the parameter does, with its default formula; shown in the release form, the
            docs tables and the owner's docstring.
        privacy: its privacy meaning: how it changes the guarantee or the noise, or why it
            cannot (post-processing, evaluation).
        kind: the type of a value: ``int``, ``float`` (a finite int or float), ``bool``, ``str``,
            another class (checked with ``isinstance``), or None when the owner's
            ``__post_init__`` checks the value itself (sequences, cross-field rules).
        ge, gt, le, lt: numeric bounds of an ``int`` or ``float`` field (None: unbounded).
        choices: the allowed values of a ``str`` field (empty: any string).
        optional: None is allowed too (``doc`` says what it means).

    >>> FieldSpec("Share of ε.", "Part of ε.", float, gt=0, lt=1).rule()
    'in (0, 1)'
    """

    doc: str
    privacy: str
    kind: type | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False

    def __post_init__(self) -> None:
        invariant(bool(self.doc.strip()) and bool(self.privacy.strip()), "FieldSpec needs texts")
        numeric = self.kind in (int, float)
        bounds = (self.ge, self.gt, self.le, self.lt)
        invariant(numeric or bounds == (None,) * 4, f"bounds on a {self.kind} field")
        invariant(self.ge is None or self.gt is None, "give ge or gt, not both")
        invariant(self.le is None or self.lt is None, "give le or lt, not both")
        invariant(self.kind is str or not self.choices, "choices need kind=str")

    @property
    def description(self) -> str:
        """``doc`` and the privacy meaning in one text (the release form's description)."""
        return f"{self.doc} Privacy: {self.privacy}"

    def allowed(self) -> str:
        """The allowed values in the docs tables' compact notation (``(0, 1)``, ``1..10``)."""
        if self.kind in (int, float):
            text = interval_text(self.kind is int, self.ge, self.gt, self.le, self.lt)
        elif self.kind is bool:
            text = "true/false"
        elif self.choices:
            text = ", ".join(f"`{c}`" for c in self.choices)
        elif self.kind is None or self.kind is str:
            text = "see meaning" if self.kind is None else "text"
        else:
            text = f"`{self.kind.__name__}`"
        return f"{text} or none" if self.optional else text

    def rule(self) -> str:
        """The rule as error messages state it (``an integer in 1..10``, ``in (0, 1)``)."""
        if self.kind in (int, float):
            lower, upper = (self.ge, self.gt) != (None, None), (self.le, self.lt) != (None, None)
            interval = interval_text(self.kind is int, self.ge, self.gt, self.le, self.lt)
            interval = interval.replace("≥", ">=").replace("≤", "<=")
            if self.kind is float and lower and upper:
                text = f"in {interval}"
            elif self.kind is float:
                text = "a finite number" + ("" if interval == "finite" else f" {interval}")
            elif lower and upper:
                text = f"an integer in {interval}"
            else:
                text = "an integer" + ("" if interval == "any integer" else f" {interval}")
        elif self.kind is bool:
            text = "a bool"
        elif self.choices:
            text = f"one of {self.choices}"
        else:
            name = "valid" if self.kind is None else self.kind.__name__
            text = f"a{'n' if name[0].lower() in 'aeiou' else ''} {name}"
        if not self.optional:
            return text
        return f"{text} or None" if text.startswith("in ") else f"None or {text}"

    def allows(self, value: object) -> bool:
        """Whether ``value`` has the field's kind and lies within its bounds."""
        kind = self.kind
        if kind is None:
            return True
        if value is None:
            return self.optional
        if kind is bool:
            return isinstance(value, bool)
        if kind is str:
            return isinstance(value, str) and (not self.choices or value in self.choices)
        if kind in (int, float):
            types = int if kind is int else int | float
            if isinstance(value, bool) or not isinstance(value, types):
                return False
            x = float(value)
            return (
                math.isfinite(x)
                and (self.ge is None or x >= self.ge)
                and (self.gt is None or x > self.gt)
                and (self.le is None or x <= self.le)
                and (self.lt is None or x < self.lt)
            )
        return isinstance(value, kind)

    def check(self, owner: str, name: str, value: object) -> None:
        """Raise SdsInputError naming ``owner.name``, the rule and ``value`` unless allowed."""
        if not self.allows(value):
            raise SdsInputError(f"{owner}.{name} must be {self.rule()}, got {value!r}")


def param(
    default: Any,
    *,
    doc: str,
    privacy: str,
    kind: type | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: tuple[str, ...] = (),
    optional: bool = False,
) -> Any:
    """A dataclass field with ``default`` and its :class:`FieldSpec` (the one declaration).

    Raises:
        SdsInternalError: the default breaks the spec (a declaration bug).
    """
    spec = FieldSpec(doc, privacy, kind, ge, gt, le, lt, choices, optional)
    invariant(spec.allows(default), f"default {default!r} breaks its own rule {spec.rule()}")
    return dataclasses.field(default=default, metadata={SPEC: spec})


def field_specs(cls: type) -> dict[str, tuple[Any, FieldSpec]]:
    """``{name: (default, spec)}`` of the fields of dataclass ``cls`` declared with :func:`param`.

    >>> from sds_core.synthesis.generator import SynthesisParams
    >>> field_specs(SynthesisParams)["weight_selection_percentile"][0]
    95
    """
    return {
        f.name: (f.default, f.metadata[SPEC]) for f in dataclasses.fields(cls) if SPEC in f.metadata
    }


def check_fields(obj: object) -> None:
    """Check every :func:`param` field of dataclass instance ``obj`` against its spec, in order.

    Raises:
        SdsInputError: the first bad field (``Owner.field must be <rule>, got <value>``).
    """
    owner = type(obj).__name__
    for name, (_, spec) in field_specs(type(obj)).items():
        spec.check(owner, name, getattr(obj, name))


def documented(cls: _C) -> _C:
    """Class decorator: add a Google ``Args:`` section generated from the field specs.

    Each entry is the field's doc, its privacy meaning, its default and its allowed values, so
    ``help()`` shows what the declarations say, written once. The section goes before the
    docstring's first ``>>>`` example (or at its end).
    """
    lines = ["Args:"]
    for name, (default, spec) in field_specs(cls).items():
        allowed = "" if spec.kind is None else f"; allowed {spec.allowed()}"
        text = f"{name}: {spec.description} Default {default!r}{allowed}."
        lines += textwrap.wrap(
            text, 92, initial_indent="    ", subsequent_indent="        ", break_on_hyphens=False
        )
    # a class docstring's body is indented by 4 (PEP 257); the added lines are too
    args = textwrap.indent("\n".join(lines), "    ") + "\n\n"
    doc = (cls.__doc__ or "").rstrip() + "\n"
    at = doc.find("    >>> ")
    at = len(doc) + 1 if at < 0 else at
    cls.__doc__ = doc[:at].rstrip() + "\n\n" + args + doc[at:]
    return cls
