"""Integrity of a published release directory: listed artifacts, their hashes, nothing extra.

:func:`verify_release` is what ``sds audit --verify`` and ``sds verify`` check per release;
:func:`forbidden_content_check` looks for secrets in published files (tests and audits).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sds_core.errors import SdsInputError
from sds_release.store.workspace.files import sha256_file
from sds_release.store.workspace.home import MANIFEST, PUBLIC_KEY, SIGNATURE, SYNTHETIC_PART
from sds_release.store.workspace.manifest import Manifest


def verify_release(release_dir: str | Path) -> list[str]:
    """Problems of a published release directory (empty list = intact and complete).

    Checks: manifest readable, status ``complete``, ids match the directory, every listed
    artifact present with its sha256, and no file that the manifest does not list.
    """
    release_dir = Path(release_dir)
    try:
        manifest = Manifest.load(release_dir / MANIFEST)
    except SdsInputError as e:
        return [str(e)]
    problems = []
    if manifest.status != "complete":
        problems.append(f"status is {manifest.status!r}, not 'complete'")
    if manifest.data["release_id"] != release_dir.name:
        problems.append(
            f"manifest release_id {manifest.data['release_id']!r} does not match "
            f"the directory {release_dir.name!r}"
        )
    if manifest.data["dataset"] != release_dir.parent.name:
        problems.append(
            f"manifest dataset {manifest.data['dataset']!r} does not match the "
            f"directory {release_dir.parent.name!r}"
        )
    problems += artifact_problems(release_dir, manifest.data.get("artifacts") or {})
    return problems + synthetic_part_problems(release_dir, manifest.data)


def synthetic_part_problems(release_dir: str | Path, manifest: Mapping[str, Any]) -> list[str]:
    """A split ``synthetic.parquet`` against the manifest's ``synthetic_parts``: every part
    listed in ``artifacts`` (whose sha256 :func:`artifact_problems` checks), with the rows the
    manifest gives (Parquet footer), summing to the records; none when it is one file."""
    layout = manifest.get("synthetic_parts")
    if not layout:
        return []
    import pyarrow.parquet as pq

    release_dir = Path(release_dir)
    listed = manifest.get("artifacts") or {}
    problems, total = [], 0
    parts = layout.get("parts") or []
    names = {str(p.get("file")) for p in parts}
    for name in sorted(n for n in listed if SYNTHETIC_PART.fullmatch(n) and n not in names):
        problems.append(f"{name}: an artifact but not in synthetic_parts")
    for part in parts:
        name, rows = str(part.get("file")), int(part.get("rows", -1))
        total += max(rows, 0)
        if name not in listed:
            problems.append(f"{name}: in synthetic_parts but not listed in artifacts")
            continue
        path = release_dir / name
        if not SYNTHETIC_PART.fullmatch(name) or not path.is_file():
            continue  # artifact_problems names it
        try:
            found = pq.read_metadata(path).num_rows
        except Exception as e:  # a damaged footer: the sha256 check fails too
            problems.append(f"{name}: not a readable Parquet file ({type(e).__name__})")
            continue
        if found != rows:
            problems.append(f"{name}: {found} rows, the manifest says {rows}")
    if total != layout.get("rows"):
        problems.append(
            f"synthetic_parts: the parts hold {total} rows, the manifest says {layout.get('rows')}"
        )
    return problems


def artifact_problems(
    release_dir: str | Path,
    listed: Mapping[str, str],
    *,
    own: tuple[str, ...] = (MANIFEST, SIGNATURE, PUBLIC_KEY),
) -> list[str]:
    """Problems of the files of ``release_dir`` against a manifest's ``artifacts`` (name: sha256).

    Every listed file must be present with its sha256, and every other file must be the
    manifest itself or its signature (``own``: ``manifest.json``, ``manifest.sig``,
    ``signing-key.pub``; a series folder names its own).
    """
    release_dir = Path(release_dir)
    problems = []
    for name, digest in sorted(listed.items()):
        path = release_dir / name
        if Path(name).name != name and not SYNTHETIC_PART.fullmatch(name):
            problems.append(f"artifact name {name!r} is not a plain file name")
        elif not path.is_file():
            problems.append(f"{name}: listed in the manifest but missing")
        elif sha256_file(path) != digest:
            problems.append(f"{name}: sha256 does not match the manifest (file modified)")
    for path in sorted(p for p in release_dir.rglob("*") if p.is_file()):
        name = str(path.relative_to(release_dir))
        if name not in own and name not in listed:
            problems.append(f"{name}: file not listed in the manifest")
    return problems


_SVG_GEOMETRY = re.compile(
    r'\s(?:x|y|x1|x2|y1|y2|cx|cy|r|rx|ry|width|height|viewBox|transform|points|d)="[^"]*"'
)
"""SVG attributes that hold pixel geometry (left out of :func:`forbidden_content_check`)."""


def forbidden_content_check(release_dir: str | Path, *, secrets: Iterable[str]) -> list[str]:
    """Which published files contain a value that must never appear (true count, key hex...).

    Each file is searched as raw bytes and, for Parquet, also as its decoded rows and schema,
    for each secret as a whole token (case-insensitive; ``123`` does not match ``41234``).
    Problems name the file and the secret's position in ``secrets``, never the secret itself.
    In HTML the SVG geometry attributes (``x``, ``width``, ``viewBox``, path data...) are left
    out: they are chart layout in pixels, not data (every number a chart shows is also in its
    ``<title>`` or text, which are searched).
    """
    import pyarrow.parquet as pq

    patterns = [
        (i, re.compile(rf"(?<![0-9A-Za-z]){re.escape(s)}(?![0-9A-Za-z])", re.I))
        for i, s in enumerate(str(s) for s in secrets)
        if s
    ]
    problems = []
    for path in sorted(p for p in Path(release_dir).rglob("*") if p.is_file()):
        texts = [path.read_bytes().decode("latin-1")]
        if path.suffix == ".html":
            texts = [_SVG_GEOMETRY.sub("", texts[0])]
        if path.suffix == ".parquet":
            table = pq.read_table(path)
            texts += [str(table.schema), table.to_pandas().to_csv(index=False)]
        for i, pattern in patterns:
            if any(pattern.search(t) for t in texts):
                problems.append(f"{path.name}: contains forbidden value #{i}")
    return problems
