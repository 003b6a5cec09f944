"""The synthesis tasks: ``synthesize`` (aggregate-seeded, from the DP aggregates alone) and
``fit`` (a registry synthesizer instead of the SDS stages).

Both checkpoint their records, so a resumed release neither draws nor spends twice.
"""

from __future__ import annotations

from prefect import get_run_logger, task

from release_store import progress, stages
from release_store.run import ReleaseRun, SensitiveTable, registry_synthesizer
from release_store.stage_log import finished, stage_done
from sds_core.data.table import PreparedTable
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.synthesis.generator import SynthesisParams, default_target, synthesize
from tasks.options import SENSITIVE


@task(name=stages.SYNTHESIZE, **SENSITIVE)
def synthesize_records(
    run: ReleaseRun, aggregates: AggregateSet, table: SensitiveTable[PreparedTable]
) -> PreparedTable:
    """Aggregate-seeded synthesis from the DP aggregates (post-processing, no spend).

    The table is read only for its multi-value column declarations (a preparation setting).
    """
    progress.stage("synthesize (synthetic records)")
    resumed = finished(run, stages.SYNTHESIZE)

    def compute() -> PreparedTable:
        return synthesize(
            aggregates,
            SynthesisParams(target_number_of_records=default_target(aggregates)),
            rng=run.randomness().generator(f"{run.release_id}/synthesis"),
            multi_value_columns=table.value.multi_value_columns,
            progress=progress.advance,
        )

    synthetic = run.stage(stages.SYNTHESIZE, compute)
    stage_done(
        get_run_logger(),
        run,
        stages.SYNTHESIZE,
        f"{synthetic.n_records} synthetic records from the DP aggregates alone",
        resumed=resumed,
    )
    return synthetic


@task(name=stages.FIT, **SENSITIVE)
def fit_synthesizer(
    run: ReleaseRun, table: SensitiveTable[PreparedTable]
) -> tuple[PreparedTable, AggregateSet]:
    """A registry synthesizer (not SDS): charge all its stages, fit, sample.

    Returns the synthetic table and, as the published aggregates, the counts of the synthetic
    records (post-processing of DP output, so DP as well).
    """
    params = run.params
    progress.stage(f"fit {params.synthesizer}")
    synth = registry_synthesizer(params)
    spends = synth.budget(params.epsilon, params.resolved_delta())
    resumed = finished(run, stages.FIT)

    def compute() -> tuple[PreparedTable, AggregateSet]:
        rnd = run.randomness()
        synth.fit(
            table.value,
            epsilon=params.epsilon,
            delta=run.delta,
            rnd=rnd,
            release_label=run.release_id,
        )
        synthetic = synth.sample(None, rng=rnd.generator(f"{run.release_id}/synthesis"))
        counts = exact_aggregates(synthetic, params.reporting_length)
        published = AggregateSet(
            synthetic.domain,
            params.reporting_length,
            counts.by_len,
            synthetic.n_records,
            is_dp=True,
        )
        return synthetic, published

    synthetic, published = run.stage(stages.FIT, compute, charges=[s.stage for s in spends])
    stage_done(
        get_run_logger(),
        run,
        stages.FIT,
        f"{params.synthesizer} fitted; {synthetic.n_records} synthetic records sampled",
        resumed=resumed,
        charged=[s.stage for s in spends],
    )
    return synthetic, published
