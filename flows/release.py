"""The ``release`` flow: one DP data release, stage by stage, as Prefect tasks.

budget (reserve) -> validate (GX gate, nothing charged) -> count -> aggregate k=1..R -> normalize
-> synthesize (a registry synthesizer instead: fit) -> validate output -> evaluate -> publish.
Re-running with the same release id resumes: finished stages load their hash-checked
checkpoints, nothing is charged twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prefect import flow, get_run_logger, runtime, task
from prefect.cache_policies import NO_CACHE

from release_store.params import ReleaseParams
from release_store.workdir import now
from tasks import stages
from tasks.publish import publish
from tasks.registry_synth import fit_synthesizer


def _run_name() -> str:
    params = runtime.flow_run.parameters.get("params") or {}
    if not isinstance(params, dict):
        params = params.model_dump()
    return f"release-{params.get('release_id') or params.get('dataset', 'new')}"


@task(name="validate-output", persist_result=False, cache_policy=NO_CACHE)
def validate_output(
    ctx: stages.ReleaseContext, params: ReleaseParams, synthetic: Any
) -> list[dict[str, Any]]:
    """The synthetic table against the declared schema (bins and value sets)."""
    from release_store.validation import output_schema, validate_table
    from sds_core.data.decoding import to_frame

    if params.table_schema is None:
        return []
    frame = to_frame(synthetic, empty_value="", join_multi_value_columns=True)
    labels = dict(zip(synthetic.domain.columns, synthetic.domain.labels, strict=True))
    schema = output_schema(params.table_schema, {c: labels.get(c, ()) for c in frame.columns})
    return validate_table(
        frame, schema, name="output", private_dir=ctx.dirs.private_dir, what="output"
    )


class _Stages:
    """The finished stages of a run, in order, with their start and finish times (manifest)."""

    def __init__(self) -> None:
        self.done: list[dict[str, Any]] = []

    @contextmanager
    def run(self, name: str) -> Iterator[None]:
        """Time one stage; it is recorded only when its body finishes."""
        started = now()
        yield
        self.done.append(
            {"name": name, "status": "complete", "started": started, "finished": now()}
        )


@flow(name="sds-release", flow_run_name=_run_name, persist_result=False, validate_parameters=True)
def release(params: ReleaseParams) -> str:
    """Run one DP release of ``params.input``; returns the release directory."""
    run_id = str(runtime.flow_run.id) if runtime.flow_run.id else None
    log = get_run_logger()
    timeline = _Stages()

    # --- 1. budget: reserve (ε, δ) before the data is read -----------------------------------
    with timeline.run("budget"):
        ctx = stages.reserve_budget(params=params, flow_run_id=run_id)
    try:
        # --- 2. validate the input (GX gate); nothing charged yet -----------------------------
        with timeline.run("validate"):
            checked = stages.validate_input(ctx=ctx, params=params)

        if params.synthesizer != "aggregate-seeded":
            # --- 3. fit a registry synthesizer (charged, then drawn) ------------------------
            with timeline.run("fit"):
                synthetic, aggregates = fit_synthesizer(ctx=ctx, params=params, flow_run_id=run_id)
        else:
            # --- 3. count, 4. aggregate k = 1..R: charged, then drawn ------------------------
            with timeline.run("count"):
                protected_n = stages.count_records(ctx=ctx, params=params, flow_run_id=run_id)
            for k in range(1, params.reporting_length + 1):
                with timeline.run(f"aggregate-{k}"):
                    step = stages.aggregate_length(
                        ctx=ctx, params=params, k=k, protected_n=protected_n, flow_run_id=run_id
                    )
                log.info("aggregate-%d: %d DP combinations survive", k, step["survivors"])

            # --- 5. normalize, 6. synthesize (post-processing, no spend) ---------------------
            with timeline.run("normalize"):
                aggregates = stages.finalize_aggregates(
                    ctx=ctx, params=params, protected_n=protected_n
                )
            with timeline.run("synthesize"):
                synthetic = stages.synthesize_records(ctx=ctx, params=params, aggregates=aggregates)

        # --- 7. validate output, 8. evaluate -------------------------------------------------
        with timeline.run("validate-output"):
            out_summary = validate_output(ctx=ctx, params=params, synthetic=synthetic)
        with timeline.run("evaluate"):
            evaluation = stages.evaluate_release(
                ctx=ctx, params=params, aggregates=aggregates, synthetic=synthetic
            )

        # --- 9. publish (the manifest turns complete, anchored to the ledger head) ----------
        return publish(
            ctx=ctx,
            parameters=params.public_dict() | {"release_id": ctx.release_id},
            input_sha256=checked["input_sha256"],
            aggregates=aggregates,
            synthetic=synthetic,
            evaluation=evaluation,
            validation={"input": checked["validation"], "output": out_summary},
            stages=timeline.done,
            flow_run_id=run_id,
        )
    except BaseException as e:
        stages.mark_failed(ctx, e, timeline.done)
        raise
    finally:
        stages.forget_table(ctx)


if __name__ == "__main__":
    import sys

    from release_store.params import build_params, load_config

    cfg = load_config(sys.argv[2]) if len(sys.argv) > 2 else {}
    print(release(build_params(cfg, {"input": sys.argv[1]})))
