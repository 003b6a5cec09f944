"""The CPU of every process a command starts, by kind and by test: where a test run's time goes.

``/usr/bin/time`` counts only the children a process waited for, so it misses the servers that
detach (a home's supervisor, its Prefect server, its warm runner). This reads ``/proc`` every
0.3 s while the command runs and keeps, for each process started after it, its last CPU time
(user + system), its command line and the test that started it (``PYTEST_CURRENT_TEST`` in its
environment, which pytest sets while a test runs and the processes it starts inherit). A
process that lives less than 0.3 s may be missed; reading another user's processes needs root.

    python bench/process_cpu.py -- .venv/bin/python -m pytest -q -n 2 --dist loadfile tests/e2e

prints the wall time, the CPU of all processes, then the CPU by kind of process and by test
file (the ``--top`` largest of each). Linux only.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

TICK = os.sysconf("SC_CLK_TCK")
# (pattern in the command line, kind), the first that matches names the kind
KINDS = (
    (r"-m pytest\b|import sys;exec\(eval", "pytest (and its xdist processes)"),
    (r" -m uvicorn ", "Prefect server (uvicorn)"),
    (r"prefect server start", "prefect server start"),
    (r"prefect\.engine", "flow run of a worker (prefect.engine)"),
    (r"prefect worker start", "Prefect worker"),
    (r"local\.runner", "warm runner"),
    (r"local\.supervisor", "server supervisor"),
    (r"local\.template", "database template"),
    (r"dask.? (worker|scheduler)", "Dask worker or scheduler"),
    (r"multiprocessing", "multiprocessing child (GX checker, Dask)"),
    (r"chrom", "Chromium"),
    (r"postgres", "PostgreSQL"),
    (r"\bweed\b", "S3 server (weed)"),
    (r"\bpip\b", "pip"),
    (r"sds_release\.flows\.cli|/sds |sds_release/__main__", "sds command"),
)


@dataclass
class Seen:
    """One process: its command line, the test that started it and its last CPU seconds."""

    cmd: str
    test: str
    cpu: float = 0.0


def _boot_ticks() -> int:
    """Clock ticks since boot now (the unit of a process's start time in /proc/PID/stat)."""
    with open("/proc/uptime") as f:
        return int(float(f.read().split()[0]) * TICK)


def _test_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for entry in f.read().split(b"\0"):
                if entry.startswith(b"PYTEST_CURRENT_TEST="):
                    return entry.split(b"=", 1)[1].decode(errors="replace")
    except OSError:
        pass
    return ""


class Proc(NamedTuple):
    """One process as ``/proc`` shows it now."""

    ppid: int
    cpu: float  # user + system seconds so far
    cmd: str
    started: int  # clock ticks after boot


def read_processes() -> dict[int, Proc]:
    """Every process readable now (bench_first_cpu.py samples the same)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone between the listing and the read
        cpu = (int(fields[11]) + int(fields[12])) / TICK
        out[int(name)] = Proc(int(fields[1]), cpu, cmd, int(fields[19]))
    return out


def _poll(seen: dict[tuple[int, int], Seen], since: int, me: int) -> None:
    for pid, proc in read_processes().items():
        if proc.started < since or pid == me:
            continue
        key = (pid, proc.started)
        if key not in seen:
            seen[key] = Seen(proc.cmd, _test_of(pid))
        seen[key].cpu = proc.cpu


def kind(cmd: str) -> str:
    """The kind of a process, from its command line."""
    for pattern, name in KINDS:
        if re.search(pattern, cmd):
            return name
    return cmd.split(" ", 1)[0].rsplit("/", 1)[-1] or "?"


def _table(title: str, rows: dict[str, list[float]], top: int) -> None:
    print(f"\n{title}\n| CPU-s | processes | |\n|---:|---:|---|")
    for name, (cpu, n) in sorted(rows.items(), key=lambda r: -r[1][0])[:top]:
        print(f"| {cpu:.1f} | {int(n)} | {name} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--top", type=int, default=25, help="rows of each table (default 25)")
    parser.add_argument("--every", type=float, default=0.3, help="seconds between reads")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    since, t0 = _boot_ticks(), time.monotonic()
    seen: dict[tuple[int, int], Seen] = {}
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        _poll(seen, since, os.getpid())
        time.sleep(args.every)
    _poll(seen, since, os.getpid())
    wall = time.monotonic() - t0
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    by_test: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for p in seen.values():
        for rows, name in ((by_kind, kind(p.cmd)), (by_test, p.test.split("::")[0] or "-")):
            rows[name][0] += p.cpu
            rows[name][1] += 1
    total = sum(p.cpu for p in seen.values())
    print(f"\nexit {proc.returncode}; {wall:.0f} s of wall, {total:.0f} CPU-s in", end=" ")
    print(f"{len(seen)} processes")
    _table("By kind of process", by_kind, args.top)
    _table("By the test file that started it (- for none)", by_test, args.top)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
