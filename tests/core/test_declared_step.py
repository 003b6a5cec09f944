"""Tests of declared domains in the SDS engine (declared_step + dp_aggregate with declared)."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.dp import noise
from sds_core.dp.declared import DeclaredDomain
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.marginals.aggregates import CombinationCounts
from sds_core.marginals.declared_tuples import check_declared, declared_threshold, reencode
from sds_core.marginals.engine import (
    aggregate_length,
    dp_aggregate,
    finalize,
    plan_release,
    protect_record_count,
)
from sds_core.marginals.params import DpParams

DATA_LABELS = (("a1", "a2", "secret"), ("b1", "b2"), ("c1", "c2", "c3"))
DECLARED = (
    DeclaredDomain("A", values=("a1", "a2", "a3")),  # "secret" is in the data, not declared
    DeclaredDomain("B", values=("b1", "b2", "b3", "b4")),
    DeclaredDomain("C", values=("c1", "c2", "c3"), size=50),
)


def _table(n: int = 3000, seed: int = 0) -> PreparedTable:
    rng = np.random.default_rng(seed)
    codes = np.stack(
        [rng.choice(3, n, p=[0.6, 0.39, 0.01]), rng.integers(0, 2, n), rng.integers(0, 3, n)],
        axis=1,
    ).astype(np.int32)
    codes[rng.random(codes.shape) < 0.1] = -1
    return PreparedTable(Domain(("A", "B", "C"), DATA_LABELS), codes)


def _params(**kw: object) -> DpParams:
    return DpParams(
        **{"epsilon": 4.0, "delta": 1e-6, "reporting_length": 3, "declared_domains": DECLARED, **kw}
    )


def test_declared_release_contains_only_declared_labels() -> None:
    """Undeclared data values never appear; every released label is declared."""
    table = _table()
    for seed in range(4):
        rnd = ReleaseRandomness.from_seed(seed)
        res = dp_aggregate(table, _params(declared_tolerance=0.01), rnd)
        dom = res.aggregates.domain
        assert "secret" not in dom.labels[0]
        for labs, dec in zip(dom.labels, DECLARED, strict=True):
            assert (dec.index_of(list(labs)) >= 0).all()
        text = res.aggregates.to_text_dict()
        assert text and not any("secret" in key for key in text)
        assert res.report.threshold_by_len[0] < math.inf


def test_absent_values_appear_only_through_the_tail() -> None:
    """Declared values absent from the data appear only as tail draws above the threshold."""
    table = _table()
    params = _params(declared_tolerance=1e-4)  # low tolerance: ~9 invented values expected
    invented = 0
    for seed in range(6):
        rnd = ReleaseRandomness.from_seed(seed)
        count = protect_record_count(table, params, rnd, release_label="r")
        plan = plan_release(params, count.protected_number_of_records)
        step = aggregate_length(table, 1, {}, plan, params, rnd, release_label="r")
        data = {(c, lab) for c, labs in zip("ABC", DATA_LABELS, strict=True) for lab in labs}
        for attr, cnt in zip(step.survivors.attrs.ravel(), step.survivors.counts, strict=True):
            col, lab = step.domain.attribute_text(int(attr)).split(":")
            if (col, lab) not in data:
                invented += 1
                assert cnt > step.threshold
        assert step.private_notes == {
            "A": {"undeclared_values": ["secret"], "n_undeclared_values": 1}
        }
    assert invented > 0  # the tail is exercised


def test_declared_stage_by_stage_equals_all_at_once_and_is_reproducible() -> None:
    """Stages with fresh randomness (as on resume) == dp_aggregate; same key ⇒ identical."""
    table = _table(2000, 3)
    params = _params()
    whole = dp_aggregate(table, params, ReleaseRandomness.from_seed(9), release_label="r1")
    again = dp_aggregate(table, params, ReleaseRandomness.from_seed(9), release_label="r1")
    assert whole.aggregates.to_text_dict() == again.aggregates.to_text_dict()
    key = ReleaseRandomness.from_seed(9).key
    count = protect_record_count(table, params, ReleaseRandomness(key), release_label="r1")
    plan = plan_release(params, count.protected_number_of_records)
    survivors: dict[int, CombinationCounts] = {}
    released = None
    for k in (1, 2, 3):
        step = aggregate_length(
            table,
            k,
            dict(survivors),
            plan,
            params,
            ReleaseRandomness(key),
            release_label="r1",
            chunk_records=333,
            domain=released,
        )
        released = step.domain if k == 1 else released
        survivors[k] = step.survivors
    staged = finalize(
        survivors,
        domain=released,
        reporting_length=3,
        protected_number_of_records=count.protected_number_of_records,
    )
    assert staged.domain == whole.aggregates.domain
    assert staged.to_text_dict() == whole.aggregates.to_text_dict()
    # a table already re-encoded by the caller gives the same length-2 step
    pre = reencode(table, released)
    s2 = aggregate_length(
        pre,
        2,
        {1: survivors[1]},
        plan,
        params,
        ReleaseRandomness(key),
        release_label="r1",
        domain=released,
    )
    assert np.array_equal(s2.survivors.counts, survivors[2].counts)


def test_declared_needs_every_column_and_the_released_domain() -> None:
    """Partial or unknown declarations are refused before any noise; k >= 2 needs domain=."""
    table = _table(200)
    rnd = ReleaseRandomness.from_seed(0)
    with pytest.raises(SdsInputError, match=r"every column or none.*\['C'\]"):
        protect_record_count(table, _params(declared_domains=DECLARED[:2]), rnd, release_label="r")
    bad = (*DECLARED, DeclaredDomain("Z", values=("z",)))
    with pytest.raises(SdsInputError, match=r"not in the table: \['Z'\]"):
        check_declared(table.domain, bad)
    params = _params()
    plan = plan_release(params, 200)
    s1 = aggregate_length(table, 1, {}, plan, params, rnd, release_label="r")
    with pytest.raises(SdsInputError, match="needs domain="):
        aggregate_length(table, 2, {1: s1.survivors}, plan, params, rnd, release_label="r")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"declared_domains": (DECLARED[0], DECLARED[0])}, "twice"),
        ({"declared_domains": ("A",)}, "tuple of DeclaredDomain"),
        ({"declared_tolerance": 1.0}, "declared_tolerance"),
        ({"declared_tolerance": 0.0}, "declared_tolerance"),
    ],
)
def test_dp_params_validates_declared_fields(kwargs: dict, match: str) -> None:
    """Bad declared_domains / declared_tolerance raise SdsInputError naming the field."""
    with pytest.raises(SdsInputError, match=match):
        DpParams(**kwargs)


@pytest.mark.parametrize(("sigma", "n", "tol"), [(3.0, 5, 0.5), (7.5, 10**6, 0.9), (1.0, 1, 0.1)])
def test_declared_threshold_is_the_smallest_meeting_the_tolerance(
    sigma: float, n: int, tol: float
) -> None:
    """P(Z > t) <= 1 − tol^(1/N) < P(Z > t − 1) on the noise module's exact table."""
    t = declared_threshold(sigma, n, tol)
    table = noise.noise_table("gaussian", sigma)

    def tail(x: int) -> float:
        i = x - table.offset
        return 1.0 if i < 0 else 1 - int(table.cdf_u64[i]) / 2**64

    target = 1 - tol ** (1 / n)
    assert tail(t) <= target * (1 + 1e-9)
    assert t == 0 or tail(t - 1) > target


def test_reencode_maps_by_label_and_empties_the_rest() -> None:
    """Codes follow labels into the released domain; missing labels become empty (-1)."""
    table = _table(50)
    released = Domain(("A", "B", "C"), (("a2", "a3"), ("b2",), ("c1", "c3", "unseen-07")))
    out = reencode(table, released)
    for j in range(3):
        for old, new in zip(table.codes[:, j], out.codes[:, j], strict=True):
            want = DATA_LABELS[j][old] if old >= 0 else None
            got = released.labels[j][new] if new >= 0 else None
            assert got == (want if want in released.labels[j] else None)
    assert reencode(out, released) is out


def test_declared_1e10_column_stays_small() -> None:
    """A column declared with 10^10 values: few invented values, little memory."""
    table = _table(1000, 5)
    declared = (*DECLARED[:2], DeclaredDomain("C", values=("c1", "c2", "c3"), size=10**10))
    params = DpParams(epsilon=4.0, delta=1e-6, reporting_length=2, declared_domains=declared)
    tracemalloc.start()
    res = dp_aggregate(table, params, ReleaseRandomness.from_seed(2))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50 * 2**20
    assert len(res.aggregates.domain.labels[2]) < 10
    assert res.report.to_dict()["threshold_by_len"][0] is not None
