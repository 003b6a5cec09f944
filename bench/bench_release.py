"""Whole-command benchmark: `sds release` itself on raw and binned PUMS, stage by stage.

Runs the real CLI in a subprocess (pre-flight, Prefect flow, GX gates, every artifact) on:

* ``raw-10k``: ``examples/pums_ca_10k.csv`` as it is, no config, no binning (11 columns, income
  and puma with hundreds of distinct values);
* ``raw-100k``, ``raw-200k`` and ``raw-1m``: that file resampled with replacement (fixed seed) to
  100,000, 200,000 and 1,000,000 rows, no config;
* ``binned-1m``: the 1M file with ``examples/release.toml`` (its schema, bins and sensitive
  zeros; ``max_rows`` raised to 2,000,000).

For each it records the wall time, the CPU time and the peak RSS of the release process tree
(the CLI and its GX checker; the Prefect server is a separate, already running process), and each
stage's ``duration_s`` from the manifest. Load average before and after is printed with every
run: the machine is shared, so compare ratios measured in one run.

The overhead table accounts for every second of the wall time outside the stages, measured: the
release runs with ``SDS_TIMING_FILE`` set (:mod:`sds_release.store.run.timing`), so the client, the
warm runner's child and the flow append their marks (client start, pre-flight, hand-off, fork,
Prefect's flow-run start and end, the stages, the artifacts, the exit and its log drain), and the
flow run's task runs are read from the Prefect API (their Running -> Completed times: the rest
of each stage's time is Prefect's task-run bookkeeping). For cases of at most 100,000 rows the
``pac-synth`` rows are pac-synth's ``fit`` and ``sample`` (as many records as rows) on the same
CSV with the release's ε and reporting length, in a subprocess after the first release of the
case (skipped when ``pacsynth`` is not installed).

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

TIMING_ENV = "SDS_TIMING_FILE"  # sds_release.store.run.timing.TIMING_ENV (not imported: --project)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "pums_ca_10k.csv"
CONFIG = ROOT / "examples" / "release.toml"
SEED = 20261123
CASES = {
    "example-10k": (10_000, True),  # `make release`: the example with its config
    "raw-10k": (10_000, False),
    "raw-100k": (100_000, False),
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
    it waited for (the GX checker), and the largest resident set among them (Linux: KiB).
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t_start = time.time()
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "sds_release.flows.cli", *args],
            cwd=env.get("PYTHONPATH") or ROOT,  # -m resolves from the working directory first
            env=env,
            stdout=out,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        t_end = time.time()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())
    cpu = usage.ru_utime + usage.ru_stime
    clock = {"t_start": t_start, "t_end": t_end, "pid": proc.pid}
    return done, {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": usage.ru_maxrss / 1024, **clock}


# -- the overhead: every second of the wall time outside the stages -------------------------------
OURS, PREFECT = "ours", "Prefect"
SEGMENTS = (  # contiguous: (row, whose, from mark, to mark); "start"/"end": the bench's clock
    ("client: Python start, CLI imports", OURS, "start", "client:main"),
    (
        "client: options, config (before i28-cut: and the pre-flight)",
        OURS,
        "client:main",
        "client:launch",
    ),
    ("client: server check, connect, hand-off", OURS, "client:launch", "client:handoff"),
    ("runner: accept, fork, child set-up", OURS, "client:handoff", "child:start"),
    ("child: the pre-flight (handed off)", OURS, "child:start", "checks:done"),
    ("child: parameters, console, until the flow call", OURS, "checks:done", "child:flow-call"),
    (
        "Prefect: flow-run start (create run, Running)",
        PREFECT,
        "child:flow-call",
        "flow:body-start",
    ),
    ("flow body", None, "flow:body-start", "flow:body-end"),  # split below
    ("Prefect: flow-run end (Completed, result)", PREFECT, "flow:body-end", "child:flow-returned"),
    ("child: after the flow (prints, warnings)", OURS, "child:flow-returned", "child:exit"),
    ("child exit: join threads", PREFECT, "child:exit", "child:atexit"),
    ("child exit: atexit (Prefect drains logs, events)", PREFECT, "child:atexit", "child:end"),
    ("runner: reap child, send the status", OURS, "child:end", "client:exit-status"),
    ("client: exit", OURS, "client:exit-status", "end"),
)


def read_marks(path: Path) -> list[dict[str, Any]]:
    """The JSON lines the release's processes appended (sds_release/store/run/timing.py)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def task_runs(home: Path, api_url: str | None, flow_run_id: str) -> list[dict[str, Any]]:
    """The flow run's task runs from the Prefect API (recorded from events, so polled until
    every one has ended); [] when the API cannot be read."""
    import base64
    import urllib.request

    if not api_url:
        try:
            sys.path.insert(0, str(ROOT))
            from sds_release.flows.local.server import status

            info = status(home)
            api_url = info.api_url if info is not None else None
        except Exception:
            return []
    if not api_url:
        return []
    headers = {"Content-Type": "application/json"}
    auth_file = home / "private" / "_prefect" / "api-auth"
    auth = os.environ.get("PREFECT_API_AUTH_STRING") or (
        auth_file.read_text().strip() if auth_file.is_file() else None
    )
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
    body = {"flow_runs": {"id": {"any_": [flow_run_id]}}, "limit": 200}
    runs: list[dict[str, Any]] = []
    for _ in range(40):
        req = urllib.request.Request(
            f"{api_url.rstrip('/')}/task_runs/filter", json.dumps(body).encode(), headers
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                runs = json.loads(r.read())
        except OSError:
            return []
        if runs and all(t.get("end_time") for t in runs):
            return runs
        time.sleep(0.25)
    return runs


def _iso(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def overhead(
    marks: list[dict[str, Any]],
    clock: dict[str, float],
    manifest_stages: dict[str, float],
    runs: list[dict[str, Any]],
) -> dict[str, Any]:
    """Every second of the wall time outside the manifest's stages, by segment, measured.

    The segments are contiguous (client start to client exit), so they sum to the wall time less
    the stages; the flow body is split into the stages, publish beyond its manifest record
    (signing, Prefect artifacts, its task run), the budget artifact and the rest (between the
    stages). Inside the stages, the Prefect task runs' bookkeeping (each stage's time less its
    task run's Running -> Completed) and the progress artifacts are shown apart.
    """
    client = int(clock["pid"])
    at: dict[str, float] = {"start": clock["t_start"], "end": clock["t_end"]}
    spans: dict[str, list[tuple[float, float]]] = {}
    flow_pid = None
    for m in marks:
        if "mark" in m:
            if m["mark"] == "flow:body-start":
                flow_pid = m["pid"]
            if m["mark"] == "exit:end":
                at["child:end" if m["pid"] != client else "client:end"] = m["t"]
            else:
                at.setdefault(m["mark"], m["t"])
        else:
            key = m["span"]
            if key.startswith("exit:"):
                key = f"{'child' if m['pid'] != client else 'client'}:{key}"
            spans.setdefault(key, []).append((m["t0"], m["t1"]))
    if flow_pid is None or flow_pid == client or "child:start" not in at:
        return {"error": "the release did not run in the warm runner's child (no marks)"}
    at.setdefault("checks:done", at["child:start"])  # before i28-cut: in the client's options
    at["child:exit"] = spans["child:exit:threads"][0][0]
    at["child:atexit"] = spans["child:exit:atexit"][0][0]
    rows: dict[str, tuple[str, float]] = {}
    for label, whose, a, b in SEGMENTS:
        seconds = at[b] - at[a]
        if whose is not None:
            rows[label] = (whose, seconds)
            continue
        stage_spans = {k[len("stage:") :]: v[0] for k, v in spans.items() if k.startswith("stage:")}
        in_stages = sum(t1 - t0 for t0, t1 in stage_spans.values())
        pub = stage_spans.get("publish")
        pub_extra = (pub[1] - pub[0]) - manifest_stages.get("publish", 0.0) if pub else 0.0
        arts = sum(t1 - t0 for t0, t1 in spans.get("publish:prefect-artifacts", []))
        budget = sum(t1 - t0 for t0, t1 in spans.get("flow:show-budget", []))
        other = (in_stages - pub_extra) - sum(manifest_stages.values())  # rounding of the manifest
        rows["flow: between the stages (ours)"] = (OURS, seconds - in_stages - budget + other)
        rows["publish: Prefect artifacts (links, tables, summary)"] = (PREFECT, arts)
        rows["publish: signing, its task run, beyond its manifest record"] = (
            OURS,
            pub_extra - arts,
        )
        rows["flow: budget table artifact (after publish)"] = (PREFECT, budget)
    wall = clock["t_end"] - clock["t_start"]
    stages = sum(manifest_stages.values())
    out: dict[str, Any] = {
        "wall_s": wall,
        "stages_s": stages,
        "outside_s": wall - stages,
        "rows": {k: {"whose": w, "s": v} for k, (w, v) in rows.items()},
        "ours_s": sum(v for w, v in rows.values() if w == OURS),
        "prefect_s": sum(v for w, v in rows.values() if w == PREFECT),
    }
    # inside the stages (counted in the stages above): Prefect's share
    ran = sorted(
        (_iso(t["start_time"]), _iso(t["end_time"]))
        for t in runs
        if t.get("start_time") and t.get("end_time")
    )
    out["task_runs"] = len(ran)
    if ran:
        spans_in = sum(t1 - t0 for k, v in spans.items() if k.startswith("stage:") for t0, t1 in v)
        out["inside_task_runs_s"] = spans_in - sum(b - a for a, b in ran)
    out["inside_progress_artifacts_s"] = sum(
        t1 - t0 for t0, t1 in spans.get("progress-artifact", [])
    )
    return out


# -- the timeline of a release that starts the home's server (--server auto|stopped) ------------
def timeline(marks: list[dict[str, Any]], clock: dict[str, float]) -> list[tuple[float, str]]:
    """Every mark and span of one release as (seconds since the client's start, what), in time
    order: the client's (its imports, the server's spawn, the flow's imports, the health wait,
    the flow, the stages, the exit), the supervisor's (the database seeded, uvicorn spawned, its
    first answer, the runner's spawn) and any other process's."""
    client, t0 = int(clock["pid"]), clock["t_start"]

    def who(m: dict[str, Any]) -> str:
        name = str(m.get("mark") or m.get("span") or "")
        if m["pid"] == client or name.startswith("supervisor:"):
            return ""
        return f"[pid {m['pid']}] "

    out = [(0.0, "client: process started (bench clock)")]
    for m in marks:
        if "mark" in m:
            out.append((m["t"] - t0, f"{who(m)}{m['mark']}"))
        else:
            took = m["t1"] - m["t0"]
            out.append((m["t0"] - t0, f"{who(m)}{m['span']} ({took:.2f} s, to {m['t1'] - t0:.2f})"))
    out.append((clock["t_end"] - t0, "client: process ended (bench clock)"))
    return sorted(out, key=lambda e: e[0])


MILESTONES = (  # (row, mark or span name, "t"/"t0"/"t1"): the first such mark of the release
    ("client: imports done (main)", "client:main", "t"),
    ("client: server spawned", "client:server-spawned", "t"),
    ("supervisor: started (imports done)", "supervisor:start", "t"),
    ("supervisor: database seeded", "supervisor:seeded", "t"),
    ("supervisor: uvicorn spawned", "supervisor:server-spawned", "t"),
    ("client: Prefect and the flow imported", "client:flow-imported", "t"),
    ("supervisor: /api answers first", "supervisor:server-answered", "t"),
    ("client: /api answered (health wait over)", "client:server-answered", "t"),
    ("flow body starts", "flow:body-start", "t"),
    ("flow body ends", "flow:body-end", "t"),
    ("flow call returned", "child:flow-returned", "t"),
    ("exit: log/event drain", "exit:drain", "t0"),
    ("exit: handlers (atexit)", "exit:atexit", "t0"),
    ("exit: os._exit", "exit:end", "t"),
    ("supervisor: runner spawned", "supervisor:runner-spawned", "t"),
)


def milestones(marks: list[dict[str, Any]], clock: dict[str, float]) -> dict[str, float]:
    """The :data:`MILESTONES` and each stage's start and end, in seconds since the client's
    start; ``end``: the client's exit as the bench saw it."""
    t0 = clock["t_start"]
    out: dict[str, float] = {}
    for label, name, key in MILESTONES:
        for m in marks:
            if m.get("mark", m.get("span")) == name:
                out[label] = m[key] - t0
                break
    for m in marks:
        if str(m.get("span", "")).startswith("stage:"):
            out.setdefault(f"{m['span']} start", m["t0"] - t0)
            out[f"{m['span']} end"] = m["t1"] - t0
    out["client: process ended"] = clock["t_end"] - t0
    return out


def timeline_table(results: list[dict[str, Any]]) -> str:
    """Markdown: one column per release, one row per milestone (seconds since its start)."""
    runs = [r for r in results if r.get("milestones")]
    if not runs:
        return ""
    labels: list[str] = []
    for r in runs:
        labels += [k for k in r["milestones"] if k not in labels]
    order = {label: i for i, label in enumerate(labels)}
    labels.sort(key=lambda k: (min(r["milestones"].get(k, 1e9) for r in runs), order[k]))
    head = [
        "seconds since the client started",
        *(f"{r['case']} #{i + 1}" for i, r in enumerate(runs)),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label in labels:
        cells = [r["milestones"].get(label) for r in runs]
        lines.append(
            "| " + " | ".join([label, *("–" if c is None else f"{c:.2f}" for c in cells)]) + " |"
        )
    return "\n".join(lines)


PACSYNTH_TIMEOUT_S = 90.0
"""pac-synth's fit + sample are stopped after this long (its sample: reported as > the limit)."""


def pacsynth_times(csv: Path, epsilon: float, length: int) -> dict[str, float] | None:
    """pac-synth's ``fit`` and ``sample`` (as many records as rows) on ``csv`` in a subprocess;
    ``sample_s`` is infinite when it did not end within :data:`PACSYNTH_TIMEOUT_S`; None when
    pac-synth is not installed."""
    try:
        import pacsynth  # noqa: F401
    except ImportError:
        return None
    proc = subprocess.Popen(
        [sys.executable, __file__, "--pacsynth-child", str(csv), str(epsilon), str(length)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=PACSYNTH_TIMEOUT_S)
    except subprocess.TimeoutExpired:  # its sample is far slower than its fit at 100k rows
        proc.kill()
        out, _ = proc.communicate()
    found: dict[str, float] = {}
    for line in out.splitlines():
        found.update(json.loads(line))
    found.setdefault("sample_s", float("inf"))  # not done within the limit
    return found


def _pacsynth_child(csv: str, epsilon: float, reporting_length: int) -> None:
    """In the subprocess: read the CSV as text (as bench_vs_pacsynth does), fit, sample."""
    import pacsynth
    import pandas as pd

    df = pd.read_csv(csv, dtype=str, keep_default_na=False)
    t0 = time.perf_counter()
    params = (
        pacsynth.DpAggregateSeededParametersBuilder()
        .reporting_length(reporting_length)
        .epsilon(epsilon)
        .build()
    )
    syn = pacsynth.DpAggregateSeededSynthesizer(params)
    syn.fit(pacsynth.Dataset.from_data_frame(df))
    print(json.dumps({"fit_s": time.perf_counter() - t0}), flush=True)
    t0 = time.perf_counter()
    syn.sample(len(df))
    print(json.dumps({"sample_s": time.perf_counter() - t0}), flush=True)


def run_case(
    name: str,
    home: Path,
    data_dir: Path,
    env: dict[str, str],
    api_url: str | None = None,
    pacsynth: bool = True,
    started_server: bool = False,
) -> dict[str, Any]:
    """One release; its timings, peak RSS, stage durations and overhead table; with
    ``started_server`` (the release starts the home's server) its timeline too."""
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
    marks_file = Path(tempfile.mkdtemp(prefix="sds-bench-marks-")) / "marks.jsonl"
    done, usage = sds([*args, "--home", str(home), "--quiet"], {**env, TIMING_ENV: str(marks_file)})
    load_after = loadavg()
    if done.returncode:
        raise RuntimeError(f"{name}: exit {done.returncode}: {done.stderr[-3000:]}")
    release_dir = Path(done.stdout.strip().splitlines()[-1])
    manifest = json.loads((release_dir / "manifest.json").read_text())
    sizes = {p.name: p.stat().st_size for p in release_dir.iterdir()}
    with (release_dir / "aggregates.tsv").open("rb") as f:
        combinations = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 24), b"")) - 2
    # every stage's time is in the private timeline (the manifest publishes budget's and plan's)
    timeline = json.loads((home / "private" / release_dir.name / "timeline.json").read_text())
    stages = {s["name"]: s.get("duration_s", s.get("seconds")) for s in timeline["stages"]}
    marks = read_marks(marks_file)
    flow_run = next((m.get("flow_run_id") for m in marks if m.get("mark") == "flow:body-start"), "")
    runs = task_runs(home, api_url, flow_run) if flow_run else []
    parameters = manifest.get("parameters", {})
    if started_server:
        for at, what in timeline(marks, usage):
            print(f"  {at:7.2f}  {what}", file=sys.stderr)
    pac = None
    if pacsynth and rows <= 100_000:
        pac = pacsynth_times(
            data, float(parameters["epsilon"]), int(parameters.get("reporting_length") or 3)
        )
    return {
        "case": name,
        "rows": rows,
        **usage,
        "load_before": load_before,
        "load_after": load_after,
        "stages": stages,
        "overhead": overhead(marks, usage, stages, runs),
        "milestones": milestones(marks, usage) if started_server else None,
        "pacsynth": pac,
        "combinations": combinations,
        "artifact_bytes": sizes,
        "warnings": [ln for ln in done.stderr.splitlines() if "warning" in ln],
    }


def _median(values: list[float]) -> float:
    return float(np.median(values)) if values else float("nan")


def overhead_table(results: list[dict[str, Any]]) -> str:
    """Markdown: one column per case (the median of its runs), one row per overhead segment."""
    by_case: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        if "rows" in r.get("overhead", {}):
            by_case.setdefault(r["case"], []).append(r)
    if not by_case:
        return ""
    cases = list(by_case)
    labels: list[tuple[str, str]] = []
    for runs in by_case.values():
        for run in runs:
            for k, v in run["overhead"]["rows"].items():
                if (k, v["whose"]) not in labels:
                    labels.append((k, v["whose"]))

    def cell(case: str, get: Any, fmt: str = "{:.2f}") -> str:
        values = [get(r) for r in by_case[case]]
        values = [v for v in values if v is not None]
        return fmt.format(_median(values)) if values else "–"

    head = ["seconds (median of runs)", "whose", *cases]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def row(label: str, whose: str, get: Any, fmt: str = "{:.2f}") -> None:
        lines.append("| " + " | ".join([label, whose, *(cell(c, get, fmt) for c in cases)]) + " |")

    row("runs", "", lambda r: len(by_case[r["case"]]), "{:.0f}")
    row("load (1 min) before the run", "", lambda r: float(r["load_before"]), "{:.2f}")
    row("**wall**", "", lambda r: r["overhead"]["wall_s"])
    row("**stages** (manifest, sum)", "", lambda r: r["overhead"]["stages_s"])
    row("**outside the stages**", "", lambda r: r["overhead"]["outside_s"])
    for label, whose in labels:
        row(label, whose, lambda r, k=label: r["overhead"]["rows"].get(k, {}).get("s"))
    row("sum: ours", OURS, lambda r: r["overhead"]["ours_s"])
    row("sum: Prefect's", PREFECT, lambda r: r["overhead"]["prefect_s"])
    row("inside the stages: Prefect task runs", PREFECT,
        lambda r: r["overhead"].get("inside_task_runs_s"))  # fmt: skip
    row("inside the stages: progress artifacts", PREFECT,
        lambda r: r["overhead"].get("inside_progress_artifacts_s"))  # fmt: skip
    row("target 1.5 x stages + 0.5", "", lambda r: 1.5 * r["overhead"]["stages_s"] + 0.5)
    row("pac-synth fit", "", lambda r: (r.get("pacsynth") or {}).get("fit_s"))
    row("pac-synth sample", "", lambda r: (r.get("pacsynth") or {}).get("sample_s"))
    return "\n".join(lines)


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
    if len(sys.argv) == 5 and sys.argv[1] == "--pacsynth-child":
        _pacsynth_child(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
        return 0
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
                    result = run_case(
                        name,
                        home,
                        opts.data_dir,
                        env,
                        opts.api_url,
                        pacsynth=i == 0,
                        started_server=per_release,
                    )
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
    print()
    print(overhead_table(results))
    if any(r.get("milestones") for r in results):
        print()
        print(timeline_table(results))
    if opts.json:
        opts.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
