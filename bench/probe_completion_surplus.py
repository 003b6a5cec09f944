"""Probe (issue 22): where the default records' surplus of large categories comes from.

Runs the completion kernel one record at a time on the bundled example's DP aggregates (ε = 4)
and prints, per attribute, its budget (DP 1-count), the budget left when the T = N records are
made, and the records holding it; "extra" = records - budget used = picks of the completion step
(raw aggregate weights), which only happen once the budget-respecting candidates are exhausted.

    .venv/bin/python bench/probe_completion_surplus.py [seed]
"""

import sys, numpy as np, pandas as pd
from release_store.params import load_config, build_params, prepare_params, dp_params
from sds_core.data.preparation import prepare
from sds_core.marginals.engine import dp_aggregate
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.synthesis.generator import plan_synthesis, SynthesisParams, default_target
from sds_core.synthesis._state import new_work_state, BUDGET_LEFT, RECORDS_MADE
from sds_core.synthesis._completion_kernel import synthesize_records_ordered

seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
p = build_params(load_config("examples/release.toml"), {"input": "examples/pums_ca_10k.csv"})
frame = pd.read_csv("examples/pums_ca_10k.csv", dtype=str, keep_default_na=False)
t = prepare(frame, prepare_params(p, None, list(frame.columns)))
res = dp_aggregate(t, dp_params(p), ReleaseRandomness.from_seed(seed))
agg = res.aggregates
n = default_target(agg)
plan = plan_synthesis(agg, SynthesisParams(target_number_of_records=n))
job = plan.job
lay = job.lay
print(
    "col_order",
    [agg.domain.columns[c] for c in job.settings.col_order],
    "fill",
    np.round(job.settings.fill_rate, 3),
)
work = new_work_state(lay.budget, lay.counts.size, lay.triples.count, job.n_cols)
rng = np.random.default_rng(seed)
recs = []
resets = []
prev_left = work.counters[BUDGET_LEFT]
while len(recs) < n:
    out = np.empty((1, job.n_cols), dtype=np.int64)
    k, _ = synthesize_records_ordered(out, rng.random(job.n_cols), lay, job.settings, work)
    left = work.counters[BUDGET_LEFT]
    if left > prev_left:
        resets.append(len(recs))
    prev_left = left
    recs.append(out[0])
recs = np.array(recs)
print("resets at", resets, "budget left at end", work.counters[BUDGET_LEFT], "of", lay.budget.sum())
# per attribute: budget, used (budget - avail), made
made = np.bincount(recs[recs >= 0], minlength=lay.budget.size)
dom = agg.domain
ac = dom.attribute_columns()
for c in range(dom.n_columns):
    lo, hi = dom.offsets[c], dom.offsets[c + 1]
    print(
        dom.columns[c],
        "budget",
        lay.budget[lo:hi].sum(),
        "used",
        (lay.budget - work.avail)[lo:hi].sum(),
        "made",
        made[lo:hi].sum(),
    )
    for a in range(lo, hi):
        if lay.budget[a] > 0:
            used = lay.budget[a] - work.avail[a]
            print(
                f"   {dom.labels[c][a - lo]:>14} budget {lay.budget[a]:5d} left {work.avail[a]:5d} made {made[a]:5d} extra {made[a] - used:+5d}"
            )
# when does the budget run out vs record index: fraction of records made per 10% with all-budget picks
