"""Benchmark: SDS records vs the consistent model (synthesis = "model") vs mst/aim vs independent.

Same data, same ε, same run: for each data set and ε, our DP aggregates (R = 3, defaults) are
synthesized two ways (SDS records, the consistent model), mst and aim run at the same (ε, δ), and
independent per-column sampling from the DP 1-counts is the floor. Prints mean TVD over all
1-/2-/3-way marginals (empty counted as a value), the model's fit/sample seconds and its size.
PUMS_ca_10k.csv from ../shared/data; larger sizes are seeded resamples of it.

    .venv/bin/python bench/bench_models.py                              # 10k raw + binned, ε 1/4/10
    .venv/bin/python bench/bench_models.py --sizes 100000 --epsilons 4
    .venv/bin/python bench/bench_models.py --sizes 1000000 --epsilons 4 --binned-only --skip-records
    .venv/bin/python bench/bench_models.py --methods mst aim                # only these rows
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_synthesis import DATA, bin_columns, independent

from sds_core.data.preparation import prepare
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.evaluation.metrics import aggregate_metrics, marginal_fidelity
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.marginals.params import DpParams
from sds_core.synthesis.consistent import (
    AggregateNoise,
    fit_aggregates,
    records_of,
)
from sds_core.synthesis.generator import SynthesisParams, default_target, synthesize
from sds_core.synthesizers import create

DELTA = 1e-6
_ORIGINAL: list = []  # the run's sensitive table, for _sds
METHODS = ("records", "records+1way", "model", "mst", "aim", "independent")


def _row(name: str, original, table, seconds: str, extra: str = "") -> str:
    t = marginal_fidelity(original, table, max_order=3)["tvd_mean_by_order"]
    return f"| {name} | {t[1]:.4f} | {t[2]:.4f} | {t[3]:.4f} | {seconds} | {extra} |"


def run(size: int, binned: bool, epsilon: float, seed: int, methods: set[str]) -> None:
    """One data set at one ε: all methods, same run."""
    rng = np.random.default_rng(seed)
    frame = pd.read_csv(DATA, dtype=str, keep_default_na=False)
    if size != len(frame):
        frame = frame.iloc[rng.integers(0, len(frame), size=size)].reset_index(drop=True)
    if binned:
        frame = bin_columns(frame)
    original = prepare(frame)
    _ORIGINAL[:] = [original]
    t0 = time.perf_counter()
    result = dp_aggregate(
        original,
        DpParams(epsilon=epsilon, delta=DELTA, reporting_length=3),
        ReleaseRandomness.from_seed(seed),
    )
    agg_s = time.perf_counter() - t0
    aggregates, rep = result.aggregates, result.report
    noise = AggregateNoise.from_release(
        rep.sigma_by_len, rep.allowed_sensitivity_by_len, rep.threshold_by_len
    )
    n = default_target(aggregates)
    label = "binned age/income" if binned else "raw columns"
    print(f"\n### {size:,} rows, {label}, ε = {epsilon:g}, δ = {DELTA:g}")
    print(f"\n(SDS aggregation {agg_s:.2f} s; load {open('/proc/loadavg').read().split()[0]})\n")
    print("| method | TVD1 | TVD2 | TVD3 | seconds (fit + sample) | notes |")
    print("|---|---|---|---|---|---|")
    if "records" in methods:
        t0 = time.perf_counter()
        records = synthesize(
            aggregates,
            SynthesisParams(target_number_of_records=n),
            rng=np.random.default_rng(seed),
        )
        secs = f"{time.perf_counter() - t0:.2f}"
        print(_row("SDS records (default)", original, records, secs, _sds(records)))
    if "records+1way" in methods:
        t0 = time.perf_counter()
        records = synthesize(
            aggregates,
            SynthesisParams(target_number_of_records=n, reconcile_one_way=True),
            rng=np.random.default_rng(seed),
        )
        secs = f"{time.perf_counter() - t0:.2f}"
        print(_row("SDS records + 1-way reconciliation", original, records, secs, _sds(records)))
    if "model" in methods:
        t0 = time.perf_counter()
        model = fit_aggregates(aggregates, noise)
        t1 = time.perf_counter()
        table = records_of(model, aggregates, n, rng=np.random.default_rng(seed))
        t2 = time.perf_counter()
        print(
            _row(
                "SDS aggregates + consistent model",
                original,
                table,
                f"{t1 - t0:.2f} + {t2 - t1:.2f}",
                f"{len(model.tree.cliques)} cliques, {model.tree.cells:,} cells "
                f"(~{model.tree.cells * 48 / 2**20:.1f} MiB), {model.iterations} iterations",
            )
        )
    for name in ("mst", "aim"):
        if name in methods:
            _registry_row(name, original, epsilon, seed)
    if "independent" in methods:
        table = independent(aggregates, n, rng)
        print(_row("independent (DP 1-counts)", original, table, "-", _sds(table)))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of the process so far: {rss:.0f} MiB")


def _sds(table) -> str:
    """SDS's own metrics of a synthetic table against the data (spec §4), all lengths <= 3."""
    sensitive, synth = exact_aggregates(_ORIGINAL[0], 3), exact_aggregates(table, 3)
    m = aggregate_metrics(
        sensitive, synth, n_sensitive=_ORIGINAL[0].n_records, n_target=table.n_records
    )
    return (
        f"suppressed {m['suppressed_pct']:.1f}%, fabricated {m['fabricated_pct']:.1f}%, "
        f"mean error {m['mean_error']:.1f}, MPE {m['mean_proportional_error']:.3f}"
    )


def _registry_row(name: str, original, epsilon: float, seed: int) -> None:
    """A registry synthesizer (mst, aim) at the same (ε, δ) and key."""
    synth = create(name)
    t0 = time.perf_counter()
    fit = synth.fit(
        original,
        epsilon=epsilon,
        delta=DELTA,
        rnd=ReleaseRandomness.from_seed(seed),
        release_label="bench",
    )
    t1 = time.perf_counter()
    table = synth.sample(None, rng=np.random.default_rng(seed))
    t2 = time.perf_counter()
    fitted = fit.model.fitted
    extra = f"{fitted.tree.cells:,} cells, {fitted.iterations} iterations"
    if name == "aim":
        rounds = fit.privacy_report["rounds"]
        extra += f", {len(rounds)} rounds, {len(fitted.tree.cliques)} cliques"
    print(_row(f"{name} (ours)", original, table, f"{t1 - t0:.2f} + {t2 - t1:.2f}", extra))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 4.0, 10.0])
    parser.add_argument("--binned-only", action="store_true")
    parser.add_argument("--raw-only", action="store_true")
    parser.add_argument("--skip-records", action="store_true", help="no SDS record synthesis")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    methods = set(args.methods) - ({"records"} if args.skip_records else set())
    kinds = [False, True]
    if args.binned_only:
        kinds = [True]
    if args.raw_only:
        kinds = [False]
    for size in args.sizes:
        for binned in kinds:
            for eps in args.epsilons:
                run(size, binned, eps, args.seed, methods)


if __name__ == "__main__":
    main()
