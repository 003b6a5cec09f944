"""``aggregate-seeded``: the SDS method behind the :class:`Synthesizer` interface.

``fit`` runs :func:`sds_core.marginals.engine.dp_aggregate` (DP k-tuple aggregates, all stages at
once) and ``sample`` runs :func:`sds_core.synthesis.generator.synthesize` on them (post-processing).
The release pipeline runs the same stages one at a time instead (to checkpoint and resume them);
this adapter makes SDS selectable by name like every other synthesizer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any, ClassVar

import numpy as np

from sds_core.data.domain import DeclaredDomain, Domain
from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.engine import dp_aggregate, plan_release
from sds_core.marginals.params import DpParams
from sds_core.synthesizers.base import FitResult, SynthesizerSpend, check_epsilon, check_n, register


@dataclass(frozen=True, slots=True, eq=False)
class AggregateSeededModel:
    """The DP model: the DP aggregates and their noise (every field publishable).

    ``noise_sd_by_len``: the noise standard deviation of one count of each length (σ_k·√Δ_k),
    which synthesis uses to leave gaps within the noise alone (None: unknown).
    """

    aggregates: AggregateSet
    noise_sd_by_len: tuple[float, ...] | None = None

    @property
    def domain(self) -> Domain:
        """The released domain (the data's, or the declared labels released at length 1)."""
        return self.aggregates.domain

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: protected record count, reporting length and the aggregates' text form."""
        return {
            "protected_number_of_records": self.aggregates.protected_number_of_records,
            "reporting_length": self.aggregates.reporting_length,
            "aggregates": self.aggregates.to_text_dict(),
        }


PER_CALL = ("epsilon", "delta")
"""DpParams fields given to ``budget``/``fit`` (the Synthesizer protocol), not the constructor."""

OPTION_NAMES = {"declared_domains": "declared"}
"""Constructor options named differently from their DpParams field (``declared`` is the option
name every synthesizer uses for declared domains)."""

_DP_FIELDS = {f.name: f for f in fields(DpParams) if f.name not in PER_CALL}
OPTIONS = tuple((name, OPTION_NAMES.get(name, name)) for name in _DP_FIELDS)
"""(DpParams field, constructor option) of every option, in DpParams' order."""

_DpOptions: Any = make_dataclass(  # generated: mypy cannot see its fields
    "_DpOptions",
    [
        (OPTION_NAMES.get(f.name, f.name), f.type, field(default=f.default, metadata=f.metadata))
        for f in _DP_FIELDS.values()
    ],
    slots=True,
)
"""The options of :class:`AggregateSeeded`: DpParams' fields (same defaults and FieldSpecs)."""
_DpOptions.__module__ = __name__


@register
@dataclass(slots=True)
class AggregateSeeded(_DpOptions):  # type: ignore[misc]  # a base generated from DpParams
    """SDS: DP k-tuple marginals (pac-synth parameters and defaults) + aggregate-seeded synthesis.

    Args: the :class:`sds_core.marginals.params.DpParams` fields other than ε and δ, generated
    from DpParams (same names, defaults, rules and docs; ``declared`` is
    ``DpParams.declared_domains``). :meth:`from_dp_params` takes a DpParams, :meth:`dp_params`
    gives one back. δ must be given to :meth:`budget` and :meth:`fit`: a synthesizer never
    defaults δ, because the engine's default 1/(ln m·m) needs the DP record count m, unknown
    before the data; a release passes :func:`sds_core.marginals.params.release_delta`'s.
    """

    name: ClassVar[str] = "aggregate-seeded"

    _model: AggregateSeededModel | None = field(default=None, init=False, repr=False)
    _multi_value: tuple[MultiValueColumn, ...] = field(default=(), init=False, repr=False)

    def __post_init__(self) -> None:
        declared: Any = self.declared  # a field of the generated base
        if isinstance(declared, DeclaredDomain) or not isinstance(declared, Sequence):
            raise SdsInputError("declared must be a list of DeclaredDomain, one per column")
        object.__setattr__(self, "declared", tuple(declared))
        self.dp_params(1.0, 0.5)  # validate the options now, not at fit time

    @classmethod
    def from_dp_params(cls, params: DpParams) -> AggregateSeeded:
        """The synthesizer with ``params``' options (its ε and δ are given per call instead)."""
        return cls(**{option: getattr(params, name) for name, option in OPTIONS})

    def dp_params(self, epsilon: float, delta: float | None) -> DpParams:
        """The engine parameters for (ε, δ); δ is required (see the class docstring)."""
        if delta is None:
            raise SdsInputError(
                "aggregate-seeded needs an explicit delta: its budget must be known before the "
                "data is read, and the default 1/(ln m·m) depends on the DP record count; pass "
                "release_delta(max_rows) (a release's default) or your own"
            )
        options = {name: getattr(self, option) for name, option in OPTIONS}
        return DpParams(epsilon=check_epsilon(epsilon), delta=delta, **options)

    def _spends(self, stage_spends: Sequence[Any]) -> tuple[SynthesizerSpend, ...]:
        return tuple(
            SynthesizerSpend(f"{self.name}/{s.stage}", s.mechanism, s.epsilon, s.delta, s.rho)
            for s in stage_spends
        )

    def budget(self, epsilon: float, delta: float | None) -> tuple[SynthesizerSpend, ...]:
        """The engine plan's stage spends (count, aggregate-1..R), without the data."""
        params = self.dp_params(epsilon, delta)
        return self._spends(plan_release(params, 1).stage_spends())  # δ explicit: m unused

    def fit(
        self,
        table: PreparedTable,
        *,
        epsilon: float,
        delta: float | None,
        rnd: ReleaseRandomness,
        release_label: str,
    ) -> FitResult:
        """All DP aggregation stages on ``table`` (noise labels ``{release_label}/...``)."""
        result = dp_aggregate(
            table, self.dp_params(epsilon, delta), rnd, release_label=release_label
        )
        rep = result.report
        noise = tuple(
            float(s) * math.sqrt(max(int(a), 0))
            for s, a in zip(rep.sigma_by_len, rep.allowed_sensitivity_by_len, strict=True)
        )
        self._model = AggregateSeededModel(result.aggregates, noise)
        self._multi_value = table.multi_value_columns
        notes: Mapping[str, object] = dict(result.private_notes)
        return FitResult(
            self._spends(result.report.spends), self._model, result.report.to_dict(), notes
        )

    def sample(self, n: int | None, *, rng: np.random.Generator) -> PreparedTable:
        """Aggregate-seeded synthesis with ``SynthesisParams()`` (n: its target, None: none)."""
        from sds_core.synthesis.generator import synthesize
        from sds_core.synthesis.params import SynthesisParams

        if self._model is None:
            raise SdsInputError("call fit() before sample()")
        if n is not None and check_n(n, 0) == 0:
            empty = np.zeros((0, self._model.domain.n_columns), dtype=np.int32)
            return PreparedTable(self._model.domain, empty, self._multi_value)
        params = SynthesisParams() if n is None else SynthesisParams(target_number_of_records=n)
        return synthesize(
            self._model.aggregates,
            params,
            rng=rng,
            multi_value_columns=self._multi_value,
            noise_sd_by_len=self._model.noise_sd_by_len,
        )
