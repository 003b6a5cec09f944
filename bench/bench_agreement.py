"""Benchmark (issue 22): do the SDS records agree with their own DP aggregates? Before vs after.

For each data set, ε and seed: our DP aggregates (R = 3 unless --reporting-length), then the
default records twice from the same seed, without (before issue 22) and with
``match_aggregates``, given the published noise (``noise_sd_by_len``, as the release passes it;
``--no-noise``: without). Prints per run the agreement figures (share of the released 1-way values
whose synthetic count lies inside the published 95% noise interval, 1.96 σ_1 √Δ_1; the same for
the reported 2-combinations; share of column pairs passing the χ² test of
``pair_within_noise_share``), mean TVD of all 1-/2-/3-way marginals vs the sensitive data, SDS's
own metrics (suppressed / fabricated % of the sensitive combinations, mean |error|), the
records' unreported combinations (the guarantee: always 0) and the synthesis CPU seconds; then
the mean over seeds per set.

Sets: ``example`` is examples/pums_ca_10k.csv with examples/release.toml (declared bins and
domains, its ε); the PUMS sets are ../shared/data/pums/PUMS_ca_10k.csv, raw or with
bench_synthesis's bins, seeded resamples above 10k rows (as bench/bench_models.py).

    .venv/bin/python bench/bench_agreement.py --sets example --seeds 0 1 2
    .venv/bin/python bench/bench_agreement.py --sizes 10000 100000 --epsilons 1 4 10 --seeds 0 1 2
    .venv/bin/python bench/bench_agreement.py --sizes 1000000 --binned-only --epsilons 4 --seeds 0
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_synthesis import DATA, bin_columns

from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.evaluation.agreement import (
    agreement,
    count_sd_by_len,
    inside_interval_share_by_len,
    pair_within_noise_share,
)
from sds_core.evaluation.metrics import aggregate_metrics, marginal_fidelity
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.marginals.params import DpParams
from sds_core.synthesis.generator import SynthesisParams, default_target, synthesize

ROOT = Path(__file__).resolve().parents[1]
DELTA = 1e-6
HEADER = (
    "| set | seed | records | 1-way in 95% | 2-way in 95% | pairs χ² ok | TVD1 | TVD2 | TVD3 "
    "| suppressed % | fabricated % | mean error | unreported | synth CPU s |"
)
FIELDS = ("one", "two", "pairs", "tvd1", "tvd2", "tvd3", "supp", "fab", "err", "unrep", "cpu")


def example(seed: int, reporting_length: int | None) -> tuple[PreparedTable, Any, str]:
    """The bundled example as `make release` prepares and aggregates it (its config's ε)."""
    from sds_release.store.params import build_params, dp_params, load_config, prepare_params

    overrides: dict[str, Any] = {"input": str(ROOT / "examples" / "pums_ca_10k.csv")}
    if reporting_length is not None:
        overrides["reporting_length"] = reporting_length
    params = build_params(load_config(ROOT / "examples" / "release.toml"), overrides)
    frame = pd.read_csv(overrides["input"], dtype=str, keep_default_na=False)
    original = prepare(frame, prepare_params(params, None, list(frame.columns)))
    result = dp_aggregate(original, dp_params(params), ReleaseRandomness.from_seed(seed))
    name = f"example ε={params.epsilon:g} R={params.reporting_length}"
    return original, result, name


def pums(
    size: int, binned: bool, epsilon: float, seed: int, reporting_length: int
) -> tuple[PreparedTable, Any, str]:
    """A PUMS set as bench/bench_models.py builds it (seeded resample, optional bins)."""
    rng = np.random.default_rng(seed)
    frame = pd.read_csv(DATA, dtype=str, keep_default_na=False)
    if size != len(frame):
        frame = frame.iloc[rng.integers(0, len(frame), size=size)].reset_index(drop=True)
    if binned:
        frame = bin_columns(frame)
    original = prepare(frame)
    params = DpParams(epsilon=epsilon, delta=DELTA, reporting_length=reporting_length)
    result = dp_aggregate(original, params, ReleaseRandomness.from_seed(seed))
    kind = "binned" if binned else "raw"
    return original, result, f"{size // 1000}k {kind} ε={epsilon:g} R={reporting_length}"


def figures(original: PreparedTable, result: Any, records: PreparedTable, cpu: float) -> dict:
    """Agreement, TVD and SDS metrics of one synthetic table."""
    rep = result.report
    sd = count_sd_by_len(rep.sigma_by_len, rep.allowed_sensitivity_by_len)
    agr = agreement(result.aggregates, records)
    inside = inside_interval_share_by_len(agr, sd)
    tvd = marginal_fidelity(original, records, max_order=3)["tvd_mean_by_order"]
    r = result.aggregates.reporting_length
    sensitive, synth = exact_aggregates(original, r), exact_aggregates(records, r)
    sds = aggregate_metrics(
        sensitive, synth, n_sensitive=original.n_records, n_target=records.n_records
    )
    return {
        "one": inside.get(1),
        "two": inside.get(2),
        "pairs": pair_within_noise_share(agr, sd.get(2, 0.0)) if r >= 2 else None,
        "tvd1": tvd[1],
        "tvd2": tvd.get(2),
        "tvd3": tvd.get(3),
        "supp": sds["suppressed_pct"],
        "fab": sds["fabricated_pct"],
        "err": sds["mean_error"],
        "unrep": sum(agr.unreported_synthetic_by_len().values()),
        "cpu": cpu,
    }


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, int | np.integer):
        return str(int(x))
    return f"{x:.{digits}f}"


def row(name: str, seed: str, n: int, f: dict) -> str:
    """One markdown row."""
    return (
        f"| {name} | {seed} | {n} | {_fmt(f['one'])} | {_fmt(f['two'])} | {_fmt(f['pairs'])} "
        f"| {_fmt(f['tvd1'], 4)} | {_fmt(f['tvd2'], 4)} | {_fmt(f['tvd3'], 4)} "
        f"| {_fmt(f['supp'], 1)} | {_fmt(f['fab'], 1)} | {_fmt(f['err'], 1)} "
        f"| {_fmt(f['unrep'])} | {_fmt(f['cpu'], 2)} |"
    )


def run_set(build: Any, seeds: list[int], with_noise: bool) -> None:
    """All seeds of one set: before and after rows, then their means."""
    load = Path("/proc/loadavg").read_text().split()[0]
    means: dict[str, list[dict]] = {"before": [], "after": []}
    name = ""
    n = 0
    for seed in seeds:
        original, result, name = build(seed)
        aggregates = result.aggregates
        n = default_target(aggregates)
        if seed == seeds[0]:
            print(f"\n### {name} (load {load} at start)\n\n{HEADER}\n" + "|---" * 14 + "|")
        rep = result.report
        sd = count_sd_by_len(rep.sigma_by_len, rep.allowed_sensitivity_by_len)
        for label, match in (("before", False), ("after", True)):
            c0 = time.process_time()
            records = synthesize(
                aggregates,
                SynthesisParams(target_number_of_records=n, match_aggregates=match),
                rng=np.random.default_rng(seed),
                noise_sd_by_len=[sd[k] for k in sorted(sd)] if with_noise else None,
            )
            f = figures(original, result, records, time.process_time() - c0)
            means[label].append(f)
            print(row(f"{label}", str(seed), records.n_records, f), flush=True)
    for label, fs in means.items():
        mean = {
            k: (None if any(f[k] is None for f in fs) else float(np.mean([f[k] for f in fs])))
            for k in FIELDS
        }
        print(row(f"**{label}, mean**", f"{len(fs)} seeds", n, mean))


def main() -> None:
    """Parse the options and run every set."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["pums"], choices=["example", "pums"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 4.0, 10.0])
    parser.add_argument("--binned-only", action="store_true")
    parser.add_argument("--raw-only", action="store_true")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--reporting-length", type=int, default=None)
    parser.add_argument(
        "--no-noise",
        action="store_true",
        help="synthesize without the published noise (as sds_release/tasks/synthesis.py does)",
    )
    args = parser.parse_args()
    noise = not args.no_noise
    if "example" in args.sets:
        run_set(lambda seed: example(seed, args.reporting_length), args.seeds, noise)
    if "pums" in args.sets:
        kinds = [
            k for k in (False, True) if not ((k and args.raw_only) or (not k and args.binned_only))
        ]
        r = args.reporting_length or 3
        for size in args.sizes:
            for binned in kinds:
                for eps in args.epsilons:
                    run_set(
                        lambda seed, s=size, b=binned, e=eps: pums(s, b, e, seed, r),
                        args.seeds,
                        noise,
                    )


if __name__ == "__main__":
    main()
