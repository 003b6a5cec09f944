"""Object storage: inputs read from, and releases published to, an S3-compatible store.

- ``urls``: what an ``s3://`` URL names (an object, a prefix, a glob, a list), checked without
  a connection, never holding a credential;
- ``s3``: the store through Arrow's ``S3FileSystem``, configured from the standard AWS places
  only: listing an input's objects with their identity (ETag, size, version), reading one
  object checked against its listing, writing objects;
- ``bucket``: a release directory copied to a bucket (a temporary prefix, the manifest last)
  and read back for ``sds verify``.

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "ObjectSource": "sds_release.store.storage.urls",
    "ObjectUrl": "sds_release.store.storage.urls",
    "StoredObject": "sds_release.store.storage.s3",
    "download_release": "sds_release.store.storage.bucket",
    "filesystem": "sds_release.store.storage.s3",
    "is_object_url": "sds_release.store.storage.urls",
    "list_objects": "sds_release.store.storage.s3",
    "read_object": "sds_release.store.storage.s3",
    "upload_release": "sds_release.store.storage.bucket",
}

__all__ = [
    "ObjectSource",
    "ObjectUrl",
    "StoredObject",
    "download_release",
    "filesystem",
    "is_object_url",
    "list_objects",
    "read_object",
    "upload_release",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from sds_release.store.storage.bucket import download_release, upload_release
    from sds_release.store.storage.s3 import StoredObject, filesystem, list_objects, read_object
    from sds_release.store.storage.urls import ObjectSource, ObjectUrl, is_object_url
