"""Where the input is: one CSV or Parquet file, or a Parquet dataset (a directory or a glob).

Checked before anything else, by the command line (before the budget is read or Prefect
starts) and by :mod:`sds_release.store.inputs.ingest`, which reads the files named here. Only the
standard library: the command checks the path without loading Arrow.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path

from sds_core.errors import SdsInputError
from sds_release.store.workspace.writers import check_path_writers

__all__ = ["PARQUET_SUFFIXES", "check_input_path", "dataset_files", "dataset_root"]

PARQUET_SUFFIXES = (".parquet", ".pq")


def dataset_files(path: str | Path) -> list[Path] | None:
    """The part files of a Parquet dataset input, in the order their rows are read; None when
    ``path`` names one file.

    A dataset is a directory (its ``*.parquet`` / ``*.pq`` files, not its subdirectories) or a
    glob (``data/part-*.parquet``). Files are sorted by their path relative to the dataset's
    root (:func:`dataset_root`), so the row order never depends on the file system.

    Raises:
        SdsInputError: the glob matches nothing, or not only Parquet files; the directory
            holds no Parquet file.
    """
    text = str(path)
    if any(ch in text for ch in "*?["):
        files = [Path(f) for f in glob.glob(text) if Path(f).is_file()]
        if not files:
            raise SdsInputError(
                f"input glob '{text}' matches no file; check the pattern (INPUT argument)"
            )
        other = sorted(f.name for f in files if f.suffix.lower() not in PARQUET_SUFFIXES)
        if other:
            raise SdsInputError(
                f"input glob '{text}' matches files that are not Parquet ({other[:3]}); a glob "
                "or a directory is read as a Parquet dataset: narrow the pattern to *.parquet"
            )
    elif Path(text).is_dir():
        files = [
            f for f in Path(text).iterdir() if f.is_file() and f.suffix.lower() in PARQUET_SUFFIXES
        ]
        if not files:
            raise SdsInputError(
                f"input directory '{text}' holds no *.parquet file; give the path of a CSV or "
                "Parquet file, or of a directory of Parquet part files"
            )
    else:
        return None
    root = dataset_root(files)
    return sorted(files, key=lambda f: f.relative_to(root).as_posix())


def dataset_root(files: Sequence[Path]) -> Path:
    """The deepest directory holding every part file (their names are taken relative to it)."""
    return Path(os.path.commonpath([str(f.resolve().parent) for f in files]))


def check_input_path(path: str | Path) -> Path:
    """The input path, or SdsInputError when it is missing, a directory or unreadable, or a
    folder on its path (or a part file's) can be written by someone other than this user or
    root (:func:`sds_release.store.workspace.writers.check_path_writers`).

    A Parquet dataset (a directory or a glob of part files) passes: its path is returned as
    given, and :func:`dataset_files` checks its parts.
    """
    files = dataset_files(path)
    if files is not None:
        check_path_writers(files, "the input")
        return Path(path)
    p = Path(path)
    if not p.exists():
        raise SdsInputError(f"input file '{p}' does not exist; check the path (INPUT argument)")
    if p.is_dir():
        raise SdsInputError(f"input '{p}' is a directory; give the path of a CSV or Parquet file")
    try:
        with open(p, "rb"):
            pass
    except OSError as e:
        raise SdsInputError(
            f"input file '{p}' cannot be read ({e.strerror}); fix its permissions"
        ) from None
    check_path_writers([p], "the input")
    return p
