"""Benchmark: the DP aggregation on the local backend vs the Dask backend, out-of-core input.

Writes a resample (with replacement, seeded per part) of the PUMS example as ``--parts`` Parquet
part files of raw string columns (written part by part: the generator never holds the table),
then runs, each in its own subprocess so peak RSS is its own:

* ``local``: ``pyarrow.parquet.read_table`` of the directory, ``prepare``, then the engine's
  stages (count, aggregate-1..R, finalize) in process;
* ``dask``: an embedded ``LocalCluster`` (``--workers`` processes, 1 thread each),
  ``DaskBackend.from_parquet`` (read + prepare on the workers), the same engine stages; the
  driver's peak RSS and each worker's are reported separately.

Both print the time of each stage and a sha256 of the DP aggregates (equal for equal seeds).
``--synthesize N`` then builds N synthetic records from the DP aggregates (post-processing; with
Dask on the workers, left there in chunks as ``--executor dask`` does:
``synthesize_on_cluster``) and times it too; the sha256 of the records (codes in row order,
the chunks gathered after timing) is equal in both modes.
``--write DIR`` only writes the part files into DIR and keeps them (for a later ``--data DIR``).
Before timing, both load the compiled kernels on a 300-row warm-up (the Dask one on every
worker), as a long-running process or cluster has them; ``--cold`` leaves that out.

    .venv/bin/python bench/bench_dask.py --rows 1000000 --parts 8 --modes local dask
    .venv/bin/python bench/bench_dask.py --rows 10000000 --parts 40 --modes dask
    .venv/bin/python bench/bench_dask.py --rows 100000000 --parts 200 --write /data/sds100m
    .venv/bin/python bench/bench_dask.py --data /data/sds100m --modes dask --synthesize 1000000 \
        --worker-memory 8GiB
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "examples" / "pums_ca_10k.csv"
ZEROS = ("sex", "latino", "black", "asian", "married")


def write_parts(folder: Path, rows: int, parts: int, *, independent: bool = False) -> None:
    """``parts`` Parquet files of resampled rows (part i drawn with seed i).

    ``independent``: every column resampled on its own (column j of part i with seed
    (i, j)), so nearly every row and far more 2- and 3-way combinations are distinct than in
    a resample of whole rows (10,000 distinct rows): a high-cardinality dataset.
    """
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    base = pa.Table.from_pandas(
        pd.read_csv(DATA, dtype=str, keep_default_na=False), preserve_index=False
    )
    bounds = np.linspace(0, rows, parts + 1).astype(int)
    for i in range(parts):
        n = int(bounds[i + 1] - bounds[i])
        if independent:
            table = pa.table(
                {
                    name: base[name].take(
                        np.random.default_rng((i, j)).integers(0, base.num_rows, n)
                    )
                    for j, name in enumerate(base.column_names)
                }
            )
        else:
            table = base.take(np.random.default_rng(i).integers(0, base.num_rows, n))
        pq.write_table(table, folder / f"part-{i:04d}.parquet")


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuClock:
    """CPU seconds (user + system) of this process (the driver, and an embedded cluster's
    scheduler) and of every Dask worker process, per stage: under load, where wall seconds
    depend on what else runs, the CPU a stage costs still compares runs."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.by_stage: dict[str, list[float]] = {}
        self.last = self._now()

    def _now(self) -> tuple[float, float]:
        workers = 0.0 if self.client is None else sum(self.client.run(_cpu_seconds).values())
        return _cpu_seconds(), workers

    def lap(self, stage: str) -> None:
        """Charge the CPU since the last lap to ``stage`` (read outside the timed windows)."""
        now = self._now()
        self.by_stage[stage] = [round(now[0] - self.last[0], 2), round(now[1] - self.last[1], 2)]
        self.last = now


def _digest(agg: Any) -> str:
    h = hashlib.sha256(repr(agg.protected_number_of_records).encode())
    for k in range(1, agg.reporting_length + 1):
        cc = agg.counts_of(k)
        h.update(cc.attrs.tobytes())
        h.update(cc.counts.tobytes())
    return h.hexdigest()[:16]


def run(
    mode: str,
    folder: Path,
    reporting_length: int,
    workers: int,
    *,
    warm: bool,
    synthesize: int = 0,
    worker_memory: str = "auto",
) -> dict[str, Any]:
    """One mode in this process: stage times, peak RSS, aggregate digest."""
    import pandas as pd

    from sds_core.data.params import PrepareParams
    from sds_core.data.preparation import prepare
    from sds_core.dp.randomness import ReleaseRandomness
    from sds_core.marginals import engine
    from sds_core.marginals.backend import LocalBackend
    from sds_core.marginals.params import DpParams

    params = PrepareParams(sensitive_zeros=ZEROS)
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    client = None
    warm_table = prepare(pd.read_csv(DATA, dtype=str, keep_default_na=False).iloc[:300], params)
    warm_dp = DpParams(reporting_length=reporting_length)
    if mode == "local":
        import pyarrow.parquet as pq

        if warm:  # load the compiled kernels, as a long-running process has them
            engine.dp_aggregate(warm_table, warm_dp, ReleaseRandomness.from_seed(1))
            times["warm-up"] = time.perf_counter() - t0
        cpu = CpuClock(None)
        t0 = time.perf_counter()
        data: Any = LocalBackend(prepare(pq.read_table(folder), params))
    else:
        from distributed import Client, LocalCluster

        from sds_release.store.cluster.backend import DaskBackend
        from sds_release.store.cluster.inputs import open_input
        from sds_release.store.cluster.preparation import prepare_parts
        from sds_release.store.cluster.table import ClusterTable, Placement

        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            memory_limit=worker_memory,
        )
        client = Client(cluster)
        times["cluster start"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if warm:  # every worker imports and loads the kernels, as a long-running cluster has
            tiny = DaskBackend(ClusterTable.from_table(client, warm_table, 2 * workers))
            engine.dp_aggregate(tiny, warm_dp, ReleaseRandomness.from_seed(1))
            times["warm-up"] = time.perf_counter() - t0
            t0 = time.perf_counter()
        cpu = CpuClock(client)
        t0 = time.perf_counter()
        inputs, _ = open_input(client, str(folder), delimiter=",")
        # placed as the release's executor places its tables
        data = DaskBackend(prepare_parts(inputs, params).placed(Placement()))
    times["read + prepare"] = time.perf_counter() - t0
    cpu.lap("read + prepare")
    dp = DpParams(epsilon=4.0, delta=1e-9, reporting_length=reporting_length)
    rnd = ReleaseRandomness.from_seed(0)
    t0 = time.perf_counter()
    count = engine.protect_record_count(data, dp, rnd, release_label="bench")
    times["count"] = time.perf_counter() - t0
    cpu.lap("count")
    plan = engine.plan_release(dp, count.protected_number_of_records)
    survivors: dict[int, Any] = {}
    for k in range(1, reporting_length + 1):
        t0 = time.perf_counter()
        step = engine.aggregate_length(data, k, survivors, plan, dp, rnd, release_label="bench")
        survivors[k] = step.survivors
        times[f"aggregate-{k}"] = time.perf_counter() - t0
        cpu.lap(f"aggregate-{k}")
    t0 = time.perf_counter()
    agg = engine.finalize(
        survivors,
        domain=data.domain,
        reporting_length=reporting_length,
        protected_number_of_records=count.protected_number_of_records,
    )
    times["finalize"] = time.perf_counter() - t0
    cpu.lap("finalize")
    n_synthetic: int | None = None
    synthetic_digest: Any = None
    if synthesize:  # post-processing of the DP aggregates, as the release's synthesize stage
        import numpy as np

        from sds_core.synthesis.generator import synthesize as synthesize_records
        from sds_core.synthesis.params import SynthesisParams

        params = SynthesisParams(target_number_of_records=synthesize)
        t0 = time.perf_counter()
        if client is None:
            synthetic = synthesize_records(agg, params, rng=np.random.default_rng(0))
            times["synthesize"] = time.perf_counter() - t0
            n_synthetic = synthetic.n_records
            synthetic_digest = hashlib.sha256(synthetic.codes.tobytes())
        else:  # as --executor dask: the shuffled records left on the workers in chunks
            from distributed import wait

            from sds_release.store.cluster.synthesis import synthesize_on_cluster

            chunked = synthesize_on_cluster(
                client,
                agg,
                params,
                rng=np.random.default_rng(0),
                multi_value_columns=(),
                part_records=None,
            )
            wait(list(chunked.parts))
            times["synthesize"] = time.perf_counter() - t0
            n_synthetic = chunked.n_records
            synthetic_digest = hashlib.sha256()
            for chunk in chunked.chunks():  # row order, one chunk at a time (not timed)
                synthetic_digest.update(chunk.codes.tobytes())
    out: dict[str, Any] = {
        "mode": mode,
        "records": data.n_records,
        "times": {k: round(v, 2) for k, v in times.items()},
        "core seconds (prepare..finalize)": round(
            sum(v for k, v in times.items() if k not in ("cluster start", "warm-up", "synthesize")),
            2,
        ),
        "cpu [driver, workers]": cpu.by_stage,
        "core cpu seconds": round(sum(sum(v) for v in cpu.by_stage.values()), 2),
        "load": round(os.getloadavg()[0], 2),
        "driver peak MiB": round(_peak_mib()),
        "digest": _digest(agg),
    }
    if n_synthetic is not None:
        out["synthetic records"] = n_synthetic
        out["synthetic digest"] = synthetic_digest.hexdigest()[:16]
    if client is not None:
        peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        out["worker peak MiB"] = sorted(round(v) for v in peaks.values())
        client.close()
    return out


def main() -> None:
    """Write the parts once, run each mode in its own subprocess, print JSON lines."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reporting-length", type=int, default=3)
    ap.add_argument("--modes", nargs="+", default=["local", "dask"], choices=["local", "dask"])
    ap.add_argument("--data", type=Path, help="existing part-file directory (skip writing)")
    ap.add_argument(
        "--independent",
        action="store_true",
        help="with --write: resample each column on its own (high-cardinality combinations)",
    )
    ap.add_argument("--cold", action="store_true", help="no kernel warm-up before timing")
    ap.add_argument(
        "--synthesize",
        type=int,
        default=0,
        metavar="N",
        help="after the aggregates, synthesize N records from them (timed; Dask: on the workers)",
    )
    ap.add_argument(
        "--worker-memory",
        default="auto",
        help="Dask memory_limit per worker, e.g. 8GiB (spill/pause/terminate before the machine "
        "runs out); default auto = the machine's memory / workers",
    )
    ap.add_argument(
        "--write",
        type=Path,
        metavar="DIR",
        help="only write the --rows/--parts part files into DIR, keep them, and exit",
    )
    ap.add_argument("--run", choices=["local", "dask"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.run:
        result = run(
            args.run,
            args.data,
            args.reporting_length,
            args.workers,
            warm=not args.cold,
            synthesize=args.synthesize,
            worker_memory=args.worker_memory,
        )
        print(json.dumps(result))
        return
    if args.write:
        t0 = time.perf_counter()
        write_parts(args.write, args.rows, args.parts, independent=args.independent)
        size = sum(f.stat().st_size for f in args.write.glob("*.parquet"))
        print(
            f"# wrote {args.rows} rows in {args.parts} parts to {args.write}: "
            f"{time.perf_counter() - t0:.1f} s, {size / 2**20:.0f} MiB"
        )
        return
    with tempfile.TemporaryDirectory(prefix="sds-bench-dask-") as tmp:
        folder = args.data or Path(tmp)
        if args.data is None:
            t0 = time.perf_counter()
            write_parts(folder, args.rows, args.parts)
            print(
                f"# wrote {args.rows} rows in {args.parts} parts: {time.perf_counter() - t0:.1f} s"
            )
        for mode in args.modes:
            cmd = [sys.executable, __file__, "--run", mode, "--data", str(folder)]
            cmd += [
                "--reporting-length",
                str(args.reporting_length),
                "--workers",
                str(args.workers),
                "--synthesize",
                str(args.synthesize),
                "--worker-memory",
                args.worker_memory,
            ]
            t0 = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(done.stderr[-4000:], file=sys.stderr)
                raise SystemExit(done.returncode)
            line = done.stdout.strip().splitlines()[-1]
            result = json.loads(line)
            result["process seconds"] = round(time.perf_counter() - t0, 1)
            print(json.dumps(result))


if __name__ == "__main__":
    main()
