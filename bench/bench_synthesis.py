"""Benchmark: aggregate-seeded synthesis, ours vs pac-synth 0.0.8, on the same DP aggregates.

For each size, pac-synth fits DP aggregates of the PUMS sample (or a seeded resample of it);
both synthesizers then sample the same number of records (the protected count) from those
aggregates in the same run. Prints times, speed ratio, and marginal fidelity (mean TVD of all
1-/2-/3-way marginals vs the original, empty counted as a value) for pac-synth, our reference
mode, our default, and independent per-column sampling from the DP 1-counts.

    .venv/bin/python bench/bench_synthesis.py                  # 10k rows
    .venv/bin/python bench/bench_synthesis.py --sizes 10000 100000 --binned
    .venv/bin/python bench/bench_synthesis.py --sizes 100000 1000000 --own-aggregates
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pacsynth
import pandas as pd

from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_core.evaluation.metrics import marginal_fidelity
from sds_core.marginals.aggregates import AggregateSet
from sds_core.synthesis.generator import (
    REFERENCE_PARAMS,
    SynthesisParams,
    default_target,
    domain_from_text_keys,
    synthesize,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "pums" / "PUMS_ca_10k.csv"
AGE_EDGES = [-1, 17, 24, 34, 44, 54, 64, 74, 200]
HEADER = "| synthesizer | records | seconds | empty share | TVD 1-way | TVD 2-way | TVD 3-way |"
INCOME_EDGES = [-1e12, 0, 10_000, 20_000, 40_000, 60_000, 100_000, 150_000, 1e12]


def bin_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """age and income into declared bins (labels are the right edges), as users run PUMS."""
    out = frame.copy()
    for col, edges in (("age", AGE_EDGES), ("income", INCOME_EDGES)):
        cut = pd.cut(frame[col].astype(float), edges, labels=[f"<={e:g}" for e in edges[1:]])
        out[col] = cut.astype(str)
    return out


def independent(aggregates: AggregateSet, n: int, rng: np.random.Generator) -> PreparedTable:
    """Baseline: each column drawn independently from its DP 1-counts (+ empty share)."""
    dom, c1 = aggregates.domain, aggregates.counts_of(1)
    total = aggregates.protected_number_of_records or n
    cols = dom.attribute_columns()[c1.attrs[:, 0]]
    codes = np.full((n, dom.n_columns), -1, dtype=np.int32)
    for j in range(dom.n_columns):
        ids = c1.attrs[cols == j, 0] - dom.offsets[j]
        w = c1.counts[cols == j].astype(float)
        p = np.append(w, max(total - w.sum(), 0.0))
        codes[:, j] = rng.choice(np.append(ids, -1), size=n, p=p / p.sum())
    return PreparedTable(dom, codes)


def tvd_row(name: str, seconds: float | None, original: PreparedTable, table: PreparedTable) -> str:
    m = marginal_fidelity(original, table, max_order=3)
    t = m["tvd_mean_by_order"]
    sec = f"{seconds:.2f}" if seconds is not None else "-"
    return (
        f"| {name} | {table.n_records} | {sec} | {m['empty_cell_share']['synthetic']:.3f} | "
        f"{t[1]:.4f} | {t[2]:.4f} | {t[3]:.4f} |"
    )


def own_aggregates(frame: pd.DataFrame, epsilon: float, reporting_length: int, seed: int):
    """Our DP aggregates of ``frame`` (defaults, tight accounting) instead of pac-synth's."""
    from sds_core.dp.randomness import ReleaseRandomness
    from sds_core.marginals.engine import dp_aggregate
    from sds_core.marginals.params import DpParams

    params = DpParams(epsilon=epsilon, reporting_length=reporting_length)
    return dp_aggregate(prepare(frame), params, ReleaseRandomness.from_seed(seed)).aggregates


def run(
    size: int, binned: bool, epsilon: float, reporting_length: int, seed: int, own: bool = False
) -> None:
    rng = np.random.default_rng(seed)
    frame = pd.read_csv(DATA, dtype=str, keep_default_na=False)
    if size != len(frame):
        frame = frame.iloc[rng.integers(0, len(frame), size=size)].reset_index(drop=True)
    if binned:
        frame = bin_columns(frame)
    original = prepare(frame)
    if own:  # our DP aggregates, no pac-synth (it needs minutes from 100k rows on)
        aggregates = own_aggregates(frame, epsilon, reporting_length, seed)
        target = default_target(aggregates)
        t0 = time.perf_counter()
        table = synthesize(
            aggregates,
            SynthesisParams(target_number_of_records=target),
            rng=np.random.default_rng(seed),
        )
        sec = time.perf_counter() - t0
        label = "binned age/income" if binned else "raw columns"
        print(f"\n### {size} rows, {label}, our DP aggregates, eps={epsilon}, R={reporting_length}")
        print(f"\n{HEADER}\n|---|---|---|---|---|---|---|")
        print(tvd_row("ours, default", sec, original, table))
        print(
            tvd_row(
                "independent 1-way (DP 1-counts)",
                None,
                original,
                independent(aggregates, target, np.random.default_rng(seed)),
            )
        )
        return
    params = (
        pacsynth.DpAggregateSeededParametersBuilder()
        .reporting_length(reporting_length)
        .epsilon(epsilon)
        .build()
    )
    ref = pacsynth.DpAggregateSeededSynthesizer(params)
    t0 = time.perf_counter()
    ref.fit(pacsynth.Dataset.from_data_frame(frame))
    fit_s = time.perf_counter() - t0
    texts = ref.get_dp_aggregates(";")
    domain = domain_from_text_keys(texts, columns=list(frame.columns))
    aggregates = AggregateSet.from_text_dict(
        domain,
        texts,
        reporting_length,
        protected_number_of_records=ref.get_dp_number_of_records(),
        is_dp=True,
    )
    target = default_target(aggregates)

    t0 = time.perf_counter()
    raw = ref.sample(target)
    pac_s = time.perf_counter() - t0
    pac = prepare(raw)
    rows = [tvd_row("pac-synth sample(N)", pac_s, original, pac)]
    times = {}
    for name, p in (
        ("ours, reference mode, T=N", REFERENCE_PARAMS),
        ("ours, default (syn counts, T=N, complete)", SynthesisParams()),
    ):
        p = SynthesisParams(
            use_synthetic_counts=p.use_synthetic_counts,
            complete_records=p.complete_records,
            target_number_of_records=target,
        )
        t0 = time.perf_counter()
        table = synthesize(aggregates, p, rng=np.random.default_rng(seed))
        times[name] = time.perf_counter() - t0
        rows.append(tvd_row(name, times[name], original, table))
    rows.append(
        tvd_row(
            "independent 1-way (DP 1-counts)",
            None,
            original,
            independent(aggregates, target, np.random.default_rng(seed)),
        )
    )
    label = "binned age/income" if binned else "raw columns"
    print(
        f"\n### {size} rows, {label}, eps={epsilon}, R={reporting_length} "
        f"(pac-synth fit {fit_s:.1f} s, {domain.n_attributes} attributes, "
        f"{aggregates.total_combinations()} DP combinations)\n"
    )
    print(f"{HEADER}\n|---|---|---|---|---|---|---|")
    print(
        f"| original | {original.n_records} | - | {(original.codes < 0).mean():.3f} | 0 | 0 | 0 |"
    )
    print("\n".join(rows))
    for name, sec in times.items():
        print(f"\nspeed-up vs pac-synth, {name}: {pac_s / sec:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--binned", action="store_true", help="bin age and income first")
    parser.add_argument("--epsilon", type=float, default=4.0)
    parser.add_argument("--reporting-length", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--own-aggregates",
        action="store_true",
        help="synthesize from our DP aggregates and skip pac-synth (ours vs independent only)",
    )
    args = parser.parse_args()
    # compile (or load the cached) numba kernel outside the timings
    warm = prepare(pd.DataFrame({"A": ["a", "b"], "B": ["c", "c"]}))
    from sds_core.marginals.exact_counts import exact_aggregates

    synthesize(exact_aggregates(warm, 2), rng=np.random.default_rng(0))
    for size in args.sizes:
        run(size, args.binned, args.epsilon, args.reporting_length, args.seed, args.own_aggregates)


if __name__ == "__main__":
    main()
