"""The length-1 candidates are the values that survive contribution bounding (issue #27 point 4).

A record with more values than Δ_1 keeps Δ_1 of them; the values it dropped, when no other
record holds them, must not be candidates: ρ_1 spends δ/2 on at most Δ_1 new values.
"""

from __future__ import annotations

import numpy as np

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.marginals.engine import aggregate_length, plan_release
from sds_core.marginals.params import DpParams

N_COLS = 24
BACKGROUND = 3000


def _table_with_outlier() -> PreparedTable:
    """3000 records holding 2 values each (2 common values per column, so Δ_1 = 2 is the 99th
    percentile), plus one record whose 24 values are its own (code 2 of every column): the
    added record of the neighbouring pair."""
    rng = np.random.default_rng(7)
    codes = np.full((BACKGROUND, N_COLS), -1, dtype=np.int32)
    for row in codes:
        row[rng.choice(N_COLS, 2, replace=False)] = rng.integers(0, 2, 2)
    codes = np.vstack([codes, np.full((1, N_COLS), 2, dtype=np.int32)])
    dom = Domain(
        tuple(f"C{i}" for i in range(N_COLS)),
        tuple(("a", "b", "unique") for _ in range(N_COLS)),
    )
    return PreparedTable(dom, codes)


def _unique_ids(table: PreparedTable) -> np.ndarray:
    """Global attribute ids of the outlier's values (code 2 of every column)."""
    return np.array([table.domain.offsets[j] + 2 for j in range(N_COLS)])


def test_length_one_candidates_exclude_values_dropped_by_bounding() -> None:
    """With Δ_1 = 2, the outlier keeps 2 of its 24 values: |V_1| = 48 common + 2."""
    table = _table_with_outlier()
    params = DpParams(epsilon=4.0, delta=1e-6, reporting_length=1, sensitivity_cap=2)
    plan = plan_release(params, BACKGROUND)
    step = aggregate_length(
        table, 1, {}, plan, params, ReleaseRandomness.from_seed(3), release_label="t"
    )
    assert step.allowed_sensitivity == 2
    assert step.n_candidates == 2 * N_COLS + 2


def test_an_added_records_values_are_released_with_probability_at_most_half_delta() -> None:
    """P(any of the outlier's values is released) <= δ/2, measured over 400 release keys.

    δ = 0.5 makes ρ_1 low enough to observe: each of the Δ_1 kept values (count 1) passes with
    probability <= 1 − (1 − δ/2)^(1/Δ_1). The 22 dropped values (count 0), were they
    candidates, would pass almost as often: 184/400 releases showed one then (0.46 > δ/2),
    31/400 now.
    """
    table = _table_with_outlier()
    params = DpParams(epsilon=0.3, delta=0.5, reporting_length=1, sensitivity_cap=2)
    plan = plan_release(params, BACKGROUND)
    unique = _unique_ids(table)
    trials, released = 400, 0
    for seed in range(trials):
        step = aggregate_length(
            table, 1, {}, plan, params, ReleaseRandomness.from_seed(seed), release_label="t"
        )
        assert step.allowed_sensitivity == 2
        if np.isin(step.survivors.attrs[:, 0], unique).any():
            released += 1
    # δ/2 = 0.25: at most 100 expected; 3 binomial sd above is 126
    assert released <= 126, f"{released}/{trials} releases showed the outlier's values"
