"""sds_core.evaluation.agreement: DP aggregates vs synthetic records on a hand-built release."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.errors import SdsInputError
from sds_core.evaluation.agreement import NOT_REPORTED, agreement, agreement_summary
from sds_core.marginals.aggregates import AggregateSet

DOMAIN = Domain(("A", "B", "C"), (("a1", "a2"), ("b1", "b2"), ("c1", "secret")))
# A:a1=0 A:a2=1 B:b1=2 B:b2=3 C:c1=4 C:secret=5 (C:secret is in the domain but never published)
DP_COUNTS = {
    "A:a1": 6,
    "A:a2": 4,
    "B:b1": 5,
    "B:b2": 5,
    "C:c1": 9,
    "A:a1;B:b1": 4,
    "A:a2;B:b2": 3,
    "A:a1;C:c1": 6,
    "B:b1;C:c1": 5,
}
SYNTHETIC = np.array(
    [  # A, B, C
        [0, 0, 0],
        [0, 0, 0],
        [0, 1, 0],
        [1, 1, 0],
        [1, 1, -1],
        [1, 0, 0],
    ],
    dtype=np.int32,
)


@pytest.fixture
def dp() -> AggregateSet:
    """The DP aggregates of the fixture (R = 2)."""
    return AggregateSet.from_text_dict(
        DOMAIN, DP_COUNTS, 2, protected_number_of_records=10, is_dp=True
    )


@pytest.fixture
def synthetic() -> PreparedTable:
    """Six synthetic records over the same domain."""
    return PreparedTable(DOMAIN, SYNTHETIC)


def _by_text(a, k: int) -> dict[str, tuple[int, int]]:
    texts = DOMAIN.attribute_texts()
    la = a.by_len[k]
    return {
        ";".join(texts[x] for x in row): (int(d), int(s))
        for row, d, s in zip(la.attrs.tolist(), la.dp, la.synthetic, strict=True)
    }


def test_union_of_dp_and_synthetic_combinations(dp: AggregateSet, synthetic: PreparedTable) -> None:
    """Every reported or synthesized combination appears once with both counts."""
    a = agreement(dp, synthetic)
    assert _by_text(a, 1) == {
        "A:a1": (6, 3),
        "A:a2": (4, 3),
        "B:b1": (5, 3),
        "B:b2": (5, 3),
        "C:c1": (9, 5),
    }
    assert _by_text(a, 2) == {
        "A:a1;B:b1": (4, 2),
        "A:a1;B:b2": (NOT_REPORTED, 1),
        "A:a1;C:c1": (6, 3),
        "A:a2;B:b1": (NOT_REPORTED, 1),
        "A:a2;B:b2": (3, 2),
        "A:a2;C:c1": (NOT_REPORTED, 2),
        "B:b1;C:c1": (5, 3),
        "B:b2;C:c1": (NOT_REPORTED, 2),
    }
    assert a.unreported_synthetic_by_len() == {1: 0, 2: 4}


def test_one_way_shows_only_published_values(dp: AggregateSet, synthetic: PreparedTable) -> None:
    """Column C's domain holds 'secret' (suppressed, never synthesized): it is not shown."""
    a = agreement(dp, synthetic)
    one = a.one_way(2)
    assert one.labels == ("c1",) and one.dp.tolist() == [9] and one.synthetic.tolist() == [5]
    assert a.published_attributes().tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(SdsInputError, match="column index 3 out of range"):
        a.one_way(3)


def test_pair_tvd_by_hand(dp: AggregateSet, synthetic: PreparedTable) -> None:
    """TVD per pair from the normalised reported DP counts and synthetic counts."""
    tvd = agreement(dp, synthetic).pair_tvd()
    # A×B: DP {a1b1: 4/7, a2b2: 3/7}; synthetic {a1b1 2/6, a1b2 1/6, a2b1 1/6, a2b2 2/6}
    ab = 0.5 * (abs(4 / 7 - 2 / 6) + 1 / 6 + 1 / 6 + abs(3 / 7 - 2 / 6))
    # A×C: DP {a1c1: 1}; synthetic {a1c1 3/5, a2c1 2/5}
    ac = 0.5 * (abs(1 - 3 / 5) + 2 / 5)
    bc = 0.5 * (abs(1 - 3 / 5) + 2 / 5)
    assert math.isclose(tvd[0, 1], ab) and math.isclose(tvd[1, 0], ab)
    assert math.isclose(tvd[0, 2], ac) and math.isclose(tvd[1, 2], bc)
    assert np.isnan(np.diag(tvd)).all()


def test_marginal_tvd_per_column_set(dp: AggregateSet, synthetic: PreparedTable) -> None:
    """Length 1: one TVD per column; length 2: the pair TVD, keyed by column indices."""
    a = agreement(dp, synthetic)
    one = a.marginal_tvd(1)
    # A: DP {a1 .6, a2 .4}, synthetic {a1 3/6, a2 3/6}; C: DP {c1: 1}, synthetic {c1: 1}
    assert one[(0,)] == pytest.approx(0.5 * (abs(0.6 - 0.5) + abs(0.4 - 0.5)))
    assert one[(2,)] == pytest.approx(0.0) and set(one) == {(0,), (1,), (2,)}
    two = a.marginal_tvd(2)
    assert set(two) == {(0, 1), (0, 2), (1, 2)}
    assert two[(0, 2)] == pytest.approx(a.pair_tvd()[0, 2])
    assert a.marginal_tvd(3) == {}


def test_within_noise_share_and_summary(dp: AggregateSet, synthetic: PreparedTable) -> None:
    """The share of reported combinations within ±half-width, and the published summary."""
    a = agreement(dp, synthetic)
    # length-1 errors: A:a1 3, A:a2 1, B:b1 2, B:b2 2, C:c1 4
    assert a.within_noise_share_by_len({1: 2.0, 2: 0.5}) == {1: pytest.approx(0.6), 2: 0.0}
    summary = agreement_summary(a, {1: 1.0})
    one, two = summary["by_length"]["1"], summary["by_length"]["2"]
    assert one["dp_combinations"] == 5 and one["synthetic_combinations"] == 5
    assert one["within_noise_95_pct"] == pytest.approx(20.0)  # only A:a2's error 1 is <= 1.96
    assert one["noise_sd"] == 1.0 and two["noise_sd"] is None
    assert two["within_noise_95_pct"] is None  # no noise given for length 2
    assert two["synthetic_not_reported"] == 4 and two["marginals_compared"] == 3
    assert two["mean_abs_error"] == pytest.approx((2 + 1 + 3 + 2) / 4)


def test_mean_abs_error_over_reported_combinations(
    dp: AggregateSet, synthetic: PreparedTable
) -> None:
    """Mean |synthetic - DP| counts only combinations the DP aggregates report."""
    errors = agreement(dp, synthetic).mean_abs_error_by_len()
    assert errors[1] == pytest.approx((3 + 1 + 2 + 2 + 4) / 5)
    assert errors[2] == pytest.approx((2 + 1 + 3 + 2) / 4)


def test_identical_counts_agree_exactly(synthetic: PreparedTable) -> None:
    """Aggregates that are the synthetic records' own counts: zero error, zero TVD."""
    from sds_core.marginals.exact_counts import exact_aggregates

    own = exact_aggregates(synthetic, 2)
    published = AggregateSet(DOMAIN, 2, own.by_len, 6, is_dp=True)
    a = agreement(published, synthetic)
    assert a.mean_abs_error_by_len() == {1: 0.0, 2: 0.0}
    tvd = a.pair_tvd()
    assert np.nanmax(tvd) == 0.0


@pytest.mark.parametrize(
    ("is_dp", "domain", "match"),
    [
        (False, DOMAIN, "only DP aggregates may be compared"),
        (True, Domain(("A", "B"), (("a1",), ("b1",))), "must use the DP aggregates' domain"),
    ],
)
def test_refuses_exact_counts_and_other_domains(is_dp: bool, domain: Domain, match: str) -> None:
    """Exact (sensitive) aggregates and records over another domain are refused."""
    agg = AggregateSet.from_text_dict(DOMAIN, {"A:a1": 3}, 1, is_dp=is_dp)
    records = PreparedTable(domain, np.zeros((2, domain.n_columns), dtype=np.int32))
    with pytest.raises(SdsInputError, match=match):
        agreement(agg, records)


def test_no_synthetic_records(dp: AggregateSet) -> None:
    """Zero synthetic records: every DP combination with synthetic count 0, no TVD."""
    a = agreement(dp, PreparedTable(DOMAIN, np.zeros((0, 3), dtype=np.int32)))
    assert a.by_len[1].synthetic.tolist() == [0] * 5
    assert np.isnan(a.pair_tvd()).all()


def test_a_length_without_any_combination() -> None:
    """A length with no DP and no synthetic combination is an empty, valid length."""
    agg = AggregateSet.from_text_dict(DOMAIN, {"A:a1": 3}, 2, is_dp=True)
    records = PreparedTable(DOMAIN, np.array([[0, -1, -1]], dtype=np.int32))
    a = agreement(agg, records)
    assert len(a.by_len[2]) == 0 and a.mean_abs_error_by_len() == {1: 2.0, 2: None}
    assert a.by_len[1].dp.tolist() == [3] and a.by_len[1].synthetic.tolist() == [1]
