"""From codes back to text: decoding a PreparedTable into frames and SDS-sorted rows.

Used at the end of the pipeline (synthetic records share the prepared domain) and in tests:
:func:`to_frame` decodes and optionally re-joins multi-value columns (SDS §3.3),
:func:`to_sorted_rows` gives the reference's sorted CSV form (§2.6), and :func:`fingerprint`
identifies a prepared table for resume checks.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pyarrow as pa
from numpy.typing import NDArray

from sds_core.data.table import MultiValueColumn, PreparedTable


def unescape_text(text: str) -> str:
    """Undo the ``<semicolon>``/``<colon>`` escaping (not exact if the input had those words).

    >>> unescape_text("d3<semicolon>D<colon>x")
    'd3;D:x'
    """
    return text.replace("<colon>", ":").replace("<semicolon>", ";")


def _take(texts: list[str], index: NDArray[np.integer]) -> pa.Array:
    """Arrow string array ``texts[index]`` (``index == -1`` picks the last text)."""
    index = np.where(index < 0, len(texts) - 1, index)
    return pa.array(texts, type=pa.large_string()).take(pa.array(index, type=pa.int64()))


def _joined(
    present: NDArray[np.bool_], mv: MultiValueColumn, empty_value: str, unescape: bool
) -> pa.Array:
    """Re-joined cells of one multi-value column: its present values, delimiter-separated."""
    values = [unescape_text(v) for v in mv.values] if unescape else list(mv.values)
    if present.shape[0] == 0:
        return pa.array([], type=pa.large_string())
    patterns, inverse = np.unique(present, axis=0, return_inverse=True)
    texts = [
        mv.delimiter.join(v for v, p in zip(values, row, strict=True) if p) or empty_value
        for row in patterns.tolist()
    ]
    return _take(texts, inverse.reshape(-1))


def _decoded_columns(
    table: PreparedTable, empty_value: str, join: bool, unescape: bool
) -> tuple[list[str], list[pa.Array]]:
    """Column names and decoded cells (Arrow strings), multi-value columns re-joined if ``join``."""
    domain, codes = table.domain, table.codes
    groups: dict[int, tuple[MultiValueColumn, list[int]]] = {}
    in_group: set[int] = set()
    if join:
        for mv in table.multi_value_columns:
            idx = [domain.column_index(c) for c in mv.binary_columns]
            groups[min(idx)] = (mv, idx)
            in_group.update(idx)
    names: list[str] = []
    cells: list[pa.Array] = []
    for c, (name, labels) in enumerate(zip(domain.columns, domain.labels, strict=True)):
        if c in groups:
            mv, idx = groups[c]
            names.append(mv.source)
            cells.append(_joined(codes[:, idx] >= 0, mv, empty_value, unescape))
        elif c not in in_group:
            texts = [unescape_text(t) for t in labels] if unescape else list(labels)
            names.append(name)
            cells.append(_take([*texts, empty_value], codes[:, c]))
    if unescape:
        names = [unescape_text(n) for n in names]
    return names, cells


def to_frame(
    table: PreparedTable,
    *,
    empty_value: str = "",
    join_multi_value_columns: bool = False,
    unescape: bool = False,
) -> pd.DataFrame:
    """Decode ``table`` into a DataFrame of strings (column names as prepared, i.e. escaped).

    Args:
        table: prepared (or synthetic) records.
        empty_value: text written for empty cells.
        join_multi_value_columns: replace each group of ``<col>_<value>`` binary columns by one
            column ``<col>`` holding its present values joined with the original delimiter in
            binary-column order, or ``empty_value`` when none is present (SDS §3.3).
        unescape: turn ``<semicolon>``/``<colon>`` back into ``;``/``:`` in names and values.
    """
    arrow = to_arrow(
        table,
        empty_value=empty_value,
        join_multi_value_columns=join_multi_value_columns,
        unescape=unescape,
    )
    frame = arrow.rename_columns([str(i) for i in range(arrow.num_columns)]).to_pandas()
    frame.index = pd.RangeIndex(table.n_records)
    frame.columns = pd.Index(arrow.column_names, dtype=object)
    out: pd.DataFrame = frame
    return out


def to_arrow(
    table: PreparedTable,
    *,
    empty_value: str = "",
    join_multi_value_columns: bool = False,
    unescape: bool = False,
) -> pa.Table:
    """Decode ``table`` into an Arrow table of strings; arguments as :func:`to_frame`.

    Column names are the prepared names (or the original ones with ``unescape`` / joined
    multi-value columns); repeated names stay repeated, as Arrow allows.
    """
    names, cells = _decoded_columns(table, empty_value, join_multi_value_columns, unescape)
    return pa.table(cells, names=names)


def to_sorted_rows(
    table: PreparedTable, *, empty_value: str = "", join_multi_value_columns: bool = False
) -> list[list[str]]:
    """The reference's output form (SDS §2.6): header row, then the records sorted.

    Records are sorted lexicographically by their (unjoined) cell texts, then stably by the
    number of non-empty cells, descending; a cell counts as empty only if its text is ``""``
    (so a non-empty ``empty_value`` counts as a value, as in the reference). Multi-value
    columns are re-joined after sorting when asked.
    """
    codes = table.codes
    keys: list[NDArray[np.int64]] = []
    non_empty = np.zeros(table.n_records, dtype=np.int64)
    for c, labels in enumerate(table.domain.labels):
        texts = [*labels, empty_value]
        rank = {t: i for i, t in enumerate(sorted(set(texts)))}
        keys.append(np.asarray([rank[t] for t in texts], dtype=np.int64)[codes[:, c]])
        non_empty += np.asarray([t != "" for t in texts], dtype=np.int64)[codes[:, c]]
    order = np.lexsort([*reversed(keys), -non_empty])
    names, cells = _decoded_columns(table, empty_value, join_multi_value_columns, False)
    take = pa.array(order, type=pa.int64())
    body = np.empty((table.n_records, len(cells)), dtype=object)
    for j, col in enumerate(cells):
        body[:, j] = col.take(take).to_numpy(zero_copy_only=False)
    return [list(names), *body.tolist()]


def fingerprint(table: PreparedTable) -> str:
    """SHA-256 hex of the domain JSON, the multi-value metadata, the shape and the codes.

    Equal tables (same domain, metadata and codes) have equal fingerprints on every platform
    (codes hashed as little-endian int32, row-major).
    """
    meta = [
        [m.source, m.delimiter, list(m.binary_columns), list(m.values)]
        for m in table.multi_value_columns
    ]
    h = hashlib.sha256()
    h.update(table.domain.to_json().encode())
    h.update(json.dumps({"multi_value_columns": meta, "shape": list(table.codes.shape)}).encode())
    h.update(np.ascontiguousarray(table.codes, dtype="<i4").tobytes())
    return h.hexdigest()
