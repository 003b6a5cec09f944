"""Object-store URLs: what ``s3://BUCKET/KEY`` names, checked without a connection.

An input URL names one object (``s3://b/data/people.csv``), a Parquet dataset under a prefix
(``s3://b/data/``, ending in ``/``), a glob of objects (``s3://b/data/part-*.parquet``) or a
comma-separated list of objects. A publishing URL names a prefix. A URL never holds a credential,
an endpoint or a query: those come from the standard places (:mod:`sds_release.store.storage.s3`).
Only the standard library here: the command checks a URL before Arrow loads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from sds_core.errors import SdsInputError

__all__ = ["OBJECT_SCHEME", "ObjectSource", "ObjectUrl", "is_object_url"]

OBJECT_SCHEME = "s3://"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_WILDCARDS = "*?["
_HOW = (
    "write s3://BUCKET/PREFIX/ (a Parquet dataset), s3://BUCKET/PREFIX/part-*.parquet (a glob), "
    "s3://BUCKET/KEY (one CSV or Parquet object) or several object URLs separated by commas"
)


def is_object_url(text: str) -> bool:
    """Whether ``text`` names objects in an object store rather than a local file.

    >>> is_object_url("s3://sds-data/people/"), is_object_url("/data/s3:/x.csv")
    (True, False)
    """
    return str(text).lower().startswith(OBJECT_SCHEME)


@dataclass(frozen=True, slots=True, order=True)
class ObjectUrl:
    """One ``s3://BUCKET/KEY`` URL (``key`` may be empty, a prefix ending in ``/`` or a glob).

    >>> u = ObjectUrl.parse("s3://sds-data/in/part-*.parquet")
    >>> u.bucket, u.key, u.kind, str(u)
    ('sds-data', 'in/part-*.parquet', 'glob', 's3://sds-data/in/part-*.parquet')
    """

    bucket: str
    key: str

    @classmethod
    def parse(cls, text: str) -> ObjectUrl:
        """The URL ``text``; refuses a credential, an endpoint, a query or a bad bucket name.

        Raises:
            SdsInputError: naming the rule and how to write the URL (never quoting a credential:
                the part before ``@`` is left out of the message).
        """
        if not is_object_url(text):
            raise SdsInputError(f"{_shown(text)!r} is not an s3:// URL; {_HOW}")
        rest = text[len(OBJECT_SCHEME) :]
        authority, _, key = rest.partition("/")
        if "@" in authority or ":" in authority:
            raise SdsInputError(
                f"the URL {_shown(text)!r} holds credentials or a port before the bucket: an "
                "object-store URL names only the bucket and the key; the keys come from "
                "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or a profile (AWS_PROFILE), the "
                "endpoint from AWS_ENDPOINT_URL"
            )
        if any(c in text for c in "?#"):
            raise SdsInputError(
                f"the URL {text!r} has a query or fragment (? or #); an object-store URL names "
                "only the bucket and the key: set the endpoint and region with AWS_ENDPOINT_URL "
                "and AWS_REGION"
            )
        if not _BUCKET.match(authority):
            raise SdsInputError(
                f"the URL {text!r} names the bucket {authority!r}, which is not a valid bucket "
                "name (3-63 characters: lowercase letters, digits, dots and hyphens); " + _HOW
            )
        if "//" in key or key.startswith("/"):
            raise SdsInputError(f"the URL {text!r} has an empty path segment (//); {_HOW}")
        return cls(authority, key)

    @property
    def kind(self) -> Literal["prefix", "glob", "object"]:
        """``prefix`` (empty or ending in ``/``), ``glob`` (a wildcard) or ``object``."""
        if any(c in self.key for c in _WILDCARDS):
            return "glob"
        if not self.key or self.key.endswith("/"):
            return "prefix"
        return "object"

    @property
    def path(self) -> str:
        """``BUCKET/KEY``, as Arrow's S3 file system names it."""
        return f"{self.bucket}/{self.key}"

    @property
    def name(self) -> str:
        """The last segment of the key (an object's file name; empty for a prefix)."""
        return self.key.rsplit("/", 1)[-1]

    def child(self, name: str) -> ObjectUrl:
        """The URL of ``name`` under this prefix.

        >>> str(ObjectUrl.parse("s3://sds-pub/releases").child("r1/manifest.json"))
        's3://sds-pub/releases/r1/manifest.json'
        """
        base = self.key if not self.key or self.key.endswith("/") else self.key + "/"
        return ObjectUrl(self.bucket, base + name)

    def __str__(self) -> str:
        return f"{OBJECT_SCHEME}{self.bucket}/{self.key}"


@dataclass(frozen=True, slots=True)
class ObjectSource:
    """What an ``s3://`` input names: one URL (object, prefix or glob) or a list of objects.

    >>> ObjectSource.parse("s3://sds-data/a.parquet, s3://sds-data/b.parquet").kind
    'list'
    """

    urls: tuple[ObjectUrl, ...]

    @classmethod
    def parse(cls, text: str) -> ObjectSource:
        """The input ``text``: one URL, or object URLs separated by commas.

        Raises:
            SdsInputError: a URL is malformed (:meth:`ObjectUrl.parse`), or a list holds a
                prefix or a glob (a list names objects only), or the same object twice.
        """
        urls = tuple(ObjectUrl.parse(part.strip()) for part in text.split(","))
        if len(urls) > 1:
            other = [str(u) for u in urls if u.kind != "object"]
            if other:
                raise SdsInputError(
                    f"the input list names {other[0]!r}, a {ObjectUrl.parse(other[0]).kind}: a "
                    "comma-separated list names objects only; give the prefix or glob alone"
                )
            if len(set(urls)) != len(urls):
                twice = sorted({str(u) for u in urls if urls.count(u) > 1})
                raise SdsInputError(f"the input list names {twice[0]!r} twice; name each once")
        return cls(urls)

    @property
    def kind(self) -> Literal["prefix", "glob", "object", "list"]:
        """``list`` for several objects, else the one URL's kind."""
        return "list" if len(self.urls) > 1 else self.urls[0].kind

    def __str__(self) -> str:
        return ",".join(str(u) for u in self.urls)


def _shown(text: str) -> str:
    """``text`` with anything between the scheme and an ``@`` left out (a credential)."""
    head, at, tail = str(text).partition("@")
    if not at:
        return str(text)
    scheme = head.split("://", 1)[0] + "://" if "://" in head else ""
    return f"{scheme}…@{tail}"
