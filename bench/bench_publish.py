"""The publish stage's encoders on a real release: one thread after another vs two threads.

Reads the DP aggregates (``normalize.pkl``) and the synthetic table (``synthesize.pkl``) from a
release's private checkpoints (e.g. a ``raw-1m`` release of ``bench/bench_release.py``; they
stay on this machine) and times, alternated, what
``sds_release.store.publish.artifacts.write_artifacts`` encodes: the aggregate table, its Parquet
and TSV, the synthetic Parquet and CSV; ``serial`` in
one thread, ``threaded`` as ``write_artifacts`` does it (synthetic files and the TSV in a second
thread). Both must give the same bytes (checked by sha256 here). Files are not written.

Usage::

    python bench/bench_publish.py HOME/private/RELEASE_ID/checkpoints [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sds_release.store.executor.local import LocalExecutor
from sds_release.store.publish.synthetic import write_synthetic
from sds_release.store.workspace.encoding import aggregates_parquet, aggregates_tsv


def _load(path: Path) -> Any:
    with path.open("rb") as f:
        obj = pickle.load(f)
    return getattr(obj, "value", obj)


def synthetic_files(synthetic: Any) -> list[bytes]:
    """``synthetic.parquet`` and ``synthetic.csv`` as publish writes them (one file each)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        write_synthetic(out, synthetic, LocalExecutor().chunks(synthetic, None), None)
        return [(out / "synthetic.parquet").read_bytes(), (out / "synthetic.csv").read_bytes()]


def serial(aggregates: Any, synthetic: Any) -> list[bytes]:
    """The encoders one after another (as before)."""
    table = aggregates.to_arrow()
    return [
        aggregates_parquet(table),
        aggregates_tsv(aggregates, table),
        *synthetic_files(synthetic),
    ]


def threaded(aggregates: Any, synthetic: Any) -> list[bytes]:
    """As ``write_artifacts``: synthetic files and the TSV in a second thread."""
    with ThreadPoolExecutor(1) as pool:
        syn = pool.submit(synthetic_files, synthetic)
        table = aggregates.to_arrow()
        tsv = pool.submit(aggregates_tsv, aggregates, table)
        parquet = aggregates_parquet(table)
        return [parquet, tsv.result(), *syn.result()]


def main() -> int:
    """Time both ways, alternated; print one line per run."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    opts = ap.parse_args()
    aggregates = _load(opts.checkpoints / "normalize.pkl")
    synthetic = _load(opts.checkpoints / "synthesize.pkl")
    digests: set[str] = set()
    for _ in range(opts.repeat):
        for way in (serial, threaded):
            load = Path("/proc/loadavg").read_text().split()[0]
            start = time.perf_counter()
            out = way(aggregates, synthetic)
            wall = time.perf_counter() - start
            digests.add(hashlib.sha256(b"".join(out)).hexdigest())
            size = sum(map(len, out)) / 2**20
            print(f"{way.__name__}: {wall:.2f} s ({size:.0f} MiB, load {load})", flush=True)
    if len(digests) != 1:
        print("the two ways gave different bytes", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
