"""Prefect's share of a release, reproduced without us: a flow of no-op tasks, artifacts and logs.

The smallest reproduction of what ``bench/bench_release.py`` attributes to Prefect: one flow
run with as many task runs, artifacts and log lines as a release makes (13-16 tasks, 5-7
artifacts, ~20 INFO lines), nothing else, in a process that has already imported Prefect (as the
warm runner's child has). Prints the flow-run start (call -> first line of the body), the
task runs (per task, call -> return of a task that does nothing), the artifacts, the flow-run
end (last line -> return) and the exit's drain (atexit), each the median of ``--runs``.

    sds server start --home H      # then, with that home's client environment:
    PREFECT_API_URL=... PREFECT_API_AUTH_STRING=... python bench/prefect_floor.py --runs 5

``--no-heartbeats`` runs the flows with ``flows.heartbeat_frequency`` = None, as ``sds release``
does: Prefect 3.9.1's heartbeat thread (on by default, every 180 s) sleeps in whole seconds and
is joined when the flow returns, so the flow-run end takes 0-1 s without it (``--body-s`` sets
how long the body takes: the wait is 1 s less the body's fraction of a second).
"""

from __future__ import annotations

import argparse
import atexit
import json
import statistics
import time
from contextlib import nullcontext

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

MARKS: dict[str, list[float]] = {}


def _note(name: str, seconds: float) -> None:
    MARKS.setdefault(name, []).append(seconds)


@task(persist_result=False)
def noop(i: int) -> int:
    """A task that does nothing."""
    return i


@flow(persist_result=False)
def floor(tasks: int, artifacts: int, logs: int, body_s: float) -> float:
    """The release's Prefect traffic without its work; returns the body's end time."""
    body = time.perf_counter()
    _note("flow-run start (call -> body)", body - START[0])
    log = get_run_logger()
    t0 = time.perf_counter()
    for i in range(tasks):
        noop(i)
    _note("task runs, per task", (time.perf_counter() - t0) / tasks)
    t0 = time.perf_counter()
    for i in range(artifacts):
        if i % 2:
            create_table_artifact(key=f"floor-table-{i}", table=[{"a": "1", "b": "2"}])
        else:
            create_markdown_artifact(key=f"floor-md-{i}", markdown="# floor\n\ntext")
    _note("artifacts, per artifact", (time.perf_counter() - t0) / max(artifacts, 1))
    t0 = time.perf_counter()
    for i in range(logs):
        log.info("line %d", i)
    _note("log lines (queued), all", time.perf_counter() - t0)
    time.sleep(max(0.0, body_s - (time.perf_counter() - body)))
    return time.perf_counter()


START = [0.0]


def main() -> None:
    """Run the flow ``--runs`` times, print the medians as JSON; time the exit's drain."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tasks", type=int, default=15)
    ap.add_argument("--artifacts", type=int, default=7)
    ap.add_argument("--logs", type=int, default=20)
    ap.add_argument("--body-s", type=float, default=0.0, help="make the body last this long")
    ap.add_argument("--no-heartbeats", action="store_true", help="flows.heartbeat_frequency=None")
    opts = ap.parse_args()
    from prefect.settings import temporary_settings

    for _ in range(opts.runs + 1):  # the first run warms the client (not counted)
        with (
            temporary_settings(updates={"flows.heartbeat_frequency": None})
            if opts.no_heartbeats
            else nullcontext()
        ):
            START[0] = time.perf_counter()
            end = floor(opts.tasks, opts.artifacts, opts.logs, opts.body_s)
            _note("flow-run end (body -> return)", time.perf_counter() - end)
    result = {k: round(statistics.median(v[1:]), 4) for k, v in MARKS.items()}
    t0 = time.perf_counter()
    atexit._run_exitfuncs()  # Prefect drains its log and event queues here
    result["exit: atexit drain"] = round(time.perf_counter() - t0, 4)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
