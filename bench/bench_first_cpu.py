"""The first release into a new home, process by process: each process's CPU seconds.

Runs ``sds release`` of the bundled example (with its config) into a fresh home, no server
running, and samples ``/proc`` every 50 ms for the processes of the release: the CLI, its GX
checker, the server's supervisor and the Prefect server (uvicorn). Prints the wall time, each
process's CPU (user + system) and a timeline of CPU per 0.5 s, then stops the home's server.
A first release is CPU-bound on 2 cores (the server's start, the CLI's imports and the GX
import run at once), so the CPU of each process is the number to compare across changes; the
wall time moves with the machine's load.

    .venv/bin/python bench/bench_first_cpu.py [--project CHECKOUT] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from process_cpu import Proc, read_processes

ROOT = Path(__file__).resolve().parents[1]


def _ours(pid: int, ps: dict[int, Proc], root: int, home: str) -> bool:
    for _ in range(20):
        if pid not in ps:
            return False
        if pid == root or home in ps[pid].cmd:
            return True
        pid = ps[pid].ppid
    return False


def _role(cmd: str, pid: int, root: int) -> str:
    if pid == root:
        return "CLI (sds release)"
    if "sds_release.flows.local.supervisor" in cmd:
        return "supervisor"
    if "uvicorn" in cmd:
        return "Prefect server (uvicorn)"
    if "resource_tracker" in cmd:
        return "multiprocessing resource tracker"
    if "sds release" in cmd or "spawn_main" in cmd:
        return "GX checker"
    return cmd[:60]


def one(project: Path) -> None:
    home = Path(tempfile.mkdtemp(prefix="sds-first-cpu-"))
    sds = str(project / ".venv" / "bin" / "sds")
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    try:
        subprocess.run(
            [sds, "budget", "set", "pums-ca-10k", "--epsilon", "1000", "--home", str(home)],
            env=env,
            check=True,
            capture_output=True,
        )
        load = Path("/proc/loadavg").read_text().split()[0]
        start = time.monotonic()
        release = subprocess.Popen(
            [
                sds,
                "release",
                str(project / "examples" / "pums_ca_10k.csv"),
                "--config",
                str(project / "examples" / "release.toml"),
                "--home",
                str(home),
            ],
            env=env,
            cwd=project,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        samples: list[tuple[float, dict[int, Proc]]] = []
        while release.poll() is None:
            ps = read_processes()
            mine = {p: v for p, v in ps.items() if _ours(p, ps, release.pid, str(home))}
            samples.append((time.monotonic() - start, mine))
            time.sleep(0.05)
        wall = time.monotonic() - start
    finally:
        subprocess.run(
            [sds, "server", "stop", "--home", str(home)], env=env, capture_output=True, check=False
        )
        shutil.rmtree(home, ignore_errors=True)
    last: dict[int, tuple[float, Proc]] = {}
    for t, found in samples:
        for pid, value in found.items():
            last[pid] = (t, value)
    print(f"wall {wall:.2f} s, exit {release.returncode}, load before {load}")
    buckets = int(wall / 0.5) + 1
    for pid, (_, proc) in sorted(last.items()):
        role = _role(proc.cmd, pid, release.pid)
        cells, before = [], 0.0
        for b in range(buckets):
            seen = [f[pid].cpu for t, f in samples if pid in f and b * 0.5 <= t < (b + 1) * 0.5]
            if seen:
                cells.append(f"{max(seen) - before:4.2f}")
                before = max(seen)
            else:
                cells.append("   .")
        print(f"  {role:34s} CPU {proc.cpu:5.2f} s | per 0.5 s: {' '.join(cells)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--project", type=Path, default=ROOT, help="checkout whose sds to run")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    for _ in range(args.repeat):
        one(args.project.resolve())


if __name__ == "__main__":
    main()
