"""SynthesisParams: the settings of aggregate-seeded synthesis (none costs privacy budget).

A module of its own, without the compiled synthesis kernels, so that the release parameters
(sds_release.store.config) document them without loading numba; :mod:`sds_core.synthesis.generator`
uses it (and re-exports it).
"""

from __future__ import annotations

from dataclasses import dataclass

from sds_core.param_fields import check_fields, documented, param

__all__ = ["SynthesisParams"]

_POST_PROCESSING = "None: synthesis reads only the DP aggregates (post-processing)."


@documented
@dataclass(frozen=True, slots=True)
class SynthesisParams:
    """Parameters of aggregate-seeded synthesis (none of them costs privacy budget).

    Every field is declared once below (default, bounds, meaning); a release uses these
    defaults with ``target_number_of_records`` = the DP record count (:func:`default_target`).
    """

    use_synthetic_counts: bool = param(
        True,
        kind=bool,
        doc="Weight a candidate by A[c] − syn[c] (aggregate count minus the times c was already "
        "synthesized) instead of A[c], dropping exhausted combinations, so later records fill "
        "what earlier ones left. Reference default False; ours True because it measurably "
        "lowers marginal error (docs/synthesis.md).",
        privacy=_POST_PROCESSING,
    )
    weight_selection_percentile: int = param(
        95,
        kind=int,
        ge=0,
        le=100,
        doc="P: beyond the reporting length a candidate's weight is the R-8 quantile at P/100 "
        "of the weights of all its sub-combinations of length <= R, rounded half away from "
        "zero (reference default 95).",
        privacy=_POST_PROCESSING,
    )
    aggregate_counts_scale_factor: float | None = param(
        None,
        kind=float,
        gt=0,
        optional=True,
        doc="f: every count becomes ceil(count·f) before synthesis (changes how many records "
        "come out when no target is given). None = 1.",
        privacy=_POST_PROCESSING,
    )
    target_number_of_records: int | None = param(
        None,
        kind=int,
        gt=0,
        optional=True,
        doc="Produce exactly this many records, resetting the attribute budgets and synthetic "
        "counts whenever the budgets run out. None = stop when every single-attribute budget "
        "is used (reference behaviour); a release asks for the DP record count.",
        privacy=_POST_PROCESSING,
    )
    complete_records: bool = param(
        True,
        kind=bool,
        doc="Our record-completion mode (reference: False). (1) Each step only considers the "
        "free column ranked first by its aggregate fill rate (sum of its 1-counts / expected "
        "records; ties: fewer values first), so always-filled columns are filled before sparse "
        "ones; (2) when no candidate respects the budgets / synthetic counts any more, keep "
        "adding a candidate drawn by the raw aggregate weights among those that create no "
        "unreported combination, in columns still below their fill rate. The reference ends "
        "the record there, leaving those cells empty. The guarantee (no unreported combination "
        "of length <= R) holds in both modes.",
        privacy=_POST_PROCESSING,
    )
    parallel_batches: int | None = param(
        None,
        kind=int,
        ge=1,
        optional=True,
        doc="B: independent batches built on parallel threads, each from the aggregates scaled "
        "by 1/B (ceil(count·f/B)) with its own budgets and synthetic counts, producing 1/B of "
        "the records; outputs are concatenated. An approximation of one sequential run "
        "(synthetic counts steer within a batch only; docs/synthesis.md measures it). None = "
        "automatic: 2 from AUTO_BATCH_RECORDS records on, else 1 (sequential, exact). The "
        "choice depends on the parameters and aggregates only, never on the machine, so seeds "
        "replay.",
        privacy=_POST_PROCESSING,
    )
    match_aggregates: bool = param(
        True,
        kind=bool,
        doc="After synthesis, a local search moves the records' cells towards the DP counts: each "
        "cell takes the value (or empty) that most lowers the squared gap between the records' "
        "1- and 2-way counts and the DP counts (gaps within one published noise standard "
        "deviation are free), among the values whose every combination with the record's other "
        "attributes is reported; a value further below its DP 1-count may also empty the one "
        "cell that blocks it (sds_core.synthesis.matching). Keeps the guarantee (no unreported "
        "combination of length <= R) and the record count; the records then agree with the "
        "published counts within their noise far more often (docs/synthesis.md measures it). "
        "False = the records as built before issue 22.",
        privacy=_POST_PROCESSING,
    )
    reconcile_one_way: bool = param(
        False,
        kind=bool,
        doc="After synthesis, fill empty cells of columns the records leave emptier than their DP "
        "1-counts say, with values drawn by their remaining 1-way deficit among those whose pairs "
        "with every other attribute of the record are reported "
        "(sds_core.synthesis.reconcile). Lowers 1-, 2- and 3-way marginal error where the "
        "aggregates cannot support complete records (a high-cardinality column at small n·ε), "
        "but relaxes the guarantee to: no unreported combination of length <= 2 (longer ones "
        "may be fabricated; docs/synthesis.md measures both).",
        privacy=_POST_PROCESSING,
    )

    def __post_init__(self) -> None:
        check_fields(self)
