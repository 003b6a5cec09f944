"""Benchmark: the length-1 universe after contribution bounding vs a threshold for d new values.

Issue #27 point 4: the length-1 candidates were built before contribution bounding, while ρ_1
spends δ/2 on only Δ_1 new values. Two fixes keep δ/2: (bounded) the candidates are the values
that survive bounding (what the engine does now); (threshold-d) every occurring value stays a
candidate and ρ_1 is calibrated for d new values (ρ_1 with Δ_1 replaced by d inside
Φ⁻¹((1 − δ/2)^{1/·}); the noise scale σ_1√Δ_1 is unchanged). The old, unbounded universe is
measured too, for reference only (it is not (ε, δ)-DP where Δ_1 < d). Same data, same keys, same
Δ_k for the three; prints ρ_1, the number of released 1-tuples and the mean TVD of the synthetic
records' 1-/2-/3-way marginals against the input (empty counted as a value), averaged over seeds.
PUMS_ca_10k.csv from ../shared/data, raw and with age/income binned. Its records hold 6 to 10
values (d = 11): at the default Q = 99, Δ_1 is 9 to 11 and bounding touches few records; Q = 10
makes Δ_1 about 6, so most records drop values (the regime of the issue's 1.77 × δ/2).

    .venv/bin/python bench/bench_length_one.py        # ε 1 and 4, Q 99 and 10, 5 seeds
    .venv/bin/python bench/bench_length_one.py --epsilons 0.5 --seeds 3 --percentiles 50
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_synthesis import DATA, bin_columns

from sds_core.data.preparation import prepare
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.evaluation.metrics import marginal_fidelity
from sds_core.marginals import engine
from sds_core.marginals.params import DpParams
from sds_core.synthesis.generator import SynthesisParams, synthesize

DELTA = 1e-6
VARIANTS = ("bounded", "threshold-d", "unbounded (old)")


@contextmanager
def variant(name: str, n_columns: int) -> Iterator[None]:
    """Run the engine as ``name`` (the shipped engine is "bounded")."""
    keep_filter, keep_threshold = engine._bounded_universe, engine._length_threshold
    if name != "bounded":
        engine._bounded_universe = lambda cands, counts: (cands, counts)  # type: ignore[assignment]
    if name == "threshold-d":

        def threshold(k, sigma, allowed, plan, params, n_cols):  # type: ignore[no-untyped-def]
            if k != 1:
                return keep_threshold(k, sigma, allowed, plan, params, n_cols)
            tail = -math.expm1(math.log1p(-plan.delta / 2) / n_columns)  # d new values
            z = -engine._NORMAL.inv_cdf(tail)
            return 1.0 + sigma * math.sqrt(allowed) * z + engine.DISCRETE_SHIFT

        engine._length_threshold = threshold  # type: ignore[assignment]
    try:
        yield
    finally:
        engine._bounded_universe, engine._length_threshold = keep_filter, keep_threshold


def run(binned: bool, epsilon: float, seeds: int, percentile: int) -> None:
    """One data set at one ε and Q: the three variants over ``seeds`` keys."""
    frame = pd.read_csv(DATA, dtype=str, keep_default_na=False)
    if binned:
        frame = bin_columns(frame)
    original = prepare(frame)
    d = original.domain.n_columns
    widths = np.count_nonzero(original.codes >= 0, axis=1)
    params = DpParams(
        epsilon=epsilon, delta=DELTA, reporting_length=3, percentile_percentage=percentile
    )
    label = "binned age/income" if binned else "raw columns"
    print(f"\n### PUMS 10k, {label}, ε = {epsilon:g}, δ = {DELTA:g}, d = {d}, Q = {percentile}")
    print(
        f"\nrecords' number of values: 99th percentile {np.percentile(widths, 99):.0f}, "
        f"max {widths.max()}\n"
    )
    print("| variant | Δ_1 (per seed) | ρ_1 | 1-tuples | TVD1 | TVD2 | TVD3 |")
    print("|---|---|---|---|---|---|---|")
    for name in VARIANTS:
        rows = []
        for seed in range(seeds):
            with variant(name, d):
                result = engine.dp_aggregate(original, params, ReleaseRandomness.from_seed(seed))
            rep = result.report
            if len(result.aggregates.counts_of(1)) == 0:  # nothing released: no records
                t = {1: math.nan, 2: math.nan, 3: math.nan}
            else:
                synthetic = synthesize(
                    result.aggregates, SynthesisParams(), rng=np.random.default_rng(seed)
                )
                t = marginal_fidelity(original, synthetic, max_order=3)["tvd_mean_by_order"]
            rows.append(
                (
                    rep.allowed_sensitivity_by_len[0],
                    rep.threshold_by_len[0],
                    len(result.aggregates.counts_of(1)),
                    t[1],
                    t[2],
                    t[3],
                )
            )
        a = np.array(rows, dtype=float)
        deltas = ",".join(str(int(x)) for x in a[:, 0])
        print(
            f"| {name} | {deltas} | {a[:, 1].mean():.1f} | {a[:, 2].mean():.1f} | "
            f"{a[:, 3].mean():.4f} | {a[:, 4].mean():.4f} | {a[:, 5].mean():.4f} |"
        )


def main() -> None:
    """Parse arguments and run every data set and ε."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 4.0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--percentiles", type=int, nargs="+", default=[99, 10], help="Q values")
    args = ap.parse_args()
    for q in args.percentiles:
        for binned in (False, True):
            for eps in args.epsilons:
                run(binned, eps, args.seeds, q)


if __name__ == "__main__":
    main()
