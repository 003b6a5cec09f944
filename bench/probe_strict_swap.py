"""Probe (not a pipeline feature): a 1-way swap that keeps the records' length-R guarantee.

For each column, cells of over-produced values (more than the DP 1-count, scaled) are re-drawn,
in a seeded order, among the values with a 1-way deficit whose every 2- and 3-combination with
the rest of the record is reported; empty cells are left alone. Pure Python (slow: ~20 s at
100k). Prints TVD1/2/3 and SDS's own metrics for the default records, the swapped records and
independent sampling (docs/benchmarks.md, "What did not work").

    PYTHONPATH=. .venv/bin/python bench/probe_strict_swap.py 100000 binned 4
"""

from __future__ import annotations

import sys
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_synthesis import DATA, bin_columns, independent

from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.evaluation.metrics import marginal_fidelity
from sds_core.evaluation.params import EvaluationParams
from sds_core.evaluation.release import evaluate_release
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.params import DpParams
from sds_core.synthesis.generator import SynthesisParams, default_target, synthesize


def strict_swap(table: PreparedTable, agg: AggregateSet, rng: np.random.Generator) -> PreparedTable:
    """Over-produced cells re-drawn among deficit values that create only reported combinations."""
    dom, codes = agg.domain, table.codes.copy()
    off, d, n = np.asarray(dom.offsets), dom.n_columns, table.n_records
    reported: set[tuple[int, ...]] = set()
    for k in range(1, agg.reporting_length + 1):
        reported.update(map(tuple, np.sort(agg.counts_of(k).attrs.astype(np.int64), 1).tolist()))
    c1 = agg.counts_of(1)
    one = np.zeros(dom.n_attributes)
    one[c1.attrs[:, 0]] = c1.counts
    protected = agg.protected_number_of_records or n
    for c in range(d):
        lo, k = int(off[c]), dom.cardinalities[c]
        dp = one[lo : lo + k]
        target = dp * (n / max(protected, dp.sum()))
        col = codes[:, c]
        made = np.bincount(col[col >= 0], minlength=k).astype(float)
        deficit = np.maximum(np.rint(target - made), 0)
        surplus = np.maximum(np.rint(made - target), 0)
        rows = np.flatnonzero(col >= 0)
        rows = rows[surplus[col[rows]] > 0]
        for row in rows[rng.permutation(rows.size)].tolist():
            u = codes[row, c]
            if surplus[u] <= 0 or deficit.sum() <= 0:
                continue
            attrs = [int(codes[row, j] + off[j]) for j in range(d) if j != c and codes[row, j] >= 0]
            ok = [
                v
                for v in np.flatnonzero(deficit > 0).tolist()
                if all(tuple(sorted((x, lo + v))) in reported for x in attrs)
                and all(
                    tuple(sorted((x, y, lo + v))) in reported for x, y in combinations(attrs, 2)
                )
            ]
            if ok:
                cum = np.cumsum(deficit[ok])
                v = ok[int(np.searchsorted(cum, rng.random() * cum[-1], side="right"))]
                codes[row, c] = v
                deficit[v] -= 1
                surplus[u] -= 1
    return PreparedTable(dom, codes, table.multi_value_columns)


def main() -> None:
    size, kind, epsilon = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    rng = np.random.default_rng(0)
    frame = pd.read_csv(DATA, dtype=str, keep_default_na=False)
    if size != len(frame):
        frame = frame.iloc[rng.integers(0, len(frame), size=size)].reset_index(drop=True)
    if kind == "binned":
        frame = bin_columns(frame)
    original = prepare(frame)
    params = DpParams(epsilon=epsilon, delta=1e-6, reporting_length=3)
    agg = dp_aggregate(original, params, ReleaseRandomness.from_seed(0)).aggregates
    n = default_target(agg)
    records = synthesize(agg, SynthesisParams(target_number_of_records=n), rng=rng)
    tables = {
        "records (default)": records,
        "records + strict swap": strict_swap(records, agg, np.random.default_rng(1)),
        "independent": independent(agg, n, rng),
    }
    for name, table in tables.items():
        t = marginal_fidelity(original, table, max_order=3)["tvd_mean_by_order"]
        s = evaluate_release(original, table, agg, EvaluationParams())["sensitive_vs_synthetic"]
        print(
            f"| {name} | {t[1]:.4f} / {t[2]:.4f} / {t[3]:.4f} | {s['suppressed_pct']:.2f} / "
            f"{s['fabricated_pct']:.2f} / {s['mean_error']:.2f} / "
            f"{s['mean_proportional_error']:.3f} |"
        )


if __name__ == "__main__":
    main()
