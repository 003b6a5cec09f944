"""s3:// URLs: what they name, and the refusals that keep credentials and endpoints out of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.config import build_params
from sds_release.store.config.sources import public_input, source_refusal
from sds_release.store.storage.urls import ObjectSource, ObjectUrl, is_object_url


@pytest.mark.parametrize(
    ("text", "kind", "bucket", "key"),
    [
        ("s3://sds-data/", "prefix", "sds-data", ""),
        ("s3://sds-data/people/", "prefix", "sds-data", "people/"),
        ("s3://sds-data/people/part-*.parquet", "glob", "sds-data", "people/part-*.parquet"),
        ("s3://sds-data/people.csv", "object", "sds-data", "people.csv"),
        ("S3://sds-data/a.pq", "object", "sds-data", "a.pq"),
    ],
)
def test_url_kinds(text: str, kind: str, bucket: str, key: str) -> None:
    """A prefix ends in /, a glob has a wildcard, anything else is one object."""
    url = ObjectUrl.parse(text)
    assert (url.kind, url.bucket, url.key) == (kind, bucket, key)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("s3://AKIAEXAMPLE:wJalrXUtnFEMI@sds-data/x.csv", "holds credentials"),
        ("s3://sds-data:9000/x.csv", "holds credentials or a port"),
        ("s3://sds-data/x.csv?endpoint_override=127.0.0.1", "query or fragment"),
        ("s3://Bad_Bucket/x.csv", "not a valid bucket name"),
        ("s3://sds-data//x.csv", "empty path segment"),
        ("/data/people.csv", "not an s3:// URL"),
    ],
)
def test_url_refusals(text: str, match: str) -> None:
    """A credential, a port, a query or a bad bucket name is refused, naming the rule; the
    secret before @ is never quoted."""
    with pytest.raises(SdsInputError, match=match) as info:
        ObjectUrl.parse(text)
    assert "wJalrXUtnFEMI" not in str(info.value)


def test_list_of_objects() -> None:
    """A comma-separated list names objects only, each once."""
    source = ObjectSource.parse("s3://sds-data/b.parquet, s3://sds-data/a.parquet")
    assert source.kind == "list" and [u.key for u in source.urls] == ["b.parquet", "a.parquet"]
    with pytest.raises(SdsInputError, match="names objects only"):
        ObjectSource.parse("s3://sds-data/a.parquet,s3://sds-data/in/")
    with pytest.raises(SdsInputError, match="twice"):
        ObjectSource.parse("s3://sds-data/a.parquet,s3://sds-data/a.parquet")


def test_release_params_take_urls() -> None:
    """The input URL is published as given; publish_to must be an s3:// prefix; an s3:// input
    is refused with --table, read by either executor."""
    assert is_object_url("s3://sds-data/in/") and public_input("s3://sds-data/in/") == (
        "s3://sds-data/in/"
    )
    params = build_params(
        {"dataset": "d"}, {"input": "s3://sds-data/in/", "publish_to": "s3://sds-pub/rel"}
    )
    assert params.publish_to == "s3://sds-pub/rel" and "publish_to" not in params.public_dict()
    with pytest.raises(SdsInputError, match="publish_to"):
        build_params({"dataset": "d"}, {"input": "in.csv", "publish_to": "/srv/public"})
    assert source_refusal("s3://sds-data/in/", table=None, query=None, executor="dask") is None
    assert "object store" in str(
        source_refusal("s3://sds-data/in/", table="people", query=None, executor="local")
    )


def test_pin_file_takes_an_object_input(tmp_path: Path) -> None:
    """A deployment pins publish_to like the input, and its pin file may name an s3:// input
    (a URL is not a local path to make absolute); a relative file path is still refused."""
    from sds_release.store.config.deployment import PIN_KEYS, RunOptions, read_pins, write_pins

    assert "publish_to" in PIN_KEYS and "publish_to" not in RunOptions.model_fields
    folder = tmp_path / "deployments"
    folder.mkdir(mode=0o700)
    values = {"input": "s3://sds-data/in/", "publish_to": "s3://sds-pub/rel/"}
    pins = read_pins(write_pins(folder / "d.toml", values, "test"))
    assert pins.values == values
    with pytest.raises(SdsInputError, match="not an absolute path"):
        read_pins(write_pins(folder / "e.toml", {"input": "in.csv"}, "test"))
