"""Benchmark: the synthesize stage of a finished release (plan ``model``), alone, for the
driver's memory.

Reads what the ``synthesize`` task reads from a finished release's private workspace: its
parameters (``params.json``, then the ``plan`` checkpoint's planned values and the plan after
aggregation, :func:`sds_release.store.config.planned.after_aggregation`), the DP aggregates (the
``normalize`` checkpoint), the published noise (Δ_k and ρ_k of the ``aggregate-k`` checkpoints,
:func:`sds_release.store.run.release_run.noise_scales`) and the release key. Then runs what
``sds_release/tasks/synthesis.py`` runs locally for ``synthesis = "model"``:
``synthesize_from_model``, then the checkpoint's bytes (``write_canonical_pickle``, what
``save_checkpoint`` streams to the file; here to ``/dev/null``). ``--dask``: the Dask path instead
(the model, or ``reconcile_one_way``, on one worker of an embedded LocalCluster, the chunks
checkpointed). Prints each part's wall time and the driver's resident set before and at its peak
(``VmRSS`` sampled every 20 ms), and with ``--dask`` what it still holds once the stage has
returned with the chunks' futures alive (as through a release's evaluate and publish); with
``--check``, whether the records' sha256 is the one the release recorded for its ``synthesize``
stage (a Dask release: each chunk file's; the same records, byte for byte). ``--problem``: the
consistent model's problem built here alone, and what it weighs pickled against the
aggregates. Run it under ``memray run`` for the allocations behind the peak.

    PYTHONPATH=. .venv/bin/python bench/bench_synthesize_memory.py \
        --private HOME/private/RELEASE_ID --check
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_evaluate_memory import _Sampler, _status_kib  # the same RSS sampler


def _load(path: Path) -> Any:
    with path.open("rb") as f:
        return pickle.load(f)


def _inputs(private: Path) -> tuple[Any, Any, Any, Any, str]:
    """The release's parameters and plan after aggregation, aggregates, noise and rng label."""
    from sds_core.dp.randomness import ReleaseRandomness
    from sds_core.marginals.plan import SdsPlan
    from sds_core.synthesis.consistent import AggregateNoise
    from sds_release.store.config.planned import after_aggregation
    from sds_release.store.config.release_params import ReleaseParams
    from sds_release.store.run.release_run import noise_scales
    from sds_release.store.run.results import LengthResult

    stored = json.loads((private / "params.json").read_text())
    if stored.get("config") is not None:
        raise SystemExit("a release without a config only (its multi-value columns: none)")
    release_id = stored["release_id"]
    checkpoints = private / "checkpoints"
    done = _load(checkpoints / "plan.pkl")
    fields = {k: v for k, v in stored.items() if k not in ("seed", "ledger")}
    params = ReleaseParams.model_validate(fields | done["planned"])
    aggregates = _load(checkpoints / "normalize.pkl")
    stored_plan = None if done["plan"] is None else SdsPlan.from_dict(done["plan"])
    params, plan = after_aggregation(params, stored_plan, aggregates)
    if params.synthesis != "model" and not params.reconcile_one_way:
        raise SystemExit(
            f"the release's plan synthesizes {params.synthesis!r} without reconcile_one_way "
            "(its records are made on the workers already)"
        )
    by_length = {}
    for k in range(1, params.length + 1):  # aggregate-3's checkpoint is ~100 MB: read, dropped
        step = _load(checkpoints / f"aggregate-{k}.pkl")
        by_length[k] = LengthResult.from_checkpoint(step).noise
        del step
    noise = AggregateNoise.from_description(noise_scales(params, by_length))
    rng = ReleaseRandomness((private / "release.key").read_bytes()).generator(
        f"{release_id}/synthesis"
    )
    return params, plan, aggregates, noise, rng


def _model_params_of(params: Any, plan: Any) -> Any:
    """The stage's ``ModelParams`` (``sds_release.tasks.synthesis._model_params``, which reads only
    the run's parameters)."""
    from sds_release.tasks.synthesis import _model_params

    class _Run:  # what _model_params reads of a ReleaseRun
        pass

    run: Any = _Run()
    run.params = params
    return _model_params(run, plan)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--private", type=Path, required=True, help="the release's private workspace")
    ap.add_argument("--check", action="store_true", help="compare with the synthesize checkpoint")
    ap.add_argument(
        "--dask",
        action="store_true",
        help="the Dask path on an embedded LocalCluster (2 worker processes x 1 thread)",
    )
    ap.add_argument(
        "--problem",
        action="store_true",
        help="the consistent model's problem (model_problem) built here alone: its time, the "
        "driver's peak and what it and the aggregates weigh pickled",
    )
    args = ap.parse_args()
    if args.problem:
        _main_problem(args)
        return
    if args.dask:
        _main_dask(args)
        return

    from sds_core.synthesis.consistent import synthesize_from_model
    from sds_release.store.run.workdir import write_canonical_pickle

    params, plan, aggregates, noise, rng = _inputs(args.private)
    model_params = _model_params_of(params, plan)
    gc.collect()
    before = _status_kib()["VmRSS"]
    start = time.perf_counter()
    with _Sampler() as model:
        synthetic = synthesize_from_model(
            aggregates,
            noise,
            params.synthetic_records,
            rng=rng,
            params=model_params,
            multi_value_columns=(),
        )
    model_s = time.perf_counter() - start
    held = _status_kib()["VmRSS"]
    start = time.perf_counter()
    with _Sampler() as pickled:
        with open(os.devnull, "wb") as f:
            digest = write_canonical_pickle(synthetic, f)
    pickle_s = time.perf_counter() - start
    out: dict[str, Any] = {
        "model_s": round(model_s, 1),
        "checkpoint_bytes_s": round(pickle_s, 1),
        "driver_before_mib": round(before / 1024),
        "model_peak_mib": round(model.peak_kib / 1024),
        "records_held_mib": round(held / 1024),
        "checkpoint_bytes_peak_mib": round(pickled.peak_kib / 1024),
        "driver_added_mib": round((max(model.peak_kib, pickled.peak_kib) - before) / 1024),
        "synthetic_records": synthetic.n_records,
        "dp_combinations": sum(
            len(aggregates.counts_of(k)) for k in range(1, aggregates.reporting_length + 1)
        ),
        "model": {
            "structure": model_params.structure,
            "iterations": model_params.iterations,
            "max_model_cells": model_params.max_model_cells,
        },
    }
    if args.check:
        state = json.loads((args.private / "state.json").read_text())
        out["equal_to_checkpoint"] = state["stages"]["synthesize"]["sha256"] == digest
    print(json.dumps(out, indent=1))


def _main_problem(args: argparse.Namespace) -> None:
    """``model_problem`` on this process (what the Dask path's driver builds before it submits
    the fit and the sampling): its wall time, the driver's peak while building it and what it
    holds after, and the pickled bytes of the problem against those of the aggregates."""
    from sds_core.synthesis.consistent import model_problem
    from sds_release.store.run.memory import return_free_memory

    params, plan, aggregates, noise, _ = _inputs(args.private)
    model_params = _model_params_of(params, plan)
    gc.collect()
    return_free_memory()
    before = _status_kib()["VmRSS"]
    start = time.perf_counter()
    with _Sampler() as built:
        problem = model_problem(aggregates, noise, model_params)
    seconds = time.perf_counter() - start
    gc.collect()
    return_free_memory()
    held = _status_kib()["VmRSS"]
    sizes = {
        "aggregates": len(pickle.dumps(aggregates, protocol=pickle.HIGHEST_PROTOCOL)),
        "problem": len(pickle.dumps(problem, protocol=pickle.HIGHEST_PROTOCOL)),
        "domain": len(pickle.dumps(aggregates.domain, protocol=pickle.HIGHEST_PROTOCOL)),
    }
    out = {
        "problem_s": round(seconds, 1),
        "driver_before_mib": round(before / 1024),
        "problem_peak_mib": round(built.peak_kib / 1024),
        "problem_added_mib": round((built.peak_kib - before) / 1024),
        "problem_held_added_mib": round((held - before) / 1024),
        "pickled_mib": {k: round(v / 2**20, 2) for k, v in sizes.items()},
        "model_cells": problem.tree.cells,
        "measurements": len(problem.measurements),
        "measured_cells": sum(len(m.values) for m in problem.measurements),
        "dp_combinations": sum(
            len(aggregates.counts_of(k)) for k in range(1, aggregates.reporting_length + 1)
        ),
    }
    print(json.dumps(out, indent=1))


def _main_dask(args: argparse.Namespace) -> None:
    """The synthesize stage's Dask path (``sds_release.tasks.synthesis.stage_records`` on the Dask
    executor: the model sampled, or the records reconciled, on one worker, cut into chunks
    there), then its
    checkpoint (``StoredSynthetic.save``, one chunk here at a time, into a temporary folder
    removed after); the driver's peak RSS, the embedded scheduler's included."""
    import shutil
    import tempfile

    import numpy as np
    from distributed import Client, LocalCluster

    from sds_core.data.table import PreparedTable
    from sds_core.dp.randomness import ReleaseRandomness
    from sds_release.store.cluster.executor import DaskExecutor
    from sds_release.store.cluster.synthesis import StoredSynthetic
    from sds_release.store.run.memory import return_free_memory
    from sds_release.store.run.workdir import write_canonical_pickle
    from sds_release.tasks.synthesis import stage_records

    params, plan, aggregates, noise, _ = _inputs(args.private)
    key = (args.private / "release.key").read_bytes()

    class _Run:  # what stage_records reads of a ReleaseRun
        release_id = params.release_id

        @staticmethod
        def randomness() -> ReleaseRandomness:
            return ReleaseRandomness(key)

    run: Any = _Run()
    run.params = params
    gc.collect()
    folder = Path(tempfile.mkdtemp(prefix="bench-synthesize-"))
    try:
        with (
            LocalCluster(
                n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            return_free_memory()
            before = _status_kib()["VmRSS"]
            start = time.perf_counter()
            with _Sampler() as made:
                backend = stage_records(run, DaskExecutor(client), aggregates, (), noise, plan)
                stored = StoredSynthetic.save(backend, folder, "synthesize")
            seconds = time.perf_counter() - start
            # what the driver keeps once the stage has returned while the chunks' futures are
            # alive, as through a release's evaluate and publish (the embedded scheduler keeps
            # the arguments of the tasks the chunks may be recomputed from): the stage's end
            # (return_free_memory, as every stage) then a settled read
            gc.collect()
            return_free_memory()
            time.sleep(2.0)
            held_kib = _status_kib()["VmRSS"]
            workers = client.run(lambda: __import__("os").getpid())
            held = client.who_has(backend.parts)
            out: dict[str, Any] = {
                "path": "workers (records made on one worker, cut into chunks there)",
                "synthesis": params.synthesis,
                "reconcile_one_way": params.reconcile_one_way,
                "seconds": round(seconds, 1),
                "driver_before_mib": round(before / 1024),
                "driver_peak_mib": round(made.peak_kib / 1024),
                "driver_added_mib": round((made.peak_kib - before) / 1024),
                "driver_held_after_mib": round(held_kib / 1024),
                "driver_held_added_mib": round((held_kib - before) / 1024),
                "synthetic_records": backend.n_records,
                "chunks": len(backend.parts),
                "chunks_per_worker": {
                    str(pid): sum(w in held[p.key] for p in backend.parts)
                    for w, pid in workers.items()
                },
            }
            recorded = _load(args.private / "checkpoints" / "synthesize.pkl")
            if args.check and isinstance(recorded, StoredSynthetic):  # a Dask release's
                out["equal_to_checkpoint"] = (recorded.sha256, recorded.first_rows) == (
                    stored.sha256,
                    stored.first_rows,
                )
            elif args.check:  # the chunks written into one table: the release's checkpoint?
                whole = np.empty((backend.n_records, aggregates.domain.n_columns), np.int32)
                for part, lo in zip(backend.chunks(), backend.first_rows, strict=True):
                    whole[lo : lo + part.n_records] = part.codes
                table = PreparedTable(aggregates.domain, whole, ())
                with open(os.devnull, "wb") as f:
                    digest = write_canonical_pickle(table, f)
                state = json.loads((args.private / "state.json").read_text())
                out["equal_to_checkpoint"] = state["stages"]["synthesize"]["sha256"] == digest
            del backend
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
