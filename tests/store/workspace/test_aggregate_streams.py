"""The streaming aggregate writers (publish: a row group / a slice of lines at a time) give the
bytes of the whole-table encoders, across lengths and batch boundaries."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sds_core.data.domain import Domain
from sds_core.errors import SdsInputError
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts, row_range
from sds_release.store.workspace.encoding import (
    _aggregates_frame,
    aggregates_parquet,
    aggregates_tsv,
    write_aggregates_parquet,
    write_aggregates_tsv,
)
from tests.store.workspace.test_encoding import large_case

NOISE = {1: 2.5, 2: 3.0, 3: 4.25}


@pytest.fixture(scope="module")
def case() -> AggregateSet:
    """The raw-domain aggregate set of test_encoding (627 1-way, 4,000 2-way, 6,000 3-way)."""
    return large_case()


def streamed(write: object, *args: object, **kwargs: object) -> bytes:
    buf = io.BytesIO()
    write(buf, *args, **kwargs)  # type: ignore[operator]
    return buf.getvalue()


@pytest.mark.parametrize("rows", [1 << 20, 4627, 1000, 7])
def test_streamed_tsv_is_the_whole_tsv(case: AggregateSet, rows: int) -> None:
    """write_aggregates_tsv in slices of any size gives aggregates_tsv's bytes."""
    assert streamed(write_aggregates_tsv, case, rows=rows) == aggregates_tsv(case)


def test_streamed_parquet_is_the_whole_parquet(case: AggregateSet) -> None:
    """At the default batch (write_table's row group) the bytes are aggregates_parquet's."""
    whole = aggregates_parquet(case.to_arrow(), NOISE)
    assert streamed(write_aggregates_parquet, case, NOISE) == whole


@pytest.mark.parametrize("rows", [4627, 999])
def test_streamed_parquet_row_groups_are_write_table_row_groups(
    case: AggregateSet, rows: int
) -> None:
    """Batches of ``rows`` rows (crossing length boundaries) give write_table's bytes with that
    row group size: the same file, one row group per batch."""
    table = pa.Table.from_pandas(_aggregates_frame(case.to_arrow(), NOISE), preserve_index=False)
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=rows)
    out = streamed(write_aggregates_parquet, case, NOISE, rows=rows)
    assert out == buf.getvalue()
    assert pq.ParquetFile(io.BytesIO(out)).num_row_groups == -(-len(table) // rows)


@pytest.mark.parametrize(("rows", "piece"), [(4000, 1000), (2100, 7), (9000, 3000)])
def test_row_groups_built_in_pieces_are_write_table_row_groups(
    case: AggregateSet, monkeypatch: pytest.MonkeyPatch, rows: int, piece: int
) -> None:
    """A row group built from pieces (a chunked table, pieces crossing length boundaries) has
    the bytes of write_table's row group of the contiguous table."""
    import sds_release.store.workspace.encoding as encoding

    monkeypatch.setattr(encoding, "AGGREGATE_PIECE_ROWS", piece)
    table = pa.Table.from_pandas(_aggregates_frame(case.to_arrow(), NOISE), preserve_index=False)
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=rows)
    assert rows % piece == 0 and len(table) > rows
    assert streamed(write_aggregates_parquet, case, NOISE, rows=rows) == buf.getvalue()


def test_streamed_writers_of_no_combination() -> None:
    """No combination: the header lines, and a Parquet file of the empty table."""
    empty = AggregateSet(Domain(("a",), (("x",),)), 2, {}, protected_number_of_records=5)
    assert streamed(write_aggregates_tsv, empty) == aggregates_tsv(empty)
    assert streamed(write_aggregates_parquet, empty) == aggregates_parquet(empty.to_arrow())


def test_row_range_spans_blocks_and_rejects_bad_batches() -> None:
    """row_range takes the rows across blocks; to_arrow_batches needs a positive size."""
    blocks = [
        CombinationCounts(np.zeros((2, 1), np.int32), np.array([5, 6])),
        CombinationCounts(np.zeros((3, 2), np.int32), np.array([1, 2, 3])),
    ]
    assert [b.counts.tolist() for b in row_range(blocks, 0, 5)] == [[5, 6], [1, 2, 3]]
    assert [b.counts.tolist() for b in row_range(blocks, 2, 3)] == [[1]]
    assert row_range(blocks, 5, 9) == []
    empty = AggregateSet(Domain(("a",), (("x",),)), 2, {}, protected_number_of_records=5)
    with pytest.raises(SdsInputError, match="rows must be positive, got 0"):
        next(empty.to_arrow_batches(0))
