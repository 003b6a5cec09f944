"""The ``release`` flow: one DP data release, stage by stage, as Prefect tasks.

budget -> ingest -> validate (GX gate, nothing charged) -> prepare -> count -> aggregate k=1..R
-> normalize -> synthesize (a registry synthesizer instead: fit) -> validate-output -> evaluate
-> publish. Each task receives what it reads and returns what the next one needs; the sensitive
table is a handle that only this flow run holds. Re-running with the same release id resumes:
finished stages load their hash-checked checkpoints and nothing is charged twice.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, runtime

from release_store import stages
from release_store.params import ReleaseParams
from tasks.budget import reserve_budget
from tasks.evaluation import evaluate
from tasks.ingest import read_input
from tasks.marginals import aggregate_length, count_records, normalize_aggregates
from tasks.preparation import prepare_table
from tasks.publish import publish_release
from tasks.synthesis import fit_synthesizer, synthesize_records
from tasks.validation import validate_input, validate_output


def _run_name() -> str:
    params = runtime.flow_run.parameters.get("params") or {}
    if not isinstance(params, dict):
        params = params.model_dump()
    return f"release-{params.get('release_id') or params.get('dataset', 'new')}"


@flow(name="sds-release", flow_run_name=_run_name, persist_result=False, validate_parameters=True)
def release(params: ReleaseParams) -> str:
    """Run one DP release of ``params.input``; returns the release directory."""
    log = get_run_logger()
    timeline = stages.Timeline()

    # --- budget: reserve (ε, δ) before the data is read -----------------------------------------
    with timeline.run(stages.BUDGET):
        run = reserve_budget(params=params, flow_run_id=str(runtime.flow_run.id or "") or None)
    try:
        # --- ingest, validate (GX gate; nothing charged yet), prepare -------------------------
        with timeline.run(stages.INGEST):
            raw, input_sha256 = read_input(run=run)
        with timeline.run(stages.VALIDATE):
            input_summary = validate_input(run=run, table=raw)
        with timeline.run(stages.PREPARE):
            table = prepare_table(run=run, table=raw, input_sha256=input_sha256)
        del raw

        by_length: dict[int, dict[str, Any]] = {}
        if params.synthesizer == "aggregate-seeded":
            # --- count, aggregate k = 1..R: each charged, then drawn ---------------------------
            with timeline.run(stages.COUNT):
                protected_n = count_records(run=run, table=table)
            for k in range(1, params.reporting_length + 1):
                with timeline.run(stages.aggregate_stage(k)):
                    by_length[k] = aggregate_length(
                        run=run, table=table, k=k, protected_n=protected_n, shorter=by_length
                    )
                log.info(
                    "aggregate-%d: %d DP combinations survive", k, len(by_length[k]["survivors"])
                )

            # --- normalize, synthesize: post-processing of the DP aggregates, no spend ---------
            with timeline.run(stages.NORMALIZE):
                aggregates = normalize_aggregates(
                    run=run, table=table, by_length=by_length, protected_n=protected_n
                )
            with timeline.run(stages.SYNTHESIZE):
                synthetic = synthesize_records(run=run, aggregates=aggregates, table=table)
        else:
            # --- fit a registry synthesizer: all its charges, then its draws -------------------
            with timeline.run(stages.FIT):
                synthetic, aggregates = fit_synthesizer(run=run, table=table)

        # --- validate output, evaluate ----------------------------------------------------------
        with timeline.run(stages.VALIDATE_OUTPUT):
            output_summary = validate_output(run=run, synthetic=synthetic)
        with timeline.run(stages.EVALUATE):
            evaluation = evaluate(run=run, table=table, aggregates=aggregates, synthetic=synthetic)

        # --- publish (the manifest turns complete, anchored to the ledger head) ---------------
        return publish_release(
            run=run,
            input_sha256=input_sha256,
            aggregates=aggregates,
            synthetic=synthetic,
            evaluation=evaluation,
            validation={"input": input_summary, "output": output_summary},
            stages_done=timeline.done,
            lengths=by_length,
        )
    except BaseException as e:
        run.mark_failed(e, timeline.done)
        raise


if __name__ == "__main__":
    import sys

    from release_store.params import build_params, load_config

    cfg = load_config(sys.argv[2]) if len(sys.argv) > 2 else {}
    print(release(build_params(cfg, {"input": sys.argv[1]})))
