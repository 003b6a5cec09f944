"""The privacy-budget ledger: budgets, reservations and stage charges, behind a ledger URL.

The budget step of a release *reserves* its whole (epsilon, delta) atomically; each stage then
*charges* its planned share right before it draws noise; ``complete``/``cancel`` close the
reservation. Stored in SQLite (``$SDS_HOME/ledger.sqlite``, the default) or PostgreSQL
(:mod:`release_store.ledger.backends`; no Prefect, so the CLI imports it fast); rows are
hash-chained by :mod:`release_store.ledger.chain`. Rules in docs/ledger.md.
"""

from __future__ import annotations

import getpass
import json
import math
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal, localcontext
from pathlib import Path
from typing import Any, TypeVar

from release_store.ledger.backends import (
    BUSY_TIMEOUT_S,
    LEDGER_FILE,
    Conn,
    LedgerCorruptError,
    LedgerStore,
    SqliteStore,
    open_store,
    resolve_ledger_url,
)
from release_store.ledger.chain import FIELDS, VerifyReport, append_row, verify_chain
from release_store.ledger.periods import (
    DEFAULT_PERIOD_FORMAT,
    PERIOD_FORMATS,
    check_format_change,
    label_problem,
)
from release_store.ledger.values import (
    BudgetExceededError,
    BudgetStatus,
    CancelResult,
    ChargeRow,
    LedgerConflictError,
    PeriodMismatchError,
    PlannedCharge,
    PolicyExceededError,
    ReleasePolicy,
    Reservation,
    check_name,
    dec,
    partial_spend,
    period_refusal,
    validate_plan,
)
from sds_core.dp.accounting import check_amount
from sds_core.errors import SdsInputError

__all__ = [
    "LEDGER_FILE",
    "BudgetExceededError",
    "BudgetStatus",
    "CancelResult",
    "ChargeRow",
    "Ledger",
    "LedgerConflictError",
    "LedgerCorruptError",
    "LedgerMovedError",
    "PlannedCharge",
    "Reservation",
    "VerifyReport",
    "partial_spend",
]

T = TypeVar("T")


class LedgerMovedError(SdsInputError):
    """The ledger was migrated elsewhere (``sds ledger migrate``); it only answers reads now."""


class Ledger:
    """The privacy-budget ledger behind a ledger URL (SQLite file or PostgreSQL database).

    Every write is one serialized transaction of its backend
    (:mod:`release_store.ledger.backends`); every read one consistent snapshot. Each call
    opens its own connection, so one ``Ledger`` may be shared by threads and processes.
    """

    def __init__(self, path: Path | str, *, busy_timeout: float = BUSY_TIMEOUT_S) -> None:
        """Open (creating if needed) the SQLite ledger file ``path``."""
        self._store: LedgerStore = SqliteStore(Path(path), busy_timeout=busy_timeout)

    @classmethod
    def from_url(
        cls, url: str, *, busy_timeout: float = BUSY_TIMEOUT_S, wait: bool = False
    ) -> Ledger:
        """Open (creating the tables if needed) the ledger at ``url``: ``sqlite:///PATH`` or
        ``postgresql://...``; ``wait``: a PostgreSQL server that does not answer is retried for
        ``busy_timeout`` s (a running release's ledger) instead of refused at once."""
        ledger = cls.__new__(cls)
        ledger._store = open_store(url, busy_timeout=busy_timeout, wait=wait)
        return ledger

    @classmethod
    def open(cls, home: str | Path, url: str | None = None, *, wait: bool = False) -> Ledger:
        """The ledger of a home: ``url`` (--ledger / config), else $SDS_LEDGER_URL, else
        ``home/ledger.sqlite`` (``wait``: see :meth:`from_url`)."""
        return cls.from_url(resolve_ledger_url(home, url), wait=wait)

    @property
    def url(self) -> str:
        """The ledger URL without its password (safe to print and record)."""
        return self._store.url

    @property
    def backend(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self._store.kind

    @property
    def path(self) -> Path | None:
        """The SQLite file (None for PostgreSQL)."""
        return self._store.path

    def _write(self, body: Callable[[Conn], T]) -> T:
        def guarded(conn: Conn) -> T:
            moved = conn.execute("SELECT value FROM meta WHERE key = 'moved_to'").fetchone()
            if moved is not None:
                raise LedgerMovedError(
                    f"the ledger {self.url} was migrated to {moved[0]} and is read-only: "
                    f"use --ledger {moved[0]} (or SDS_LEDGER_URL) for every command"
                )
            return body(conn)

        return self._store.write(guarded)

    def _read(self, body: Callable[[Conn], T]) -> T:
        return self._store.read(body)

    # -- budgets ---------------------------------------------------------------------------
    def set_budget(
        self,
        dataset: str,
        *,
        epsilon: float,
        delta: float,
        max_epsilon_per_release: float | None = None,
        max_delta_per_release: float | None = None,
        clear_policy: bool = False,
        set_by: str | None = None,
        per_period: bool = False,
        lifetime_epsilon: float | None = None,
        period_format: str | None = None,
    ) -> BudgetStatus:
        """Set a dataset's lifetime (epsilon, delta), or its budget per period; recorded as a
        chained ``budget`` row.

        The row also holds the dataset's per-release policy (:class:`ReleasePolicy`), so it is in
        the hash chain: the limits given here, else the policy the dataset already has (raising a
        budget keeps its policy), else none; ``clear_policy`` removes it. ``set_by`` (default:
        this process's user@host) is recorded with it.

        With ``per_period`` (epsilon, delta) is the budget of *each* period of the dataset
        (``sds release --period V``; parallel composition, docs/privacy.md) and
        ``lifetime_epsilon`` an optional cap on the ε all periods spend together (kept when not
        given, like the policy). Whether a dataset's budget is per period is fixed by its first
        spend: it can change only while nothing is spent or reserved. ``period_format`` (per
        period only) is how the dataset's periods are written
        (:mod:`release_store.ledger.periods`; kept when not given, else YYYY-MM): every period
        reserved must be written so, and it can change only to a format every period already
        reserved is written in.

        Raises:
            SdsInputError: epsilon not finite and > 0, delta not in [0, 1), a per-release limit
                not > 0 or above the budget, the new budget is below what is already spent plus
                reserved (per period: by any period; the cap: by all periods together), or the
                budget would change between lifetime and per period after a spend, or the
                period format is unknown, given without --per-period or does not fit the
                periods already reserved.
        """
        check_name("dataset", dataset)
        check_amount("--epsilon", epsilon)
        check_amount("--delta", delta, upper=1.0)
        if epsilon <= 0:
            raise SdsInputError(f"--epsilon must be > 0, got {epsilon!r}")
        if lifetime_epsilon is not None:
            check_amount("--lifetime-epsilon", lifetime_epsilon)
            if not per_period:
                raise SdsInputError(
                    "--lifetime-epsilon caps the ε of all periods of a dataset whose budget is "
                    "per period: add --per-period, or give the lifetime budget as --epsilon"
                )
            if lifetime_epsilon < epsilon:
                raise SdsInputError(
                    f"--lifetime-epsilon {lifetime_epsilon:g} is below the per-period budget "
                    f"--epsilon {epsilon:g}: no period could spend its budget; give a cap of at "
                    "least the per-period ε (or no cap)"
                )
        for name, limit, life in (
            ("--max-epsilon-per-release", max_epsilon_per_release, epsilon),
            ("--max-delta-per-release", max_delta_per_release, delta),
        ):
            if limit is None:
                continue
            check_amount(name, limit, upper=1.0 if "delta" in name else math.inf)
            if not limit > 0 or limit > life:
                raise SdsInputError(
                    f"{name} must be > 0 and at most the lifetime budget ({life:g}), got "
                    f"{limit!r}; a per-release limit above the lifetime budget limits nothing"
                )
        if period_format is not None:
            if period_format not in PERIOD_FORMATS:
                raise SdsInputError(
                    f"--period-format {period_format!r} is not a period format; choose one of "
                    f"{', '.join(PERIOD_FORMATS)}"
                )
            if not per_period:
                raise SdsInputError(
                    "--period-format says how the periods of a dataset whose budget is per "
                    "period are written: add --per-period, or leave out --period-format"
                )
        if clear_policy and (max_epsilon_per_release or max_delta_per_release):
            raise SdsInputError(
                "--clear-policy removes the per-release policy: do not combine it with "
                "--max-epsilon-per-release or --max-delta-per-release"
            )
        given = max_epsilon_per_release is not None or max_delta_per_release is not None
        who = set_by or _user_at_host()

        def body(conn: Conn) -> BudgetStatus | None:
            terms = self._terms(conn, dataset)
            usage = self._usage(conn, dataset)
            cap = lifetime_epsilon
            kept = terms.period_format if terms is not None else DEFAULT_PERIOD_FORMAT
            fmt = period_format or kept
            if per_period and fmt != kept:
                check_format_change(dataset, usage, fmt)
            if terms is not None:
                _check_kind_change(dataset, terms, usage, per_period=per_period)
                if per_period and cap is None and terms.per_period:
                    cap = None if terms.cap is None else float(terms.cap)
                _check_not_below_use(dataset, usage, epsilon, delta, per_period, cap)
            previous = None if terms is None else terms.policy
            if given:
                policy: ReleasePolicy | None = ReleasePolicy(
                    max_epsilon_per_release,
                    max_delta_per_release,
                    who,
                    datetime.now(UTC).isoformat(timespec="seconds"),
                )
            else:
                policy = None if clear_policy else previous
            if policy is not None:
                for name, limit, life in (
                    ("epsilon", policy.max_epsilon, epsilon),
                    ("delta", policy.max_delta, delta),
                ):
                    if limit is not None and limit > life:
                        raise SdsInputError(
                            f"the per-release {name} policy of dataset {dataset!r} "
                            f"({limit:g}) is above the new lifetime {name} ({life:g}); give a "
                            "new --max-epsilon-per-release/--max-delta-per-release or "
                            "--clear-policy"
                        )
            row: dict[str, Any] = {
                "kind": "budget",
                "dataset": dataset,
                "epsilon": str(dec(epsilon)),
                "delta": str(dec(delta)),
            }
            detail: dict[str, Any] = {}
            if policy is not None:
                detail["policy"] = policy.to_dict()
            if per_period:
                detail["per_period"] = True
                if cap is not None:
                    detail["lifetime_epsilon"] = str(dec(cap))
                detail["period_format"] = fmt
            if detail:
                row["detail"] = detail
            append_row(conn, self.url, row)
            return self._status(conn, dataset)

        return self._write(body)  # type: ignore[return-value]

    def budget(self, dataset: str, period: str | None = None) -> BudgetStatus | None:
        """The dataset's budget status, or None when no budget was ever set.

        ``period`` (a dataset with a per-period budget): the status of that period (what it
        spent and has left). Ignored for a dataset with a lifetime budget.
        """

        def body(conn: Conn) -> BudgetStatus | None:
            status = self._status(conn, dataset)
            if status is None or period is None or not status.per_period:
                return status
            return status.period_status(period)

        return self._read(body)

    def period_format(self, dataset: str) -> str | None:
        """How the periods of ``dataset`` are written (:mod:`release_store.ledger.periods`);
        None when its budget is not per period (or it has none)."""
        terms = self._read(lambda conn: self._terms(conn, dataset))
        return terms.period_format if terms is not None and terms.per_period else None

    def datasets(self) -> list[BudgetStatus]:
        """Budget status of every dataset that has a budget, sorted by name."""

        def body(conn: Conn) -> list[BudgetStatus]:
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT dataset FROM ledger WHERE kind = 'budget' ORDER BY dataset"
                )
            ]
            return [s for s in (self._status(conn, n) for n in names) if s is not None]

        return self._read(body)

    # -- reservations and charges ----------------------------------------------------------
    def reserve(
        self,
        dataset: str,
        release_id: str,
        planned: Sequence[PlannedCharge],
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        flow_run_id: str | None = None,
        period: str | None = None,
    ) -> Reservation:
        """Atomically check the budget and reserve a whole release's (epsilon, delta).

        Idempotent: reserving the same release id again with the same dataset, plan, totals
        and period returns the existing reservation (a resumed run).

        Args:
            dataset: the dataset id whose budget pays.
            release_id: the release id (unique across datasets).
            planned: the stages that will draw noise (unique stage names, at least one).
            epsilon: the release's total epsilon (its composed guarantee); defaults to the sum of
                the stage shares, which must not exceed it.
            delta: the release's total delta; defaults to the sum of the stage deltas.
            flow_run_id: Prefect flow-run id, recorded for audit.
            period: the period released (``sds release --period V``): required by a dataset
                whose budget is per period, refused by one with a lifetime budget. Recorded in
                the reserve row's ``detail`` (chained); the release is paid from that period's
                budget and from the lifetime cap across periods, if the dataset has one.

        Raises:
            BudgetExceededError: no budget set, or the release needs more than is left (of the
                period's budget, or of the cap across periods).
            PeriodMismatchError: a period given for a lifetime budget, or none for a per-period
                one.
            LedgerConflictError: the release id is already reserved with something else.
            SdsInputError: invalid plan, totals or period.
        """
        check_name("dataset", dataset)
        check_name("release id", release_id)
        if period is not None:
            check_name("period", period)
        plan, total = validate_plan(planned, epsilon, delta)
        detail: dict[str, Any] = {"planned": [asdict(p) for p in plan]}
        if period is not None:
            detail["period"] = period

        def body(conn: Conn) -> Reservation:
            existing = self._reservation(conn, release_id)
            if existing is not None:
                same = (
                    existing.dataset == dataset
                    and existing.initial_plan == plan
                    and existing.period == period
                    and self._total(conn, release_id) == total
                )
                if not same:
                    raise LedgerConflictError(
                        f"release id {release_id!r} is already reserved with another dataset, "
                        "plan, period or budget; choose a new release id (or resume with the "
                        "same settings)"
                    )
                if existing.status == "cancelled":
                    raise LedgerConflictError(
                        f"release id {release_id!r} was already used by a release that failed "
                        "or was cancelled; start a new release id (leave out --release-id to "
                        "get a fresh one)"
                    )
                return existing
            terms = self._terms(conn, dataset)
            if terms is None:
                each = " --per-period" if period is not None else ""
                raise BudgetExceededError(
                    f"dataset {dataset!r} has no privacy budget; set one with "
                    f"`sds budget set {dataset} --epsilon E --delta D{each}`"
                )
            mismatch = period_refusal(dataset, terms.per_period, period, float(terms.life[0]))
            if mismatch is None and terms.per_period and period is not None:
                problem = label_problem(period, terms.period_format)
                if problem is not None:
                    mismatch = (
                        f"{problem} (dataset {dataset!r} records its periods as "
                        f"{terms.period_format}: the config's period_format must be that "
                        "format); nothing was reserved or charged"
                    )
            if mismatch is not None:
                raise PeriodMismatchError(mismatch)
            if terms.policy is not None:
                refusal = terms.policy.refusal(
                    dataset, release_id, float(total[0]), float(total[1])
                )
                if refusal is not None:
                    raise PolicyExceededError(refusal)
            usage = self._usage(conn, dataset)
            with localcontext() as ctx:
                ctx.prec = 60
                if terms.per_period:
                    spent, held = usage.get(period, _NOTHING)
                else:
                    spent, held = _total_use(usage)
                life = terms.life
                left = (life[0] - spent[0] - held[0], life[1] - spent[1] - held[1])
                what = (
                    f"period {period!r} of dataset {dataset!r}"
                    if terms.per_period
                    else f"dataset {dataset!r}"
                )
                of = "its per-period budget" if terms.per_period else "its lifetime"
                if terms.per_period and terms.cap is not None:
                    all_spent, all_held = _total_use(usage)
                    cap_left = terms.cap - all_spent[0] - all_held[0]
                    if total[0] > cap_left and total[0] <= left[0]:
                        raise BudgetExceededError(
                            f"release {release_id!r} of period {period!r} needs "
                            f"epsilon={float(total[0])} but dataset {dataset!r} has only "
                            f"epsilon={float(cap_left)} left of its lifetime cap across periods "
                            f"(epsilon={float(terms.cap)}); release with a smaller --epsilon or "
                            f"raise the cap with `sds budget set {dataset} --epsilon E "
                            "--per-period --lifetime-epsilon L`"
                        )
            if total[0] > left[0] or total[1] > left[1]:
                short = " and ".join(
                    name for name, i in (("epsilon", 0), ("delta", 1)) if total[i] > left[i]
                )
                each = " --per-period" if terms.per_period else ""
                raise BudgetExceededError(
                    f"release {release_id!r} needs (epsilon={float(total[0])}, "
                    f"delta={float(total[1])}) but {what} has only "
                    f"(epsilon={float(left[0])}, delta={float(left[1])}) left of {of} "
                    f"(epsilon={float(life[0])}, delta={float(life[1])}): not enough {short}; "
                    "release with a smaller --epsilon/--delta or raise the budget with "
                    f"`sds budget set {dataset} --epsilon E --delta D{each}`"
                )
            append_row(
                conn,
                self.url,
                {
                    "kind": "reserve",
                    "dataset": dataset,
                    "release_id": release_id,
                    "epsilon": str(total[0]),
                    "delta": str(total[1]),
                    "flow_run_id": flow_run_id,
                    "detail": detail,
                },
            )
            return self._reservation(conn, release_id)  # type: ignore[return-value]

        return self._write(body)

    def revise_plan(
        self,
        release_id: str,
        planned: Sequence[PlannedCharge],
        *,
        flow_run_id: str | None = None,
    ) -> Reservation:
        """Replace the per-stage plan of an open reservation, within the same total.

        The SDS plan (``release_store.config.planned``) chooses the reporting length and the split
        between lengths from the DP record count, after the ``count`` stage: the stages not yet
        charged get new shares, the release's (epsilon, delta) stays what was reserved. Recorded
        as a chained ``plan`` row; the reservation's ``planned`` is then the latest plan.
        Idempotent: the current plan again writes nothing (a resumed release).

        Raises:
            LedgerConflictError: no open reservation, or a charged stage whose share would
                change or vanish.
            SdsInputError: an invalid plan, or one whose shares exceed the reserved total.
        """
        check_name("release id", release_id)

        def body(conn: Conn) -> Reservation:
            res = self._reservation(conn, release_id)
            if res is None or res.status != "open":
                raise LedgerConflictError(
                    f"release {release_id!r} has no open reservation whose plan could be revised"
                )
            total = self._total(conn, release_id)
            # the stage shares must fit in the reserved total (validate_plan refuses more)
            plan, _ = validate_plan(planned, float(total[0]), float(total[1]))
            if plan == res.planned:
                return res
            new = {p.stage: p for p in plan}
            moved = sorted(
                s
                for s in self._charged(conn, release_id)
                if new.get(s) != next(p for p in res.planned if p.stage == s)
            )
            if moved:
                raise LedgerConflictError(
                    f"release {release_id!r} already charged {moved}: a revised plan must keep "
                    "their shares"
                )
            append_row(
                conn,
                self.url,
                {
                    "kind": "plan",
                    "dataset": res.dataset,
                    "release_id": release_id,
                    "epsilon": str(total[0]),
                    "delta": str(total[1]),
                    "flow_run_id": flow_run_id,
                    "detail": {"planned": [asdict(p) for p in plan]},
                },
            )
            return self._reservation(conn, release_id)  # type: ignore[return-value]

        return self._write(body)

    def charge(
        self,
        release_id: str,
        stage: str,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
        flow_run_id: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> ChargeRow:
        """Charge one planned stage, right before it draws noise; at most once per stage.

        A repeated charge of the same (release, stage) returns the existing row. Amounts given
        here must equal the plan's (a check that the stage draws what was reserved).
        ``detail`` (JSON) is recorded with a new charge, in the hash chain: ``aggregate-1``
        records where the release's δ goes (docs/ledger.md).

        Raises:
            LedgerConflictError: no reservation, stage not in the plan, amounts differ from the
                plan, or the release is closed and this stage was never charged.
        """

        def body(conn: Conn) -> ChargeRow:
            res = self._reservation(conn, release_id)
            if res is None:
                raise LedgerConflictError(
                    f"release {release_id!r} has no reservation; the budget step must reserve "
                    "before any stage is charged"
                )
            plan = {p.stage: p for p in res.planned}
            if stage not in plan:
                raise LedgerConflictError(
                    f"stage {stage!r} is not in the reservation of release {release_id!r} "
                    f"(planned: {', '.join(plan)}); it cannot draw noise"
                )
            p = plan[stage]
            asked = {"epsilon": epsilon, "delta": delta, "rho": rho}
            wrong = [
                f"{k}={v!r} (reserved {getattr(p, k)!r})"
                for k, v in asked.items()
                if v is not None and v != getattr(p, k)
            ]
            if wrong:
                raise LedgerConflictError(
                    f"stage {stage!r} of release {release_id!r} asks for {', '.join(wrong)}; a "
                    "stage can only draw what was reserved (resume with the original settings)"
                )
            row = conn.execute(
                "SELECT * FROM ledger WHERE kind = 'charge' AND release_id = ? AND stage = ?",
                (release_id, stage),
            ).fetchone()
            if row is not None:
                return ChargeRow.from_row(row)
            if res.status != "open":
                raise LedgerConflictError(
                    f"release {release_id!r} is {res.status}; stage {stage!r} cannot draw noise"
                )
            row = append_row(
                conn,
                self.url,
                {
                    "kind": "charge",
                    "dataset": res.dataset,
                    "release_id": release_id,
                    "stage": stage,
                    "mechanism": p.mechanism,
                    "epsilon": str(dec(p.epsilon)),
                    "delta": str(dec(p.delta)),
                    "rho": None if p.rho is None else repr(p.rho),
                    "flow_run_id": flow_run_id,
                    "detail": None if detail is None else dict(detail),
                },
            )
            return ChargeRow.from_row(row)

        return self._write(body)

    def cancel(self, release_id: str) -> CancelResult:
        """Close an abandoned release: keep what its drawn stages spent, give back the rest.

        Idempotent: cancelling a cancelled release returns the same result.

        Raises:
            LedgerConflictError: unknown release, or it is already complete.
        """
        return self._close(release_id, "cancelled")

    def complete(self, release_id: str) -> CancelResult:
        """Close a finished release; any stage never charged is given back (idempotent)."""
        return self._close(release_id, "completed")

    def _close(self, release_id: str, status: str) -> CancelResult:
        def body(conn: Conn) -> CancelResult:
            res = self._reservation(conn, release_id)
            if res is None:
                raise LedgerConflictError(
                    f"release {release_id!r} has no reservation in the ledger"
                )
            charged = self._charged(conn, release_id)
            order = [p.stage for p in res.planned]
            stages = (
                tuple(s for s in order if s in charged),
                tuple(s for s in order if s not in charged),
            )
            if res.status != "open":
                if res.status != status:
                    raise LedgerConflictError(f"release {release_id!r} is already {res.status}")
                row = conn.execute(
                    "SELECT * FROM ledger WHERE kind = 'close' AND release_id = ?", (release_id,)
                ).fetchone()
                back = json.loads(row["detail"])
                return CancelResult(
                    release_id,
                    status,
                    float(row["epsilon"]),
                    float(row["delta"]),
                    float(back["epsilon_returned"]),
                    float(back["delta_returned"]),
                    *stages,
                )
            total = self._total(conn, release_id)
            spent = partial_spend(res.planned, charged, total)
            back = (total[0] - spent[0], total[1] - spent[1])
            append_row(
                conn,
                self.url,
                {
                    "kind": "close",
                    "dataset": res.dataset,
                    "release_id": release_id,
                    "mechanism": status,
                    "epsilon": str(spent[0]),
                    "delta": str(spent[1]),
                    "detail": {
                        "status": status,
                        "epsilon_returned": str(back[0]),
                        "delta_returned": str(back[1]),
                        "stages_returned": list(stages[1]),
                    },
                },
            )
            return CancelResult(
                release_id,
                status,
                float(spent[0]),
                float(spent[1]),
                float(back[0]),
                float(back[1]),
                *stages,
            )

        return self._write(body)

    # -- migration (release_store.ledger.migration) ---------------------------------------
    def rows(self) -> list[dict[str, Any]]:
        """Every row, verbatim (all columns incl. ``hash``), in chain order."""
        columns = (*FIELDS, "hash")
        sql = f"SELECT {', '.join(columns)} FROM ledger ORDER BY seq"
        return self._read(
            lambda conn: [dict(zip(columns, r, strict=True)) for r in conn.execute(sql)]
        )

    def extend_chain(self, rows: Sequence[dict[str, Any]]) -> int:
        """Append ``rows`` verbatim (same seq, times and hashes) after this ledger's own rows,
        which must be exactly the first rows of ``rows`` (or begin with all of them: nothing
        to do); returns how many were appended.

        Raises:
            LedgerConflictError: this ledger holds rows that are not a prefix of ``rows``.
        """
        columns = (*FIELDS, "hash")

        def body(conn: Conn) -> int:
            mine = [(r[0], r[1]) for r in conn.execute("SELECT seq, hash FROM ledger ORDER BY seq")]
            theirs = [(r["seq"], r["hash"]) for r in rows]
            if mine[: len(theirs)] != theirs[: len(mine)]:
                raise LedgerConflictError(
                    f"the ledger {self.url} already holds {len(mine)} rows that are not the "
                    "start of the ledger being copied; migrate into an empty database"
                )
            if len(mine) >= len(theirs):
                return 0  # copied before (and maybe written to since)
            new = rows[len(mine) :]
            for r in new:
                conn.execute(
                    f"INSERT INTO ledger ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' * len(columns))})",
                    [r[c] for c in columns],
                )
            if rows:
                conn.execute(
                    "UPDATE meta SET value = ? WHERE key = 'head_seq'", (str(rows[-1]["seq"]),)
                )
                conn.execute(
                    "UPDATE meta SET value = ? WHERE key = 'head_hash'", (rows[-1]["hash"],)
                )
            return len(new)

        return self._write(body)

    def mark_moved(self, to_url: str, head: tuple[int, str]) -> None:
        """Make this ledger read-only, pointing to ``to_url`` (redacted), if its head is still
        ``head`` (nothing was appended since it was copied).

        Raises:
            LedgerConflictError: rows were appended since the copy; migrate again.
        """

        def body(conn: Conn) -> None:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if (int(meta["head_seq"]), meta["head_hash"]) != head:
                raise LedgerConflictError(
                    f"the ledger {self.url} was written to during the migration; run "
                    "`sds ledger migrate` again (it copies only the new rows)"
                )
            conn.execute("INSERT INTO meta (key, value) VALUES ('moved_to', ?)", (to_url,))

        self._write(body)

    def moved_to(self) -> str | None:
        """Where the ledger was migrated to (redacted URL), or None."""

        def body(conn: Conn) -> str | None:
            row = conn.execute("SELECT value FROM meta WHERE key = 'moved_to'").fetchone()
            return None if row is None else str(row[0])

        return self._read(body)

    # -- queries ---------------------------------------------------------------------------
    def reservation(self, release_id: str) -> Reservation | None:
        """The release's reservation (with its current status), or None."""
        return self._read(lambda conn: self._reservation(conn, release_id))

    def reservations(self, dataset: str | None = None) -> list[Reservation]:
        """All reservations (any status) in ledger order, optionally of one dataset."""

        def body(conn: Conn) -> list[Reservation]:
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT release_id FROM ledger WHERE kind = 'reserve' AND dataset = "
                    "coalesce(?, dataset) ORDER BY seq",
                    (dataset,),
                )
            ]
            return [res for res in (self._reservation(conn, i) for i in ids) if res is not None]

        return self._read(body)

    def charges(self, dataset: str | None = None, release_id: str | None = None) -> list[ChargeRow]:
        """Charge rows in ledger order, optionally for one dataset and/or release."""
        sql, args = "SELECT * FROM ledger WHERE kind = 'charge'", list[str]()
        for column, value in (("dataset", dataset), ("release_id", release_id)):
            if value is not None:
                sql, args = f"{sql} AND {column} = ?", [*args, value]
        return self._read(
            lambda conn: [ChargeRow.from_row(r) for r in conn.execute(sql + " ORDER BY seq", args)]
        )

    def spent(self, release_id: str) -> tuple[float, float] | None:
        """(epsilon, delta) the release has spent so far (final once closed); None if unknown."""

        def body(conn: Conn) -> tuple[float, float] | None:
            if self._reservation(conn, release_id) is None:
                return None
            spent, _ = self._spent_and_held(conn, release_id)
            return float(spent[0]), float(spent[1])

        return self._read(body)

    def verify(self) -> VerifyReport:
        """Check the whole hash chain and head (see
        :func:`release_store.ledger.chain.verify_chain`)."""
        return self._read(lambda conn: verify_chain(conn))

    def head(self) -> tuple[int, str]:
        """(seq, hash) of the last row: record it in a manifest to anchor the chain externally."""

        def body(conn: Conn) -> tuple[int, str]:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            return int(meta["head_seq"]), meta["head_hash"]

        return self._read(body)

    def hash_at(self, seq: int) -> str | None:
        """The stored hash of row ``seq``, or None when the ledger has no such row."""

        def body(conn: Conn) -> str | None:
            row = conn.execute("SELECT hash FROM ledger WHERE seq = ?", (seq,)).fetchone()
            return None if row is None else str(row[0])

        return self._read(body)

    # -- internals -------------------------------------------------------------------------
    @staticmethod
    def _charged(conn: Conn, release_id: str) -> set[str]:
        return {
            r[0]
            for r in conn.execute(
                "SELECT stage FROM ledger WHERE kind = 'charge' AND release_id = ?", (release_id,)
            )
        }

    @staticmethod
    def _total(conn: Conn, release_id: str) -> tuple[Decimal, Decimal]:
        """The exact reserved (epsilon, delta) of a release (from the stored decimal text)."""
        row = conn.execute(
            "SELECT epsilon, delta FROM ledger WHERE kind = 'reserve' AND release_id = ?",
            (release_id,),
        ).fetchone()
        return dec(row[0]), dec(row[1])

    @staticmethod
    def _reservation(conn: Conn, release_id: str) -> Reservation | None:
        row = conn.execute(
            "SELECT * FROM ledger WHERE kind = 'reserve' AND release_id = ?", (release_id,)
        ).fetchone()
        if row is None:
            return None
        closed = conn.execute(
            "SELECT mechanism FROM ledger WHERE kind = 'close' AND release_id = ?", (release_id,)
        ).fetchone()
        detail = json.loads(row["detail"])
        revised = conn.execute(  # the latest revision of the plan (revise_plan), if any
            "SELECT detail FROM ledger WHERE kind = 'plan' AND release_id = ? "
            "ORDER BY seq DESC LIMIT 1",
            (release_id,),
        ).fetchone()
        reserved = tuple(PlannedCharge(**p) for p in detail["planned"])
        plan = (
            reserved
            if revised is None
            else tuple(PlannedCharge(**p) for p in json.loads(revised[0])["planned"])
        )
        return Reservation(
            row["dataset"],
            release_id,
            float(row["epsilon"]),
            float(row["delta"]),
            plan,
            closed[0] if closed else "open",
            row["created_at"],
            row["flow_run_id"],
            detail.get("period"),
            () if revised is None else reserved,
        )

    def _spent_and_held(
        self, conn: Conn, release_id: str
    ) -> tuple[tuple[Decimal, Decimal], tuple[Decimal, Decimal]]:
        """(spent, still held) of a reserved release: closed => final spend, nothing held."""
        close = conn.execute(
            "SELECT epsilon, delta FROM ledger WHERE kind = 'close' AND release_id = ?",
            (release_id,),
        ).fetchone()
        if close is not None:
            return (dec(close[0]), dec(close[1])), (Decimal(0), Decimal(0))
        res = self._reservation(conn, release_id)
        assert res is not None
        total = self._total(conn, release_id)
        part = partial_spend(res.planned, self._charged(conn, release_id), total)
        with localcontext() as ctx:
            ctx.prec = 60
            return part, (total[0] - part[0], total[1] - part[1])

    def _terms(self, conn: Conn, dataset: str) -> _Terms | None:
        """The dataset's latest budget row (None: no budget was ever set)."""
        last = conn.execute(
            "SELECT epsilon, delta, detail FROM ledger WHERE kind = 'budget' AND "
            "dataset = ? ORDER BY seq DESC LIMIT 1",
            (dataset,),
        ).fetchone()
        if last is None:
            return None
        detail = json.loads(last[2]) if last[2] else {}
        detail = detail if isinstance(detail, dict) else {}
        policy = detail.get("policy")
        cap = detail.get("lifetime_epsilon")
        return _Terms(
            (dec(last[0]), dec(last[1])),
            bool(detail.get("per_period", False)),
            None if cap is None else dec(cap),
            None if policy is None else ReleasePolicy(**policy),
            str(detail.get("period_format", DEFAULT_PERIOD_FORMAT)),
        )

    def _usage(self, conn: Conn, dataset: str) -> dict[str | None, _Use]:
        """Exact (spent, held) [epsilon, delta] pairs of the dataset's reservations, summed per
        period (None: releases without a period)."""
        usage: dict[str | None, _Use] = {}
        with localcontext() as ctx:
            ctx.prec = 60
            for (release_id,) in conn.execute(
                "SELECT release_id FROM ledger WHERE kind = 'reserve' AND dataset = ? ORDER BY seq",
                (dataset,),
            ).fetchall():
                res = self._reservation(conn, release_id)
                assert res is not None
                part, rest = self._spent_and_held(conn, release_id)
                spent, held = usage.get(res.period, _NOTHING)
                usage[res.period] = (
                    (spent[0] + part[0], spent[1] + part[1]),
                    (held[0] + rest[0], held[1] + rest[1]),
                )
        return usage

    def _status(self, conn: Conn, dataset: str) -> BudgetStatus | None:
        terms = self._terms(conn, dataset)
        if terms is None:
            return None
        usage = self._usage(conn, dataset)
        life = terms.life
        with localcontext() as ctx:
            ctx.prec = 60
            spent, held = _total_use(usage)
            cap_left = None if terms.cap is None else terms.cap - spent[0] - held[0]

            def left_of(use: _Use) -> tuple[Decimal, Decimal]:
                eps = life[0] - use[0][0] - use[1][0]
                if cap_left is not None:
                    eps = min(eps, cap_left)
                return eps, life[1] - use[0][1] - use[1][1]

            left = left_of(_NOTHING if terms.per_period else (spent, held))

        def status(
            period: str | None, use: _Use, remaining: tuple[Decimal, Decimal]
        ) -> BudgetStatus:
            return BudgetStatus(
                dataset,
                float(life[0]),
                float(life[1]),
                float(use[0][0]),
                float(use[0][1]),
                float(use[1][0]),
                float(use[1][1]),
                float(remaining[0]),
                float(remaining[1]),
                policy=terms.policy,
                per_period=terms.per_period,
                period=period,
                lifetime_epsilon=None if terms.cap is None else float(terms.cap),
                epsilon_cap_remaining=None if cap_left is None else float(cap_left),
            )

        periods = tuple(
            status(name, use, left_of(use))
            for name, use in sorted(
                ((n, u) for n, u in usage.items() if n is not None), key=lambda nu: nu[0]
            )
            if terms.per_period
        )
        return replace(status(None, (spent, held), left), periods=periods)


_Use = tuple[tuple[Decimal, Decimal], tuple[Decimal, Decimal]]
"""(spent, held), each an exact (epsilon, delta) pair."""

_NOTHING: _Use = ((Decimal(0), Decimal(0)), (Decimal(0), Decimal(0)))


@dataclass(frozen=True, slots=True)
class _Terms:
    """A dataset's latest budget row: the (epsilon, delta) budget (lifetime, or of each period
    when ``per_period``), the cap across periods and the per-release policy."""

    life: tuple[Decimal, Decimal]
    per_period: bool
    cap: Decimal | None
    policy: ReleasePolicy | None
    period_format: str = DEFAULT_PERIOD_FORMAT  # recorded before formats existed: YYYY-MM


def _total_use(usage: dict[str | None, _Use]) -> _Use:
    """(spent, held) of every reservation of a dataset together (60-digit sums)."""
    spent, held = [Decimal(0), Decimal(0)], [Decimal(0), Decimal(0)]
    with localcontext() as ctx:
        ctx.prec = 60
        for part, rest in usage.values():
            for i in (0, 1):
                spent[i] += part[i]
                held[i] += rest[i]
    return (spent[0], spent[1]), (held[0], held[1])


def _used(use: _Use) -> tuple[Decimal, Decimal]:
    with localcontext() as ctx:
        ctx.prec = 60
        return use[0][0] + use[1][0], use[0][1] + use[1][1]


def _check_kind_change(
    dataset: str, terms: _Terms, usage: dict[str | None, _Use], *, per_period: bool
) -> None:
    """Refuse turning a budget from lifetime into per period (or back) once anything is spent
    or reserved: earlier spend cannot be apportioned to periods."""
    if terms.per_period == per_period:
        return
    used = _used(_total_use(usage))
    if used[0] <= 0 and used[1] <= 0:
        return
    if per_period:
        raise SdsInputError(
            f"--per-period: dataset {dataset!r} has already spent (epsilon={float(used[0])}, "
            f"delta={float(used[1])}) from its lifetime budget, and that spend cannot be "
            "split into periods; release the periods under a new dataset id (e.g. "
            f"`sds budget set {dataset}-monthly --epsilon E --per-period` and --dataset "
            f"{dataset}-monthly), or keep the lifetime budget (leave out --per-period)"
        )
    raise SdsInputError(
        f"dataset {dataset!r} has a per-period budget and its periods have spent "
        f"(epsilon={float(used[0])}, delta={float(used[1])}); pass --per-period to change the "
        "budget of each period (a budget cannot turn back into a lifetime budget once a "
        "period has spent)"
    )


def _check_not_below_use(
    dataset: str,
    usage: dict[str | None, _Use],
    epsilon: float,
    delta: float,
    per_period: bool,
    cap: float | None,
) -> None:
    """Refuse a new budget below what is already spent plus reserved: by the dataset (a
    lifetime budget), by any one period (per period) or by all periods together (the cap)."""
    if per_period:
        for period, use in usage.items():
            used = _used(use)
            if dec(epsilon) < used[0] or dec(delta) < used[1]:
                raise SdsInputError(
                    f"cannot set the per-period budget of dataset {dataset!r} to "
                    f"(epsilon={epsilon}, delta={delta}): period {period!r} has already spent "
                    f"or reserved (epsilon={float(used[0])}, delta={float(used[1])}); choose "
                    "a budget at least that large"
                )
        used = _used(_total_use(usage))
        if cap is not None and dec(cap) < used[0]:
            raise SdsInputError(
                f"cannot cap the periods of dataset {dataset!r} at --lifetime-epsilon {cap}: "
                f"together they have already spent or reserved epsilon={float(used[0])}; choose "
                "a cap at least that large"
            )
        return
    used = _used(_total_use(usage))
    if dec(epsilon) < used[0] or dec(delta) < used[1]:
        raise SdsInputError(
            f"cannot set the budget of dataset {dataset!r} to (epsilon={epsilon}, "
            f"delta={delta}): (epsilon={float(used[0])}, delta={float(used[1])}) is "
            "already spent or reserved; choose a budget at least that large"
        )


def _user_at_host() -> str:
    """``user@host`` of this process: who set a policy, as the ledger records it."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without /etc/passwd entry)
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"
