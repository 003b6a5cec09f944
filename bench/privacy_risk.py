"""Benchmark: anonymeter's attack-based risks of our synthetic records (NOT DP; needs
`make anonymeter`).

The bundled PUMS 10k example is split as a custodian would before a release (`sds split`:
80% training, 20% control, seed 0); each synthesizer (our default aggregate-seeded, aim, mst,
and with --methods pac-synth pac-synth 0.0.8) is fitted to the training rows prepared by
examples/release.toml (its declared bins) at each ε, and its records are attacked by
`sds evaluate --privacy-risk`'s code, together with a non-private baseline that publishes the
training rows themselves (the same prepared cells), so the risks have a scale. Prints one
markdown table (risk and 95% interval per attack); the whole results go to a private JSON file
(--out, 0600).

    .venv/bin/python bench/privacy_risk.py                        # ε 1 and 4, all methods
    .venv/bin/python bench/privacy_risk.py --no-copy --methods pac-synth    # pac-synth's records
    .venv/bin/python bench/privacy_risk.py --epsilons 4 --methods mst --n-attacks 200
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from sds_core.data.decoding import to_arrow
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.synthesizers import create
from sds_release.store.compare import RiskParams, privacy_risk, split_input
from sds_release.store.compare.tables import reading
from sds_release.store.workspace.files import atomic_write_json, atomic_write_parquet

PROJECT = Path(__file__).resolve().parents[1]
DATA = PROJECT / "examples" / "pums_ca_10k.csv"
CONFIG = PROJECT / "examples" / "release.toml"
DELTA = 1e-6
METHODS = ("aggregate-seeded", "aim", "mst", "pac-synth")
SENSITIVE_ZEROS = ["sex", "latino", "black", "asian", "married"]  # as examples/release.toml


def _records(name: str, training: PreparedTable, epsilon: float, seed: int) -> PreparedTable:
    """``name``'s synthetic records of ``training`` at (ε, δ) from a seeded release key."""
    if name == "pac-synth":
        return _pacsynth(training, epsilon)
    synth = create(name)
    synth.fit(
        training,
        epsilon=epsilon,
        delta=DELTA,
        rnd=ReleaseRandomness.from_seed(seed),
        release_label="bench",
    )
    return synth.sample(None, rng=np.random.default_rng(seed))


def _pacsynth(training: PreparedTable, epsilon: float) -> PreparedTable:
    """pac-synth 0.0.8's records (its defaults, R = 3, its own unseeded randomness) of the same
    prepared training cells (the `bench` extra)."""
    import pacsynth

    from sds_core.data.decoding import to_frame
    from sds_core.data.params import PrepareParams
    from sds_core.data.preparation import prepare

    data = pacsynth.Dataset.from_data_frame(
        to_frame(training, empty_value=""), sensitive_zeros=SENSITIVE_ZEROS
    )
    params = pacsynth.DpAggregateSeededParametersBuilder().reporting_length(3)
    synth = pacsynth.DpAggregateSeededSynthesizer(params.epsilon(epsilon).build())
    synth.fit(data)
    header, *rows = synth.sample()
    table = pa.table({h: [r[i] for r in rows] for i, h in enumerate(header)})
    return prepare(table, PrepareParams(sensitive_zeros=tuple(SENSITIVE_ZEROS)))


def _cell(r: dict) -> str:
    lo, hi = r["ci"]
    mark = "" if r["informative"] else "†"
    return f"{r['risk']:.3f} [{lo:.3f}, {hi:.3f}]{mark}"


def _row(label: str, eps: str, result: dict, seconds: float) -> str:
    so, worst = result["singling_out"], result["inference_max"]
    return (
        f"| {label} | {eps} | {_cell(so['univariate'])} | {_cell(so['multivariate'])} | "
        f"{_cell(result['linkability'])} | {_cell(worst)} ({worst['secret']}) | "
        f"{seconds:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 4.0])
    parser.add_argument("--methods", nargs="+", default=list(METHODS[:3]), choices=METHODS)
    parser.add_argument("--n-attacks", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-copy", action="store_true", help="skip the copy baseline")
    parser.add_argument("--out", type=Path, default=PROJECT / "bench/out/privacy_risk.json")
    args = parser.parse_args()
    params = RiskParams(n_attacks=args.n_attacks, seed=args.seed)
    private = Path(tempfile.mkdtemp(prefix="sds-risk-bench-"))  # 0700
    results: dict[str, dict] = {}
    try:
        files = split_input(DATA, private / "split", control_share=0.2, seed=args.seed)
        training, _ = reading(CONFIG, files.training, None).prepare_original(files.training)
        print(
            f"PUMS 10k example, split 80/20 (seed {args.seed}), {params.n_attacks} attacks, "
            f"δ = {DELTA:g}; † = the attack did no better than random guessing\n"
        )
        print(
            "| synthetic records | ε | singling out (1 column) | singling out (3 columns) | "
            "linkability | inference (max over secrets) | seconds |"
        )
        print("|---|---|---|---|---|---|---|")
        runs: list[tuple[str, str, PreparedTable | None]] = []
        if not args.no_copy:
            runs.append(("copy of the training rows (not private)", "∞", training))
        runs += [(m, f"{e:g}", None) for e in args.epsilons for m in args.methods]
        for label, eps, table in runs:
            t0 = time.perf_counter()
            if table is None:
                table = _records(label, training, float(eps), args.seed)
            synthetic = private / "synthetic.parquet"
            atomic_write_parquet(synthetic, to_arrow(table, empty_value=""), private=True)
            result = privacy_risk(
                files.training, synthetic, files.control, params=params, config=CONFIG
            )
            results[f"{label} ε={eps}"] = result
            print(_row(label, eps, result, time.perf_counter() - t0), flush=True)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    atomic_write_json(args.out, results, private=True)
    print(f"\nwhole results (private): {args.out}")


if __name__ == "__main__":
    main()
