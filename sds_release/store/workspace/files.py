"""Atomic file writes (temporary file, fsync, rename; private files 0600) and file hashes.

Every file a release writes goes through one of these, so a crash leaves either the old file or
the new one, never half of it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any


# -- atomic writes ---------------------------------------------------------------------------------
def _atomic(path: str | Path, write: Callable[[io.BufferedWriter], object], private: bool) -> Path:
    """Write through a temp file in the same directory, fsync, rename, fsync the directory."""
    path = Path(path)
    if private:  # a private file's new directories (checkpoints/) are 0700 like private/<id>
        missing = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
        path.parent.mkdir(parents=True, exist_ok=True)
        for d in missing:
            os.chmod(d, 0o700)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def atomic_write_bytes(path: str | Path, data: bytes, *, private: bool = False) -> Path:
    """Atomically write ``data`` (readers see the old file or the whole new one, never a part)."""
    return _atomic(path, lambda f: f.write(data), private)


def atomic_write_stream(
    path: str | Path, write: Callable[[io.BufferedWriter], object], *, private: bool = False
) -> Path:
    """Atomically write a file produced piece by piece by ``write(file)`` (a large artifact
    never held whole in memory)."""
    return _atomic(path, write, private)


def atomic_write_text(path: str | Path, text: str, *, private: bool = False) -> Path:
    """Atomically write UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"), private=private)


def atomic_write_json(path: str | Path, obj: Any, *, private: bool = False) -> Path:
    """Atomically write JSON (sorted keys, indent 2, trailing newline)."""
    return atomic_write_text(
        path, json.dumps(obj, indent=2, sort_keys=True) + "\n", private=private
    )


def atomic_write_parquet(path: str | Path, table: Any, *, private: bool = False) -> Path:
    """Atomically write a ``pyarrow.Table`` or pandas DataFrame (index dropped) as Parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not isinstance(table, pa.Table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    return _atomic(path, lambda f: pq.write_table(table, f), private)


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
