"""`sds split`: hold back a control set before a release (for `sds evaluate --privacy-risk`).

The attack-based risk of synthetic records compares what an attacker learns about the rows the
synthesizer saw (the training rows) with what it learns about rows it never saw (the control
rows). The control rows must be chosen before the release and never released: this module cuts
an input into ``training`` and ``control`` files by a seeded permutation of its rows (or of its
subjects, so all rows of one person stay on one side), written privately (0600, new directories
0700). The training file is then released; both files stay with the data owner.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import secrets
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from sds_core.errors import SdsInputError

__all__ = ["MIN_SIDE_ROWS", "SplitFiles", "check_side_sizes", "control_mask", "split_input"]

MIN_SIDE_ROWS = 100
"""Fewest records each side of a split (training and control) must hold. anonymeter attacks
as many control records as training records; with fewer than 100 attacks the 95% interval of
a success rate is wider than ±0.1 (1.96·√(0.25/100) = 0.098), wider than any risk worth
reporting, and a risk cannot be told from zero."""


@dataclasses.dataclass(frozen=True, slots=True)
class SplitFiles:
    """The two private files of a split and their record counts (sensitive: for the owner)."""

    training: Path
    control: Path
    training_rows: int
    control_rows: int


def check_side_sizes(training_rows: int, control_rows: int, *, unit: str = "records") -> None:
    """Refuse a training or control side smaller than :data:`MIN_SIDE_ROWS`.

    Raises:
        SdsInputError: naming both sizes, the minimum, why, and the fix.
    """
    small = min(training_rows, control_rows)
    if small < MIN_SIDE_ROWS:
        raise SdsInputError(
            f"too small for a privacy-risk evaluation: the training side has {training_rows} "
            f"{unit} and the control side {control_rows}; each needs at least {MIN_SIDE_ROWS}, "
            f"because the attacks are run on as many control {unit} as training {unit} and "
            f"with fewer than {MIN_SIDE_ROWS} the 95% interval of a risk is wider than ±0.1; "
            "use a larger input (or a larger --control-share), or skip the privacy-risk "
            "evaluation for this data. Nothing was charged or written."
        )


def control_mask(n: int, control_share: float, seed: int) -> NDArray[np.bool_]:
    """Which of ``n`` units go to the control side: exactly ``round(n·share)`` of them, chosen
    by a permutation drawn from ``seed`` (the same seed and ``n`` give the same split).

    >>> control_mask(10, 0.2, seed=7).sum()
    np.int64(2)

    Raises:
        SdsInputError: ``control_share`` is not in (0, 1).
    """
    if not 0.0 < control_share < 1.0:
        raise SdsInputError(
            f"--control-share must be between 0 and 1 (exclusive), got {control_share}; "
            "0.2 holds back a fifth of the rows"
        )
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    mask = np.zeros(n, dtype=np.bool_)
    mask[rng.permutation(n)[: round(n * control_share)]] = True
    return mask


def _subject_keys(table: pa.Table, subject_id: str) -> NDArray[np.int64]:
    """The subject index of each row (trimmed, lower-cased id, as the release joins rows)."""
    import pandas as pd

    from sds_core.data.text import match_key, matching_column

    column = table.column(matching_column(table.column_names, subject_id))
    keys = [match_key("" if v is None else str(v)) for v in column.to_pylist()]
    if any(k == "" for k in keys):
        raise SdsInputError(
            f"subject id column {subject_id!r} has empty cells: every row needs its subject "
            "to be split by subject; fill in or drop those rows"
        )
    codes, _ = pd.factorize(np.asarray(keys, dtype=object))
    return np.asarray(codes, dtype=np.int64)


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
        control_share: share of the rows (or subjects) held back as the control set.
        seed: the permutation's seed (None: fresh entropy, the split cannot be redone).
        delimiter: the input's CSV delimiter.
        subject_id: a column identifying the person: all rows of a subject go to one side.

    Raises:
        SdsInputError: unreadable input, a bad share, an existing output file, or a side
            smaller than :data:`MIN_SIDE_ROWS` (nothing is written then).
    """
    from release_store.inputs.ingest import PARQUET_SUFFIXES, dataset_files, read_table
    from release_store.workspace.files import atomic_write_parquet, atomic_write_stream

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
    if subject_id is None:
        control = control_mask(table.num_rows, control_share, seed)
        n_control = int(control.sum())
        check_side_sizes(table.num_rows - n_control, n_control, unit="rows")
    else:
        subject = _subject_keys(table, subject_id)
        chosen = control_mask(int(subject.max()) + 1, control_share, seed)
        n_control = int(chosen.sum())
        check_side_sizes(chosen.size - n_control, n_control, unit="subjects")
        control = chosen[subject]
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
