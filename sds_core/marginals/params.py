"""Parameters of the DP marginals engine: DpParams, AccuracyMode, FabricationMode, and δ's default.

These mirror pac-synth's ``DpAggregateSeededParametersBuilder`` (spec §3.1) with the same names
and defaults. Each DpParams field is declared once (``param``: default, bounds, meaning, privacy
effect), validated on construction, and consumed by :mod:`sds_core.marginals.engine` and
:mod:`sds_core.dp.accounting`; :func:`release_delta` is the one default δ of a release.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sds_core.data.domain import DeclaredDomain
from sds_core.dp.accounting import default_delta
from sds_core.errors import require
from sds_core.param_fields import check_fields, documented, param

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


DEFAULT_DELTA = 1e-6
"""δ of a release whose schema declares no upper bound on the number of records."""

MAX_DEFAULT_DELTA = 100 * DEFAULT_DELTA
"""The largest default δ: 1e-4 up to rounding (9.999999999999999e-05, the value releases use)."""


def release_delta(max_records: int | None) -> float:
    """The one default δ of a release, fixed before the data is read.

    The ledger reserves a release's (ε, δ) before reading any data, so the default δ cannot
    depend on the data. It is the reference's ``1/(n·ln n)`` (spec §1.3) for the declared upper
    bound N >= n (the schema's ``max_rows``), which is never larger than ``1/(n·ln n)``, capped
    at :data:`MAX_DEFAULT_DELTA`; without a bound (or N < 3) it is :data:`DEFAULT_DELTA`.

    >>> release_delta(None), release_delta(1000)
    (1e-06, 9.999999999999999e-05)
    >>> release_delta(100_000) == 1 / (100_000 * math.log(100_000))
    True
    """
    if max_records is not None and max_records >= 3:
        return min(MAX_DEFAULT_DELTA, default_delta(max_records))
    return DEFAULT_DELTA


@documented
@dataclass(frozen=True, slots=True)
class DpParams:
    """Parameters of one DP aggregation (pac-synth builder names and defaults, spec §3.1).

    Every field is declared once below with its default, bounds, meaning and privacy effect;
    the release form (``sds_release.store.config.release_params.ReleaseParams``) and
    docs/pipeline.md are built from these declarations. Cross-field rules (custom proportions and
    fabrication lengths vs R, declared domains) are checked in ``__post_init__``.

    >>> DpParams(epsilon=1.0).reporting_length
    3
    """

    epsilon: float = param(
        4.0,
        kind=float,
        gt=0,
        le=100,
        doc="Privacy loss ε of the release: the noisy record count plus the marginals "
        "(pac-synth default 4).",
        privacy="The release is (ε, δ)-DP: smaller ε is more private and adds more noise.",
    )
    delta: float | None = param(
        None,
        kind=float,
        gt=0,
        lt=1,
        optional=True,
        doc="δ of the (ε, δ) guarantee. Empty: a release fixes it before reading the data, "
        "1/(N·ln N) for the schema's max_rows N (at most 1e-4), or 1e-6 without max_rows. "
        "(Called directly, without a ledger, the engine instead derives 1/(m·ln m) from the DP "
        "record count m, as pac-synth does.)",
        privacy="The probability allowed for the ε bound to fail; keep it far below "
        "1/(number of records).",
    )
    reporting_length: int = param(
        3,
        kind=int,
        ge=1,
        le=10,
        doc="R: the longest combination of attributes released.",
        privacy="Longer R releases more combinations from the same budget, so each count "
        "gets more noise.",
    )
    percentile_percentage: int = param(
        99,
        kind=int,
        ge=0,
        le=100,
        doc="Q: each record's contribution at length k is bounded by a DP estimate of the "
        "Q-th percentile of the records' numbers of k-combinations; records above it are "
        "randomly truncated.",
        privacy="Higher Q means less truncation bias but more noise; the guarantee is unchanged.",
    )
    percentile_epsilon_proportion: float = param(
        0.01,
        kind=float,
        gt=0,
        lt=1,
        doc="Q_p: share of the marginals' zCDP budget ρ spent choosing those bounds "
        "(each length gets ε_Q = sqrt(2ρ·Q_p/R)).",
        privacy="Part of ε: a larger share leaves less for the counts (more noise).",
    )
    number_of_records_epsilon_proportion: float = param(
        0.005,
        kind=float,
        gt=0,
        lt=1,
        doc="N_p: share of ε spent on the noisy record count (ε_N = N_p·ε); the rest, ε_M, "
        "goes to the marginals.",
        privacy="Part of ε: the count is released with Laplace noise, the true count never.",
    )
    # param() returns a dataclasses.field; its defaults are frozen values
    accuracy_mode: AccuracyMode = param(  # noqa: RUF009
        AccuracyMode(),
        kind=AccuracyMode,
        doc="Relative noise scales σ_k = p_k·σ per length (default prioritize_long: p_k = 1/k).",
        privacy="Moves noise between lengths; the total guarantee is unchanged.",
    )
    fabrication_mode: FabricationMode = param(  # noqa: RUF009
        FabricationMode(),
        kind=FabricationMode,
        doc="Thresholds for lengths >= 2 that control fabricated (zero-count) combinations "
        "(default uncontrolled: η = 1, threshold 0).",
        privacy="None: thresholds are post-processing of noisy counts (utility only).",
    )
    accounting: str = param(
        "tight",
        kind=str,
        choices=ACCOUNTING_KINDS,
        doc="'tight' (this project's accounting of the discrete noise) or 'reference' "
        "(pac-synth's formulas exactly, for comparison).",
        privacy="Both are (ε, δ)-DP; 'tight' needs less noise for the same (ε, δ).",
    )
    sensitivity_cap: int | None = param(
        None,
        kind=int,
        ge=1,
        optional=True,
        doc="Upper bound on the DP-percentile candidates: 0..min(C(columns, k), cap); "
        "None = no cap.",
        privacy="The candidate range is data-independent either way (spec §9.1); a small cap "
        "truncates more contributions.",
    )
    declared_domains: tuple[DeclaredDomain, ...] = param(
        (),
        doc="Every column's domain, declared before seeing the data (all columns or none). "
        "Length 1 then noises the declared values and releases only declared labels "
        "(undeclared data values are dropped).",
        privacy="Removes the data-dependent domain: the length-1 threshold becomes "
        "post-processing and needs no δ/2 set-union term.",
    )
    declared_tolerance: float = param(
        0.5,
        kind=float,
        gt=0,
        lt=1,
        doc="With declared domains, the length-1 threshold is the smallest t with "
        "P(no declared value absent from the data is released) >= this (CatHist's ρ).",
        privacy="None: utility only (post-processing).",
    )

    def __post_init__(self) -> None:
        check_fields(self)
        r = self.reporting_length
        self.accuracy_mode.proportions(r)  # validates custom length
        bad = [k for k, _ in self.fabrication_mode.values if not 2 <= k <= r]
        require(
            not bad,
            f"fabrication_mode lengths must be in 2..reporting_length ({r}), got {bad}",
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

    @property
    def sigma_proportions(self) -> tuple[float, ...]:
        """p_1..p_R of the accuracy mode."""
        return self.accuracy_mode.proportions(self.reporting_length)

    def fabrication_thresholds(self) -> dict[int, float]:
        """η_k (adaptive) or t_k (fixed) for k = 2..R."""
        return self.fabrication_mode.thresholds(self.reporting_length)
