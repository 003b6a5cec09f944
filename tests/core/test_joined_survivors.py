"""aggregate-k's driver without V_k (issue 28 point 3): the survivors read off the join
(``CandidateSet.joined_survivors``) and the noise added in place (``add_discrete_gaussian``)
give exactly what V_k, a noise array and ``counts + noise`` gave."""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

import numpy as np
import pytest
from table_fixtures import table_from_rows

from sds_core._jit import HAVE_NUMBA
from sds_core.data.domain import Domain
from sds_core.dp.noise import add_discrete_gaussian, discrete_gaussian
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError, SdsInternalError
from sds_core.marginals import engine
from sds_core.marginals.backend import LocalBackend, subtract_counts
from sds_core.marginals.candidates import CandidateSet
from sds_core.marginals.combinations import join_candidates
from sds_core.marginals.params import DpParams

needs_numba = pytest.mark.skipif(not HAVE_NUMBA, reason="the join path needs numba")


def _domain(cards: tuple[int, ...]) -> Domain:
    return Domain(
        tuple(f"C{i}" for i in range(len(cards))),
        tuple(tuple(f"v{j}" for j in range(c)) for c in cards),
    )


def _random_prev(rng: np.random.Generator, dom: Domain, k: int, keep: float) -> np.ndarray:
    """Sorted (k-1)-combinations of distinct columns, each kept with probability ``keep``."""
    attr_col = dom.attribute_columns()
    rows = [
        c
        for c in itertools.combinations(range(dom.n_attributes), k - 1)
        if len({attr_col[a] for a in c}) == k - 1 and rng.random() < keep
    ]
    return np.array(rows, dtype=np.int32).reshape(-1, k - 1)


@needs_numba
@pytest.mark.parametrize("k", [2, 3, 4])
def test_joined_survivors_equal_the_survivors_of_v_k(k: int) -> None:
    """|V_k| and the survivors without V_k equal those of the built V_k (values, order, dtypes)
    at thresholds from below every count to above all, and V_k is never built."""
    rng = np.random.default_rng(k)
    dom = _domain((3, 4, 2, 5, 3, 4))
    for keep in (0.5, 0.8, 1.0):
        prev = _random_prev(rng, dom, k, keep)
        v_k = join_candidates(prev, dom)
        assert v_k.shape[0] > 10
        noisy = rng.integers(-30, 60, size=v_k.shape[0]).astype(np.int64)
        for threshold in (-math.inf, -5.0, 0.0, 12.5, 40.0, math.inf):
            prev_ro = prev.copy()
            prev_ro.flags.writeable = False  # as unpickled from a message
            cands = CandidateSet(dom, k, prev_ro)
            assert cands.size == v_k.shape[0]
            got = cands.joined_survivors(noisy, threshold)
            assert got is not None
            assert cands._attrs is None  # V_k never built
            want = engine._survivors(v_k, noisy, threshold)
            assert got[0].dtype == want[0].dtype == np.int32
            assert got[1].dtype == want[1].dtype == np.int64
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@needs_numba
def test_joined_survivors_edge_cases() -> None:
    """No pair joins: |V_k| = 0 and no survivor; a built V_k or length 1 selects from attrs;
    noisy counts not of |V_k| are a bug."""
    dom = _domain((3, 4, 2))
    lone = CandidateSet(dom, 3, np.array([[0, 3]], dtype=np.int32))
    assert lone.size == 0
    attrs, kept = lone.joined_survivors(np.zeros(0, dtype=np.int64), 0.0) or (None, None)
    assert attrs is not None and attrs.shape == (0, 3) and kept is not None and kept.shape == (0,)
    built = CandidateSet(dom, 2, np.array([[0], [3], [7]], dtype=np.int32))
    assert built.attrs.shape[0] == built.size == 3
    assert built.joined_survivors(np.ones(3, dtype=np.int64), 0.0) is None
    ones = CandidateSet(dom, 1, np.array([[0], [3]], dtype=np.int32))
    assert ones.joined_survivors(np.ones(2, dtype=np.int64), 0.0) is None
    fresh = CandidateSet(dom, 2, np.array([[0], [3], [7]], dtype=np.int32))
    with pytest.raises(SdsInternalError):
        fresh.joined_survivors(np.ones(2, dtype=np.int64), 0.0)


@pytest.mark.parametrize("size", [0, 7, 5000])
def test_noise_added_in_place_equals_the_noise_array(size: int) -> None:
    """add_discrete_gaussian leaves values + discrete_gaussian(...) (the same stream, both the
    searchsorted and the guided sampler), for the same label and stage."""
    rng = np.random.default_rng(size)
    values = rng.integers(0, 1000, size=size).astype(np.int64)
    want = values + discrete_gaussian(
        ReleaseRandomness.from_seed(3), "r/aggregate-3/gaussian", sigma=4.5, size=size, stage="a3"
    )
    add_discrete_gaussian(
        ReleaseRandomness.from_seed(3), "r/aggregate-3/gaussian", values, sigma=4.5, stage="a3"
    )
    assert values.dtype == np.int64 and np.array_equal(values, want)


def test_noise_in_place_refuses_what_it_cannot_change() -> None:
    """A read-only or non-int64 vector is refused before any word is read."""
    ro = np.zeros(3, dtype=np.int64)
    ro.flags.writeable = False
    for bad in (ro, np.zeros(3, dtype=np.int32), np.zeros((3, 1), dtype=np.int64)):
        with pytest.raises(SdsInputError):
            add_discrete_gaussian(ReleaseRandomness.from_seed(1), "x", bad, sigma=1.0, stage="s")


def test_subtract_counts_dense_and_sparse() -> None:
    """The drops subtracted in place, from a dense or a sparse vector, equal ``a - b``."""
    from sds_core.marginals.backend import compact

    rng = np.random.default_rng(0)
    a = rng.integers(0, 50, size=400).astype(np.int64)
    for density in (0.05, 0.9):
        b = np.where(rng.random(400) < density, rng.integers(0, 5, size=400), 0).astype(np.int64)
        out = a.copy()
        subtract_counts(out, compact(b))
        assert np.array_equal(out, a - b)


@dataclasses.dataclass
class _Unbuilt:
    """A local backend that counts on a copy of the recipe (as a cluster's workers do), so the
    engine's CandidateSet never builds V_k."""

    local: LocalBackend

    def __getattr__(self, name: str) -> Any:
        return getattr(self.local, name)

    def bounded_counts(self, candidates: CandidateSet, **kw: Any) -> Any:
        copy = CandidateSet(candidates.domain, candidates.length, candidates.base)
        return self.local.bounded_counts(copy, **kw)


@pytest.mark.parametrize("joined", [True, False], ids=["join", "no-numba-fallback"])
def test_aggregation_without_v_k_equals_the_local_one(
    joined: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dp_aggregate through the join path (V_k never built on the 'driver'), or V_k built late
    where numba is absent, gives the local path's DP aggregates and report, byte for byte,
    with contribution bounding running."""
    from sds_core.marginals import candidates as candidates_module

    if not joined:
        monkeypatch.setattr(candidates_module, "HAVE_NUMBA", False)
    rng = np.random.default_rng(11)
    header = ["A", "B", "C", "D", "E"]
    rows = [[f"{h}{min(rng.geometric(0.35), 6)}" for h in header] for _ in range(3000)]
    table = table_from_rows(header, rows)
    params = DpParams(epsilon=3.0, reporting_length=3, percentile_percentage=80)
    local = engine.dp_aggregate(LocalBackend(table), params, ReleaseRandomness.from_seed(4))
    joined = engine.dp_aggregate(
        _Unbuilt(LocalBackend(table)),  # type: ignore[arg-type]
        params,
        ReleaseRandomness.from_seed(4),
    )
    assert local.report.to_dict() == joined.report.to_dict()
    for k in (1, 2, 3):
        a, b = local.aggregates.counts_of(k), joined.aggregates.counts_of(k)
        assert a.attrs.dtype == b.attrs.dtype and a.counts.dtype == b.counts.dtype
        assert np.array_equal(a.attrs, b.attrs) and np.array_equal(a.counts, b.counts)
    assert len(local.aggregates.counts_of(3)) > 10
