"""Preparation of a table that arrives in partitions (out-of-core input), with the same result
as :func:`sds_core.data.preparation.prepare` of the whole table.

Each partition is prepared on its own (:func:`prepare_partition`); the partitions' label sets
are merged into the global domain (:func:`merged_domain`, small: labels only); each partition is
then re-coded into it (:func:`align`). Concatenated in order, the aligned partitions are the
whole table's :class:`PreparedTable`, byte for byte. Used by cluster counting backends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from sds_core.data.domain import EMPTY_CODE, Domain
from sds_core.data.params import PrepareParams
from sds_core.data.preparation import prepare, source_layout
from sds_core.data.readers import TableLike, TableSource
from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.errors import SdsInputError

Layout = tuple[tuple[str, str | None], ...]
"""(normalized source name, multi-value delimiter or None) per encoded source column."""
PartDomain = tuple[Domain, tuple[MultiValueColumn, ...]]


def partition_layout(data: TableLike, params: PrepareParams) -> Layout:
    """:func:`source_layout` of a partition's headers (every partition has the same)."""
    return source_layout(TableSource(data, None).headers, params)


def prepare_partition(data: TableLike, params: PrepareParams) -> PreparedTable | None:
    """:func:`prepare` of one partition (None when it has no rows).

    A column may be empty in one partition and not in another, so empty columns are kept here
    and checked once on the merged domain; ``record_limit`` is the caller's (global row order).
    With ``subject_id``, all rows of a subject must be in this partition and the partitions must
    be in subject order (the cluster backend shuffles by the subject key first).
    """
    if len(data) == 0:
        return None
    return prepare(data, dataclasses.replace(params, allow_empty_columns=True, record_limit=None))


def merged_domain(
    layout: Layout, parts: Sequence[PartDomain], *, allow_empty_columns: bool
) -> PartDomain:
    """The whole table's domain from the partitions' (domain, multi-value columns).

    Raises:
        SdsInputError: a column without values in every partition (as :func:`prepare`).
    """
    names: list[str] = []
    labels: list[tuple[str, ...]] = []
    metadata: list[MultiValueColumn] = []
    empty: list[str] = []
    for source, delimiter in layout:
        if delimiter is None:
            seen = {
                v for d, _ in parts if source in d.columns for v in d.labels[d.column_index(source)]
            }
            if not seen:
                empty.append(source)
            names.append(source)
            labels.append(tuple(sorted(seen)))
            continue
        binary: dict[str, str] = {}
        for _, multi in parts:
            for m in multi:
                if m.source == source:
                    binary.update(zip(m.binary_columns, m.values, strict=True))
        if not binary:
            empty.append(source)
            continue
        order = sorted(binary)
        names.extend(order)
        labels.extend(("1",) for _ in order)
        metadata.append(
            MultiValueColumn(source, delimiter, tuple(order), tuple(binary[b] for b in order))
        )
    if empty and not allow_empty_columns:
        raise SdsInputError(
            f"columns without any non-empty value: {empty}; drop them with use_columns or set "
            "PrepareParams.allow_empty_columns=True"
        )
    return Domain(tuple(names), tuple(labels)), tuple(metadata)


def align(table: PreparedTable, merged: PartDomain) -> PreparedTable:
    """The partition re-coded into the merged domain (columns by name, values by label).

    >>> a = PreparedTable(Domain(("A",), (("y",),)), np.array([[0], [-1]], dtype=np.int32))
    >>> align(a, (Domain(("A",), (("x", "y"),)), ())).codes.ravel().tolist()
    [1, -1]
    """
    domain, metadata = merged
    codes = np.full((table.n_records, domain.n_columns), EMPTY_CODE, dtype=np.int32)
    own = {c: j for j, c in enumerate(table.domain.columns)}
    for g, column in enumerate(domain.columns):
        j = own.get(column)
        if j is None:
            continue
        index = {label: i for i, label in enumerate(domain.labels[g])}
        lookup = np.array(
            [index[label] for label in table.domain.labels[j]] + [EMPTY_CODE],
            dtype=np.int32,
        )
        codes[:, g] = lookup[table.codes[:, j]]
    return PreparedTable(domain, codes, metadata)


def concatenate(parts: Sequence[PreparedTable]) -> PreparedTable:
    """Aligned partitions, in order, as one table (tests and small data only)."""
    if not parts:
        raise SdsInputError("concatenate needs at least one partition")
    return PreparedTable(
        parts[0].domain,
        np.concatenate([p.codes for p in parts]),
        parts[0].multi_value_columns,
    )
