"""``manifest.json``: a release's parameters, stages, artifacts and privacy spend.

:class:`Manifest` is created ``running`` before any artifact is written and turns ``complete``
only at publish; :func:`discard_incomplete` makes a failed release impossible to mistake for a
complete one.
"""

from __future__ import annotations

import json
import platform
import shutil
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from sds_core.errors import SdsInputError
from sds_release.store.workspace.files import atomic_write_json, sha256_file
from sds_release.store.workspace.home import MANIFEST, STATUSES, utc_now, validate_id


def collect_versions() -> dict[str, str]:
    """Versions for the manifest (from package metadata: nothing heavy is imported)."""
    out = {"python": platform.python_version()}
    for key, dist in (
        ("project", "sds-release"),
        ("numpy", "numpy"),
        ("pandas", "pandas"),
        ("pyarrow", "pyarrow"),
        ("prefect", "prefect"),
        ("great_expectations", "great-expectations"),
    ):
        try:
            out[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[key] = "not installed"
    return out


# -- manifest --------------------------------------------------------------------------------------
class Manifest:
    """``manifest.json`` of a release as a JSON dict, with helpers for stages and artifacts.

    Lifecycle: :meth:`new` (status ``running``) and :meth:`save` before any artifact is written;
    :meth:`stage_started` / :meth:`stage_finished` per stage; :meth:`record_artifact` per
    published file; ``status = "complete"`` and a final save only at publish.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @classmethod
    def new(
        cls,
        *,
        release_id: str,
        dataset: str,
        parameters: Mapping[str, Any],
        privacy: Mapping[str, Any] | None = None,
    ) -> Manifest:
        """A fresh ``running`` manifest with versions filled in."""
        return cls(
            {
                "release_id": validate_id(release_id),
                "dataset": validate_id(dataset, "dataset id"),
                "created_at": utc_now(),
                "status": "running",
                "parameters": dict(parameters),
                "privacy": dict(privacy or {}),
                "input": {},
                "stages": [],
                "artifacts": {},
                "versions": collect_versions(),
            }
        )

    @classmethod
    def load(cls, path: str | Path) -> Manifest:
        """Read a manifest (a file path or a release directory).

        Raises:
            SdsInputError: missing or not a JSON object with release_id/dataset/status.
        """
        path = Path(path)
        path = path / MANIFEST if path.is_dir() else path
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise SdsInputError(f"cannot read release manifest {path}: {e}") from e
        if not isinstance(data, dict) or not {"release_id", "dataset", "status"} <= data.keys():
            raise SdsInputError(f"{path} is not a release manifest (release_id, dataset, status)")
        return cls(data)

    def save(self, path: str | Path) -> Path:
        """Atomically write (``path`` is the manifest file or the release directory)."""
        path = Path(path)
        return atomic_write_json(path / MANIFEST if path.is_dir() else path, self.data)

    @property
    def status(self) -> str:
        """running | complete | failed."""
        return str(self.data["status"])

    @status.setter
    def status(self, value: str) -> None:
        if value not in STATUSES:
            raise SdsInputError(f"manifest status must be one of {STATUSES}, got {value!r}")
        self.data["status"] = value

    def stage(self, name: str) -> dict[str, Any] | None:
        """The stage record named ``name``, or None."""
        return next((s for s in self.data["stages"] if s.get("name") == name), None)

    def stage_started(self, name: str) -> dict[str, Any]:
        """Mark a stage running (idempotent for a resumed stage: keeps the first start time)."""
        rec = self.stage(name)
        if rec is None:
            rec = {
                "name": name,
                "status": "running",
                "started": utc_now(),
                "finished": None,
                "artifacts": [],
            }
            self.data["stages"].append(rec)
        rec["status"] = "running"
        return rec

    def stage_finished(self, name: str, artifacts: Iterable[str] = ()) -> dict[str, Any]:
        """Mark a stage complete and list the artifact names it produced."""
        rec = self.stage(name) or self.stage_started(name)
        rec.update(
            status="complete",
            finished=utc_now(),
            artifacts=sorted({*rec.get("artifacts", []), *artifacts}),
        )
        return rec

    def record_artifact(self, name: str, path: str | Path) -> str:
        """Record a published file's sha256 under its name; returns the hash."""
        digest = sha256_file(path)
        self.data["artifacts"][name] = digest
        return digest


def discard_incomplete(release_dir: str | Path, *, reason: str | None = None) -> list[str]:
    """Make a failed release impossible to mistake for a complete one.

    Deletes every file of ``release_dir`` except the manifest, then saves the manifest with
    status ``failed``, no artifacts and ``reason`` (which must not quote input values). A
    directory without a readable manifest is removed entirely. Returns the names removed.
    """
    release_dir = Path(release_dir)
    if not release_dir.is_dir():
        return []
    removed = sorted(
        str(p.relative_to(release_dir))
        for p in release_dir.rglob("*")
        if p.is_file() and p.name != MANIFEST
    )
    try:
        manifest = Manifest.load(release_dir / MANIFEST)
    except SdsInputError:
        shutil.rmtree(release_dir)
        return removed
    for name in removed:
        (release_dir / name).unlink(missing_ok=True)
    for d in sorted((p for p in release_dir.rglob("*") if p.is_dir()), reverse=True):
        d.rmdir()
    manifest.status = "failed"
    manifest.data.update(artifacts={}, failed_at=utc_now())
    if reason is not None:
        manifest.data["failure"] = reason
    manifest.save(release_dir)
    return removed
