"""Benchmark: the evaluate stage of a finished Dask release, alone, for the driver's memory.

Reads a finished release's checkpoints (``normalize``: the DP aggregates; ``synthesize``: the
synthetic records, a ``PreparedTable`` on the driver when the plan chose the model) from its
private workspace, prepares the release's Parquet input on an embedded ``LocalCluster`` (2
workers x 1 thread, as ``--executor dask``) and runs what the ``evaluate`` task runs on that
path (``sds_release/tasks/evaluation.py``: ``evaluate_release`` of the backend, the sensitive side
counted on the workers one length at a time). Prints the evaluation's wall time, the driver's
resident set before and at its peak (``VmHWM`` reset through ``/proc/self/clear_refs`` where
allowed, else sampled) and, with ``--check``, whether the result equals the release's own
``evaluate`` checkpoint (compared as canonical JSON, as ``custodian-evaluation.json`` is
written). Run it under ``memray run`` for the allocations behind the peak.
``--scatter-records``: the synthetic records on the workers, as the release holds them after
its synthesize stage (``DaskExecutor.hold``).

    PYTHONPATH=. .venv/bin/python bench/bench_evaluate_memory.py \
        --private HOME/private/RELEASE_ID --data /tmp/i28s/r2m --check
"""

from __future__ import annotations

import argparse
import json
import pickle
import threading
import time
from pathlib import Path
from typing import Any


def _status_kib() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = int(line.split()[1])
    return out


class _Sampler:
    """The largest ``VmRSS`` of this process, sampled every 20 ms while it runs."""

    def __init__(self) -> None:
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kib = max(self.peak_kib, _status_kib()["VmRSS"])
            time.sleep(0.02)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_kib = max(self.peak_kib, _status_kib()["VmRSS"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--private", type=Path, required=True, help="the release's private workspace")
    ap.add_argument("--data", required=True, help="the release's Parquet input")
    ap.add_argument("--check", action="store_true", help="compare with the evaluate checkpoint")
    ap.add_argument("--json", type=Path, default=None, help="also write the evaluation here")
    ap.add_argument(
        "--scatter-records",
        action="store_true",
        help="send the synthetic records to the workers first, as the release does after its "
        "synthesize stage (DaskExecutor.hold, in the release's synthetic_part_records chunks); "
        "without it they stay here (the evaluation's local-records path)",
    )
    args = ap.parse_args()

    import distributed

    from sds_core.data.params import PrepareParams
    from sds_core.evaluation.params import EvaluationParams
    from sds_core.evaluation.release import evaluate_release
    from sds_release.store.cluster.executor import DaskExecutor
    from sds_release.store.cluster.inputs import open_input

    stored = json.loads((args.private / "params.json").read_text())
    checkpoints = args.private / "checkpoints"
    with (checkpoints / "normalize.pkl").open("rb") as f:
        aggregates = pickle.load(f)
    with (checkpoints / "synthesize.pkl").open("rb") as f:
        synthetic = pickle.load(f)
    params = EvaluationParams(
        reporting_length=aggregates.reporting_length, resolution=int(stored["resolution"])
    )
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        executor = DaskExecutor(client)
        original = executor.prepare(
            open_input(client, args.data, delimiter=",")[0], PrepareParams()
        )
        if original.domain != aggregates.domain:
            raise SystemExit("the prepared input's domain is not the release's (a config?)")
        if args.scatter_records:
            part_records = stored.get("synthetic_part_records")
            synthetic = executor.hold(synthetic, part_records)
        before = _status_kib()["VmRSS"]
        start = time.perf_counter()
        with _Sampler() as sampler:
            result = evaluate_release(original, synthetic, aggregates, params)
        seconds = time.perf_counter() - start
    text = json.dumps(result, sort_keys=True)
    out: dict[str, Any] = {
        "evaluate_s": round(seconds, 1),
        "driver_before_mib": round(before / 1024),
        "driver_peak_mib": round(sampler.peak_kib / 1024),
        "driver_added_mib": round((sampler.peak_kib - before) / 1024),
        "synthetic_records": synthetic.n_records,
        "synthetic_records_on": "workers" if args.scatter_records else "driver",
        "dp_combinations": sum(
            len(aggregates.counts_of(k)) for k in range(1, aggregates.reporting_length + 1)
        ),
    }
    if args.check:
        with (checkpoints / "evaluate.pkl").open("rb") as f:
            reference = pickle.load(f)
        out["equal_to_checkpoint"] = json.dumps(reference, sort_keys=True) == text
    if args.json:
        args.json.write_text(text + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
