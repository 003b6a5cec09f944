"""Out-of-core input on the Dask executor: the release's input read, validated (the gate) and
prepared on the workers, so the driver never holds the table.

ingest (:func:`open_input`: Parquet part files, or a CSV read in blocks) -> the gate
(:func:`validate_parts`) -> [DP bins: :func:`column_numbers`] -> prepare (:func:`prepare_parts`,
a :class:`~release_store.cluster.backend.DaskBackend`). The driver holds part futures, row counts,
labels and sums. Worker functions here import Arrow and the project's own checks, never Prefect.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from release_store.cluster.backend import DaskBackend
from release_store.config.schema import TableSchema
from release_store.inputs.ingest import (
    csv_digest,
    dataset_digest,
    read_csv_block,
    read_part_file,
)
from release_store.inputs.paths import PARQUET_SUFFIXES, dataset_files
from release_store.inputs.schema_checks import (
    SchemaValidationError,
    checked_view,
    failure_message,
    failure_text,
    first_failing_row,
    schema_checks,
    table_check_fails,
    view_columns,
)
from release_store.workspace.files import atomic_write_text
from sds_core.data.params import PrepareParams
from sds_core.data.partitions import concatenate
from sds_core.data.table import PreparedTable
from sds_core.data.text import matching_column
from sds_core.data.zeros import zero_shares
from sds_core.errors import SdsInputError

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


def open_input(
    client: Any,
    path: str,
    *,
    delimiter: str,
    gate_columns: Sequence[str] = (),
    partitions: int | None = None,
) -> tuple[DaskInput, str]:
    """Read the input on the workers; returns it and its ``input_sha256``.

    A Parquet dataset (directory or glob): one part per file, read and hashed on a worker; the
    digest is :func:`~release_store.inputs.ingest.dataset_digest` (one file: the file's sha256, as
    locally). A CSV file: blocks of whole lines (``partitions`` blocks, else
    :data:`CSV_BLOCKSIZE` bytes each) parsed on the workers by the local reader's rules; its
    digest is the file's sha256, streamed here. ``gate_columns`` as
    :func:`~release_store.inputs.ingest.read_release_input`.

    Raises:
        SdsInputError: as the local reader (file, part or block named), or the parts' columns
            differ, or a file changed while it was read.
    """
    keep = list(gate_columns)
    dataset = dataset_files(path)
    files = dataset
    if files is None and Path(path).suffix.lower() in PARQUET_SUFFIXES:
        files = [Path(path)]
    if files is not None:
        read = client.map(_read_part, [str(f) for f in files], keep=keep, pure=False)
        digests = client.gather(client.map(_second, read))
        parts = client.map(_first, read)
        digest = dataset_digest(files, digests) if dataset else digests[0]
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


# ---------------------------------------------------------------- the gate, on every partition
def _first_failures(table: pa.Table, schema: TableSchema) -> list[int | None]:
    """On a worker: each column check's first failing row in this part (1-based), or None."""
    view = checked_view(table, schema)
    checks = schema_checks(schema, list(table.column_names))
    return [first_failing_row(c, view) for c in checks if c.column is not None]


def validate_parts(
    data: DaskInput, schema: TableSchema, *, private_dir: Path, what: str = "input"
) -> list[dict[str, Any]]:
    """The gate on every part: the checks of :func:`~release_store.inputs.schema_checks.
    schema_checks` (those the GX suite runs; evaluated with Arrow on the workers, no GX
    there), each column check's first failing row counted across parts (global data rows).

    Returns the public summary (expectation, column, rule, success) as the local gate; the
    per-check verdicts go to ``private_dir/validation-<what>.json`` (``what``: ``input``, or
    ``output`` for the synthetic records' chunks).

    Raises:
        SchemaValidationError: the local gate's message (the failing checks, the first failing
            data row of each), nothing charged.
    """
    present = data.column_names
    checks = schema_checks(schema, present)
    per_part = data.client.gather(data.client.map(_first_failures, data.parts, schema=schema))
    offsets = np.concatenate([[0], np.cumsum(data.rows)[:-1]]).astype(int).tolist()
    first: list[int | None] = []
    for j in range(sum(c.column is not None for c in checks)):
        rows = [off + part[j] for off, part in zip(offsets, per_part, strict=True) if part[j]]
        first.append(min(rows) if rows else None)
    columns, n = view_columns(present, schema), data.num_rows
    summary, failures, results = [], [], []
    column_rows = iter(first)
    for check in checks:
        row = next(column_rows) if check.column is not None else None
        failed = (
            row is not None if check.column is not None else table_check_fails(check, columns, n)
        )
        summary.append(
            {
                "expectation": check.kind,
                "column": check.column,
                "rule": check.rule,
                "success": not failed,
            }
        )
        results.append({**summary[-1], "first_failing_row": row})
        if failed:
            failures.append(failure_text(check, present, schema, row))
    detail = private_dir / f"validation-{what}.json"  # rows, not values: private all the same
    atomic_write_text(
        detail,
        json.dumps({"engine": "arrow checks per partition", "results": results}, indent=1),
        private=True,
    )
    if failures:
        raise SchemaValidationError(failure_message(what, failures, detail))
    return summary


# ---------------------------------------------------------------- DP bins, zeros, preparation
def _limits(data: DaskInput, record_limit: int | None) -> list[int]:
    """Rows each part keeps under ``record_limit`` (the first rows of the input)."""
    left = record_limit or data.num_rows
    keep = []
    for n in data.rows:
        keep.append(max(0, min(n, left)))
        left -= keep[-1]
    return keep


def _numbers(table: pa.Table, keep: int, column: str) -> NDArray[np.float64]:
    """On a worker: the numbers of one column of a part's first ``keep`` rows, as the local
    ``binning`` stage parses them (pandas ``to_numeric``, non-numbers dropped)."""
    import pandas as pd

    raw = table.column(column).slice(0, keep).to_pylist()
    values = pd.to_numeric(pd.Series(raw, dtype="string"), errors="coerce").dropna()
    out: NDArray[np.float64] = values.to_numpy(dtype=np.float64)
    return out


def _subject_numbers(
    table: pa.Table, keep: int, column: str, subject: str
) -> tuple[list[str], NDArray[np.float64]]:
    """On a worker: a part's subjects and the smallest number of each in ``column``
    (:func:`~sds_core.dp.quantiles.subject_numbers` of its first ``keep`` rows)."""
    import pandas as pd

    from sds_core.dp.quantiles import subject_numbers

    raw = table.column(column).slice(0, keep).to_pylist()
    values = pd.to_numeric(pd.Series(raw, dtype="string"), errors="coerce")
    ids = table.column(matching_column(table.column_names, subject)).slice(0, keep).to_pylist()
    parsed = values.to_numpy(dtype=np.float64, na_value=np.nan)
    return subject_numbers(parsed, ids, subject_column=subject)


def column_numbers(
    data: DaskInput, column: str, record_limit: int | None, subject_id: str | None = None
) -> NDArray[np.float64]:
    """The numbers the DP quantile mechanism reads for ``column``: the same array as locally
    (one float64 column reaches the driver, not the table). With ``subject_id`` one number per
    subject: each part sends its subjects' minima, the driver keeps the minimum per subject
    (subjects may span parts)."""
    keep = _limits(data, record_limit)
    if subject_id is None:
        futures = data.client.map(_numbers, data.parts, keep, column=column)
        return np.concatenate(data.client.gather(futures))
    from sds_core.dp.quantiles import subject_numbers

    futures = data.client.map(_subject_numbers, data.parts, keep, column=column, subject=subject_id)
    parts = data.client.gather(futures)
    keys = [k for part_keys, _ in parts for k in part_keys]
    minima = np.concatenate([m for _, m in parts]) if parts else np.zeros(0)
    return subject_numbers(minima, keys, subject_column=subject_id)[1]


def _subject_values(table: pa.Table, keep: int, params: Any, columns: list[str]) -> Any:
    """On a worker: :func:`~sds_core.data.preparation.subject_values` of a part's first
    ``keep`` rows."""
    from sds_core.data.preparation import subject_values

    return subject_values(table.slice(0, keep), params, columns)


def subject_conflicts(data: DaskInput, params: Any, columns: Sequence[str]) -> list[str]:
    """The ``columns`` some subject's rows disagree on (``params``: the core PrepareParams),
    as the subject join would find them: each part sends its subjects' value keys, the driver
    merges them (subjects may span parts)."""
    from dataclasses import replace

    from sds_core.data.preparation import SubjectValues

    keep = _limits(data, params.record_limit)
    each = replace(params, record_limit=None)
    futures = data.client.map(_subject_values, data.parts, keep, params=each, columns=list(columns))
    return SubjectValues.merge(data.client.gather(futures)).conflicts()


def _zero_counts(
    table: pa.Table,
    keep: int,
    use_columns: Sequence[str],
    sensitive_zeros: Sequence[str],
) -> dict[str, int]:
    shares = zero_shares(
        table.slice(0, keep), use_columns=use_columns, sensitive_zeros=sensitive_zeros
    )
    return {name: round(share * keep) for name, share in shares.items()}


def zero_counts_shares(
    data: DaskInput,
    *,
    use_columns: Sequence[str],
    sensitive_zeros: Sequence[str],
    record_limit: int | None,
) -> dict[str, float]:
    """:func:`~sds_core.data.zeros.zero_shares` of the whole input, from per-part counts."""
    keep = _limits(data, record_limit)
    per_part = data.client.gather(
        data.client.map(
            _zero_counts,
            data.parts,
            keep,
            use_columns=list(use_columns),
            sensitive_zeros=list(sensitive_zeros),
        )
    )
    total = sum(keep)
    counts: dict[str, int] = {}
    for part in per_part:
        for name, count in part.items():
            counts[name] = counts.get(name, 0) + count
    return {c: counts[c] / total for c in data.columns if counts.get(c) and total}


def _pandas(table: pa.Table) -> Any:
    return table.to_pandas()


def prepare_parts(data: DaskInput, params: PrepareParams) -> DaskBackend:
    """:func:`~sds_core.data.preparation.prepare` of the whole input, on the workers (the
    domain merge, labels only, on the driver); with ``subject_id`` the rows are shuffled by the
    subject key first (:meth:`DaskBackend.from_frame`)."""
    what = f"input {data.source!r}"
    if params.subject_id is None:
        return DaskBackend.from_arrow_parts(data.client, data.parts, data.rows, params, what=what)
    import dask.dataframe as dd

    frames = data.client.map(_pandas, data.parts)
    meta = data.client.submit(_pandas, data.parts[0]).result().iloc[:0]
    ddf = dd.from_delayed(frames, meta=meta, verify_meta=False)
    return DaskBackend.from_frame(data.client, ddf, params, what=what)


def _code_bytes(part: Any) -> bytes:
    return np.ascontiguousarray(part.codes, dtype="<i4").tobytes()


def fingerprint_parts(backend: DaskBackend) -> str:
    """:func:`sds_core.data.decoding.fingerprint` of the prepared partitions, hashed one
    partition at a time in order (the same hex as the local table's)."""
    meta = [
        [m.source, m.delimiter, list(m.binary_columns), list(m.values)]
        for m in backend.multi_value_columns
    ]
    h = hashlib.sha256()
    h.update(backend.domain.to_json().encode())
    shape = [backend.n_records, backend.domain.n_columns]
    h.update(json.dumps({"multi_value_columns": meta, "shape": shape}).encode())
    for part in backend.parts:
        h.update(backend.client.submit(_code_bytes, part).result())
    return h.hexdigest()


def whole_table(table: PreparedTable | DaskBackend) -> PreparedTable:
    """The prepared table in this process: partitions gathered (a registry synthesizer fits the
    whole table; the SDS stages never need this)."""
    if isinstance(table, PreparedTable):
        return table
    return concatenate(table.client.gather(list(table.parts)))
