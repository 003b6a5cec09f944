"""Parameters of the DP marginals engine: DpParams, AccuracyMode and FabricationMode.

These mirror pac-synth's ``DpAggregateSeededParametersBuilder`` (spec §3.1) with the same names
and defaults; every field documents its privacy meaning. They are validated on construction
and consumed by :mod:`sds_core.marginals.engine` and :mod:`sds_core.dp.accounting`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sds_core.dp.declared import DeclaredDomain
from sds_core.errors import SdsInputError, require

_ACCURACY_KINDS = ("prioritize_long", "prioritize_short", "balanced", "custom")
_FABRICATION_PRESETS = ("uncontrolled", "progressive", "balanced", "minimize", "custom")
ACCOUNTING_KINDS = ("tight", "reference")


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True, slots=True)
class AccuracyMode:
    """Relative Gaussian noise scales p_k per combination length (``sigma_proportions``).

    The zCDP budget for the Gaussian releases is split so that ``σ_k = p_k·σ``: a smaller
    proportion means less noise (more budget) for that length. Use the classmethods.

    >>> AccuracyMode.prioritize_long_combinations().proportions(3)
    (1.0, 0.5, 0.3333333333333333)
    >>> AccuracyMode.prioritize_short_combinations().proportions(3)
    (0.3333333333333333, 0.5, 1.0)
    """

    kind: str = "prioritize_long"
    custom_proportions: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        require(
            self.kind in _ACCURACY_KINDS,
            f"accuracy_mode kind must be one of {_ACCURACY_KINDS}, got {self.kind!r}",
        )
        if self.kind == "custom":
            props = tuple(self.custom_proportions)
            require(len(props) > 0, "sigma_proportions of a custom accuracy mode must not be empty")
            for i, p in enumerate(props):
                require(
                    _finite(p) and p > 0,
                    f"sigma_proportions must be finite and > 0; length {i + 1} has {p!r}",
                )
            object.__setattr__(self, "custom_proportions", tuple(float(p) for p in props))

    @classmethod
    def prioritize_long_combinations(cls) -> AccuracyMode:
        """p_k = 1/k: longer combinations get less noise (pac-synth default)."""
        return cls("prioritize_long")

    @classmethod
    def prioritize_short_combinations(cls) -> AccuracyMode:
        """p_k = 1/(R − k + 1): shorter combinations get less noise."""
        return cls("prioritize_short")

    @classmethod
    def balanced(cls) -> AccuracyMode:
        """p_k = 1 for every length."""
        return cls("balanced")

    @classmethod
    def custom(cls, sigma_proportions: Sequence[float]) -> AccuracyMode:
        """Explicit proportions p_1..p_R (length must equal the reporting length)."""
        return cls("custom", tuple(sigma_proportions))

    def proportions(self, reporting_length: int) -> tuple[float, ...]:
        """The proportions p_1..p_R for reporting length R.

        Raises:
            SdsInputError: custom proportions whose length differs from R.
        """
        r = reporting_length
        if self.kind == "prioritize_long":
            return tuple(1.0 / k for k in range(1, r + 1))
        if self.kind == "prioritize_short":
            return tuple(1.0 / (r - k + 1) for k in range(1, r + 1))
        if self.kind == "balanced":
            return (1.0,) * r
        require(
            len(self.custom_proportions) == r,
            f"sigma_proportions must have one value per length 1..reporting_length ({r}), "
            f"got {len(self.custom_proportions)} values",
        )
        return self.custom_proportions


@dataclass(frozen=True, slots=True)
class FabricationMode:
    """Thresholds for lengths k ≥ 2, controlling fabricated (zero-count) combinations (§1.7).

    ``kind="adaptive"``: value η_k ∈ (0, 1]; a non-existent candidate survives with probability
    about η_k/2 (threshold ``σ_k√Δ_k·Φ⁻¹(1 − η_k/2)``); missing lengths default to η = 1.
    ``kind="fixed"``: value t_k ≥ 0 is the threshold itself; missing lengths default to 0.
    Thresholds are post-processing of noisy counts: they change utility, never the privacy
    guarantee. Length 1's threshold is fixed by the privacy proof and is not settable.

    >>> FabricationMode.progressive().thresholds(4)
    {2: 0.1, 3: 0.55, 4: 1.0}
    >>> FabricationMode.custom_fixed({2: 5.0}).thresholds(3)
    {2: 5.0, 3: 0.0}
    """

    kind: str = "adaptive"
    values: tuple[tuple[int, float], ...] = ()
    preset: str = "uncontrolled"

    def __post_init__(self) -> None:
        require(
            self.kind in ("adaptive", "fixed"),
            f"fabrication_mode kind must be 'adaptive' or 'fixed', got {self.kind!r}",
        )
        require(
            self.preset in _FABRICATION_PRESETS,
            f"fabrication_mode preset must be one of {_FABRICATION_PRESETS}, got {self.preset!r}",
        )
        seen: set[int] = set()
        for item in self.values:
            require(
                isinstance(item, tuple) and len(item) == 2,
                f"fabrication_mode values must be (length, value) pairs, got {item!r}",
            )
            k, v = item
            require(
                isinstance(k, int) and not isinstance(k, bool) and k >= 2,
                f"fabrication_mode keys are combination lengths >= 2, got {k!r}",
            )
            require(k not in seen, f"fabrication_mode length {k} is given twice")
            seen.add(k)
            if self.kind == "fixed":
                require(
                    _finite(v) and v >= 0,
                    f"fixed fabrication thresholds must be finite and >= 0; length {k} has {v!r}",
                )
            else:
                require(
                    _finite(v) and 0 < v <= 1,
                    f"adaptive fabrication eta must be in (0, 1]; length {k} has {v!r}",
                )
        object.__setattr__(
            self, "values", tuple(sorted((int(k), float(v)) for k, v in self.values))
        )

    @classmethod
    def uncontrolled(cls) -> FabricationMode:
        """η_k = 1 for all k ≥ 2 (threshold 0, ~50% of non-existent candidates kept; default)."""
        return cls("adaptive", (), "uncontrolled")

    @classmethod
    def progressive(cls) -> FabricationMode:
        """η_k = min(1, 0.1 + 0.9·(k−2)/(R−2)); R = 2 ⇒ {2: 0.1}."""
        return cls("adaptive", (), "progressive")

    @classmethod
    def balanced(cls) -> FabricationMode:
        """η_2 = 0.55, η_k = 1 for k ≥ 3."""
        return cls("adaptive", (), "balanced")

    @classmethod
    def minimize(cls) -> FabricationMode:
        """η_k = 0.01 for all k ≥ 2."""
        return cls("adaptive", (), "minimize")

    @classmethod
    def custom_fixed(cls, thresholds: Mapping[int, float]) -> FabricationMode:
        """Fixed thresholds t_k ≥ 0 per length k ≥ 2 (missing lengths: 0)."""
        return cls("fixed", tuple(thresholds.items()), "custom")

    @classmethod
    def custom_adaptive(cls, etas: Mapping[int, float]) -> FabricationMode:
        """Adaptive η_k ∈ (0, 1] per length k ≥ 2 (missing lengths: 1)."""
        return cls("adaptive", tuple(etas.items()), "custom")

    def thresholds(self, reporting_length: int) -> dict[int, float]:
        """``{k: value}`` for every k in 2..R (η_k if adaptive, t_k if fixed), defaults filled."""
        r = reporting_length
        if self.preset == "uncontrolled":
            given: dict[int, float] = {}
        elif self.preset == "progressive":
            given = (
                {2: 0.1}
                if r == 2
                else {k: min(1.0, 0.1 + 0.9 * (k - 2) / (r - 2)) for k in range(2, r + 1)}
            )
        elif self.preset == "balanced":
            given = {2: 0.55} if r >= 2 else {}
        elif self.preset == "minimize":
            given = {k: 0.01 for k in range(2, r + 1)}
        else:
            given = dict(self.values)
        default = 0.0 if self.kind == "fixed" else 1.0
        return {k: float(given.get(k, default)) for k in range(2, r + 1)}


@dataclass(frozen=True, slots=True)
class DpParams:
    """Parameters of one DP aggregation (pac-synth builder names and defaults, spec §3.1).

    Args:
        epsilon: total privacy budget ε of the release (record count + marginals); > 0.
        delta: δ of the (ε, δ) guarantee, in (0, 1). None ⇒ ``1/(ln m · m)`` with m the
            *protected* (noisy) record count, so δ never depends on the true count.
        reporting_length: R, the longest combination length released; >= 1.
        percentile_percentage: Q in 0..100; the allowed per-record contribution Δ_k is a DP
            estimate of the Q-th percentile of the records' numbers of k-tuples. Records above
            it are randomly truncated (bias), lower Q means less noise.
        percentile_epsilon_proportion: share Q_p ∈ (0, 1) of the zCDP budget ρ spent on the R
            percentile selections (each gets ε_Q = sqrt(2ρQ_p/R)).
        number_of_records_epsilon_proportion: share N_p ∈ (0, 1) of ε spent on the Laplace
            record count (ε_N = N_p·ε); the rest ε_M goes to the marginals.
        accuracy_mode: relative noise scales σ_k = p_k·σ per length.
        fabrication_mode: thresholds for lengths >= 2 (post-processing; controls fabricated
            combinations, not privacy).
        accounting: ``"tight"`` (this project's accounting for the discrete noise) or
            ``"reference"`` (pac-synth's formulas exactly, for comparison).
        sensitivity_cap: optional upper bound on the DP-percentile candidate range; the range
            is ``0..min(C(n_columns, k), cap)``, data-independent either way (§9.1). >= 1.
        declared_domains: the global domain of every column, declared before seeing the data
            (all columns or none). Then length 1 noises the declared values instead of the
            values seen in the data, releases only declared labels (undeclared data values are
            dropped), and its threshold is post-processing (no δ/2 set-union term is needed).
        declared_tolerance: with declared domains, the length-1 threshold is the smallest t
            with P(no declared value absent from the data is released) >= this (CatHist's ρ,
            Gaussian tail, over all declared values). In (0, 1); utility only, not privacy.

    >>> DpParams(epsilon=1.0).reporting_length
    3
    """

    epsilon: float = 4.0
    delta: float | None = None
    reporting_length: int = 3
    percentile_percentage: int = 99
    percentile_epsilon_proportion: float = 0.01
    number_of_records_epsilon_proportion: float = 0.005
    accuracy_mode: AccuracyMode = AccuracyMode()
    fabrication_mode: FabricationMode = FabricationMode()
    accounting: str = "tight"
    sensitivity_cap: int | None = None
    declared_domains: tuple[DeclaredDomain, ...] = ()
    declared_tolerance: float = 0.5

    def __post_init__(self) -> None:
        require(
            _finite(self.epsilon) and self.epsilon > 0,
            f"epsilon must be a finite number > 0, got {self.epsilon!r}",
        )
        if self.delta is not None:
            require(
                _finite(self.delta) and 0 < self.delta < 1,
                f"delta must be in (0, 1) (or None for the default 1/(ln m·m)), got {self.delta!r}",
            )
        r = self.reporting_length
        require(
            isinstance(r, int) and not isinstance(r, bool) and r >= 1,
            f"reporting_length must be an integer >= 1, got {r!r}",
        )
        q = self.percentile_percentage
        require(
            isinstance(q, int) and not isinstance(q, bool) and 0 <= q <= 100,
            f"percentile_percentage must be an integer in 0..100, got {q!r}",
        )
        for name in ("percentile_epsilon_proportion", "number_of_records_epsilon_proportion"):
            v = getattr(self, name)
            require(
                _finite(v) and 0 < v < 1,
                f"{name} must be in (0, 1) (exclusive), got {v!r}",
            )
        if not isinstance(self.accuracy_mode, AccuracyMode):
            raise SdsInputError(
                f"accuracy_mode must be an AccuracyMode, got {type(self.accuracy_mode).__name__}"
            )
        self.accuracy_mode.proportions(r)  # validates custom length
        if not isinstance(self.fabrication_mode, FabricationMode):
            raise SdsInputError(
                "fabrication_mode must be a FabricationMode, "
                f"got {type(self.fabrication_mode).__name__}"
            )
        bad = [k for k, _ in self.fabrication_mode.values if not 2 <= k <= r]
        require(
            not bad,
            f"fabrication_mode lengths must be in 2..reporting_length ({r}), got {bad}",
        )
        require(
            self.accounting in ACCOUNTING_KINDS,
            f"accounting must be one of {ACCOUNTING_KINDS}, got {self.accounting!r}",
        )
        cap = self.sensitivity_cap
        if cap is not None:
            require(
                isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1,
                f"sensitivity_cap must be an integer >= 1 (or None), got {cap!r}",
            )
        self._check_declared()

    def _check_declared(self) -> None:
        declared = self.declared_domains
        require(
            isinstance(declared, tuple | list)
            and all(isinstance(d, DeclaredDomain) for d in declared),
            "declared_domains must be a tuple of DeclaredDomain (one per column), "
            f"got {type(declared).__name__}",
        )
        names = [d.column for d in declared]
        dup = sorted({n for n in names if names.count(n) > 1})
        require(not dup, f"declared_domains declare these columns twice: {dup}")
        object.__setattr__(self, "declared_domains", tuple(declared))
        tol = self.declared_tolerance
        require(
            _finite(tol) and 0 < tol < 1,
            f"declared_tolerance must be in (0, 1) (exclusive), got {tol!r}",
        )

    @property
    def sigma_proportions(self) -> tuple[float, ...]:
        """p_1..p_R of the accuracy mode."""
        return self.accuracy_mode.proportions(self.reporting_length)

    def fabrication_thresholds(self) -> dict[int, float]:
        """η_k (adaptive) or t_k (fixed) for k = 2..R."""
        return self.fabrication_mode.thresholds(self.reporting_length)
