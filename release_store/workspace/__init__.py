"""The SDS home on disk: layout and ids, atomic writes, manifests, integrity, artifact bytes.

- ``home``: the home's layout, release ids and one release's paths;
- ``files``: atomic writes and file hashes;
- ``manifest``: ``manifest.json`` and discarding an incomplete release;
- ``integrity``: checks of a published release directory;
- ``encoding``: tabular artifacts to bytes (Parquet, SDS TSV, CSV), the synthetic files' chunks;
- ``subjects``: which period each subject counts in (keyed hashes; periodic datasets).

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "DEFAULT_HOME": "release_store.workspace.home",
    "HOME_ENV": "release_store.workspace.home",
    "HOME_MODE": "release_store.workspace.home",
    "MANIFEST": "release_store.workspace.home",
    "Manifest": "release_store.workspace.manifest",
    "PUBLIC_KEY": "release_store.workspace.home",
    "PRIVATE_UMASK": "release_store.workspace.home",
    "PUBLISHED": "release_store.workspace.home",
    "ReleasePaths": "release_store.workspace.home",
    "SIGNATURE": "release_store.workspace.home",
    "STATUSES": "release_store.workspace.home",
    "SYNTHETIC_PART": "release_store.workspace.home",
    "SubjectRecord": "release_store.workspace.subjects",
    "aggregates_parquet": "release_store.workspace.encoding",
    "aggregates_tsv": "release_store.workspace.encoding",
    "chunk_bounds": "release_store.workspace.encoding",
    "arrow_csv_bytes": "release_store.workspace.encoding",
    "artifact_problems": "release_store.workspace.integrity",
    "atomic_write_bytes": "release_store.workspace.files",
    "atomic_write_json": "release_store.workspace.files",
    "atomic_write_parquet": "release_store.workspace.files",
    "atomic_write_stream": "release_store.workspace.files",
    "atomic_write_text": "release_store.workspace.files",
    "collect_versions": "release_store.workspace.manifest",
    "csv_bytes": "release_store.workspace.encoding",
    "discard_incomplete": "release_store.workspace.manifest",
    "forbidden_content_check": "release_store.workspace.integrity",
    "make_private": "release_store.workspace.home",
    "neutralize_formulas": "release_store.workspace.encoding",
    "new_release_id": "release_store.workspace.home",
    "parquet_bytes": "release_store.workspace.encoding",
    "no_records": "release_store.workspace.encoding",
    "part_rows": "release_store.workspace.encoding",
    "private_umask": "release_store.workspace.home",
    "release_paths": "release_store.workspace.home",
    "resolve_home": "release_store.workspace.home",
    "sha256_file": "release_store.workspace.files",
    "synthetic_csv": "release_store.workspace.encoding",
    "synthetic_part_name": "release_store.workspace.encoding",
    "synthetic_part_problems": "release_store.workspace.integrity",
    "utc_now": "release_store.workspace.home",
    "validate_id": "release_store.workspace.home",
    "verify_release": "release_store.workspace.integrity",
}

__all__ = [
    "DEFAULT_HOME",
    "HOME_ENV",
    "HOME_MODE",
    "MANIFEST",
    "PRIVATE_UMASK",
    "PUBLIC_KEY",
    "PUBLISHED",
    "SIGNATURE",
    "STATUSES",
    "SYNTHETIC_PART",
    "Manifest",
    "ReleasePaths",
    "SubjectRecord",
    "aggregates_parquet",
    "aggregates_tsv",
    "arrow_csv_bytes",
    "artifact_problems",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_parquet",
    "atomic_write_stream",
    "atomic_write_text",
    "chunk_bounds",
    "collect_versions",
    "csv_bytes",
    "discard_incomplete",
    "forbidden_content_check",
    "make_private",
    "neutralize_formulas",
    "new_release_id",
    "no_records",
    "parquet_bytes",
    "part_rows",
    "private_umask",
    "release_paths",
    "resolve_home",
    "sha256_file",
    "synthetic_csv",
    "synthetic_part_name",
    "synthetic_part_problems",
    "utc_now",
    "validate_id",
    "verify_release",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from release_store.workspace.encoding import (
        aggregates_parquet,
        aggregates_tsv,
        arrow_csv_bytes,
        chunk_bounds,
        csv_bytes,
        neutralize_formulas,
        no_records,
        parquet_bytes,
        part_rows,
        synthetic_csv,
        synthetic_part_name,
    )
    from release_store.workspace.files import (
        atomic_write_bytes,
        atomic_write_json,
        atomic_write_parquet,
        atomic_write_stream,
        atomic_write_text,
        sha256_file,
    )
    from release_store.workspace.home import (
        DEFAULT_HOME,
        HOME_ENV,
        HOME_MODE,
        MANIFEST,
        PRIVATE_UMASK,
        PUBLIC_KEY,
        PUBLISHED,
        SIGNATURE,
        STATUSES,
        SYNTHETIC_PART,
        ReleasePaths,
        make_private,
        new_release_id,
        private_umask,
        release_paths,
        resolve_home,
        utc_now,
        validate_id,
    )
    from release_store.workspace.integrity import (
        artifact_problems,
        forbidden_content_check,
        synthetic_part_problems,
        verify_release,
    )
    from release_store.workspace.manifest import Manifest, collect_versions, discard_incomplete
    from release_store.workspace.subjects import SubjectRecord
