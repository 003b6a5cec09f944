"""Aggregate-seeded synthesis: synthetic records built from an AggregateSet alone (spec §2.1).

Last privacy-relevant stage of a release: it reads only the (DP) aggregates, so the records it
produces inherit their guarantee by post-processing. The compiled loops live in
:mod:`sds_core.synthesis._completion_kernel` (default completion mode) and
:mod:`sds_core.synthesis._reference_kernel` (reference mode), the flat arrays they read in
:mod:`sds_core.synthesis.layout`; this module validates parameters, feeds the kernels uniforms
from the caller's Generator (one sequential run, or parallel batches), and returns a
:class:`PreparedTable` over ``aggregates.domain``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import EMPTY_CODE, Domain
from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.errors import SdsInternalError, require
from sds_core.marginals.aggregates import AggregateSet
from sds_core.synthesis._completion_kernel import synthesize_records_ordered
from sds_core.synthesis._reference_kernel import synthesize_records
from sds_core.synthesis._state import (
    BUDGET_LEFT,
    DONE,
    STALLED,
    STATUS,
    RunSettings,
    new_work_state,
)
from sds_core.synthesis.layout import build_layout
from sds_core.synthesis.matching import match_records
from sds_core.synthesis.matching import tolerance as match_tolerance
from sds_core.synthesis.params import SynthesisParams
from sds_core.synthesis.reconcile import reconcile_one_way
from sds_core.synthesis.sizes import check_synthesis_size, sub_combinations

CHUNK_RECORDS = 4096
"""Records built per kernel call (progress is reported between calls)."""
AUTO_BATCH_RECORDS = 200_000
"""From this many records on, ``parallel_batches=None`` builds 2 batches on 2 threads."""


REFERENCE_PARAMS = SynthesisParams(
    use_synthetic_counts=False, complete_records=False, parallel_batches=1, match_aggregates=False
)
"""pac-synth 0.0.8's behaviour (its ``sample()`` without a target)."""


def default_target(aggregates: AggregateSet) -> int:
    """The record count the pipeline asks for: the protected (DP) number of records.

    Raises SdsInputError when the aggregates carry no protected record count.
    """
    n = aggregates.protected_number_of_records
    require(
        n is not None and n > 0,
        "aggregates.protected_number_of_records is not set: pass target_number_of_records "
        "explicitly (exact aggregates have no protected count)",
    )
    if n is None:  # unreachable: require() above raised
        raise SdsInternalError("default_target: protected count is None after the check")
    return int(n)


def synthesize(
    aggregates: AggregateSet,
    params: SynthesisParams = SynthesisParams(),
    *,
    rng: np.random.Generator,
    progress: Callable[[int, int], None] | None = None,
    multi_value_columns: tuple[MultiValueColumn, ...] = (),
    noise_sd_by_len: Sequence[float] | None = None,
) -> PreparedTable:
    """Synthesize records from ``aggregates`` alone (aggregate-seeded synthesis, spec §2.1).

    Args:
        aggregates: the (DP) aggregates; nothing else about the data is read.
        params: see :class:`SynthesisParams`.
        rng: source of all randomness; same aggregates + params + seed => identical table.
        progress: called as ``progress(done, total)`` between chunks of records; ``total`` is
            the target, or the total attribute budget (with ``done`` in attributes used) when
            no target is given.
        multi_value_columns: passed through to the result (for re-joining on output).
        noise_sd_by_len: the published noise standard deviation of one count of each length
            (σ_k·√Δ_k, the manifest's ``noise_sd``; public). With ``match_aggregates``, gaps
            within ``matching.TOLERANCE_Z`` of it are left alone (the records do not chase the
            noise). None: every gap counts.

    Returns:
        A PreparedTable over ``aggregates.domain`` (codes, -1 = empty), rows shuffled.

    Raises:
        SdsInputError: bad parameters, or aggregates without any single-attribute count.
    """
    plan = plan_synthesis(aggregates, params, noise_sd_by_len)
    require(isinstance(rng, np.random.Generator), "rng must be a numpy.random.Generator")
    job, batches, target, total_budget = plan.job, plan.batches, plan.target, plan.job.total_budget
    domain = aggregates.domain
    done = np.zeros(batches, dtype=np.int64)  # records made (or budget used) per batch

    if batches == 1:

        def report(made: int) -> None:
            if progress is not None:
                progress(made, total_budget if target is None else target)

        chunks = run_batch(job, rng, target, report)
    else:
        chunks = _run_parallel(
            job,
            rng.spawn(batches),
            plan.targets,
            done,
            progress,
            total_budget * batches if target is None else target,
        )
    codes = records_to_codes(chunks, domain)
    codes = codes[rng.permutation(codes.shape[0])]
    table = PreparedTable(domain, codes, multi_value_columns)
    if params.reconcile_one_way:  # draws only when on: the default's records are unchanged
        table = reconcile_one_way(table, aggregates, rng=rng, in_place=True)
    return table


@dataclass(frozen=True, slots=True, eq=False)
class SynthesisPlan:
    """What :func:`synthesize` runs: the batch job, the batch count and each batch's target.

    ``batches`` and the targets depend on the parameters and aggregates only (never on the
    machine), so the records replay from the same seed wherever the batches run.
    """

    job: BatchJob
    batches: int
    target: int | None

    @property
    def targets(self) -> list[int | None]:
        """Each batch's record target (None: until the budget is used up)."""
        t, b = self.target, self.batches
        return [None if t is None else t // b + (i < t % b) for i in range(b)]


def plan_synthesis(
    aggregates: AggregateSet,
    params: SynthesisParams = SynthesisParams(),
    noise_sd_by_len: Sequence[float] | None = None,
) -> SynthesisPlan:
    """The batches :func:`synthesize` runs (its layout, settings and targets; draws nothing).

    ``noise_sd_by_len``: see :func:`synthesize`.

    Raises:
        SdsInputError: bad parameters, or aggregates without any single-attribute count.
    """
    require(isinstance(aggregates, AggregateSet), "aggregates must be an AggregateSet")
    require(isinstance(params, SynthesisParams), "params must be a SynthesisParams")
    domain = aggregates.domain
    n_cols, n_attr, R = domain.n_columns, domain.n_attributes, aggregates.reporting_length
    target = params.target_number_of_records
    scale = params.aggregate_counts_scale_factor
    f = 1.0 if scale is None else scale
    batches = params.parallel_batches or (
        2 if _expected_records(aggregates, target, f) >= AUTO_BATCH_RECORDS else 1
    )
    check_synthesis_size(n_cols, n_attr, R)
    lay = build_layout(aggregates, scale if batches == 1 else f / batches)
    total_budget = int(lay.budget.sum())
    require(total_budget > 0, "aggregates have no single-attribute (length 1) counts to synthesize")
    sub_cap = sub_combinations(n_cols, R)
    attr_col = lay.attr_col
    # share of non-empty cells per column implied by the aggregates: column budget / records
    # per budget cycle (protected count, scaled like the counts; else the fullest column)
    col_budget = np.bincount(attr_col, weights=lay.budget, minlength=n_cols)
    cycle: float | None = aggregates.protected_number_of_records
    if cycle is not None and (params.aggregate_counts_scale_factor is not None or batches > 1):
        cycle = cycle * f / batches
    if cycle is None or cycle <= 0:
        cycle = float(col_budget.max())
    fill_rate = np.minimum(col_budget / cycle, 1.0)
    card = np.bincount(attr_col[lay.idx1 >= 0], minlength=n_cols)
    # completion order: fuller columns first (fill rates equal to 2 decimals: fewer values first)
    col_order = np.lexsort((card, -np.round(fill_rate, 2))).astype(np.int64)
    tolerance = None if noise_sd_by_len is None else match_tolerance(noise_sd_by_len)
    require(
        tolerance is None or len(tolerance) >= R,
        f"noise_sd_by_len needs one value per length 1..{R}, got {noise_sd_by_len!r}",
    )
    settings = RunSettings(
        use_synthetic_counts=params.use_synthetic_counts,
        percentile=params.weight_selection_percentile / 100.0,
        reset_budgets=target is not None,
        sub_cap=sub_cap,
        col_order=col_order,
        fill_rate=fill_rate,
    )
    job = BatchJob(
        lay,
        settings,
        bool(params.complete_records),
        n_cols,
        total_budget,
        bool(params.match_aggregates),
        float(cycle),
        None if tolerance is None else tuple(t * f / batches for t in tolerance),
    )
    return SynthesisPlan(job, batches, target)


def batch_codes(
    job: BatchJob, b_rng: np.random.Generator, b_target: int | None, domain: Domain
) -> NDArray[np.int32]:
    """One batch's records as codes (-1 = empty), in the order built (before the shuffle):
    :func:`run_batch` on a cluster worker; :func:`synthesize` concatenates them, then shuffles."""
    chunks = run_batch(job, b_rng, b_target)
    return records_to_codes(chunks, domain)


def records_to_codes(chunks: list[NDArray[np.int64]], domain: Domain) -> NDArray[np.int32]:
    """The kernels' attribute ids (per column, -1 = empty) as the domain's codes."""
    n_cols = domain.n_columns
    ids = np.concatenate(chunks) if chunks else np.zeros((0, n_cols), dtype=np.int64)
    offsets = np.asarray(domain.offsets[:-1], dtype=np.int64)
    codes: NDArray[np.int32] = np.where(ids >= 0, ids - offsets[None, :], EMPTY_CODE).astype(
        np.int32
    )
    return codes


@dataclass(frozen=True, slots=True, eq=False)
class BatchJob:
    """What one synthesis batch reads (plain arrays and settings: picklable, no callables)."""

    lay: Any
    settings: RunSettings
    complete_records: bool
    n_cols: int
    total_budget: int
    match_aggregates: bool
    cycle: float
    match_tolerance: tuple[float, ...] | None


def run_batch(
    job: BatchJob,
    b_rng: np.random.Generator,
    b_target: int | None,
    report: Callable[[int], None] | None = None,
) -> list[NDArray[np.int64]]:
    """One batch: its own budgets, synthetic counts and fill counters; ``report(done)`` after
    each chunk (records made, or attribute budget used without a target). With
    ``job.match_aggregates`` the batch's records are then matched to the batch's (scaled)
    aggregates (:func:`sds_core.synthesis.matching.match_records`, drawing from ``b_rng``), so a
    batch run on a cluster's worker gives the same records as here."""
    kernel = synthesize_records_ordered if job.complete_records else synthesize_records
    work = new_work_state(job.lay.budget, job.lay.counts.size, job.lay.triples.count, job.n_cols)
    chunks: list[NDArray[np.int64]] = []
    made = 0
    while True:
        want = CHUNK_RECORDS if b_target is None else min(CHUNK_RECORDS, b_target - made)
        if want <= 0:
            break
        out = np.empty((want, job.n_cols), dtype=np.int64)
        uniforms = b_rng.random(want * job.n_cols)
        n, _ = kernel(out, uniforms, job.lay, job.settings, work)
        if work.counters[STATUS] == STALLED:
            raise SdsInternalError("synthesis stalled with attribute budget left (bug)")
        chunks.append(out[:n])
        made += n
        if report is not None:
            report(job.total_budget - int(work.counters[BUDGET_LEFT]) if b_target is None else made)
        if work.counters[STATUS] == DONE:
            break
    if job.match_aggregates and chunks:
        ids = np.concatenate(chunks)
        # a target asks for target / cycle times the counts of one budget cycle
        scale = 1.0 if b_target is None else b_target / job.cycle
        match_records(ids, job.lay, rng=b_rng, tolerance_by_len=job.match_tolerance, scale=scale)
        chunks = [ids]
    return chunks


def _expected_records(aggregates: AggregateSet, target: int | None, f: float) -> float:
    """Records a run will make: the target, else one budget cycle (protected count or fullest
    column's 1-count sum), scaled."""
    if target is not None:
        return float(target)
    if aggregates.protected_number_of_records:
        return float(aggregates.protected_number_of_records) * f
    c1 = aggregates.counts_of(1)
    cols = aggregates.domain.attribute_columns()[c1.attrs[:, 0]] if len(c1) else np.zeros(0, int)
    return float(np.bincount(cols, weights=c1.counts).max() * f) if len(c1) else 0.0


def _run_parallel(
    job: BatchJob,
    rngs: list[np.random.Generator],
    targets: list[int | None],
    done: NDArray[np.int64],
    progress: Callable[[int, int], None] | None,
    total: int,
) -> list[NDArray[np.int64]]:
    """Run the batches on threads (the kernels release the GIL); progress from this thread."""
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

    def one(b: int, rng: np.random.Generator, target: int | None) -> list[NDArray[np.int64]]:
        return run_batch(job, rng, target, lambda made: done.__setitem__(b, made))

    with ThreadPoolExecutor(max_workers=len(rngs)) as pool:
        futures = [
            pool.submit(one, b, r, t) for b, (r, t) in enumerate(zip(rngs, targets, strict=True))
        ]
        pending = set(futures)
        while pending:
            _, pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
            if progress is not None:
                progress(int(done.sum()), total)
        return [chunk for fut in futures for chunk in fut.result()]


def domain_from_text_keys(keys: Iterable[str], columns: Sequence[str] | None = None) -> Domain:
    """Domain implied by SDS combination texts (``"A:a1;B:b1"``), e.g. pac-synth's aggregates.

    Args:
        keys: combination texts; every attribute ``Column:value`` found becomes a label.
        columns: column order (e.g. the data header); default = order of first appearance.
            Columns listed here but absent from ``keys`` get no labels.

    >>> domain_from_text_keys(["B:b1;A:a2", "A:a1"], columns=["A", "B"]).labels
    (('a1', 'a2'), ('b1',))
    """
    labels: dict[str, set[str]] = {c: set() for c in columns or ()}
    for key in keys:
        for part in key.split(";"):
            col, sep, value = part.partition(":")
            require(bool(sep) and value != "", f"combination {key!r}: {part!r} is not Column:value")
            if col not in labels:
                require(columns is None, f"combination {key!r} names column {col!r} not in columns")
                labels[col] = set()
            labels[col].add(value)
    return Domain(tuple(labels), tuple(tuple(sorted(v)) for v in labels.values()))
