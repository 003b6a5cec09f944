"""The parameters of a stopped release, rebuilt from its private workspace for ``sds resume``.

A release keeps its parameters in ``private/<id>/params.json`` (the ledger URL without its
password) and its seed, when given, apart in ``seed.json``; resuming runs the same release again
from its first unfinished stage, so nothing here may differ from what the release started with,
except where the ledger is reached and with which password.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sds_core.errors import SdsInputError
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.ledger.backends import LEDGER_URL_ENV, default_ledger_url, split_password
from sds_release.store.workspace.home import find_release, validate_id

__all__ = ["release_manifest", "resume_hint", "resume_params"]


def resume_params(home: Path, release_id: str, ledger: str | None = None) -> ReleaseParams:
    """The ReleaseParams release ``release_id`` of ``home`` started with.

    ``ledger`` (``--ledger``) names where its ledger is now; without it, a release reserved in
    the home's own SQLite ledger stays there (or in ``$SDS_LEDGER_URL``'s copy of it), and one
    reserved elsewhere takes the password of ``$SDS_LEDGER_URL`` when that names the same
    ledger (the stored URL never has one).

    Raises:
        SdsInputError: a bad id, or no such release in this home (the message names the file).
    """
    validate_id(release_id)
    saved = home / "private" / release_id / "params.json"
    if not saved.is_file():
        raise SdsInputError(
            f"no release {release_id!r} in {home} (no {saved}); check the id and --home"
        )
    data = json.loads(saved.read_text())
    seed_file = saved.parent / "seed.json"
    data["seed"] = json.loads(seed_file.read_text())["seed"] if seed_file.is_file() else None
    data["home"] = str(home)
    env_url = os.environ.get(LEDGER_URL_ENV)
    if ledger is not None:
        data["ledger"] = ledger
    elif data.get("ledger") is None:  # reserved in the home's own SQLite ledger
        data["ledger"] = default_ledger_url(home) if env_url else None
    elif env_url and split_password(env_url)[0] == data["ledger"]:
        data["ledger"] = env_url  # the same ledger, with the password the stored URL lacks
    return ReleaseParams.model_validate(data)


def release_manifest(home: Path, release_id: str) -> tuple[Path | None, dict[str, Any] | None]:
    """Release ``release_id``'s directory in ``home`` and its manifest (None when the release
    has no directory, or its manifest is missing or unreadable)."""
    found = find_release(home, release_id)
    try:
        manifest = json.loads((found / "manifest.json").read_text()) if found else None
    except (OSError, ValueError):
        manifest = None
    return found, manifest if isinstance(manifest, dict) else None


def resume_hint(home: Path, release_id: str) -> str:
    """What to do about release ``release_id`` of ``home`` after it stopped (a failure, a signal,
    a lost runner or Dask worker): ``sds resume`` while its reservation is open, else start a new
    release.

    A release whose manifest says ``resumable: false`` was closed when it failed (before any
    charge, or with counts too small to release); one with no manifest stopped before its
    reservation.
    """
    found, manifest = release_manifest(home, release_id)
    if manifest is None:
        return "nothing was reserved or charged: run the release again"
    if manifest.get("status") == "complete":
        return f"it completed after all ({found})"
    if manifest.get("resumable") is False:
        return "its reservation is closed (given back if nothing was charged): start a new release"
    return (
        f"continue it with `sds resume {release_id}` (or give its unspent budget back with "
        f"`sds cancel {release_id}`)"
    )
