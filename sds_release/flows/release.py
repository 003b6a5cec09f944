"""The ``release`` flow: one DP data release, stage by stage, as Prefect tasks.

budget -> ingest [privacy_risk: control rows held back] -> validate (GX gate, nothing charged)
-> [binning: DP quantile bin edges] -> prepare -> count -> plan (R, split and synthesis from the
DP count) -> aggregate k=1..R -> normalize -> synthesize (a registry synthesizer instead: fit)
-> validate-output -> evaluate [privacy_risk: anonymeter's attacks] -> publish [publish_to: the
signed release copied to a bucket]. Each task
receives what it reads and returns what the next one needs; the sensitive table is a handle that
only this flow run holds. Re-running with the same release id resumes:
finished stages load their hash-checked checkpoints and nothing is charged twice.

Every stage logs only DP or public facts to the run (the Prefect UI's Logs tab): what the data
holds beyond its DP outputs (the "0" cells, stage times) goes to the custodian's terminal and the
private custodian report, never to the log. The run's graph is the
stage chain: the ``ReleaseRun`` is passed quoted (context, not data), and the gates are linked
with ``wait_for``. After the run, finished or failed, the dataset's budget goes to the table
artifact ``budget-<dataset>`` (sds_release/tasks/artifacts.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger, runtime
from prefect.utilities.annotations import quote

from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.plan import SdsPlan
from sds_core.synthesis.consistent import AggregateNoise
from sds_release.flows.origin import run_origin
from sds_release.flows.refusals import refusals
from sds_release.flows.slots import run_slot
from sds_release.store.audit.journal import RunOrigin, note_refused, note_start
from sds_release.store.cluster.executor import DaskExecutor
from sds_release.store.config.core_objects import dp_binned_columns
from sds_release.store.config.periods import RELATIVE_PERIODS, period_of_run
from sds_release.store.config.planned import after_aggregation
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.executor.base import Executor
from sds_release.store.executor.local import LocalExecutor
from sds_release.store.ledger.budget_view import dataset_key
from sds_release.store.ledger.values import BUDGET_REFUSALS
from sds_release.store.run import progress, stages, timing
from sds_release.store.run.release_run import ReleaseRun, noise_scales
from sds_release.store.run.results import LengthNoise, LengthResult
from sds_release.tasks.artifacts import show_budget
from sds_release.tasks.bucket import copy_to_bucket
from sds_release.tasks.budget import reserve_budget
from sds_release.tasks.evaluation import evaluate
from sds_release.tasks.ingest import read_input
from sds_release.tasks.marginals import (
    aggregate_length,
    count_records,
    normalize_aggregates,
    plan_aggregation,
)
from sds_release.tasks.preparation import choose_bins, prepare_table
from sds_release.tasks.progress_artifacts import ProgressArtifacts
from sds_release.tasks.publish import publish_release
from sds_release.tasks.synthesis import fit_synthesizer, synthesize_records
from sds_release.tasks.validation import validate_input, validate_output


def _run_name() -> str:
    params = runtime.flow_run.parameters.get("params") or {}
    if not isinstance(params, dict):
        params = params.model_dump()
    return f"release-{params.get('release_id') or params.get('dataset', 'new')}"


EXECUTORS: dict[str, Callable[[ReleaseParams], AbstractContextManager[Executor[Any, Any]]]] = {
    LocalExecutor.name: LocalExecutor.session,
    DaskExecutor.name: DaskExecutor.session,
}
"""The executors by ``executor`` parameter (``ReleaseParams.executor``): each opens its session
for one release (the Dask one connects, and a bad address is refused before any charge)."""


@dataclass(frozen=True)
class StageOutputs:
    """What the data stages hand to publish: DP outputs, summaries and the evaluation, and the
    run as the SDS plan set it (its parameters are the ones the release ran with)."""

    run: ReleaseRun
    plan: SdsPlan | None
    input_sha256: str
    input_summary: list[dict[str, Any]]
    output_summary: list[dict[str, Any]]
    aggregates: AggregateSet
    synthetic: Any  # the records where the executor holds them (Dask: chunks on the workers)
    evaluation: dict[str, Any]
    noise: dict[str, Any]


def _call(task: Any, *, wait_for: list[Any] | None = None, **kwargs: Any) -> Any:
    """Run a stage as a Prefect task (a task run in the flow's graph).

    The ``ReleaseRun`` and the executor are every stage's context, not its data: they are
    quoted so the graph has no budget -> every-stage edges (and Prefect never walks into the
    executor's client); ``wait_for`` draws the edge of a gate to the stage after it.
    """
    for context in ("run", "executor"):
        if context in kwargs:
            kwargs[context] = quote(kwargs[context])
    return task(**kwargs, wait_for=wait_for) if wait_for else task(**kwargs)


def run_stages(
    run: ReleaseRun,
    timeline: stages.Timeline,
    executor: Executor[Any, Any],
    call: Callable[..., Any] = _call,
    log: logging.Logger | logging.LoggerAdapter[Any] | None = None,
) -> StageOutputs:
    """The stages between the budget and publish, in the registry's order, their data work on
    ``executor``.

    The one place the stage sequence is written: the flow runs each stage as a Prefect task
    (``call`` = the task), the replay audit (sds_release/flows/replay.py) as the task's body
    (``task.fn``).
    """
    params = run.params
    # --- ingest, validate (GX gate; nothing charged yet), [DP bins], prepare --------------------
    with timeline.run(stages.INGEST):
        raw, input_sha256 = call(read_input, run=run, executor=executor, wait_for=[run])
    with timeline.run(stages.VALIDATE):
        input_summary = call(validate_input, run=run, table=raw, executor=executor)
    dp_edges = None
    if dp_binned_columns(params):  # --- DP quantile bins: charged, drawn, checkpointed --------
        with timeline.run(stages.BINNING):
            dp_edges = call(choose_bins, run=run, table=raw, executor=executor)
    with timeline.run(stages.PREPARE):
        table = call(
            prepare_table,
            run=run,
            table=raw,
            input_sha256=input_sha256,
            executor=executor,
            dp_edges=dp_edges,
            wait_for=[input_summary],
        )
    del raw

    noise_by_length: dict[int, LengthNoise] = {}  # a registry synthesizer has no SDS lengths
    plan: SdsPlan | None = None
    if params.aggregate_seeded:
        by_length: dict[int, LengthResult] = {}
        # --- count, aggregate k = 1..R: each charged, then drawn -------------------------------
        with timeline.run(stages.COUNT):
            protected_n = call(count_records, run=run, table=table, executor=executor)
        # --- plan: R, the split and the synthesis from the DP count (post-processing) ----------
        with timeline.run(stages.PLAN):
            planned = call(plan_aggregation, run=run, table=table, protected_n=protected_n)
        run = run.with_params(planned.params)
        params, plan = run.params, planned.plan
        for k in range(1, params.length + 1):
            with timeline.run(stages.aggregate_stage(k)):
                by_length[k] = call(
                    aggregate_length,
                    run=run,
                    table=table,
                    executor=executor,
                    k=k,
                    protected_n=protected_n,
                    shorter=by_length,
                )
            if log is not None:
                log.info("aggregate-%d: %d DP combinations survive", k, len(by_length[k].survivors))

        # --- normalize, synthesize: post-processing of the DP aggregates, no spend -------------
        with timeline.run(stages.NORMALIZE):
            aggregates = call(
                normalize_aggregates,
                run=run,
                table=table,
                by_length=by_length,
                protected_n=protected_n,
            )
        # the survivors are in the aggregates now: privacy.noise reads only Δ_k and the
        # thresholds (the longest length's survivors are ~100 MB at raw 2M, held to the end)
        noise_by_length = {k: step.noise for k, step in by_length.items()}
        del by_length
        # the plan once the aggregates are known: records, or the model above length 2
        params, plan = after_aggregation(params, plan, aggregates)
        run = run.with_params(params)
        # the manifest's privacy.noise: what the consistent model (synthesis = "model") reads
        noise = noise_scales(params, noise_by_length)
        with timeline.run(stages.SYNTHESIZE):
            synthetic = call(
                synthesize_records,
                run=run,
                aggregates=aggregates,
                table=table,
                noise=AggregateNoise.from_description(noise),
                executor=executor,
                plan=plan,
            )
    else:
        # --- fit a registry synthesizer: all its charges, then its draws -----------------------
        with timeline.run(stages.FIT):
            synthetic, aggregates = call(fit_synthesizer, run=run, table=table, executor=executor)
        noise = noise_scales(params, noise_by_length)  # the registry's note

    # --- validate output, evaluate --------------------------------------------------------------
    with timeline.run(stages.VALIDATE_OUTPUT):
        output_summary = call(
            validate_output, run=run, synthetic=synthetic, aggregates=aggregates, executor=executor
        )
    with timeline.run(stages.EVALUATE):
        evaluation = call(
            evaluate,
            run=run,
            table=table,
            aggregates=aggregates,
            synthetic=synthetic,
            executor=executor,
            dp_edges=dp_edges,  # privacy_risk: the control rows are binned as the table was
            wait_for=[output_summary],
        )
    return StageOutputs(
        run,
        plan,
        input_sha256,
        input_summary,
        output_summary,
        aggregates,
        synthetic,
        evaluation,
        noise,
    )


@flow(name="sds-release", flow_run_name=_run_name, persist_result=False, validate_parameters=True)
def release(params: ReleaseParams) -> str:
    """Run one DP release of ``params.input``; returns the release directory."""
    timing.mark("flow:body-start", flow_run_id=str(runtime.flow_run.id or ""))
    log = get_run_logger()
    timeline = stages.Timeline(on_done=lambda s: _log_finished(log, s))
    # Prefect progress artifacts for the long stages, next to the CLI's display
    with (
        progress.also_reporting(ProgressArtifacts(dataset_key(params.dataset or "dataset"))),
        # the executor, resolved once: the Dask one connects first, before anything is charged
        EXECUTORS[params.executor](params) as executor,
    ):
        origin = run_origin()  # the run journal: who started it (CLI, schedule, UI run)
        # a relative period (previous-month): a deployment's run takes it from its schedule slot
        with refusals(lambda e: _refused(log, params, origin, e)):
            made = run_slot() if params.period in RELATIVE_PERIODS else None
            params = period_of_run(params, made, datetime.now(UTC))
        # --- budget: reserve (ε, δ) before the data is read -------------------------------------
        with timeline.run(stages.BUDGET):
            try:
                run = reserve_budget(
                    params=params, flow_run_id=str(runtime.flow_run.id or "") or None
                )
            except BUDGET_REFUSALS as e:
                note_refused(params, origin, e)
                raise
        note_start(run.home, run.release_id, run.dataset, params.period, origin)
        try:
            # --- ingest, validate, prepare, count, aggregate-k, normalize, synthesize, evaluate -
            out = run_stages(run, timeline, executor, log=log)

            # --- publish (the manifest turns complete, anchored to the ledger head) -------------
            with timeline.run(stages.PUBLISH):  # the manifest gets the stages before this one
                released = _call(
                    publish_release,
                    run=out.run,
                    executor=executor,
                    input_sha256=out.input_sha256,
                    aggregates=out.aggregates,
                    synthetic=out.synthetic,
                    evaluation=out.evaluation,
                    validation={"input": out.input_summary, "output": out.output_summary},
                    stages_done=list(timeline.done),
                    noise=out.noise,
                    plan=out.plan,
                )
        except BaseException as e:
            told = run.mark_failed(e, timeline.done)  # a full disk: free space, `sds resume`
            _show_budget(run, log)
            if told is e:
                raise
            raise told from e
    with timing.span("flow:show-budget"):
        _show_budget(run, log)
    if params.publish_to:  # --- copy the signed release to a bucket (charges nothing) -----------
        _call(copy_to_bucket, run=out.run, release_dir=str(released))
    timing.mark("flow:body-end")
    return str(released)


def _log_finished(log: Any, record: dict[str, Any]) -> None:
    """One line per finished stage; its time only where the stage's time is public (the
    registry's ``public_timing``: most stages take a time that follows the data)."""
    if stages.spec(record["name"]).public_timing:
        log.info("%s finished in %.3f s", record["name"], record["duration_s"])
    else:
        log.info("%s finished", record["name"])


def _refused(log: Any, params: ReleaseParams, origin: RunOrigin, error: Exception) -> None:
    """A refusal in the run's log and the run journal (the audit page lists it)."""
    log.error("refused before anything was read or charged: %s", error)
    note_refused(params, origin, error)


def _show_budget(run: ReleaseRun, log: Any) -> None:
    """The budget dashboard after the run; its own failure is logged, never masks the run's."""
    try:
        show_budget(run.home, run.dataset, ledger_url=run.params.ledger, logger=log)
    except Exception as e:  # the release itself is already complete or failed on its own
        log.warning("could not update the budget artifact: %s: %s", type(e).__name__, e)


if __name__ == "__main__":
    import sys

    from sds_release.store.config import build_params, load_config

    cfg = load_config(sys.argv[2]) if len(sys.argv) > 2 else {}
    print(release(build_params(cfg, {"input": sys.argv[1]})))
