"""Privacy-budget ledger: chain integrity, budget arithmetic, reservations, idempotency, races.

Every test that takes the ``ledger`` fixture runs twice: on SQLite and on a real PostgreSQL
server that the test session starts (tests/pgserver.py).
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import sqlite3
from pathlib import Path

import psycopg
import pytest

from sds_core.errors import SdsInputError
from sds_release.store.ledger.backends import LedgerCorruptError
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.chain import FIELDS
from sds_release.store.ledger.values import BudgetExceededError, LedgerConflictError, PlannedCharge

PURE = [
    PlannedCharge("count", "laplace", 0.1),
    PlannedCharge("k1", "laplace", 0.2),
    PlannedCharge("k2", "laplace", 0.3),
]


@pytest.fixture
def ledger(ledger_url: str) -> Ledger:
    """A fresh ledger (each backend) with dataset 'pums' budgeted (epsilon=1, delta=1e-5)."""
    led = Ledger.from_url(ledger_url)
    led.set_budget("pums", epsilon=1.0, delta=1e-5)
    return led


DB_ERRORS = (sqlite3.DatabaseError, psycopg.Error)


def _sql(ledger: Ledger, sql: str, *args: object) -> list[tuple]:
    """Run one statement directly on the ledger's database (autocommit); returns its rows."""
    with ledger._store.raw() as conn:  # type: ignore[attr-defined]
        if ledger.backend == "postgresql":
            sql = sql.replace("?", "%s")
        cur = conn.execute(sql, args)
        rows = cur.fetchall() if cur.description else []
        if ledger.backend == "sqlite":
            conn.commit()
        return [tuple(r) for r in rows]


def _tamper(ledger: Ledger, sql: str, *args: object) -> None:
    """Edit the ledger behind its back (append-only triggers disabled, as an attacker would)."""
    if ledger.backend == "sqlite":
        _sql(ledger, "DROP TRIGGER IF EXISTS ledger_no_update")
        _sql(ledger, "DROP TRIGGER IF EXISTS ledger_no_delete")
    else:
        _sql(ledger, "ALTER TABLE ledger DISABLE TRIGGER USER")
    _sql(ledger, sql, *args)


# -- hash chain ---------------------------------------------------------------------------------
def _filled(ledger: Ledger) -> Ledger:
    ledger.reserve("pums", "r1", PURE)
    for stage in ("count", "k1", "k2"):
        ledger.charge("r1", stage)
    ledger.complete("r1")
    return ledger


def test_verify_clean_chain(ledger: Ledger) -> None:
    """An untouched ledger verifies, and its head is the last row's hash."""
    report = _filled(ledger).verify()
    assert report.ok and report.rows == 6 and report.problems == ()
    assert ledger.head() == (6, report.head_hash)
    assert _sql(ledger, "SELECT prev_hash FROM ledger WHERE seq=1") == [("0" * 64,)]


def test_triggers_block_naive_edits(ledger: Ledger) -> None:
    """UPDATE and DELETE (and TRUNCATE on PostgreSQL) are refused by append-only triggers."""
    _filled(ledger)
    with pytest.raises(DB_ERRORS, match="append-only"):
        _sql(ledger, "UPDATE ledger SET epsilon='0.01' WHERE seq=3")
    with pytest.raises(DB_ERRORS, match="append-only"):
        _sql(ledger, "DELETE FROM ledger WHERE seq=3")
    if ledger.backend == "postgresql":
        with pytest.raises(DB_ERRORS, match="append-only"):
            _sql(ledger, "TRUNCATE ledger")
    assert ledger.verify().ok


def test_verify_detects_edit(ledger: Ledger) -> None:
    """Lowering a charge's epsilon in place breaks that row's hash."""
    _filled(ledger)
    _tamper(ledger, "UPDATE ledger SET epsilon='0.01' WHERE seq=3")
    report = ledger.verify()
    assert not report.ok and report.broken_seqs == (3,)
    assert "row seq 3" in report.problems[0] and "edited" in report.problems[0]


def test_verify_detects_deletion_in_middle(ledger: Ledger) -> None:
    """Deleting a middle row leaves a seq gap and a broken link."""
    _filled(ledger)
    _tamper(ledger, "DELETE FROM ledger WHERE seq=3")
    report = ledger.verify()
    assert not report.ok and report.broken_seqs == (4,)


def test_verify_detects_tail_deletion_and_write_refuses(ledger: Ledger) -> None:
    """Deleting the last row is caught by the head record; later writes refuse to extend it."""
    _filled(ledger)
    _tamper(ledger, "DELETE FROM ledger WHERE seq=6")
    report = ledger.verify()
    assert not report.ok and "ledger head" in report.problems[-1]
    with pytest.raises(LedgerCorruptError, match="does not match the recorded head"):
        ledger.set_budget("other", epsilon=1.0, delta=0.0)


def test_verify_detects_reordering(ledger: Ledger) -> None:
    """Swapping two rows' contents (keeping seq) breaks the links."""
    _filled(ledger)
    cols = [c for c in (*FIELDS, "hash") if c != "seq"]
    (a,) = _sql(ledger, f"SELECT {','.join(cols)} FROM ledger WHERE seq=3")
    (b,) = _sql(ledger, f"SELECT {','.join(cols)} FROM ledger WHERE seq=4")
    sets = ",".join(f"{c}=?" for c in cols)
    _tamper(ledger, "UPDATE ledger SET stage='swap' WHERE seq=3")
    _sql(ledger, f"UPDATE ledger SET {sets} WHERE seq=4", *a)
    _sql(ledger, f"UPDATE ledger SET {sets} WHERE seq=3", *b)
    report = ledger.verify()
    assert not report.ok and {3, 4} <= set(report.broken_seqs)


def test_verify_detects_insertion(ledger: Ledger) -> None:
    """A row appended by hand with a made-up hash does not chain."""
    _filled(ledger)
    _sql(
        ledger,
        "INSERT INTO ledger (seq, kind, dataset, epsilon, delta, created_at, prev_hash, "
        "hash) VALUES (7, 'budget', 'pums', '100', '0', 'now', 'x', 'y')",
    )
    report = ledger.verify()
    assert not report.ok and 7 in report.broken_seqs


# -- budgets and reservations ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "eps, delta, match",
    [
        (0.0, 0.0, "must be > 0"),
        (-1.0, 0.0, "finite number >= 0"),
        (math.inf, 0.0, "finite"),
        (1.0, 1.0, r"\[0, 1\)"),
        ("1", 0.0, "finite"),
    ],
)
def test_set_budget_validation(ledger: Ledger, eps: object, delta: object, match: str) -> None:
    """Budgets need finite epsilon > 0 and 0 <= delta < 1."""
    with pytest.raises(SdsInputError, match=match):
        ledger.set_budget("d", epsilon=eps, delta=delta)  # type: ignore[arg-type]


def test_budget_cannot_drop_below_used(ledger: Ledger) -> None:
    """Lowering the lifetime below spent + reserved is refused; raising it is recorded."""
    ledger.reserve("pums", "r1", PURE)
    with pytest.raises(SdsInputError, match=r"already spent or reserved"):
        ledger.set_budget("pums", epsilon=0.5, delta=1e-5)
    status = ledger.set_budget("pums", epsilon=2.0, delta=1e-5)
    assert status.epsilon_lifetime == 2.0 and status.epsilon_remaining == 1.4


def test_refused_without_budget_and_when_exceeded(ledger: Ledger) -> None:
    """No budget, or more than is left: BudgetExceededError naming dataset, need, left and fix."""
    with pytest.raises(BudgetExceededError, match=r"no privacy budget.*sds budget set other"):
        ledger.reserve("other", "r0", PURE)
    ledger.reserve("pums", "r1", PURE)  # 0.6 reserved
    msg = r"needs \(epsilon=0\.5.*'pums' has only \(epsilon=0\.4.*sds budget set"
    with pytest.raises(BudgetExceededError, match=msg):
        ledger.reserve("pums", "r2", [PlannedCharge("count", "laplace", 0.5)])
    assert ledger.reservation("r2") is None and ledger.budget("pums").epsilon_remaining == 0.4


def test_exact_decimal_arithmetic(ledger_url: str) -> None:
    """0.1 + 0.2 fits a 0.3 budget exactly (decimal, not binary float, sums)."""
    led = Ledger.from_url(ledger_url)
    led.set_budget("d", epsilon=0.3, delta=0.0)
    led.reserve("d", "a", [PlannedCharge("count", "laplace", 0.1)])
    led.reserve("d", "b", [PlannedCharge("count", "laplace", 0.2)])
    assert led.budget("d").epsilon_remaining == 0.0
    with pytest.raises(BudgetExceededError):
        led.reserve("d", "c", [PlannedCharge("count", "laplace", 1e-9)])


def test_reserve_charge_cancel_arithmetic(ledger: Ledger) -> None:
    """Reserve 0.6, draw 0.1 + 0.2, cancel: 0.3 spent, 0.3 given back."""
    ledger.reserve("pums", "r1", PURE)
    s = ledger.budget("pums")
    assert (s.epsilon_spent, s.epsilon_reserved, s.epsilon_remaining) == (0.0, 0.6, 0.4)
    ledger.charge("r1", "count")
    ledger.charge("r1", "k1")
    s = ledger.budget("pums")
    assert (s.epsilon_spent, s.epsilon_reserved, s.epsilon_remaining) == (0.3, 0.3, 0.4)
    result = ledger.cancel("r1")
    assert (result.epsilon_spent, result.epsilon_returned) == (0.3, 0.3)
    assert result.stages_charged == ("count", "k1") and result.stages_returned == ("k2",)
    s = ledger.budget("pums")
    assert (s.epsilon_spent, s.epsilon_reserved, s.epsilon_remaining) == (0.3, 0.0, 0.7)
    assert ledger.cancel("r1") == result  # idempotent
    with pytest.raises(LedgerConflictError, match="is cancelled"):
        ledger.charge("r1", "k2")
    with pytest.raises(LedgerConflictError, match="already cancelled"):
        ledger.complete("r1")


def test_complete_spends_total_and_releases_unused(ledger: Ledger) -> None:
    """A fully drawn release spends its total; complete() gives back stages never drawn."""
    ledger.reserve("pums", "r1", PURE, epsilon=0.8)
    for stage in ("count", "k1", "k2"):
        ledger.charge("r1", stage)
    done = ledger.complete("r1")
    assert (done.status, done.epsilon_spent, done.epsilon_returned) == ("completed", 0.8, 0.0)
    ledger.reserve(
        "pums", "r2", [PlannedCharge("count", "laplace", 0.05), PlannedCharge("k1", "laplace", 0.1)]
    )
    ledger.charge("r2", "count")
    part = ledger.complete("r2")
    assert (part.epsilon_spent, part.epsilon_returned) == (0.05, 0.1)
    assert ledger.budget("pums").epsilon_remaining == pytest.approx(0.15, abs=1e-15)
    assert ledger.complete("r2") == part
    with pytest.raises(LedgerConflictError, match="already completed"):
        ledger.cancel("r1")


def test_zcdp_partial_spend_is_conservative(ledger: Ledger) -> None:
    """Cancelled after count + k1: pure eps plus Bun-Steinke eps of the drawn rho, below total."""
    ledger.set_budget("pums", epsilon=10.0, delta=1e-5)
    plan = [PlannedCharge("count", "laplace", 0.4)] + [
        PlannedCharge(f"k{k}", "gaussian", 1.2, 1e-6 / 3, 0.1) for k in (1, 2, 3)
    ]
    ledger.reserve("pums", "r1", plan, epsilon=4.0, delta=1e-6)
    ledger.charge("r1", "count")
    ledger.charge("r1", "k1")
    result = ledger.cancel("r1")
    expected = 0.4 + 0.1 + 2 * math.sqrt(0.1 * math.log(1 / 5e-7))  # converted at delta/2
    assert result.epsilon_spent == pytest.approx(expected, rel=1e-12)
    assert 0.4 + 1.2 < result.epsilon_spent < 4.0
    assert result.delta_spent == pytest.approx(1e-6) and result.delta_returned == pytest.approx(0)
    assert result.epsilon_returned == pytest.approx(4.0 - expected, rel=1e-12)


def test_reserve_idempotent_and_conflicts(ledger: Ledger) -> None:
    """Same release id + same plan returns the reservation; anything else conflicts."""
    first = ledger.reserve("pums", "r1", PURE, flow_run_id="run-a")
    assert ledger.reserve("pums", "r1", PURE, flow_run_id="run-b") == first
    assert ledger.budget("pums").epsilon_reserved == 0.6
    with pytest.raises(LedgerConflictError, match="already reserved"):
        ledger.reserve("pums", "r1", PURE[:2])
    ledger.set_budget("other", epsilon=1.0, delta=0.0)
    with pytest.raises(LedgerConflictError, match="already reserved"):
        ledger.reserve("other", "r1", PURE)


@pytest.mark.parametrize(
    "plan, kwargs, match",
    [
        ([], {}, "at least one"),
        ([PURE[0], PURE[0]], {}, "unique"),
        (PURE, {"epsilon": 0.5}, "sum to 0.6"),
        ([PlannedCharge("count", "laplace", 0.0)], {}, "epsilon must be > 0"),
    ],
)
def test_reserve_validation(ledger: Ledger, plan: list, kwargs: dict, match: str) -> None:
    """Empty plans, duplicate stages and shares larger than the total are refused."""
    with pytest.raises(SdsInputError, match=match):
        ledger.reserve("pums", "rx", plan, **kwargs)


def test_planned_charge_validation() -> None:
    """PlannedCharge rejects empty names, negative or NaN amounts and delta >= 1."""
    with pytest.raises(SdsInputError, match="stage must be a non-empty"):
        PlannedCharge("", "laplace", 0.1)
    with pytest.raises(SdsInputError, match="epsilon of stage 'c'"):
        PlannedCharge("c", "laplace", float("nan"))
    with pytest.raises(SdsInputError, match="delta of stage 'c'"):
        PlannedCharge("c", "gaussian", 0.1, 1.0)
    with pytest.raises(SdsInputError, match="rho of stage 'c'"):
        PlannedCharge("c", "gaussian", 0.1, 0.0, -0.1)


def test_charge_idempotent_and_checked(ledger: Ledger) -> None:
    """A (release, stage) pair is charged once; unknown stage/release or other amounts raise."""
    ledger.reserve("pums", "r1", PURE)
    row = ledger.charge("r1", "k1", epsilon=0.2, flow_run_id="run-a")
    assert ledger.charge("r1", "k1", flow_run_id="run-b") == row
    assert (row.dataset, row.stage, row.mechanism, row.epsilon, row.flow_run_id) == (
        "pums",
        "k1",
        "laplace",
        0.2,
        "run-a",
    )
    assert len(ledger.charges(release_id="r1")) == 1
    with pytest.raises(LedgerConflictError, match=r"reserved 0\.2"):
        ledger.charge("r1", "k1", epsilon=0.25)
    with pytest.raises(LedgerConflictError, match="not in the reservation"):
        ledger.charge("r1", "k9")
    with pytest.raises(LedgerConflictError, match="no reservation"):
        ledger.charge("nope", "count")
    assert _sql(ledger, "SELECT stage, epsilon FROM charges") == [("k1", "0.2")]


def test_not_writable_home(tmp_path: Path) -> None:
    """A home under a regular file gives an SdsInputError naming the fix."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SdsInputError, match=r"cannot open the ledger.*--home"):
        Ledger.open(blocker / "home")


def test_corrupt_file(tmp_path: Path) -> None:
    """A file that is not sqlite raises LedgerCorruptError."""
    (tmp_path / "ledger.sqlite").write_bytes(b"not a database" * 100)
    with pytest.raises(LedgerCorruptError, match="not a readable sqlite ledger"):
        Ledger.open(tmp_path)


# -- real parallel processes ---------------------------------------------------------------
def _race_reserve(url: str, i: int, barrier: mp.Barrier, out: mp.Queue) -> None:
    barrier.wait()
    try:
        Ledger.from_url(url).reserve("pums", f"r{i}", [PlannedCharge("count", "laplace", 0.3)])
        out.put(("ok", i))
    except BudgetExceededError:
        out.put(("refused", i))


def _race_charge(url: str, i: int, barrier: mp.Barrier, out: mp.Queue) -> None:
    barrier.wait()
    row = Ledger.from_url(url).charge("r1", "k1", flow_run_id=f"proc-{i}")
    out.put(("ok", row.seq))


def _child(target, url: str, i: int, barrier: mp.Barrier, out: mp.Queue) -> None:
    """Run ``target`` in a forked child and leave with ``os._exit``.

    A fork inherits the parent's atexit handlers and threads (a Prefect test server may be
    running in the session); skipping them keeps the child's exit code about the ledger only.
    """
    code = 0
    try:
        target(url, i, barrier, out)
    except BaseException:
        code = 1
    out.close()
    out.join_thread()
    os._exit(code)


def _run(target, url: str, n: int = 8) -> list[tuple[str, int]]:
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(target, url, i, barrier, out)) for i in range(n)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


@pytest.mark.skipif(os.name != "posix", reason="uses fork")
def test_concurrent_reservations_never_overspend(ledger: Ledger, ledger_url: str) -> None:
    """8 processes race to reserve 0.3 each against 1.0: exactly 3 succeed."""
    results = _run(_race_reserve, ledger_url)
    assert sorted(r for r, _ in results).count("ok") == 3
    status = ledger.budget("pums")
    assert status.epsilon_reserved == pytest.approx(0.9) and status.epsilon_remaining >= 0
    assert ledger.verify().ok


@pytest.mark.skipif(os.name != "posix", reason="uses fork")
def test_concurrent_charges_of_one_stage_give_one_row(ledger: Ledger, ledger_url: str) -> None:
    """8 processes charge the same (release, stage): one row, and all see that same row."""
    ledger.reserve("pums", "r1", PURE)
    results = _run(_race_charge, ledger_url)
    assert len({seq for _, seq in results}) == 1
    assert len(ledger.charges(release_id="r1")) == 1 and ledger.verify().ok


def test_real_sds_plan_reserves_and_cancels(ledger: Ledger) -> None:
    """The accounting module's stage spends fit their totals; a cancel keeps a sound partial."""
    accounting = pytest.importorskip("sds_core.dp.accounting")
    plan = accounting.plan_budget(
        epsilon=4.0,
        delta=1e-6,
        reporting_length=3,
        percentile_epsilon_proportion=0.01,
        number_of_records_epsilon_proportion=0.1,
        sigma_proportions=(1.0, 1.0, 1.0),
    )
    stages = [
        PlannedCharge(s.stage, s.mechanism, s.epsilon, s.delta, s.rho) for s in plan.stage_spends()
    ]
    ledger.set_budget("pums", epsilon=8.0, delta=1e-5)
    ledger.reserve("pums", "r1", stages, epsilon=4.0, delta=1e-6)
    assert ledger.budget("pums").epsilon_reserved == 4.0
    ledger.charge("r1", "count")
    ledger.charge("r1", "aggregate-1")
    result = ledger.cancel("r1")
    rho1 = plan.rho_by_len[0]
    bs16 = plan.epsilon_records + rho1 + 2 * math.sqrt(rho1 * math.log(2 / 1e-6))
    assert result.epsilon_spent == pytest.approx(min(4.0, bs16), rel=1e-12)
    assert result.delta_spent == pytest.approx(1e-6)
    assert result.stages_returned == ("aggregate-2", "aggregate-3")


def test_long_decimal_totals_stay_exact(ledger: Ledger) -> None:
    """Shares whose exact sum has more than 17 digits re-reserve idempotently and spend exactly."""
    plan = [PlannedCharge("a", "laplace", 0.1234567890123456), PlannedCharge("b", "laplace", 1e-20)]
    first = ledger.reserve("pums", "r1", plan)
    assert ledger.reserve("pums", "r1", plan) == first
    for stage in ("a", "b"):
        ledger.charge("r1", stage)
    assert ledger.complete("r1").epsilon_returned == 0.0
    assert ledger.budget("pums").epsilon_remaining == pytest.approx(1 - 0.1234567890123456)
