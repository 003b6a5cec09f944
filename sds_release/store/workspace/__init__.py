"""The SDS home on disk: layout and ids, atomic writes, manifests, integrity, artifact bytes.

- ``home``: the home's layout, release ids and one release's paths;
- ``files``: atomic writes and file hashes;
- ``manifest``: ``manifest.json`` and discarding an incomplete release;
- ``integrity``: checks of a published release directory;
- ``encoding``: tabular artifacts to bytes (Parquet, SDS TSV, CSV), the synthetic files' chunks;
- ``subjects``: which period each subject counts in (keyed hashes; periodic datasets);
- ``source_tree``: the folder this code runs from (the runner's identity, import paths).

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "DEFAULT_HOME": "sds_release.store.workspace.home",
    "HOME_ENV": "sds_release.store.workspace.home",
    "HOME_MODE": "sds_release.store.workspace.home",
    "MANIFEST": "sds_release.store.workspace.home",
    "Manifest": "sds_release.store.workspace.manifest",
    "PUBLIC_KEY": "sds_release.store.workspace.home",
    "PRIVATE_UMASK": "sds_release.store.workspace.home",
    "PUBLISHED": "sds_release.store.workspace.home",
    "ReleasePaths": "sds_release.store.workspace.home",
    "SIGNATURE": "sds_release.store.workspace.home",
    "STATUSES": "sds_release.store.workspace.home",
    "SYNTHETIC_PART": "sds_release.store.workspace.home",
    "SubjectRecord": "sds_release.store.workspace.subjects",
    "aggregates_parquet": "sds_release.store.workspace.encoding",
    "aggregates_tsv": "sds_release.store.workspace.encoding",
    "chunk_bounds": "sds_release.store.workspace.encoding",
    "arrow_csv_bytes": "sds_release.store.workspace.encoding",
    "artifact_problems": "sds_release.store.workspace.integrity",
    "atomic_write_bytes": "sds_release.store.workspace.files",
    "atomic_write_json": "sds_release.store.workspace.files",
    "atomic_write_parquet": "sds_release.store.workspace.files",
    "atomic_write_stream": "sds_release.store.workspace.files",
    "atomic_write_text": "sds_release.store.workspace.files",
    "collect_versions": "sds_release.store.workspace.manifest",
    "csv_bytes": "sds_release.store.workspace.encoding",
    "discard_incomplete": "sds_release.store.workspace.manifest",
    "forbidden_content_check": "sds_release.store.workspace.integrity",
    "make_private": "sds_release.store.workspace.home",
    "neutralize_formulas": "sds_release.store.workspace.encoding",
    "new_release_id": "sds_release.store.workspace.home",
    "parquet_bytes": "sds_release.store.workspace.encoding",
    "no_records": "sds_release.store.workspace.encoding",
    "part_rows": "sds_release.store.workspace.encoding",
    "private_umask": "sds_release.store.workspace.home",
    "release_paths": "sds_release.store.workspace.home",
    "resolve_home": "sds_release.store.workspace.home",
    "sha256_file": "sds_release.store.workspace.files",
    "synthetic_csv": "sds_release.store.workspace.encoding",
    "synthetic_part_name": "sds_release.store.workspace.encoding",
    "synthetic_part_problems": "sds_release.store.workspace.integrity",
    "utc_now": "sds_release.store.workspace.home",
    "validate_id": "sds_release.store.workspace.home",
    "verify_release": "sds_release.store.workspace.integrity",
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
    from sds_release.store.workspace.encoding import (
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
    from sds_release.store.workspace.files import (
        atomic_write_bytes,
        atomic_write_json,
        atomic_write_parquet,
        atomic_write_stream,
        atomic_write_text,
        sha256_file,
    )
    from sds_release.store.workspace.home import (
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
    from sds_release.store.workspace.integrity import (
        artifact_problems,
        forbidden_content_check,
        synthetic_part_problems,
        verify_release,
    )
    from sds_release.store.workspace.manifest import Manifest, collect_versions, discard_incomplete
    from sds_release.store.workspace.subjects import SubjectRecord
