"""The prepare stage on the Dask executor: the input's Arrow parts prepared on the workers into a
:class:`~sds_release.store.cluster.table.ClusterTable`, the driver merging labels only.

The result equals :func:`sds_core.data.preparation.prepare` of the whole input, byte for byte:
partitions are prepared alone, their labels merged (:mod:`sds_core.data.partitions`) and
re-coded. With ``subject_id`` the rows are first shuffled by the subject key (sorted, so every
subject meets in one partition and the subjects keep the order a local run gives them).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pyarrow as pa

from sds_core.data.params import PrepareParams
from sds_core.data.partitions import (
    PartDomain,
    align,
    merged_domain,
    partition_layout,
    prepare_partition,
)
from sds_core.data.preparation import match_key
from sds_core.data.readers import cell_text
from sds_core.data.table import PreparedTable
from sds_core.data.text import matching_column
from sds_core.errors import SdsInputError
from sds_release.store.cluster.inputs import DaskInput
from sds_release.store.cluster.table import ClusterTable


def prepare_parts(data: DaskInput, params: PrepareParams) -> ClusterTable:
    """:func:`~sds_core.data.preparation.prepare` of the input's first ``record_limit`` rows
    (:meth:`DaskInput.first_rows`), on the workers; the domain merge, labels only, here."""
    data = data.first_rows(params.record_limit)
    client, what = data.client, f"input {data.source!r}"
    if params.subject_id is None:
        layout = client.submit(partition_layout, data.parts[0], params)
        prepared = client.map(prepare_partition, data.parts, params=params)
        return _merged(client, prepared, layout, params, what)
    from dask.delayed import delayed

    ddf = _by_subject(data, params.subject_id)
    delayed_parts = ddf.to_delayed()
    layout = client.compute(delayed(partition_layout)(delayed_parts[0], params))
    prepared = client.compute([delayed(prepare_partition)(d, params) for d in delayed_parts])
    return _merged(client, prepared, layout, params, what)


def _by_subject(data: DaskInput, subject_id: str) -> Any:
    """The input as a Dask frame whose rows are sorted by the subject key (every subject's
    rows in one partition, the subjects in key order, as a local run joins them)."""
    import dask.dataframe as dd

    frames = data.client.map(_pandas, data.parts)
    meta = data.client.submit(_pandas, data.parts[0]).result().iloc[:0]
    ddf = dd.from_delayed(frames, meta=meta, verify_meta=False)
    name = matching_column(list(ddf.columns), subject_id)
    ddf = ddf.assign(_sds_subject_key=ddf[name].map(_subject_key, meta=(name, "str")))
    return ddf.set_index("_sds_subject_key", drop=True, sort=True)


def _pandas(table: pa.Table) -> Any:
    return table.to_pandas()


def _subject_key(value: Any) -> str:
    """The subject id as :func:`prepare` compares it (missing: empty, refused by prepare)."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return match_key(cell_text(value))


def _merged(
    client: Any, prepared: list[Any], layout: Any, params: PrepareParams, what: str
) -> ClusterTable:
    """Partitions prepared alone -> the global domain (labels only, here) -> re-coded.

    One round trip: the layout (a future) and every partition's labels and size are
    gathered together; a partition already in the merged domain is kept as it is."""
    layout, summaries = client.gather([layout, client.map(_part_summary, prepared)])
    kept = [i for i, (d, _) in enumerate(summaries) if d is not None]
    if not kept:
        raise SdsInputError(f"{what} has no rows")
    merged = merged_domain(
        layout,
        [summaries[i][0] for i in kept],
        allow_empty_columns=params.allow_empty_columns,
    )
    parts = [
        prepared[i] if summaries[i][0] == merged else client.submit(align, prepared[i], merged)
        for i in kept
    ]
    sizes = [summaries[i][1] for i in kept]
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist()
    return ClusterTable(client, tuple(parts), tuple(first), merged[0], int(sum(sizes)), merged[1])


def _part_summary(table: PreparedTable | None) -> tuple[PartDomain | None, int]:
    """A prepared partition's labels and record count (what the driver needs to merge the
    domain and number the rows)."""
    if table is None:
        return None, 0
    return (table.domain, table.multi_value_columns), table.n_records


def _code_bytes(part: Any) -> bytes:
    return np.ascontiguousarray(part.codes, dtype="<i4").tobytes()


def fingerprint_parts(table: ClusterTable) -> str:
    """:func:`sds_core.data.decoding.fingerprint` of the prepared partitions, hashed one
    partition at a time in order (the same hex as the local table's)."""
    meta = [
        [m.source, m.delimiter, list(m.binary_columns), list(m.values)]
        for m in table.multi_value_columns
    ]
    h = hashlib.sha256()
    h.update(table.domain.to_json().encode())
    shape = [table.n_records, table.domain.n_columns]
    h.update(json.dumps({"multi_value_columns": meta, "shape": shape}).encode())
    for part in table.parts:
        h.update(table.client.submit(_code_bytes, part).result())
    return h.hexdigest()
