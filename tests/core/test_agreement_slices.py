"""The agreement a slice of combinations at a time: the union merged and read back in slices,
the k-way TVD summed in slices, the synthetic side counted one length at a time: the same
rows and the same floats, bit for bit, as one pass over all of them, whatever the slice size."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from sds_core.data.params import PrepareParams
from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError, SdsInternalError
from sds_core.evaluation.agreement import (
    NOT_REPORTED,
    SLICE_ROWS,
    Agreement,
    LengthAgreement,
    agreement,
    merge_keyed,
    merge_length,
    synthetic_keys,
)
from sds_core.marginals.aggregates import CombinationCounts, decode_keys, encode_keys
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.marginals.params import DpParams

FIELDS = ("attrs", "dp", "synthetic")


def _one_pass(a: Agreement, la: LengthAgreement) -> dict[tuple[int, ...], float]:
    """The TVD of every column set in one pass over all combinations (the former code)."""
    c, k = a.domain.n_columns, la.length
    cols = a.domain.attribute_columns().astype(np.int64)[la.attrs]
    key = np.zeros(len(la), dtype=np.int64)
    for j in range(k):
        key = key * c + cols[:, j]
    sets, inv = np.unique(key, return_inverse=True)
    n = sets.shape[0]
    dp = np.where(la.reported, la.dp, 0).astype(np.float64)
    syn = la.synthetic.astype(np.float64)
    dp_sum = np.bincount(inv, weights=dp, minlength=n)
    syn_sum = np.bincount(inv, weights=syn, minlength=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.abs(dp / dp_sum[inv] - syn / syn_sum[inv])
    tvd = 0.5 * np.bincount(inv, weights=np.nan_to_num(gap), minlength=n)
    out = {}
    for i in np.flatnonzero((dp_sum > 0) & (syn_sum > 0)).tolist():
        code, columns = int(sets[i]), []
        for _ in range(k):
            code, col = divmod(code, c)
            columns.append(col)
        out[tuple(reversed(columns))] = float(tvd[i])
    return out


@pytest.fixture(scope="module")
def compared() -> Agreement:
    """DP aggregates (R = 3) of 3,000 records over 5 columns of 3..40 values, against 2,000
    synthetic records drawn at random over the same domain (many combinations per column set,
    so the order of the float additions shows in the last bits)."""
    rng = np.random.default_rng(21)
    cards = [3, 7, 12, 25, 40]
    frame = pd.DataFrame(
        {f"c{i}": rng.choice([f"v{j}" for j in range(card)], 3000) for i, card in enumerate(cards)}
    )
    table = prepare(pa.Table.from_pandas(frame, preserve_index=False), PrepareParams())
    dp = dp_aggregate(table, DpParams(reporting_length=3), ReleaseRandomness.from_seed(9))
    codes = np.stack([rng.integers(-1, len(labs), 2000) for labs in table.domain.labels], axis=1)
    return agreement(dp.aggregates, PreparedTable(table.domain, codes.astype(np.int32)))


@pytest.mark.parametrize("rows", [1, 5, 97, SLICE_ROWS])
def test_sliced_tvd_equals_one_pass(compared: Agreement, rows: int) -> None:
    """marginal_tvd(k, rows=...) == the one-pass TVD for k = 1, 2, 3, floats compared with ==."""
    assert len(compared.by_len[1]) > 5 and len(compared.by_len[2]) > 97
    for k in (1, 2, 3):
        la = compared.by_len[k]
        assert la.reported.any() and (la.synthetic > 0).any()
        got = compared.marginal_tvd(k, rows=rows)
        want = _one_pass(compared, la)
        assert len(got) == len(want) > 0
        assert list(got) == list(want) and got == want


def test_a_slice_needs_a_combination(compared: Agreement) -> None:
    """rows < 1 is a caller's mistake."""
    with pytest.raises(SdsInputError, match="at least one combination"):
        compared.marginal_tvd(2, rows=0)


def _one_shot_union(dp: CombinationCounts, syn: CombinationCounts, base: int) -> tuple:
    """The union as the former merge_length built it: whole arrays at once."""
    dp_keys, syn_keys = encode_keys(dp.attrs, base), encode_keys(syn.attrs, base)
    keys = np.union1d(dp_keys, syn_keys)
    attrs = np.empty((keys.shape[0], dp.length), dtype=np.int32)
    attrs[np.searchsorted(keys, dp_keys)] = dp.attrs
    attrs[np.searchsorted(keys, syn_keys)] = syn.attrs
    dp_counts = np.full(keys.shape[0], NOT_REPORTED, dtype=np.int64)
    dp_counts[np.searchsorted(keys, dp_keys)] = dp.counts
    syn_counts = np.zeros(keys.shape[0], dtype=np.int64)
    syn_counts[np.searchsorted(keys, syn_keys)] = syn.counts
    return attrs, dp_counts, syn_counts


@pytest.mark.parametrize("rows", [1, 3, 97, SLICE_ROWS])
def test_blocked_union_equals_one_shot(compared: Agreement, rows: int) -> None:
    """merge_length a slice at a time, read back a slice at a time (blocks of another size),
    gives the one-shot union row for row; the synthetic side's keys are exact_aggregates'."""
    base = compared.domain.n_attributes
    for k in (1, 2, 3):
        la = compared.by_len[k]
        syn = CombinationCounts(decode_keys(la.syn_keys, base, k), la.syn_counts.astype(np.int64))
        want = _one_shot_union(la.dp_side, syn, base)
        merged = merge_length(la.dp_side, syn, base, rows=rows)
        assert np.array_equal(merged.source, la.source)
        for read in (1, 7, rows):
            parts = list(merged.blocks(read))
            got = [np.concatenate([getattr(p, f) for p in parts]) for f in FIELDS]
            assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
            assert got[1].dtype == got[2].dtype == np.int64
        assert merged.n_reported == int((want[1] != NOT_REPORTED).sum())
        assert merged.n_synthetic == int((want[2] > 0).sum())


def test_synthetic_keys_are_the_exact_aggregates(compared: Agreement) -> None:
    """synthetic_keys (column group by column group) == exact_aggregates, encoded."""
    rng = np.random.default_rng(5)
    domain = compared.domain
    codes = np.stack([rng.integers(-1, len(labs), 500) for labs in domain.labels], axis=1)
    table = PreparedTable(domain, codes.astype(np.int32))
    exact = exact_aggregates(table, 3)
    base = domain.n_attributes
    for k in (1, 2, 3):
        keys, counts = synthetic_keys(table, k, base)
        assert np.array_equal(keys, encode_keys(exact.counts_of(k).attrs, base))
        assert np.array_equal(counts, exact.counts_of(k).counts) and counts.dtype == np.int32


def test_unsorted_synthetic_keys_are_a_bug(compared: Agreement) -> None:
    """A side whose keys do not ascend is refused, also across slices."""
    la = compared.by_len[2]
    keys = la.syn_keys.copy()
    keys[[3, 10]] = keys[[10, 3]]
    with pytest.raises(SdsInternalError, match="unique and sorted"):
        merge_keyed(la.dp_side, keys, la.syn_counts, la.base, rows=4)
