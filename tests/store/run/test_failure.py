"""A full disk during a release: recognised in an error's chain, told with `sds resume`, and
the failure record written as far as the disk allows with nothing left looking published."""

from __future__ import annotations

import errno
import json
import sqlite3
from pathlib import Path

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.run import failure
from sds_release.store.run.failure import disk_full, disk_full_error
from sds_release.store.run.release_run import ReleaseRun, reserve

ENOSPC = OSError(errno.ENOSPC, "No space left on device", "/h/private/r1/checkpoints/count.pkl")


def _chained(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as e:
            raise outer from e
    except BaseException as e:
        return e


@pytest.mark.parametrize(
    ("error", "full"),
    [
        (ENOSPC, True),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), True),
        (sqlite3.OperationalError("database or disk is full"), True),
        (_chained(SdsInputError("cannot open the ledger"), ENOSPC), True),
        (OSError(errno.EACCES, "Permission denied"), False),
        (sqlite3.OperationalError("database is locked"), False),
        (SdsInputError("column 'age': value out of range"), False),
    ],
)
def test_disk_full_is_found_in_the_chain(error: BaseException, full: bool) -> None:
    """ENOSPC, EDQUOT and SQLITE_FULL are a full disk, also as a cause; nothing else is."""
    assert (disk_full(error) is not None) == full


def test_the_message_says_what_is_full_and_how_to_go_on() -> None:
    """Resumable: the file and `sds resume ID`; not resumable: start again, nothing charged."""
    told = str(disk_full_error(ENOSPC, "r1", Path("/h"), resumable=True))
    assert "disk is full" in told and "count.pkl" in told and "`sds resume r1`" in told
    told = str(disk_full_error(ENOSPC, "r1", Path("/h"), resumable=False))
    assert "sds resume" not in told and "nothing was charged" in told


def _run(tmp_path: Path, tiny_csv: Path) -> ReleaseRun:
    params = ReleaseParams(
        input=str(tiny_csv), dataset="tiny", home=str(tmp_path / "home"), release_id="r1",
        epsilon=1.0, reporting_length=2, default_budget={"epsilon": 10.0, "delta": 1e-3},
    )  # fmt: skip
    return reserve(params)


@pytest.mark.parametrize("charged", [True, False])
def test_mark_failed_on_a_full_disk(
    charged: bool, tmp_path: Path, tiny_csv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The published files go, the failure record is skipped where the disk refuses it, and the
    error told says the disk is full; resumable when a stage was charged or the reservation
    could not be cancelled."""
    run = _run(tmp_path, tiny_csv)
    if charged:
        run.ledger().charge("r1", "count")
    (run.dirs.release_dir / "aggregates.parquet").write_bytes(b"half")

    def no_space(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("sds_release.store.run.release_run.atomic_write_json", no_space)
    told = run.mark_failed(ENOSPC, [])
    assert isinstance(told, SdsInputError) and "disk is full" in str(told)
    assert ("`sds resume r1`" in str(told)) == charged
    assert sorted(p.name for p in run.dirs.release_dir.iterdir()) == ["manifest.json"]
    manifest = json.loads((run.dirs.release_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["resumable"] == charged
    assert not (run.dirs.private_dir / "failure.json").exists()
    status = run.ledger().reservation("r1").status  # type: ignore[union-attr]
    assert status == ("open" if charged else "cancelled")


def test_mark_failed_keeps_other_errors(tmp_path: Path, tiny_csv: Path) -> None:
    """Any other error is told as it is, and an error of the record that is not a full disk
    is not hidden."""
    run = _run(tmp_path, tiny_csv)
    error = SdsInputError("column 'age': bad")
    assert run.mark_failed(error, []) is error
    assert (
        json.loads((run.dirs.private_dir / "failure.json").read_text())["type"] == "SdsInputError"
    )
    with pytest.raises(PermissionError), failure.unless_disk_full():
        raise PermissionError(errno.EACCES, "Permission denied")


def test_a_failed_manifest_keeps_stage_times_private(tmp_path: Path, tiny_csv: Path) -> None:
    """The failed manifest left in releases/ lists the stages done by name and status (a
    duration only for budget and plan); every time goes to the private timeline."""
    run = _run(tmp_path, tiny_csv)
    done = [
        {"name": name, "status": "complete", "started": "t0", "finished": "t1", "duration_s": 0.5}
        for name in ("budget", "ingest", "validate")
    ]
    run.mark_failed(SdsInputError("column 'age': bad"), done)
    manifest = json.loads((run.dirs.release_dir / "manifest.json").read_text())
    assert manifest["stages"] == [
        {"name": "budget", "status": "complete", "duration_s": 0.5},
        {"name": "ingest", "status": "complete"},
        {"name": "validate", "status": "complete"},
    ]
    assert run.dirs.timeline()["stages"] == done
