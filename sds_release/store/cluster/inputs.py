"""The input on the Dask executor: read on the workers as Arrow parts, so the driver never
holds the table; what the stages before preparation read of it, as sums.

ingest (:func:`open_input`: Parquet part files, or a CSV read in blocks; the one reader of a
dataset onto the cluster) -> the gate (:func:`~sds_release.store.cluster.gate.validate_parts`) ->
the first ``record_limit`` rows (:meth:`DaskInput.first_rows`) -> [DP bins:
:func:`column_numbers`] -> the zero cells (:func:`zero_counts_shares`) -> prepare
(:func:`~sds_release.store.cluster.preparation.prepare_parts`). The driver holds part futures, row
counts, labels and sums. Worker functions here import Arrow and the project's own checks,
never Prefect. A reader of another kind of source (object storage: a URL) is one more branch of
:func:`open_input` giving the same :class:`DaskInput`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from sds_core.data.text import matching_column
from sds_core.data.zeros import zero_shares
from sds_core.errors import SdsInputError
from sds_release.store.inputs.ingest import (
    csv_digest,
    dataset_digest,
    parse_input,
    parse_part,
    read_csv_block,
    read_part_file,
)
from sds_release.store.inputs.objects import list_input, object_digest, write_listing
from sds_release.store.inputs.paths import PARQUET_SUFFIXES, dataset_files
from sds_release.store.storage.s3 import StoredObject, read_object
from sds_release.store.storage.urls import ObjectSource, is_object_url

CSV_BLOCKSIZE = 64 * 2**20
"""Bytes per block of a CSV read on the workers (``dask_partitions`` sets the block count)."""


@dataclass(frozen=True, eq=False)
class DaskInput:
    """The raw input as Arrow-table futures on the workers, in row order.

    Args:
        client: the ``distributed.Client``.
        parts: futures of ``pyarrow.Table`` parts (Parquet part files, or CSV blocks).
        rows: each part's row count.
        columns: the input's column names (the same in every part).
        source: the input path as given (messages only).
    """

    client: Any
    parts: tuple[Any, ...]
    rows: tuple[int, ...]
    columns: tuple[str, ...]
    source: str

    @property
    def num_rows(self) -> int:
        """The input's row count (sensitive)."""
        return int(sum(self.rows))

    @property
    def column_names(self) -> list[str]:
        """The input's column names."""
        return list(self.columns)

    def first_rows(self, limit: int | None) -> DaskInput:
        """The input's first ``limit`` rows (``record_limit``; None or 0: all): the parts before
        the limit whole, the one it falls in cut on its worker, the rest left out."""
        if not limit or limit >= self.num_rows:
            return self
        parts, rows, left = [], [], limit
        for part, n in zip(self.parts, self.rows, strict=True):
            if left <= 0:
                break
            keep = min(n, left)
            parts.append(part if keep == n else self.client.submit(_first_rows, part, keep))
            rows.append(keep)
            left -= keep
        return dataclasses.replace(self, parts=tuple(parts), rows=tuple(rows))


def open_input(
    client: Any,
    path: str,
    *,
    delimiter: str,
    gate_columns: Sequence[str] = (),
    partitions: int | None = None,
    listing: Path | None = None,
) -> tuple[DaskInput, str]:
    """Read the input on the workers; returns it and its ``input_sha256``.

    A Parquet dataset (directory or glob): one part per file, read and hashed on a worker; the
    digest is :func:`~sds_release.store.inputs.ingest.dataset_digest` (one file: the file's sha256,
    as locally). A CSV file: blocks of whole lines (``partitions`` blocks, else
    :data:`CSV_BLOCKSIZE` bytes each) parsed on the workers by the local reader's rules; its
    digest is the file's sha256, streamed here. ``gate_columns`` as
    :func:`~sds_release.store.inputs.ingest.read_release_input`. An ``s3://`` input: the driver
    lists its objects (nothing read), each worker reads its own (one part per object, checked
    against its listing); its digest is :func:`~sds_release.store.inputs.objects.object_digest`, and
    ``listing`` is where the object list goes (private).

    Raises:
        SdsInputError: as the local reader (file, part or block named), or the parts' columns
            differ, or a file changed while it was read (an object: since it was listed).
    """
    keep = list(gate_columns)
    dataset = None if is_object_url(path) else dataset_files(path)
    files: Sequence[Path | str] | None = dataset
    if files is None and Path(path).suffix.lower() in PARQUET_SUFFIXES:
        files = [Path(path)]
    if is_object_url(path):  # each worker reads its own objects; the driver lists them
        objects = list_input(path)
        one_file = ObjectSource.parse(path).kind == "object"
        parts = client.map(
            _read_object, objects, keep=keep, delimiter=delimiter, one_file=one_file, pure=False
        )
        files, digest = [str(o.url) for o in objects], object_digest(objects)
        if listing is not None:
            write_listing(listing, objects)
    elif files is not None:
        read = client.map(_read_part, [str(f) for f in files], keep=keep, pure=False)
        digests = client.gather(client.map(_second, read))
        parts = client.map(_first, read)
        digest = dataset_digest(dataset, digests) if dataset else digests[0]
    else:
        p = Path(path)
        before = os.stat(p)
        digest = csv_digest(p)
        parts = _csv_blocks(client, p, delimiter, keep, partitions)
        after = os.stat(p)
        if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
            raise SdsInputError(
                f"input file '{p}' changed while it was read: it is still being written; wait "
                "until it is complete, or copy it to a stable file, and run again"
            )
    shapes = client.gather(client.map(_shape, parts))
    columns = shapes[0][1]
    for (_, cols), name in zip(shapes, files or [Path(path)] * len(shapes), strict=True):
        if cols != columns:
            raise SdsInputError(
                f"input part '{name}' has columns {list(cols)} but the first part has "
                f"{list(columns)}; every part file of a dataset needs the same columns"
            )
    rows = tuple(int(n) for n, _ in shapes)
    if not sum(rows):
        raise SdsInputError(f"input '{path}' has columns but no rows; give a file with data")
    return DaskInput(client, tuple(parts), rows, tuple(columns), str(path)), digest


def _csv_blocks(
    client: Any, p: Path, delimiter: str, keep: list[str], partitions: int | None
) -> list[Any]:
    """Futures of a CSV file's blocks, each parsed on a worker (whole lines)."""
    from dask.bytes.core import read_bytes
    from dask.delayed import delayed

    with open(p, "rb") as f:
        header = f.readline()
    size = p.stat().st_size
    blocksize = (
        max(1, size // partitions) if partitions else CSV_BLOCKSIZE
    )  # dask: size // bs blocks
    _, [blocks] = read_bytes(  # type: ignore[no-untyped-call]
        str(p), delimiter=b"\n", blocksize=blocksize, sample=False
    )
    tasks = [
        delayed(_csv_block)(str(p), header, b, first=i == 0, delimiter=delimiter, keep=keep)
        for i, b in enumerate(blocks)
    ]
    futures: list[Any] = client.compute(tasks)
    return futures


def _read_object(obj: StoredObject, keep: list[str], delimiter: str, one_file: bool) -> pa.Table:
    """On a worker: one object of an ``s3://`` input, read checked against its listing (the
    worker's own credentials: none travels with the task), parsed as a local file of its name
    (``one_file``) or a dataset's part; gate columns kept."""
    data = read_object(obj)
    name = str(obj.url)
    table = parse_input(name, data, delimiter=delimiter) if one_file else parse_part(name, data)
    return _select(table, keep)


def _read_part(path: str, keep: list[str]) -> tuple[pa.Table, str]:
    """On a worker: one Parquet part file (gate columns kept) and its sha256."""
    table, digest = read_part_file(path)
    return _select(table, keep), digest


def _csv_block(
    path: str, header: bytes, block: bytes, *, first: bool, delimiter: str, keep: list[str]
) -> pa.Table:
    """On a worker: one CSV block as the local reader parses it (gate columns kept)."""
    return _select(read_csv_block(path, header, block, first=first, delimiter=delimiter), keep)


def _select(table: pa.Table, keep: list[str]) -> pa.Table:
    if not keep:
        return table
    kept = set(keep)
    return table.select([c for c in table.column_names if c in kept])


def _first(pair: tuple[Any, Any]) -> Any:
    return pair[0]


def _second(pair: tuple[Any, Any]) -> Any:
    return pair[1]


def _shape(table: pa.Table) -> tuple[int, tuple[str, ...]]:
    return table.num_rows, tuple(table.column_names)


# ---------------------------------------------------------------- DP bins, zeros
def _first_rows(table: pa.Table, n: int) -> pa.Table:
    """On a worker: the first ``n`` rows of a part (the part ``record_limit`` falls in)."""
    return table.slice(0, n)


def _numbers(table: pa.Table, column: str) -> NDArray[np.float64]:
    """On a worker: the numbers of one column of a part, as the local ``binning`` stage parses
    them (pandas ``to_numeric``, non-numbers dropped)."""
    import pandas as pd

    raw = table.column(column).to_pylist()
    values = pd.to_numeric(pd.Series(raw, dtype="string"), errors="coerce").dropna()
    out: NDArray[np.float64] = values.to_numpy(dtype=np.float64)
    return out


def _subject_numbers(
    table: pa.Table, column: str, subject: str
) -> tuple[list[str], NDArray[np.float64]]:
    """On a worker: a part's subjects and the smallest number of each in ``column``
    (:func:`~sds_core.dp.quantiles.subject_numbers` of its rows)."""
    import pandas as pd

    from sds_core.dp.quantiles import subject_numbers

    raw = table.column(column).to_pylist()
    values = pd.to_numeric(pd.Series(raw, dtype="string"), errors="coerce")
    ids = table.column(matching_column(table.column_names, subject)).to_pylist()
    parsed = values.to_numpy(dtype=np.float64, na_value=np.nan)
    return subject_numbers(parsed, ids, subject_column=subject)


def column_numbers(
    data: DaskInput, column: str, subject_id: str | None = None
) -> NDArray[np.float64]:
    """The numbers the DP quantile mechanism reads for ``column``: the same array as locally
    (one float64 column reaches the driver, not the table). With ``subject_id`` one number per
    subject: each part sends its subjects' minima, the driver keeps the minimum per subject
    (subjects may span parts)."""
    if subject_id is None:
        futures = data.client.map(_numbers, data.parts, column=column)
        return np.concatenate(data.client.gather(futures))
    from sds_core.dp.quantiles import subject_numbers

    futures = data.client.map(_subject_numbers, data.parts, column=column, subject=subject_id)
    parts = data.client.gather(futures)
    keys = [k for part_keys, _ in parts for k in part_keys]
    minima = np.concatenate([m for _, m in parts]) if parts else np.zeros(0)
    return subject_numbers(minima, keys, subject_column=subject_id)[1]


def _subject_values(table: pa.Table, params: Any, columns: list[str]) -> Any:
    """On a worker: :func:`~sds_core.data.preparation.subject_values` of a part."""
    from sds_core.data.preparation import subject_values

    return subject_values(table, params, columns)


def subject_conflicts(data: DaskInput, params: Any, columns: Sequence[str]) -> list[str]:
    """The ``columns`` some subject's rows disagree on (``params``: the core PrepareParams) in
    the input's first ``record_limit`` rows (:meth:`DaskInput.first_rows`), as the subject join
    would find them: each part sends its subjects' value keys, the driver merges them
    (subjects may span parts)."""
    from sds_core.data.preparation import SubjectValues

    data = data.first_rows(params.record_limit)
    each = dataclasses.replace(params, record_limit=None)
    futures = data.client.map(_subject_values, data.parts, params=each, columns=list(columns))
    return SubjectValues.merge(data.client.gather(futures)).conflicts()


def _zero_counts(
    table: pa.Table,
    use_columns: Sequence[str],
    sensitive_zeros: Sequence[str],
) -> dict[str, int]:
    shares = zero_shares(table, use_columns=use_columns, sensitive_zeros=sensitive_zeros)
    return {name: round(share * table.num_rows) for name, share in shares.items()}


def zero_counts_shares(
    data: DaskInput,
    *,
    use_columns: Sequence[str],
    sensitive_zeros: Sequence[str],
) -> dict[str, float]:
    """:func:`~sds_core.data.zeros.zero_shares` of the whole input, from per-part counts."""
    per_part = data.client.gather(
        data.client.map(
            _zero_counts,
            data.parts,
            use_columns=list(use_columns),
            sensitive_zeros=list(sensitive_zeros),
        )
    )
    total = data.num_rows
    counts: dict[str, int] = {}
    for part in per_part:
        for name, count in part.items():
            counts[name] = counts.get(name, 0) + count
    return {c: counts[c] / total for c in data.columns if counts.get(c) and total}
