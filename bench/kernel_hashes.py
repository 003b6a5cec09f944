"""sha256 of every output the compiled kernels shape: synthesized records (all modes and paths),
DP aggregates, exact aggregates and the evaluation report, on the example PUMS data.

Run it before and after a kernel refactor and diff the two outputs: identical lines mean
identical bits. ``--rows`` keeps the first N rows (small enough for NUMBA_DISABLE_JIT=1).

    PYTHONPATH=. .venv/bin/python bench/kernel_hashes.py > before.txt
    NUMBA_DISABLE_JIT=1 PYTHONPATH=. .venv/bin/python bench/kernel_hashes.py --rows 300 --r 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import sds_core.synthesis._bitsets as bitsets_module
import sds_core.synthesis.layout as layout_module
from sds_core.data.params import PrepareParams
from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.evaluation.params import EvaluationParams
from sds_core.evaluation.release import evaluate_release
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.marginals.params import DpParams
from sds_core.synthesis.generator import REFERENCE_PARAMS, SynthesisParams, synthesize

DATA = Path(__file__).resolve().parent.parent / "examples/pums_ca_10k.csv"


def _sha(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        data = np.ascontiguousarray(p).tobytes() if isinstance(p, np.ndarray) else repr(p)
        h.update(data if isinstance(data, bytes) else data.encode())
    return h.hexdigest()[:16]


def _aggregates_sha(agg: AggregateSet) -> str:
    parts: list[Any] = [agg.reporting_length, agg.protected_number_of_records]
    for k in sorted(agg.by_len):
        cc = agg.by_len[k]
        parts += [k, cc.attrs.astype(np.int64), cc.counts.astype(np.int64)]
    return _sha(*parts)


def _table_sha(table: PreparedTable) -> str:
    return _sha(table.codes.shape, table.codes.astype(np.int32))


@contextmanager
def _patched(module: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def _synthesis_cases(target: int) -> dict[str, tuple[SynthesisParams, str]]:
    """name -> (params, path): path "bits" (default), "walk" (no bitsets), "hash" (no dense
    pair table: pairs through the hash table)."""
    t = target
    return {
        "completion-syn-bits": (SynthesisParams(target_number_of_records=t), "bits"),
        "completion-syn-walk": (SynthesisParams(target_number_of_records=t), "walk"),
        "completion-syn-hash": (SynthesisParams(target_number_of_records=t), "hash"),
        "completion-nosyn-bits": (
            SynthesisParams(use_synthetic_counts=False, target_number_of_records=t),
            "bits",
        ),
        "completion-nosyn-walk": (
            SynthesisParams(use_synthetic_counts=False, target_number_of_records=t),
            "walk",
        ),
        "completion-notarget": (SynthesisParams(), "bits"),
        "completion-scaled": (SynthesisParams(aggregate_counts_scale_factor=0.5), "walk"),
        "completion-2batches": (
            SynthesisParams(target_number_of_records=t, parallel_batches=2),
            "bits",
        ),
        "reference": (REFERENCE_PARAMS, "bits"),
        "reference-hash": (REFERENCE_PARAMS, "hash"),
        "reference-syn-target": (
            SynthesisParams(complete_records=False, target_number_of_records=t, parallel_batches=1),
            "bits",
        ),
        "reference-syn-hash": (
            SynthesisParams(complete_records=False, target_number_of_records=t),
            "hash",
        ),
    }


def _synthesize(agg: AggregateSet, params: SynthesisParams, path: str, seed: int) -> str:
    rng = np.random.default_rng(seed)
    if path == "walk":
        with _patched(bitsets_module, "BITSET_BYTES_LIMIT", 0):
            return _table_sha(synthesize(agg, params, rng=rng))
    if path == "hash":
        with _patched(layout_module, "DENSE_PAIR_LIMIT", 0):
            return _table_sha(synthesize(agg, params, rng=rng))
    return _table_sha(synthesize(agg, params, rng=rng))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=0, help="first N rows only (0 = all 10,000)")
    ap.add_argument("--r", type=int, nargs="*", default=[3, 4], help="reporting lengths")
    ap.add_argument("--no-evaluate", action="store_true", help="skip the evaluation report")
    a = ap.parse_args()
    frame = pd.read_csv(DATA, dtype=str, keep_default_na=False)
    if a.rows:
        frame = frame.head(a.rows)
    table = prepare(frame, PrepareParams())
    print(f"data {DATA.name} rows={table.n_records} table={_table_sha(table)}")
    for R in a.r:
        exact = exact_aggregates(table, R)
        print(f"R={R} exact-aggregates {_aggregates_sha(exact)}")
        for accounting in ("tight", "reference"):
            res = dp_aggregate(
                table,
                DpParams(epsilon=4.0, reporting_length=R, accounting=accounting),
                ReleaseRandomness.from_seed(11),
            )
            print(f"R={R} dp-aggregates-{accounting} {_aggregates_sha(res.aggregates)}")
        agg = dp_aggregate(
            table, DpParams(epsilon=4.0, reporting_length=R), ReleaseRandomness.from_seed(7)
        ).aggregates
        target = int(agg.protected_number_of_records or table.n_records)
        for name, (params, path) in _synthesis_cases(target).items():
            print(f"R={R} synth-dp-{name} {_synthesize(agg, params, path, seed=5)}")
        for name in ("completion-syn-bits", "completion-nosyn-walk", "reference"):
            params, path = _synthesis_cases(target)[name]
            print(f"R={R} synth-exact-{name} {_synthesize(exact, params, path, seed=6)}")
        if not a.no_evaluate:
            synthetic = synthesize(
                agg, SynthesisParams(target_number_of_records=target), rng=np.random.default_rng(9)
            )
            report = evaluate_release(table, synthetic, agg, EvaluationParams(reporting_length=R))
            text = json.dumps(report, sort_keys=True, default=repr)
            print(f"R={R} evaluation {_sha(text)}")


if __name__ == "__main__":
    main()
