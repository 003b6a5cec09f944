"""Encoding the tabular artifacts of a release to bytes: Parquet, SDS TSV and CSV.

Used by :mod:`sds_release.store.publish.artifacts` (the publish stage). Every encoder is linear in
the size of its output: Arrow kernels and numpy gathers over one text table per domain, no Python
loop per row or per combination. The bytes are identical to what the earlier pandas writers
produced (``tests/store/workspace/test_encoding.py`` holds them to that).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from sds_core.dp.intervals import Z_95

if TYPE_CHECKING:
    from sds_core.data.table import PreparedTable

__all__ = [
    "aggregates_parquet",
    "aggregates_tsv",
    "arrow_csv_bytes",
    "chunk_bounds",
    "csv_bytes",
    "half_width_95",
    "neutralize_formulas",
    "no_records",
    "parquet_bytes",
    "part_rows",
    "synthetic_csv",
    "synthetic_part_name",
    "write_aggregates_parquet",
    "write_aggregates_tsv",
]

SYNTHETIC_PARQUET = "synthetic.parquet"
"""The synthetic records' Parquet artifact: one file, or a directory of part files."""

_CSV_SPECIAL = re.compile(r'[,"\r\n]')

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a CSV cell as a formula (CSV injection)."""
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    """The frame as Parquet (index dropped, pandas metadata kept), as the release has it."""
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buf)
    return buf.getvalue()


HALF_WIDTH_COLUMN = "noise_half_width_95"
"""``aggregates.parquet``'s error bar: half the width of each count's 95% noise interval,
``round(Z_95 × noise_sd, 6)`` with its length's ``noise_sd`` (``manifest.json``
``privacy.noise.by_length``; :data:`sds_core.dp.intervals.Z_95`); null where the release
describes no per-length noise (registry synthesizers' measured marginals)."""


def half_width_95(sd: Any) -> Any:
    """The published half-width of the 95% noise interval of counts whose noise has standard
    deviation ``sd`` (a number or an array): ``Z_95 · sd`` to 6 decimals, as
    :data:`HALF_WIDTH_COLUMN` holds it. The explorer's and the series' error bars call it too,
    so every page shows the value the Parquet file publishes.

    >>> float(half_width_95(10.0)), half_width_95(np.array([1.0, 2.0])).tolist()
    (19.59964, [1.959964, 3.919928])
    """
    return np.round(Z_95 * np.asarray(sd, dtype=np.float64), 6)


def aggregates_parquet(
    table: pa.Table, noise_sd_by_len: Mapping[int, float] | None = None
) -> bytes:
    """``aggregates.parquet`` from ``AggregateSet.to_arrow()`` (as its ``to_frame`` writes),
    plus :data:`HALF_WIDTH_COLUMN` from the noise standard deviation of each length."""
    return parquet_bytes(_aggregates_frame(table, noise_sd_by_len))


def _aggregates_frame(table: pa.Table, noise_sd_by_len: Mapping[int, float] | None) -> pd.DataFrame:
    from sds_core.marginals.aggregates import combination_frame

    frame = combination_frame(table)
    lengths = frame["length"].to_numpy()
    sd = np.full(len(frame), np.nan)
    for k, value in (noise_sd_by_len or {}).items():
        sd[lengths == k] = value
    half = pd.Series(half_width_95(sd), index=frame.index, dtype="Float64")  # NaN: null
    frame.insert(3, HALF_WIDTH_COLUMN, half)  # after length, combination, count
    return frame


AGGREGATE_ROWS = 1 << 20
"""Rows of the aggregate table encoded at a time by the streaming writers: Parquet's default
row group (``write_table``'s), so that a row group is one batch."""

TSV_ROWS = 1 << 18
"""Lines of ``aggregates.tsv`` built at a time: their combinations' texts, the joined lines and
their bytes take ~350 bytes a line at the peak (length 3), so 2^20 lines held ~355 MB at a
high-cardinality release and 2^18 hold ~90 (the same bytes in any number of pieces)."""

AGGREGATE_PIECE_ROWS = 1 << 16
"""Rows of the aggregate table built at a time inside one Parquet row group: the row group is
written from these pieces (a chunked table), so that building the texts never holds more than
a piece's temporaries next to the row group's columns."""


def write_aggregates_parquet(
    file: Any,
    aggregates: Any,
    noise_sd_by_len: Mapping[int, float] | None = None,
    rows: int = AGGREGATE_ROWS,
) -> None:
    """:func:`aggregates_parquet`'s bytes written to ``file`` one row group at a time: the
    table is never held whole, whatever the number of combinations. ``rows`` must be the row
    group size ``write_table`` uses (the default).

    A row group is built in pieces of :data:`AGGREGATE_PIECE_ROWS` rows
    (``AggregateSet.to_arrow_batches``) and written as one chunked table: ``write_table``
    encodes a column's chunks one after the other into the same row group, which gives the
    bytes of the contiguous table (tests/store/workspace/test_aggregate_streams.py). Each
    written row group is released before the next is built."""
    import pyarrow.parquet as pq

    piece_rows = AGGREGATE_PIECE_ROWS if rows % AGGREGATE_PIECE_ROWS == 0 else rows
    writer: Any = None
    pieces: list[pa.Table] = []
    held = 0

    def flush() -> None:
        nonlocal writer, pieces, held
        table = pa.concat_tables(pieces)
        pieces, held = [], 0
        if writer is None:
            writer = pq.ParquetWriter(file, table.schema)
        writer.write_table(table, row_group_size=rows)

    for piece in aggregates.to_arrow_batches(piece_rows):
        pieces.append(
            pa.Table.from_pandas(_aggregates_frame(piece, noise_sd_by_len), preserve_index=False)
        )
        held += piece.num_rows
        del piece
        if held == rows:
            flush()
    if pieces:
        flush()
    writer.close()


def _lines(*columns: pa.Array | pa.ChunkedArray, separator: str) -> bytes:
    """``c1<separator>c2...<separator>cN\\n`` for every row, concatenated (strings, no nulls)."""
    if not columns or len(columns[0]) == 0:
        return b""
    parts = [pc.cast(c, pa.large_string()) for c in columns]
    sep = pa.scalar(separator, pa.large_string())
    rows = pc.binary_join_element_wise(*parts, sep) if len(parts) > 1 else parts[0]
    empty, newline = pa.scalar("", pa.large_string()), pa.scalar("\n", pa.large_string())
    lines = pc.binary_join_element_wise(rows, empty, newline)  # "<row>\n"
    arr = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    _, offsets_buf, data = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    first, last = int(offsets[0]), int(offsets[-1])
    return bytes(data.slice(first, last - first).to_pybytes())


def _tsv_order(aggregates: Any, table: pa.Table | None = None) -> Iterator[NDArray[np.int64]]:
    """Row order of the TSV within each length (lengths ascending): count descending, then the
    text byte-wise; row positions in the length's block. One length at a time (a caller that
    writes each length before asking for the next holds one length's order).

    The order comes from integer keys per length (``count_text_order``), or from ranking the
    strings when a text holds ``;``; both give the order of comparing the texts themselves.
    """
    from sds_core.marginals.aggregates import combination_texts, count_text_order

    start = 0
    for k in sorted(aggregates.by_len):
        block = aggregates.counts_of(k)
        m = len(block)
        order = count_text_order(aggregates.domain, block)
        if order is None:
            texts = (
                combination_texts(aggregates.domain, block)
                if table is None
                else table["combination"].slice(start, m)
            )
            keys = pc.rank(texts, sort_keys="ascending", tiebreaker="first").to_numpy()
            order = np.lexsort((keys, -block.counts))
        yield order
        start += m


def _tsv_head(aggregates: Any) -> bytes:
    return (
        "selections\tprotected_count\n"
        f"record_count\t{int(aggregates.protected_number_of_records)}\n"
    ).encode()


def aggregates_tsv(aggregates: Any, table: pa.Table | None = None) -> bytes:
    """SDS text form: header, ``record_count`` line, then combinations by length, count desc.

    Ties in the count are ordered by the combination text (byte-wise). ``table`` is
    ``aggregates.to_arrow()`` when the caller already has it.
    """
    table = aggregates.to_arrow() if table is None else table
    order = np.concatenate(
        [
            start + o
            for start, o in zip(
                _block_starts(aggregates), _tsv_order(aggregates, table), strict=True
            )
        ]
        or [np.zeros(0, dtype=np.int64)]
    )
    rows = table.select(["combination", "count"]).take(pa.array(order))
    return _tsv_head(aggregates) + _lines(rows["combination"], rows["count"], separator="\t")


def _block_starts(aggregates: Any) -> list[int]:
    lengths = [len(aggregates.counts_of(k)) for k in sorted(aggregates.by_len)]
    return [int(s) for s in np.cumsum([0, *lengths[:-1]])] if lengths else []


def write_aggregates_tsv(file: Any, aggregates: Any, rows: int = TSV_ROWS) -> None:
    """:func:`aggregates_tsv`'s bytes written to ``file`` ``rows`` lines at a time (the texts of
    those combinations only): the whole text is never held, whatever the number of
    combinations."""
    from sds_core.marginals.aggregates import CombinationCounts, combination_texts

    file.write(_tsv_head(aggregates))
    for k, order in zip(sorted(aggregates.by_len), _tsv_order(aggregates), strict=True):
        block = aggregates.counts_of(k)
        for lo in range(0, len(order), rows):
            pick = order[lo : lo + rows]
            part = CombinationCounts(block.attrs[pick], block.counts[pick])
            texts = combination_texts(aggregates.domain, part)
            file.write(_lines(texts, pa.array(part.counts, pa.int64()), separator="\t"))


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """The frame as CSV, byte-identical to ``frame.to_csv(index=False)`` (minimal quoting).

    Arrow writes it ~20x faster than pandas when no header or cell needs quoting (no delimiter,
    quote or line break in any label, and no empty cell in a one-column table, which the csv
    module writes as ``""`` so that the row is not a blank line); otherwise pandas writes it.
    """
    import pyarrow.csv as pacsv

    texts = [str(c) for c in frame.columns]
    for col in frame.columns:
        texts.extend(str(v) for v in pd.unique(frame[col].astype(str)))
    lone_empty = frame.shape[1] == 1 and "" in texts[1:]  # csv writes that row as ""
    if (
        frame.shape[1] == 0
        or lone_empty
        or bool(frame.isna().any().any())
        or any(map(_CSV_SPECIAL.search, texts))
    ):
        return str(frame.to_csv(index=False)).encode()
    buf = io.BytesIO()
    buf.write((",".join(str(c) for c in frame.columns) + "\n").encode())
    table = pa.Table.from_pandas(frame.astype(str), preserve_index=False)
    pacsv.write_csv(table, buf, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    return buf.getvalue()


def arrow_csv_bytes(table: pa.Table) -> bytes | None:
    """A table of strings as ``to_csv(index=False)`` of its frame writes it, or None.

    None when pandas would quote something (a header or cell holding ``,``, ``"`` or a line
    break, a single column with an empty cell) or a cell is null: the caller then uses
    :func:`csv_bytes`. The check looks at each column's distinct texts only.
    """
    if table.num_columns == 0:
        return None
    for column in table.columns:
        if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
            return None
        if column.null_count:
            return None
        distinct = pc.unique(column)
        if pc.any(pc.match_substring_regex(distinct, _CSV_SPECIAL.pattern)).as_py():
            return None
        if table.num_columns == 1 and pc.any(pc.equal(distinct, "")).as_py():
            return None  # csv writes a lone empty field as ""
    if any(_CSV_SPECIAL.search(str(name)) for name in table.column_names):
        return None
    header = (",".join(str(c) for c in table.column_names) + "\n").encode()
    return header + _lines(*table.columns, separator=",")


def _risky(value: object) -> bool:
    """A text a spreadsheet would run as a formula (a plain number such as ``-5`` is not)."""
    return (
        isinstance(value, str) and value.startswith(FORMULA_START) and not _NUMBER.fullmatch(value)
    )


def neutralize_formulas(frame: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """A copy of ``frame`` whose text cells (and headers) that a spreadsheet would run as a
    formula are prefixed with an apostrophe; plain numbers (``-5``, ``+1.5e3``) are kept.

    Returns the frame and how many cells were changed (0: the frame itself, unchanged). Only
    each column's distinct values are tested, so a frame without such cells costs one hash
    pass per column.

    >>> out, n = neutralize_formulas(pd.DataFrame({"a": ["=1+1", "-5", "@x", "ok"]}))
    >>> list(out["a"]), n
    (["'=1+1", '-5', "'@x", 'ok'], 2)
    """
    risky_values: dict[int, tuple[set[str], NDArray[np.bool_]]] = {}
    for i in range(frame.shape[1]):
        column = frame.iloc[:, i]
        bad = {str(v) for v in pd.unique(column) if _risky(v)}
        if bad:
            risky_values[i] = (bad, column.isin(bad).to_numpy(dtype=bool))
    renamed = {c: f"'{c}" for c in frame.columns if _risky(str(c))}
    if not risky_values and not renamed:
        return frame, 0
    out = frame.rename(columns=renamed)
    for i, (bad, _) in risky_values.items():
        cells = out.iloc[:, i].map(lambda v, bad=bad: f"'{v}" if v in bad else v)
        out.isetitem(i, cells.to_numpy(dtype=object))
    changed = sum(int(mask.sum()) for _, mask in risky_values.values())
    return out, changed + len(renamed)


def part_rows(n_records: int, part_records: int | None) -> list[int]:
    """The records of each ``synthetic.parquet`` part: one file (``[n]``) up to ``part_records``,
    else consecutive parts of ``part_records`` each, the last one shorter.

    >>> part_rows(10, None), part_rows(10, 10), part_rows(10, 4)
    ([10], [10], [4, 4, 2])
    """
    if part_records is None or n_records <= part_records:
        return [n_records]
    full, rest = divmod(n_records, part_records)
    return [part_records] * full + ([rest] if rest else [])


def synthetic_part_name(index: int) -> str:
    """The release-relative name of part ``index`` of a split ``synthetic.parquet``.

    >>> synthetic_part_name(3)
    'synthetic.parquet/part-00003.parquet'
    """
    return f"{SYNTHETIC_PARQUET}/part-{index:05d}.parquet"


CHUNK_ROWS = 1 << 20
"""Records per chunk of the synthetic records as the published files are written from them
(and as the Dask executor holds them): pyarrow's default Parquet row group, so that each part
file is written row group by row group with the bytes of one ``write_table`` of the whole part."""


def chunk_bounds(n_records: int, part_records: int | None) -> list[tuple[int, int]]:
    """The chunks' row ranges: every ``synthetic.parquet`` part cut into CHUNK_ROWS runs.

    >>> chunk_bounds(10, 4)
    [(0, 4), (4, 8), (8, 10)]
    """
    bounds, start = [], 0
    for rows in part_rows(n_records, part_records):
        for lo in range(start, start + rows, CHUNK_ROWS):
            bounds.append((lo, min(lo + CHUNK_ROWS, start + rows)))
        start += rows
    return bounds or [(0, 0)]


def no_records(records: Any) -> PreparedTable:
    """A table of no records in the domain of ``records`` (a table, or records anywhere with a
    domain and multi-value columns): their column names and the files' header."""
    from sds_core.data.table import PreparedTable

    domain = records.domain
    empty = np.zeros((0, domain.n_columns), dtype=np.int32)
    return PreparedTable(domain, empty, records.multi_value_columns)


def synthetic_csv(synthetic: Any, frame: pd.DataFrame) -> bytes:
    """``synthetic.csv`` of the records (``frame``: their ``to_frame`` with empty cells ``""``):
    formula cells neutralized; Arrow writes it when nothing needs quoting, else pandas. Every
    row's bytes depend on that row alone, so the file of a table is its header and the rows of
    its consecutive slices (how the Dask executor streams it)."""
    from sds_core.data.decoding import to_arrow

    safe, changed = neutralize_formulas(frame)
    fast = None
    if not changed:
        fast = arrow_csv_bytes(to_arrow(synthetic, empty_value="", join_multi_value_columns=True))
    return fast if fast is not None else csv_bytes(safe)
