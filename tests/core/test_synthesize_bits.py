"""Bitset candidate path of the completion kernel: same records as the list walk, exact layout."""

from __future__ import annotations

import numpy as np
import pytest
from test_synthesize import _thin

import sds_core.synthesis._bitsets as bits_mod
from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.synthesis._bitsets import ctz64, popcount64
from sds_core.synthesis.generator import SynthesisParams, synthesize
from sds_core.synthesis.layout import build_layout


def _random_table(rng: np.random.Generator, n: int, cards: tuple[int, ...]) -> PreparedTable:
    """Random codes (-1 = empty), column 1 correlated with column 0; labels zero-padded."""
    dom = Domain(
        tuple(f"C{j}" for j in range(len(cards))),
        tuple(tuple(f"v{i:03d}" for i in range(c)) for c in cards),
    )
    cols = [rng.integers(-1, c, size=n) for c in cards]
    cols[1] = np.where(rng.random(n) < 0.6, np.maximum(cols[0], 0) % cards[1], cols[1])
    return PreparedTable(dom, np.stack(cols, axis=1).astype(np.int32))


def _bit(row: np.ndarray, colw: np.ndarray, col: int, local: int) -> bool:
    word = row[colw[col] + local // 64]
    return bool((int(word) >> (local % 64)) & 1)


@pytest.mark.parametrize("r", [1, 2, 3, 4])
def test_bitset_path_gives_the_same_records_as_the_list_walk(
    r: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Switching the bitsets off (size limit 0) changes no synthesized record, in any mode."""
    rng = np.random.default_rng(77 + r)
    # one column wider than 64 values, so candidate rows span several words
    table = _random_table(rng, 900, (2, 70, 4, 3, 130, 2))
    agg = _thin(exact_aggregates(table, r), rng, keep=0.7)
    assert build_layout(agg, None).bitsets.enabled == (r >= 2)
    for use_syn in (True, False):
        for target in (None, 700):
            p = SynthesisParams(
                use_synthetic_counts=use_syn, target_number_of_records=target, parallel_batches=1
            )
            with_bits = synthesize(agg, p, rng=np.random.default_rng(3)).codes
            with monkeypatch.context() as m:
                m.setattr(bits_mod, "BITSET_BYTES_LIMIT", 0)
                assert not build_layout(agg, None).bitsets.enabled
                walked = synthesize(agg, p, rng=np.random.default_rng(3)).codes
            assert np.array_equal(with_bits, walked)


def test_bitsets_hold_pairs_thirds_and_ranks() -> None:
    """b2 rows are the pair partners, b3 rows the CSR thirds, cum3 the CSR rank of each word."""
    rng = np.random.default_rng(5)
    agg = exact_aggregates(_random_table(rng, 500, (3, 90, 4, 70)), 3)
    lay = build_layout(agg, None)
    bs, dom = lay.bitsets, agg.domain
    assert bs.enabled
    W, colw, col_of = bs.words, bs.colw, dom.attribute_columns()
    b2, b3, cum3 = bs.b2.reshape(-1, W), bs.b3.reshape(-1, W), bs.cum3.reshape(-1, W)
    pairs = {tuple(p) for p in agg.counts_of(2).attrs.tolist()}
    for a in range(dom.n_attributes):
        for b in range(dom.n_attributes):
            got = _bit(b2[a], colw, col_of[b], b - dom.offsets[col_of[b]])
            assert got == ((min(a, b), max(a, b)) in pairs)
    start, third = lay.triples.start, lay.triples.third
    for pl in range(len(agg.counts_of(2))):
        p = lay.pair_first + pl
        lst = third[start[p] : start[p + 1]].tolist()
        set_bits = [
            a
            for a in range(dom.n_attributes)
            if _bit(b3[pl], colw, col_of[a], a - dom.offsets[col_of[a]])
        ]
        assert set_bits == lst
        for w in range(W):  # rank before each word = set bits in the words before it
            assert cum3[pl, w] == sum(bin(int(x)).count("1") for x in b3[pl, :w])


def test_popcount64_counts_bits() -> None:
    """popcount64 and ctz64 agree with Python's bit arithmetic on edge values."""
    numba = pytest.importorskip("numba")
    pop = numba.njit(lambda x: popcount64(x))
    ctz = numba.njit(lambda x: ctz64(x))
    for v in (1, 2, 2**63, 2**64 - 1, 0xF0F0_0000_1234_5678):
        assert int(pop(np.uint64(v))) == bin(v).count("1")
        assert int(ctz(np.uint64(v))) == (v & -v).bit_length() - 1
    assert int(pop(np.uint64(0))) == 0
