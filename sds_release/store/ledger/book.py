"""The privacy-budget ledger, behind a ledger URL: :class:`Ledger`, the one way in.

A release *reserves* its whole (epsilon, delta), *charges* each stage before it draws noise and
is closed by ``complete``/``cancel``. Each call is one transaction of its backend; its rules live
in ``budgets`` and ``reservations``, its reads in ``queries``. No Prefect. Rules: docs/ledger.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from sds_core.errors import SdsInputError
from sds_release.store.ledger import queries
from sds_release.store.ledger.backends import (
    BUSY_TIMEOUT_S,
    Conn,
    LedgerStore,
    SqliteStore,
    open_store,
    resolve_ledger_url,
)
from sds_release.store.ledger.budgets import append_budget, budget_status, check_budget_request
from sds_release.store.ledger.chain import VerifyReport, copy_rows, verify_chain
from sds_release.store.ledger.reservations import (
    append_charge,
    append_close,
    append_plan,
    append_reserve,
)
from sds_release.store.ledger.values import (
    BudgetStatus,
    CancelResult,
    ChargeRow,
    LedgerConflictError,
    PlannedCharge,
    Reservation,
    check_name,
    validate_plan,
)

__all__ = ["Ledger", "LedgerMovedError"]

T = TypeVar("T")


class LedgerMovedError(SdsInputError):
    """The ledger was migrated elsewhere (``sds ledger migrate``); it only answers reads now."""


class Ledger:
    """The privacy-budget ledger behind a ledger URL (SQLite file or PostgreSQL database).

    Every write is one serialized transaction of its backend
    (:mod:`sds_release.store.ledger.backends`); every read one consistent snapshot. Each call
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
            moved = queries.moved_to(conn)
            if moved is not None:
                raise LedgerMovedError(
                    f"the ledger {self.url} was migrated to {moved} and is read-only: "
                    f"use --ledger {moved} (or SDS_LEDGER_URL) for every command"
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
        (:mod:`sds_release.store.ledger.periods`; kept when not given, else YYYY-MM): every period
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
        check_budget_request(
            dataset,
            epsilon=epsilon,
            delta=delta,
            max_epsilon_per_release=max_epsilon_per_release,
            max_delta_per_release=max_delta_per_release,
            clear_policy=clear_policy,
            per_period=per_period,
            lifetime_epsilon=lifetime_epsilon,
            period_format=period_format,
        )
        return self._write(  # type: ignore[return-value]
            lambda conn: append_budget(
                conn,
                self.url,
                dataset,
                epsilon=epsilon,
                delta=delta,
                max_epsilon_per_release=max_epsilon_per_release,
                max_delta_per_release=max_delta_per_release,
                clear_policy=clear_policy,
                set_by=set_by,
                per_period=per_period,
                lifetime_epsilon=lifetime_epsilon,
                period_format=period_format,
            )
        )

    def budget(self, dataset: str, period: str | None = None) -> BudgetStatus | None:
        """The dataset's budget status, or None when no budget was ever set.

        ``period`` (a dataset with a per-period budget): the status of that period (what it
        spent and has left). Ignored for a dataset with a lifetime budget.
        """

        def body(conn: Conn) -> BudgetStatus | None:
            status = budget_status(conn, dataset)
            if status is None or period is None or not status.per_period:
                return status
            return status.period_status(period)

        return self._read(body)

    def period_format(self, dataset: str) -> str | None:
        """How the periods of ``dataset`` are written (:mod:`sds_release.store.ledger.periods`);
        None when its budget is not per period (or it has none)."""
        terms = self._read(lambda conn: queries.budget_terms(conn, dataset))
        return terms.period_format if terms is not None and terms.per_period else None

    def privacy_unit(self, dataset: str) -> tuple[str, str] | None:
        """(unit, release id): the record the releases of ``dataset`` count, as its first
        release that may spend recorded it (:mod:`sds_release.store.ledger.units`); None: none
        yet."""
        return self._read(lambda conn: queries.dataset_unit(conn, dataset))

    def datasets(self) -> list[BudgetStatus]:
        """Budget status of every dataset that has a budget, sorted by name."""

        def body(conn: Conn) -> list[BudgetStatus]:
            names = queries.budget_datasets(conn)
            return [s for s in (budget_status(conn, n) for n in names) if s is not None]

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
        unit: str | None = None,
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
            unit: the record the release counts (:func:`sds_release.store.ledger.units.privacy_unit`
                of its subject id): recorded in the ``detail``, and refused when the dataset's
                earlier releases count another (None: not recorded, not checked).

        Raises:
            BudgetExceededError: no budget set, or the release needs more than is left (of the
                period's budget, or of the cap across periods).
            PeriodMismatchError: a period given for a lifetime budget, or none for a per-period
                one.
            UnitMismatchError: the dataset's earlier releases count another record.
            LedgerConflictError: the release id is already reserved with something else.
            SdsInputError: invalid plan, totals or period.
        """
        check_name("dataset", dataset)
        check_name("release id", release_id)
        if period is not None:
            check_name("period", period)
        plan, total = validate_plan(planned, epsilon, delta)
        return self._write(
            lambda conn: append_reserve(
                conn,
                self.url,
                dataset,
                release_id,
                plan,
                total,
                flow_run_id=flow_run_id,
                period=period,
                unit=unit,
            )
        )

    def revise_plan(
        self,
        release_id: str,
        planned: Sequence[PlannedCharge],
        *,
        flow_run_id: str | None = None,
    ) -> Reservation:
        """Replace the per-stage plan of an open reservation, within the same total.

        The SDS plan (``sds_release.store.config.planned``) chooses the reporting length and the
        split between lengths from the DP record count, after the ``count`` stage: the stages not
        yet charged get new shares, the release's (epsilon, delta) stays what was reserved. Recorded
        as a chained ``plan`` row; the reservation's ``planned`` is then the latest plan.
        Idempotent: the current plan again writes nothing (a resumed release).

        Raises:
            LedgerConflictError: no open reservation, or a charged stage whose share would
                change or vanish.
            SdsInputError: an invalid plan, or one whose shares exceed the reserved total.
        """
        check_name("release id", release_id)
        return self._write(
            lambda conn: append_plan(conn, self.url, release_id, planned, flow_run_id=flow_run_id)
        )

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
        return self._write(
            lambda conn: append_charge(
                conn,
                self.url,
                release_id,
                stage,
                epsilon=epsilon,
                delta=delta,
                rho=rho,
                flow_run_id=flow_run_id,
                detail=detail,
            )
        )

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
        return self._write(lambda conn: append_close(conn, self.url, release_id, status))

    # -- migration (sds_release.store.ledger.migration) ---------------------------------------
    def rows(self) -> list[dict[str, Any]]:
        """Every row, verbatim (all columns incl. ``hash``), in chain order."""
        return self._read(queries.all_rows)

    def extend_chain(self, rows: Sequence[dict[str, Any]]) -> int:
        """Append ``rows`` verbatim (same seq, times and hashes) after this ledger's own rows,
        which must be exactly the first rows of ``rows`` (or begin with all of them: nothing
        to do); returns how many were appended.

        Raises:
            LedgerConflictError: this ledger holds rows that are not a prefix of ``rows``.
        """
        return self._write(lambda conn: copy_rows(conn, self.url, rows))

    def mark_moved(self, to_url: str, head: tuple[int, str]) -> None:
        """Make this ledger read-only, pointing to ``to_url`` (redacted), if its head is still
        ``head`` (nothing was appended since it was copied).

        Raises:
            LedgerConflictError: rows were appended since the copy; migrate again.
        """

        def body(conn: Conn) -> None:
            if queries.head(conn) != head:
                raise LedgerConflictError(
                    f"the ledger {self.url} was written to during the migration; run "
                    "`sds ledger migrate` again (it copies only the new rows)"
                )
            conn.execute("INSERT INTO meta (key, value) VALUES ('moved_to', ?)", (to_url,))

        self._write(body)

    def moved_to(self) -> str | None:
        """Where the ledger was migrated to (redacted URL), or None."""
        return self._read(queries.moved_to)

    # -- queries ---------------------------------------------------------------------------
    def reservation(self, release_id: str) -> Reservation | None:
        """The release's reservation (with its current status), or None."""
        return self._read(lambda conn: queries.reservation_of(conn, release_id))

    def reservations(self, dataset: str | None = None) -> list[Reservation]:
        """All reservations (any status) in ledger order, optionally of one dataset."""

        def body(conn: Conn) -> list[Reservation]:
            ids = queries.reservation_ids(conn, dataset)
            return [
                res for res in (queries.reservation_of(conn, i) for i in ids) if res is not None
            ]

        return self._read(body)

    def charges(self, dataset: str | None = None, release_id: str | None = None) -> list[ChargeRow]:
        """Charge rows in ledger order, optionally for one dataset and/or release."""
        return self._read(lambda conn: queries.charge_rows(conn, dataset, release_id))

    def spent(self, release_id: str) -> tuple[float, float] | None:
        """(epsilon, delta) the release has spent so far (final once closed); None if unknown."""

        def body(conn: Conn) -> tuple[float, float] | None:
            if queries.reservation_of(conn, release_id) is None:
                return None
            spent, _ = queries.spent_and_held(conn, release_id)
            return float(spent[0]), float(spent[1])

        return self._read(body)

    def verify(self) -> VerifyReport:
        """Check the whole hash chain and head (see
        :func:`sds_release.store.ledger.chain.verify_chain`)."""
        return self._read(lambda conn: verify_chain(conn))

    def head(self) -> tuple[int, str]:
        """(seq, hash) of the last row: record it in a manifest to anchor the chain externally."""
        return self._read(queries.head)

    def hash_at(self, seq: int) -> str | None:
        """The stored hash of row ``seq``, or None when the ledger has no such row."""
        return self._read(lambda conn: queries.hash_at(conn, seq))
