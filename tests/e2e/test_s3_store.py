"""Inputs read from a real S3 server (SeaweedFS, the ``s3_server`` fixture) and the copies of a
release in a bucket: the same tables and digests as local files, and each fault's refusal."""

from __future__ import annotations

import itertools
import os
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from sds_core.errors import SdsInputError
from sds_release.store.inputs.ingest import input_headers, read_release_input
from sds_release.store.inputs.objects import list_input, object_digest
from sds_release.store.storage.bucket import download_release, upload_release
from sds_release.store.storage.s3 import filesystem, read_object
from sds_release.store.storage.urls import ObjectUrl


@pytest.fixture
def s3_env(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The AWS_* variables of the session's S3 server in this test's environment."""
    for name, value in s3_server.storage_options().items():
        monkeypatch.setenv(name, value)
    return s3_server


@pytest.fixture
def prefix(s3_env: Any) -> str:
    """A fresh prefix of the input bucket: ``s3://sds-sensitive/<random>/``."""
    return f"s3://sds-sensitive/{uuid.uuid4().hex[:12]}/"


def _put(url: str, data: bytes) -> ObjectUrl:
    obj = ObjectUrl.parse(url)
    with filesystem().open_output_stream(obj.path) as out:
        out.write(data)
    return obj


def _parts(tiny_csv: Path, folder: Path, n: int = 3) -> list[Path]:
    """The tiny table as ``n`` Parquet part files."""
    table = read_release_input(tiny_csv, delimiter=",")[0]
    folder.mkdir(exist_ok=True)
    step = -(-table.num_rows // n)
    out = []
    for i in range(n):
        path = folder / f"part-{i}.parquet"
        pq.write_table(table.slice(i * step, step), path)
        out.append(path)
    return out


def test_objects_read_as_the_local_files(prefix: str, tiny_csv: Path, tmp_path: Path) -> None:
    """A CSV object is the local CSV's table; a prefix, a glob and a list (in any order) of
    Parquet objects are the local dataset's table, in one canonical order, with one digest."""
    _put(prefix + "people.csv", tiny_csv.read_bytes())
    table, digest = read_release_input(prefix + "people.csv", delimiter=",")
    assert table.equals(read_release_input(tiny_csv, delimiter=",")[0])
    files = _parts(tiny_csv, tmp_path / "parts")
    for f in files:
        _put(prefix + "parts/" + f.name, f.read_bytes())
    _put(prefix + "parts/_SUCCESS", b"")  # a prefix reads its Parquet objects only
    local = read_release_input(tmp_path / "parts", delimiter=",")[0]
    reads = {
        kind: read_release_input(url, delimiter=",")
        for kind, url in {
            "prefix": prefix + "parts/",
            "glob": prefix + "parts/part-*.parquet",
            "list": ",".join(prefix + "parts/" + f.name for f in reversed(files)),
        }.items()
    }
    for kind, (read, read_digest) in reads.items():
        assert read.equals(local), kind
        assert read_digest == reads["prefix"][1] != digest, kind
    assert input_headers(prefix + "parts/", delimiter=",") == local.column_names
    # the identity is the object list: the same objects elsewhere give the same digest
    for f in files:
        _put(prefix + "copy/" + f.name, f.read_bytes())
    assert object_digest(list_input(prefix + "copy/")) == reads["prefix"][1]
    _put(prefix + "copy/part-1.parquet", files[0].read_bytes())  # one object replaced
    assert object_digest(list_input(prefix + "copy/")) != reads["prefix"][1]


def test_object_changed_after_listing(prefix: str, tiny_csv: Path) -> None:
    """An object replaced or deleted between its listing and its read is refused, naming it."""
    _put(prefix + "a.csv", tiny_csv.read_bytes())
    [listed] = list_input(prefix + "a.csv")
    _put(prefix + "a.csv", tiny_csv.read_bytes() + b"1,44,9,1,50k-60k\n")
    with pytest.raises(SdsInputError, match=r"a\.csv was replaced since the input was listed"):
        read_object(listed)
    [listed] = list_input(prefix + "a.csv")
    filesystem().delete_file(listed.url.path)
    with pytest.raises(SdsInputError, match=r"a\.csv was deleted after the input was listed"):
        read_object(listed)


@pytest.mark.parametrize(
    ("url", "env", "match"),
    [
        ("s3://sds-nobucket/in/", {}, "sds-nobucket/in/: the bucket does not exist"),
        ("s3://sds-nobucket/x.csv", {}, "does not exist"),
        ("s3://sds-sensitive/nothing-here/", {}, "holds no \\*.parquet object"),
        ("s3://sds-sensitive/in/x-*.parquet", {}, "matches no object"),
        ("s3://sds-sensitive/in/", {"AWS_SECRET_ACCESS_KEY": "wrong-SECRET-4242"}, "refused"),
        ("s3://sds-sensitive/in/", {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}, "no object store"),
        ("s3://sds-sensitive/in/", {"AWS_ENDPOINT_URL": "ftp://h"}, "not an endpoint URL"),
    ],
)
def test_store_faults_named(
    s3_env: Any, monkeypatch: pytest.MonkeyPatch, url: str, env: dict[str, str], match: str
) -> None:
    """A bucket or object that does not exist, a wrong key, an endpoint that does not answer:
    one message naming it and the fix, and never the secret key."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SdsInputError, match=match) as info:
        read_release_input(url, delimiter=",")
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in str(info.value)


class _FailingCopies:
    """Arrow's S3 file system whose ``copy_file`` fails from the ``fail_at``-th call on (a
    connection lost mid-copy); everything else is the real store."""

    def __init__(self, fail_at: int) -> None:
        self.fs, self.calls = filesystem(), itertools.count(1)
        self.fail_at = fail_at

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fs, name)

    def copy_file(self, src: str, dst: str) -> None:
        if next(self.calls) >= self.fail_at:
            raise OSError("AWS Error NETWORK_CONNECTION during CopyObject operation")
        self.fs.copy_file(src, dst)


def test_copy_failing_midway_is_never_complete(s3_env: Any, tmp_path: Path) -> None:
    """A copy that fails after some objects leaves no manifest.json under the release's prefix
    (so `sds verify` refuses it as incomplete); copying again completes it, byte for byte."""
    release = tmp_path / "r1"
    release.mkdir()
    for name in ("aggregates.parquet", "synthetic.csv", "manifest.sig", "manifest.json"):
        (release / name).write_bytes(name.encode() * 3)
    target = f"s3://sds-public/{uuid.uuid4().hex[:12]}/"
    with pytest.raises(SdsInputError, match="no object store answers"):
        upload_release(release, target, "r1", fs=_FailingCopies(fail_at=2))
    with pytest.raises(SdsInputError, match=r"holds no manifest\.json"):
        download_release(target + "r1", tmp_path / "back")
    assert upload_release(release, target, "r1") == target + "r1/"
    back = download_release(target + "r1", tmp_path / "back")
    assert sorted(p.name for p in back.iterdir()) == sorted(p.name for p in release.iterdir())
    assert all((back / p.name).read_bytes() == p.read_bytes() for p in release.iterdir())
    from pyarrow import fs as pafs

    names = [
        i.path for i in filesystem().get_file_info(pafs.FileSelector(target[5:], recursive=True))
    ]
    assert not [n for n in names if ".partial-" in n], names  # the staging prefix is gone
    (release / "manifest.json").write_bytes(b"another release")
    with pytest.raises(SdsInputError, match="never overwritten"):
        upload_release(release, target, "r1")


def test_credentials_never_travel(s3_env: Any, tiny_csv: Path) -> None:
    """The file system holds no key: pickled (as to a Dask worker) it carries the endpoint
    only; a process with the endpoint but without the keys is refused by the store."""
    import pickle
    import subprocess
    import sys

    data = pickle.dumps(filesystem())
    assert os.environ["AWS_SECRET_ACCESS_KEY"].encode() not in data
    assert os.environ["AWS_ACCESS_KEY_ID"].encode() not in data
    _put("s3://sds-sensitive/keys/a.csv", tiny_csv.read_bytes())
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    }
    code = (
        ""
        "from sds_release.store.inputs.objects import list_input;"
        "list_input('s3://sds-sensitive/keys/a.csv')"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and "refused the credentials" in proc.stderr, proc.stderr[-500:]


def test_cli_refuses_before_any_charge(
    s3_env: Any, monkeypatch: pytest.MonkeyPatch, tiny_config: Path, home: Path
) -> None:
    """`sds release s3://...` with a missing bucket, a wrong secret or a silent endpoint, with
    either executor: the pre-flight's one paragraph naming it (exit 1, as the flow would fail),
    no budget reserved or charged, no release directory, the secret never printed."""
    from tests.helpers import charges, run_cli

    args = ["--config", str(tiny_config), "--home", str(home), "--quiet"]
    cases = [
        ("s3://sds-nobucket/in/people.csv", {}, "does not exist"),
        ("s3://sds-sensitive/in/", {"AWS_SECRET_ACCESS_KEY": "wrong-SECRET-4242"}, "refused"),
        ("s3://sds-sensitive/in/", {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}, "no object store"),
    ]
    for url, env, expected in cases:
        for executor in ("local", "dask"):
            with monkeypatch.context() as m:
                for name, value in env.items():
                    m.setenv(name, value)
                code, out, err = run_cli("release", url, *args, "--executor", executor)
            assert code == 1 and expected in " ".join(err.split()), (url, executor, err + out)
            assert (
                "wrong-SECRET-4242" not in err
                and s3_env.storage_options()["AWS_SECRET_ACCESS_KEY"] not in err
            )
    assert charges(home) == [] and not list(home.glob("releases/*/*"))
    assert not list(home.glob("private/*/release.key"))  # nothing was started
