"""The private subject record of a periodic dataset: each subject counts in the first period it
is released in, kept as keyed hashes (HMAC with a 0600 per-dataset secret), never in clear."""

from __future__ import annotations

import multiprocessing as mp
import os
import stat
from pathlib import Path

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.workspace.subjects import SECRET_FILE, SUBJECTS_FILE, SubjectRecord


def test_first_period_wins_and_later_periods_leave_the_subject_out(tmp_path: Path) -> None:
    """A subject of two periods counts in the one released first; the other period is told to
    leave it out; releasing the first period again (late rows, a resume) changes nothing."""
    record = SubjectRecord(tmp_path, "monthly")
    assert record.assign("2026-09", "r1", {"ana", "bob"}) == set()
    assert record.assign("2026-10", "r2", {"bob", "carl"}) == {"bob"}
    assert record.assign("2026-09", "r3", {"ana", "bob", "dora"}) == set()
    assert record.period_of("bob") == "2026-09" and record.period_of("carl") == "2026-10"
    assert record.period_of("dora") == "2026-09" and record.period_of("eve") is None
    assert record.periods() == {"2026-09": 3, "2026-10": 1}
    assert record.counted_elsewhere("2026-10", {"bob", "carl", "eve"}) == {"bob"}


def test_ids_match_as_preparation_matches_them(tmp_path: Path) -> None:
    """Ids are compared trimmed and lower-cased, as preparation joins a subject's rows."""
    record = SubjectRecord(tmp_path, "monthly")
    record.assign("2026-09", "r1", {"Ana"})
    assert record.period_of("  ana ") == "2026-09"


def test_record_is_private_and_holds_no_id_in_clear(tmp_path: Path) -> None:
    """The secret is 32 bytes, the files 0600, the folders 0700, and no id is stored in clear;
    another dataset has another secret, so equal ids hash apart."""
    record = SubjectRecord(tmp_path, "monthly")
    record.assign("2026-09", "r1", {"subject-4711"})
    secret = record.dir / SECRET_FILE
    assert len(secret.read_bytes()) == 32
    for path in (secret, record.dir / SUBJECTS_FILE):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for folder in (record.dir, record.dir.parent, tmp_path / "private"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for path in record.dir.iterdir():
        assert b"subject-4711" not in path.read_bytes()
    other = SubjectRecord(tmp_path, "other")
    other.assign("2026-09", "r9", {"subject-4711"})
    assert other.key("subject-4711") != record.key("subject-4711")


def test_a_record_without_its_secret_is_refused(tmp_path: Path) -> None:
    """Without the secret no earlier subject can be recognized: reading refuses with the fix."""
    record = SubjectRecord(tmp_path, "monthly")
    record.assign("2026-09", "r1", {"ana"})
    (record.dir / SECRET_FILE).unlink()
    with pytest.raises(SdsInputError, match=r"has no secret.*home that released"):
        record.counted_elsewhere("2026-10", {"ana"})


def _assign(home: str, period: str, barrier: mp.Barrier, out: mp.Queue) -> None:
    barrier.wait()
    code = 0
    try:
        out.put((period, SubjectRecord(home, "monthly").assign(period, period, {"shared", period})))
    except BaseException:
        code = 1
    out.close()
    out.join_thread()
    os._exit(code)


@pytest.mark.skipif(os.name != "posix", reason="uses fork")
def test_concurrent_periods_count_a_shared_subject_once(tmp_path: Path) -> None:
    """6 periods released at once, all with subject 'shared': exactly one counts it (the
    secret is made once, the assignment is one transaction)."""
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(6), ctx.Queue()
    periods = [f"p{i}" for i in range(6)]
    procs = [ctx.Process(target=_assign, args=(str(tmp_path), p, barrier, out)) for p in periods]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    keeping = [p for p, elsewhere in results.items() if not elsewhere]
    assert len(keeping) == 1
    assert all(elsewhere == {"shared"} for p, elsewhere in results.items() if p not in keeping)
    record = SubjectRecord(tmp_path, "monthly")
    assert record.period_of("shared") == keeping[0]
    assert sum(record.periods().values()) == 7  # 'shared' once, each period's own subject
