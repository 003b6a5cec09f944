"""Benchmark: the whole ``sds release`` command on an input, local vs ``--executor dask``.

Runs the CLI as a subprocess and samples, every 0.2 s, the resident set (``VmRSS``) and peak
(``VmHWM``) of the driver (the ``sds release`` process; ``SDS_RUNNER=off`` so the release runs in
it) and the peak of each of its descendant processes (the embedded Dask workers, the GX checker);
prints them with the wall time and the manifest's seconds per stage. The driver's samples are
mapped to the stages by the manifest's start and finish times: ``driver_peak_by_stage_mib`` is
each stage's largest sample (``VmRSS``, or ``VmHWM`` where the peak rose between two samples
inside the stage), with ``(before stages)`` (imports, Prefect, the cluster's start), ``(between
stages)`` and ``(after stages)`` for the rest.

``--cluster cli`` runs the release against a ``dask scheduler`` and ``--workers`` ``dask worker``
processes started here (``--dask-address``, as a real cluster runs): the driver then holds no
scheduler. The default, ``embedded``, is ``--executor dask``'s ``LocalCluster`` (its scheduler
runs in the driver process).
The data is a Parquet dataset from ``bench/bench_dask.py --write DIR`` (or any CSV / Parquet
input); the config names its columns (``examples/release.toml`` with ``max_rows`` raised).

    .venv/bin/python bench/bench_dask.py --rows 10000000 --parts 40 --write /data/r10m
    sed 's/max_rows = 100000$/max_rows = 1000000000/' examples/release.toml > /tmp/big.toml
    .venv/bin/python bench/bench_dask_release.py --data /data/r10m --config /tmp/big.toml \
        --executor dask
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _status_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of ``pid`` in KiB (empty once the process is gone)."""
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmHWM:", "VmRSS:")):
                out[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return out


def _hwm_kib(pid: int) -> int:
    return _status_kib(pid).get("VmHWM", 0)


def peaks_by_stage(
    samples: list[tuple[float, int, int]], stages: list[dict[str, Any]]
) -> dict[str, int]:
    """Each stage's peak driver RSS (KiB) from ``(epoch s, VmRSS, VmHWM)`` samples.

    A sample belongs to the stage whose ``started``..``finished`` (the private timeline) holds
    its time;
    where ``VmHWM`` rose since the previous sample, that new peak belongs to the sample's stage
    too (it was reached in the 0.2 s before). Samples outside every stage go to ``(before
    stages)``, ``(between stages)`` or ``(after stages)``.
    """
    spans = [
        (
            datetime.fromisoformat(s["started"]).timestamp(),
            datetime.fromisoformat(s["finished"]).timestamp(),
            s["name"],
        )
        for s in stages
        if "started" in s and "finished" in s
    ]
    out: dict[str, int] = {}
    last_hwm = 0
    for t, rss, hwm in samples:
        name = next((n for a, b, n in spans if a <= t <= b), None)
        if name is None:
            if not spans or t < spans[0][0]:
                name = "(before stages)"
            elif t > spans[-1][1]:
                name = "(after stages)"
            else:
                name = "(between stages)"
        peak = max(rss, hwm if hwm > last_hwm else 0)
        last_hwm = max(last_hwm, hwm)
        out[name] = max(out.get(name, 0), peak)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_cli_cluster(workers: int, env: dict[str, str]) -> tuple[str, list[subprocess.Popen]]:
    """A ``dask scheduler`` on 127.0.0.1 and ``workers`` ``dask worker`` processes (1 thread
    each), as docs/dask.md starts a cluster; its address and the processes."""
    address = f"tcp://127.0.0.1:{_free_port()}"
    py = [sys.executable, "-m"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "cwd": ROOT, "env": env}
    host, port = address.removeprefix("tcp://").split(":")
    procs = [
        subprocess.Popen(
            [
                *py,
                "distributed.cli.dask_scheduler",
                "--host",
                host,
                "--port",
                port,
                "--dashboard-address",
                ":0",
            ],
            **quiet,
        )
    ]
    time.sleep(3)
    for _ in range(workers):
        procs.append(
            subprocess.Popen(
                [
                    *py,
                    "distributed.cli.dask_worker",
                    address,
                    "--nthreads",
                    "1",
                    "--dashboard-address",
                    ":0",
                ],
                **quiet,
            )
        )
    from distributed import Client

    with Client(address, timeout=30) as client:
        client.wait_for_workers(workers, timeout=60)
    return address, procs


def _children(pid: int) -> list[int]:
    """Every descendant process of ``pid`` (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, parent in parents.items() if parent == p]
        out.extend(kids)
        todo.extend(kids)
    return out


def _name(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(c.decode(errors="replace") for c in cmd if c)
    if "spawn_main" in text or "multiprocessing" in text:
        return "worker"
    return text[:60]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--config", default=None, help="release TOML (default: none, a raw release)")
    ap.add_argument("--dataset", default=None, help="dataset name without --config")
    ap.add_argument("--executor", default="dask", choices=("local", "dask"))
    ap.add_argument("--cluster", default="embedded", choices=("embedded", "cli"))
    ap.add_argument("--workers", type=int, default=2, help="dask worker processes (--cluster cli)")
    ap.add_argument("--home", default=None, help="SDS home (default: a fresh temporary one)")
    ap.add_argument("--release-id", default=None)
    ap.add_argument("--json", type=Path, default=None, help="also write the result here")
    ap.add_argument("extra", nargs="*", help="more `sds release` options (after --)")
    args = ap.parse_args()
    home = Path(args.home or tempfile.mkdtemp(prefix="sds-bench-home-"))
    rid = args.release_id or f"bench-{args.executor}-{int(time.time())}"
    what = ("--config", args.config) if args.config else ("--dataset", args.dataset or "bench-raw")
    cmd = [
        *(sys.executable, "-m", "sds_release.flows.cli", "release", args.data, *what),
        *("--home", str(home), "--release-id", rid, "--seed", "1", "--quiet"),
        *("--executor", args.executor, *args.extra),
    ]
    env = {**os.environ, "SDS_RUNNER": "off"}  # the release runs in this child: the driver
    if not args.config:  # a raw release: its dataset needs a budget first
        budget = [
            *(sys.executable, "-m", "sds_release.flows.cli", "budget", "set", what[1]),
            "--home",
        ]
        subprocess.run([*budget, str(home), "--epsilon", "1000"], cwd=ROOT, env=env, check=True)
    cluster: list[subprocess.Popen] = []
    if args.cluster == "cli":
        address, cluster = start_cli_cluster(args.workers, env)
        cmd += ["--dask-address", address]
    try:
        result = measure(cmd, env)
    finally:
        for p in cluster:
            p.terminate()
            p.wait(timeout=30)
        if not args.home:  # the fresh home's Prefect server, started by the release
            stop = [
                sys.executable,
                "-m",
                "sds_release.flows.cli",
                "server",
                "stop",
                "--home",
                str(home),
            ]
            subprocess.run(stop, cwd=ROOT, env=env, capture_output=True, check=False)
    result = {"executor": args.executor, "cluster": args.cluster, "data": args.data, **result}
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


def measure(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``cmd`` (an ``sds release``), sampling its memory; wall, loads, peaks, stages."""
    load = Path("/proc/loadavg").read_text().split()[:3]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    samples: list[tuple[float, int, int]] = []
    others: dict[tuple[int, str], int] = {}
    while proc.poll() is None:
        now = _status_kib(proc.pid)
        if now:
            samples.append((time.time(), now.get("VmRSS", 0), now.get("VmHWM", 0)))
        for child in _children(proc.pid):
            hwm = _hwm_kib(child)
            if hwm:
                key = (child, _name(child))
                others[key] = max(others.get(key, 0), hwm)
        time.sleep(0.2)
    wall = time.perf_counter() - start
    out, err = proc.communicate()
    if proc.returncode:
        sys.exit(f"release failed ({proc.returncode}):\n{err.decode()[-3000:]}")
    rel = Path(out.decode().strip().splitlines()[-1])
    # every stage's times are in the private timeline (the manifest publishes none of them)
    timeline = json.loads((rel.parents[2] / "private" / rel.name / "timeline.json").read_text())
    stages = {
        s["name"]: round(float(s["duration_s"]), 2)
        for s in timeline.get("stages", [])
        if "duration_s" in s
    }
    by_stage = peaks_by_stage(samples, timeline.get("stages", []))
    with (rel / "aggregates.tsv").open("rb") as f:
        combinations = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 24), b"")) - 2
    return {
        "wall_s": round(wall, 1),
        "load_before": load,
        "load_after": Path("/proc/loadavg").read_text().split()[:3],
        "driver_peak_mib": round(max((s[2] for s in samples), default=0) / 1024),
        "driver_peak_by_stage_mib": {k: round(v / 1024) for k, v in by_stage.items()},
        "children_peak_mib": {
            f"{name} [{pid}]": round(kib / 1024) for (pid, name), kib in others.items()
        },
        "published_combinations": combinations,
        "stages_s": stages,
        "release": str(rel),
    }


if __name__ == "__main__":
    main()
