"""Running the Great Expectations suite of the validation gate, in the GX checker when one runs.

GX takes seconds to import. The CLI starts the GX checker, a process of its own
(:func:`start_checker`), right after its pre-flight, so the import runs on the other core while
Prefect loads and the first stages run; :func:`run_suite` then sends each table to it. Without a
checker (a deployment run, the tests) the suite runs in this process. The checker is a child
process of the release that exits with it (even when the release is killed); tables reach it
through a local pipe, never a file, a result store or a log. Used by
:mod:`sds_release.store.inputs.gate`.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from sds_core.errors import SdsInternalError
from sds_release.store.inputs.schema_checks import Check

__all__ = [
    "checker_running",
    "run_expectations",
    "run_suite",
    "start_checker",
    "start_method",
    "stop_checker",
]

_CHECKER: ProcessPoolExecutor | None = None
_WARM: Future[None] | None = None


def _import_gx() -> None:
    """Warm-up job of the checker: import GX (and pandas) once."""
    import great_expectations  # noqa: F401


def _exit_with(parent: int) -> None:
    """Exit as soon as the release process is gone (killed, crashed): never outlive it."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def _quit(signum: int, frame: Any) -> None:
    """The checker's SIGTERM (:func:`stop_checker`): release what multiprocessing registered
    (its named semaphores, e.g. tqdm's lock under GX) and end without the interpreter's
    teardown, which takes about a second with GX and pandas loaded."""
    import multiprocessing.util

    multiprocessing.util._exit_function()  # type: ignore[attr-defined]
    os._exit(0)


def _checker_init(parent: int) -> None:
    """In the checker: let go of the release's stdin/stdout/stderr (a caller waiting for their
    end must not wait for us), watch the release process, end quickly on SIGTERM."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    signal.signal(signal.SIGTERM, _quit)
    threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()


def start_method() -> str:
    """How the checker is started: ``fork`` while this process runs one thread (it then has
    pandas, pyarrow and numpy loaded already: the release's pre-flight imported them, about
    0.4 s of CPU the checker does not pay again on a core the starting server needs), else
    ``spawn`` (forking a process that runs other threads can copy a lock held by one of them).
    """
    return "fork" if threading.active_count() == 1 and os.name == "posix" else "spawn"


def start_checker() -> None:
    """Start the GX checker process and its GX import now (no-op if one runs)."""
    global _CHECKER, _WARM
    if _CHECKER is None:
        # with fork, ProcessPoolExecutor forks its process in the first submit, before it
        # starts its own manager thread
        _CHECKER = ProcessPoolExecutor(
            1,
            mp_context=multiprocessing.get_context(start_method()),
            initializer=_checker_init,
            initargs=(os.getpid(),),
        )
        _WARM = _CHECKER.submit(_import_gx)


def checker_running() -> bool:
    """Whether a GX checker process runs the suites."""
    return _CHECKER is not None


def stop_checker() -> None:
    """Stop the GX checker process now.

    It holds nothing to keep (each suite's result has been returned), so it is terminated
    rather than left to tear down its interpreter: with GX and pandas loaded that takes about a
    second, which the release would otherwise wait for.
    """
    global _CHECKER, _WARM
    if _CHECKER is not None:
        processes = list((getattr(_CHECKER, "_processes", None) or {}).values())
        for process in processes:
            process.terminate()  # SIGTERM: the checker's _quit
        _CHECKER.shutdown(wait=True, cancel_futures=True)
    _CHECKER = _WARM = None


def run_suite(frame: Any, checks: list[Check], *, name: str) -> list[dict[str, Any]]:
    """:func:`run_expectations`, in the GX checker when one runs (else here, as if it never had).

    A checker that died (e.g. out of memory) is dropped and the suite runs in this process.
    """
    if _CHECKER is not None:
        try:
            return _CHECKER.submit(run_expectations, frame, checks, name=name).result()
        except BrokenProcessPool:
            stop_checker()
    return run_expectations(frame, checks, name=name)


def run_expectations(frame: Any, checks: list[Check], *, name: str) -> list[dict[str, Any]]:
    """Run ``checks`` as a GX suite on ``frame``; one JSON result per check, in order."""
    import logging

    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.data_context.types.base import ProgressBarsConfig

    for logger in ("great_expectations", "great_expectations.data_context.types.base"):
        logging.getLogger(logger).setLevel(logging.WARNING)  # (it shadowed ``name`` before)
    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    batch_def = (
        ctx.data_sources.add_pandas(f"{name}-source")
        .add_dataframe_asset(name)
        .add_batch_definition_whole_dataframe("all")
    )
    classes: dict[str, Any] = {  # GX 1.x re-exports these without __all__
        "expect_table_columns_to_match_set": gxe.ExpectTableColumnsToMatchSet,  # type: ignore[attr-defined]
        "expect_table_row_count_to_be_between": gxe.ExpectTableRowCountToBeBetween,  # type: ignore[attr-defined]
        "expect_column_values_to_not_be_null": gxe.ExpectColumnValuesToNotBeNull,  # type: ignore[attr-defined]
        "expect_column_values_to_match_regex": gxe.ExpectColumnValuesToMatchRegex,  # type: ignore[attr-defined]
        "expect_column_values_to_be_in_set": gxe.ExpectColumnValuesToBeInSet,  # type: ignore[attr-defined]
        "expect_column_values_to_be_between": gxe.ExpectColumnValuesToBeBetween,  # type: ignore[attr-defined]
    }
    # the suite made with all its expectations at once: `add_expectation` stores the whole suite
    # again for each one it adds (quadratic: 11 of the 16 s that 150 columns took, 2026-11-29)
    suite = ctx.suites.add(
        gx.ExpectationSuite(
            name=f"{name}-suite", expectations=[classes[c.kind](**c.kwargs) for c in checks]
        )
    )
    expectations = suite.expectations  # in the order of `checks`, each with the id GX gave it
    if [e.expectation_type for e in expectations] != [c.kind for c in checks] or any(
        e.id is None for e in expectations
    ):
        raise SdsInternalError("GX's suite does not hold the gate's expectations in their order")
    batch = batch_def.get_batch(batch_parameters={"dataframe": frame})
    res = batch.validate(suite)
    by_id = {r.expectation_config.id: r for r in res.results if r.expectation_config is not None}
    return [json.loads(json.dumps(by_id[e.id].to_json_dict(), default=str)) for e in expectations]
