"""synthesis = "model": the consistent model of the published DP aggregates (post-processing)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sds_core.data.domain import Domain
from sds_core.data.preparation import prepare
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.evaluation.metrics import marginal_fidelity
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.params import DpParams
from sds_core.synthesis.consistent import (
    AggregateNoise,
    ModelParams,
    fit_aggregates,
    synthesize_from_model,
)

EVEN = ["xxx", "xyy", "yxy", "yyx"]
ODD = ["xxy", "xyx", "yxx", "yyy"]


def _table(rows: list[str], copies: int = 60) -> pd.DataFrame:
    """A 3-column table of the given rows (letters as values), each repeated ``copies`` times."""
    return pd.DataFrame([list(r) for r in rows * copies], columns=["A", "B", "C"])


def _release(frame: pd.DataFrame, seed: int = 4):
    """DP aggregates (R = 2, ε = 8) of ``frame`` and their published noise."""
    result = dp_aggregate(
        prepare(frame),
        DpParams(epsilon=8.0, delta=1e-6, reporting_length=2),
        ReleaseRandomness.from_seed(seed),
    )
    rep = result.report
    noise = AggregateNoise.from_release(
        rep.sigma_by_len, rep.allowed_sensitivity_by_len, rep.threshold_by_len
    )
    return result.aggregates, noise


def test_same_published_aggregates_same_records() -> None:
    """Two different tables with equal published aggregates give identical synthetic records."""
    agg_even, noise_even = _release(_table(EVEN))
    agg_odd, noise_odd = _release(_table(ODD))
    assert agg_even.to_text_dict() == agg_odd.to_text_dict()  # the tables differ in 3-ways only
    assert noise_even == noise_odd
    a = synthesize_from_model(agg_even, noise_even, 240, rng=np.random.default_rng(1))
    b = synthesize_from_model(agg_odd, noise_odd, 240, rng=np.random.default_rng(1))
    assert (a.codes == b.codes).all()


def test_model_records_follow_the_aggregates() -> None:
    """On a dependent table the model's records keep the 1- and 2-way marginals closely."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, 3000)
    frame = pd.DataFrame(
        {
            "A": [f"a{v}" for v in a],
            "B": [f"b{(v + (rng.random() < 0.1)) % 4}" for v in a],
            "C": [f"c{rng.integers(0, 3)}" for _ in a],
        }
    )
    aggregates, noise = _release(frame)
    records = synthesize_from_model(aggregates, noise, 3000, rng=np.random.default_rng(2))
    tvd = marginal_fidelity(prepare(frame), records, max_order=2)["tvd_mean_by_order"]
    assert tvd[1] < 0.03 and tvd[2] < 0.05


def test_unpublished_values_become_empty() -> None:
    """A value too rare to be published is unknown to the model: its records come out empty."""
    frame = pd.DataFrame({"A": ["a"] * 400 + ["rare"], "B": ["b", "c"] * 200 + ["b"]})
    aggregates, noise = _release(frame)
    assert "A:rare" not in aggregates.to_text_dict()
    records = synthesize_from_model(aggregates, noise, 401, rng=np.random.default_rng(0))
    a = aggregates.domain.column_index("A")
    rare = (
        aggregates.domain.labels[a].index("rare") if "rare" in aggregates.domain.labels[a] else -2
    )
    assert not (records.codes[:, a] == rare).any()


def test_fit_is_deterministic_and_total_is_the_dp_count() -> None:
    """The fit depends on the aggregates only and sums to the protected record count."""
    aggregates, noise = _release(_table(EVEN))
    one = fit_aggregates(aggregates, noise)
    two = fit_aggregates(aggregates, noise)
    assert one.total == aggregates.protected_number_of_records
    for x, y in zip(one.marginals, two.marginals, strict=True):
        np.testing.assert_array_equal(x, y)


def test_model_total_follows_the_one_way_counts_when_the_record_count_is_off() -> None:
    """A protected count far below what every column's published values add up to (its
    Laplace noise is wide) does not pull the records' 1-way counts below the DP counts: the
    model's total is estimated from both, and a release samples that total."""
    from sds_core.marginals.aggregates import AggregateSet
    from sds_core.synthesis.consistent import estimated_total

    aggregates, noise = _release(_table(EVEN))  # 240 records, every value published
    low = AggregateSet(
        aggregates.domain,
        aggregates.reporting_length,
        aggregates.by_len,
        aggregates.protected_number_of_records - 40,  # as if the Laplace noise drew -40
        aggregates.is_dp,
    )
    with_scale = AggregateNoise(noise.sigma_by_len, noise.threshold_by_len, count_scale=50.0)
    total = estimated_total(low, with_scale)
    assert abs(total - 240) < 3  # each column's two values add up to 240 ± noise
    assert estimated_total(low, noise) == low.protected_number_of_records  # no scale: N̂
    records = synthesize_from_model(low, with_scale, None, rng=np.random.default_rng(3))
    assert records.n_records == round(total)
    one = aggregates.counts_of(1)
    sd = noise.sigma_by_len[0]
    for attr, dp in zip(one.attrs[:, 0].tolist(), one.counts.tolist(), strict=True):
        col = int(aggregates.domain.attribute_columns()[attr])
        code = attr - aggregates.domain.offsets[col]
        synthetic = int((records.codes[:, col] == code).sum())
        assert abs(synthetic - dp) <= 1.96 * sd, (attr, synthetic, dp)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("iterations", 0),
        ("max_clique_cells", -1),
        ("max_model_bytes", True),
        ("max_clique_columns", 5),
    ],
)
def test_model_params_validated(field: str, value: object) -> None:
    """Non-positive or non-integer model settings are input errors naming the setting."""
    with pytest.raises(SdsInputError, match=field):
        ModelParams(**{field: value})  # type: ignore[arg-type]


def test_needs_the_protected_count() -> None:
    """Exact aggregates without a protected record count cannot seed the model."""
    aggregates, noise = _release(_table(EVEN))
    from sds_core.marginals.aggregates import AggregateSet

    bare = AggregateSet(aggregates.domain, 2, aggregates.by_len, None, True)
    with pytest.raises(SdsInputError, match="protected record count"):
        fit_aggregates(bare, noise)


def test_published_tables_group_every_combination_by_its_columns() -> None:
    """_Published's tables are each column subset's combinations, rows in published order, as
    grouping the rows one by one gives (random aggregates of lengths 1..3 over 5 columns)."""
    from sds_core.data.table import PreparedTable
    from sds_core.marginals.exact_counts import exact_aggregates
    from sds_core.synthesis.consistent import _Published

    cards = (7, 5, 9, 4, 6)
    domain = Domain(
        tuple(f"c{j}" for j in range(len(cards))),
        tuple(tuple(f"v{i}" for i in range(n)) for n in cards),
    )
    rng = np.random.default_rng(3)
    codes = np.stack([rng.integers(-1, n, 400) for n in cards], axis=1).astype(np.int32)
    aggregates = exact_aggregates(PreparedTable(domain, codes), 3)
    col_of, offsets = domain.attribute_columns(), np.asarray(domain.offsets[:-1])
    expected: dict[tuple[int, ...], tuple[list[int], list[float]]] = {}
    for cc in aggregates.by_len.values():
        for attrs, count in zip(cc.attrs.tolist(), cc.counts.tolist(), strict=True):
            key = tuple(int(col_of[a]) for a in attrs)
            local = [a - offsets[c] for a, c in zip(attrs, key, strict=True)]
            cell = int(np.ravel_multi_index(local, [cards[c] for c in key]))
            cells, values = expected.setdefault(key, ([], []))
            cells.append(cell)
            values.append(float(count))
    got = _Published(aggregates).by_subset
    assert len(got) == 5 + 10 + 10
    assert {key: (c.tolist(), v.tolist()) for key, (c, v) in got.items()} == expected


def _suppressed_aggregates():
    """Exact aggregates (R = 3, 5 columns) with some values' 1-tuples removed, as suppressed
    at length 1 (their longer combinations left in: the model must drop them)."""
    from sds_core.data.table import PreparedTable
    from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
    from sds_core.marginals.exact_counts import exact_aggregates

    cards = (7, 5, 9, 4, 6)
    domain = Domain(
        tuple(f"c{j}" for j in range(len(cards))),
        tuple(tuple(f"v{i}" for i in range(n)) for n in cards),
    )
    rng = np.random.default_rng(3)
    codes = np.stack([rng.integers(-1, n, 600) for n in cards], axis=1).astype(np.int32)
    exact = exact_aggregates(PreparedTable(domain, codes), 3)
    one = exact.by_len[1]
    dropped = np.isin(one.attrs[:, 0], [2, 8, 9, 20, 31])  # values of columns 0, 1, 2, 4
    by_len = dict(exact.by_len) | {1: CombinationCounts(one.attrs[~dropped], one.counts[~dropped])}
    return AggregateSet(domain, 3, by_len, 600, True)


def _published_domain_copy(aggregates):
    """The model's aggregates as they were made before (main 2fc9b88): a copy over the values
    published at length 1, and each column's values back (the reference of the tests below)."""
    from sds_core.marginals.aggregates import AggregateSet, CombinationCounts

    dom = aggregates.domain
    keep = np.zeros(dom.n_attributes, dtype=bool)
    keep[aggregates.counts_of(1).attrs[:, 0]] = True
    labels, back = [], []
    for j in range(dom.n_columns):
        mask = keep[dom.offsets[j] : dom.offsets[j + 1]]
        labels.append(tuple(lab for lab, m in zip(dom.labels[j], mask.tolist(), strict=True) if m))
        back.append(np.flatnonzero(mask).astype(np.int32))
    new_id = np.cumsum(keep) - 1
    by_len = {}
    for k, cc in aggregates.by_len.items():
        alive = keep[cc.attrs].all(axis=1)
        by_len[k] = CombinationCounts(
            new_id[cc.attrs[alive]].astype(np.int32), cc.counts[alive].astype(np.int64)
        )
    small = AggregateSet(
        Domain(dom.columns, tuple(labels)),
        aggregates.reporting_length,
        by_len,
        aggregates.protected_number_of_records,
        aggregates.is_dp,
    )
    return small, back


def test_published_tables_read_in_place_equal_those_of_a_copied_domain() -> None:
    """_Published over the values published at length 1 (``keep``, the aggregates read in place)
    holds the very tables it held over a copy of the aggregates on the smaller domain."""
    from sds_core.synthesis.consistent import _Published, published_values

    aggregates = _suppressed_aggregates()
    small, _ = _published_domain_copy(aggregates)
    assert len(small.counts_of(3)) < len(aggregates.counts_of(3))  # combinations were dropped
    got = _Published(aggregates, 600.0, published_values(aggregates))
    want = _Published(small, 600.0)
    assert got.cards == want.cards != aggregates.domain.cardinalities
    assert got.by_subset.keys() == want.by_subset.keys()
    for key, (cells, values) in want.by_subset.items():
        assert got.by_subset[key][0].tolist() == cells.tolist()
        assert got.by_subset[key][1].tolist() == values.tolist()


def test_model_records_in_int32_in_place_equal_the_int64_records() -> None:
    """records_of (int32 records mapped to the domain's codes in place) gives the records the
    int64 sample mapped through the copied domain gave, draw for draw; so does int16."""
    from sds_core.model.sampling import sample_records
    from sds_core.synthesis.consistent import records_of

    aggregates = _suppressed_aggregates()
    noise = AggregateNoise((2.0, 2.0, 2.0), (3.0, 3.0, 3.0))
    model = fit_aggregates(aggregates, noise, ModelParams(iterations=20))
    cats = sample_records(model, 700, rng=np.random.default_rng(5))
    assert cats.dtype == np.int64
    _, back = _published_domain_copy(aggregates)
    want = np.full(cats.shape, -1, dtype=np.int32)
    for j, codes_back in enumerate(back):
        value = cats[:, j] < codes_back.size
        want[value, j] = codes_back[cats[value, j]]
    assert (want == -1).any() and (want >= 0).any()
    got = records_of(model, aggregates, 700, rng=np.random.default_rng(5))
    assert got.codes.dtype == np.int32
    assert np.array_equal(got.codes, want)
    small = sample_records(model, 700, rng=np.random.default_rng(5), dtype=np.int16)
    assert small.dtype == np.int16 and np.array_equal(small, cats)


def _records_spelled_out(aggregates, noise, n, seed, params, *, match=True):
    """The model's records from its own pieces, as ``synthesize_from_model`` made them before
    it was split into a problem, a fit and a sampling over the domain (main e2198d6): fit,
    1-way matching, int32 sample, each column's categories mapped back to its published
    values (the others empty)."""
    from sds_core.data.domain import EMPTY_CODE
    from sds_core.model.estimation import fit_model, match_one_way
    from sds_core.model.sampling import sample_records
    from sds_core.synthesis.consistent import model_problem, one_way_targets

    problem = model_problem(aggregates, noise, params)
    model = fit_model(
        problem.tree,
        problem.measurements,
        problem.total,
        iterations=params.iterations,
        start=problem.start,
    )
    if match:
        sd1 = noise.sigma_by_len[0]
        model = match_one_way(model, one_way_targets(problem.one_way, problem.total, model, sd1))
    cats = sample_records(model, n, rng=np.random.default_rng(seed), dtype=np.int32)
    _, back = _published_domain_copy(aggregates)
    return np.stack(
        [np.append(b, np.int32(EMPTY_CODE))[cats[:, j]] for j, b in enumerate(back)], axis=1
    )


def test_model_split_into_problem_fit_and_sampling_gives_the_same_records() -> None:
    """The problem fitted alone (``fit_problem``) and sampled over the domain and the
    published values (``records_over``, ``synthesize_from_problem``: what a Dask worker is
    sent instead of the aggregates) give ``synthesize_from_model``'s records, which are the
    fit, the 1-way matching and the sampling spelled out (the matching changes them here)."""
    from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
    from sds_core.synthesis.consistent import (
        fit_problem,
        model_problem,
        published_values,
        records_over,
        synthesize_from_problem,
    )

    exact = _suppressed_aggregates()
    two = exact.by_len[2]  # 2-way counts doubled: the fit pulls the 1-way marginals off
    by_len = dict(exact.by_len) | {2: CombinationCounts(two.attrs, two.counts * 2)}
    aggregates = AggregateSet(exact.domain, 3, by_len, 600, True)
    noise = AggregateNoise((2.0, 2.0, 2.0), (3.0, 3.0, 3.0))
    params = ModelParams(iterations=20)
    want = _records_spelled_out(aggregates, noise, 900, 6, params)
    unmatched = _records_spelled_out(aggregates, noise, 900, 6, params, match=False)
    assert not np.array_equal(want, unmatched)
    whole = synthesize_from_model(
        aggregates, noise, 900, rng=np.random.default_rng(6), params=params
    )
    problem = model_problem(aggregates, noise, params)
    keep = published_values(aggregates)
    split = synthesize_from_problem(
        problem, noise, aggregates.domain, keep, 900, rng=np.random.default_rng(6), params=params
    )
    model = fit_problem(problem, noise, params)
    over = records_over(model, aggregates.domain, keep, 900, rng=np.random.default_rng(6))
    for got in (whole, split, over):
        assert got.domain == aggregates.domain and got.codes.dtype == np.int32
        assert np.array_equal(got.codes, want)


def test_records_over_refuses_a_published_mask_of_another_domain() -> None:
    """``records_over`` needs one published flag per value of the domain (a bug otherwise)."""
    from sds_core.errors import SdsInternalError
    from sds_core.synthesis.consistent import published_values, records_over

    aggregates = _suppressed_aggregates()
    noise = AggregateNoise((2.0, 2.0, 2.0), (3.0, 3.0, 3.0))
    model = fit_aggregates(aggregates, noise, ModelParams(iterations=5))
    keep = published_values(aggregates)[:-1]
    with pytest.raises(SdsInternalError, match="one published flag per value"):
        records_over(model, aggregates.domain, keep, 10, rng=np.random.default_rng(0))
