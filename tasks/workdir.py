"""Release working state: paths, the private key, stage checkpoints and the manifest file.

Used by the flow's tasks. ``$SDS_HOME/private/<release-id>/`` holds the key, resolved params,
validation details and one checkpoint per finished stage (sha256 recorded in ``state.json``);
``$SDS_HOME/releases/<dataset>/<release-id>/`` receives only publishable artifacts. Every write
is atomic (temporary file + rename), so a killed process never leaves a half-written file.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sds_core.errors import SdsInputError
from sds_core.randomness import ReleaseRandomness
from tasks.workspace import atomic_write_bytes as _atomic_bytes
from tasks.workspace import atomic_write_json as _atomic_json
from tasks.workspace import new_release_id, resolve_home, sha256_file, utc_now

__all__ = ["ReleaseDirs", "atomic_write_bytes", "atomic_write_json", "new_release_id", "now",
           "resolve_home", "sha256_file"]

KEY_FILE = "release.key"
STATE_FILE = "state.json"
MANIFEST = "manifest.json"


def now() -> str:
    """UTC timestamp in ISO 8601."""
    return utc_now()


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` atomically; ``mode`` 0o600 marks a private file."""
    _atomic_bytes(path, data, private=mode is not None)


def atomic_write_json(path: Path, obj: Any) -> None:
    """Atomic JSON write."""
    _atomic_json(path, obj)


@dataclass(frozen=True, slots=True)
class ReleaseDirs:
    """Where one release lives."""

    home: Path
    dataset: str
    release_id: str

    @property
    def release_dir(self) -> Path:
        """Publishable artifacts."""
        return self.home / "releases" / self.dataset / self.release_id

    @property
    def private_dir(self) -> Path:
        """Never published: key, params, validation details, checkpoints."""
        return self.home / "private" / self.release_id

    @property
    def checkpoint_dir(self) -> Path:
        """Stage checkpoints (noisy DP intermediates, hash-checked on resume)."""
        return self.private_dir / "checkpoints"

    def manifest(self) -> dict[str, Any] | None:
        """The current manifest, or None."""
        p = self.release_dir / MANIFEST
        return json.loads(p.read_text()) if p.is_file() else None

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Atomically replace the manifest."""
        atomic_write_json(self.release_dir / MANIFEST, manifest)

    # -- the key -------------------------------------------------------------------------
    def randomness(self, seed: int | None) -> ReleaseRandomness:
        """The release key: loaded if stored, else created (fresh or from ``seed``) and stored."""
        p = self.private_dir / KEY_FILE
        if p.is_file():
            return ReleaseRandomness(p.read_bytes())
        rnd = ReleaseRandomness.from_seed(seed) if seed is not None else ReleaseRandomness.fresh()
        atomic_write_bytes(p, rnd.key, mode=0o600)
        return rnd

    # -- stage checkpoints ---------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The private stage state (``{"stages": {name: {...}}, ...}``)."""
        p = self.private_dir / STATE_FILE
        return json.loads(p.read_text()) if p.is_file() else {"stages": {}}

    def update_state(self, **fields: Any) -> None:
        """Merge top-level ``fields`` into the private state."""
        st = self.state()
        st.update(fields)
        atomic_write_json(self.private_dir / STATE_FILE, st)

    def save_checkpoint(self, stage: str, obj: Any) -> None:
        """Persist a stage's private result and record its sha256."""
        path = self.checkpoint_dir / f"{stage}.pkl"
        atomic_write_bytes(path, pickle.dumps(obj, protocol=5), mode=0o600)
        st = self.state()
        st["stages"][stage] = {"file": path.name, "sha256": sha256_file(path), "at": now()}
        atomic_write_json(self.private_dir / STATE_FILE, st)

    def load_checkpoint(self, stage: str) -> Any | None:
        """A finished stage's result (sha256-checked), or None when the stage never finished.

        Raises:
            SdsInputError: the checkpoint file does not match its recorded sha256.
        """
        rec = self.state()["stages"].get(stage)
        if rec is None:
            return None
        path = self.checkpoint_dir / rec["file"]
        if not path.is_file() or sha256_file(path) != rec["sha256"]:
            raise SdsInputError(
                f"checkpoint of stage {stage!r} of release {self.release_id!r} is missing or "
                f"was modified ({path}); the release cannot be resumed safely: cancel it with "
                f"`sds cancel {self.release_id}` and start a new release"
            )
        return pickle.loads(path.read_bytes())  # private file, sha256-checked above
