"""A series on disk: ``series.parquet``, ``series.html``, the signed ``series.json``, and its check.

``series.json`` lists the releases the series was made from (each with the sha256 of its
``manifest.json``) and the sha256 of both files; ``series.sig`` is the home's Ed25519 signature of
it and ``signing-key.pub`` the key, as for a release (:mod:`sds_release.store.audit.signing`), so
``sds verify DIR`` checks a series from its folder alone. The folder is written whole in a
temporary sibling and then put in place; the same releases give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sds_core.errors import SdsInputError
from sds_release.store.audit.signing import (
    SignatureCheck,
    check_signature,
    key_id,
    public_pem,
    signing_key,
)
from sds_release.store.series.page import series_html, series_payload
from sds_release.store.series.sources import SeriesSources, series_sources
from sds_release.store.series.table import changes, series_frame
from sds_release.store.workspace.encoding import parquet_bytes
from sds_release.store.workspace.files import atomic_write_bytes
from sds_release.store.workspace.home import PUBLIC_KEY, validate_id
from sds_release.store.workspace.integrity import artifact_problems
from sds_release.store.workspace.manifest import collect_versions

__all__ = [
    "SERIES_FILES",
    "SERIES_MANIFEST",
    "SERIES_SIGNATURE",
    "WrittenSeries",
    "is_series_dir",
    "series_dir",
    "verify_series",
    "write_series",
]

SERIES_MANIFEST = "series.json"
SERIES_SIGNATURE = "series.sig"
SERIES_FILES = ("series.parquet", "series.html")
"""The files a series' manifest lists with their sha256."""
KIND = "sds-series"


@dataclass(frozen=True, slots=True)
class WrittenSeries:
    """What :func:`write_series` wrote: the folder, the releases, their count of rows."""

    path: Path
    sources: SeriesSources
    rows: int
    changes_beyond_noise: int
    key_id: str


def series_dir(home: str | Path, dataset: str, last: str) -> Path:
    """``$SDS_HOME/series/<dataset>/<last period>/``: the default folder of the series of
    ``dataset`` up to ``last`` (a dataset without periods: its last release id)."""
    return Path(home) / "series" / validate_id(dataset, "dataset id") / _safe(last)


def _safe(name: str) -> str:
    """A period as a folder name (a period is free text: anything but [A-Za-z0-9._-] -> '_')."""
    out = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in name)
    return out if out and out[0].isalnum() else f"p{out}"


def is_series_dir(path: str | Path) -> bool:
    """Whether ``path`` holds a series (its ``series.json``) rather than a release."""
    return (Path(path) / SERIES_MANIFEST).is_file()


def write_series(
    home: str | Path, dataset: str, *, out: str | Path | None = None, until: str | None = None
) -> WrittenSeries:
    """Build and sign the series of ``dataset`` from its complete, verified releases.

    Reads only the releases' published files (no ledger, no private file but the home's
    signing key, no sensitive data); charges nothing.

    Args:
        home: the SDS home.
        dataset: the dataset id.
        out: the folder to write (default :func:`series_dir`); an existing one must hold a
            series (it is replaced) or nothing.
        until: the last period to include (default: every period).

    Raises:
        SdsInputError: no release to make a series of (see
            :func:`~sds_release.store.series.sources.series_sources`), or ``out`` holds other files.
    """
    home = Path(home)
    sources = series_sources(home, dataset, until=until)
    target = Path(out) if out is not None else series_dir(home, dataset, sources.last)
    if target.exists() and (
        not target.is_dir() or (any(target.iterdir()) and not is_series_dir(target))
    ):
        raise SdsInputError(
            f"--out {target} exists and does not hold a series ({SERIES_MANIFEST}); give an "
            "empty or new folder, or the folder of an earlier series of the dataset to replace"
        )
    frame, scopes = series_frame(sources.releases)
    changed = changes(frame, [r.period for r in sources.releases])
    payload = series_payload(sources, frame, scopes, changed)
    beyond = int(changed["exceeds_noise"].sum())
    files = {
        "series.parquet": parquet_bytes(frame),
        "series.html": series_html(payload).encode("utf-8"),
    }
    manifest = {
        "kind": KIND,
        "dataset": dataset,
        "by_period": sources.by_period,
        "periods": [r.period for r in sources.releases],
        "releases": [r.facts() for r in sources.releases],
        "skipped": [{"release_id": s.release_id, "reason": s.reason} for s in sources.skipped],
        "rows": len(frame),
        "changes_beyond_noise": beyond,
        "artifacts": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
        "versions": {"project": collect_versions()["project"]},
    }
    body = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")
    key = signing_key(home)
    files[SERIES_MANIFEST] = body
    files[SERIES_SIGNATURE] = key.sign(body)
    files[PUBLIC_KEY] = public_pem(key.public_key())
    _put_in_place(target, files)
    return WrittenSeries(target, sources, len(frame), beyond, key_id(key.public_key()))


def _put_in_place(target: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` into a temporary sibling of ``target``, then swap it in: a reader sees
    the old series or the new one, never a mix (a crash leaves at most a ``.tmp`` folder)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    tmp.mkdir()
    try:
        for name, data in files.items():
            atomic_write_bytes(tmp / name, data)
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.{secrets.token_hex(4)}.old")
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def verify_series(path: str | Path, public_key: Any = None) -> SignatureCheck:
    """Check a series folder from its files alone: the signature of ``series.json`` (with
    ``public_key``, else the folder's own ``signing-key.pub``) and both files' sha256.

    Raises:
        SdsInputError: ``path`` is not a directory.
    """
    path = Path(path)
    if not path.is_dir():
        raise SdsInputError(
            f"{path} is not a directory; pass the folder holding series.json, series.sig and "
            "the series files"
        )
    source = "given" if public_key is not None else "included"
    key, valid, problems = check_signature(
        path, public_key, manifest=SERIES_MANIFEST, signature=SERIES_SIGNATURE
    )
    manifest: dict[str, Any] = {}
    try:
        manifest = json.loads((path / SERIES_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        problems.append(f"{SERIES_MANIFEST} is not readable JSON ({e})")
    listed = manifest.get("artifacts") if isinstance(manifest, dict) else None
    if manifest and manifest.get("kind") != KIND:
        problems.append(
            f"{SERIES_MANIFEST} is not a series manifest (kind {manifest.get('kind')!r})"
        )
    if not isinstance(listed, dict) or set(listed) != set(SERIES_FILES):
        problems.append(
            f"{SERIES_MANIFEST} does not list {', '.join(SERIES_FILES)} with their sha256"
        )
        listed = listed if isinstance(listed, dict) else {}
    problems += artifact_problems(path, listed, own=(SERIES_MANIFEST, SERIES_SIGNATURE, PUBLIC_KEY))
    return SignatureCheck(
        release_dir=str(path),
        key_id=key_id(key) if key is not None else None,
        key_source=source,
        signature_valid=valid,
        release_id=None,
        dataset=manifest.get("dataset") if isinstance(manifest, dict) else None,
        artifacts=len(listed),
        problems=tuple(problems),
    )
