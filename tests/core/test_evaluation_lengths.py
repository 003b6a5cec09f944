"""The evaluation of a sensitive table in partitions counts it one combination length at a time
(its whole exact aggregates never exist): the same evaluation as from the whole aggregates,
byte for byte, at any reporting length, partition size, key block and resolution."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from sds_core.data.params import PrepareParams
from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.evaluation import cells, metrics, release
from sds_core.evaluation.agreement import length_keys, synthetic_keys
from sds_core.evaluation.params import EvaluationParams
from sds_core.evaluation.records import RowSlices
from sds_core.evaluation.release import evaluate_release
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.params import DpParams
from tests.core.evaluation_oracle import whole_table_evaluation


def _tables() -> tuple[PreparedTable, PreparedTable]:
    """400 sensitive records (a multi-value column, empty cells, a 30-value column) and 300
    synthetic ones over the same domain."""
    rng = np.random.default_rng(21)
    frame = pd.DataFrame(
        {
            "sex": rng.choice(["1", "2", ""], 400),
            "tags": rng.choice(["a|b", "c", "", "b|c", "a"], 400),
            "city": rng.choice([f"c{i}" for i in range(30)] + [""], 400),
            "age": rng.choice(["young", "old", "mid"], 400),
        }
    )
    sensitive = prepare(
        pa.Table.from_pandas(frame, preserve_index=False),
        PrepareParams(multi_value_columns=(("tags", "|"),)),
    )
    cards = sensitive.domain.cardinalities
    codes = np.stack([rng.integers(-1, c, 300) for c in cards], axis=1).astype(np.int32)
    return sensitive, PreparedTable(sensitive.domain, codes, sensitive.multi_value_columns)


class _Lengths:
    """The sensitive table in slices (:class:`RowSlices`) that refuse to give their whole
    exact aggregates and record which length each keyed count asked for."""

    def __init__(self, table: PreparedTable, rows: int) -> None:
        self.slices = RowSlices(table, rows)
        self.domain, self.n_records = table.domain, table.n_records
        self.asked: list[int] = []

    def exact_aggregates(self, reporting_length: int) -> Any:
        raise AssertionError("the sensitive side's whole exact aggregates were counted")

    def map_reduce(self, fn: Any, combine: Any, /, **kwargs: Any) -> Any:
        if "k" in kwargs:
            self.asked.append(kwargs["k"])
        return self.slices.map_reduce(fn, combine, **kwargs)


@pytest.mark.parametrize(("length", "resolution"), [(1, 10), (2, 3), (3, 1), (4, 10)])
@pytest.mark.parametrize(("rows", "block"), [(37, 3), (400, 1 << 20)])
@pytest.mark.parametrize("local_synthetic", [True, False])
def test_length_by_length_equals_the_whole_sensitive_aggregates(
    length: int,
    resolution: int,
    rows: int,
    block: int,
    local_synthetic: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """evaluate_release (sensitive keys one length at a time, summed over slices of
    ``rows`` records, matched ``block`` keys at a time) == the whole-table oracle of the whole
    tables, serialized byte for byte; every length is asked for on its own, in order."""
    sensitive, synthetic = _tables()
    dp = dp_aggregate(
        sensitive, DpParams(reporting_length=length), ReleaseRandomness.from_seed(length)
    )
    params = EvaluationParams(reporting_length=length, resolution=resolution)
    whole = json.dumps(
        whole_table_evaluation(sensitive, synthetic, dp.aggregates, params), sort_keys=True
    )
    monkeypatch.setattr(metrics, "BLOCK_KEYS", block)
    monkeypatch.setattr(release, "KEY_BLOCK", block)
    sliced = _Lengths(sensitive, rows)
    records: Any = synthetic if local_synthetic else RowSlices(synthetic, 53)
    got = evaluate_release(sliced, records, dp.aggregates, params)
    assert json.dumps(got, sort_keys=True) == whole
    lengths = list(range(1, length + 1))
    assert sliced.asked == lengths + lengths  # the DP comparison's pass, then the synthetic's
    risk = got["sensitive_risk"]  # the record pass looked records up
    assert risk["records_with_rare_pct"] > 0 or resolution == 1
    assert risk["records_with_unique_pct"] > 0 or length == 1
    assert got["sensitive_vs_synthetic"]["by_length"][length]["n_sensitive"] > 0


def test_keys_received_unaligned_come_back_aligned() -> None:
    """length_keys of partitions whose sum arrives unaligned (as Dask hands an int64 array
    back) gives the same keys and counts, aligned (numpy would copy them in every search)."""
    sensitive, _ = _tables()
    base = sensitive.domain.n_attributes
    keys, counts = synthetic_keys(sensitive, 2, base)
    raw = bytearray(4 + keys.nbytes)
    unaligned = np.frombuffer(raw, dtype=np.int64, offset=4, count=keys.size)
    unaligned[:] = keys
    assert not unaligned.flags.aligned

    class _Unaligned:
        domain, n_records = sensitive.domain, sensitive.n_records

        def map_reduce(self, fn: Any, combine: Any, /, **kwargs: Any) -> Any:
            return unaligned, counts

    got_keys, got_counts = length_keys(_Unaligned(), 2, base)
    assert got_keys.flags.aligned and got_counts.flags.aligned
    assert got_keys.tolist() == keys.tolist() and got_counts.tolist() == counts.tolist()


def test_abs_total_is_exact_for_narrow_cells() -> None:
    """|wa a - wb b| summed over the union of two sides' cells (int32 keys and counts, weights
    whose products overflow int32) == a brute-force sum over Python integers."""
    rng = np.random.default_rng(4)
    ka = np.unique(rng.integers(0, 5000, 800)).astype(np.int32)
    kb = np.unique(rng.integers(2000, 9000, 900)).astype(np.int32)
    ca = rng.integers(1, 1 << 20, ka.size).astype(np.int32)
    cb = rng.integers(1, 1 << 20, kb.size).astype(np.int32)
    wa, wb = 3_000_017, 2_999_999
    a = dict(zip(ka.tolist(), ca.tolist(), strict=True))
    b = dict(zip(kb.tolist(), cb.tolist(), strict=True))
    want = sum(abs(wa * a.get(key, 0) - wb * b.get(key, 0)) for key in a.keys() | b.keys())
    assert cells._abs_total((ka, ca), (kb, cb), wa, wb) == want
    assert cells._abs_total((kb, cb), (ka, ca), wb, wa) == want
    empty = (np.zeros(0, np.int32), np.zeros(0, np.int32))
    assert cells._abs_total((ka, ca), empty, wa, wb) == wa * int(ca.astype(np.int64).sum())
    assert cells._abs_total(empty, (kb, cb), wa, wb) == wb * int(cb.astype(np.int64).sum())
