"""Tests of sds_core.synthesis.generator: forced records, determinism, guarantee, targets,
errors."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.errors import SdsInputError
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.synthesis._completion_kernel import quantile_r8
from sds_core.synthesis._reference_kernel import _insert_sorted, _quantile_sorted
from sds_core.synthesis.generator import (
    REFERENCE_PARAMS,
    SynthesisParams,
    default_target,
    domain_from_text_keys,
    synthesize,
)
from sds_core.synthesis.layout import build_layout

AB = Domain(("A", "B"), (("a1", "a2"), ("b1", "b2")))
FORCED = {"A:a1": 2, "A:a2": 1, "B:b1": 2, "B:b2": 1, "A:a1;B:b1": 2, "A:a2;B:b2": 1}
ALL_MODES = [
    REFERENCE_PARAMS,
    SynthesisParams(),
    SynthesisParams(use_synthetic_counts=False, complete_records=True),
    SynthesisParams(use_synthetic_counts=True, complete_records=False),
]


def _agg(domain: Domain, counts: dict[str, int], r: int, n: int | None = None) -> AggregateSet:
    return AggregateSet.from_text_dict(domain, counts, r, protected_number_of_records=n, is_dp=True)


def _records(table: PreparedTable) -> Counter[tuple[str, ...]]:
    texts = []
    for row in table.codes:
        texts.append(
            tuple(
                f"{c}:{labs[v]}"
                for c, labs, v in zip(table.domain.columns, table.domain.labels, row, strict=True)
                if v >= 0
            )
        )
    return Counter(texts)


def _unreported(table: PreparedTable, aggregates: AggregateSet) -> int:
    """Number of distinct combinations (length <= R) in the table that the aggregates lack."""
    if table.n_records == 0:
        return 0
    have = exact_aggregates(table, aggregates.reporting_length).to_text_dict()
    reported = aggregates.to_text_dict()
    return sum(1 for key in have if key not in reported)


@pytest.mark.parametrize("params", ALL_MODES)
def test_forced_records_are_reproduced_exactly(params: SynthesisParams) -> None:
    """Aggregates that admit only (a1,b1) x2 and (a2,b2) x1 yield exactly those records."""
    agg = _agg(AB, FORCED, 2, n=3)
    for seed in range(5):
        table = synthesize(agg, params, rng=np.random.default_rng(seed))
        assert _records(table) == Counter({("A:a1", "B:b1"): 2, ("A:a2", "B:b2"): 1})


def test_target_resets_budgets_and_synthetic_counts() -> None:
    """A target of 3x the budget cycle gives exactly 3 cycles of the forced records."""
    agg = _agg(AB, FORCED, 2, n=3)
    for params in ALL_MODES:
        p = SynthesisParams(
            use_synthetic_counts=params.use_synthetic_counts,
            complete_records=params.complete_records,
            target_number_of_records=9,
        )
        table = synthesize(agg, p, rng=np.random.default_rng(7))
        assert table.n_records == 9
        assert _records(table) == Counter({("A:a1", "B:b1"): 6, ("A:a2", "B:b2"): 3})


@pytest.mark.parametrize(("factor", "n_a1b1", "n_a2b2"), [(2.0, 4, 2), (0.4, 1, 1), (1.0, 2, 1)])
def test_scale_factor_ceils_every_count(factor: float, n_a1b1: int, n_a2b2: int) -> None:
    """aggregate_counts_scale_factor f turns each count into ceil(count * f)."""
    agg = _agg(AB, FORCED, 2, n=3)
    params = SynthesisParams(aggregate_counts_scale_factor=factor)
    table = synthesize(agg, params, rng=np.random.default_rng(0))
    assert _records(table) == Counter({("A:a1", "B:b1"): n_a1b1, ("A:a2", "B:b2"): n_a2b2})


def test_single_attribute_budgets_are_used_exactly_without_target() -> None:
    """Reference mode (no target) uses every 1-count budget exactly once."""
    dom = Domain(("A", "B", "C"), (("a1", "a2"), ("b1",), ("c1", "c2")))
    counts = {
        "A:a1": 5,
        "A:a2": 3,
        "B:b1": 4,
        "C:c1": 2,
        "C:c2": 6,
        "A:a1;B:b1": 3,
        "A:a2;B:b1": 1,
        "A:a1;C:c2": 4,
        "A:a2;C:c1": 2,
        "B:b1;C:c2": 3,
    }
    agg = _agg(dom, counts, 2)
    for seed in range(3):
        table = synthesize(agg, REFERENCE_PARAMS, rng=np.random.default_rng(seed))
        ones = exact_aggregates(table, 1).to_text_dict()
        assert ones == {k: v for k, v in counts.items() if ";" not in k}
        assert _unreported(table, agg) == 0


def test_completion_fills_columns_the_reference_leaves_empty() -> None:
    """Exhausted synthetic counts strand b1 in the reference; completion fills every cell."""
    dom = Domain(("A", "B"), (("a1", "a2"), ("b1",)))
    counts = {"A:a1": 10, "A:a2": 10, "B:b1": 20, "A:a1;B:b1": 5, "A:a2;B:b1": 10}
    agg = _agg(dom, counts, 2, n=20)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        # the generator alone (matching would empty some b1 cells: (a1, b1) has 5, not 10)
        plain = SynthesisParams(
            complete_records=False, target_number_of_records=20, match_aggregates=False
        )
        full = SynthesisParams(
            complete_records=True, target_number_of_records=20, match_aggregates=False
        )
        assert (synthesize(agg, plain, rng=rng).codes < 0).sum() > 0
        completed = synthesize(agg, full, rng=rng)
        assert completed.n_records == 20
        assert (completed.codes < 0).sum() == 0
        assert _unreported(completed, agg) == 0


def test_same_seed_same_table_and_different_seed_differs() -> None:
    """Seeded Generator => identical output; another seed gives another table."""
    rng = np.random.default_rng(3)
    table = _random_table(rng, 300, (3, 4, 2, 5, 3))
    agg = exact_aggregates(table, 3)
    for params in ALL_MODES:
        t1 = synthesize(agg, params, rng=np.random.default_rng(11))
        t2 = synthesize(agg, params, rng=np.random.default_rng(11))
        t3 = synthesize(agg, params, rng=np.random.default_rng(12))
        assert np.array_equal(t1.codes, t2.codes)
        assert t1.codes.shape != t3.codes.shape or not np.array_equal(t1.codes, t3.codes)


def _random_table(rng: np.random.Generator, n: int, cards: tuple[int, ...]) -> PreparedTable:
    dom = Domain(
        tuple(f"C{j}" for j in range(len(cards))),
        tuple(tuple(f"v{i}" for i in range(c)) for c in cards),
    )
    cols = [rng.integers(-1, c, size=n) for c in cards]
    # correlate column 1 with column 0 so the aggregates have structure
    cols[1] = np.where(
        rng.random(n) < 0.6, np.minimum(np.maximum(cols[0], 0), cards[1] - 1), cols[1]
    )
    return PreparedTable(dom, np.stack(cols, axis=1).astype(np.int32))


def _thin(agg: AggregateSet, rng: np.random.Generator, keep: float) -> AggregateSet:
    """Drop a random share of the combinations of length >= 2 and jitter all counts upward."""
    by_len = {}
    for k, cc in agg.by_len.items():
        mask = np.ones(len(cc), dtype=bool) if k == 1 else rng.random(len(cc)) < keep
        counts = cc.counts[mask] + rng.integers(0, 3, size=int(mask.sum()))
        by_len[k] = CombinationCounts(cc.attrs[mask], counts)
    return AggregateSet(agg.domain, agg.reporting_length, by_len, agg.protected_number_of_records)


@pytest.mark.parametrize("r", [1, 2, 3, 4])
def test_guarantee_on_random_aggregates(r: int) -> None:
    """No synthesized record contains a combination (length <= R) absent from random aggregates."""
    rng = np.random.default_rng(2024 + r)
    for trial in range(4):
        table = _random_table(rng, 400, (2, 3, 4, 3, 5, 2))
        agg = _thin(exact_aggregates(table, r), rng, keep=0.5 + 0.1 * trial)
        for params in ALL_MODES:
            for target in (None, 350):
                p = SynthesisParams(
                    use_synthetic_counts=params.use_synthetic_counts,
                    complete_records=params.complete_records,
                    target_number_of_records=target,
                    weight_selection_percentile=int(rng.integers(0, 101)),
                    parallel_batches=1 + trial % 3,
                )
                out = synthesize(agg, p, rng=np.random.default_rng(trial))
                assert out.n_records > 0
                assert _unreported(out, agg) == 0


def test_parallel_batches_replay_and_split_the_target() -> None:
    """Batches: same seed => same table, exactly the target, budgets scaled by 1/B per batch."""
    rng = np.random.default_rng(9)
    table = _random_table(rng, 600, (2, 3, 4, 3, 5))
    agg = exact_aggregates(table, 3)
    agg = AggregateSet(agg.domain, 3, agg.by_len, protected_number_of_records=600, is_dp=True)
    p = SynthesisParams(target_number_of_records=1001, parallel_batches=2)
    a = synthesize(agg, p, rng=np.random.default_rng(4))
    b = synthesize(agg, p, rng=np.random.default_rng(4))
    assert a.n_records == 1001 and np.array_equal(a.codes, b.codes)
    assert _unreported(a, agg) == 0
    one = synthesize(
        agg,
        SynthesisParams(target_number_of_records=1001, parallel_batches=1),
        rng=np.random.default_rng(4),
    )
    assert not np.array_equal(one.codes, a.codes)
    # without a target each of B batches uses its ceil(count / B) budgets once (the generator
    # alone: matching moves cells afterwards)
    c1 = agg.counts_of(1).counts
    for batches in (1, 3):
        p = SynthesisParams(
            use_synthetic_counts=False,
            complete_records=False,
            parallel_batches=batches,
            match_aggregates=False,
        )
        out = synthesize(agg, p, rng=np.random.default_rng(1))
        assert int((out.codes >= 0).sum()) == batches * int(np.ceil(c1 / batches).sum())


@pytest.mark.parametrize(("percentile", "p_c1"), [(95, 0.6), (50, 0.25), (0, 5 / 35)])
def test_percentile_weight_beyond_reporting_length(percentile: int, p_c1: float) -> None:
    """Beyond R the weight is the R-8 quantile of the sub-combination weights (hand-computed).

    With completion, columns A and B (one value each) are filled first, so C is chosen with
    |record + c| = 3 > R = 2: c1 has weights [6000, 5, 10], c2 has [4000, 30, 30].
    """
    dom = Domain(("A", "B", "C"), (("a1",), ("b1",), ("c1", "c2")))
    counts = {
        "A:a1": 200,
        "B:b1": 200,
        "C:c1": 6000,
        "C:c2": 4000,
        "A:a1;B:b1": 200,
        "A:a1;C:c1": 5,
        "B:b1;C:c1": 10,
        "A:a1;C:c2": 30,
        "B:b1;C:c2": 30,
    }
    agg = _agg(dom, counts, 2, n=200)  # every column fill rate 1: ties go by cardinality
    params = SynthesisParams(  # the generator's weights alone, without matching
        use_synthetic_counts=False,
        target_number_of_records=1,
        weight_selection_percentile=percentile,
        match_aggregates=False,
    )
    n, hits = 600, 0
    for seed in range(n):
        rec = synthesize(agg, params, rng=np.random.default_rng(seed)).codes[0]
        assert rec[0] == 0 and rec[1] == 0
        hits += int(rec[2] == 0)
    assert abs(hits / n - p_c1) < 4 * np.sqrt(p_c1 * (1 - p_c1) / n)


def test_quantile_r8_matches_numpy_median_unbiased() -> None:
    """Sorted insertion + the kernel's R-8 quantile equal numpy's 'median_unbiased' quantile."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(1, 30))
        x = rng.integers(1, 100, size=n).astype(np.float64)
        p = float(rng.choice([0.0, 0.05, 0.5, 0.95, 1.0, rng.random()]))
        expected = np.quantile(x, p, method="median_unbiased")
        rows = np.zeros((2, n), dtype=np.int64)
        for i, v in enumerate(x.astype(np.int64)):
            _insert_sorted(rows, 1, i, v)
        assert rows[1].tolist() == sorted(x.astype(np.int64).tolist())
        assert _quantile_sorted(rows, 1, n, p) == pytest.approx(expected)


def test_unsorted_quantile_r8_matches_numpy() -> None:
    """The completion kernel's partial-selection R-8 quantile equals numpy on unsorted rows."""
    rng = np.random.default_rng(6)
    for _ in range(300):
        n = int(rng.integers(1, 60))
        x = rng.integers(-5, 100, size=n)
        p = float(rng.choice([0.0, 0.05, 0.5, 0.95, 1.0, rng.random()]))
        rows = np.zeros((2, n), dtype=np.int64)
        rows[1] = x
        got = quantile_r8(rows, 1, n, p, np.zeros(n + 2, dtype=np.int64))
        assert got == pytest.approx(np.quantile(x.astype(float), p, method="median_unbiased"))


def test_layout_triple_lists_sorted_and_split_by_column() -> None:
    """Each pair's CSR list holds exactly its triples' third attributes, ascending, by column."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({c: rng.choice(list("abcd"), size=60) for c in "PQRST"})
    from sds_core.data.preparation import prepare

    agg = exact_aggregates(prepare(frame), 3)
    lay = build_layout(agg, None)
    tri = lay.triples
    start, third, combo, trip_pos, t_first = tri.start, tri.third, tri.combo, tri.pos, tri.first
    n_cols, attr_col = agg.domain.n_columns, agg.domain.attribute_columns()
    triples = agg.counts_of(3).attrs
    for pl, (a, b) in enumerate(agg.counts_of(2).attrs):
        p = lay.pair_first + pl
        lst = third[start[p] : start[p + 1]]
        want = sorted(int(x) for t in triples for x in t if a in t and b in t and x not in (a, b))
        assert lst.tolist() == want
        for c in range(n_cols):
            lo, hi = tri.col_start[pl * n_cols + c], tri.col_start[pl * n_cols + c + 1]
            assert (attr_col[third[lo:hi]] == c).all()
            assert np.count_nonzero(attr_col[lst] == c) == hi - lo
    for t in range(len(triples)):  # every triple sits in its three pair lists
        assert (combo[trip_pos[t]] == t_first + t).all()


def test_progress_is_reported_and_default_target() -> None:
    """progress(done, total) ends at the target; default_target is the protected count."""
    agg = _agg(AB, FORCED, 2, n=3)
    calls: list[tuple[int, int]] = []
    params = SynthesisParams(target_number_of_records=default_target(agg))
    synthesize(
        agg, params, rng=np.random.default_rng(0), progress=lambda d, t: calls.append((d, t))
    )
    assert calls[-1] == (3, 3)
    with pytest.raises(SdsInputError, match="protected_number_of_records"):
        default_target(_agg(AB, FORCED, 2))


def test_domain_from_text_keys() -> None:
    """Column order from the header, labels sorted, unknown column rejected."""
    dom = domain_from_text_keys(FORCED, columns=["A", "B"])
    assert dom == AB
    assert domain_from_text_keys(["B:b1;A:a1"]).columns == ("B", "A")
    with pytest.raises(SdsInputError, match="not in columns"):
        domain_from_text_keys(["Z:z1"], columns=["A"])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"weight_selection_percentile": 101}, "weight_selection_percentile"),
        ({"weight_selection_percentile": 9.5}, "weight_selection_percentile"),
        ({"aggregate_counts_scale_factor": 0.0}, "aggregate_counts_scale_factor"),
        ({"aggregate_counts_scale_factor": float("nan")}, "aggregate_counts_scale_factor"),
        ({"target_number_of_records": 0}, "target_number_of_records"),
        ({"target_number_of_records": True}, "target_number_of_records"),
        ({"use_synthetic_counts": 1}, "use_synthetic_counts"),
        ({"complete_records": "yes"}, "complete_records"),
        ({"parallel_batches": 0}, "parallel_batches"),
        ({"parallel_batches": 2.0}, "parallel_batches"),
    ],
)
def test_bad_parameters_are_rejected(kwargs: dict, match: str) -> None:
    """Each invalid parameter raises SdsInputError naming it."""
    with pytest.raises(SdsInputError, match=match):
        SynthesisParams(**kwargs)


def test_bad_aggregates_are_rejected() -> None:
    """No 1-counts, non-positive counts, or a non-Generator rng raise SdsInputError."""
    rng = np.random.default_rng(0)
    with pytest.raises(SdsInputError, match="no single-attribute"):
        synthesize(_agg(AB, {"A:a1;B:b1": 2}, 2), rng=rng)
    with pytest.raises(SdsInputError, match="counts <= 0"):
        synthesize(_agg(AB, {"A:a1": 0}, 1), rng=rng)
    with pytest.raises(SdsInputError, match="rng"):
        synthesize(_agg(AB, FORCED, 2), rng=np.random.RandomState(0))  # type: ignore[arg-type]


@pytest.mark.slow
def test_guarantee_on_pums_dp_aggregates(shared_data: Path) -> None:
    """On pac-synth's DP aggregates of PUMS (R=3), no record has an unreported combination."""
    pacsynth = pytest.importorskip("pacsynth")
    frame = pd.read_csv(shared_data / "pums" / "PUMS_ca_10k.csv", dtype=str, keep_default_na=False)
    params = pacsynth.DpAggregateSeededParametersBuilder().reporting_length(3).epsilon(4.0).build()
    synth = pacsynth.DpAggregateSeededSynthesizer(params)
    synth.fit(pacsynth.Dataset.from_data_frame(frame))
    texts = synth.get_dp_aggregates(";")
    domain = domain_from_text_keys(texts, columns=list(frame.columns))
    agg = AggregateSet.from_text_dict(
        domain, texts, 3, protected_number_of_records=synth.get_dp_number_of_records(), is_dp=True
    )
    for params in (REFERENCE_PARAMS, SynthesisParams(target_number_of_records=default_target(agg))):
        out = synthesize(agg, params, rng=np.random.default_rng(1))
        assert out.n_records > 0.8 * default_target(agg)
        assert _unreported(out, agg) == 0
