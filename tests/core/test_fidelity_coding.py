"""The marginal-fidelity coding of synthetic records (sds_core/evaluation/cells.py), one
path for a local table and for partitions: the table as one partition and in 4 give the same
cardinalities and cell counts, and the same evaluation, byte for byte, on tables with
multi-value columns, a column with no values at all, empty cells and synthetic labels the
sensitive table never had. (Before the whole-table coding ``fidelity_coding`` was removed, this
file proved it gave these same bytes, commit f810f08.)"""

from __future__ import annotations

import functools
import itertools
import json
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from sds_core.data.domain import Domain
from sds_core.data.params import PrepareParams
from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.evaluation.cells import (
    Cells,
    add_cells,
    fidelity_mappings,
    partition_fidelity_cells,
    partition_marginals,
)
from sds_core.evaluation.params import EvaluationParams
from sds_core.evaluation.release import evaluate_release
from sds_core.marginals.backend import add_aggregates
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.marginals.params import DpParams
from tests.core.evaluation_oracle import whole_table_evaluation


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


def _parts(table: PreparedTable, n_parts: int) -> list[PreparedTable]:
    bounds = np.linspace(0, table.n_records, n_parts + 1).astype(int)
    return [
        PreparedTable(table.domain, table.codes[lo:hi], table.multi_value_columns)
        for lo, hi in itertools.pairwise(bounds)
    ]


class _Partitioned:
    """Records in partitions, summed in this process (a cluster backend's interface)."""

    def __init__(self, table: PreparedTable, n_parts: int) -> None:
        self.parts = _parts(table, n_parts)
        self.domain, self.n_records = table.domain, table.n_records

    def map_reduce(self, fn: Any, combine: Any, /, **kwargs: Any) -> Any:
        return functools.reduce(combine, [fn(p, **kwargs) for p in self.parts])

    def exact_aggregates(self, reporting_length: int) -> Any:
        each = [exact_aggregates(p, reporting_length) for p in self.parts]
        return functools.reduce(add_aggregates, each)


@pytest.mark.parametrize("extra", [False, True], ids=["same-domain", "new-labels"])
def test_one_partition_and_four_code_the_same_cells(extra: bool) -> None:
    """Cardinalities and 1..3-way cells of the table as one partition == its 4 partitions'."""
    sensitive = _sensitive()
    assert sensitive.multi_value_columns and () in sensitive.domain.labels
    synthetic = _synthetic(sensitive, extra)
    cards, mappings = fidelity_mappings(sensitive.domain, synthetic.domain)
    whole = partition_fidelity_cells(synthetic, mappings, cards, 3)
    cells = [partition_fidelity_cells(p, mappings, cards, 3) for p in _parts(synthetic, 4)]
    _same(whole, functools.reduce(add_cells, cells))


@pytest.mark.parametrize("extra", [False, True], ids=["same-domain", "new-labels"])
@pytest.mark.parametrize("n_parts", [1, 3])
def test_local_synthetic_records_evaluate_as_their_partitions(extra: bool, n_parts: int) -> None:
    """evaluate_release with the synthetic records here (one partition) == with them in
    partitions == evaluate_release of both tables: the same dict, serialized byte for byte."""
    sensitive = _sensitive()
    synthetic = _synthetic(sensitive, extra)
    dp = dp_aggregate(sensitive, DpParams(reporting_length=3), ReleaseRandomness.from_seed(4))
    params = EvaluationParams(reporting_length=3, resolution=10)

    def evaluate(synth: Any) -> str:
        out = evaluate_release(_Partitioned(sensitive, 2), synth, dp.aggregates, params)
        return json.dumps(out, sort_keys=True, default=str)

    local = evaluate(synthetic)
    assert local == evaluate(_Partitioned(synthetic, n_parts))
    whole = whole_table_evaluation(sensitive, synthetic, dp.aggregates, params)  # the oracle
    assert local == json.dumps(whole, sort_keys=True, default=str)
    assert '"n_marginals_by_order"' in local
    # the cells of the never-filled column count every record as empty on both sides
    cards, _ = fidelity_mappings(sensitive.domain, synthetic.domain)
    empty = partition_marginals(sensitive, cards, 1)[(1,)]
    assert empty[0].tolist() == [0] and empty[1].tolist() == [sensitive.n_records]
