"""Benchmark: one aggregate-k stage of a finished Dask release, alone, for the driver's memory.

Reads a finished release's checkpoints (``count``, ``plan``, ``aggregate-1`` to ``aggregate-k-1``),
its stored parameters and release key from its private workspace, prepares the release's Parquet
input on an embedded ``LocalCluster`` (2 workers x 1 thread, as ``--executor dask``) and runs what
the ``aggregate-k`` task runs (``sds_release/tasks/marginals.py``: ``engine.aggregate_length`` on
the cluster's counting backend, drawing from the release key). Prints the stage's wall time, the
driver's resident set before and at its peak (sampled every 20 ms) and, with ``--check``,
whether the result (survivors, noisy counts, Δ_k, threshold, domain, private notes) equals the
release's own ``aggregate-k`` checkpoint. Run it under ``memray run`` for the allocations behind
the peak.

    PYTHONPATH=. .venv/bin/python bench/bench_aggregate_memory.py \
        --private HOME/private/RELEASE_ID --data /tmp/i28s/r2m --k 3 --check
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_evaluate_memory import _Sampler, _status_kib


def _params(private: Path, plan: dict[str, Any]) -> Any:
    """The release's parameters as the aggregate tasks see them: stored, then planned."""
    from sds_release.store.config.release_params import ReleaseParams

    stored = json.loads((private / "params.json").read_text())
    stored["seed"] = None  # withheld in params.json; the key is read from release.key
    return ReleaseParams.model_validate(stored | plan["planned"])


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two aggregate-k results equal field by field (arrays by value and dtype)."""
    import numpy as np

    if a.keys() != b.keys():
        return False
    sa, sb = a["survivors"], b["survivors"]
    return (
        sa.attrs.dtype == sb.attrs.dtype
        and sa.counts.dtype == sb.counts.dtype
        and np.array_equal(sa.attrs, sb.attrs)
        and np.array_equal(sa.counts, sb.counts)
        and all(a[f] == b[f] for f in a if f != "survivors")
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--private", type=Path, required=True, help="the release's private workspace")
    ap.add_argument("--data", required=True, help="the release's Parquet input")
    ap.add_argument("--k", type=int, default=3, help="the length to run (default 3)")
    ap.add_argument("--check", action="store_true", help="compare with the aggregate-k checkpoint")
    args = ap.parse_args()

    import distributed

    from sds_core.data.params import PrepareParams
    from sds_core.dp.randomness import ReleaseRandomness
    from sds_core.marginals import engine
    from sds_release.store.cluster.backend import DaskBackend
    from sds_release.store.cluster.inputs import open_input
    from sds_release.store.cluster.preparation import prepare_parts
    from sds_release.store.config.core_objects import dp_params

    checkpoints = args.private / "checkpoints"

    def load(name: str) -> Any:
        with (checkpoints / f"{name}.pkl").open("rb") as f:
            return pickle.load(f)

    protected_n = int(load("count"))
    params = _params(args.private, load("plan"))
    shorter = {j: load(f"aggregate-{j}") for j in range(1, args.k)}
    rnd = ReleaseRandomness((args.private / "release.key").read_bytes())
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        data = DaskBackend(
            prepare_parts(open_input(client, args.data, delimiter=",")[0], PrepareParams())
        )
        before = _status_kib()["VmRSS"]
        start = time.perf_counter()
        with _Sampler() as sampler:
            dp = dp_params(params)
            step = engine.aggregate_length(
                data,
                args.k,
                {j: shorter[j]["survivors"] for j in range(1, args.k)},
                engine.plan_release(dp, protected_n),
                dp,
                rnd,
                release_label=str(params.release_id),
                domain=shorter[1].get("domain") if args.k > 1 else None,
            )
        seconds = time.perf_counter() - start
    result = {
        "survivors": step.survivors,
        "allowed_sensitivity": step.allowed_sensitivity,
        "threshold": step.threshold,
        "domain": step.domain,
        "private_notes": dict(step.private_notes),
    }
    out: dict[str, Any] = {
        "k": args.k,
        "aggregate_s": round(seconds, 1),
        "driver_before_mib": round(before / 1024),
        "driver_peak_mib": round(sampler.peak_kib / 1024),
        "driver_added_mib": round((sampler.peak_kib - before) / 1024),
        "candidates": step.n_candidates,
        "survivors": len(step.survivors),
    }
    if args.check:
        out["equal_to_checkpoint"] = _same(load(f"aggregate-{args.k}"), result)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
