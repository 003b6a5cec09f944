"""Registry synthesizers (histogram-1way/nway, dirichlet-multinomial, cathist) as one flow stage.

Used by the ``release`` flow instead of count/aggregate/normalize/synthesize when the chosen
synthesizer is not SDS's aggregate-seeded one: its options come from the declared schema
(fixed before the data is read), every planned charge is made before ``fit`` draws noise, and
the fitted synthetic table is checkpointed privately so a resume does not fit twice.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from release_store import progress
from release_store.params import ReleaseParams
from sds_core.errors import SdsInputError
from tasks.stages import SENSITIVE, ReleaseContext, _charge, _maybe_kill, _table


def registry_synthesizer(params: ReleaseParams) -> Any:
    """The registry synthesizer of ``params``, with options from the declared schema."""
    from sds_core.synthesizers import create, option_names

    names = set(option_names(params.synthesizer))
    if "declared" in names and params.table_schema is not None:
        from sds_core.dp.declared import DeclaredDomain

        declared = tuple(
            DeclaredDomain(c.name, values=tuple(c.values))
            for c in params.table_schema.columns
            if c.values is not None and (not params.use_columns or c.name in params.use_columns)
        )
        return create(params.synthesizer, declared=declared)
    if "columns" not in names:
        return create(params.synthesizer)
    columns = list(params.use_columns) or (
        [c.name for c in params.table_schema.columns] if params.table_schema else []
    )
    if not columns:
        raise SdsInputError(
            f"synthesizer {params.synthesizer!r} splits its budget over the columns, which must "
            "be known before the data is read: declare a [schema] or pass --use-columns a,b,c"
        )
    if "marginal_columns" in names:  # histogram-nway: one joint histogram over all columns
        return create(params.synthesizer, columns=tuple(columns), marginal_columns=tuple(columns))
    return create(params.synthesizer, columns=tuple(columns))


@task(name="fit-synthesizer", **SENSITIVE)
def fit_synthesizer(
    ctx: ReleaseContext, params: ReleaseParams, flow_run_id: str | None = None
) -> tuple[Any, Any]:
    """A registry synthesizer (not SDS): charge all its stages, fit, sample.

    Returns the synthetic table and, as the published aggregates, the counts of the
    synthetic records (post-processing of DP output, so DP as well).
    """
    progress.stage(f"fit {params.synthesizer}")
    from sds_core.marginals.aggregates import AggregateSet
    from sds_core.marginals.exact_counts import exact_aggregates

    dirs = ctx.dirs
    done = dirs.load_checkpoint("fit")
    if done is None:
        synth = registry_synthesizer(params)
        for spend in synth.budget(params.epsilon, params.resolved_delta()):
            _charge(ctx, spend.stage, flow_run_id)
        rnd = dirs.randomness(params.seed)
        synth.fit(
            _table(ctx),
            epsilon=params.epsilon,
            delta=params.resolved_delta(),
            rnd=rnd,
            release_label=ctx.release_id,
        )
        _maybe_kill("fit")
        synthetic = synth.sample(None, rng=rnd.generator(f"{ctx.release_id}/synthesis"))
        counts = exact_aggregates(synthetic, params.reporting_length)
        done = (
            synthetic,
            AggregateSet(
                synthetic.domain,
                params.reporting_length,
                counts.by_len,
                synthetic.n_records,
                is_dp=True,
            ),
        )
        dirs.save_checkpoint("fit", done)
    return done
