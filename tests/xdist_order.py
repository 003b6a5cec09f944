"""The order in which ``pytest -n N --dist loadfile`` hands test files to its processes: the
longest first (tests/conftest.py installs it).

xdist's own order is by number of tests, most first, so a file of one long test (a wheel built
and installed, a server killed and restarted) was handed out last and ran alone on one process
while the others had finished: 70–130 s of one idle core at the end of every run. Handing out the
longest files first (longest processing time first) leaves the short files for the end, where they
even out the processes.

``SECONDS`` is what each file took in one process of a whole run (``make test`` on 364973d,
2026-11-28, cold numba cache; files under 5 s left out; test_guarantee_fuzz.py, added later,
measured alone). It only orders the files: a file missing here runs after the listed ones, in
xdist's order, and a stale number costs balance, never a test.
"""

from __future__ import annotations

from typing import Any

SECONDS = {
    "tests/e2e/test_deploy_worker.py": 166,
    "tests/e2e/test_local_server.py": 155,
    "tests/e2e/test_deploy_wheel.py": 134,
    "tests/e2e/test_release_signal_faults.py": 122,
    "tests/core/test_synthesize.py": 102,
    "tests/e2e/test_server_killed.py": 101,
    "tests/e2e/test_dask_cli_cluster.py": 96,
    "tests/flows/test_neighbouring_publish.py": 87,
    "tests/e2e/test_release_runner.py": 68,
    "tests/e2e/test_server_template.py": 59,
    "tests/e2e/test_dask_faults.py": 51,
    "tests/e2e/test_leaks.py": 47,
    "tests/e2e/test_ui.py": 44,
    "tests/e2e/test_ui_custom_run.py": 43,
    "tests/e2e/test_served_deployment.py": 42,
    "tests/flows/test_release_flow.py": 39,
    "tests/e2e/test_disk_faults.py": 35,
    "tests/store/inputs/test_preflight.py": 8,  # its cases in one process since 2026-11-29
    "tests/flows/test_guarantee_fuzz.py": 35,  # alone (its 12 s for the session server aside)
    "tests/core/test_empirical_privacy.py": 33,
    "tests/core/test_warmup.py": 15,  # with the compile_kernels test, 2026-11-29, alone
    "tests/e2e/test_resume_after_kill.py": 31,
    "tests/flows/test_replay.py": 24,
    "tests/flows/test_dask_inputs.py": 23,
    "tests/store/publish/test_synthetic_stream.py": 23,
    "tests/flows/test_privacy_risk_release.py": 21,
    "tests/e2e/test_release_claims.py": 20,
    "tests/e2e/test_s3_release.py": 20,
    "tests/flows/test_bad_input.py": 18,
    "tests/core/test_evaluate.py": 17,
    "tests/store/cluster/test_no_worker.py": 16,
    "tests/store/ledger/test_period_budgets.py": 14,
    "tests/e2e/test_ledger_stress.py": 14,
    "tests/core/test_evaluation_slices.py": 13,
    "tests/store/cluster/test_backend.py": 12,
    "tests/store/ledger/test_book.py": 12,
    "tests/e2e/test_history_pages.py": 11,
    "tests/flows/test_period_releases.py": 10,
    "tests/e2e/test_s3_dask.py": 10,
    "tests/flows/test_hostile_input.py": 10,
    "tests/flows/test_cli_privacy_risk.py": 10,
    "tests/core/test_noise.py": 9,
    "tests/e2e/test_ledger_postgres.py": 9,
    "tests/e2e/test_s3_store.py": 9,
    "tests/flows/test_model_release.py": 9,
    "tests/core/test_aim.py": 8,
    "tests/core/test_percentile.py": 8,
    "tests/store/workspace/test_aggregate_streams.py": 8,
    "tests/flows/test_cli.py": 8,
    "tests/e2e/test_browser.py": 8,
    "tests/flows/test_release_history.py": 7,
    "tests/store/compare/test_privacy_risk.py": 7,
    "tests/core/test_prepare.py": 7,
    "tests/e2e/test_postgres_input.py": 6,
    "tests/core/test_agreement_slices.py": 6,
    "tests/core/test_forecast.py": 6,
    "tests/core/test_exact.py": 6,
    "tests/core/test_evaluation_lengths.py": 6,
}


def longest_first_scheduler(config: Any, log: Any) -> Any:
    """xdist's ``loadfile`` scheduler, its queue of files ordered by ``SECONDS``, longest first
    (ties, and files not listed, keep xdist's order)."""
    from xdist.scheduler import LoadFileScheduling

    class LongestFileFirst(LoadFileScheduling):  # type: ignore[misc]
        ordered = False

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the queue is complete before the first file is handed out
                self.ordered = True
                for scope in sorted(self.workqueue, key=lambda s: -SECONDS.get(s, 0)):
                    self.workqueue.move_to_end(scope)
            super()._assign_work_unit(node)

    return LongestFileFirst(config, log)
