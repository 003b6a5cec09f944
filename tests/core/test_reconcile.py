"""SynthesisParams.reconcile_one_way: filling the records' surplus empty cells towards the DP
1-counts (sds_core.synthesis.reconcile), its pair guarantee and its post-processing property."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sds_core.data.domain import Domain
from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.marginals.params import DpParams
from sds_core.synthesis.generator import SynthesisParams, synthesize
from sds_core.synthesis.reconcile import reconcile_one_way

AB = Domain(("A", "B"), (("a1", "a2"), ("b1", "b2", "b3")))


def _agg(counts: dict[str, int], n: int) -> AggregateSet:
    return AggregateSet.from_text_dict(AB, counts, 2, protected_number_of_records=n, is_dp=True)


def _random_table(rng: np.random.Generator, n: int, cards: tuple[int, ...]) -> PreparedTable:
    dom = Domain(
        tuple(f"C{j}" for j in range(len(cards))),
        tuple(tuple(f"v{i:02d}" for i in range(c)) for c in cards),
    )
    cols = [rng.integers(-1, c, size=n) for c in cards]
    cols[1] = np.where(
        rng.random(n) < 0.6, np.minimum(np.maximum(cols[0], 0), cards[1] - 1), cols[1]
    )
    return PreparedTable(dom, np.stack(cols, axis=1).astype(np.int32))


def _thin(agg: AggregateSet, rng: np.random.Generator, keep: float) -> AggregateSet:
    """Drop a random share of the combinations of length >= 2 (as thresholds do)."""
    by_len = {}
    for k, cc in agg.by_len.items():
        mask = np.ones(len(cc), dtype=bool) if k == 1 else rng.random(len(cc)) < keep
        by_len[k] = CombinationCounts(cc.attrs[mask], cc.counts[mask])
    return AggregateSet(
        agg.domain, agg.reporting_length, by_len, agg.protected_number_of_records, is_dp=True
    )


def _one_way_gap(table: PreparedTable, agg: AggregateSet) -> float:
    """Sum over columns of the TVD between the table's column shares and the DP 1-counts'."""
    dom, c1 = agg.domain, agg.counts_of(1)
    n = agg.protected_number_of_records or table.n_records
    gap = 0.0
    for j, k in enumerate(dom.cardinalities):
        dp = np.zeros(k + 1)
        ids = c1.attrs[:, 0]
        inside = (ids >= dom.offsets[j]) & (ids < dom.offsets[j + 1])
        dp[ids[inside] - dom.offsets[j]] = c1.counts[inside]
        dp[k] = max(n - dp[:k].sum(), 0)
        col = np.where(table.codes[:, j] < 0, k, table.codes[:, j])
        made = np.bincount(col, minlength=k + 1).astype(float)
        gap += 0.5 * float(np.abs(made / made.sum() - dp / dp.sum()).sum())
    return gap


def test_off_by_default() -> None:
    """The default mode does not reconcile (its records and release hashes are unchanged)."""
    assert SynthesisParams().reconcile_one_way is False


def test_fills_surplus_empty_cells_with_reported_pairs_by_deficit() -> None:
    """B is never empty per its 1-counts: empty B cells get the missing values, pairs respected."""
    agg = _agg({"A:a1": 6, "A:a2": 4, "B:b1": 5, "B:b2": 3, "B:b3": 2, "A:a1;B:b1": 5,
                "A:a1;B:b2": 1, "A:a2;B:b2": 2, "A:a2;B:b3": 2}, n=10)  # fmt: skip
    # b1: 3 of 5 made, b2: 1 of 3, b3: 0 of 2; six records lack B, the 1-counts say none should
    codes = np.array([[0, 0], [0, 0], [0, 0], [0, 1], [0, -1], [0, -1], [1, -1], [1, -1], [1, -1],
                      [1, -1]], dtype=np.int32)  # fmt: skip
    for seed in range(5):
        out = reconcile_one_way(PreparedTable(AB, codes), agg, rng=np.random.default_rng(seed))
        assert np.array_equal(out.codes[:, 0], codes[:, 0])
        assert np.array_equal(out.codes[:4], codes[:4])  # filled cells are never changed
        b = out.codes[4:, 1]
        assert set(b[:2].tolist()) <= {-1, 0, 1}  # a1 is reported with b1, b2 only
        assert set(b[2:].tolist()) <= {-1, 1, 2}  # a2 with b2, b3 only
        made = np.bincount(out.codes[:, 1][out.codes[:, 1] >= 0], minlength=3)
        assert (made <= [5, 3, 2]).all()  # never beyond a value's 1-count
        assert (b >= 0).sum() >= 4  # worst order: both a1 take b2, two a2 find b2 used up


def test_nothing_to_fill_leaves_the_table() -> None:
    """Records as full as the 1-counts say come back unchanged."""
    agg = _agg({"A:a1": 2, "B:b1": 1, "A:a1;B:b1": 1}, n=2)
    codes = np.array([[0, 0], [0, -1]], dtype=np.int32)
    out = reconcile_one_way(PreparedTable(AB, codes), agg, rng=np.random.default_rng(0))
    assert np.array_equal(out.codes, codes)


@pytest.mark.parametrize("r", [2, 3])
def test_pair_guarantee_and_closer_one_way_on_random_aggregates(r: int) -> None:
    """No unreported combination of length <= 2, and the columns get closer to the DP 1-counts."""
    rng = np.random.default_rng(77 + r)
    for trial in range(3):
        table = _random_table(rng, 500, (2, 9, 4, 12, 3))
        agg = _thin(exact_aggregates(table, r), rng, keep=0.6 + 0.1 * trial)
        params = SynthesisParams(target_number_of_records=500)
        plain = synthesize(agg, params, rng=np.random.default_rng(trial))
        both = SynthesisParams(target_number_of_records=500, reconcile_one_way=True)
        out = synthesize(agg, both, rng=np.random.default_rng(trial))
        assert out.n_records == plain.n_records
        reported = {k for k in agg.to_text_dict() if k.count(";") <= 1}
        made = exact_aggregates(out, 2).to_text_dict()
        assert set(made) <= reported
        assert _one_way_gap(out, agg) < _one_way_gap(plain, agg)


def test_same_published_aggregates_same_records() -> None:
    """Post-processing: two tables with equal DP aggregates give identical reconciled records."""
    even, odd = ["xxx", "xyy", "yxy", "yyx"], ["xxy", "xyx", "yxx", "yyy"]

    def release(rows: list[str]) -> AggregateSet:
        frame = pd.DataFrame([list(r) for r in rows * 60], columns=["A", "B", "C"])
        params = DpParams(epsilon=8.0, delta=1e-6, reporting_length=2)
        return dp_aggregate(prepare(frame), params, ReleaseRandomness.from_seed(4)).aggregates

    a_even, a_odd = release(even), release(odd)
    assert a_even.to_text_dict() == a_odd.to_text_dict()
    params = SynthesisParams(target_number_of_records=240, reconcile_one_way=True)
    a = synthesize(a_even, params, rng=np.random.default_rng(1))
    b = synthesize(a_odd, params, rng=np.random.default_rng(1))
    assert np.array_equal(a.codes, b.codes)


def test_in_place_changes_the_given_codes_with_the_same_draws() -> None:
    """``in_place``: the caller's codes become the reconciled records (the same records and
    draws as a copy); by default the given table is left as it was."""
    rng = np.random.default_rng(5)
    agg = _thin(exact_aggregates(_random_table(rng, 400, (2, 9, 4, 12, 3)), 2), rng, keep=0.6)
    table = synthesize(agg, SynthesisParams(target_number_of_records=400), rng=rng)
    before = table.codes.copy()
    copied = reconcile_one_way(table, agg, rng=np.random.default_rng(3))
    assert np.array_equal(table.codes, before)  # untouched
    assert not np.array_equal(copied.codes, before)  # something was re-drawn
    owned = PreparedTable(table.domain, before.copy())
    done = reconcile_one_way(owned, agg, rng=np.random.default_rng(3), in_place=True)
    assert np.array_equal(done.codes, copied.codes)
    assert np.shares_memory(done.codes, owned.codes)  # no copy of the records
