"""The synthesis tasks: ``synthesize`` (aggregate-seeded, from the DP aggregates alone) and
``fit`` (a registry synthesizer instead of the SDS stages).

Both checkpoint their records, so a resumed release neither draws nor spends twice.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.marginals.plan import SdsPlan
from sds_core.synthesis.consistent import AggregateNoise, ModelParams, estimated_total
from sds_core.synthesis.generator import default_target
from sds_core.synthesis.params import SynthesisParams
from sds_release.store.config.core_objects import synthesis_epsilon
from sds_release.store.executor.base import Executor
from sds_release.store.run import progress, stages
from sds_release.store.run.failure import NothingToRelease
from sds_release.store.run.release_run import ReleaseRun, SensitiveTable, registry_synthesizer
from sds_release.store.run.stage_log import finished, stage_done
from sds_release.tasks.options import SENSITIVE, task_logger


@task(name=stages.SYNTHESIZE, **SENSITIVE)
def synthesize_records(
    run: ReleaseRun,
    aggregates: AggregateSet,
    table: SensitiveTable[Any],
    noise: AggregateNoise,
    executor: Executor[Any, Any],
    plan: SdsPlan | None = None,
) -> Any:
    """Aggregate-seeded synthesis from the DP aggregates (post-processing, no spend), the
    records made and checkpointed where ``executor`` holds records.

    ``synthesis = "records"``: SDS's record building; ``"model"``: the consistent model fitted
    to the aggregates and their published ``noise``, sampled. The table is read only for its
    multi-value column declarations (a preparation setting). The records are matched to the
    aggregates within their published noise (``noise.sigma_by_len``); the model takes its
    structure, iterations and size from the SDS ``plan`` when the plan chose the model.
    """
    progress.stage(
        "synthesize (synthetic records)"
        if run.params.synthesis == "records"
        else "synthesize (consistent model)"
    )
    resumed = finished(run, stages.SYNTHESIZE)
    mv = table.value.multi_value_columns

    def compute() -> Any:
        return stage_records(run, executor, aggregates, mv, noise, plan)

    synthetic = executor.checkpointed(run, stages.SYNTHESIZE, compute)
    stage_done(
        task_logger(),
        run,
        stages.SYNTHESIZE,
        f"{synthetic.n_records} synthetic records from the DP aggregates alone"
        + executor.held(synthetic, "chunks"),
        resumed=resumed,
    )
    return synthetic


def stage_records(
    run: ReleaseRun,
    executor: Executor[Any, Any],
    aggregates: AggregateSet,
    multi_value_columns: tuple[MultiValueColumn, ...],
    noise: AggregateNoise,
    plan: SdsPlan | None,
) -> Any:
    """The synthesize stage's records, made where ``executor`` holds records and drawn from
    the stage's own generator: the consistent model's (``synthesis = "model"``) or SDS's."""
    params = run.params
    rng = run.randomness().generator(f"{run.release_id}/synthesis")
    if params.synthesis == "model":
        return executor.sample_model(
            aggregates,
            noise,
            params.synthetic_records,  # None: the model's estimated total
            rng=rng,
            params=_model_params(run, plan),
            multi_value_columns=multi_value_columns,
            part_records=params.synthetic_part_records,
        )
    _require_one_way_counts(run, aggregates)
    return executor.synthesize(
        aggregates,
        _synthesis_params(run, aggregates, noise),
        rng=rng,
        multi_value_columns=multi_value_columns,
        part_records=params.synthetic_part_records,
        progress=progress.advance,
        noise_sd_by_len=noise.sigma_by_len,
    )


def _require_one_way_counts(run: ReleaseRun, aggregates: AggregateSet) -> None:
    """End the release, saying why and what to do, when every 1-way count was suppressed: SDS
    builds records from the 1-way counts, so with none there is nothing to build from. This is
    an outcome of the DP counts (a small table or a small ε), known only after they were drawn:
    their spend stays charged, and a resume would draw the same counts again, so the release is
    closed rather than left open (:class:`NothingToRelease`)."""
    if len(aggregates.counts_of(1)):
        return
    n = aggregates.protected_number_of_records
    about = "" if n is None else f" (the DP record count is {n})"
    raise NothingToRelease(
        f"every count of length 1 fell below its threshold{about}, so there "
        f"are no counts to build synthetic records from: at epsilon {run.params.epsilon:g} "
        "this table is too small for its counts to be released ('sds plan' shows each "
        "length's threshold). What the counting drew stays charged and the release is closed "
        "(a resume would draw the same counts). Raise epsilon, release more rows or a "
        "smaller reporting_length."
    )


def _synthesis_params(
    run: ReleaseRun, aggregates: AggregateSet, noise: AggregateNoise
) -> SynthesisParams:
    """SDS's record building's settings: the release's record count, else the aggregates'
    default target, or with ``reconcile_one_way`` as many records as the 1-way counts say."""
    target = run.params.synthetic_records or default_target(aggregates)
    if run.params.reconcile_one_way and not run.params.synthetic_records:
        # records reconciled to the 1-way counts: as many as those counts say there are
        # (N̂ and the largest column's published sum), else a column that every record
        # holds (state) is off by N̂'s noise, far more than its own
        target = max(round(estimated_total(aggregates, noise)), 1)
    return SynthesisParams(
        target_number_of_records=target,
        reconcile_one_way=run.params.reconcile_one_way,
    )


def _model_params(run: ReleaseRun, plan: SdsPlan | None) -> ModelParams:
    """The consistent model's settings: the SDS plan's (structure, iterations, cells) when it
    chose the model, else the defaults; the memory cap is the release's."""
    if plan is None or "synthesis" not in plan.chosen:
        return ModelParams(max_model_bytes=run.params.max_model_bytes)
    return ModelParams(
        max_model_bytes=run.params.max_model_bytes,
        structure=plan.model_structure,
        iterations=plan.model_iterations,
        max_model_cells=plan.max_model_cells,
    )


@task(name=stages.FIT, **SENSITIVE)
def fit_synthesizer(
    run: ReleaseRun, table: SensitiveTable[Any], executor: Executor[Any, Any]
) -> tuple[Any, AggregateSet]:
    """A registry synthesizer (not SDS): charge all its stages, fit, sample.

    Returns the synthetic records (held where ``executor`` holds records) and, as the published
    aggregates, the synthesizer's own DP measurements when its model has them (``mst``: its
    measured marginals), else the counts of the synthetic records (post-processing of DP
    output, so DP as well). A synthesizer with a ``check_size(domain)`` method is asked first,
    before anything is charged. The synthesizer fits the whole table in this process.
    """
    params = run.params
    progress.stage(f"fit {params.synthesizer}")
    synth = registry_synthesizer(params)
    epsilon = synthesis_epsilon(params)
    spends = synth.budget(epsilon, params.resolved_delta())
    check_size = getattr(synth, "check_size", None)
    resumed = finished(run, stages.FIT)
    if check_size is not None and not resumed:
        check_size(table.value.domain)  # before the charge: refuse with nothing spent

    def compute() -> tuple[PreparedTable, AggregateSet]:
        rnd = run.randomness()
        fitted = synth.fit(
            executor.whole_table(table.value),  # fitted in this process
            epsilon=epsilon,
            delta=run.delta,
            rnd=rnd,
            release_label=run.release_id,
        )
        synthetic = synth.sample(None, rng=rnd.generator(f"{run.release_id}/synthesis"))
        measured = getattr(fitted.model, "aggregates", None)
        if isinstance(measured, AggregateSet) and measured.is_dp:
            return synthetic, measured  # the synthesizer's own DP measurements (mst)
        counts = exact_aggregates(synthetic, params.length)
        published = AggregateSet(
            synthetic.domain,
            params.length,
            counts.by_len,
            synthetic.n_records,
            is_dp=True,
        )
        return synthetic, published

    synthetic, published = run.stage(stages.FIT, compute, charges=[s.stage for s in spends])
    stage_done(
        task_logger(),
        run,
        stages.FIT,
        f"{params.synthesizer} fitted; {synthetic.n_records} synthetic records sampled",
        resumed=resumed,
        charged=[s.stage for s in spends],
    )
    return executor.hold(synthetic, params.synthetic_part_records), published
