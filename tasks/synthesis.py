"""The synthesis tasks: ``synthesize`` (aggregate-seeded, from the DP aggregates alone) and
``fit`` (a registry synthesizer instead of the SDS stages).

Both checkpoint their records, so a resumed release neither draws nor spends twice.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from release_store.cluster.backend import DaskBackend
from release_store.cluster.inputs import whole_table
from release_store.cluster.session import session_backend, session_client
from release_store.cluster.synthesis import (
    StoredSynthetic,
    sample_model_on_cluster,
    scatter_records,
    synthesize_on_cluster,
    synthesize_reconciled,
)
from release_store.config.core_objects import synthesis_epsilon
from release_store.run import progress, stages
from release_store.run.release_run import ReleaseRun, SensitiveTable, registry_synthesizer
from release_store.run.stage_log import finished, stage_done
from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.synthesis.consistent import (
    AggregateNoise,
    ModelParams,
    estimated_total,
    synthesize_from_model,
)
from sds_core.synthesis.generator import default_target, synthesize
from sds_core.synthesis.params import SynthesisParams
from tasks.options import SENSITIVE, task_logger


@task(name=stages.SYNTHESIZE, **SENSITIVE)
def synthesize_records(
    run: ReleaseRun,
    aggregates: AggregateSet,
    table: SensitiveTable[PreparedTable],
    noise: AggregateNoise,
    plan: dict[str, Any] | None = None,
) -> PreparedTable | DaskBackend:
    """Aggregate-seeded synthesis from the DP aggregates (post-processing, no spend).

    ``synthesis = "records"``: SDS's record building; ``"model"``: the consistent model fitted
    to the aggregates and their published ``noise``, sampled. The table is read only for its
    multi-value column declarations (a preparation setting). With the Dask executor the
    records are made on the workers and stay there, in chunks checkpointed one file each
    (:mod:`release_store.cluster.synthesis`): the model is fitted and sampled on one worker,
    ``reconcile_one_way`` runs on one worker over the chunks made there. Without Dask, one
    ``PreparedTable``. The records are matched to the aggregates within their published noise
    (``noise.sigma_by_len``); the model takes its structure, iterations and size from the SDS
    ``plan`` when the plan chose the model.
    """
    progress.stage(
        "synthesize (synthetic records)"
        if run.params.synthesis == "records"
        else "synthesize (consistent model)"
    )
    resumed = finished(run, stages.SYNTHESIZE)
    client = session_client(run.params)
    mv = table.value.multi_value_columns
    if client is not None:
        chunked = _synthesize_on_cluster(run, client, aggregates, mv, noise, plan)
        stage_done(
            task_logger(),
            run,
            stages.SYNTHESIZE,
            f"{chunked.n_records} synthetic records from the DP aggregates alone "
            f"({len(chunked.parts)} chunks on the Dask workers)",
            resumed=resumed,
        )
        return chunked

    def compute() -> PreparedTable:
        rng = run.randomness().generator(f"{run.release_id}/synthesis")
        if run.params.synthesis == "model":
            return synthesize_from_model(
                aggregates,
                noise,
                run.params.synthetic_records,  # None: the model's estimated total
                rng=rng,
                params=_model_params(run, plan),
                multi_value_columns=mv,
            )
        return synthesize(
            aggregates,
            _synthesis_params(run, aggregates, noise),
            rng=rng,
            multi_value_columns=mv,
            progress=progress.advance,
            noise_sd_by_len=noise.sigma_by_len,
        )

    synthetic = run.stage(stages.SYNTHESIZE, compute)
    stage_done(
        task_logger(),
        run,
        stages.SYNTHESIZE,
        f"{synthetic.n_records} synthetic records from the DP aggregates alone",
        resumed=resumed,
    )
    return synthetic


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


def records_on_cluster(
    run: ReleaseRun,
    client: object,
    aggregates: AggregateSet,
    multi_value_columns: tuple[MultiValueColumn, ...],
    noise: AggregateNoise,
    plan: dict[str, Any] | None,
) -> DaskBackend:
    """The synthesize stage's records made on the workers, in the chunks the later stages read
    there (the local records byte for byte, drawn from the stage's own generator): SDS's
    batches, reconciled on one worker when asked, or the model fitted and sampled on one
    worker."""
    rng = run.randomness().generator(f"{run.release_id}/synthesis")
    part_records = run.params.synthetic_part_records
    if run.params.synthesis == "model":
        return sample_model_on_cluster(
            client,
            aggregates,
            noise,
            run.params.synthetic_records,  # None: the model's estimated total
            rng=rng,
            params=_model_params(run, plan),
            multi_value_columns=multi_value_columns,
            part_records=part_records,
        )
    params = _synthesis_params(run, aggregates, noise)
    make = synthesize_reconciled if params.reconcile_one_way else synthesize_on_cluster
    return make(
        client,
        aggregates,
        params,
        rng=rng,
        multi_value_columns=multi_value_columns,
        part_records=part_records,
        progress=progress.advance,
        noise_sd_by_len=noise.sigma_by_len,
    )


def _synthesize_on_cluster(
    run: ReleaseRun,
    client: object,
    aggregates: AggregateSet,
    multi_value_columns: tuple[MultiValueColumn, ...],
    noise: AggregateNoise,
    plan: dict[str, Any] | None,
) -> DaskBackend:
    """The records made on the workers and checkpointed chunk by chunk; a resumed release
    sends the checkpoint's chunks back to the workers (nothing drawn twice), or the whole
    table a release checkpointed before the model's and the reconciled records were made on
    the workers (``scatter_records``)."""
    made: list[DaskBackend] = []

    def compute() -> StoredSynthetic:
        synthetic = records_on_cluster(run, client, aggregates, multi_value_columns, noise, plan)
        made.append(synthetic)
        return StoredSynthetic.save(synthetic, run.dirs.checkpoint_dir, stages.SYNTHESIZE)

    stored: StoredSynthetic | PreparedTable = run.stage(stages.SYNTHESIZE, compute)
    if made:
        chunked = made[0]
    elif isinstance(stored, PreparedTable):  # a whole table, made on the driver before
        chunked = scatter_records(client, stored, run.params.synthetic_part_records)
    else:
        chunked = stored.load(client, run.dirs.checkpoint_dir)
    return session_backend(run.params, chunked)


def _model_params(run: ReleaseRun, plan: dict[str, Any] | None) -> ModelParams:
    """The consistent model's settings: the SDS plan's (structure, iterations, cells) when it
    chose the model, else the defaults; the memory cap is the release's."""
    if plan is None or "synthesis" not in plan["chosen"]:
        return ModelParams(max_model_bytes=run.params.max_model_bytes)
    return ModelParams(
        max_model_bytes=run.params.max_model_bytes,
        structure=plan["model_structure"],
        iterations=plan["model_iterations"],
        max_model_cells=plan["max_model_cells"],
    )


@task(name=stages.FIT, **SENSITIVE)
def fit_synthesizer(
    run: ReleaseRun, table: SensitiveTable[PreparedTable]
) -> tuple[PreparedTable, AggregateSet]:
    """A registry synthesizer (not SDS): charge all its stages, fit, sample.

    Returns the synthetic table and, as the published aggregates, the synthesizer's own DP
    measurements when its model has them (``mst``: its measured marginals), else the counts of
    the synthetic records (post-processing of DP output, so DP as well). A synthesizer with a
    ``check_size(domain)`` method is asked first, before anything is charged.
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
            whole_table(table.value),  # a registry synthesizer fits the table in this process
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
    return synthetic, published
