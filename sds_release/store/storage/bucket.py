"""A release directory in a bucket: copied there once complete and signed, read back to verify.

:func:`upload_release` copies every file of the release directory to a temporary prefix
(``PREFIX/.partial-<release-id>-<random>/``), then copies them server-side under
``PREFIX/<release-id>/`` with ``manifest.sig`` and ``manifest.json`` last, then removes the
temporary prefix. A copy that fails anywhere leaves no ``manifest.json`` under the release's
prefix, so nothing half-copied looks complete (``sds verify`` refuses a prefix without one), and
running it again (``sds publish``) completes it. :func:`download_release` brings a release's
objects back into a local directory for ``sds verify``: only what the bucket holds, nothing
private.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sds_core.errors import SdsInputError
from sds_release.store.storage.s3 import filesystem, store_error, write_object
from sds_release.store.storage.urls import ObjectUrl

__all__ = ["LAST", "download_release", "release_url", "upload_release"]

LAST = ("manifest.sig", "manifest.json")
"""Copied last, in this order: a release prefix with a ``manifest.json`` is complete."""


def release_url(prefix: str, release_id: str) -> ObjectUrl:
    """``s3://BUCKET/PREFIX/<release-id>/``: where a release published to ``prefix`` lies.

    >>> str(release_url("s3://sds-pub/releases/", "r1"))
    's3://sds-pub/releases/r1/'
    """
    return ObjectUrl.parse(prefix).child(f"{release_id}/")


def _files(root: Path) -> Iterator[str]:
    """The release's files relative to ``root``, the manifest and its signature last."""
    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    yield from (n for n in names if n not in LAST)
    yield from (n for n in LAST if n in names)


def upload_release(release_dir: Path, prefix: str, release_id: str, fs: Any = None) -> str:
    """Copy the complete release in ``release_dir`` to ``prefix``; returns its URL.

    Raises:
        SdsInputError: the store refuses or fails
            (:func:`~sds_release.store.storage.s3.store_error`), or the prefix already holds
            another release of this id (a different manifest): releases are immutable, so it
            is never overwritten.
    """
    fs = fs or filesystem()
    dest = release_url(prefix, release_id)
    staging = ObjectUrl.parse(prefix).child(f".partial-{release_id}-{secrets.token_hex(4)}/")
    names = list(_files(release_dir))
    manifest = (release_dir / "manifest.json").read_bytes()
    try:
        existing = _read(fs, dest.child("manifest.json"))
        if existing is not None and existing != manifest:
            raise SdsInputError(
                f"{dest} already holds a different release {release_id!r} (its manifest.json "
                "differs); a published release is never overwritten: publish to another prefix"
            )
        for name in names:
            write_object(fs, staging.child(name), release_dir / name)
        for name in names:  # server-side copies; the manifest last
            fs.copy_file(staging.child(name).path, dest.child(name).path)
    except OSError as e:
        raise store_error(e, f"copying release {release_id} to {dest}") from None
    finally:
        try:
            fs.delete_dir(staging.path.rstrip("/"))
        except OSError:
            pass  # a leftover staging prefix is never read as a release
    return str(dest)


def _read(fs: Any, url: ObjectUrl) -> bytes | None:
    try:
        with fs.open_input_stream(url.path) as f:
            data: bytes = f.read()
            return data
    except FileNotFoundError:
        return None


def download_release(url: str, into: Path, fs: Any = None) -> Path:
    """The objects of the release at ``url`` (``s3://BUCKET/PREFIX/<release-id>``) copied into
    the new directory ``into``; returns it.

    Raises:
        SdsInputError: the prefix holds no object (or no ``manifest.json``: not a release, or
            a copy that did not complete), or the store refuses.
    """
    from pyarrow import fs as pafs

    fs = fs or filesystem()
    base = ObjectUrl.parse(url.rstrip("/") + "/")
    try:
        infos = fs.get_file_info(pafs.FileSelector(base.path.rstrip("/"), recursive=True))
    except FileNotFoundError:
        infos = []
    except OSError as e:
        raise store_error(e, f"listing {base}") from None
    files = [i for i in infos if i.type == pafs.FileType.File]
    names = [i.path[len(base.path) :] for i in files]
    if "manifest.json" not in names:
        raise SdsInputError(
            f"{base} holds no manifest.json: it is not a published release, or its copy did "
            "not complete (publish it again with `sds publish RELEASE_ID --to PREFIX`)"
        )
    into.mkdir(parents=True)
    try:
        for name in names:
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with fs.open_input_stream(base.child(name).path) as src, open(target, "wb") as out:
                while chunk := src.read(8 * 2**20):
                    out.write(chunk)
    except OSError as e:
        raise store_error(e, f"reading {base}") from None
    return into
