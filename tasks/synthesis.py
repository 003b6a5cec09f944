"""The synthesis tasks: ``synthesize`` (aggregate-seeded, from the DP aggregates alone) and
``fit`` (a registry synthesizer instead of the SDS stages).

Both checkpoint their records, so a resumed release neither draws nor spends twice.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from prefect import task

from release_store.cluster.backend import DaskBackend
from release_store.cluster.inputs import whole_table
from release_store.cluster.session import session_backend, session_client
from release_store.cluster.synthesis import (
    StoredSynthetic,
    scatter_records,
    synthesize_gathered,
    synthesize_on_cluster,
)
from release_store.config.core_objects import synthesis_epsilon
from release_store.run import progress, stages
from release_store.run.release_run import ReleaseRun, SensitiveTable, registry_synthesizer
from release_store.run.stage_log import finished, stage_done
from sds_core.data.table import PreparedTable
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
    records (``synthesis = "records"``) stay on the workers, in chunks checkpointed one file
    each (:mod:`release_store.cluster.synthesis`); with ``reconcile_one_way`` those chunks are
    gathered here and reconciled, and the model's records are made here: one ``PreparedTable``
    checkpointed here, then sent to the workers in the same chunks (``scatter_records``), so
    no later stage holds them in this process. Without Dask, one ``PreparedTable``. The
    records are matched to the aggregates within their published noise
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
    if (
        client is not None
        and run.params.synthesis == "records"
        and not run.params.reconcile_one_way
    ):
        chunked = _synthesize_on_cluster(run, client, aggregates, table, noise)
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
        if run.params.synthesis == "model":
            return synthesize_from_model(
                aggregates,
                noise,
                run.params.synthetic_records,  # None: the model's estimated total
                rng=run.randomness().generator(f"{run.release_id}/synthesis"),
                params=_model_params(run, plan),
                multi_value_columns=table.value.multi_value_columns,
            )
        target = run.params.synthetic_records or default_target(aggregates)
        if run.params.reconcile_one_way and not run.params.synthetic_records:
            # records reconciled to the 1-way counts: as many as those counts say there are
            # (N̂ and the largest column's published sum), else a column that every record
            # holds (state) is off by N̂'s noise, far more than its own
            target = max(round(estimated_total(aggregates, noise)), 1)
        params = SynthesisParams(
            target_number_of_records=target,
            reconcile_one_way=run.params.reconcile_one_way,
        )
        rng = run.randomness().generator(f"{run.release_id}/synthesis")
        mv = table.value.multi_value_columns
        # executor "dask": the batches on the workers, gathered here; else here
        make: Callable[..., PreparedTable] = (
            synthesize if client is None else partial(synthesize_gathered, client)
        )
        return make(
            aggregates,
            params,
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
    if client is not None:  # made here (model, reconciled): the later stages read them there
        part_records = run.params.synthetic_part_records
        return session_backend(run.params, scatter_records(client, synthetic, part_records))
    return synthetic


def _synthesize_on_cluster(
    run: ReleaseRun,
    client: object,
    aggregates: AggregateSet,
    table: SensitiveTable[PreparedTable],
    noise: AggregateNoise,
) -> DaskBackend:
    """The records made on the workers and checkpointed chunk by chunk; a resumed release
    sends the checkpoint's chunks back to the workers (nothing drawn twice)."""
    made: list[DaskBackend] = []

    def compute() -> StoredSynthetic:
        synthetic = synthesize_on_cluster(
            client,
            aggregates,
            SynthesisParams(
                target_number_of_records=run.params.synthetic_records or default_target(aggregates),
                reconcile_one_way=False,
            ),
            rng=run.randomness().generator(f"{run.release_id}/synthesis"),
            multi_value_columns=table.value.multi_value_columns,
            part_records=run.params.synthetic_part_records,
            progress=progress.advance,
            noise_sd_by_len=noise.sigma_by_len,
        )
        made.append(synthetic)
        return StoredSynthetic.save(synthetic, run.dirs.checkpoint_dir, stages.SYNTHESIZE)

    stored = run.stage(stages.SYNTHESIZE, compute)
    chunked = made[0] if made else stored.load(client, run.dirs.checkpoint_dir)
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
