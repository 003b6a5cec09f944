"""Tests of sds_core.marginals.engine: stages, reproducibility, noise spread, thresholds,
finalize."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from table_fixtures import table_from_rows

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.dp.accounting import default_delta
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.marginals.aggregates import CombinationCounts
from sds_core.marginals.engine import (
    adaptive_threshold,
    aggregate_length,
    dp_aggregate,
    finalize,
    first_threshold,
    plan_release,
    protect_record_count,
)
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.marginals.params import DpParams, FabricationMode


def _uniform_table(n: int, n_cols: int, card: int, seed: int) -> PreparedTable:
    rng = np.random.default_rng(seed)
    dom = Domain(
        tuple(f"C{i}" for i in range(n_cols)),
        tuple(tuple(f"v{j}" for j in range(card)) for _ in range(n_cols)),
    )
    return PreparedTable(dom, rng.integers(0, card, (n, n_cols)).astype(np.int32))


def _mixed_table(n: int, seed: int) -> PreparedTable:
    """Skewed values and empty cells: bounding, fabrication and normalisation all happen."""
    rng = np.random.default_rng(seed)
    cards = [2, 3, 5, 8, 4, 6]
    codes = np.stack([np.minimum(rng.geometric(0.4, n) - 1, c - 1) for c in cards], axis=1).astype(
        np.int32
    )
    codes[rng.random(codes.shape) < 0.15] = -1
    dom = Domain(
        tuple(f"C{i}" for i in range(len(cards))),
        tuple(tuple(f"v{j}" for j in range(c)) for c in cards),
    )
    return PreparedTable(dom, codes)


def _same(a, b) -> bool:
    return a.by_len.keys() == b.by_len.keys() and all(
        np.array_equal(a.by_len[k].attrs, b.by_len[k].attrs)
        and np.array_equal(a.by_len[k].counts, b.by_len[k].counts)
        for k in a.by_len
    )


def test_same_key_same_data_is_bit_identical_and_key_matters() -> None:
    """Same key + data => identical aggregates and report; another key => different noise."""
    table = _mixed_table(3000, 0)
    params = DpParams(epsilon=2.0, reporting_length=3)
    a = dp_aggregate(table, params, ReleaseRandomness.from_seed(1))
    b = dp_aggregate(table, params, ReleaseRandomness.from_seed(1))
    c = dp_aggregate(table, params, ReleaseRandomness.from_seed(2))
    assert a.aggregates.is_dp and _same(a.aggregates, b.aggregates)
    assert a.report.to_dict() == b.report.to_dict()
    assert not _same(a.aggregates, c.aggregates)


def test_stage_by_stage_equals_all_at_once() -> None:
    """Running the stages separately (fresh randomness objects, as on resume) gives the same."""
    table = _mixed_table(2000, 1)
    params = DpParams(epsilon=3.0, reporting_length=3)
    whole = dp_aggregate(table, params, ReleaseRandomness.from_seed(5), release_label="r1")
    key = ReleaseRandomness.from_seed(5).key
    count = protect_record_count(table, params, ReleaseRandomness(key), release_label="r1")
    plan = plan_release(params, count.protected_number_of_records)
    survivors: dict[int, CombinationCounts] = {}
    for k in (1, 2, 3):
        step = aggregate_length(
            table,
            k,
            dict(survivors),
            plan,
            params,
            ReleaseRandomness(key),
            release_label="r1",
            chunk_records=257,  # partition size must not change the result
        )
        survivors[k] = step.survivors
    staged = finalize(
        survivors,
        domain=table.domain,
        reporting_length=3,
        protected_number_of_records=count.protected_number_of_records,
    )
    assert _same(whole.aggregates, staged)
    assert staged.protected_number_of_records == whole.aggregates.protected_number_of_records


def test_noise_spread_matches_sigma_sqrt_delta() -> None:
    """Noisy minus exact (no record over the limit) has std ≈ σ_k·√Δ_k and mean ≈ 0."""
    table = _uniform_table(40_000, 6, 5, 3)  # every record has 6 attributes, pair counts ~1600
    params = DpParams(epsilon=2.0, reporting_length=2, accounting="reference")
    exact = exact_aggregates(table, 2).to_text_dict()
    diffs: dict[int, list[int]] = {1: [], 2: []}
    for seed in range(8):
        res = dp_aggregate(table, params, ReleaseRandomness.from_seed(100 + seed))
        allowed = res.report.allowed_sensitivity_by_len
        assert allowed == (6, 15)
        for text, c in res.aggregates.to_text_dict().items():
            diffs[text.count(";") + 1].append(c - exact[text])
        assert len(res.aggregates.counts_of(2)) == 15 * 25  # nothing suppressed at these counts
    for k in (1, 2):
        expected = res.report.sigma_by_len[k - 1] * math.sqrt(allowed[k - 1])
        d = np.array(diffs[k], dtype=float)
        assert abs(d.mean()) < 4 * expected / math.sqrt(d.size)
        assert d.std() == pytest.approx(expected, rel=0.12 if k == 1 else 0.06)


def _diagonal_table(groups: int, per_group: int) -> PreparedTable:
    """3 columns x `groups` values; only (v_i, v_i, v_i) records: most pairs have count 0."""
    dom = Domain(
        ("A", "B", "C"), tuple(tuple(f"v{i:02d}" for i in range(groups)) for _ in range(3))
    )
    codes = np.repeat(np.arange(groups, dtype=np.int32), per_group)[:, None].repeat(3, axis=1)
    return PreparedTable(dom, codes)


@pytest.mark.parametrize("eta", [1.0, 0.5, 0.2])
def test_adaptive_eta_fabrication_rate(eta: float) -> None:
    """Under adaptive η, about η/2 of the zero-count candidates survive the threshold."""
    groups = 20
    table = _diagonal_table(groups, 1000)
    params = DpParams(
        epsilon=1.0,
        reporting_length=2,
        fabrication_mode=FabricationMode.custom_adaptive({2: eta}),
    )
    rnd = ReleaseRandomness.from_seed(7)
    count = protect_record_count(table, params, rnd, release_label="f")
    plan = plan_release(params, count.protected_number_of_records)
    s1 = aggregate_length(table, 1, {}, plan, params, rnd, release_label="f")
    assert len(s1.survivors) == 3 * groups
    s2 = aggregate_length(table, 2, {1: s1.survivors}, plan, params, rnd, release_label="f")
    assert s2.n_candidates == 3 * groups * groups
    codes = s2.survivors.attrs % groups
    fabricated = int((codes[:, 0] != codes[:, 1]).sum())
    zero_count = 3 * groups * (groups - 1)
    assert fabricated / zero_count == pytest.approx(eta / 2, abs=0.045)
    assert s2.threshold == pytest.approx(
        adaptive_threshold(plan.sigma_by_len[1], s2.allowed_sensitivity, eta)
    )


def test_finalize_output_is_consistent() -> None:
    """DP output: positive counts, no child above a parent, no missing sub-combination."""
    res = dp_aggregate(
        _mixed_table(5000, 2), DpParams(reporting_length=4), ReleaseRandomness.from_seed(3)
    )
    flat = {}
    for cc in res.aggregates.by_len.values():
        for row, c in zip(cc.attrs.tolist(), cc.counts.tolist(), strict=True):
            flat[tuple(row)] = c
    assert len(res.aggregates.counts_of(3)) > 0
    for combo, c in flat.items():
        assert c > 0
        for sub_len in range(1, len(combo)):
            for sub in itertools.combinations(combo, sub_len):
                assert sub in flat and c <= flat[sub]


def test_report_and_thresholds() -> None:
    """Report: spends add up to ε, δ default from the protected count, ρ_1 by the formula."""
    table = _mixed_table(4000, 4)
    res = dp_aggregate(table, DpParams(), ReleaseRandomness.from_seed(9))
    rep = res.report
    m = res.aggregates.protected_number_of_records
    assert rep.delta == pytest.approx(default_delta(m))
    assert math.fsum(s.epsilon for s in rep.spends) == pytest.approx(4.0)
    assert [s.stage for s in rep.spends] == ["count", "aggregate-1", "aggregate-2", "aggregate-3"]
    parts = rep.delta_parts  # ρ_1 at δ/2 less the samplers' part; all of it within δ
    assert rep.threshold_by_len[0] == pytest.approx(
        first_threshold(rep.sigma_by_len[0], rep.allowed_sensitivity_by_len[0], 2 * parts.threshold)
        + 1
    )  # + 1: the shift that keeps the δ/2 bound for discrete Gaussian noise
    assert rep.threshold_by_len[1] == 0.0  # uncontrolled: η = 1
    assert 0 < parts.sampler < 1e-12 and parts.zcdp == rep.delta / 2
    assert rep.effective_delta <= rep.delta and rep.effective_delta == pytest.approx(rep.delta)
    json.dumps(rep.to_dict())


def test_threshold_formulas() -> None:
    """ρ_1 reproduces the spec's live example; adaptive η=1 gives 0, η→0 grows."""
    assert first_threshold(7.1828, 9, 1.8929e-5) == pytest.approx(103.2, abs=0.1)
    assert adaptive_threshold(3.0, 4, 1.0) == 0.0
    assert adaptive_threshold(3.0, 4, 0.01) == pytest.approx(6 * 2.5758, rel=1e-3)


def test_progress_messages_and_bad_input() -> None:
    """progress gets one message per stage; an empty table raises SdsInputError."""
    msgs: list[str] = []
    dp_aggregate(
        _mixed_table(500, 5),
        DpParams(reporting_length=2),
        ReleaseRandomness.from_seed(1),
        progress=msgs.append,
    )
    assert len(msgs) == 3 and msgs[1].startswith("length 1")
    empty = table_from_rows(["A", "B"], [])
    with pytest.raises(SdsInputError, match="table is empty"):
        dp_aggregate(empty, DpParams(), ReleaseRandomness.from_seed(1))
    table = _mixed_table(100, 6)
    params = DpParams(delta=1e-5)
    plan = plan_release(params, 100)
    with pytest.raises(SdsInputError, match="needs the survivors of length 1"):
        aggregate_length(
            table, 2, {}, plan, params, ReleaseRandomness.from_seed(1), release_label="x"
        )
    with pytest.raises(SdsInputError, match=r"length k must be in 1\.\.reporting_length"):
        aggregate_length(
            table, 4, {}, plan, params, ReleaseRandomness.from_seed(1), release_label="x"
        )


def test_contribution_bounding_is_uniform_and_partition_independent() -> None:
    """Over-limit records keep exactly Δ random tuples, each with probability Δ/w, whatever the
    chunking or the split into partitions (priorities keyed by the global row number)."""
    from sds_core.marginals.combinations import build_lookups, occurring_attributes
    from sds_core.marginals.contributions import candidate_counts, dropped_contributions

    table = _uniform_table(200, 5, 2, 8)  # every record: 5 attributes, 10 pairs
    dom = table.domain
    s1 = CombinationCounts(occurring_attributes(dom, table.codes), np.ones(10, dtype=np.int64))
    from sds_core.marginals.combinations import candidates_from_survivors

    cands = candidates_from_survivors(s1, dom)
    n_c = cands.shape[0]
    lookups = build_lookups(dom, cands)
    counts, valid = candidate_counts(table.codes, lookups, n_c, 64)
    assert (valid == 10).all() and counts.sum() == 2000
    allowed = 3

    def bounded(key: int, chunk: int) -> np.ndarray:
        drop = dropped_contributions(
            table.codes, valid, lookups, n_c, allowed, record_key=key, chunk=chunk
        )
        return counts - drop

    a, b = bounded(1, 7), bounded(1, 500)
    assert np.array_equal(a, b)
    parts = np.zeros_like(counts)
    for lo, hi in ((0, 13), (13, 120), (120, 200)):  # three partitions with their row offsets
        parts += dropped_contributions(
            table.codes[lo:hi],
            valid[lo:hi],
            lookups,
            n_c,
            allowed,
            record_key=1,
            first_row=lo,
            chunk=64,
        )
    assert np.array_equal(counts - parts, a)
    assert a.sum() == 200 * allowed and (a <= counts).all() and (a >= 0).all()
    total = np.zeros_like(counts)
    for key in range(200):
        total += bounded(1000 + key, 64)
    # E[bounded count] = exact count · Δ/w for every candidate
    expected = counts * 200 * allowed / 10
    assert np.abs(total - expected).max() < 5 * np.sqrt(expected.max())


def test_zero_allowed_sensitivity_clears_the_length_and_longer() -> None:
    """When the DP percentile returns Δ_k = 0, nothing of length >= k is released."""
    rng = np.random.default_rng(4)
    codes = np.full((50_000, 3), -1, dtype=np.int32)
    codes[np.arange(50_000), rng.integers(0, 3, 50_000)] = rng.integers(
        0, 2, 50_000
    )  # one attr each
    table = PreparedTable(Domain(("A", "B", "C"), (("a", "b"),) * 3), codes)
    res = dp_aggregate(table, DpParams(reporting_length=3), ReleaseRandomness.from_seed(2))
    assert res.report.allowed_sensitivity_by_len[1:] == (0, 0)
    assert len(res.aggregates.counts_of(1)) == 6
    assert len(res.aggregates.counts_of(2)) == 0 and len(res.aggregates.counts_of(3)) == 0
    assert res.report.to_dict()["threshold_by_len"][1:] == [None, None]


def test_finalize_rounds_float_counts_half_away_from_zero() -> None:
    """Float survivor counts are rounded half away from zero; those rounding to 0 are dropped."""
    dom = Domain(("A", "B"), (("a1", "a2", "a3"), ("b1",)))
    s1 = CombinationCounts(
        np.array([[0], [1], [2], [3]], dtype=np.int32), np.array([0.4, 0.5, 2.5, 7.0])
    )
    agg = finalize({1: s1}, domain=dom, reporting_length=2, protected_number_of_records=9)
    assert agg.to_text_dict() == {"A:a2": 1, "A:a3": 3, "B:b1": 7}
    assert agg.is_dp and agg.protected_number_of_records == 9


@pytest.mark.parametrize("s", [0.7, 2.0, 5.5, 21.3])
def test_discrete_shift_keeps_the_first_threshold_tail_bound(s: float) -> None:
    """With the +1 shift, P(N_Z(0,s²) > ρ_1 − 1 + 1) <= the continuous tail the proof uses.

    (Without it the bound fails: s=2, z=3.9 gives 7.6e-5 discrete vs 4.8e-5 continuous.)
    """
    from statistics import NormalDist

    from sds_core.marginals.engine import DISCRETE_SHIFT

    x = np.arange(-int(40 * s) - 10, int(40 * s) + 11)
    pmf = np.exp(-(x.astype(float) ** 2) / (2 * s * s))
    pmf /= pmf.sum()
    for z in (0.3, 1.0, 2.5, 3.7, 4.4):
        t = s * z  # = ρ_1 − 1 of the reference formula
        discrete_tail = pmf[x > t + DISCRETE_SHIFT].sum()
        assert discrete_tail <= 1 - NormalDist(0, s).cdf(t)


def test_compiled_counting_equals_numpy_counting(monkeypatch) -> None:
    """Counts and |W_j| from distinct-row compiled counting equal per-record numpy counting."""
    from sds_core.marginals import contributions
    from sds_core.marginals.combinations import build_lookups, candidates_from_survivors

    rng = np.random.default_rng(8)
    codes = rng.integers(-1, 4, size=(3000, 5)).astype(np.int32)
    codes[1000:2000] = codes[:1000]  # many repeated records
    table = table_from_rows(
        [f"C{j}" for j in range(5)],
        [["" if v < 0 else f"v{v}" for v in row] for row in codes.tolist()],
    )
    dom = table.domain
    s1 = CombinationCounts(
        np.arange(dom.n_attributes, dtype=np.int32).reshape(-1, 1),
        np.ones(dom.n_attributes, dtype=np.int64),
    )
    cands = candidates_from_survivors(s1, dom)
    cands3 = candidates_from_survivors(CombinationCounts(cands, np.ones(len(cands), np.int64)), dom)
    for cand, budget in ((cands, 1 << 26), (cands3, 300)):  # dense and binary-search lookups
        lookups = build_lookups(dom, cand, n_records=table.n_records, dense_budget=budget)
        local, [ref_valid] = contributions._count_numpy([table.codes], lookups, 700)
        ref = (local, ref_valid)
        for chunk in (700, 5000):
            monkeypatch.setattr(contributions, "HAVE_NUMBA", True)
            got = contributions.candidate_counts(table.codes, lookups, cand.shape[0], chunk)
            monkeypatch.setattr(contributions, "_row_multipliers", lambda codes: None)
            one_by_one = contributions.candidate_counts(table.codes, lookups, cand.shape[0], chunk)
            monkeypatch.undo()
            monkeypatch.setattr(contributions, "HAVE_NUMBA", False)
            plain = contributions.candidate_counts(table.codes, lookups, cand.shape[0], chunk)
            monkeypatch.undo()
            for counts, valid in (got, one_by_one, plain):
                assert np.array_equal(valid, ref[1]) and valid.dtype == np.int32
                assert np.array_equal(counts, plain[0]) and counts.dtype == np.int64
        assert plain[0].sum() == ref[1].sum() > 0
        # several record sets (one worker's partitions) share one accumulator: same sums
        many, valids = contributions.candidate_counts_many(
            [table.codes[:1100], table.codes[1100:1500], table.codes[1500:]],
            lookups,
            len(cand),
            700,
        )
        assert np.array_equal(many, plain[0]) and np.array_equal(np.concatenate(valids), ref[1])


def test_compiled_survivor_selection_equals_numpy(monkeypatch) -> None:
    """Thresholding noisy counts: compiled and numpy paths keep the same rows and counts."""
    import importlib

    dpa = importlib.import_module(
        "sds_core.marginals.engine"
    )  # the package exports a same-named fn
    rng = np.random.default_rng(3)
    cands = np.sort(rng.integers(0, 50, size=(5000, 3)), axis=1).astype(np.int32)
    counts = rng.integers(0, 30, size=5000)
    noise = rng.integers(-20, 20, size=5000)
    for threshold in (-5.0, 0.0, 7.5, 12.0, math.inf):
        monkeypatch.setattr(dpa, "HAVE_NUMBA", True)
        a = dpa._survivors(cands, counts + noise, threshold)
        monkeypatch.setattr(dpa, "HAVE_NUMBA", False)
        b = dpa._survivors(cands, counts + noise, threshold)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
        assert a[0].dtype == np.int32 and a[1].dtype == np.int64
        assert (a[1] > max(threshold, 0)).all()
