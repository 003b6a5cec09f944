"""Probe (issue 22): where the default records' surplus of large categories comes from.

Runs the completion kernel one record at a time on the bundled example's DP aggregates (ε = 4)
and prints, per attribute, its budget (DP 1-count), the budget left when the T = N records are
made, and the records holding it; "extra" = records - budget used = picks of the completion step
(raw aggregate weights), which only happen once the budget-respecting candidates are exhausted.

    .venv/bin/python bench/probe_completion_surplus.py [seed]
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from sds_release.store.params import build_params, dp_params, load_config, prepare_params

from sds_core.data.preparation import prepare
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.marginals.engine import dp_aggregate
from sds_core.synthesis._completion_kernel import synthesize_records_ordered
from sds_core.synthesis._state import BUDGET_LEFT, new_work_state
from sds_core.synthesis.generator import SynthesisParams, default_target, plan_synthesis


def main(seed: int) -> None:
    """Print budgets, budget left and completion picks per attribute."""
    p = build_params(load_config("examples/release.toml"), {"input": "examples/pums_ca_10k.csv"})
    frame = pd.read_csv("examples/pums_ca_10k.csv", dtype=str, keep_default_na=False)
    table = prepare(frame, prepare_params(p, None, list(frame.columns)))
    agg = dp_aggregate(table, dp_params(p), ReleaseRandomness.from_seed(seed)).aggregates
    n = default_target(agg)
    job = plan_synthesis(agg, SynthesisParams(target_number_of_records=n)).job
    lay = job.lay
    dom = agg.domain
    print("column order:", [dom.columns[c] for c in job.settings.col_order])
    work = new_work_state(lay.budget, lay.counts.size, lay.triples.count, job.n_cols)
    rng = np.random.default_rng(seed)
    recs, resets, prev_left = [], [], work.counters[BUDGET_LEFT]
    while len(recs) < n:
        out = np.empty((1, job.n_cols), dtype=np.int64)
        synthesize_records_ordered(out, rng.random(job.n_cols), lay, job.settings, work)
        if work.counters[BUDGET_LEFT] > prev_left:
            resets.append(len(recs))
        prev_left = work.counters[BUDGET_LEFT]
        recs.append(out[0])
    arr = np.array(recs)
    print(
        f"budget cycles restarted at records {resets}; budget left {prev_left} of "
        f"{lay.budget.sum()}"
    )
    made = np.bincount(arr[arr >= 0], minlength=lay.budget.size)
    used = lay.budget - work.avail
    for c in range(dom.n_columns):
        lo, hi = dom.offsets[c], dom.offsets[c + 1]
        print(
            f"{dom.columns[c]}: budget {lay.budget[lo:hi].sum()}, used {used[lo:hi].sum()}, "
            f"records {made[lo:hi].sum()}"
        )
        for a in range(lo, hi):
            if lay.budget[a] > 0:
                print(
                    f"   {dom.labels[c][a - lo]:>16} budget {lay.budget[a]:6d} left "
                    f"{work.avail[a]:6d} records {made[a]:6d} extra {made[a] - used[a]:+6d}"
                )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
