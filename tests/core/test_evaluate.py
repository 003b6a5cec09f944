"""Tests of sds_core.evaluation.metrics: hand-computed SDS metrics, risk, TVD and the NOT-DP
labels."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.errors import SdsInputError
from sds_core.evaluation.metrics import (
    NOT_DP_NOTE,
    aggregate_metrics,
    marginal_fidelity,
    risk_metrics,
)
from sds_core.evaluation.params import EvaluationParams
from sds_core.evaluation.release import evaluate_release
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from sds_core.marginals.exact_counts import exact_aggregates

AB = Domain(("A", "B"), (("a1", "a2"), ("b1",)))
S = {"A:a1": 20, "A:a2": 5, "B:b1": 12, "A:a1;B:b1": 10}
T = {"A:a1": 18, "B:b1": 15, "A:a1;B:b1": 9, "A:a2;B:b1": 3}


def _agg(counts: dict[str, int], domain: Domain = AB, r: int = 2) -> AggregateSet:
    return AggregateSet.from_text_dict(domain, counts, r)


def test_error_metrics_by_hand() -> None:
    """Suppressed/fabricated % over |S|, mean count over S, mean error over S and T, expansion."""
    m = aggregate_metrics(_agg(S), _agg(T), resolution=10, n_sensitive=100, n_target=110)
    assert m["differentially_private"] is False
    assert m["suppressed_pct"] == pytest.approx(25.0)  # A:a2 missing in T
    assert m["fabricated_pct"] == pytest.approx(25.0)  # A:a2;B:b1 fabricated, 1 / |S| = 4
    assert m["mean_count"] == pytest.approx(47 / 4)
    assert m["mean_error"] == pytest.approx((2 + 3 + 1) / 3)
    assert m["by_length"][1]["mean_count"] == pytest.approx(37 / 3)
    assert m["by_length"][1]["mean_error"] == pytest.approx(2.5)
    assert m["by_length"][2]["mean_error"] == pytest.approx(1.0)
    assert m["by_length"][2]["fabricated_pct"] == pytest.approx(100.0)
    assert m["record_expansion_pct"] == pytest.approx(10.0)


def test_preservation_buckets_and_mpe_by_hand() -> None:
    """Items: S with count >= 10 plus T not yet included; bins 10, 20; MPE = mean over bins."""
    m = aggregate_metrics(_agg(S), _agg(T), resolution=10, n_sensitive=None, n_target=None)
    by_len = m["preservation_by_length"]
    assert by_len[1]["count_preservation"] == pytest.approx((0.9 + 1.0) / 2)
    assert by_len[1]["mean_proportional_error"] == pytest.approx((0.1 + 0.25) / 2)
    assert by_len[1]["mean_combo_count"] == pytest.approx(16.5)
    assert by_len[2]["count_preservation"] == pytest.approx(0.45)
    assert by_len[2]["mean_proportional_error"] == pytest.approx(0.55)
    assert by_len[2]["mean_combo_length"] == pytest.approx(2.0)
    by_count = m["preservation_by_count"]
    assert list(by_count) == [20, 10]
    assert by_count[20]["count_preservation"] == pytest.approx(0.95)
    assert by_count[10]["mean_proportional_error"] == pytest.approx(0.55)
    assert m["mean_proportional_error"] == pytest.approx((0.175 + 0.55) / 2)
    assert m["record_expansion_pct"] is None


def test_empty_count_bins_are_zero_and_count_in_mpe() -> None:
    """A T count of 50 creates bins 10, 20, 40, 80; empty bins are zeros and enter the MPE."""
    t = dict(T, **{"A:a1": 50})
    m = aggregate_metrics(_agg(S), _agg(t), resolution=10, n_sensitive=None, n_target=None)
    by_count = m["preservation_by_count"]
    assert list(by_count) == [80, 40, 20, 10]
    assert by_count[40]["n_combinations"] == 0 and by_count[40]["mean_proportional_error"] == 0
    assert by_count[80]["mean_proportional_error"] == pytest.approx(1.5)  # a1: |50 - 20| / 20
    assert by_count[20]["mean_proportional_error"] == pytest.approx(0.25)  # b1 (15)
    assert m["mean_proportional_error"] == pytest.approx((1.5 + 0 + 0.25 + 0.55) / 4)


def test_metrics_match_across_different_domains() -> None:
    """Combinations are matched by text, so a target over a smaller domain still lines up."""
    small = Domain(("A", "B"), (("a1",), ("b1",)))
    t = {"A:a1": 18, "B:b1": 15, "A:a1;B:b1": 9}
    m = aggregate_metrics(_agg(S), _agg(t, small), resolution=10, n_sensitive=None, n_target=None)
    assert m["suppressed_pct"] == pytest.approx(25.0)
    assert m["fabricated_pct"] == pytest.approx(0.0)


def _table(rows: list[list[str]], domain: Domain) -> PreparedTable:
    codes = [
        [labs.index(v) if v else -1 for v, labs in zip(row, domain.labels, strict=True)]
        for row in rows
    ]
    return PreparedTable(domain, np.asarray(codes, dtype=np.int32))


SEED = Domain(("A", "B", "C"), (("a1", "a2"), ("b1", "b2"), ("c1", "c2")))
SEED_ROWS = [
    ["a1", "b1", "c1"],
    ["a1", "b2", "c1"],
    ["a2", "", "c2"],
    ["a2", "b2", "c1"],
    ["a1", "b2", ""],
]


def test_risk_metrics_on_the_seed_example() -> None:
    """Seed table, R=3: 17 combinations, 10 unique, all rare at k=2; every record has a unique."""
    table = _table(SEED_ROWS, SEED)
    agg = exact_aggregates(table, 3)
    m = risk_metrics(agg, table, resolution=2)
    assert m["unique_combinations_pct"] == pytest.approx(100 * 10 / 17)
    assert m["rare_combinations_pct"] == pytest.approx(100 * 10 / 17)
    # the last record (a1, b2) has counts a1:3, b2:3, a1b2:2: neither unique nor rare at k=2
    assert m["records_with_unique_pct"] == pytest.approx(80.0)
    m3 = risk_metrics(agg, table, resolution=3)
    assert m3["records_with_rare_pct"] == pytest.approx(100.0)
    assert m["by_length"][1]["unique_pct"] == pytest.approx(100 * 2 / 6)
    assert m["differentially_private"] is False


def test_tvd_on_tiny_frames() -> None:
    """1-way TVD by hand (empty counted as a value) and 2-way TVD, plus empty-cell shares."""
    o = pd.DataFrame({"A": ["x", "x", "y", ""], "B": ["u", "u", "u", "v"]})
    s = pd.DataFrame({"A": ["x", "y", "y", "y"], "B": ["u", "u", "u", "v"]})
    m = marginal_fidelity(o, s, max_order=3)
    # A: p = (.5, .25, .25), q = (.25, .75, 0) -> .5 ; B identical -> 0
    assert m["tvd_mean_by_order"][1] == pytest.approx(0.25)
    assert m["tvd_max_by_order"][1] == pytest.approx(0.5)
    # pairs: o = {xu:.5, yu:.25, ''v:.25}, s = {xu:.25, yu:.5, yv:.25} -> (.25+.25+.25+.25)/2
    assert m["tvd_mean_by_order"][2] == pytest.approx(0.5)
    assert 3 not in m["tvd_mean_by_order"]
    assert m["empty_cell_share"] == {"original": pytest.approx(1 / 8), "synthetic": 0.0}
    assert m["differentially_private"] is False


def test_tvd_prepared_table_equals_frame_form() -> None:
    """A PreparedTable and its decoded frame give the same TVD; identical tables give 0."""
    table = _table(SEED_ROWS, SEED)
    frame = pd.DataFrame(SEED_ROWS, columns=list(SEED.columns))
    assert marginal_fidelity(table, frame)["tvd_mean_by_order"] == {1: 0.0, 2: 0.0, 3: 0.0}
    other = _table(SEED_ROWS[:3], SEED)
    a = marginal_fidelity(table, other)["tvd_mean_by_order"]
    b = marginal_fidelity(frame, pd.DataFrame(SEED_ROWS[:3], columns=list(SEED.columns)))
    assert a == b["tvd_mean_by_order"]


def test_evaluate_release_is_labelled_not_dp() -> None:
    """evaluate_release bundles every metric and says it is not differentially private."""
    table = _table(SEED_ROWS, SEED)
    dp = exact_aggregates(table, 2)
    out = evaluate_release(table, _table(SEED_ROWS[::-1], SEED), dp, EvaluationParams(2, 2))
    assert out["differentially_private"] is False
    assert "sensitive data" in out["note"]
    assert out["sensitive_vs_synthetic"]["suppressed_pct"] == 0.0
    assert out["marginal_fidelity"]["tvd_mean_by_order"][2] == 0.0
    assert set(out) >= {"sensitive_vs_dp_aggregates", "sensitive_risk", "synthetic_risk"}


X = pd.DataFrame({"A": ["x"]})


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: EvaluationParams(resolution=0), "resolution"),
        (lambda: EvaluationParams(reporting_length=True), "reporting_length"),
        (lambda: marginal_fidelity(X, pd.DataFrame({"B": ["x"]})), "differ"),
        (lambda: marginal_fidelity(X, pd.DataFrame({"A": []})), "non-empty"),
        (
            lambda: aggregate_metrics(_agg(S), _agg(T), resolution=0, n_sensitive=1, n_target=1),
            "resolution",
        ),
    ],
)
def test_bad_input(call: Callable[[], object], match: str) -> None:
    """Invalid parameters and mismatched tables raise SdsInputError naming the problem."""
    with pytest.raises(SdsInputError, match=match):
        call()


# ---- fast paths against plain reference computations (random small tables) ------------------


def _random_table(
    rng: np.random.Generator, cards: list[int], n: int, empty: float, prefix: str = "v"
) -> PreparedTable:
    domain = Domain(
        tuple(f"C{j}" for j in range(len(cards))),
        tuple(tuple(f"{prefix}{i:03d}" for i in range(c)) for c in cards),
    )
    codes = np.column_stack([rng.integers(0, c, n) for c in cards]).astype(np.int32)
    codes[rng.random(codes.shape) < empty] = -1
    return PreparedTable(domain, codes)


def _same(got: object, want: object, path: str = "") -> None:
    """Equal dict keys (in order) and values, floats up to 1e-12."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), path
        for key in want:
            _same(got[key], want[key], f"{path}/{key}")
    elif isinstance(want, float):
        assert isinstance(got, float) and got == pytest.approx(want, rel=1e-12, abs=1e-12), path
    else:
        assert type(got) is type(want) and got == want, path


def _bucket_ref(items: list[tuple[int, int, int]]) -> dict[str, float]:
    if not items:
        return {
            "count_preservation": 0.0,
            "mean_combo_length": 0.0,
            "mean_combo_count": 0.0,
            "mean_proportional_error": 0.0,
            "n_combinations": 0,
        }
    pres = [min(syn / sen, 1.0) if sen > 0 else 0.0 for _, sen, syn in items]
    perr = [abs(syn - sen) / sen if sen > 0 else 1.0 for _, sen, syn in items]
    return {
        "count_preservation": float(np.mean(pres)),
        "mean_combo_length": float(np.mean([k for k, _, _ in items])),
        "mean_combo_count": float(np.mean([syn for _, _, syn in items])),
        "mean_proportional_error": float(np.mean(perr)),
        "n_combinations": len(items),
    }


def _aggregate_metrics_ref(s_agg: AggregateSet, t_agg: AggregateSet, res: int) -> dict:
    """Spec §4 straight from the text dictionaries."""
    s_all, t_all = s_agg.to_text_dict(), t_agg.to_text_dict()
    by_len, items, common_err = {}, [], []
    n_s = n_supp = n_fab = 0
    for k in range(1, s_agg.reporting_length + 1):
        s = {c: v for c, v in s_all.items() if c.count(";") == k - 1}
        t = {c: v for c, v in t_all.items() if c.count(";") == k - 1}
        err = [abs(s[c] - t[c]) for c in s if c in t]
        by_len[k] = {
            "n_sensitive": len(s),
            "n_target": len(t),
            "suppressed_pct": 100.0 * len(s.keys() - t.keys()) / len(s) if s else 0.0,
            "fabricated_pct": 100.0 * len(t.keys() - s.keys()) / len(s) if s else 0.0,
            "mean_count": float(np.mean(list(s.values()))) if s else 0.0,
            "mean_error": float(np.mean(err)) if err else 0.0,
        }
        n_s, common_err = n_s + len(s), common_err + err
        n_supp, n_fab = n_supp + len(s.keys() - t.keys()), n_fab + len(t.keys() - s.keys())
        items += [(k, v, t.get(c, 0)) for c, v in s.items() if v >= res]
        items += [(k, s.get(c, 0), v) for c, v in t.items() if s.get(c, 0) < res]
    max_t = max([v for c, v in t_all.items() if c.count(";") < s_agg.reporting_length] or [0])
    bins = [10]
    while bins[-1] < max_t:
        bins.append(bins[-1] * 2)
    bin_of = [min(np.searchsorted(bins, syn), len(bins) - 1) for _, _, syn in items]
    by_count = {
        bins[i]: _bucket_ref([it for it, b in zip(items, bin_of, strict=True) if b == i])
        for i in reversed(range(len(bins)))
    }
    s_vals = [v for c, v in s_all.items() if c.count(";") < s_agg.reporting_length]
    return {
        "differentially_private": False,
        "note": NOT_DP_NOTE,
        "suppressed_pct": 100.0 * n_supp / n_s if n_s else 0.0,
        "fabricated_pct": 100.0 * n_fab / n_s if n_s else 0.0,
        "mean_count": float(np.sum(s_vals)) / n_s if n_s else 0.0,
        "mean_error": float(np.mean(common_err)) if common_err else 0.0,
        "by_length": by_len,
        "preservation_by_length": {
            k: _bucket_ref([it for it in items if it[0] == k]) for k in by_len
        },
        "preservation_by_count": by_count,
        "mean_proportional_error": float(
            np.mean([b["mean_proportional_error"] for b in by_count.values()])
        ),
        "record_expansion_pct": None,
    }


def _perturbed(agg: AggregateSet, rng: np.random.Generator, shuffle: bool) -> AggregateSet:
    """DP-like aggregates: some combinations dropped, counts moved, rows optionally unsorted."""
    by_len = {}
    for k, cc in agg.by_len.items():
        keep = rng.random(len(cc)) < 0.8
        counts = np.maximum(cc.counts[keep] + rng.integers(-3, 40, int(keep.sum())), 1)
        attrs = cc.attrs[keep]
        if shuffle:
            order = rng.permutation(attrs.shape[0])
            attrs, counts = attrs[order], counts[order]
        by_len[k] = CombinationCounts(np.ascontiguousarray(attrs), counts.astype(np.int64))
    return AggregateSet(agg.domain, agg.reporting_length, by_len, None, is_dp=True)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_aggregate_metrics_equal_reference(seed: int) -> None:
    """Same domain, another domain (texts matched), unsorted rows, R above the column count."""
    rng = np.random.default_rng(seed)
    cards = [3, 1, 5, 2][: 2 + seed]
    table = _random_table(rng, cards, 300, 0.3)
    r = len(cards) + 1  # lengths above the number of columns are empty
    s_agg = exact_aggregates(table, r)
    other = PreparedTable(  # a synthetic table over a domain with extra labels
        Domain(table.domain.columns, tuple((*labs, "zz") for labs in table.domain.labels)),
        _random_table(rng, [c + 1 for c in cards], 250, 0.2).codes,
    )
    targets = [
        exact_aggregates(other, r),
        _perturbed(s_agg, rng, shuffle=False),
        _perturbed(s_agg, rng, shuffle=True),
        exact_aggregates(table, 2),  # shorter target
    ]
    for t_agg in targets:
        for res in (1, 5, 20):
            got = aggregate_metrics(s_agg, t_agg, resolution=res, n_sensitive=None, n_target=7)
            _same(got, _aggregate_metrics_ref(s_agg, t_agg, res))


def _risk_ref(agg: AggregateSet, table: PreparedTable, res: int) -> tuple[float, float]:
    """Records whose smallest rare (0 < count < res... or negative) count is 1 / below res."""
    counts = {
        tuple(row): c
        for k in range(1, agg.reporting_length + 1)
        for row, c in zip(
            agg.counts_of(k).attrs.tolist(), agg.counts_of(k).counts.tolist(), strict=True
        )
    }
    offsets = table.domain.offsets
    uniq = rare = 0
    for row in table.codes.tolist():
        attrs = [offsets[j] + c for j, c in enumerate(row) if c >= 0]
        found = [
            counts[combo]
            for k in range(1, agg.reporting_length + 1)
            for combo in itertools.combinations(attrs, k)
            if counts.get(combo, 0) != 0
        ]  # spec §4: unique = holds a count-1 combination, rare = one with a count < k
        uniq += any(c == 1 for c in found)
        rare += any(c < res for c in found)
    n = table.n_records
    return 100.0 * uniq / n, 100.0 * rare / n


@pytest.mark.parametrize("force_sorted", [False, True])
def test_risk_metrics_equal_reference(monkeypatch: pytest.MonkeyPatch, force_sorted: bool) -> None:
    """Record risk from dense rank tables (or sorted keys) equals a per-record enumeration."""
    from sds_core.evaluation import tables as evaluate_tables

    if force_sorted:
        monkeypatch.setattr(evaluate_tables, "RISK_DENSE_BYTES", 0)
    rng = np.random.default_rng(11)
    for cards, empty, r in (([3, 40, 2, 6], 0.3, 3), ([2, 2], 0.0, 4), ([300, 2], 0.5, 2)):
        table = _random_table(rng, cards, 400, empty)
        exact = exact_aggregates(table, r)
        odd = _perturbed(exact, rng, shuffle=False)
        cc = odd.counts_of(1)  # a zero count is ignored, a negative one is rare
        counts = cc.counts.copy()
        counts[:2] = (0, -2)[: counts.size]
        odd = AggregateSet(odd.domain, r, {**odd.by_len, 1: CombinationCounts(cc.attrs, counts)})
        for agg in (exact, odd):
            for res in (1, 2, 5, 300):
                m = risk_metrics(agg, table, resolution=res)
                want = _risk_ref(agg, table, res)
                assert m["records_with_unique_pct"] == pytest.approx(want[0], abs=1e-12)
                assert m["records_with_rare_pct"] == pytest.approx(want[1], abs=1e-12)


def _tvd_ref(o: pd.DataFrame, s: pd.DataFrame, max_order: int) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for order in range(1, min(max_order, o.shape[1]) + 1):
        for cols in itertools.combinations(list(o.columns), order):
            p = o.groupby(list(cols)).size() / len(o)
            q = s.groupby(list(cols)).size() / len(s)
            diff = p.sub(q, fill_value=0.0).abs().sum()
            out.setdefault(order, []).append(0.5 * float(diff))
    return out


def _decoded(table: PreparedTable) -> pd.DataFrame:
    return pd.DataFrame(
        {
            col: [labs[c] if c >= 0 else "" for c in table.codes[:, j].tolist()]
            for j, (col, labs) in enumerate(
                zip(table.domain.columns, table.domain.labels, strict=True)
            )
        }
    )


@pytest.mark.parametrize("dense_cells", [1 << 22, 6])
def test_marginal_fidelity_equals_reference(
    monkeypatch: pytest.MonkeyPatch, dense_cells: int
) -> None:
    """Dense and sparse (compacted) marginals: TVD equals a groupby computation, any domains."""
    from sds_core.evaluation import metrics as evaluate

    monkeypatch.setattr(evaluate, "DENSE_MARGINAL_CELLS", dense_cells)
    rng = np.random.default_rng(4)
    o = _random_table(rng, [3, 7, 2, 4, 1], 300, 0.25)
    s = _random_table(rng, [4, 5, 2, 4, 1], 200, 0.1, prefix="w" if dense_cells == 6 else "v")
    for top in (1, 3, 9):
        got = marginal_fidelity(o, s, max_order=top)
        want = _tvd_ref(_decoded(o), _decoded(s), top)
        assert got["n_marginals_by_order"] == {k: len(v) for k, v in want.items()}
        for k, v in want.items():
            assert got["tvd_mean_by_order"][k] == pytest.approx(np.mean(v), rel=1e-12, abs=1e-15)
            assert got["tvd_max_by_order"][k] == pytest.approx(np.max(v), rel=1e-12, abs=1e-15)
        frame = marginal_fidelity(_decoded(o), _decoded(s), max_order=top)
        _same(got, frame)
