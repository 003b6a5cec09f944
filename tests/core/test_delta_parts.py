"""Where a release's δ goes, the noise samplers included (issue #27 point 7): the effective δ is
public, never above δ, and ρ_1 gives up the samplers' part."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.dp.noise import noise_table, tv_bound
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.marginals.engine import dp_aggregate, plan_release, release_delta_parts
from sds_core.marginals.params import DpParams
from sds_core.marginals.privacy_report import sampler_bound


def _table(n: int, cards: tuple[int, ...], seed: int) -> PreparedTable:
    rng = np.random.default_rng(seed)
    dom = Domain(
        tuple(f"C{i}" for i in range(len(cards))),
        tuple(tuple(f"v{j:03d}" for j in range(c)) for c in cards),
    )
    codes = np.stack([rng.integers(0, c, n) for c in cards], axis=1).astype(np.int32)
    return PreparedTable(dom, codes)


@pytest.mark.parametrize("scale", [0.05, 0.5, 1.0, 7.2, 33.3, 250.0])
@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_tv_bound_bounds_the_table(kind: str, scale: float) -> None:
    """The analytic bound is >= the exact table's TV and grows with the scale."""
    assert noise_table(kind, scale).tv_per_draw <= tv_bound(kind, scale) < tv_bound(kind, 2 * scale)


def test_effective_delta_is_public_and_within_delta() -> None:
    """Two tables with the same columns but 3 vs 120 values per column: the same effective δ
    (it depended on the number of distinct values before), at most δ, all of it in δ/2 + δ/2."""
    params = DpParams(epsilon=2.0, delta=1e-6, reporting_length=2)
    few = dp_aggregate(_table(2000, (3, 3, 3, 3), 1), params, ReleaseRandomness.from_seed(1))
    many = dp_aggregate(_table(2000, (120,) * 4, 2), params, ReleaseRandomness.from_seed(1))
    assert few.report.to_dict()["delta_parts"] == many.report.to_dict()["delta_parts"]
    parts = few.report.delta_parts
    assert few.report.effective_delta == many.report.effective_delta <= 1e-6
    assert parts.zcdp == 5e-7 and parts.threshold + parts.sampler <= 5e-7
    assert 0 < parts.sampler < 1e-12


def test_declared_domains_spend_no_threshold_delta() -> None:
    """With declared domains the 1-tuple threshold spends nothing: effective δ = δ/2 + samplers."""
    from sds_core.dp.declared import DeclaredDomain

    declared = tuple(DeclaredDomain(f"C{i}", values=("v000", "v001", "v002")) for i in range(4))
    params = DpParams(epsilon=2.0, delta=1e-6, reporting_length=2, declared_domains=declared)
    rep = dp_aggregate(_table(500, (3,) * 4, 3), params, ReleaseRandomness.from_seed(2)).report
    assert rep.delta_parts.threshold == 0.0
    assert rep.effective_delta == pytest.approx(5e-7 + rep.delta_parts.sampler)


def test_samplers_that_do_not_fit_in_half_delta_are_refused() -> None:
    """ε = 40: (1 + e^40)·T is far above δ/2: refused, naming the fix (length 1 checks it
    before its draws; a release checks it before the count is charged)."""
    params = DpParams(epsilon=40.0, delta=1e-6, reporting_length=2)
    plan = plan_release(params, 1000)
    assert (1 + math.exp(40.0)) * sampler_bound(plan, 4, None) > 5e-7
    with pytest.raises(SdsInputError, match=r"does not fit in δ/2 .* sensitivity_cap"):
        release_delta_parts(params, plan, 4)
    with pytest.raises(SdsInputError, match="does not fit"):
        dp_aggregate(_table(300, (3,) * 4, 4), params, ReleaseRandomness.from_seed(3))
