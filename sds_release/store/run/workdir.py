"""Release working state: the private key, stage checkpoints, the private state and the manifest.

Used by the flow's tasks. Paths, ids, atomic writes and hashing come from
:mod:`sds_release.store.workspace` (one implementation); this module adds what only a running
release needs: ``private/<release-id>/release.key`` and ``input-commitment.key``, one checkpoint per
finished stage (sha256 recorded in ``state.json``), the run's full stage timeline
(``timeline.json``: the manifest publishes only the public part) and the manifest as a dict,
anchored to the ledger head when it turns complete (the head privately, a commitment to it in the
manifest).
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_release.store.inputs.commitment import commitment_key
from sds_release.store.workspace.files import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_stream,
    sha256_file,
)
from sds_release.store.workspace.home import ReleasePaths, new_release_id, resolve_home, utc_now
from sds_release.store.workspace.manifest import Manifest

__all__ = [
    "DamagedCheckpoint",
    "ReleaseDirs",
    "atomic_write_bytes",
    "atomic_write_json",
    "canonical_pickle",
    "new_release_id",
    "now",
    "resolve_home",
    "sha256_file",
]

KEY_FILE = "release.key"
COMMITMENT_KEY_FILE = "input-commitment.key"
"""The key of the published input commitment (:mod:`sds_release.store.inputs.commitment`)."""
STATE_FILE = "state.json"
TIMELINE_FILE = "timeline.json"
"""Every stage's start, finish and duration (private: most stage times follow the data)."""

now = utc_now
"""UTC timestamp in ISO 8601 (alias of :func:`sds_release.store.workspace.home.utc_now`)."""


@dataclass(frozen=True, slots=True)
class ReleaseDirs:
    """Where one release lives (:class:`ReleasePaths`) plus its key, checkpoints and manifest."""

    home: Path
    dataset: str
    release_id: str
    ledger_url: str | None = None  # None: $SDS_LEDGER_URL, else the home's SQLite ledger

    @property
    def paths(self) -> ReleasePaths:
        """The contract layout of this release."""
        return ReleasePaths(Path(self.home), self.dataset, self.release_id)

    @property
    def release_dir(self) -> Path:
        """Publishable artifacts."""
        return self.paths.release_dir

    @property
    def private_dir(self) -> Path:
        """Never published: key, params, validation details, checkpoints."""
        return self.paths.private_dir

    @property
    def checkpoint_dir(self) -> Path:
        """Stage checkpoints (noisy DP intermediates, hash-checked on resume)."""
        return self.private_dir / "checkpoints"

    # -- the manifest --------------------------------------------------------------------
    def manifest(self) -> dict[str, Any] | None:
        """The current manifest as a dict, or None when there is none yet."""
        path = self.paths.manifest
        return Manifest.load(path).data if path.is_file() else None

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Atomically replace the manifest.

        A manifest written with status ``complete`` and no ``ledger_head`` anchors the ledger's
        head at that moment (:mod:`sds_release.store.ledger.anchor`), so that ``sds audit --verify``
        detects a ledger truncated or rewritten after the release: the head (row number and
        hash) goes to the private workspace, the manifest gets a commitment to its hash under a
        key derived from the release key (no row number, nothing a reader could compare).
        """
        if manifest.get("status") == "complete" and "ledger_head" not in manifest:
            from sds_release.store.ledger.anchor import (
                ANCHOR_FILE,
                anchor_commitment,
                anchor_key,
                ledger_anchor,
            )

            head = ledger_anchor(self.home, self.ledger_url)
            atomic_write_json(self.private_dir / ANCHOR_FILE, head, private=True)
            key = anchor_key(self.release_key())
            manifest = {**manifest, "ledger_head": anchor_commitment(key, head["hash"])}
        Manifest(manifest).save(self.paths.manifest)

    def write_timeline(self, stages: list[dict[str, Any]], **times: Any) -> None:
        """Keep the run's full stage records (and ``times`` such as ``finished_at``) privately;
        the manifest publishes only :func:`sds_release.store.run.stages.public_stages` of them."""
        atomic_write_json(
            self.private_dir / TIMELINE_FILE, {**times, "stages": stages}, private=True
        )

    def timeline(self) -> dict[str, Any]:
        """The private timeline (``{"stages": [...], "finished_at": ...}``; empty when none)."""
        p = self.private_dir / TIMELINE_FILE
        return json.loads(p.read_text()) if p.is_file() else {"stages": []}

    # -- the key -------------------------------------------------------------------------
    def release_key(self) -> bytes:
        """The stored release key (a complete release always has one).

        Raises:
            SdsInputError: the key file is missing (the private workspace was damaged).
        """
        p = self.private_dir / KEY_FILE
        if not p.is_file():
            raise SdsInputError(
                f"release {self.release_id!r} has no release key ({p}): its private workspace "
                "is incomplete; restore it from a backup of the home"
            )
        return p.read_bytes()

    def randomness(self, seed: int | None) -> ReleaseRandomness:
        """The release key: loaded if stored, else created (fresh or from ``seed``) and stored."""
        p = self.private_dir / KEY_FILE
        if p.is_file():
            return ReleaseRandomness(p.read_bytes())
        rnd = ReleaseRandomness.from_seed(seed) if seed is not None else ReleaseRandomness.fresh()
        atomic_write_bytes(p, rnd.key, private=True)
        return rnd

    def commitment_key(self, seed: int | None, *, create: bool = True) -> bytes | None:
        """The input commitment key (0600, next to the release key): loaded if stored, else
        created (fresh, or from a test ``seed``) and stored; None when absent and not ``create``
        (the replay of a release made before commitments)."""
        p = self.private_dir / COMMITMENT_KEY_FILE
        if p.is_file():
            return p.read_bytes()
        if not create:
            return None
        key = commitment_key(seed)
        atomic_write_bytes(p, key, private=True)
        return key

    # -- stage checkpoints ---------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The private stage state (``{"stages": {name: {...}}, ...}``)."""
        p = self.private_dir / STATE_FILE
        return json.loads(p.read_text()) if p.is_file() else {"stages": {}}

    def update_state(self, **fields: Any) -> None:
        """Merge top-level ``fields`` into the private state."""
        atomic_write_json(self.private_dir / STATE_FILE, self.state() | fields, private=True)

    def save_checkpoint(self, stage: str, obj: Any) -> None:
        """Persist a stage's private result and record its sha256.

        A stage recomputed because its checkpoint was damaged (:class:`DamagedCheckpoint`) must
        give the very bytes recorded when it first finished: the release key redraws the same
        noise from the same (fingerprint-checked) input and parameters, so equal bytes prove the
        recomputation released nothing new.

        Raises:
            SdsInputError: the recomputed result differs from the recorded sha256 (the
                software changed since, say); the damaged file is left as it is.
        """
        path = self.checkpoint_dir / f"{stage}.pkl"
        st = self.state()
        before = st["stages"].get(stage)
        digest = ""

        def write(f: BinaryIO) -> None:  # streamed: the pickle is never held whole in memory
            nonlocal digest
            digest = write_canonical_pickle(obj, f)
            if before is not None and before["sha256"] != digest:
                raise _refused(path, self.release_id, stage, digest, before["sha256"])

        atomic_write_stream(path, write, private=True)  # refused: the temporary file removed
        st["stages"][stage] = {"file": path.name, "sha256": digest, "at": now()}
        atomic_write_json(self.private_dir / STATE_FILE, st, private=True)

    def load_checkpoint(self, stage: str) -> Any | None:
        """A finished stage's result (sha256-checked), or None when the stage never finished.

        Raises:
            DamagedCheckpoint: the checkpoint file is missing or does not match its recorded
                sha256 (a resumed release computes the stage again: :meth:`save_checkpoint`).
        """
        rec = self.state()["stages"].get(stage)
        if rec is None:
            return None
        path = self.checkpoint_dir / rec["file"]
        if not path.is_file() or sha256_file(path) != rec["sha256"]:
            raise DamagedCheckpoint(
                f"checkpoint of stage {stage!r} of release {self.release_id!r} is missing or "
                f"was modified ({path}); the release cannot be resumed safely: cancel it with "
                f"`sds cancel {self.release_id}` and start a new release",
                path=path,
            )
        with open(path, "rb") as f:  # private file, sha256-checked above
            return _CheckpointUnpickler(f).load()


MOVED_MODULES = {"release_store": "sds_release.store"}
"""Packages renamed since a checkpoint may have been written (0.2.0 moved ``release_store``
under ``sds_release``): a release started before the move resumes from its checkpoints."""


class _CheckpointUnpickler(pickle.Unpickler):
    """Reads a checkpoint, finding a class pickled under its package's former name."""

    def find_class(self, module: str, name: str) -> Any:
        top, dot, rest = module.partition(".")
        if top in MOVED_MODULES:
            module = MOVED_MODULES[top] + dot + rest
        return super().find_class(module, name)


def _refused(path: Path, release_id: str, stage: str, digest: str, recorded: str) -> SdsInputError:
    """A damaged checkpoint computed again to other bytes than those recorded."""
    return SdsInputError(
        f"the checkpoint {path} of stage {stage!r} of release {release_id!r} was "
        f"damaged on disk, and computing the stage again from the release key gave "
        f"other bytes (sha256 {digest[:12]}..., recorded {recorded[:12]}...), so "
        "the release cannot go on from it: restore that file from a backup of the home "
        f"and run `sds resume {release_id}` again, or abandon the release with "
        f"`sds cancel {release_id}` (what it spent stays spent) and start a new one"
    )


class _Hashing:
    """A binary file that also hashes what is written to it."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.sha256 = hashlib.sha256()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self.sha256.update(data)
        return self._f.write(data)


def write_canonical_pickle(obj: Any, f: BinaryIO) -> str:
    """:func:`canonical_pickle`'s bytes written to ``f`` as they are made (a large result,
    the model's 2M records, is not held twice: as arrays and as bytes); returns their sha256."""
    out = _Hashing(f)
    pickler = pickle.Pickler(out, protocol=5)
    pickler.fast = True  # no memo: every occurrence written in full
    pickler.dump(obj)
    return out.sha256.hexdigest()


def canonical_pickle(obj: Any) -> bytes:
    """``obj`` pickled without the memo: the bytes follow from the values alone, not from which
    parts happen to be one object (a result computed from a loaded checkpoint shares fewer
    numpy dtype objects than one computed fresh), so a stage computed again from the release key
    gives the very bytes it gave before. Checkpoints hold data, never a cycle (refused here).
    """
    buf = io.BytesIO()
    write_canonical_pickle(obj, buf)
    return buf.getvalue()


class DamagedCheckpoint(SdsInputError):
    """A finished stage's checkpoint is missing or does not match its recorded sha256."""

    def __init__(self, message: str, *, path: Path) -> None:
        """``message`` says so; ``path`` is the file."""
        super().__init__(message)
        self.path = path
