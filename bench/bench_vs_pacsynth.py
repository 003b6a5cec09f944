"""Side-by-side benchmark against the reference implementation (pac-synth 0.0.8).

Same data, same parameters, same run: DP aggregation (our prepare + dp_aggregate vs pac-synth's
Dataset + fit), aggregate quality (per-length mean absolute error of the DP aggregates against
the exact ones, spec §4 "mean error"), and our end-to-end release core (aggregation + synthesis +
evaluation) at 1,000,000 rows. Each measurement runs in its own subprocess so its peak RSS is
its own.

    .venv/bin/python bench/bench_vs_pacsynth.py                 # 10k and a 1M resample
    .venv/bin/python bench/bench_vs_pacsynth.py --rows 10000 --seeds 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
CANDIDATES = [
    PROJECT.parent / "shared/data/pums/PUMS_ca_10k.csv",
    PROJECT / "examples/pums_ca_10k.csv",
]


def _data(rows: int, seed: int = 20261122):
    import pandas as pd

    src = next(p for p in CANDIDATES if p.exists())
    df = pd.read_csv(src, dtype=str, keep_default_na=False)
    if rows != len(df):
        df = df.sample(n=rows, replace=True, random_state=seed).reset_index(drop=True)
    return df


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _mae_by_len(exact: dict[str, int], dp: dict[str, int], R: int) -> list[float]:
    out = []
    for k in range(1, R + 1):
        errs = [
            abs(c - dp[key]) for key, c in exact.items() if key.count(";") == k - 1 and key in dp
        ]
        out.append(sum(errs) / len(errs) if errs else float("nan"))
    return out


def run_pacsynth(rows: int, seed: int, R: int, eps: float) -> dict:
    """pac-synth Dataset + fit (+ exact aggregates for the error)."""
    import pacsynth

    df = _data(rows)
    t0 = time.perf_counter()
    ds = pacsynth.Dataset.from_data_frame(df)
    params = pacsynth.DpAggregateSeededParametersBuilder().reporting_length(R).epsilon(eps).build()
    syn = pacsynth.DpAggregateSeededSynthesizer(params)
    syn.fit(ds)
    fit_s = time.perf_counter() - t0
    out = {"fit_s": fit_s, "peak_mib": _peak_mib()}
    if rows <= 100_000:
        exact = ds.get_aggregates(R, ";")
        out["mae_by_len"] = _mae_by_len(exact, syn.get_dp_aggregates(";"), R)
    return out


def run_ours(rows: int, seed: int, R: int, eps: float, accounting: str, end_to_end: bool) -> dict:
    """Our prepare + dp_aggregate (+ synthesis + evaluation when end_to_end)."""
    import numpy as np

    from sds_core.data.params import PrepareParams
    from sds_core.data.preparation import prepare
    from sds_core.dp.randomness import ReleaseRandomness
    from sds_core.marginals.engine import dp_aggregate
    from sds_core.marginals.exact_counts import exact_aggregates
    from sds_core.marginals.params import DpParams

    df = _data(rows)
    # load the compiled (numba, cached) kernels first, as a long-running service would have
    # them: a fresh process spends ~0.5 s once on that, which is not aggregation work
    t_load = time.perf_counter()
    warm = prepare(df.head(300), PrepareParams())
    dp_aggregate(warm, DpParams(epsilon=eps, reporting_length=R), ReleaseRandomness.from_seed(0))
    t_load = time.perf_counter() - t_load
    t0 = time.perf_counter()
    table = prepare(df, PrepareParams())
    t_prep = time.perf_counter() - t0
    result = dp_aggregate(
        table,
        DpParams(epsilon=eps, reporting_length=R, accounting=accounting),
        ReleaseRandomness.from_seed(seed),
    )
    fit_s = time.perf_counter() - t0
    out = {"fit_s": fit_s, "prepare_s": t_prep, "kernel_load_s": t_load}
    if rows <= 100_000:
        exact = exact_aggregates(table, R).to_text_dict()
        out["mae_by_len"] = _mae_by_len(exact, result.aggregates.to_text_dict(), R)
    if end_to_end:
        from sds_core.evaluation.params import EvaluationParams
        from sds_core.evaluation.release import evaluate_release
        from sds_core.synthesis.generator import SynthesisParams, default_target, synthesize

        t1 = time.perf_counter()
        # as the release pipeline does: as many records as the DP record count
        target = default_target(result.aggregates)
        synthetic = synthesize(
            result.aggregates,
            SynthesisParams(target_number_of_records=target),
            rng=np.random.default_rng(seed),
        )
        out["synthesize_s"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        ev = evaluate_release(
            table, synthetic, result.aggregates, EvaluationParams(reporting_length=R)
        )
        out["evaluate_s"] = time.perf_counter() - t2
        out["total_s"] = time.perf_counter() - t0
        mf = ev["marginal_fidelity"]
        out["tvd"] = {str(k): round(v, 4) for k, v in mf["tvd_mean_by_order"].items()}
        out["empty_share"] = round(mf["empty_cell_share"]["synthetic"], 4)
        out["records"] = synthetic.n_records
    out["peak_mib"] = _peak_mib()
    return out


def _child(args: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(PROJECT))
    res = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, env=env
    )
    if res.returncode != 0:
        return {"error": res.stderr.strip().splitlines()[-1] if res.stderr else "failed"}
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="*", default=[10_000, 1_000_000])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--reporting-length", type=int, default=3)
    ap.add_argument("--epsilon", type=float, default=4.0)
    ap.add_argument("--skip-pacsynth-above", type=int, default=1_000_000)
    ap.add_argument("--child", nargs="*")
    a = ap.parse_args()
    if a.child is not None:
        who, rows, seed, R, eps, acc, e2e = a.child
        if who == "pacsynth":
            res = run_pacsynth(int(rows), int(seed), int(R), float(eps))
        else:
            res = run_ours(int(rows), int(seed), int(R), float(eps), acc, e2e == "1")
        print(json.dumps(res))
        return
    R, eps = a.reporting_length, a.epsilon
    print(f"# R={R}, epsilon={eps}, {os.cpu_count()} cores; times in seconds (median over seeds)")
    for rows in a.rows:
        seeds = range(a.seeds if rows <= 100_000 else 1)
        rec: dict[str, list[dict]] = {"pacsynth": [], "ours-reference": [], "ours-tight": []}
        for s in seeds:
            if rows <= a.skip_pacsynth_above:
                rec["pacsynth"].append(
                    _child(["pacsynth", str(rows), str(s), str(R), str(eps), "-", "0"])
                )
            rec["ours-reference"].append(
                _child(["ours", str(rows), str(s), str(R), str(eps), "reference", "0"])
            )
            rec["ours-tight"].append(
                _child(
                    ["ours", str(rows), str(s), str(R), str(eps), "tight", "1" if s == 0 else "0"]
                )
            )
        print(f"\n## {rows:,} rows")
        for who, runs in rec.items():
            runs = [r for r in runs if "error" not in r] or runs
            if not runs or "error" in runs[0]:
                print(f"{who:15s} {runs[0].get('error') if runs else 'skipped'}")
                continue
            fit = sorted(r["fit_s"] for r in runs)[len(runs) // 2]
            peak = max(r["peak_mib"] for r in runs)
            line = f"{who:15s} aggregate {fit:7.2f} s  peak {peak:7.0f} MiB"
            if "kernel_load_s" in runs[0]:
                load = sorted(r["kernel_load_s"] for r in runs)[len(runs) // 2]
                line += f"  (+{load:.2f} s one-off kernel load and warm-up, not included)"
            if "mae_by_len" in runs[0]:
                maes = [sum(r["mae_by_len"][i] for r in runs) / len(runs) for i in range(R)]
                line += "  MAE by length " + " / ".join(f"{m:.1f}" for m in maes)
            e2e = next((r for r in runs if "total_s" in r), None)
            if e2e:
                line += (
                    f"\n{'':15s} end-to-end {e2e['total_s']:.2f} s "
                    f"(synthesize {e2e['synthesize_s']:.2f} for {e2e['records']} records, "
                    f"evaluate {e2e['evaluate_s']:.2f}); mean TVD by order {e2e['tvd']}, "
                    f"synthetic empty-cell share {e2e['empty_share']}"
                )
            print(line)
        if rec["pacsynth"] and "fit_s" in rec["pacsynth"][0] and "fit_s" in rec["ours-tight"][0]:
            p = sorted(r["fit_s"] for r in rec["pacsynth"] if "fit_s" in r)
            o = sorted(r["fit_s"] for r in rec["ours-tight"] if "fit_s" in r)
            print(
                f"speed-up of aggregation vs pac-synth fit: {p[len(p) // 2] / o[len(o) // 2]:.2f}x"
            )


if __name__ == "__main__":
    main()
