"""sds_core.synthesis.matching: records moved towards their DP aggregates, never outside them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_synthesize import _random_table, _records, _thin, _unreported
from test_synthesize_bits import _random_table as _wide_table

import sds_core.synthesis._bitsets as bits_mod
import sds_core.synthesis.layout as layout_mod
from sds_core.data.domain import Domain
from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.evaluation.agreement import agreement, count_sd_by_len, inside_interval_share_by_len
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.marginals.params import DpParams
from sds_core.synthesis import matching
from sds_core.synthesis.generator import (
    REFERENCE_PARAMS,
    SynthesisParams,
    default_target,
    synthesize,
)
from sds_core.synthesis.layout import build_layout
from sds_core.synthesis.matching import match_aggregates, match_records

AB = Domain(("A", "B"), (("a1", "a2"), ("b1", "b2")))


def _agg(counts: dict[str, int], r: int = 2, n: int = 4) -> AggregateSet:
    return AggregateSet.from_text_dict(AB, counts, r, protected_number_of_records=n, is_dp=True)


def _table(rows: list[tuple[int, int]]) -> PreparedTable:
    return PreparedTable(AB, np.array(rows, dtype=np.int32))


def _objective(table: PreparedTable, agg: AggregateSet) -> float:
    """The search's objective (default weights, no tolerance), computed from scratch."""
    w = matching.weight_by_len(agg.reporting_length)
    have = exact_aggregates(table, agg.reporting_length).to_text_dict() if table.n_records else {}
    total = 0.0
    for key, dp in agg.to_text_dict().items():
        total += w[key.count(";") + 1] * (have.get(key, 0) - dp) ** 2
    c1 = agg.counts_of(1)
    cols = agg.domain.attribute_columns()[c1.attrs[:, 0]]
    filled = np.bincount(cols, weights=c1.counts, minlength=agg.domain.n_columns)
    empty = (table.codes < 0).sum(axis=0)
    target = np.maximum(table.n_records - filled, 0)
    return total + w[0] * float(((empty - target) ** 2).sum())


def test_a_surplus_value_moves_to_the_value_below_its_count() -> None:
    """4 x (a1, b1) against A:a1 = 3, A:a2 = 1 (a2 pairs with b1): one a1 becomes a2."""
    agg = _agg({"A:a1": 3, "A:a2": 1, "B:b1": 4, "A:a1;B:b1": 3, "A:a2;B:b1": 1})
    out = match_aggregates(_table([(0, 0)] * 4), agg, rng=np.random.default_rng(0))
    assert _records(out) == Counter({("A:a1", "B:b1"): 3, ("A:a2", "B:b1"): 1})


def test_a_value_enters_by_emptying_the_cell_that_blocks_it() -> None:
    """a2 never pairs with b1 and b1 has one record too many: a2 enters one record by emptying
    that record's B cell (a kick, which leaves every gap 0); no record holds (a2, b1)."""
    agg = _agg({"A:a1": 3, "A:a2": 1, "B:b1": 3, "A:a1;B:b1": 3})
    out = match_aggregates(_table([(0, 0)] * 4), agg, rng=np.random.default_rng(0))
    assert _records(out) == Counter({("A:a1", "B:b1"): 3, ("A:a2",): 1})
    assert _unreported(out, agg) == 0


def test_without_kicks_a_blocked_value_stays_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """With KICKS off the same records keep every B cell; the surplus a1 can only empty."""
    monkeypatch.setattr(matching, "KICKS", False)
    agg = _agg({"A:a1": 3, "A:a2": 1, "B:b1": 4, "A:a1;B:b1": 3})
    out = match_aggregates(_table([(0, 0)] * 4), agg, rng=np.random.default_rng(0))
    assert "A:a2" not in {x for rec in _records(out) for x in rec}
    assert _unreported(out, agg) == 0


@pytest.mark.parametrize("r", [1, 2, 3, 4])
def test_no_unreported_combination_and_the_same_records_on_every_lookup_path(
    r: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random thinned aggregates (not downward closed): matching creates no unreported
    combination, lowers the objective, and the bitset, list-walk and hash-table lookups give
    the same records."""
    rng = np.random.default_rng(500 + r)
    for trial in range(3):
        table = _wide_table(rng, 500, (2, 3, 70, 3, 5, 2))
        agg = _thin(exact_aggregates(table, r), rng, keep=0.55 + 0.1 * trial)
        start = synthesize(
            agg,
            SynthesisParams(target_number_of_records=450, match_aggregates=False),
            rng=np.random.default_rng(trial),
        )
        assert _unreported(start, agg) == 0
        outs = []
        for bits_limit, dense_limit in ((1 << 30, 2048), (0, 2048), (1 << 30, 0)):
            with monkeypatch.context() as m:
                m.setattr(bits_mod, "BITSET_BYTES_LIMIT", bits_limit)
                m.setattr(layout_mod, "DENSE_PAIR_LIMIT", dense_limit)
                outs.append(match_aggregates(start, agg, rng=np.random.default_rng(9)))
        for out in outs:
            assert _unreported(out, agg) == 0
            assert np.array_equal(out.codes, outs[0].codes)
        assert _objective(outs[0], agg) <= _objective(start, agg)


def test_records_land_inside_the_published_noise_interval(shared_data: Path) -> None:
    """PUMS (1000 rows, binned age and income), ε = 4, R = 3, the published noise given: the
    default records' 1- and 2-way counts all lie inside the 95% noise interval of their DP
    counts; without matching some do not."""
    frame = pd.read_csv(shared_data / "pums" / "PUMS.csv", dtype=str, keep_default_na=False)
    frame["age"] = (frame["age"].astype(int) // 20).astype(str)
    frame["income"] = (frame["income"].astype(float) // 25000).clip(upper=6).astype(str)
    res = dp_aggregate(
        prepare(frame),
        DpParams(epsilon=4.0, delta=1e-6, reporting_length=3),
        ReleaseRandomness.from_seed(3),
    )
    sd = count_sd_by_len(res.report.sigma_by_len, res.report.allowed_sensitivity_by_len)
    shares = []
    for match in (False, True):
        out = synthesize(
            res.aggregates,
            SynthesisParams(
                target_number_of_records=default_target(res.aggregates), match_aggregates=match
            ),
            rng=np.random.default_rng(1),
            noise_sd_by_len=[sd[k] for k in sorted(sd)],
        )
        assert _unreported(out, res.aggregates) == 0
        shares.append(inside_interval_share_by_len(agreement(res.aggregates, out), sd))
    assert shares[0][1] < 1.0 and shares[0][2] < 1.0
    assert shares[1][1] == 1.0 and shares[1][2] == 1.0


def test_gaps_within_the_tolerance_are_left_alone() -> None:
    """A tolerance larger than every gap moves nothing; none moves the forced records."""
    agg = _agg({"A:a1": 3, "A:a2": 1, "B:b1": 4, "A:a1;B:b1": 3, "A:a2;B:b1": 1})
    start = _table([(0, 0)] * 4)
    out = match_aggregates(start, agg, rng=np.random.default_rng(0), noise_sd_by_len=[5.0, 5.0])
    assert np.array_equal(out.codes, start.codes)


def test_counts_are_scaled_to_the_target() -> None:
    """scale = 3: the targets are 3x the counts, so 3 cycles of the forced records stay."""
    agg = _agg({"A:a1": 2, "A:a2": 1, "B:b1": 2, "B:b2": 1, "A:a1;B:b1": 2, "A:a2;B:b2": 1}, n=3)
    lay = build_layout(agg, None)
    ids = np.array([[0, 2], [0, 2], [1, 3]] * 3, dtype=np.int64)
    stats = match_records(ids, lay, rng=np.random.default_rng(0), scale=3.0)
    assert stats.moves == 0 and stats.passes == 1
    moved = match_records(ids.copy(), lay, rng=np.random.default_rng(0), scale=1.0)
    assert moved.moves > 0


def test_same_seed_same_records() -> None:
    """Same seed => same records (matching included; batches are keyed, not scheduled)."""
    rng = np.random.default_rng(4)
    table = _random_table(rng, 800, (2, 3, 4, 3, 5))
    agg = exact_aggregates(table, 3)
    agg = AggregateSet(agg.domain, 3, agg.by_len, protected_number_of_records=800, is_dp=True)
    p = SynthesisParams(target_number_of_records=900, parallel_batches=2)
    a = synthesize(agg, p, rng=np.random.default_rng(2))
    b = synthesize(agg, p, rng=np.random.default_rng(2))
    assert np.array_equal(a.codes, b.codes)


def test_matching_is_the_default_and_off_in_the_reference_mode() -> None:
    """SynthesisParams() matches; REFERENCE_PARAMS (pac-synth's behaviour) does not."""
    assert SynthesisParams().match_aggregates is True
    assert REFERENCE_PARAMS.match_aggregates is False


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"passes": -1}, "passes must be >= 0"),
        ({"noise_sd_by_len": [1.0]}, "one tolerance per length"),
        ({"noise_sd_by_len": [1.0, -2.0]}, "tolerances must be >= 0"),
    ],
)
def test_bad_arguments_are_rejected(kwargs: dict, match: str) -> None:
    """Negative passes, too few or negative noise figures: SdsInputError naming the rule."""
    agg = _agg({"A:a1": 3, "B:b1": 3, "A:a1;B:b1": 3})
    with pytest.raises(SdsInputError, match=match):
        match_aggregates(_table([(0, 0)] * 3), agg, rng=np.random.default_rng(0), **kwargs)


def test_scale_and_domain_are_checked() -> None:
    """scale <= 0 and records over another domain are refused."""
    agg = _agg({"A:a1": 3, "B:b1": 3, "A:a1;B:b1": 3})
    ids = np.zeros((2, 2), dtype=np.int64)
    with pytest.raises(SdsInputError, match="scale must be > 0"):
        match_records(ids, build_layout(agg, None), rng=np.random.default_rng(0), scale=0.0)
    other = PreparedTable(Domain(("A", "B"), (("a1",), ("b1",))), np.zeros((2, 2), np.int32))
    with pytest.raises(SdsInputError, match="aggregates' domain"):
        match_aggregates(other, agg, rng=np.random.default_rng(0))
