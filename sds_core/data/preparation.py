"""SDS data preparation: a sensitive table in, an integer-coded :class:`PreparedTable` out.

First stage of the pipeline (spec sds-method §3.3): column selection, trimming, escaping of
``;``/``:``, empty and zero cells, declared binning, multi-value expansion, subject-id joining
and the record limit, then one deterministic encoding per column (sorted labels, codes 0..k-1,
-1 empty). Every rule runs once per distinct cell text; rows are handled with numpy.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sds_core.data.binning import Binning, bin_strings
from sds_core.data.decoding import fingerprint, to_frame, to_sorted_rows
from sds_core.data.domain import Domain
from sds_core.data.params import PrepareParams
from sds_core.data.readers import RawColumn, TableLike, TableSource
from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.data.text import match_key, normalize_text
from sds_core.errors import SdsInputError, SdsInternalError, invariant

__all__ = [
    "Binning",
    "PrepareParams",
    "fingerprint",
    "match_key",
    "normalize_text",
    "prepare",
    "source_layout",
    "to_frame",
    "to_sorted_rows",
]

MISSING_ID_MESSAGE = "records with missing/empty Subject ID"
CONFLICT_MESSAGE = (
    "records with duplicated IDs, please set the following columns as multi value if you "
    "want to join records with duplicated IDs: "
)


@dataclass(slots=True)
class _Column:
    """A processed source column: single-value codes, or multi-value (row, value) pairs."""

    name: str
    labels: list[str]
    codes: NDArray[np.int64] | None = None  # single-value: per row, -1 empty
    rows: NDArray[np.int64] | None = None  # multi-value: one (row, value id) pair per attribute
    values: NDArray[np.int64] | None = None
    delimiter: str = ""


def _resolve(headers: list[str], field: str, names: tuple[str, ...]) -> list[int]:
    """Input column indices matching ``names`` (case-insensitive); unknown names raise."""
    keys = [match_key(h) for h in headers]
    out: list[int] = []
    for name in names:
        hits = [i for i, k in enumerate(keys) if k == match_key(name)]
        if not hits:
            raise SdsInputError(
                f"PrepareParams.{field}: unknown column {name!r}; available columns: {headers}"
            )
        out.extend(hits)
    return out


def _single_column(name: str, raw: RawColumn, zero_ok: bool, binning: Binning | None) -> _Column:
    """Normalize each distinct text, apply the empty/zero rule and binning, code the rows."""
    texts = [normalize_text(t) for t in raw.texts]
    keep = [i for i, t in enumerate(texts) if t and (zero_ok or t != "0")]
    if binning is not None and keep:
        labels, bad = bin_strings(binning, [texts[i] for i in keep])
        if bad.any():
            bad_text = np.zeros(len(texts) + 1, dtype=bool)
            bad_text[np.asarray(keep)[bad]] = True
            row = int(np.flatnonzero(bad_text[raw.codes])[0])
            raise SdsInputError(
                f"binning of column {name!r}: data row {row} (0-based, header excluded) is not a "
                "finite number; clean the column or remove it from PrepareParams.binning"
            )
        for i, label in zip(keep, labels, strict=True):
            texts[i] = label
    index: dict[str, int] = {}
    text_code = np.full(len(texts) + 1, -1, dtype=np.int64)  # last slot: missing cell
    for i in keep:
        text_code[i] = index.setdefault(texts[i], len(index))
    return _Column(name, list(index), codes=text_code[raw.codes])


def _multi_value_column(name: str, raw: RawColumn, delimiter: str, zero_ok: bool) -> _Column:
    """Split each distinct text on ``delimiter`` into value ids; expand to (row, value) pairs."""
    index: dict[str, int] = {}
    lengths, flat = [], []
    for text in raw.texts:
        ids = set()
        for part in text.split(delimiter):
            value = normalize_text(part)
            if value and (zero_ok or value != "0"):
                ids.add(index.setdefault(value, len(index)))
        lengths.append(len(ids))
        flat.extend(sorted(ids))
    lens = np.asarray([*lengths, 0], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    row_lens = lens[raw.codes]
    total = int(row_lens.sum())
    rows = np.repeat(np.arange(raw.codes.size, dtype=np.int64), row_lens)
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(row_lens) - row_lens, row_lens)
    pos = np.repeat(starts[raw.codes], row_lens) + within
    values = np.asarray(flat, dtype=np.int64)[pos] if total else np.zeros(0, dtype=np.int64)
    return _Column(name, list(index), rows=rows, values=values, delimiter=delimiter)


def _subject_groups(raw: RawColumn, id_name: str) -> tuple[NDArray[np.int64], int]:
    """Group index of each row: subjects sorted by trimmed, lower-cased id (plain str order)."""
    keys = [match_key(t) for t in raw.texts]
    if (raw.codes < 0).any() or any(k == "" for k in keys):
        raise SdsInputError(
            f"{MISSING_ID_MESSAGE} (subject_id column {id_name!r}); fill in or drop those rows"
        )
    key_code, distinct = pd.factorize(np.asarray(keys, dtype=object))
    ids = distinct.tolist()
    rank = np.empty(len(ids), dtype=np.int64)
    rank[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    return rank[key_code][raw.codes], len(ids)


def _unique(keys: NDArray[np.int64]) -> NDArray[np.int64]:
    """Sorted distinct keys (sort-based: faster than numpy's hash unique on large int arrays)."""
    keys = np.sort(keys)
    keep = np.ones(keys.size, dtype=bool)
    keep[1:] = keys[1:] != keys[:-1]
    return keys[keep]


def _join_subjects(col: _Column, groups: NDArray[np.int64], n_groups: int) -> bool:
    """Merge ``col`` per subject in place; True when a single-value column conflicts."""
    base = max(len(col.labels), 1)
    if col.codes is not None:
        present = col.codes >= 0
        pairs = _unique(groups[present] * base + col.codes[present])
        group = pairs // base
        merged = np.full(n_groups, -1, dtype=np.int64)
        merged[group] = pairs % base
        col.codes = merged
        return bool((np.diff(group) == 0).any())
    if col.values is None:
        raise SdsInternalError("a multi-value column without values")
    pairs = _unique(groups[col.rows] * base + col.values)
    col.rows, col.values = pairs // base, pairs % base
    return False


def _sorted_codes(
    labels: list[str], codes: NDArray[np.int64]
) -> tuple[tuple[str, ...], NDArray[np.integer[Any]]]:
    """Sort ``labels`` (plain str order) and remap ``codes`` to the sorted positions."""
    order = sorted(range(len(labels)), key=labels.__getitem__)
    rank = np.full(len(labels) + 1, -1, dtype=np.int32)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(labels))
    return tuple(labels[i] for i in order), rank[codes]


def prepare(data: TableLike, params: PrepareParams = PrepareParams()) -> PreparedTable:
    """Apply the SDS preprocessing to ``data`` and encode it (spec sds-method §3.3).

    Args:
        data: a pandas DataFrame, a pyarrow Table, or raw rows (row 0 = headers, as
            pac-synth's ``Dataset``). Typed cells become text by
            :func:`sds_core.data.readers.cell_text` (NaN/None -> empty,
            ``60100.0`` -> ``"60100"``).
        params: the preprocessing parameters.

    Returns:
        The encoded records, one per input row (or per subject with ``subject_id``).

    Raises:
        SdsInputError: empty table, no columns, duplicate or unknown column names, ragged raw
            rows, a non-numeric cell in a binned column, missing subject ids, subject rows that
            conflict in a single-value column, or a column without values (see
            ``allow_empty_columns``).
    """
    source = TableSource(data, params.record_limit or None)
    headers = source.headers
    names = [normalize_text(h) for h in headers]
    dup = sorted(n for n, k in Counter(names).items() if k > 1)
    if dup:
        raise SdsInputError(f"duplicate column names (after trimming/escaping): {dup}; rename them")
    selected = sorted(set(_resolve(headers, "use_columns", params.use_columns))) or list(
        range(len(headers))
    )
    zeros = set(_resolve(headers, "sensitive_zeros", params.sensitive_zeros))
    delimiters = {
        i: d
        for c, d in params.multi_value_columns
        for i in _resolve(headers, "multi_value_columns", (c,))
    }
    binnings = {i: b for b in params.binning for i in _resolve(headers, "binning", (b.column,))}
    id_index = None
    if params.subject_id is not None:
        id_index = _resolve(headers, "subject_id", (params.subject_id,))[0]

    columns = []
    for i in selected:
        raw = source.column(i)
        if i in delimiters:
            columns.append(_multi_value_column(names[i], raw, delimiters[i], i in zeros))
        else:
            columns.append(_single_column(names[i], raw, i in zeros, binnings.get(i)))
    n_records = source.n_rows
    if id_index is not None:
        groups, n_records = _subject_groups(source.column(id_index), names[id_index])
        conflicts = [c.name for c in columns if _join_subjects(c, groups, n_records)]
        if conflicts:
            raise SdsInputError(
                CONFLICT_MESSAGE + ", ".join(conflicts) + " (PrepareParams.multi_value_columns)"
            )
    return _encode(columns, n_records, params.allow_empty_columns)


def source_layout(headers: list[str], params: PrepareParams) -> tuple[tuple[str, str | None], ...]:
    """(normalized name, multi-value delimiter or None) of each column :func:`prepare` encodes,
    in its order: what partitions prepared one by one must be merged into
    (:mod:`sds_core.data.partitions`).

    >>> source_layout(["b", "a", "id"], PrepareParams(use_columns=("a", "b")))
    (('b', None), ('a', None))
    """
    selected = sorted(set(_resolve(headers, "use_columns", params.use_columns))) or list(
        range(len(headers))
    )
    delimiters = {
        i: d
        for c, d in params.multi_value_columns
        for i in _resolve(headers, "multi_value_columns", (c,))
    }
    return tuple((normalize_text(headers[i]), delimiters.get(i)) for i in selected)


def _encode(columns: list[_Column], n_records: int, allow_empty: bool) -> PreparedTable:
    """Expand multi-value columns, sort labels and build the PreparedTable."""
    empty = [c.name for c in columns if not c.labels]
    if empty and not allow_empty:
        raise SdsInputError(
            f"columns without any non-empty value: {empty}; drop them with use_columns or set "
            "PrepareParams.allow_empty_columns=True"
        )
    width = sum(1 if c.codes is not None else len(c.labels) for c in columns)
    codes = np.full((n_records, width), -1, dtype=np.int32)
    out_names: list[str] = []
    out_labels: list[tuple[str, ...]] = []
    metadata: list[MultiValueColumn] = []
    for col in columns:
        j = len(out_names)
        if col.codes is not None:
            labels, codes[:, j] = _sorted_codes(col.labels, col.codes)
            out_names.append(col.name)
            out_labels.append(labels)
            continue
        if not col.labels:
            continue  # an empty multi-value column vanishes, as in the reference
        binary = [f"{col.name}_{v}" for v in col.labels]
        order = sorted(range(len(binary)), key=binary.__getitem__)
        position = np.empty(len(order), dtype=np.int64)
        position[np.asarray(order)] = np.arange(j, j + len(order))
        codes[col.rows, position[col.values]] = 0
        out_names.extend(binary[i] for i in order)
        out_labels.extend(("1",) for _ in order)
        metadata.append(
            MultiValueColumn(
                col.name,
                col.delimiter,
                tuple(binary[i] for i in order),
                tuple(col.labels[i] for i in order),
            )
        )
    dup = sorted(n for n, k in Counter(out_names).items() if k > 1)
    if dup:
        raise SdsInputError(
            f"multi-value expansion produced column names that already exist: {dup}; rename the "
            "clashing input columns"
        )
    invariant(len(out_names) == width, "encoded column count differs from the planned width")
    return PreparedTable(Domain(tuple(out_names), tuple(out_labels)), codes, tuple(metadata))
