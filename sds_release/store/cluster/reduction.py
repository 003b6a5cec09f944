"""Sums over a cluster's partitions: combined pairwise on the workers, gathered here, watched.

Every per-partition result the Dask executor gathers (counts, histograms, evaluation sums) is
combined by :func:`tree_reduce`; a worker that dies holding data no task can recompute, or a
cluster left without workers, becomes a :class:`DaskClusterError` that tells the custodian what
to do (nothing more is drawn or charged for the stage).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


class DaskClusterError(RuntimeError):
    """The cluster lost data it cannot recompute (a worker died holding partitions that were
    sent from this process), or went away."""


def lost(e: BaseException) -> bool:
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker

    return isinstance(e, FutureCancelledError | KilledWorker) or type(e).__name__ in (
        "CancelledError",
        "FuturesCancelledError",
        "CommClosedError",
    )


def tree(
    client: Any, futures: list[Any], combine: Callable[[Any, Any], Any], *, down_to: int = 2
) -> list[Any]:
    """Partition results combined pairwise on the workers down to two (or one): the last
    combine runs on the driver, which receives both at once instead of one more hop. With
    ``down_to=1`` every combine runs on the workers and the driver receives the sum alone (the
    same value: the same pairs combined in the same order), never both halves and the
    combine's temporaries."""
    while len(futures) > down_to:
        merged = [
            client.submit(combine, futures[i], futures[i + 1])
            for i in range(0, len(futures) - 1, 2)
        ]
        if len(futures) % 2:
            merged.append(futures[-1])
        futures = merged
    return futures


def result(client: Any, futures: list[Any], combine: Callable[[Any, Any], Any]) -> Any:
    """The combined value of :func:`tree`'s futures.

    Raises:
        DaskClusterError: a worker died with partitions no task can recompute, or the cluster
            had no running worker for :data:`NO_WORKER_TIMEOUT_S` (nothing can compute them).
    """
    try:
        values = _gather(client, futures)
    except DaskClusterError:
        raise
    except Exception as e:
        if not lost(e):
            raise
        raise DaskClusterError(
            f"the Dask cluster lost data it cannot recompute ({type(e).__name__}: {e}): a "
            "worker died holding record partitions sent from this process. Nothing more is "
            "drawn or charged for this stage; run `sds resume RELEASE_ID` (the stage re-runs "
            "from the checkpoints with the same key), or read the input from Parquet files "
            "so that lost partitions are re-read"
        ) from e
    return values[0] if len(values) == 1 else combine(values[0], values[1])


NO_WORKER_TIMEOUT_S = 120.0
"""How long a reduction waits while the scheduler has no running worker (or does not answer)
before the stage fails with :class:`DaskClusterError`: lost results are recomputed only by
workers, and a cluster whose workers all died (a nanny that could not restart its worker, a
batch job that ended) would otherwise keep the release waiting forever. Long enough for a nanny
or an adaptive cluster to bring a worker back. ``SDS_DASK_NO_WORKER_TIMEOUT_S`` overrides it."""
NO_WORKER_TIMEOUT_ENV = "SDS_DASK_NO_WORKER_TIMEOUT_S"
_CHECK_S = 5.0


def _gather(client: Any, futures: list[Any]) -> list[Any]:
    """``client.gather(futures)``, watched: every few seconds while it waits, the scheduler is
    asked how many workers run; none (or no answer) for :data:`NO_WORKER_TIMEOUT_S` in a row
    ends the wait. Any number of workers dying and coming back is waited for (their lost
    results are recomputed), as long as one runs.

    Raises:
        DaskClusterError: no running worker for that long; nothing more is drawn or charged.
        Exception: what the gather raises (a lost, cancelled or failed task).
    """
    import asyncio
    import time
    from concurrent.futures import TimeoutError as WaitTimeout

    limit = float(os.environ.get(NO_WORKER_TIMEOUT_ENV) or NO_WORKER_TIMEOUT_S)
    pending = asyncio.run_coroutine_threadsafe(
        client.gather(futures, asynchronous=True), client.loop.asyncio_loop
    )
    idle_since: float | None = None
    while True:
        try:
            values: list[Any] = pending.result(timeout=_CHECK_S)
            return values
        except WaitTimeout:
            pass
        try:
            running = len(client.sync(client.scheduler.ncores_running, callback_timeout=_CHECK_S))
        except Exception:  # the scheduler does not answer: no worker we can count on either
            running = 0
        now = time.monotonic()
        idle_since = None if running else (idle_since or now)
        if idle_since is not None and now - idle_since >= limit:
            pending.cancel()
            raise DaskClusterError(
                f"the Dask cluster has had no running worker for {limit:.0f} s while this "
                "stage waited for results its workers lost (workers that died were not "
                f"replaced, or the scheduler at {client.scheduler.address} stopped answering). "
                "Nothing more is drawn or charged for this stage; start workers (`dask worker "
                "SCHEDULER_ADDRESS`) and run `sds resume RELEASE_ID`: the stage re-runs from the "
                "checkpoints with the same key"
            )


def tree_reduce(
    client: Any,
    futures: list[Any],
    combine: Callable[[Any, Any], Any],
    *,
    on_workers: bool = False,
) -> Any:
    """Combine partition results pairwise (:func:`tree`); gather the result. ``on_workers``:
    the last combine too (results as large as the data's combinations: the evaluation's).

    Raises:
        DaskClusterError: a worker died with partitions no task can recompute.
    """
    combined = tree(client, futures, combine, down_to=1 if on_workers else 2)
    return result(client, combined, combine)
