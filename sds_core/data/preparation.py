"""SDS data preparation: a sensitive table in, an integer-coded :class:`PreparedTable` out.

First stage of the pipeline (spec sds-method §3.3): column selection, trimming, escaping of
``;``/``:``, empty and zero cells, declared binning, multi-value expansion, subject-id joining
and the record limit, then one deterministic encoding per column (sorted labels, codes 0..k-1,
-1 empty). Every rule runs once per distinct cell text; rows are handled with numpy.
:func:`subject_values` is the subject join's check alone, run before anything is charged.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
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
from sds_core.errors import SdsInputError, SdsInternalError, invariant, require

__all__ = [
    "Binning",
    "PrepareParams",
    "SubjectValues",
    "fingerprint",
    "label_counts",
    "match_key",
    "normalize_text",
    "prepare",
    "source_layout",
    "subject_values",
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


def _subject_groups(raw: RawColumn, id_name: str) -> tuple[NDArray[np.int64], list[str]]:
    """Group index of each row and the subjects' keys: subjects sorted by trimmed, lower-cased
    id (plain str order)."""
    keys = [match_key(t) for t in raw.texts]
    if (raw.codes < 0).any() or any(k == "" for k in keys):
        raise SdsInputError(
            f"{MISSING_ID_MESSAGE} (subject_id column {id_name!r}); fill in or drop those rows"
        )
    key_code, distinct = pd.factorize(np.asarray(keys, dtype=object))
    ids = distinct.tolist()
    order = sorted(range(len(ids)), key=ids.__getitem__)
    rank = np.empty(len(ids), dtype=np.int64)
    rank[order] = np.arange(len(ids))
    return rank[key_code][raw.codes], [str(ids[i]) for i in order]


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
    source, columns, id_column = _source_columns(data, params)
    n_records = source.n_rows
    if id_column is not None:
        groups, ids = _subject_groups(*id_column)
        n_records = len(ids)
        conflicts = [c.name for c in columns if _join_subjects(c, groups, n_records)]
        if conflicts:
            raise SdsInputError(
                CONFLICT_MESSAGE + ", ".join(conflicts) + " (PrepareParams.multi_value_columns)"
            )
    return _encode(columns, n_records, params.allow_empty_columns)


def _source_columns(
    data: TableLike, params: PrepareParams, only: Sequence[str] | None = None
) -> tuple[TableSource, list[_Column], tuple[RawColumn, str] | None]:
    """The source, its selected columns processed (or only those named in ``only``) and the
    subject id column (raw, and its name) of :func:`prepare`."""
    source = TableSource(data, params.record_limit or None)
    headers = source.headers
    names = [normalize_text(h) for h in headers]
    dup = sorted(n for n, k in Counter(names).items() if k > 1)
    if dup:
        raise SdsInputError(f"duplicate column names (after trimming/escaping): {dup}; rename them")
    selected = sorted(set(_resolve(headers, "use_columns", params.use_columns))) or list(
        range(len(headers))
    )
    if only is not None:
        wanted = set(_resolve(headers, "columns", tuple(only)))
        selected = [i for i in selected if i in wanted]
    zeros = set(_resolve(headers, "sensitive_zeros", params.sensitive_zeros))
    delimiters = {
        i: d
        for c, d in params.multi_value_columns
        for i in _resolve(headers, "multi_value_columns", (c,))
    }
    binnings = {i: b for b in params.binning for i in _resolve(headers, "binning", (b.column,))}
    columns = []
    for i in selected:
        raw = source.column(i)
        if i in delimiters:
            columns.append(_multi_value_column(names[i], raw, delimiters[i], i in zeros))
        else:
            columns.append(_single_column(names[i], raw, i in zeros, binnings.get(i)))
    id_column = None
    if params.subject_id is not None:
        id_index = _resolve(headers, "subject_id", (params.subject_id,))[0]
        id_column = (source.column(id_index), names[id_index])
    return source, columns, id_column


def label_counts(data: TableLike, params: PrepareParams) -> tuple[tuple[str, int], ...]:
    """The columns :func:`prepare` would encode and how many labels (values) each would hold,
    without encoding: (normalized name, count) in prepare's order; a multi-value column gives
    one column of one label per value. The subject join keeps every label, so these are the
    prepared domain's sizes (columns binned later, such as DP bins, are counted unbinned).

    >>> label_counts([["a", "b"], ["x", "1"], ["y", "1"], [" x", "0"]], PrepareParams())
    (('a', 2), ('b', 1))

    Raises:
        SdsInputError: what :func:`prepare` raises about the columns and their names.
    """
    _, columns, _ = _source_columns(data, params)
    out: list[tuple[str, int]] = []
    for col in columns:
        if col.codes is not None:
            out.append((col.name, len(col.labels)))
        else:
            out.extend((f"{col.name}_{v}", 1) for v in col.labels)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class SubjectValues:
    """Each subject's smallest and largest value key in some single-value columns: what the
    subject join (:func:`prepare`) compares, in a form partitions can merge
    (:meth:`merge`). A value key is a 64-bit hash of the cell's text as the join reads it
    (trimmed, ``"0"`` empty unless a sensitive zero, declared bins applied); an empty cell has
    none. A subject whose smallest and largest keys differ holds two values: a conflict.

    Attributes:
        subjects: the subjects' keys (trimmed, lower-cased ids), sorted.
        columns: the columns compared, normalized names.
        low, high: per subject (row) and column, the smallest and largest key
            (:data:`_NO_VALUE` pair when the subject has no value in the column).
    """

    subjects: tuple[str, ...]
    columns: tuple[str, ...]
    low: NDArray[np.int64]
    high: NDArray[np.int64]

    def conflicts(self) -> list[str]:
        """The columns in which some subject holds two different values."""
        holds = self.low != _NO_VALUE[0]
        return [
            c
            for j, c in enumerate(self.columns)
            if (self.low[holds[:, j], j] != self.high[holds[:, j], j]).any()
        ]

    @staticmethod
    def merge(parts: Sequence[SubjectValues]) -> SubjectValues:
        """One :class:`SubjectValues` of the partitions' (subjects may span partitions)."""
        require(len(parts) > 0, "merge needs at least one part")
        columns = parts[0].columns
        require(all(p.columns == columns for p in parts), "parts compare different columns")
        keys = [k for p in parts for k in p.subjects]
        codes, distinct = pd.factorize(np.asarray(keys, dtype=object))
        ids = [str(k) for k in distinct.tolist()]
        rank = np.empty(len(ids), dtype=np.int64)
        rank[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
        group = rank[codes]
        low = np.full((len(ids), len(columns)), _NO_VALUE[0], dtype=np.int64)
        high = np.full((len(ids), len(columns)), _NO_VALUE[1], dtype=np.int64)
        np.minimum.at(low, group, np.concatenate([p.low for p in parts]))
        np.maximum.at(high, group, np.concatenate([p.high for p in parts]))
        return SubjectValues(tuple(sorted(ids)), columns, low, high)


_NO_VALUE = (np.iinfo(np.int64).max, np.iinfo(np.int64).min)
"""The (low, high) of a subject without a value in a column."""


def _label_keys(labels: list[str]) -> NDArray[np.int64]:
    """A 64-bit hash of each label (equal texts, equal keys)."""
    digests = (hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest() for t in labels)
    return np.fromiter((int.from_bytes(d, "little", signed=True) for d in digests), np.int64)


def subject_values(
    data: TableLike, params: PrepareParams, columns: Sequence[str] | None = None
) -> SubjectValues:
    """What the subject join of :func:`prepare` would compare, without preparing: each
    subject's smallest and largest value key in every single-value column (or in ``columns``).

    Checked before the bins that need a budget exist: pass ``params`` without the DP-binned
    columns' binning, and their rows are compared by their text, so a subject whose rows hold
    different numbers in such a column is a conflict whatever the bins turn out to be.

    Raises:
        SdsInputError: no ``subject_id`` in ``params``, a row without a subject id, or what
            :func:`prepare` raises about the columns and their names.
    """
    if params.subject_id is None:
        raise SdsInputError("subject_values needs PrepareParams.subject_id (the join's column)")
    _, processed, id_column = _source_columns(data, params, columns)
    invariant(id_column is not None, "a subject id column")
    assert id_column is not None
    groups, ids = _subject_groups(*id_column)
    single = [c for c in processed if c.codes is not None]
    low = np.full((len(ids), len(single)), _NO_VALUE[0], dtype=np.int64)
    high = np.full((len(ids), len(single)), _NO_VALUE[1], dtype=np.int64)
    for j, col in enumerate(single):
        assert col.codes is not None
        present = col.codes >= 0
        keys = _label_keys(col.labels)[col.codes[present]]
        np.minimum.at(low[:, j], groups[present], keys)
        np.maximum.at(high[:, j], groups[present], keys)
    return SubjectValues(tuple(ids), tuple(c.name for c in single), low, high)


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
