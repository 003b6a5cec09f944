"""Benchmark: the consistent model's fit (``fit_model``) alone, as the planned default runs it.

For each PUMS set and seed of ``bench_plan.py``: the planned default's aggregates (record count,
plan, lengths 1..R), then the model the plan would fit (its tree, measurements, warm start,
iterations and cells, whether or not the plan then picks records), and only ``fit_model`` is
timed, ``--repeat`` times (median). Prints the seconds, the iterations run, the final loss and
a fingerprint of the fitted marginals, so two commits can be compared on the same problem:
the same loss and fingerprint mean the same fit.

    .venv/bin/python bench/bench_fit.py --sets 10k-raw-4 10k-binned-10 100k-raw-4 1m-raw-4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_plan import DELTA, aggregate_after_count, data_set, load, release_noise

from sds_core.dp.randomness import ReleaseRandomness
from sds_core.marginals.engine import protect_record_count
from sds_core.marginals.params import DpParams
from sds_core.marginals.plan import plan_sds
from sds_core.model.estimation import fit_model
from sds_core.synthesis.consistent import ModelParams, model_problem


def problem(name: str, seed: int) -> tuple[Any, ...]:
    """The planned model's (tree, measurements, total, start, iterations) on one set and seed."""
    ds = data_set(name, seed)
    base = DpParams(epsilon=ds.epsilon, delta=DELTA)
    count = protect_record_count(
        ds.original, base, ReleaseRandomness.from_seed(seed), release_label="release"
    )
    plan = plan_sds(
        count.protected_number_of_records,
        epsilon=ds.epsilon,
        delta=DELTA,
        n_columns=ds.original.domain.n_columns,
    )
    release = aggregate_after_count(ds.original, plan.dp_params(base), seed, count)
    params = ModelParams(
        iterations=plan.model_iterations,
        structure=plan.model_structure,
        max_model_cells=plan.max_model_cells,
    )
    fit = model_problem(release.aggregates, release_noise(release), params)
    return fit.tree, fit.measurements, fit.total, fit.start, plan.model_iterations


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", nargs="+", default=["10k-raw-4", "10k-binned-10", "100k-raw-4"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument(
        "--iterations", type=int, help="instead of the plan's (same problem on two commits)"
    )
    args = ap.parse_args()
    print(
        "| set | cells | measurements | iterations | fit s (median) | loss | fingerprint | load |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in args.sets:
        tree, ms, total, start, iterations = problem(name, args.seed)
        iterations = args.iterations or iterations
        load_before = load()
        seconds = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            model = fit_model(tree, ms, total, iterations=iterations, start=start)
            seconds.append(time.perf_counter() - t0)
        flat = np.concatenate([m.ravel() for m in model.marginals])
        fingerprint = float(np.dot(flat, np.cos(np.arange(flat.size))))
        print(
            f"| {name} | {tree.cells:,} | {len(ms)} | {model.iterations} | "
            f"{statistics.median(seconds):.2f} | {model.loss:.4f} | {fingerprint:.6f} | "
            f"{load_before}-{load()} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
