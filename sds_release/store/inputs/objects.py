"""An object-store input (``s3://``): its objects listed, and its identity for the input
commitment.

The input's identity is its object list, not its bytes: the sha256 of one line per object in
canonical order (key relative to the objects' common prefix, size, ETag, version;
:func:`object_digest`). The keyed commitment (:mod:`sds_release.store.inputs.commitment`) is made
of it, and ``sds audit --replay --input s3://...`` lists the objects again to check it. The
readers (:func:`sds_release.store.inputs.ingest.read_object_input`, the Dask executor's) read each
object checked against its listing (:func:`sds_release.store.storage.s3.read_object`), so the rows
released are those of the objects committed to. The listing itself (ETags are MD5s of
the data) goes to the private workspace only (:data:`LISTING_FILE`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sds_release.store.storage.s3 import StoredObject, list_objects
from sds_release.store.storage.urls import ObjectSource
from sds_release.store.workspace.files import atomic_write_text

__all__ = [
    "LISTING_FILE",
    "changed_objects",
    "list_input",
    "object_digest",
    "write_listing",
]

LISTING_FILE = "input-objects.json"
"""Under ``private/<release-id>/``: the objects a release read (key, size, ETag, version)."""


def list_input(text: str) -> tuple[StoredObject, ...]:
    """The objects of the input ``text`` (:func:`sds_release.store.storage.s3.list_objects`)."""
    return list_objects(ObjectSource.parse(text))


def common_prefix(objects: Sequence[StoredObject]) -> str:
    """The deepest ``.../`` prefix of every object's key (their keys are taken relative to it).

    >>> from sds_release.store.storage.urls import ObjectUrl
    >>> common_prefix([StoredObject(ObjectUrl("b", "in/x/a.pq"), 1, "e"),
    ...                StoredObject(ObjectUrl("b", "in/y.pq"), 1, "e")])
    'in/'
    """
    keys = [o.url.key for o in objects]
    prefix = keys[0][: keys[0].rfind("/") + 1]
    while any(not k.startswith(prefix) for k in keys):
        prefix = prefix[: prefix.rstrip("/").rfind("/") + 1]
    return prefix


def object_digest(objects: Sequence[StoredObject]) -> str:
    """The ``input_sha256`` of an object-store input: the sha256 of one line per object, in
    canonical order, ``"<key relative to the common prefix>\\t<size>\\t<ETag>\\t<version>\\n"``.

    The same objects give the same digest in any bucket or under any prefix; adding, removing,
    renaming or replacing one changes it (a rewrite changes the ETag, even of the same bytes
    uploaded in other parts).
    """
    root = common_prefix(objects)
    h = hashlib.sha256()
    for obj in objects:
        h.update(obj.identity(root).encode())
    return h.hexdigest()


def write_listing(path: Path, objects: Sequence[StoredObject]) -> None:
    """The objects a release read, to the private workspace (their ETags hash the data)."""
    rows = [
        {"url": str(o.url), "size": o.size, "etag": o.etag, "version": o.version} for o in objects
    ]
    atomic_write_text(path, json.dumps({"objects": rows}, indent=1), private=True)


def changed_objects(path: Path, objects: Sequence[StoredObject]) -> list[str]:
    """What differs between the listing recorded at ``path`` and ``objects`` now (keys relative
    to each side's common prefix): one phrase per object added, removed or replaced; empty when
    nothing differs or nothing was recorded."""
    try:
        recorded: list[dict[str, Any]] = json.loads(path.read_text())["objects"]
    except (OSError, ValueError, KeyError):
        return []
    from sds_release.store.storage.urls import ObjectUrl

    then = [
        StoredObject(ObjectUrl.parse(r["url"]), int(r["size"]), r["etag"], r["version"])
        for r in recorded
    ]
    if not then or not objects:
        return []
    root_then, root_now = common_prefix(then), common_prefix(objects)
    old = {o.url.key[len(root_then) :]: o for o in then}
    new = {o.url.key[len(root_now) :]: o for o in objects}
    out = [f"{k} was removed" for k in sorted(old.keys() - new.keys())]
    out += [f"{k} was added" for k in sorted(new.keys() - old.keys())]
    out += [
        f"{k} was replaced (its ETag, size or version changed)"
        for k in sorted(old.keys() & new.keys())
        if (old[k].size, old[k].etag, old[k].version) != (new[k].size, new[k].etag, new[k].version)
    ]
    return out
