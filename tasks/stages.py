"""The release stages as Prefect tasks: budget, validate, count, aggregate-k, finalize, synthesize.

Each task wraps one ``sds_core`` stage and adds only I/O. Tasks that touch the sensitive table
use ``persist_result=False`` and ``NO_CACHE`` and return only paths, hashes and DP values; the
table itself stays in this process (:data:`_TABLES`) and is reloaded on resume. Every noisy
stage charges the ledger first, then draws noise from the release key, then checkpoints its DP
output privately, so a resumed stage reproduces identical noise and is never charged twice.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from release_store import progress
from release_store.params import ReleaseParams, dp_params, prepare_params
from release_store.workdir import ReleaseDirs, atomic_write_json, now
from release_store.workspace import Manifest, new_release_id, resolve_home, sha256_file
from sds_core.data.table import PreparedTable
from sds_core.errors import SdsInputError

KILL_ENV = "SDS_TEST_KILL_AT"
"""Test-only hook: a stage name (e.g. ``aggregate-2``); that stage SIGKILLs its own process
after it was charged and drew its noise, before its checkpoint is written (resume tests)."""

_TABLES: dict[str, PreparedTable] = {}
"""Sensitive prepared tables of the releases running in this process (never persisted)."""

SENSITIVE = {"persist_result": False, "cache_policy": NO_CACHE}


@dataclass(frozen=True, slots=True)
class ReleaseContext:
    """Where a release lives and what it may spend (no data in here)."""

    home: str
    dataset: str
    release_id: str
    epsilon: float
    delta: float

    @property
    def dirs(self) -> ReleaseDirs:
        """The release's directories."""
        from pathlib import Path

        return ReleaseDirs(Path(self.home), self.dataset, self.release_id)


def _maybe_kill(stage: str) -> None:
    if os.environ.get(KILL_ENV) == stage:
        os.kill(os.getpid(), signal.SIGKILL)


def planned_charges(params: ReleaseParams) -> list[Any]:
    """The ledger plan of a release (StageSpend = PlannedCharge), computed without the data."""
    from sds_core.marginals.engine import plan_release

    if params.synthesizer != "aggregate-seeded":
        from tasks.registry_synth import registry_synthesizer

        return list(registry_synthesizer(params).budget(params.epsilon, params.resolved_delta()))
    return list(plan_release(dp_params(params), 1).stage_spends())  # δ explicit: count unused


# ---------------------------------------------------------------------------------------------
@task(name="budget", **SENSITIVE)
def reserve_budget(params: ReleaseParams, flow_run_id: str | None = None) -> ReleaseContext:
    """Reserve the whole release's (ε, δ) before any data is read; refuse if it does not fit."""
    progress.stage("reserving the privacy budget")
    from release_store.ledger import Ledger

    home = resolve_home(params.home)
    release_id = params.release_id or new_release_id(params.dataset)
    ctx = ReleaseContext(
        str(home), params.dataset, release_id, params.epsilon, params.resolved_delta()
    )
    dirs = ctx.dirs
    manifest = dirs.manifest()
    if manifest is not None and manifest.get("status") == "complete":
        raise SdsInputError(
            f"release id {release_id!r} already exists and is complete ({dirs.release_dir}); "
            "choose another --release-id or leave it out to get a new one"
        )
    ledger = Ledger.open(home)
    earlier = ledger.reservation(release_id)
    if earlier is not None and earlier.status != "open":
        raise SdsInputError(
            f"release id {release_id!r} was already used by a release that "
            f"{'failed or was cancelled' if earlier.status == 'cancelled' else 'completed'}; "
            "start a new release id (leave out --release-id to get a fresh one)"
        )
    saved = dirs.private_dir / "params.json"
    public = params.public_dict() | {"release_id": release_id}
    if saved.is_file():
        import json

        before = json.loads(saved.read_text())
        if {k: v for k, v in before.items() if k != "home"} != {
            k: v for k, v in public.items() if k != "home"
        }:
            raise SdsInputError(
                f"release {release_id!r} was started with other parameters; resume it with "
                f"`sds resume {release_id}` (same parameters) or start a new release id"
            )
    if ledger.budget(params.dataset) is None and params.default_budget is not None:
        ledger.set_budget(
            params.dataset, epsilon=params.default_budget.epsilon, delta=params.default_budget.delta
        )
    ledger.reserve(
        params.dataset,
        release_id,
        planned_charges(params),
        epsilon=ctx.epsilon,
        delta=ctx.delta,
        flow_run_id=flow_run_id,
    )
    dirs.paths.create(exist_ok=True)
    atomic_write_json(saved, public, private=True)
    if params.seed is not None:
        atomic_write_json(dirs.private_dir / "seed.json", {"seed": params.seed}, private=True)
    dirs.randomness(params.seed)
    if manifest is None:
        dirs.write_manifest(
            Manifest.new(release_id=release_id, dataset=params.dataset, parameters=public).data
        )
    get_run_logger().info("reserved ε=%s δ=%.3g for release %s", ctx.epsilon, ctx.delta, release_id)
    return ctx


@task(name="validate", **SENSITIVE)
def validate_input(ctx: ReleaseContext, params: ReleaseParams) -> dict[str, Any]:
    """Read the input, run the GX gate on it, prepare it; nothing is charged here."""
    progress.stage("validating the input (Great Expectations)")
    from release_store.ingest import read_table
    from release_store.validation import validate_table
    from sds_core.data.decoding import fingerprint
    from sds_core.data.preparation import prepare

    dirs = ctx.dirs
    table = read_table(params.input, delimiter=params.delimiter)
    summary: list[dict[str, Any]] = []
    if params.table_schema is not None:
        schema = params.table_schema
        if params.use_columns:
            table = table.select([c for c in table.column_names if c in params.use_columns])
            keep = [c for c in schema.columns if c.name in params.use_columns]
            schema = schema.model_copy(update={"columns": keep})
        summary = validate_table(table, schema, name="input", private_dir=dirs.private_dir)
    prepared = prepare(table, prepare_params(params))
    fp = fingerprint(prepared)
    input_sha = sha256_file(params.input)
    state = dirs.state()
    if state.get("fingerprint") not in (None, fp):
        raise SdsInputError(
            f"input of release {ctx.release_id!r} changed since the release started (its "
            "prepared-data fingerprint differs); resume with the original input file, or "
            f"cancel with `sds cancel {ctx.release_id}` and start a new release"
        )
    dirs.update_state(fingerprint=fp, input_sha256=input_sha)
    _TABLES[ctx.release_id] = prepared
    return {"input_sha256": input_sha, "validation": summary}


def _table(ctx: ReleaseContext) -> PreparedTable:
    table = _TABLES.get(ctx.release_id)
    if table is None:
        raise SdsInputError("the validate stage must run before the data stages (bug or misuse)")
    return table


def _charge(ctx: ReleaseContext, stage: str, flow_run_id: str | None) -> None:
    from release_store.ledger import Ledger

    Ledger.open(ctx.home).charge(ctx.release_id, stage, flow_run_id=flow_run_id)


@task(name="count", **SENSITIVE)
def count_records(
    ctx: ReleaseContext, params: ReleaseParams, flow_run_id: str | None = None
) -> int:
    """The DP (Laplace) record count: charged, then drawn; returns only the protected count."""
    progress.stage("count (DP record count)")
    from sds_core.marginals.engine import protect_record_count

    dirs = ctx.dirs
    done = dirs.load_checkpoint("count")
    if done is not None:
        return int(done)
    _charge(ctx, "count", flow_run_id)
    step = protect_record_count(
        _table(ctx), dp_params(params), dirs.randomness(params.seed), release_label=ctx.release_id
    )
    _maybe_kill("count")
    n = int(step.protected_number_of_records)
    dirs.save_checkpoint("count", n)
    return n


@task(name="aggregate", task_run_name="aggregate-{k}", **SENSITIVE)
def aggregate_length(
    ctx: ReleaseContext,
    params: ReleaseParams,
    k: int,
    protected_n: int,
    flow_run_id: str | None = None,
) -> dict[str, Any]:
    """DP counts of the length-k combinations: charged, drawn, survivors checkpointed privately."""
    progress.stage(f"aggregate-{k} (DP combinations of length {k})")
    progress.advance(k - 1, params.reporting_length)
    import importlib

    dp_aggregate = importlib.import_module("sds_core.marginals.engine")  # the module

    dirs = ctx.dirs
    stage = f"aggregate-{k}"
    done = dirs.load_checkpoint(stage)
    if done is None:
        previous = {j: dirs.load_checkpoint(f"aggregate-{j}")["survivors"] for j in range(1, k)}
        released = dirs.load_checkpoint("aggregate-1").get("domain") if k > 1 else None
        dp = dp_params(params)
        plan = dp_aggregate.plan_release(dp, protected_n)
        _charge(ctx, stage, flow_run_id)
        step = dp_aggregate.aggregate_length(
            _table(ctx),
            k,
            previous,
            plan,
            dp,
            dirs.randomness(params.seed),
            release_label=ctx.release_id,
            domain=released,
        )
        _maybe_kill(stage)
        done = {
            "survivors": step.survivors,
            "allowed_sensitivity": step.allowed_sensitivity,
            "threshold": step.threshold,
            "domain": step.domain,
            "private_notes": dict(step.private_notes),
        }
        dirs.save_checkpoint(stage, done)
    progress.advance(k, params.reporting_length)
    return {
        "length": k,
        "survivors": len(done["survivors"]),
        "allowed_sensitivity": int(done["allowed_sensitivity"]),
    }


@task(name="normalize", **SENSITIVE)
def finalize_aggregates(ctx: ReleaseContext, params: ReleaseParams, protected_n: int) -> Any:
    """Round, add missing parents, normalize: the published DP AggregateSet."""
    progress.stage("normalize")
    import importlib

    dp_aggregate = importlib.import_module("sds_core.marginals.engine")  # the module

    dirs = ctx.dirs
    done = dirs.load_checkpoint("normalize")
    if done is None:
        by_len = {
            k: dirs.load_checkpoint(f"aggregate-{k}")["survivors"]
            for k in range(1, params.reporting_length + 1)
        }
        released = dirs.load_checkpoint("aggregate-1").get("domain")
        done = dp_aggregate.finalize(
            by_len,
            domain=released or _table(ctx).domain,
            reporting_length=params.reporting_length,
            protected_number_of_records=protected_n,
        )
        dirs.save_checkpoint("normalize", done)
    return done


@task(name="synthesize", **SENSITIVE)
def synthesize_records(ctx: ReleaseContext, params: ReleaseParams, aggregates: Any) -> Any:
    """Aggregate-seeded synthesis from the DP aggregates only (post-processing, no spend)."""
    progress.stage("synthesize (synthetic records)")
    from sds_core.synthesis.generator import SynthesisParams, default_target, synthesize

    dirs = ctx.dirs
    done = dirs.load_checkpoint("synthesize")
    if done is None:
        rng = dirs.randomness(params.seed).generator(f"{ctx.release_id}/synthesis")
        done = synthesize(
            aggregates,
            SynthesisParams(target_number_of_records=default_target(aggregates)),
            rng=rng,
            multi_value_columns=_table(ctx).multi_value_columns,
            progress=progress.advance,
        )
        _maybe_kill("synthesize")
        dirs.save_checkpoint("synthesize", done)
    return done


@task(name="evaluate", **SENSITIVE)
def evaluate_release(
    ctx: ReleaseContext, params: ReleaseParams, aggregates: Any, synthetic: PreparedTable
) -> dict[str, Any]:
    """Utility metrics (computed from the sensitive data; no raw count is returned)."""
    progress.stage("evaluate")
    from sds_core.evaluation import metrics as core

    dirs = ctx.dirs
    done = dirs.load_checkpoint("evaluate")
    if done is None and not hasattr(core, "evaluate_release"):
        done = {"status": "not available in this version"}
    if done is None:
        done = core.evaluate_release(
            _table(ctx),
            synthetic,
            aggregates,
            core.EvaluationParams(
                reporting_length=params.reporting_length, resolution=params.resolution
            ),
        )
        dirs.save_checkpoint("evaluate", done)
    return done


def forget_table(ctx: ReleaseContext) -> None:
    """Drop the sensitive table of a finished (or failed) release from this process."""
    _TABLES.pop(ctx.release_id, None)


def mark_failed(ctx: ReleaseContext, error: BaseException, stages_done: list[dict]) -> None:
    """Record a failure: manifest ``failed`` (redacted reason), full reason privately.

    When no stage drew noise the reservation is cancelled (the whole budget goes back);
    otherwise it stays open so ``sds resume`` can finish the release without new spend.
    """
    from release_store.ledger import Ledger
    from release_store.workspace import discard_incomplete

    dirs = ctx.dirs
    ledger = Ledger.open(ctx.home)
    charged = ledger.charges(release_id=ctx.release_id)
    atomic_write_json(
        dirs.private_dir / "failure.json",
        {"at": now(), "type": type(error).__name__, "message": str(error)},
        private=True,
    )
    if not charged:
        ledger.cancel(ctx.release_id)
    manifest = dirs.manifest() or {
        "release_id": ctx.release_id,
        "dataset": ctx.dataset,
        "status": "failed",
    }
    manifest.update({"stages": stages_done, "resumable": bool(charged)})
    dirs.write_manifest(manifest)
    discard_incomplete(
        dirs.release_dir, reason=f"{type(error).__name__} (details in the private workspace)"
    )
