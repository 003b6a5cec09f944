"""`sds release s3://... --publish-to s3://...` as a user runs it (a subprocess with its own
Prefect server, logging to the API at INFO) on the session's S3 server: a refused copy retried
with `sds publish`, the copy verified from the bucket, the replay from the bucket, and the
secret key (a canary) found nowhere."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from s3server import SECRET_KEY

from sds_release.store.storage.s3 import filesystem, write_object
from sds_release.store.storage.urls import ObjectUrl
from tests.helpers import PROJECT, charges, complete_releases, run_cli


def _sds(home: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    """``sds ARGS`` in a child process with its own temporary Prefect server in ``home``."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    full.update(
        env,
        SDS_HOME=str(home),
        PREFECT_LOGGING_LEVEL="INFO",
        PREFECT_LOGGING_TO_API_ENABLED="true",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="300",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "sds_release.flows.cli", *args],
        cwd=PROJECT,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _bucket_bytes() -> dict[str, bytes]:
    """Every object of both buckets, by path."""
    from pyarrow import fs as pafs

    fs, out = filesystem(), {}
    for bucket in ("sds-sensitive", "sds-public"):
        for info in fs.get_file_info(pafs.FileSelector(bucket, recursive=True)):
            if info.type == pafs.FileType.File:
                with fs.open_input_stream(info.path) as f:
                    out[info.path] = f.read()
    return out


@pytest.mark.slow
def test_release_from_and_to_buckets(
    s3_server: Any,
    tiny_csv: Path,
    tiny_config: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The release of a CSV object whose copy is refused (another release's manifest holds its
    place) is complete locally and says `sds publish`; that command copies it, byte for byte,
    and `sds verify s3://...` passes from the bucket with the public key alone. `sds audit
    --replay --input s3://...` is identical, and once the object is replaced, refused naming
    it. The secret key is in no file of the home (its Prefect database included), no object,
    no output."""
    env = s3_server.storage_options()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    run = uuid.uuid4().hex[:8]
    source, target = f"s3://sds-sensitive/{run}/people.csv", f"s3://sds-public/{run}/"
    write_object(filesystem(), ObjectUrl.parse(source), tiny_csv)
    (tmp_path / "other.json").write_text("{}")
    write_object(
        filesystem(), ObjectUrl.parse(target + "s3-1/manifest.json"), tmp_path / "other.json"
    )
    home = tmp_path / "home"
    args = ["--config", str(tiny_config), "--seed", "3", "--quiet", "--release-id", "s3-1"]

    done = _sds(home, env, "release", source, *args, "--publish-to", target)
    err = " ".join(done.stderr.decode().split())
    assert done.returncode == 1 and f"sds publish s3-1 --to {target}" in err, err[-3000:]
    [release] = complete_releases(home)
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["input"]["name"] == source and "publish_to" not in manifest["parameters"]

    filesystem().delete_file(ObjectUrl.parse(target + "s3-1/manifest.json").path)
    code, out, err = run_cli("publish", "s3-1", "--to", target, "--home", str(home))
    assert code == 0 and out.strip() == target + "s3-1/", err + out
    copied = {k: v for k, v in _bucket_bytes().items() if k.startswith(f"sds-public/{run}/")}
    assert copied == {f"sds-public/{run}/s3-1/{p.name}": p.read_bytes() for p in release.iterdir()}
    key = release / "signing-key.pub"
    code, out, err = run_cli("verify", target + "s3-1", "--public-key", str(key))
    assert code == 0 and out.strip().endswith("verified"), err + out

    replay = ["audit", "s3-1", "--replay", "--input", source, "--home", str(home), "--json"]
    code, out, err = run_cli(*replay)
    assert code == 0 and json.loads(out)["identical"], err + out
    before = len(charges(home))
    (tmp_path / "more.csv").write_bytes(tiny_csv.read_bytes() + b"1,44,9,1,50k-60k\n")
    write_object(filesystem(), ObjectUrl.parse(source), tmp_path / "more.csv")
    code, out, err = run_cli(*replay)
    assert code != 0 and "people.csv was replaced" in " ".join(err.split()), err + out
    assert len(charges(home)) == before

    # the canary: the secret key reached no file, object or output
    secret = SECRET_KEY.encode()
    assert env["AWS_SECRET_ACCESS_KEY"] == SECRET_KEY
    files = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.name == "prefect.db" for p in files)
    assert [str(p) for p in files if secret in p.read_bytes()] == []
    assert [k for k, v in _bucket_bytes().items() if secret in v] == []
    assert secret not in done.stdout + done.stderr and SECRET_KEY not in out + err
