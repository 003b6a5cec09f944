"""`sds split`: hold back a control set before a release (for `sds evaluate --privacy-risk`).

The attack-based risk of synthetic records compares what an attacker learns about the rows the
synthesizer saw (the training rows) with what it learns about rows it never saw (the control
rows). The control rows must be chosen before the release and never released: this module cuts
an input into ``training`` and ``control`` files, each row (or each subject, so all rows of one
person stay on one side) held back by its own coin keyed by the seed, as a ``privacy_risk``
release does (:func:`sds_release.store.inputs.holdback.control_mask`), written privately (0600, new
directories 0700). The training file is then released; both files stay with the data owner.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import secrets
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

from sds_core.errors import SdsInputError
from sds_release.store.inputs.holdback import (
    MIN_SIDE_ROWS,
    check_side_sizes,
    control_mask,
    side_sizes,
)

__all__ = ["MIN_SIDE_ROWS", "SplitFiles", "check_side_sizes", "control_mask", "split_input"]


@dataclasses.dataclass(frozen=True, slots=True)
class SplitFiles:
    """The two private files of a split and their record counts (sensitive: for the owner)."""

    training: Path
    control: Path
    training_rows: int
    control_rows: int


def split_input(
    input_path: str | Path,
    out_dir: str | Path,
    *,
    control_share: float = 0.2,
    seed: int | None = None,
    delimiter: str = ",",
    subject_id: str | None = None,
) -> SplitFiles:
    """Cut ``input_path`` into ``out_dir/training.*`` and ``out_dir/control.*`` (private).

    A CSV input gives CSV files (same delimiter, quotes only where needed), a Parquet file or
    dataset Parquet files. Rows keep their input order on each side.

    Args:
        input_path: the sensitive table (CSV, Parquet file or Parquet dataset).
        out_dir: where the two files go (created 0700 when missing).
        control_share: the chance that each row (or subject) is held back as a control row.
        seed: the coins' key (None: fresh entropy, the split cannot be redone).
        delimiter: the input's CSV delimiter.
        subject_id: a column identifying the person: all rows of a subject go to one side.

    Raises:
        SdsInputError: unreadable input, a bad share, an existing output file, or a side
            smaller than :data:`MIN_SIDE_ROWS` (nothing is written then).
    """
    from sds_release.store.inputs.ingest import read_table
    from sds_release.store.inputs.paths import PARQUET_SUFFIXES, dataset_files
    from sds_release.store.workspace.files import atomic_write_parquet, atomic_write_stream

    source = Path(input_path)
    parquet = dataset_files(source) is not None or source.suffix.lower() in PARQUET_SUFFIXES
    suffix = ".parquet" if parquet else (source.suffix or ".csv")
    out = Path(out_dir)
    targets = (out / f"training{suffix}", out / f"control{suffix}")
    for target in targets:
        if target.exists():
            raise SdsInputError(
                f"{target} already exists: a split never overwrites one (its rows may already "
                "be released); choose another --out-dir or remove the old files"
            )
    table = read_table(source, delimiter=delimiter)
    seed = secrets.randbits(63) if seed is None else seed
    control = control_mask(table, control_share, seed, subject_id=subject_id)
    unit = "rows" if subject_id is None else "subjects"
    check_side_sizes(*side_sizes(table, control, subject_id), unit=unit)
    sides = (table.filter(pa.array(~control)), table.filter(pa.array(control)))
    for target, side in zip(targets, sides, strict=True):
        if parquet:
            atomic_write_parquet(target, side, private=True)
        else:
            write = functools.partial(_write_csv, side, delimiter)
            atomic_write_stream(target, write, private=True)
    return SplitFiles(targets[0], targets[1], sides[0].num_rows, sides[1].num_rows)


def _write_csv(table: pa.Table, delimiter: str, sink: BinaryIO) -> None:
    """``table`` (string columns, as CSV inputs are read) as CSV, quoting only where needed."""
    text = io.TextIOWrapper(sink, encoding="utf-8", newline="")
    writer = csv.writer(text, delimiter=delimiter, lineterminator="\n")
    writer.writerow(table.column_names)
    for batch in table.to_batches(max_chunksize=65536):
        writer.writerows(zip(*(c.to_pylist() for c in batch.columns), strict=True))
    text.flush()
    text.detach()
