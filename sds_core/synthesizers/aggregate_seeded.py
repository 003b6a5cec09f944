"""``aggregate-seeded``: the SDS method behind the :class:`Synthesizer` interface.

``fit`` runs :func:`sds_core.marginals.engine.dp_aggregate` (DP k-tuple aggregates, all stages at
once) and ``sample`` runs :func:`sds_core.synthesis.generator.synthesize` on them (post-processing).
The release pipeline runs the same stages one at a time instead (to checkpoint and resume them);
this adapter makes SDS selectable by name like every other synthesizer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from sds_core.data.domain import Domain
from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.dp.declared import DeclaredDomain
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.engine import dp_aggregate, plan_release
from sds_core.marginals.params import AccuracyMode, DpParams, FabricationMode
from sds_core.synthesizers.base import FitResult, SynthesizerSpend, check_epsilon, check_n, register


@dataclass(frozen=True, slots=True, eq=False)
class AggregateSeededModel:
    """The DP model: the DP aggregates (every field publishable)."""

    aggregates: AggregateSet

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


@register
@dataclass(slots=True)
class AggregateSeeded:
    """SDS: DP k-tuple marginals (pac-synth parameters and defaults) + aggregate-seeded synthesis.

    Args: the :class:`sds_core.marginals.params.DpParams` fields other than ε and δ (same meaning
    and defaults); ``declared`` sets ``DpParams.declared_domains`` (all columns or none). δ must be
    given to :meth:`budget` and :meth:`fit`: the engine's default 1/(ln m·m) needs the protected
    count m, which is not known before the data.
    """

    name: ClassVar[str] = "aggregate-seeded"

    reporting_length: int = 3
    percentile_percentage: int = 99
    percentile_epsilon_proportion: float = 0.01
    number_of_records_epsilon_proportion: float = 0.005
    accuracy_mode: AccuracyMode = field(default_factory=AccuracyMode)
    fabrication_mode: FabricationMode = field(default_factory=FabricationMode)
    accounting: str = "tight"
    sensitivity_cap: int | None = None
    declared: tuple[DeclaredDomain, ...] = ()
    declared_tolerance: float = 0.5
    _model: AggregateSeededModel | None = field(default=None, init=False, repr=False)
    _multi_value: tuple[MultiValueColumn, ...] = field(default=(), init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.declared, DeclaredDomain) or not isinstance(self.declared, Sequence):
            raise SdsInputError("declared must be a list of DeclaredDomain, one per column")
        self.declared = tuple(self.declared)
        self.dp_params(1.0, 0.5)  # validate the options now, not at fit time

    def dp_params(self, epsilon: float, delta: float | None) -> DpParams:
        """The engine parameters for (ε, δ); δ is required (see the class docstring)."""
        if delta is None:
            raise SdsInputError(
                "aggregate-seeded needs an explicit delta: its budget must be known before the "
                "data is read, and the default 1/(ln m·m) depends on the DP record count"
            )
        return DpParams(
            epsilon=check_epsilon(epsilon),
            delta=delta,
            reporting_length=self.reporting_length,
            percentile_percentage=self.percentile_percentage,
            percentile_epsilon_proportion=self.percentile_epsilon_proportion,
            number_of_records_epsilon_proportion=self.number_of_records_epsilon_proportion,
            accuracy_mode=self.accuracy_mode,
            fabrication_mode=self.fabrication_mode,
            accounting=self.accounting,
            sensitivity_cap=self.sensitivity_cap,
            declared_domains=self.declared,
            declared_tolerance=self.declared_tolerance,
        )

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
        self._model = AggregateSeededModel(result.aggregates)
        self._multi_value = table.multi_value_columns
        notes: Mapping[str, object] = dict(result.private_notes)
        return FitResult(
            self._spends(result.report.spends), self._model, result.report.to_dict(), notes
        )

    def sample(self, n: int | None, *, rng: np.random.Generator) -> PreparedTable:
        """Aggregate-seeded synthesis with ``SynthesisParams()`` (n: its target, None: none)."""
        from sds_core.synthesis.generator import SynthesisParams, synthesize

        if self._model is None:
            raise SdsInputError("call fit() before sample()")
        if n is not None and check_n(n, 0) == 0:
            empty = np.zeros((0, self._model.domain.n_columns), dtype=np.int32)
            return PreparedTable(self._model.domain, empty, self._multi_value)
        params = SynthesisParams() if n is None else SynthesisParams(target_number_of_records=n)
        return synthesize(
            self._model.aggregates, params, rng=rng, multi_value_columns=self._multi_value
        )
