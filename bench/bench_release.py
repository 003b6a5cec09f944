"""Whole-command benchmark: `sds release` itself on raw and binned PUMS, stage by stage.

Runs the real CLI in a subprocess (pre-flight, Prefect flow, GX gates, every artifact) on:

* ``raw-10k``: ``examples/pums_ca_10k.csv`` as it is, no config, no binning (11 columns, income
  and puma with hundreds of distinct values);
* ``raw-200k`` and ``raw-1m``: that file resampled with replacement (fixed seed) to 200,000 and
  1,000,000 rows, no config;
* ``binned-1m``: the 1M file with ``examples/release.toml`` (its schema, bins and sensitive
  zeros; ``max_rows`` raised to 2,000,000).

For each it records the wall time, the CPU time and the peak RSS of the release process tree
(the CLI and its GX worker; the Prefect server is a separate, already running process), and each
stage's ``duration_s`` from the manifest. Load average before and after is printed with every
run: the machine is shared, so compare ratios measured in one run.

Usage (from the project root)::

    python bench/bench_release.py [--cases raw-10k,raw-200k,raw-1m,binned-1m]
        [--data-dir DIR] [--api-url URL] [--repeat N] [--json OUT]

Without ``--api-url`` the script starts a local server with ``sds server start`` in a temporary
home, runs every release against it, and stops it at the end; the server's own start-up time is
reported separately (``server start``).
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "pums_ca_10k.csv"
CONFIG = ROOT / "examples" / "release.toml"
SEED = 20261123
CASES = {
    "example-10k": (10_000, True),  # `make release`: the example with its config
    "raw-10k": (10_000, False),
    "raw-200k": (200_000, False),
    "raw-1m": (1_000_000, False),
    "binned-1m": (1_000_000, True),
}


def loadavg() -> str:
    """The 1-minute load average (the machine is shared)."""
    return Path("/proc/loadavg").read_text().split()[0]


def resampled(rows: int, data_dir: Path) -> Path:
    """The example resampled with replacement to ``rows`` rows (fixed seed), cached."""
    if rows == 10_000:
        return EXAMPLE
    path = data_dir / f"pums_ca_{rows}.csv"
    if path.is_file():
        return path
    with EXAMPLE.open(newline="") as f:
        lines = f.read().splitlines()
    header, body = lines[0], lines[1:]
    pick = np.random.default_rng(SEED).integers(0, len(body), size=rows)
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(header + "\n" + "\n".join(body[i] for i in pick) + "\n")
    tmp.replace(path)
    return path


def binned_config(data_dir: Path) -> Path:
    """The example config with max_rows 2,000,000 (its δ follows; the schema stays)."""
    path = data_dir / "release-1m.toml"
    text = CONFIG.read_text().replace("max_rows = 100000", "max_rows = 2000000")
    text = text.replace('dataset = "pums-ca-10k"', 'dataset = "pums-ca-1m-binned"')
    text = text.replace("epsilon = 20.0", "epsilon = 1000.0")
    path.write_text(text)
    return path


def sds(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], dict]:
    """Run the CLI; its completed process, wall and CPU time, and peak RSS.

    ``os.wait4`` gives the usage of this one process tree: CPU of the CLI and of the children
    it waited for (the GX worker), and the largest resident set among them (Linux: KiB).
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "flows.cli", *args],
            cwd=env.get("PYTHONPATH") or ROOT,  # -m resolves from the working directory first
            env=env,
            stdout=out,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())
    cpu = usage.ru_utime + usage.ru_stime
    return done, {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": usage.ru_maxrss / 1024}


def run_case(name: str, home: Path, data_dir: Path, env: dict[str, str]) -> dict[str, Any]:
    """One release; its timings, peak RSS and stage durations."""
    rows, binned = CASES[name]
    data = resampled(rows, data_dir)
    if name == "example-10k":
        budget, _ = sds(
            ["budget", "set", "pums-ca-10k", "--epsilon", "1000", "--home", str(home)], env
        )
        args = ["release", str(data), "--config", str(CONFIG)]
    elif binned:
        args = ["release", str(data), "--config", str(binned_config(data_dir))]
    else:
        dataset = f"raw-{rows}"
        budget, _ = sds(["budget", "set", dataset, "--epsilon", "1000", "--home", str(home)], env)
        if budget.returncode:
            raise RuntimeError(budget.stderr)
        args = ["release", str(data), "--dataset", dataset]
    load_before = loadavg()
    done, usage = sds([*args, "--home", str(home), "--quiet"], env)
    if done.returncode:
        raise RuntimeError(f"{name}: exit {done.returncode}: {done.stderr[-3000:]}")
    release_dir = Path(done.stdout.strip().splitlines()[-1])
    manifest = json.loads((release_dir / "manifest.json").read_text())
    sizes = {p.name: p.stat().st_size for p in release_dir.iterdir()}
    with (release_dir / "aggregates.tsv").open("rb") as f:
        combinations = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 24), b"")) - 2
    return {
        "case": name,
        "rows": rows,
        **usage,
        "load_before": load_before,
        "load_after": loadavg(),
        "stages": {s["name"]: s.get("duration_s", s.get("seconds")) for s in manifest["stages"]},
        "combinations": combinations,
        "artifact_bytes": sizes,
        "warnings": [ln for ln in done.stderr.splitlines() if "warning" in ln],
    }


def table(results: list[dict[str, Any]]) -> str:
    """Markdown: one row per case, the stages as columns."""
    stages: list[str] = []
    for r in results:
        stages += [s for s in r["stages"] if s not in stages]
    head = ["case", "combinations", "wall s", "CPU s", "peak RSS MiB", "load", *stages]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        cells = [
            r["case"],
            f"{r['combinations']:,}",
            f"{r['wall_s']:.1f}",
            f"{r['cpu_s']:.1f}",
            f"{r['peak_rss_mib']:.0f}",
            f"{r['load_before']}→{r['load_after']}",
            *(f"{r['stages'].get(s, 0) or 0:.2f}" for s in stages),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    """Parse options, start a server unless given one, run the cases, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "sds-bench")
    ap.add_argument("--api-url", default=os.environ.get("PREFECT_API_URL") or None)
    ap.add_argument(
        "--server",
        choices=("start", "auto", "stopped", "temporary"),
        default="start",
        help="without --api-url: 'start' one with `sds server start` first (default); 'auto': "
        "no server, each release starts the home's (a fresh home per release); 'stopped': as "
        "'auto', but each fresh home's server was started and stopped once before (its "
        "database exists, migrated); 'temporary': Prefect's temporary server per release "
        "(SDS_SERVER=temporary)",
    )
    ap.add_argument("--project", type=Path, default=ROOT, help="checkout whose sds to run")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    opts = ap.parse_args()
    names = [c.strip() for c in opts.cases.split(",") if c.strip()]
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        ap.error(f"unknown cases {unknown}; choose from {sorted(CASES)}")
    for name in names:  # data first, outside the timings
        resampled(CASES[name][0], opts.data_dir)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="sds-bench-home-") as tmp:
        home = Path(tmp) / "home"
        env = {k: v for k, v in os.environ.items() if k not in ("SDS_SERVER", "SDS_HOME")}
        env["PYTHONPATH"] = str(opts.project.resolve())
        server = None
        if opts.api_url:
            env["PREFECT_API_URL"] = opts.api_url
        elif opts.server == "start":
            env.pop("PREFECT_API_URL", None)
            load = loadavg()
            server, usage = sds(["server", "start", "--home", str(home)], env)
            if server.returncode:
                raise RuntimeError(server.stderr)
            print(f"server start: {usage['wall_s']:.1f} s wall (load {load})", file=sys.stderr)
        else:
            env.pop("PREFECT_API_URL", None)
            env["SDS_SERVER"] = "auto" if opts.server == "stopped" else opts.server
        per_release = opts.server in ("auto", "stopped") and not opts.api_url
        try:
            for i in range(opts.repeat):
                for name in names:
                    if per_release:
                        home = Path(tmp) / f"home-{name}-{i}"  # no server yet: it starts one
                    if per_release and opts.server == "stopped":
                        for step in ("start", "stop"):
                            done, _ = sds(["server", step, "--home", str(home)], env)
                            if done.returncode:
                                raise RuntimeError(done.stderr)
                    result = run_case(name, home, opts.data_dir, env)
                    if per_release:
                        sds(["server", "stop", "--home", str(home)], env)
                    print(
                        json.dumps({k: v for k, v in result.items() if k != "artifact_bytes"}),
                        file=sys.stderr,
                    )
                    results.append(result)
        finally:
            if server is not None:
                sds(["server", "stop", "--home", str(home)], env)
    print(table(results))
    if opts.json:
        opts.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
