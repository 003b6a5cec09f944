"""Benchmark: the whole ``sds release`` command on an input, local vs ``--executor dask``.

Runs the CLI as a subprocess and samples, every 0.2 s, the peak RSS (``VmHWM``) of the driver
(the ``sds release`` process; ``SDS_WORKER=off`` so the release runs in it) and of each of its
descendant processes (the embedded Dask workers, the GX worker); prints them with the wall
time and the manifest's seconds per stage.
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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _hwm_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


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
    ap.add_argument("--config", required=True)
    ap.add_argument("--executor", default="dask", choices=("local", "dask"))
    ap.add_argument("--home", default=None, help="SDS home (default: a fresh temporary one)")
    ap.add_argument("--release-id", default=None)
    ap.add_argument("extra", nargs="*", help="more `sds release` options (after --)")
    args = ap.parse_args()
    home = Path(args.home or tempfile.mkdtemp(prefix="sds-bench-home-"))
    rid = args.release_id or f"bench-{args.executor}-{int(time.time())}"
    cmd = [
        *(sys.executable, "-m", "flows.cli", "release", args.data, "--config", args.config),
        *("--home", str(home), "--release-id", rid, "--seed", "1", "--quiet"),
        *("--executor", args.executor, *args.extra),
    ]
    load = Path("/proc/loadavg").read_text().split()[:3]
    start = time.perf_counter()
    env = {**os.environ, "SDS_WORKER": "off"}  # the release runs in this child: the driver
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    driver, others = 0, {}
    while proc.poll() is None:
        driver = max(driver, _hwm_kib(proc.pid))
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
    manifest = json.loads((rel / "manifest.json").read_text())
    stages = {
        s["name"]: round(float(s["duration_s"]), 2)
        for s in manifest.get("stages", [])
        if "duration_s" in s
    }
    print(
        json.dumps(
            {
                "executor": args.executor,
                "data": args.data,
                "wall_s": round(wall, 1),
                "load_before": load,
                "load_after": Path("/proc/loadavg").read_text().split()[:3],
                "driver_peak_mib": round(driver / 1024),
                "children_peak_mib": {
                    f"{name} [{pid}]": round(kib / 1024) for (pid, name), kib in others.items()
                },
                "stages_s": stages,
                "release": str(rel),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
