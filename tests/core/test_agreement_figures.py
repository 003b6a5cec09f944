"""The agreement figures of issue 22: noise sd per length, share inside the 95% interval, pairs."""

from __future__ import annotations

import numpy as np
import pytest

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.errors import SdsInputError
from sds_core.evaluation.agreement import (
    agreement,
    chi2_quantile,
    count_sd_by_len,
    inside_interval_share_by_len,
    pair_within_noise_share,
)
from sds_core.marginals.aggregates import AggregateSet

AB = Domain(("A", "B"), (("a1", "a2"), ("b1", "b2")))
DP = {
    "A:a1": 60,
    "A:a2": 40,
    "B:b1": 50,
    "B:b2": 50,
    "A:a1;B:b1": 30,
    "A:a1;B:b2": 30,
    "A:a2;B:b1": 20,
}


def _synthetic(rows: dict[tuple[int, int], int]) -> PreparedTable:
    codes = np.array([k for k, n in rows.items() for _ in range(n)], dtype=np.int32)
    return PreparedTable(AB, codes)


def test_count_sd_is_sigma_times_root_of_the_allowed_sensitivity() -> None:
    """σ_k·√Δ_k per length, as the manifest's noise_sd; lengths must match."""
    assert count_sd_by_len([2.0, 1.5, 3.0], [9, 4, 0]) == {1: 6.0, 2: 3.0, 3: 0.0}
    with pytest.raises(SdsInputError, match="one sigma per length"):
        count_sd_by_len([1.0], [1, 2])


def test_share_inside_the_interval_counts_reported_combinations_only() -> None:
    """Gaps 10, 10, 0, 0 at length 1 and 10, 0, 10 (+ the unreported (a2, b2), not counted)
    at length 2: with sd 3 the interval is ±5.88."""
    agg = AggregateSet.from_text_dict(AB, DP, 2, is_dp=True)
    syn = _synthetic({(0, 0): 40, (0, 1): 30, (1, 0): 10, (1, 1): 20})
    a = agreement(agg, syn)
    shares = inside_interval_share_by_len(a, {1: 3.0, 2: 3.0})
    assert shares == {1: 0.5, 2: pytest.approx(1 / 3)}
    assert inside_interval_share_by_len(a, {1: 3.0})[2] is None


def test_pair_test_passes_records_that_reproduce_the_counts() -> None:
    """The one column pair passes when its gaps are small against sd, fails when large."""
    agg = AggregateSet.from_text_dict(AB, DP, 2, is_dp=True)
    exact = _synthetic({(0, 0): 30, (0, 1): 30, (1, 0): 20})
    far = _synthetic({(0, 0): 60, (1, 0): 20})
    assert pair_within_noise_share(agreement(agg, exact), 3.0) == 1.0
    assert pair_within_noise_share(agreement(agg, far), 3.0) == 0.0
    assert pair_within_noise_share(agreement(agg, exact), 0.0) is None


def test_chi2_quantile_is_close_to_the_tables() -> None:
    """95% quantiles: 18.307 (10 dof), 124.342 (100 dof) within 0.5%; bad arguments refused."""
    assert chi2_quantile(10) == pytest.approx(18.307, rel=5e-3)
    assert chi2_quantile(100) == pytest.approx(124.342, rel=5e-3)
    with pytest.raises(SdsInputError, match="dof"):
        chi2_quantile(0)
