"""32 releases from 8 processes against a budget that fits 10, on both ledger backends.

What runs (tests/ledger_stress.py): each release is a stub that uses the real
``sds_release.store.run.release_run.reserve`` (the real SDS plan: count, aggregate-1, aggregate-2),
the real ``ReleaseRun.stage`` (charge -> noise from the release key -> checkpoint) and publishes
like ``write_release`` (artifact, ``Ledger.complete``, manifest anchored to the ledger head); no GX,
no Prefect, no DP counting. A separate process reads the budget every ~5 ms throughout.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ledger_stress import (
    FAULT_POINTS,
    FITS,
    STAGES,
    Job,
    expected_artifact,
    make_jobs,
    run_release,
    stress,
)

from sds_release.store.audit.home import audit_home
from sds_release.store.ledger.book import Ledger
from tests.helpers import run_cli

pytestmark = [
    pytest.mark.skipif(os.name != "posix", reason="uses fork and SIGKILL"),
    pytest.mark.slow,
]


def _check_complete(home: Path, ledger: Ledger, job: Job) -> None:
    """A complete release: every stage charged once, the artifact an uninterrupted run gives."""
    assert [c.stage for c in ledger.charges(release_id=job.release_id)] == list(STAGES)
    assert ledger.reservation(job.release_id).status == "completed"
    [rel] = home.glob(f"releases/*/{job.release_id}")
    assert json.loads((rel / "noise.json").read_text()) == expected_artifact(job.seed)
    assert json.loads((rel / "manifest.json").read_text())["status"] == "complete"


def test_32_releases_8_processes_budget_for_10(tmp_path: Path, ledger_url: str) -> None:
    """Exactly 10 complete, 22 are refused before reading the data and leave nothing behind;
    the concurrent reader never sees more than the lifetime spent or reserved; audit passes."""
    home = tmp_path / "home"
    jobs = make_jobs(32, faults=False)
    result = stress(home, ledger_url, jobs)
    assert result["exit_codes"] == [0] * 9
    outcomes = {o.release_id: o for o in result["outcomes"]}
    done = [j for j in jobs if outcomes[j.release_id].result == "complete"]
    refused = [j for j in jobs if outcomes[j.release_id].result == "refused"]
    assert (len(done), len(refused)) == (FITS, 32 - FITS)
    ledger = Ledger.from_url(ledger_url)
    for job in refused:
        assert not outcomes[job.release_id].read_input
        assert ledger.reservation(job.release_id) is None
        assert not list(home.glob(f"releases/*/{job.release_id}"))
        assert not (home / "private" / job.release_id).exists()
    for job in done:
        _check_complete(home, ledger, job)
    reader = result["reader"]
    # spent + reserved are float sums in the ledger (seen: 10.000000000000002 for exactly 10
    # releases), so the same 1e-12 relative slack as the reader's own ``over`` check
    assert reader["polls"] > 0 and reader["over"] == []
    assert reader["max_used"] <= FITS * (1 + 1e-12)
    assert ledger.budget("stress").epsilon_remaining == pytest.approx(0, abs=1e-12)
    report = audit_home(home, verify=True, ledger_url=ledger_url)
    assert report.ok, report.problems


def _fresh_url(url: str, tmp_path: Path, attempt: int, request: pytest.FixtureRequest) -> str:
    """Another empty ledger of the same backend (SQLite file or PostgreSQL schema)."""
    if url.startswith("sqlite"):
        return f"sqlite:///{tmp_path}/ledger{attempt}.sqlite"
    return str(request.getfixturevalue("pg_server").create_schema())


def test_sigkill_at_fault_points_then_resume_or_cancel(
    tmp_path: Path, ledger_url: str, request: pytest.FixtureRequest
) -> None:
    """25 of 32 releases are armed to die by SIGKILL at one of 6 fault points (in and between
    reserve, charge, checkpoint, close and manifest); every point kills at least one; ~70% are
    resumed, the rest cancelled. No stage is
    charged twice, every completed release equals an uninterrupted one, every abandoned one is
    cancellable, the reader never sees the budget exceeded, and audit passes."""
    jobs = make_jobs(32, faults=True)
    assert {j.fault for j in jobs if j.fault} == set(FAULT_POINTS)
    for attempt in range(3):  # a run whose scheduling refused every job armed at one fault
        # point before it got there exercised less: run again on a fresh home and ledger
        home = tmp_path / f"home{attempt}"
        url = ledger_url if attempt == 0 else _fresh_url(ledger_url, tmp_path, attempt, request)
        result = stress(home, url, jobs)
        assert result["exit_codes"] == [0] * 9
        outcomes = {o.release_id: o for o in result["outcomes"]}
        crashed = {j.fault for j in jobs if outcomes[j.release_id].crashed}
        if crashed == set(FAULT_POINTS):
            break
    ledger_url = url
    assert crashed == set(FAULT_POINTS)  # every fault point killed at least one release
    for job in jobs:  # an armed run that did not die was refused its reservation (exit 0)
        outcome = outcomes[job.release_id]
        assert not job.fault or outcome.crashed or outcome.armed_exit == 0
    ledger = Ledger.from_url(ledger_url)
    for job in jobs:
        outcome = outcomes[job.release_id]
        charged = [c.stage for c in ledger.charges(release_id=job.release_id)]
        assert len(charged) == len(set(charged))  # no (release, stage) charged twice
        if outcome.result == "complete":
            _check_complete(home, ledger, job)
        elif outcome.result == "refused":
            assert not outcome.read_input and ledger.reservation(job.release_id) is None
        else:  # abandoned after its crash: `sds cancel` must close it
            res = ledger.reservation(job.release_id)
            reserved = res is not None
            code, _, err = run_cli(
                "cancel", job.release_id, "--home", str(home), "--ledger", ledger_url
            )
            if res is not None and res.status == "completed":
                # killed between the ledger's close and the manifest (before-manifest): all of
                # it is spent, so there is nothing to cancel; it can only be finished
                assert code == 2 and "already completed" in err
                assert job.fault == "before-manifest"
                data = home.parent / f"{home.name}-input.csv"  # the harness's input
                assert run_release(home, ledger_url, job, data, []) == "complete"
                _check_complete(home, ledger, job)  # finished: no new charge, same artifact
            elif reserved:
                assert code == 0, err
                assert ledger.reservation(job.release_id).status == "cancelled"
                for rel in home.glob(f"releases/*/{job.release_id}"):
                    assert json.loads((rel / "manifest.json").read_text())["status"] == "failed"
            else:  # killed before its reservation committed: nothing to cancel, nothing left
                assert code == 2 and "no reservation" in err
                assert not list(home.glob(f"releases/*/{job.release_id}"))
    completes = sum(o.result == "complete" for o in outcomes.values())
    assert 1 <= completes <= FITS
    assert result["reader"]["over"] == [] and result["reader"]["polls"] > 0
    status = ledger.budget("stress")
    assert status.epsilon_reserved == 0 and status.epsilon_spent <= FITS
    report = audit_home(home, verify=True, ledger_url=ledger_url)
    assert report.ok, report.problems
