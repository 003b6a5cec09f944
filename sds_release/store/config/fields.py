"""The release keys declared by the core: synthesizer names and the core fields a release sets.

A key of :data:`CORE_KEYS` takes its default, bounds and description from the core dataclass
field's FieldSpec, declared once in ``sds_core``; :func:`core_field` turns it into the pydantic
field of :class:`~sds_release.store.config.release_params.ReleaseParams`.
"""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

from pydantic import Field

from sds_core.data.params import PrepareParams
from sds_core.evaluation.params import EvaluationParams
from sds_core.marginals.params import DpParams
from sds_core.param_fields import field_specs
from sds_core.synthesis.params import SynthesisParams

SynthesizerName = Literal[
    "aggregate-seeded",
    "histogram-1way",
    "histogram-nway",
    "dirichlet-multinomial",
    "cathist",
    "mst",
    "aim",
]
"""Every synthesizer name a release accepts (``ReleaseParams.synthesizer``): ``aggregate-seeded``
(the SDS stages) and the registry's names (``sds_core.synthesizers.available()``, which a test
keeps equal to these). Parameters are checked against them without importing the registry
(pandas, numba), so a bad ``--synthesizer`` is refused in a fraction of a second."""

SYNTHESIZERS: tuple[SynthesizerName, ...] = get_args(SynthesizerName)
"""The names of :data:`SynthesizerName`, in order."""

AGGREGATE_SEEDED: Final[SynthesizerName] = "aggregate-seeded"
"""The SDS method's name: the synthesizer of the SDS stages (count, plan, aggregate-k,
normalize, synthesize), the default; every other name is a registry synthesizer (``fit``)."""

CORE_KEYS: dict[str, type] = {
    "epsilon": DpParams,
    "delta": DpParams,
    "reporting_length": DpParams,
    "percentile_percentage": DpParams,
    "percentile_epsilon_proportion": DpParams,
    "number_of_records_epsilon_proportion": DpParams,
    "use_columns": PrepareParams,
    "sensitive_zeros": PrepareParams,
    "record_limit": PrepareParams,
    "resolution": EvaluationParams,
    "reconcile_one_way": SynthesisParams,
}
"""Release keys that set a core parameter of the same name: the core field's FieldSpec is their
one declaration (default, bounds, description)."""

RELEASE_OVERRIDES: dict[str, dict[str, Any]] = {
    "record_limit": {"ge": 1},  # the form has no "0 = all rows": leave it empty for all rows
    "resolution": {"default": 100},  # releases compare counts in bins of 100 (core: SDS's 10)
    "reporting_length": {  # empty: the SDS plan chooses R from the DP record count
        "default": None,
        "description": "R: the longest combination of attributes the DP aggregates count. "
        "Empty (the default): the SDS plan chooses 2 or 3 from the DP record count "
        "(sds_release.store.config.planned; post-processing of a DP output, no budget). Privacy: a "
        "longer R spreads the same budget over more combinations, so each count is noisier.",
    },
}
"""Where a release deliberately differs from the core declaration (and nowhere else)."""

CORE_CLASSES = (DpParams, SynthesisParams, PrepareParams, EvaluationParams)
"""The core parameter objects a release builds (docs: :func:`core_table`)."""


def core_field(key: str) -> Any:
    """The pydantic Field of release key ``key``: the core field's default, bounds and
    description (:data:`CORE_KEYS`), with the key's :data:`RELEASE_OVERRIDES` applied."""
    default, spec = field_specs(CORE_KEYS[key])[key]
    given = {"default_factory": list} if default == () else {"default": default}
    bounds = {"ge": spec.ge, "gt": spec.gt, "le": spec.le, "lt": spec.lt}
    settings = {**given, **bounds, "description": spec.description}
    return Field(**{**settings, **RELEASE_OVERRIDES.get(key, {})})
