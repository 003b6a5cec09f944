"""The publish stage's memory on a finished release: its files written again, peak RSS per part.

Reads a finished release's DP aggregates (``normalize.pkl``) and synthetic records
(``synthesize.pkl``: a local table, as a raw release planned with ``synthesis = "model"``
holds on the driver) from its private checkpoints, and writes its published files again into a
scratch home (a copy of the release's ledger and private parameters, so nothing in HOME
changes): ``write_artifacts`` (aggregates, synthetic files, validation), then
``write_report_and_explorer`` (``evaluation.json``, ``report.html``, ``explorer.html``) with
the published manifest as it stood before them. Prints, per part, this process's resident set
at the start and its peak during the part (``VmHWM``, reset before each part through
``/proc/self/clear_refs``), and the seconds. ``--check`` compares every file written with the
published one byte for byte (``manifest.json`` and its signature are not written here).
``--scatter-records``: the records on the workers of an embedded cluster first, as a Dask
release holds them after its synthesize stage (``DaskExecutor.hold``).

Run it under ``memray run`` to see what the peak holds::

    PYTHONPATH=. .venv/bin/python bench/bench_publish_memory.py HOME RELEASE_ID \
        --scratch DIR --check
    PYTHONPATH=. .venv/bin/memray run -o OUT.bin bench/bench_publish_memory.py HOME RELEASE_ID \
        --scratch DIR --report-only && .venv/bin/memray tree OUT.bin
"""

from __future__ import annotations

import argparse
import contextlib
import filecmp
import gc
import json
import pickle
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from sds_release.store.publish.artifacts import write_artifacts, write_report_and_explorer
from sds_release.store.run.release_run import ReleaseRun
from sds_release.store.run.resume import resume_params

MIB = 2**20
PLANNED = ("reporting_length", "sigma_proportions", "synthesis", "reconcile_one_way")


def _status(field: str) -> int:
    """A ``/proc/self/status`` field in bytes (``VmRSS``, ``VmHWM``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    """Reset ``VmHWM`` to the current resident set (Linux >= 4.0)."""
    Path("/proc/self/clear_refs").write_text("5")


def _load(path: Path) -> Any:
    with path.open("rb") as f:
        obj = pickle.load(f)
    return getattr(obj, "value", obj)


def _part(name: str, fn: Any) -> dict[str, Any]:
    gc.collect()
    _reset_peak()
    start, t0 = _status("VmRSS"), time.perf_counter()
    fn()
    row = {
        "part": name,
        "rss_start_mib": round(start / MIB),
        "peak_mib": round(_status("VmHWM") / MIB),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    row["increment_mib"] = row["peak_mib"] - row["rss_start_mib"]
    print(json.dumps(row), flush=True)
    return row


def main() -> int:
    """Write the release's files again and print the peaks."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("home", type=Path, help="the home of a finished release (read only)")
    ap.add_argument("release_id")
    ap.add_argument("--scratch", type=Path, required=True, help="a new directory (the copy)")
    ap.add_argument("--report-only", action="store_true", help="skip write_artifacts")
    ap.add_argument("--artifacts-only", action="store_true", help="skip the report and explorer")
    ap.add_argument("--check", action="store_true", help="cmp the files with the published")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument(
        "--scatter-records",
        action="store_true",
        help="the synthetic records on the workers of an embedded LocalCluster (2 x 1 thread), "
        "as a Dask release holds them after its synthesize stage (DaskExecutor.hold)",
    )
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        return _run(args, stack)


def _run(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    """:func:`main` with the cluster (if any) closed by ``stack``."""

    src_private = args.home / "private" / args.release_id
    if args.scratch.exists():
        shutil.rmtree(args.scratch)
    (args.scratch / "private").mkdir(parents=True)
    shutil.copy2(args.home / "ledger.sqlite", args.scratch / "ledger.sqlite")
    shutil.copytree(src_private, args.scratch / "private" / args.release_id)
    params = resume_params(args.home, args.release_id)
    published = args.home / "releases" / str(params.dataset) / args.release_id
    manifest = json.loads((published / "manifest.json").read_text())
    # the parameters the SDS plan chose (R, split, synthesis), as the publish stage had them
    planned = {k: manifest["parameters"][k] for k in PLANNED if k in manifest["parameters"]}
    params = params.model_copy(update=planned | {"home": str(args.scratch)})
    run = ReleaseRun(params, args.release_id, str(args.scratch))
    validation = json.loads((published / "validation.json").read_text())
    run.dirs.release_dir.mkdir(parents=True)

    aggregates = _load(src_private / "checkpoints" / "normalize.pkl")
    synthetic = _load(src_private / "checkpoints" / "synthesize.pkl")
    # a Dask release's records: one file a chunk (StoredSynthetic), loaded to the workers with
    # --scatter-records (as the release holds them), else here whole
    from sds_release.store.cluster.executor import DaskExecutor
    from sds_release.store.cluster.synthesis import StoredSynthetic
    from sds_release.store.executor.local import LocalExecutor

    stored = synthetic if isinstance(synthetic, StoredSynthetic) else None
    if stored is not None and not args.scatter_records:
        synthetic = stored.table(src_private / "checkpoints")
    if args.scatter_records:
        import distributed

        cluster = stack.enter_context(
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
            )
        )
        client = stack.enter_context(distributed.Client(cluster))
        executor: Any = DaskExecutor(client)
        synthetic = (
            stored.load(client, src_private / "checkpoints")
            if stored is not None
            else executor.hold(synthetic, params.synthetic_part_records)
        )
    else:
        executor = LocalExecutor()
    rows = [{"part": "loaded", "rss_mib": round(_status("VmRSS") / MIB)}]
    print(json.dumps(rows[0]), flush=True)
    if not args.report_only:
        rows.append(
            _part(
                "write_artifacts",
                lambda: write_artifacts(
                    run,
                    aggregates,
                    synthetic,
                    executor.chunks(synthetic, params.synthetic_part_records),
                    validation,
                    manifest["privacy"]["noise"],
                ),
            )
        )
    # the manifest as write_release hands it to the report: without the report's own files
    # and without the publish stage's entry (added after)
    for name in ("evaluation.json", "report.html", "explorer.html"):
        manifest["artifacts"].pop(name, None)
    manifest["stages"] = [s for s in manifest["stages"] if s["name"] != "publish"]
    manifest["status"] = "running"
    rows += (
        []
        if args.artifacts_only
        else [
            _part(
                "write_report_and_explorer",
                lambda: write_report_and_explorer(run, manifest, aggregates, synthetic),
            )
        ]
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    if not args.check:
        return 0
    differ = []
    for path in sorted(run.dirs.release_dir.iterdir()):
        if path.is_dir():  # a Parquet dataset of parts: each part, and the same part names
            there = published / path.name
            names = sorted(p.name for p in path.iterdir())
            same = there.is_dir() and names == sorted(p.name for p in there.iterdir())
            same = same and all(filecmp.cmp(path / n, there / n, shallow=False) for n in names)
        else:
            same = filecmp.cmp(path, published / path.name, shallow=False)
        print(f"{'same' if same else 'DIFFERS'} {path.name}")
        differ += [] if same else [path.name]
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
