"""``sds audit RELEASE_ID --replay --input PATH``: recompute a published release and compare.

The release's own stage tasks run again, in the flow's order, on a replay ``ReleaseRun``
(sds_release.store.audit.replay): the same core calls, the same keyed noise from the release key,
with a ledger that only reads the recorded charges and a throwaway workdir. Their bodies are called
directly (``task.fn``): a replay is an audit, not a release, so it needs no Prefect server, is
no flow run, and nothing of it reaches a result store. Then every published artifact is
compared byte for byte.
"""

from __future__ import annotations

from pathlib import Path

from sds_core.errors import SdsInternalError
from sds_release.flows.release import run_stages
from sds_release.store.audit.comparison import DIFFERS, MATCH, Check, ReplayReport
from sds_release.store.audit.replay import RecordedRelease
from sds_release.store.config.core_objects import dp_binned_columns
from sds_release.store.executor.local import LocalExecutor
from sds_release.store.publish.artifacts import write_release
from sds_release.store.run import stages


def replay_release(home: str | Path, release_id: str, input_path: str | Path) -> ReplayReport:
    """Recompute release ``release_id`` of ``home`` from ``input_path``; compare everything.

    Nothing is charged and nothing of the release (ledger, checkpoints, artifacts) is written.

    Raises:
        SdsInputError: the release cannot be replayed (not found, not complete, no key, no
            ledger reservation) or ``input_path`` is not the input it recorded; raised before
            anything is recomputed.
    """
    recorded = RecordedRelease.load(home, release_id)
    checks: list[Check] = [recorded.check_input(input_path), *recorded.parameter_checks()]
    timeline = stages.Timeline()
    with recorded.replay_run(input_path) as run:
        params = run.params
        # --- the release's stages, in the flow's order (sds_release/flows/release.py)
        # -------------------
        with timeline.run(stages.BUDGET):  # nothing is reserved: the plan is only compared
            checks.append(recorded.plan_check(run))
        executor = LocalExecutor()  # where the release ran does not change its keyed result
        out = run_stages(
            run, timeline, executor, call=lambda task, wait_for=None, **kwargs: task.fn(**kwargs)
        )
        checks[0] = recorded.input_check(out.input_sha256, params.input)  # what the task read
        run, params = out.run, out.run.params  # as the SDS plan set them (R, split, synthesis)

        # --- publish into the throwaway directory: the recorded parameters and stage times ----
        recorded_stages = recorded.manifest.get("stages") or []
        with timeline.run(stages.PUBLISH):
            write_release(
                run,
                parameters=recorded.published_parameters(run),
                input_sha256=out.input_sha256,
                aggregates=out.aggregates,
                synthetic=out.synthetic,
                synthetic_chunks=executor.chunks(out.synthetic, params.synthetic_part_records),
                evaluation=out.evaluation,
                validation={"input": out.input_summary, "output": out.output_summary},
                stages=[s for s in recorded_stages if s.get("name") != stages.PUBLISH],
                noise=out.noise,
                plan=out.plan,
            )

        names = [s["name"] for s in timeline.done]
        expected = stages.release_stages(
            params.length,
            aggregate_seeded=params.aggregate_seeded,
            dp_binning=bool(dp_binned_columns(params)),
        )
        if tuple(names) != expected:
            raise SdsInternalError(f"the replay ran {names}, the stage registry says {expected}")
        recorded_names = [s.get("name") for s in recorded_stages]
        checks.append(
            Check("stages", "names and order", MATCH, " → ".join(names))
            if recorded_names == names
            else Check("stages", "names and order", DIFFERS, f"the release ran {recorded_names}")
        )
        checks.append(recorded.charge_check(run))
        checks += recorded.stage_checks(run, names)
        checks += recorded.artifact_checks(run)
    order = {name: i for i, name in enumerate(("parameters", "stages", *expected))}
    checks.sort(key=lambda c: order.get(c.stage, len(order)))  # stable: keeps order in a stage
    return ReplayReport(
        release_id=recorded.release_id,
        dataset=recorded.dataset,
        input=str(input_path),
        checks=tuple(checks),
        seconds={s["name"]: s["duration_s"] for s in timeline.done},
    )
