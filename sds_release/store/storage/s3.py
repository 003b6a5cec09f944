"""The S3 object store through Arrow's ``S3FileSystem``: its connection from the standard places,
listing an input's objects with their identity, reading one object, writing a tree of files.

The endpoint comes from ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` (Arrow does not read
them itself), the region from ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, the credentials from the
AWS SDK's own chain (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``,
a profile: ``AWS_PROFILE`` in ``~/.aws/credentials``, an instance role). This module never reads
a credential: the file system it builds holds none (a pickled one, sent to a Dask worker, holds
the endpoint only; the worker finds its own credentials), and every error it raises has the
environment's secrets scrubbed. Arrow, not s3fs: docs/benchmarks.md has the measurement.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from sds_core.errors import SdsInputError
from sds_release.store.storage.urls import ObjectSource, ObjectUrl

__all__ = [
    "ENDPOINT_VARIABLES",
    "SECRET_VARIABLES",
    "StoredObject",
    "endpoint",
    "filesystem",
    "list_objects",
    "read_object",
    "scrubbed",
    "store_error",
    "write_object",
]

ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
"""Where the endpoint of an S3-compatible store comes from (the first set wins)."""
SECRET_VARIABLES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
"""Environment variables whose values never appear in a message (:func:`scrubbed`)."""
CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 120.0
_LIST_THREADS = 8
T = TypeVar("T")


@dataclass(frozen=True, slots=True, order=True)
class StoredObject:
    """One object of an input as listed: its URL, size in bytes, ETag and version id ("" on an
    unversioned bucket). Identity, not content: reading it checks it is still this object."""

    url: ObjectUrl
    size: int
    etag: str
    version: str = ""

    def identity(self, root: str) -> str:
        """The object's line in the input digest: its key relative to ``root`` (the common
        prefix of the input's keys), size, ETag and version, tab-separated."""
        return f"{self.url.key[len(root) :]}\t{self.size}\t{self.etag}\t{self.version}\n"


def endpoint() -> str | None:
    """The endpoint URL of the environment (``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL``),
    or None (AWS itself).

    Raises:
        SdsInputError: the URL is not ``http(s)://HOST[:PORT]`` or holds a user name.
    """
    for name in ENDPOINT_VARIABLES:
        value = os.environ.get(name, "").strip()
        if not value:
            continue
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
            raise SdsInputError(
                f"{name} is not an endpoint URL: write it as http(s)://HOST[:PORT] (no user "
                "name or password: the keys go in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)"
            )
        return f"{parts.scheme}://{parts.netloc}"
    return None


def filesystem() -> Any:
    """Arrow's ``S3FileSystem`` for the environment's endpoint and region; its credentials are
    the AWS SDK's to find (none is passed, so none is pickled with it)."""
    from pyarrow import fs

    options: dict[str, Any] = {
        "connect_timeout": CONNECT_TIMEOUT_S,
        "request_timeout": REQUEST_TIMEOUT_S,
    }
    url = endpoint()
    if url is not None:
        parts = urlsplit(url)
        options.update(endpoint_override=parts.netloc, scheme=parts.scheme)
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        options["region"] = region
    return fs.S3FileSystem(**options)


def scrubbed(text: str) -> str:
    """``text`` with the value of every secret variable of the environment replaced by ``***``."""
    for name in SECRET_VARIABLES:
        value = os.environ.get(name)
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    return text


_CURL_BROKEN_TRANSFER = (18, 52, 55, 56)
"""curl's codes for a connection that answered and then broke mid-transfer (partial file, empty
reply, send and receive failures), as against a store that does not answer at all."""


def store_error(e: BaseException, doing: str) -> SdsInputError:
    """The one-paragraph refusal for an object-store error ``e`` raised while ``doing``
    (e.g. "listing s3://b/in/"): what went wrong, where and the fix; secrets scrubbed."""
    text = scrubbed(str(e))
    where = endpoint() or "AWS (no AWS_ENDPOINT_URL set)"
    if "NO_SUCH_BUCKET" in text or "NoSuchBucket" in text:
        return SdsInputError(
            f"{doing}: the bucket does not exist at {where}; check the bucket name in the URL "
            "(and AWS_ENDPOINT_URL)"
        )
    if any(
        code in text
        for code in (
            "SIGNATURE_DOES_NOT_MATCH",
            "ACCESS_DENIED",
            "INVALID_ACCESS_KEY_ID",
            "InvalidAccessKeyId",
            "AccessDenied",
        )
    ):
        return SdsInputError(
            f"{doing}: the object store at {where} refused the credentials ({_first_line(text)});"
            " check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the profile (AWS_PROFILE) and "
            "the permissions they have"
        )
    if any(f"curlCode: {code}," in text for code in _CURL_BROKEN_TRANSFER):
        return SdsInputError(
            f"{doing}: the connection to the object store at {where} broke during the transfer "
            f"({_first_line(text)}); try again once the store and the network to it are steady"
        )
    if "NETWORK_CONNECTION" in text or "curlCode" in text or "TIMEOUT" in text.upper():
        return SdsInputError(
            f"{doing}: no object store answers at {where} ({_first_line(text)}); check "
            "AWS_ENDPOINT_URL and that the store is running and reachable"
        )
    return SdsInputError(f"{doing} failed at {where}: {type(e).__name__}: {_first_line(text)}")


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:300]


def list_objects(source: ObjectSource, fs: Any = None) -> tuple[StoredObject, ...]:
    """The objects ``source`` names, each with its size, ETag and version, in canonical order
    (by bucket and key: the row order and the input digest never depend on the listing).

    A prefix names its Parquet objects (``*.parquet``, ``*.pq``; not those under deeper
    prefixes), a glob the objects its pattern matches (``*`` within one path segment, as a
    local glob), both only Parquet; one object may be CSV or Parquet.

    Raises:
        SdsInputError: nothing matches, a glob or list holds an object that is not Parquet, an
            object does not exist, or the store refuses (:func:`store_error`).
    """
    from pyarrow import fs as pafs

    fs = fs or filesystem()
    found: list[tuple[ObjectUrl, int]] = []
    for url in source.urls:
        doing = f"listing the input {url}"
        try:
            if url.kind == "object":
                info = fs.get_file_info(url.path)
                if info.type != pafs.FileType.File:
                    _check_bucket(fs, url)
                    raise SdsInputError(
                        f"input object {url} does not exist; check the key (INPUT argument), or "
                        "end a prefix with / to read the Parquet objects under it"
                    )
                found.append((url, int(info.size)))
            else:
                found.extend(_matching(fs, url))
        except SdsInputError:
            raise
        except OSError as e:
            raise store_error(e, doing) from None
    if len(found) > 1 or source.kind != "object":
        other = sorted(str(u) for u, _ in found if not _is_parquet(u.key))
        if other:
            raise SdsInputError(
                f"input {source} names objects that are not Parquet ({other[:3]}); a prefix, "
                "glob or list is read as a Parquet dataset: name *.parquet objects only"
            )
    found.sort()
    return tuple(_in_threads(lambda pair: _stat(fs, *pair), found))


def _matching(fs: Any, url: ObjectUrl) -> list[tuple[ObjectUrl, int]]:
    """The Parquet objects directly under a prefix, or the objects a glob matches."""
    from pyarrow import fs as pafs

    pattern = url.key
    if url.kind == "prefix":
        base, pattern = url.key, url.key + "*"
    else:
        first = min(i for i, c in enumerate(pattern) if c in "*?[")
        base = pattern[: pattern.rfind("/", 0, first) + 1]
    deep = pattern.count("/") > base.count("/")
    selector = pafs.FileSelector(f"{url.bucket}/{base}".rstrip("/"), recursive=deep)
    try:
        infos = fs.get_file_info(selector)
    except FileNotFoundError:
        infos = []
    if not infos:
        _check_bucket(fs, url)
    segments = pattern.split("/")
    out = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        key = info.path.split("/", 1)[1]
        parts = key.split("/")
        if len(parts) == len(segments) and all(
            fnmatch.fnmatchcase(p, s) for p, s in zip(parts, segments, strict=True)
        ):
            if url.kind == "prefix" and not _is_parquet(key):
                continue  # a prefix reads its Parquet objects (a _SUCCESS marker is left out)
            out.append((ObjectUrl(url.bucket, key), int(info.size)))
    if not out:
        what = "holds no *.parquet object" if url.kind == "prefix" else "matches no object"
        raise SdsInputError(
            f"input {url} {what}; check the prefix or pattern (INPUT argument; a prefix ends "
            "with /)"
        )
    return out


def _check_bucket(fs: Any, url: ObjectUrl) -> None:
    """Refuse a bucket that does not exist (Arrow reports a missing bucket's keys as missing)."""
    from pyarrow import fs as pafs

    if fs.get_file_info(url.bucket).type == pafs.FileType.NotFound:
        raise SdsInputError(
            f"the bucket of {url} does not exist at {endpoint() or 'AWS'}; check the bucket "
            "name in the URL (and AWS_ENDPOINT_URL)"
        )


def _is_parquet(key: str) -> bool:
    return key.lower().endswith((".parquet", ".pq"))


def _head(fs: Any, url: ObjectUrl) -> dict[str, str]:
    """The object's metadata as the store answers a HEAD (``ETag``, ``VersionId``, ...)."""
    with fs.open_input_file(url.path) as f:
        return {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in f.metadata().items()}


def _stat(fs: Any, url: ObjectUrl, size: int) -> StoredObject:
    try:
        meta = _head(fs, url)
    except FileNotFoundError:
        raise SdsInputError(
            f"input object {url} was deleted while the input was listed; run again once the "
            "input is complete"
        ) from None
    except OSError as e:
        raise store_error(e, f"reading the metadata of {url}") from None
    return StoredObject(url, size, meta.get("ETag", ""), meta.get("VersionId", ""))


def _in_threads(fn: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(min(_LIST_THREADS, len(items))) as pool:
        return list(pool.map(fn, items))


def read_object(obj: StoredObject, fs: Any = None) -> bytes:
    """The bytes of ``obj``, checked to be the object listed: the same ETag, version and size
    before and after the read (as a local file's size and time are checked).

    Raises:
        SdsInputError: the object was deleted or replaced since it was listed, or while it was
            read, or the store refuses (:func:`store_error`); nothing is charged before the
            input is read, so a run again after the input is stable is safe.
    """
    fs = fs or filesystem()
    url = obj.url
    try:
        with fs.open_input_file(url.path) as f:
            _same(obj, _decoded(f.metadata()), "since the input was listed")
            data = f.read()
        _same(obj, _head(fs, url), "while it was read")
    except FileNotFoundError:
        raise SdsInputError(
            f"input object {url} was deleted after the input was listed; restore it (or list "
            "the input again: run the release again)"
        ) from None
    except OSError as e:
        raise store_error(e, f"reading the input object {url}") from None
    if len(data) != obj.size:
        raise SdsInputError(
            f"input object {url} was replaced while it was read ({obj.size} bytes listed, "
            f"{len(data)} read); run again once the input is stable"
        )
    return bytes(data)


def _decoded(meta: Any) -> dict[str, str]:
    return {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in meta.items()}


def _same(obj: StoredObject, meta: dict[str, str], when: str) -> None:
    etag, version = meta.get("ETag", ""), meta.get("VersionId", "")
    size = int(meta.get("Content-Length", obj.size))
    if (etag, version, size) != (obj.etag, obj.version, obj.size):
        raise SdsInputError(
            f"input object {obj.url} was replaced {when} (its ETag, version or size changed); "
            "the release reads exactly the objects it listed: run again once the input is "
            "stable"
        )


def write_object(fs: Any, url: ObjectUrl, source: Path) -> None:
    """Upload the file ``source`` as the object ``url`` (a failure raises ``OSError``)."""
    with open(source, "rb") as src, fs.open_output_stream(url.path) as out:
        while chunk := src.read(8 * 2**20):
            out.write(chunk)
