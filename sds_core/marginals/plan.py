"""The SDS plan: reporting length, budget split and synthesis chosen from the DP record count.

Runs between the record count (stage ``count``) and the aggregation (``aggregate-k``). It reads
only the DP record count N̂, the release's (ε, δ, record-count share) and the number of columns,
so the choice is post-processing of a DP output and public parameters and costs no budget; a
value the user set explicitly is kept. The rule is in docs/synthesis.md, its accuracy in
docs/benchmarks.md (on twelve public data sets and on 13 PUMS sets); the sweeps behind its
constants (issue 22) are in the benchmarks' history (``git show 78ca7e7:docs/benchmarks.md``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sds_core.dp.accounting import epsilon_to_zcdp
from sds_core.errors import require
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.params import AccuracyMode, DpParams

__all__ = [
    "PLAN_LENGTHS",
    "PLAN_SYNTHESES",
    "SdsPlan",
    "longest_length",
    "noise_excess",
    "pair_noise",
    "plan_sds",
]

PLAN_SYNTHESES = ("records", "model")
"""What the plan may choose to build the synthetic records from the aggregates."""

PLAN_LENGTHS = (2, 3)
"""The reporting lengths the plan may choose (at most the number of columns)."""


def longest_length(n_columns: int, reporting_length: int | None = None) -> int:
    """The longest reporting length a release may run with: the user's R, else the longest the
    plan may choose for ``n_columns`` columns. The worst case that the size checks run before
    the first charge are computed for, whatever the DP record count then makes the plan pick.

    >>> longest_length(11), longest_length(2), longest_length(11, 5)
    (3, 2, 5)
    """
    if reporting_length is not None:
        return reporting_length
    return min(max(PLAN_LENGTHS), n_columns)


SIGNAL_FOR_LENGTH_3 = 16_000.0
"""From this signal on (N̂ / pair noise) the plan releases combinations of three attributes with
today's default split and synthesizes records from them (measured: 100k PUMS at ε = 4 has signal
10,330 and is better at length 2; at ε = 10, 23,088, length-3 records are best on binned data)."""

MAX_LENGTH_1_SHARE = 0.7
"""The largest share of the marginals' zCDP budget the plan gives to single values."""

_SHARE_AT = (1040.0, 0.69)
_SHARE_SLOPE = 0.72
"""Below :data:`SIGNAL_FOR_LENGTH_3` the length-1 share is 0.69·(1040/signal)^0.72, at most
:data:`MAX_LENGTH_1_SHARE`: the least signal, the most budget to single values (they decide which
values are released at all); fitted to the best measured shares (10k and 100k PUMS, ε 1/4/10)."""

MAX_RECORDS_EXCESS = 0.25
"""Above length 2 the plan builds records only when the published longest combinations hold at
most 25% more than the records can (:func:`noise_excess`); beyond, the excess is noise that
records would reproduce, and the model is drawn instead (measured at ε = 10 on 100k PUMS: 0.96
on raw columns, where the model is better, 0.08 binned, where records are; 1M binned ε 4: 0.06)."""

MODEL_CELLS_PER_RECORD = 10
"""The plan's model holds at most this many cells per DP record (at least
:data:`MIN_MODEL_CELLS`, at most :data:`MAX_MODEL_CELLS`): more cells than records fit noise."""
MIN_MODEL_CELLS = 100_000
MAX_MODEL_CELLS = 1_500_000
MODEL_ITERATIONS = 300
SIGNAL_FOR_LONG_FIT = 2_000.0
LONG_FIT_ITERATIONS = 1_000
LONG_FIT_WORK = 600_000_000
LONG_FIT_MAX_CELLS = 1_200_000
"""From this signal on, a model of at most :data:`LONG_FIT_MAX_CELLS` cells fits for up to
:data:`LONG_FIT_ITERATIONS` iterations while cells × iterations stay within
:data:`LONG_FIT_WORK` (never fewer than :data:`MODEL_ITERATIONS`): the early stop regularises
noisy counts, but precise ones gain from the longer fit. Measured, 3 seeds, TVD2: 10k binned
ε = 10 (signal 2,309) 0.0359 at 1,000 iterations vs 0.0384 at 300, raw 0.1463 vs 0.1468; at
signal 1,033 and below the longer fit loses (10k raw ε = 4 0.1786 vs 0.1733, ε = 1 0.3713 vs
0.3602); 100k rows (1M cells, 600 iterations): ``git show 78ca7e7:docs/benchmarks.md``. Larger
models (more than ~120k records) keep 300 iterations, so a 1M-row release stays within its time
budget."""
MODEL_STRUCTURE = "pair-dependence"


def pair_noise(epsilon: float, delta: float, n_columns: int, records_share: float) -> float:
    """Noise sd of one pair count if the whole marginals' budget went to the pairs.

    √(C(d, 2) / 2ρ) with ρ the zCDP budget of the marginals (the CKS conversion of
    ε·(1 − records_share) at δ/2, as ``tight`` accounting): each record touches C(d, 2) pairs.
    A yardstick of the noise from public parameters only, whatever the plan then chooses.

    >>> round(pair_noise(4.0, 1e-6, 11, 0.005), 2)
    9.68
    """
    rho = epsilon_to_zcdp(epsilon * (1 - records_share), delta / 2)
    return math.sqrt(max(math.comb(n_columns, 2), 1) / (2 * rho))


def length_one_share(signal: float) -> float:
    """The share of the marginals' zCDP budget the plan gives to length 1 at reporting length 2.

    >>> round(length_one_share(1040.0), 2), length_one_share(10.0), round(length_one_share(1e4), 3)
    (0.69, 0.7, 0.135)
    """
    at, share = _SHARE_AT
    return float(min(MAX_LENGTH_1_SHARE, share * (at / signal) ** _SHARE_SLOPE))


def noise_excess(aggregates: AggregateSet) -> float | None:
    """How much more the published length-R counts hold than N̂ records can; DP values only.

    A record with m non-empty values has C(m, R) combinations of length R; with m̄ the
    published 1-counts' total over N̂, the records hold about N̂·C(m̄, R). The published
    length-R counts sum to more when noise made combinations up (a candidate survives when its
    noisy count is above the threshold, 0 by default): the excess, Σ counts / (N̂·C(m̄, R)) − 1,
    is the noise's share. None without a DP record count or when m̄ < R.

    >>> from sds_core.data.domain import Domain
    >>> d = Domain(("A", "B"), (("a",), ("b",)))
    >>> agg = AggregateSet.from_text_dict(
    ...     d, {"A:a": 10, "B:b": 10, "A:a;B:b": 15}, 2, protected_number_of_records=10
    ... )
    >>> noise_excess(agg)
    0.5
    """
    n = aggregates.protected_number_of_records
    r = aggregates.reporting_length
    if not n:
        return None
    mean_values = float(aggregates.counts_of(1).counts.sum()) / n
    if mean_values < r:
        return None
    expected = n * math.prod(mean_values - i for i in range(r)) / math.factorial(r)
    return float(aggregates.counts_of(r).counts.sum()) / expected - 1.0


@dataclass(frozen=True, slots=True)
class SdsPlan:
    """What the plan chose (or kept from the user) for one release; every field is public.

    Args:
        protected_number_of_records: N̂, the DP record count the plan read.
        epsilon: the release's ε.
        signal: N̂ / :func:`pair_noise`, the plan's one measure of how much the data says.
        reporting_length: R.
        sigma_proportions: p_1..p_R (σ_k = p_k·σ; a length's budget is ∝ 1/p_k²).
        synthesis: ``"records"`` (aggregate-seeded records) or ``"model"`` (the consistent
            model of the aggregates, ``sds_core.synthesis.consistent``).
        model_structure, model_iterations, max_model_cells: the consistent model's
            ``ModelParams`` fields (``structure``, ``iterations``, ``max_model_cells``) when
            the synthesis is the model.
        chosen: the fields the plan chose (of reporting_length, sigma_proportions, synthesis,
            and reconcile_one_way with the records it chose); the others were set by the user
            and kept.
        reason: one sentence for the custodian (the manifest and the report).
        reconcile_one_way: the plan chose records and adjusts them to the published 1-way
            counts (``SynthesisParams.reconcile_one_way``): their 1-way counts then lie inside
            the published noise (1M binned ε = 4: 80% of the values before, 99% after, and
            TVD2 0.0029 -> 0.0019; ``git show 78ca7e7:docs/benchmarks.md``).

    >>> plan = plan_sds(10_000, epsilon=4.0, delta=1e-6, n_columns=11)
    >>> plan.reporting_length, plan.synthesis, [round(p, 2) for p in plan.sigma_proportions]
    (2, 'model', [1.0, 1.5])
    """

    protected_number_of_records: int
    epsilon: float
    signal: float
    reporting_length: int
    sigma_proportions: tuple[float, ...]
    synthesis: str
    model_structure: str
    model_iterations: int
    max_model_cells: int
    chosen: tuple[str, ...]
    reason: str
    reconcile_one_way: bool = False

    def dp_params(self, base: DpParams) -> DpParams:
        """``base`` with the plan's reporting length and split (every other field kept).

        A split the user set stays ``base.accuracy_mode`` (a named mode then gives its
        proportions at the plan's R), and so does a named mode with the plan's proportions
        (today's default stays ``prioritize_long``); otherwise the plan's proportions as a
        custom mode.
        """
        mode = base.accuracy_mode
        same = mode.kind != "custom" and mode.proportions(self.reporting_length) == (
            self.sigma_proportions
        )
        if "sigma_proportions" in self.chosen and not same:
            mode = AccuracyMode.custom(self.sigma_proportions)
        return dataclasses.replace(base, reporting_length=self.reporting_length, accuracy_mode=mode)

    def after_aggregation(self, aggregates: AggregateSet) -> SdsPlan:
        """The plan once the aggregates are published: records or the model above length 2.

        When the plan chose the synthesis and R >= 3, records are kept only if the aggregates'
        :func:`noise_excess` is at most :data:`MAX_RECORDS_EXCESS`; otherwise the records are
        drawn from the consistent model and the reason says why. Post-processing of the DP
        aggregates: no budget. Any other plan is returned unchanged.
        """
        if "synthesis" not in self.chosen or self.reporting_length < 3:
            return self
        excess = noise_excess(aggregates)
        if excess is None or excess <= MAX_RECORDS_EXCESS:
            return self
        kept = [_USER_NAMES[f] for f in _USER_NAMES if f not in self.chosen]
        reason = _reason(
            self.protected_number_of_records,
            self.epsilon,
            self.protected_number_of_records / self.signal,
            self.reporting_length,
            self.sigma_proportions,
            "model",
            kept,
            excess,
        )
        return dataclasses.replace(self, synthesis="model", reason=reason, reconcile_one_way=False)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, for the manifest (all values DP or public).

        >>> plan = plan_sds(10_000, epsilon=4.0, delta=1e-6, n_columns=11)
        >>> SdsPlan.from_dict(plan.as_dict()) == dataclasses.replace(plan, signal=1033.0)
        True
        """
        out = dataclasses.asdict(self)
        out["sigma_proportions"] = list(self.sigma_proportions)
        out["chosen"] = list(self.chosen)
        out["signal"] = round(self.signal, 1)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SdsPlan:
        """The plan :meth:`as_dict` wrote (a plan checkpoint, a manifest's ``plan``): its signal
        as written (rounded), and a field added to the plan since then at its default.

        Raises:
            SdsInputError: a field without a default is missing.
        """
        fields = dataclasses.fields(cls)
        missing = [
            f.name
            for f in fields
            if f.name not in data
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        require(not missing, f"an SDS plan without {missing}: {dict(data)!r}")
        values = {f.name: data[f.name] for f in fields if f.name in data}
        values["sigma_proportions"] = tuple(values["sigma_proportions"])
        values["chosen"] = tuple(values["chosen"])
        return cls(**values)


def _check(n_hat: int, epsilon: float, delta: float, n_columns: int, share: float) -> None:
    require(
        isinstance(n_hat, int) and not isinstance(n_hat, bool) and n_hat >= 1,
        f"the DP record count must be an integer >= 1, got {n_hat!r}",
    )
    require(
        isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0,
        f"epsilon must be finite and > 0, got {epsilon!r}",
    )
    require(
        isinstance(delta, int | float) and 0 < delta < 1,
        f"delta must be in (0, 1), got {delta!r}",
    )
    require(
        isinstance(n_columns, int) and not isinstance(n_columns, bool) and n_columns >= 1,
        f"n_columns must be an integer >= 1, got {n_columns!r}",
    )
    require(
        isinstance(share, int | float) and 0 < share < 1,
        f"number_of_records_epsilon_proportion must be in (0, 1), got {share!r}",
    )


def _proportions(r: int, signal: float, planned_r: int) -> tuple[float, ...] | None:
    """The plan's p_1..p_R, or None to keep the default mode (unmeasured ground, see below)."""
    if r == 1:
        return (1.0,)
    if r == 2 and planned_r == 2:
        share = length_one_share(signal)
        return (1.0, 1.0 / math.sqrt(1.0 / share - 1.0))
    return None  # R >= 3, or R = 2 above the length-3 signal: DpParams' default split


def plan_sds(
    protected_number_of_records: int,
    *,
    epsilon: float,
    delta: float,
    n_columns: int,
    number_of_records_epsilon_proportion: float = 0.005,
    reporting_length: int | None = None,
    accuracy_mode: AccuracyMode | None = None,
    synthesis: str | None = None,
) -> SdsPlan:
    """Choose R, the split between lengths and the synthesis from the DP record count.

    The signal is N̂ / :func:`pair_noise`: how many records a pair count holds per unit of
    the noise it would get. Below :data:`SIGNAL_FOR_LENGTH_3` the plan releases single values
    and pairs (R = 2), gives length 1 the share :func:`length_one_share` of the budget, and
    draws the records from the consistent model of the aggregates (pair-dependence structure,
    :data:`MODEL_ITERATIONS` iterations, more above :data:`SIGNAL_FOR_LONG_FIT`,
    :data:`MODEL_CELLS_PER_RECORD` cells per record).
    From it on, the plan is today's default: R = 3, ``prioritize_long``, records.

    Args:
        protected_number_of_records: N̂, the output of the ``count`` stage (DP).
        epsilon, delta: the release's (ε, δ), fixed before the data was read.
        n_columns: the number of columns (public: the schema's).
        number_of_records_epsilon_proportion: N_p, the record count's share of ε (already
            spent; the rest is the marginals').
        reporting_length: R set by the user (kept), or None.
        accuracy_mode: a split set by the user (kept), or None.
        synthesis: ``"records"`` or ``"model"`` set by the user (kept), or None.

    Raises:
        SdsInputError: a value out of range (the message names it).

    >>> small = plan_sds(9_987, epsilon=4.0, delta=1e-6, n_columns=11)
    >>> print(small.reason)  # doctest: +NORMALIZE_WHITESPACE
    About 10,000 records at ε = 4: a pair count carries noise of about ±10 records, large for
    combinations of three, so this release publishes single values and pairs, spends 69% of its
    budget on single values and draws the records from one model fitted to all published counts.
    >>> large = plan_sds(1_000_212, epsilon=4.0, delta=1e-6, n_columns=11)
    >>> print(large.reason)  # doctest: +NORMALIZE_WHITESPACE
    About 1,000,000 records at ε = 4: a pair count carries noise of about ±10 records, small
    next to the counts, so this release publishes combinations of up to 3 attributes, spends 7% of
    its budget on single values and builds the records directly from the published combinations,
    then adjusts them to the published single-value counts.
    """
    share = number_of_records_epsilon_proportion
    _check(protected_number_of_records, epsilon, delta, n_columns, share)
    require(
        reporting_length is None
        or (isinstance(reporting_length, int) and 1 <= reporting_length <= 10),
        f"reporting_length must be in 1..10, got {reporting_length!r}",
    )
    require(
        synthesis is None or synthesis in PLAN_SYNTHESES,
        f"synthesis must be one of {PLAN_SYNTHESES}, got {synthesis!r}",
    )
    noise = pair_noise(epsilon, delta, n_columns, share)
    signal = protected_number_of_records / noise
    small = signal < SIGNAL_FOR_LENGTH_3
    planned_r = min(2 if small else 3, n_columns)
    r = planned_r if reporting_length is None else reporting_length
    chosen: list[str] = []
    if reporting_length is None:
        chosen.append("reporting_length")
    if accuracy_mode is not None:
        props = accuracy_mode.proportions(r)
    else:
        planned = _proportions(r, signal, planned_r)
        props = planned if planned is not None else DpParams().accuracy_mode.proportions(r)
        chosen.append("sigma_proportions")
    synth = synthesis if synthesis is not None else ("model" if small else "records")
    if synthesis is None:
        chosen.append("synthesis")
    reconcile = synthesis is None and synth == "records"
    if reconcile:
        chosen.append("reconcile_one_way")
    kept = [_USER_NAMES[f] for f in _USER_NAMES if f not in chosen]
    pinned = reporting_length is not None and synthesis is not None
    cells = min(
        MAX_MODEL_CELLS, max(MIN_MODEL_CELLS, MODEL_CELLS_PER_RECORD * protected_number_of_records)
    )
    iterations = MODEL_ITERATIONS
    if signal >= SIGNAL_FOR_LONG_FIT and cells <= LONG_FIT_MAX_CELLS:
        iterations = max(MODEL_ITERATIONS, min(LONG_FIT_ITERATIONS, LONG_FIT_WORK // cells))
    return SdsPlan(
        protected_number_of_records=protected_number_of_records,
        epsilon=float(epsilon),
        signal=signal,
        reporting_length=r,
        sigma_proportions=tuple(props),
        synthesis=synth,
        model_structure="g-statistic" if pinned else MODEL_STRUCTURE,
        model_iterations=100 if pinned else iterations,
        max_model_cells=MAX_MODEL_CELLS if pinned else cells,
        chosen=tuple(chosen),
        reason=_reason(
            protected_number_of_records, epsilon, noise, r, props, synth, kept, None, reconcile
        ),
        reconcile_one_way=reconcile,
    )


_USER_NAMES = {
    "reporting_length": "reporting length",
    "sigma_proportions": "split",
    "synthesis": "synthesis",
}
"""The plan's fields a user may set, and their names in the reason."""


def _about(n: int) -> str:
    """N̂ rounded to two significant digits, with thousands separators."""
    digits = max(len(str(n)) - 2, 0)
    return f"{round(n, -digits):,}"


def _reason(
    n_hat: int,
    epsilon: float,
    noise: float,
    r: int,
    props: tuple[float, ...],
    synthesis: str,
    kept: list[str],
    excess: float | None = None,
    reconcile: bool = False,
) -> str:
    """One sentence: the count, the noise, what was chosen (and what the user set)."""
    weights = [1 / p**2 for p in props]
    one = weights[0] / sum(weights)
    why = (
        ("small next to the counts, so" if r >= 3 else "large for combinations of three, so")
        if not kept
        else "and"
    )
    length = {1: "single values only", 2: "single values and pairs"}.get(
        r, f"combinations of up to {r} attributes"
    )
    split = f", spends {one:.0%} of its budget on single values" if r > 1 else ""
    build = (
        "draws the records from one model fitted to all published counts"
        if synthesis == "model"
        else "builds the records directly from the published combinations"
        + (", then adjusts them to the published single-value counts" if reconcile else "")
    )
    if excess is not None:
        build = (
            f"draws the records from one model fitted to all published counts, because its "
            f"combinations of {r} hold {excess:.0%} more than the records can (noise)"
        )
    user = f" ({', '.join(kept)} set by you)" if kept else ""
    return (
        f"About {_about(n_hat)} records at ε = {epsilon:g}: a pair count carries noise of about "
        f"±{noise:.0f} records, {why} this release publishes {length}{split} and {build}{user}."
    )
