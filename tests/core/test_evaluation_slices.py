"""Synthetic records held in this process are evaluated slice by slice (``RowSlices``): the
same integers, so the same evaluation byte for byte, whatever the slice size."""

from __future__ import annotations

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
from sds_core.errors import SdsInputError
from sds_core.evaluation.params import EvaluationParams
from sds_core.evaluation.records import SLICE_ROWS, RowSlices
from sds_core.evaluation.release import evaluate_release
from sds_core.marginals import exact_counts
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.marginals.params import DpParams
from tests.core.evaluation_oracle import whole_table_evaluation


def _tables() -> tuple[PreparedTable, PreparedTable]:
    """500 sensitive records (a multi-value column, empty cells, a 40-value column) and 333
    synthetic ones over a domain with a label the sensitive table lacks."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(
        {
            "sex": rng.choice(["1", "2", ""], 500),
            "tags": rng.choice(["a|b", "c", "", "b|c", "a"], 500),
            "city": rng.choice([f"c{i}" for i in range(40)] + [""], 500),
        }
    )
    sensitive = prepare(
        pa.Table.from_pandas(frame, preserve_index=False),
        PrepareParams(multi_value_columns=(("tags", "|"),)),
    )
    dom = sensitive.domain
    labels = tuple(tuple(sorted({*labs, "x-new"})) for labs in dom.labels)
    codes = np.stack([rng.integers(-1, len(labs), 333) for labs in labels], axis=1)
    synthetic = PreparedTable(
        Domain(dom.columns, labels), codes.astype(np.int32), sensitive.multi_value_columns
    )
    return sensitive, synthetic


@pytest.mark.parametrize("rows", [1, 7, 64])
def test_slice_sizes_give_the_same_evaluation(rows: int) -> None:
    """evaluate_release of the local records in slices of ``rows`` == in one slice of
    SLICE_ROWS == the whole-table oracle of the whole tables, serialized byte for byte."""
    sensitive, synthetic = _tables()
    dp = dp_aggregate(sensitive, DpParams(reporting_length=3), ReleaseRandomness.from_seed(8))
    params = EvaluationParams(reporting_length=3, resolution=10)
    sliced = RowSlices(sensitive, 100)  # the sensitive side in partitions of 100 records

    def evaluate(synth: Any) -> str:
        out = evaluate_release(sliced, synth, dp.aggregates, params)
        return json.dumps(out, sort_keys=True, default=str)

    small = RowSlices(synthetic, rows)
    parts = list(small.slices())
    assert len(parts) == -(-synthetic.n_records // rows)
    assert sum(p.n_records for p in parts) == synthetic.n_records
    assert np.array_equal(np.concatenate([p.codes for p in parts]), synthetic.codes)
    got = evaluate(small)
    assert got == evaluate(RowSlices(synthetic, SLICE_ROWS))  # one slice
    assert got == evaluate(synthetic)  # the default path: RowSlices(synthetic)
    whole = whole_table_evaluation(sensitive, synthetic, dp.aggregates, params)
    assert got == json.dumps(whole, sort_keys=True, default=str)
    assert json.loads(got)["synthetic_risk"]["records_with_rare_pct"] > 0


def test_a_slice_needs_a_record() -> None:
    """rows < 1 is a caller's mistake."""
    _, synthetic = _tables()
    with pytest.raises(SdsInputError, match="at least one record"):
        RowSlices(synthetic, 0)


def test_sums_of_slices_reduce_in_order() -> None:
    """map_reduce hands every slice to ``fn`` once, in row order."""
    _, synthetic = _tables()
    firsts = RowSlices(synthetic, 100).map_reduce(
        lambda t: [int(t.codes[0, 0])], lambda a, b: [*a, *b]
    )
    assert firsts == [int(synthetic.codes[i, 0]) for i in range(0, 333, 100)]
    total = RowSlices(synthetic, 100).map_reduce(lambda t: t.n_records, int.__add__)
    assert total == synthetic.n_records == 333


@pytest.mark.parametrize("block", [1, 5, 97])
def test_key_blocks_give_the_same_aggregate_metrics(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aggregate_metrics matched BLOCK_KEYS combinations at a time == in one block, byte for
    byte, against DP aggregates (one domain, noisy counts) and synthetic aggregates (another
    domain); its per-length errors equal a brute-force match of the combinations."""
    from sds_core.evaluation import metrics

    sensitive, synthetic = _tables()
    dp = dp_aggregate(sensitive, DpParams(reporting_length=3), ReleaseRandomness.from_seed(8))
    exact = exact_aggregates(sensitive, 3)
    targets = (dp.aggregates, exact_aggregates(synthetic, 3))

    def metrics_of() -> str:
        out = [
            metrics.aggregate_metrics(exact, t, resolution=10, n_sensitive=500, n_target=333)
            for t in targets
        ]
        return json.dumps(out, sort_keys=True)

    whole = metrics_of()
    monkeypatch.setattr(metrics, "BLOCK_KEYS", block)
    assert metrics_of() == whole
    got = json.loads(whole)[0]["by_length"]
    for k in (1, 2, 3):
        s_cc, t_cc = exact.counts_of(k), dp.aggregates.counts_of(k)
        s = dict(zip(map(tuple, s_cc.attrs.tolist()), s_cc.counts.tolist(), strict=True))
        t = dict(zip(map(tuple, t_cc.attrs.tolist()), t_cc.counts.tolist(), strict=True))
        errors = [abs(s[c] - t[c]) for c in s if c in t]
        assert got[str(k)]["mean_error"] == float(np.mean(errors))
        assert got[str(k)]["suppressed_pct"] == 100.0 * (len(s) - len(errors)) / len(s)
        assert got[str(k)]["fabricated_pct"] == 100.0 * (len(t) - len(errors)) / len(s)


@pytest.mark.parametrize(
    ("rows", "block", "dense"), [(1, 1, 0), (7, 5, 50), (SLICE_ROWS, 97, 1 << 16)]
)
@pytest.mark.parametrize("same_domain", [True, False])
def test_length_by_length_equals_the_whole_aggregates(
    rows: int, block: int, dense: int, same_domain: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local records counted one length at a time (synthetic keys, per-length risk lookups,
    marginal cells one marginal at a time) give the evaluation of their whole exact aggregates
    byte for byte, whatever the slice, key block and dense-marginal sizes, over the sensitive
    domain or another one; and they never count the whole aggregates."""
    from sds_core.evaluation import cells, metrics, release

    sensitive, synthetic = _tables()
    if same_domain:
        rng = np.random.default_rng(5)
        cards = sensitive.domain.cardinalities
        codes = np.stack([rng.integers(-1, c, 400) for c in cards], axis=1).astype(np.int32)
        synthetic = PreparedTable(sensitive.domain, codes, sensitive.multi_value_columns)
    dp = dp_aggregate(sensitive, DpParams(reporting_length=3), ReleaseRandomness.from_seed(8))
    params = EvaluationParams(reporting_length=3, resolution=10)
    sliced = RowSlices(sensitive, 100)

    def evaluate(synth: Any) -> str:
        out = evaluate_release(sliced, synth, dp.aggregates, params)
        return json.dumps(out, sort_keys=True)

    # the whole exact aggregates of both tables (the oracle), before any monkeypatch
    whole = json.dumps(
        whole_table_evaluation(sensitive, synthetic, dp.aggregates, params), sort_keys=True
    )
    monkeypatch.setattr(metrics, "BLOCK_KEYS", block)
    monkeypatch.setattr(release, "KEY_BLOCK", block)
    monkeypatch.setattr(cells, "DENSE_CELLS", dense)

    def refused(*_: Any) -> None:
        raise AssertionError("the whole exact aggregates were counted")

    monkeypatch.setattr(exact_counts, "exact_aggregates", refused)
    assert evaluate(RowSlices(synthetic, rows)) == whole
    got = json.loads(whole)
    assert got["synthetic_risk"]["records_with_unique_pct"] > 0
    assert got["sensitive_vs_synthetic"]["by_length"]["3"]["n_target"] > 0


def test_tables_here_evaluate_through_the_partitions_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both tables in this process (a local release): evaluate_release counts them one length
    at a time, never their whole exact aggregates, and gives the whole-table oracle's dict
    value for value and type for type (their reprs are equal)."""
    sensitive, synthetic = _tables()
    dp = dp_aggregate(sensitive, DpParams(reporting_length=3), ReleaseRandomness.from_seed(8))
    params = EvaluationParams(reporting_length=3, resolution=10)
    whole = whole_table_evaluation(sensitive, synthetic, dp.aggregates, params)

    def refused(*_: Any) -> None:
        raise AssertionError("the whole exact aggregates were counted")

    from sds_core.evaluation import metrics

    monkeypatch.setattr(exact_counts, "exact_aggregates", refused)
    monkeypatch.setattr(metrics, "exact_aggregates", refused, raising=False)
    got = evaluate_release(sensitive, synthetic, dp.aggregates, params)
    assert repr(got) == repr(whole)
    assert got["sensitive_risk"]["records_with_rare_pct"] > 0
