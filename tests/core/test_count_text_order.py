"""count_text_order: the TSV's row order (count descending, then the text byte-wise) from one
packed int64 key per combination, equal to the lexsort over text_order's keys and the counts,
and to sorting the texts themselves."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sds_core.data.domain import Domain
from sds_core.marginals.aggregates import (
    CombinationCounts,
    combination_texts,
    count_text_order,
    text_order,
)

LABELS = ("1", "10", "1 0", "1:0", "é", "e", "Z", "a b", "0", "x")


def _domain(rng: np.random.Generator, n_columns: int) -> Domain:
    columns = tuple(f"c{j}" if j % 2 else f"C {j}" for j in range(n_columns))
    labels = []
    for _ in range(n_columns):
        pick = rng.choice(len(LABELS) - 1, size=int(rng.integers(1, 6)), replace=False)
        labels.append(tuple(sorted({LABELS[i] for i in pick.tolist()})))
    return Domain(columns, tuple(labels))


def _block(rng: np.random.Generator, domain: Domain, k: int, top: int) -> CombinationCounts:
    offsets = domain.offsets
    rows = set()
    for cols in itertools.combinations(range(domain.n_columns), k):
        for values in itertools.product(*(range(domain.cardinalities[c]) for c in cols)):
            if rng.random() < 0.7:
                rows.add(tuple(offsets[c] + v for c, v in zip(cols, values, strict=True)))
    attrs = np.asarray(sorted(rows), dtype=np.int32).reshape(-1, k)
    counts = rng.integers(1, top, size=len(attrs), endpoint=True)
    counts[: len(counts) // 3] = counts[0]  # ties in the count: the text decides
    return CombinationCounts.from_unsorted(attrs, counts)


@pytest.mark.parametrize("top", [3, 1000, 2**62])  # 2**62: no room to pack, the lexsort path
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_packed_order_is_the_text_order(k: int, top: int) -> None:
    for seed in range(4):
        rng = np.random.default_rng(seed * 10 + k)
        domain = _domain(rng, 5)
        block = _block(rng, domain, k, top)
        order = count_text_order(domain, block)
        keys = text_order(domain, block)
        assert order is not None and keys is not None
        assert order.tolist() == np.lexsort((*keys, -block.counts)).tolist()
        texts = combination_texts(domain, block).to_pylist()
        expected = sorted(range(len(block)), key=lambda i: (-block.counts[i], texts[i].encode()))
        assert order.tolist() == expected


def test_no_order_when_a_text_holds_a_semicolon() -> None:
    domain = Domain(("a",), (("x;y", "z"),))
    block = CombinationCounts(np.array([[0], [1]], np.int32), np.array([1, 1]))
    assert count_text_order(domain, block) is None


def test_empty_block() -> None:
    domain = Domain(("a", "b"), (("x",), ("y",)))
    assert count_text_order(domain, CombinationCounts.empty(2)).tolist() == []
