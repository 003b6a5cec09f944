"""The marginal-fidelity coding of synthetic records (sds_core/evaluation/partitioned.py): a
local table coded whole (``fidelity_coding``) and in partitions (``fidelity_mappings`` +
``partition_fidelity_cells``) give the same cardinalities and cell counts, byte for byte, on
tables with multi-value columns, a column with no values at all, empty cells and synthetic
labels the sensitive table never had."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from sds_core.data.domain import Domain
from sds_core.data.params import PrepareParams
from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_core.evaluation.partitioned import (
    Cells,
    add_cells,
    fidelity_coding,
    fidelity_mappings,
    marginal_cells,
    partition_fidelity_cells,
)


def _sensitive() -> PreparedTable:
    """600 records: a multi-value column (empty in some records), a column never filled (no
    labels), and columns with empty cells."""
    rng = np.random.default_rng(11)
    frame = pd.DataFrame(
        {
            "sex": rng.choice(["1", "2", ""], 600),
            "none": [""] * 600,
            "tags": rng.choice(["a|b", "c", "", "b|c", "a"], 600),
            "city": rng.choice(["Oslo", "Bergen", ""], 600),
        }
    )
    return prepare(
        pa.Table.from_pandas(frame, preserve_index=False),
        PrepareParams(multi_value_columns=(("tags", "|"),), allow_empty_columns=True),
    )


def _synthetic(sensitive: PreparedTable, extra: bool, n: int = 450) -> PreparedTable:
    """Random records over the sensitive domain, or (``extra``) over a domain with labels the
    sensitive table lacks (the never-filled column gets one) and one column left empty."""
    dom = sensitive.domain
    if extra:
        labels = tuple(
            tuple(sorted({*labs, "x-new"})) if i % 2 == 0 or not labs else labs
            for i, labs in enumerate(dom.labels)
        )
        dom = Domain(dom.columns, labels)
    rng = np.random.default_rng(5)
    codes = np.stack([rng.integers(-1, len(labs), n) for labs in dom.labels], axis=1)
    if extra:
        codes[:, -1] = -1  # a synthetic column with no value at all
    return PreparedTable(dom, codes.astype(np.int32), sensitive.multi_value_columns)


def _same(a: Cells, b: Cells) -> None:
    assert list(a) == list(b)
    for cols in a:
        for x, y in zip(a[cols], b[cols], strict=True):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), cols


@pytest.mark.parametrize("extra", [False, True], ids=["same-domain", "new-labels"])
@pytest.mark.parametrize("n_parts", [1, 4])
def test_whole_and_partitioned_fidelity_coding_are_identical(extra: bool, n_parts: int) -> None:
    """Cardinalities and 1..3-way cells of the whole-table coding == the partitions' (summed)."""
    sensitive = _sensitive()
    assert sensitive.multi_value_columns and () in sensitive.domain.labels
    synthetic = _synthetic(sensitive, extra)
    cards, codes = fidelity_coding(sensitive.domain, synthetic)
    whole = marginal_cells(codes, cards, 3)
    p_cards, mappings = fidelity_mappings(sensitive.domain, synthetic.domain)
    assert p_cards == cards
    bounds = np.linspace(0, synthetic.n_records, n_parts + 1).astype(int)
    cells = [
        partition_fidelity_cells(
            PreparedTable(synthetic.domain, synthetic.codes[lo:hi], synthetic.multi_value_columns),
            mappings,
            p_cards,
            3,
        )
        for lo, hi in itertools.pairwise(bounds)
    ]
    summed = cells[0]
    for more in cells[1:]:
        summed = add_cells(summed, more)
    _same(whole, summed)
