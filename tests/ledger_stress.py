"""Ledger stress and crash harness: many releases from many processes, SIGKILLs at fault points.

A *stub release* goes through the real release machinery except the data science: the real
``sds_release.store.run.release_run.reserve`` (ledger reservation of the real SDS plan, workspace,
release key, running manifest), then reads its (tiny) input, then runs the plan's charged stages
through the
real ``ReleaseRun.stage`` (charge -> draw noise from the release key -> checkpoint), then
publishes like ``write_release`` (artifact, ``Ledger.complete``, complete manifest anchored to
the ledger head). Fault points SIGKILL the process inside or between those steps.

Used by tests/e2e/test_ledger_stress.py; ``python tests/ledger_stress.py`` prints the
numbers docs/ledger.md reports (both backends; starts its own PostgreSQL).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import signal
import sys
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

DATASET = "stress"
EPSILON = 1.0  # per release
FITS = 10  # releases the lifetime budget fits
FAULT_POINTS = (
    "reserve-uncommitted",  # inside the reserve transaction, after the INSERT, before COMMIT
    "reserve-committed",  # reserve committed, workspace/params/key not yet written
    "charge-uncommitted",  # inside a stage's charge transaction, before COMMIT
    "checkpoint",  # charged and noise drawn, checkpoint not written (ReleaseRun.stage hook)
    "close-uncommitted",  # inside Ledger.complete's transaction, before COMMIT
    "before-manifest",  # ledger completed, manifest not yet complete
)
STAGES = ("count", "aggregate-1", "aggregate-2")


@dataclass(frozen=True)
class Job:
    """One release to run: its id, seed and (optionally) where to die first."""

    release_id: str
    seed: int
    fault: str | None = None
    fault_stage: str | None = None
    abandon: bool = False  # after the crash: leave it to be cancelled instead of resuming


@dataclass
class Outcome:
    """What happened to one job (sent back from the worker)."""

    release_id: str
    result: str  # complete | refused | abandoned
    read_input: bool = False
    crashed: bool = False  # the armed run died by SIGKILL at its fault point
    armed_exit: int | None = None  # exit status of the armed run when it did not crash
    events: list[str] = field(default_factory=list)


def _params(home: Path, ledger_url: str, job: Job, data: Path) -> Any:
    from sds_release.store.config.release_params import ReleaseParams

    return ReleaseParams(
        input=str(data),
        dataset=DATASET,
        release_id=job.release_id,
        home=str(home),
        ledger=ledger_url,
        epsilon=EPSILON,
        reporting_length=2,
        seed=job.seed,
    )


def stub_noise(randomness: Any, stage: str) -> list[int]:
    """What a stage of a stub release draws: 4 words from the release key, labelled by stage."""
    return [int(w) for w in randomness.words(f"stress-{stage}", 4, stage=stage)]


def expected_artifact(seed: int) -> dict[str, list[int]]:
    """The artifact an uninterrupted stub release with ``seed`` publishes."""
    from sds_core.dp.randomness import ReleaseRandomness

    rnd = ReleaseRandomness.from_seed(seed)
    return {stage: stub_noise(rnd, stage) for stage in STAGES}


def run_release(home: Path, ledger_url: str, job: Job, data: Path, log: list[str]) -> str:
    """Run (or resume) one stub release; returns complete | refused."""
    from sds_release.store.ledger.values import BudgetExceededError
    from sds_release.store.run.release_run import reserve
    from sds_release.store.run.workdir import atomic_write_json, now

    params = _params(home, ledger_url, job, data)
    try:
        run = reserve(params)
    except BudgetExceededError:
        log.append("refused")
        return "refused"
    log.append("reserved")
    data.read_bytes()  # "reading the data": only ever after a successful reservation
    log.append("read")
    drawn = {s: run.stage(s, lambda s=s: stub_noise(run.randomness(), s)) for s in STAGES}
    dirs = run.dirs
    artifact = dirs.release_dir / "noise.json"
    atomic_write_json(artifact, drawn)
    ledger = run.ledger()
    ledger.complete(run.release_id)
    if job.fault == "before-manifest" and os.environ.get("SDS_STRESS_ARMED") == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    from sds_release.store.workspace.files import sha256_file

    manifest = dirs.manifest() or {}
    manifest.update(
        status="complete",
        finished_at=now(),
        artifacts={"noise.json": sha256_file(artifact)},
        privacy={"epsilon": run.epsilon, "delta": run.delta},
    )
    dirs.write_manifest(manifest)
    log.append("complete")
    return "complete"


def _arm(job: Job) -> None:
    """In a doomed child: make the job's fault point SIGKILL this process."""
    import sds_release.store.ledger.reservations as reservations
    from sds_release.store.ledger.book import Ledger

    os.environ["SDS_STRESS_ARMED"] = "1"
    die = lambda: os.kill(os.getpid(), signal.SIGKILL)  # noqa: E731
    if job.fault == "checkpoint":
        os.environ["SDS_TEST_KILL_AT"] = str(job.fault_stage)
    kinds = {"reserve-uncommitted": "reserve", "charge-uncommitted": "charge"}
    kinds["close-uncommitted"] = "close"
    if job.fault in kinds:
        real_append = reservations.append_row

        def append_then_die(conn: Any, where: str, values: dict[str, Any]) -> Any:
            row = real_append(conn, where, values)
            stage_ok = job.fault != "charge-uncommitted" or values.get("stage") == job.fault_stage
            if values["kind"] == kinds[str(job.fault)] and stage_ok:
                die()
            return row

        reservations.append_row = append_then_die  # type: ignore[assignment]
    if job.fault == "reserve-committed":
        real_reserve = Ledger.reserve

        def reserve_then_die(self: Ledger, *args: Any, **kwargs: Any) -> Any:
            real_reserve(self, *args, **kwargs)
            die()

        Ledger.reserve = reserve_then_die  # type: ignore[method-assign]


def _doomed(home: Path, url: str, job: Job, data: Path) -> int:
    """Run the job in a forked child armed with its fault; returns the child's exit status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child dies by SIGKILL (or exits at once)
        code = 0
        try:
            _arm(job)
            run_release(home, url, job, data, [])
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return status


def _worker(home: str, url: str, jobs: list[Job], data: str, barrier: Any, out: Any) -> None:
    """A worker process: runs its jobs in turn (crashing the faulty ones once), reports each."""
    code = 0
    try:
        barrier.wait()
        for job in jobs:
            outcome = Outcome(job.release_id, "")
            if job.fault is not None:
                status = _doomed(Path(home), url, job, Path(data))
                outcome.crashed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
                if not outcome.crashed:
                    outcome.armed_exit = os.waitstatus_to_exitcode(status)
                if job.abandon:
                    outcome.result = "abandoned"
                    out.put(outcome)
                    continue
            outcome.result = run_release(Path(home), url, job, Path(data), outcome.events)
            outcome.read_input = "read" in outcome.events
            out.put(outcome)
    except BaseException as e:  # report, then leave with a failure status
        out.put(Outcome("worker-error", f"{type(e).__name__}: {e}"))
        code = 1
    out.close()
    out.join_thread()
    os._exit(code)


def _watch(url: str, stop: Any, out: Any) -> None:
    """The concurrent reader: polls the budget and the charge rows until told to stop."""
    from sds_release.store.ledger.book import Ledger

    code, worst, polls, over = 0, Decimal(0), 0, []
    try:
        ledger = Ledger.from_url(url)
        while not stop.is_set():
            status = ledger.budget(DATASET)
            if status is not None:
                used = Decimal(repr(status.epsilon_spent)) + Decimal(repr(status.epsilon_reserved))
                rows = ledger.charges(DATASET)
                charged = sum((Decimal(repr(c.epsilon)) for c in rows), Decimal(0))
                lifetime = Decimal(repr(status.epsilon_lifetime))
                worst = max(worst, used, charged)
                if used > lifetime * (1 + Decimal("1e-12")) or charged > lifetime:
                    over.append(f"spent+reserved {used}, charged {charged} > {lifetime}")
                polls += 1
            time.sleep(0.005)
        out.put({"polls": polls, "max_used": float(worst), "over": over})
    except BaseException as e:
        out.put({"error": f"{type(e).__name__}: {e}"})
        code = 1
    out.close()
    out.join_thread()
    os._exit(code)


def make_jobs(n: int, *, faults: bool, seed: int = 2026) -> list[Job]:
    """``n`` releases; with ``faults``, the first six (which start at once, before the budget
    runs out) crash at each fault point in turn, and so do three in four of the others (fault
    points cycled); about a third of the crashed releases are abandoned, the rest resumed."""
    rng = random.Random(seed)
    jobs, k = [], 0
    for i in range(n):
        fault = stage = None
        abandon = False
        if faults and (i < len(FAULT_POINTS) or i % 4 != 3):
            fault = FAULT_POINTS[k % len(FAULT_POINTS)]
            k += 1
            stage = rng.choice(STAGES) if fault in ("charge-uncommitted", "checkpoint") else None
            abandon = rng.random() < 0.3
        jobs.append(Job(f"stress-{i:03d}", seed=1000 + i, fault=fault, fault_stage=stage,
                        abandon=abandon))  # fmt: skip
    return jobs


def stress(home: Path, ledger_url: str, jobs: list[Job], *, processes: int = 8) -> dict[str, Any]:
    """Run ``jobs`` from ``processes`` forked workers against a budget that fits ``FITS``
    releases, with a concurrent budget reader; returns outcomes, reader stats and timing."""
    from sds_release.store.config.release_params import ReleaseParams
    from sds_release.store.ledger.book import Ledger
    from sds_release.store.run.release_run import planned_charges

    home.mkdir(parents=True, exist_ok=True)
    data = home.parent / f"{home.name}-input.csv"
    data.write_text("a,b\n1,2\n")
    ledger = Ledger.from_url(ledger_url)
    delta = ReleaseParams(input="x", dataset=DATASET).resolved_delta()
    exact = Decimal(repr(delta)) * FITS  # 10 * 1e-6 in floats is 9.999999999999999e-06
    ledger.set_budget(DATASET, epsilon=EPSILON * FITS, delta=float(exact))
    planned_charges(_params(home, ledger_url, jobs[0], data))  # import the planner pre-fork
    ctx = mp.get_context("fork")
    barrier, out, watch_out = ctx.Barrier(processes + 1), ctx.Queue(), ctx.Queue()
    stop = ctx.Event()
    watcher = ctx.Process(target=_watch, args=(ledger_url, stop, watch_out))
    watcher.start()
    shares = [jobs[i::processes] for i in range(processes)]
    workers = [
        ctx.Process(target=_worker, args=(str(home), ledger_url, share, str(data), barrier, out))
        for share in shares
    ]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    outcomes = []
    for _ in jobs:
        outcome = out.get(timeout=600)
        if outcome.release_id == "worker-error":
            stop.set()
            raise RuntimeError(f"a stress worker failed: {outcome.result}")
        outcomes.append(outcome)
    seconds = time.perf_counter() - start
    for w in workers:
        w.join(timeout=120)
    stop.set()
    reader = watch_out.get(timeout=120)
    watcher.join(timeout=60)
    return {
        "outcomes": outcomes,
        "reader": reader,
        "seconds": seconds,
        "exit_codes": [w.exitcode for w in workers] + [watcher.exitcode],
    }


def summary(result: dict[str, Any], jobs: list[Job]) -> dict[str, Any]:
    """Counts for the docs: results, crashes per fault point, releases per minute."""
    outcomes: list[Outcome] = result["outcomes"]
    by = {r: sum(o.result == r for o in outcomes) for r in ("complete", "refused", "abandoned")}
    crashed = {o.release_id for o in outcomes if o.crashed}
    faults = {p: sum(j.fault == p and j.release_id in crashed for j in jobs) for p in FAULT_POINTS}
    return {
        **by,
        "crashed": len(crashed),
        "resumed": sum(o.crashed and o.result == "complete" for o in outcomes),
        "crashes_by_fault_point": faults,
        "seconds": round(result["seconds"], 2),
        "releases_per_minute": round(len(jobs) / result["seconds"] * 60, 1),
        "reader_polls": result["reader"].get("polls"),
    }


def _main() -> None:  # pragma: no cover - the docs' measurement
    import tempfile

    sys.path.insert(0, str(Path(__file__).parent))
    from pgserver import PgServer, ensure_installed

    server = PgServer(ensure_installed())
    report = {"loadavg_before": Path("/proc/loadavg").read_text().split()[:3]}
    try:
        for faults in (False, True):
            for backend in ("sqlite", "postgresql"):
                root = Path(tempfile.mkdtemp(prefix="sds-stress-"))
                url = (
                    f"sqlite:///{root}/ledger.sqlite"
                    if backend == "sqlite"
                    else server.create_schema("stress")
                )
                jobs = make_jobs(32, faults=faults)
                done = stress(root / "home", url, jobs)
                key = f"{backend}{'-faults' if faults else ''}"
                report[key] = summary(done, jobs)
    finally:
        server.stop()
    report["loadavg_after"] = Path("/proc/loadavg").read_text().split()[:3]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    _main()
