"""The evaluation of a table held in partitions (sums only) equals the evaluation of the whole
table, number for number, at any partitioning."""

from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from sds_core.data.params import PrepareParams
from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.evaluation.params import EvaluationParams
from sds_core.evaluation.release import evaluate_release
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.params import DpParams
from sds_core.synthesis.generator import synthesize
from sds_core.synthesis.params import SynthesisParams
from tests.core.evaluation_oracle import whole_table_evaluation

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pums_ca_10k.csv"


@pytest.mark.parametrize("n_parts", [1, 3, 7])
def test_partitioned_evaluation_equals_whole_table(n_parts: int) -> None:
    """Raw columns with empty cells and a multi-value column; 2,000 synthetic records."""
    frame = pd.read_csv(EXAMPLE, dtype=str, keep_default_na=False).iloc[:2500]
    frame = frame[["sex", "age", "educ", "married", "inc_cat"]].copy()
    frame["tags"] = np.where(
        np.arange(2500) % 3 == 0, "a|b", np.where(np.arange(2500) % 5, "c", "")
    )
    table = prepare(
        pa.Table.from_pandas(frame, preserve_index=False),
        PrepareParams(multi_value_columns=(("tags", "|"),)),
    )
    dp = dp_aggregate(table, DpParams(reporting_length=3), ReleaseRandomness.from_seed(5))
    synthetic = synthesize(
        dp.aggregates,
        SynthesisParams(target_number_of_records=2000),
        rng=np.random.default_rng(2),
        multi_value_columns=table.multi_value_columns,
    )
    params = EvaluationParams(reporting_length=3, resolution=10)
    whole = whole_table_evaluation(table, synthetic, dp.aggregates, params)
    bounds = np.linspace(0, table.n_records, n_parts + 1).astype(int)
    parts = [
        PreparedTable(table.domain, table.codes[lo:hi], table.multi_value_columns)
        for lo, hi in itertools.pairwise(bounds)
    ]
    got = evaluate_release(_Partitioned(parts), synthetic, dp.aggregates, params)
    assert whole["sensitive_risk"]["records_with_rare_pct"] > 0  # the record pass is exercised
    assert json.dumps(got, sort_keys=True, default=str) == json.dumps(
        whole, sort_keys=True, default=str
    )


class _Partitioned:
    """Records held in partitions (a cluster backend's interface: domain, count, map_reduce,
    exact_aggregates), summed here in order."""

    def __init__(self, parts: list[PreparedTable]) -> None:
        self.parts = parts
        self.domain = parts[0].domain
        self.n_records = sum(p.n_records for p in parts)
        self.multi_value_columns = parts[0].multi_value_columns

    def map_reduce(self, fn: Any, combine: Any, /, **kwargs: Any) -> Any:
        return functools.reduce(combine, [fn(p, **kwargs) for p in self.parts])

    def exact_aggregates(self, reporting_length: int) -> Any:
        raise AssertionError("the records' whole exact aggregates were asked for")


def _split(table: PreparedTable, n_parts: int) -> list[PreparedTable]:
    bounds = np.linspace(0, table.n_records, n_parts + 1).astype(int)
    return [
        PreparedTable(table.domain, table.codes[lo:hi], table.multi_value_columns)
        for lo, hi in itertools.pairwise(bounds)
    ]


@pytest.mark.parametrize("n_parts", [1, 4, 9])
def test_synthetic_records_in_partitions_compared_length_by_length(n_parts: int) -> None:
    """Synthetic records in partitions: the evaluation and the report's agreement sum one
    length's keys over the partitions (never their whole exact aggregates) and give the
    numbers of the records held here."""
    from sds_core.evaluation.agreement import add_keyed_counts, agreement, synthetic_keys

    frame = pd.read_csv(EXAMPLE, dtype=str, keep_default_na=False).iloc[:2000]
    table = prepare(
        pa.Table.from_pandas(frame[["sex", "age", "educ", "married", "inc_cat", "puma"]]),
        PrepareParams(),
    )
    dp = dp_aggregate(table, DpParams(reporting_length=3), ReleaseRandomness.from_seed(3))
    synthetic = synthesize(
        dp.aggregates, SynthesisParams(target_number_of_records=1500), rng=np.random.default_rng(4)
    )
    params = EvaluationParams(reporting_length=3, resolution=10)
    parts = _Partitioned(_split(synthetic, n_parts))
    here, there = (
        evaluate_release(_Partitioned([table]), s, dp.aggregates, params)
        for s in (synthetic, parts)
    )
    assert json.dumps(there, sort_keys=True, default=str) == json.dumps(
        here, sort_keys=True, default=str
    )
    whole, split = agreement(dp.aggregates, synthetic), agreement(dp.aggregates, parts)
    for k in (1, 2, 3):
        a, b = whole.by_len[k], split.by_len[k]
        assert a.syn_keys.tolist() == b.syn_keys.tolist()
        assert a.syn_counts.tolist() == b.syn_counts.tolist()
        assert a.source.tolist() == b.source.tolist()
    base = synthetic.domain.n_attributes
    keys, counts = add_keyed_counts(*(synthetic_keys(p, 2, base) for p in _split(synthetic, 2)))
    want_keys, want_counts = synthetic_keys(synthetic, 2, base)
    assert keys.tolist() == want_keys.tolist() and counts.tolist() == want_counts.tolist()
