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
from collections.abc import Callable, Sequence
from dataclasses import asdict
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
from release_store.ledger.values import (
    BudgetExceededError,
    BudgetStatus,
    CancelResult,
    ChargeRow,
    LedgerConflictError,
    PlannedCharge,
    PolicyExceededError,
    ReleasePolicy,
    Reservation,
    check_name,
    dec,
    partial_spend,
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
    def from_url(cls, url: str, *, busy_timeout: float = BUSY_TIMEOUT_S) -> Ledger:
        """Open (creating the tables if needed) the ledger at ``url``: ``sqlite:///PATH`` or
        ``postgresql://...``."""
        ledger = cls.__new__(cls)
        ledger._store = open_store(url, busy_timeout=busy_timeout)
        return ledger

    @classmethod
    def open(cls, home: str | Path, url: str | None = None) -> Ledger:
        """The ledger of a home: ``url`` (--ledger / config), else $SDS_LEDGER_URL, else
        ``home/ledger.sqlite``."""
        return cls.from_url(resolve_ledger_url(home, url))

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
    ) -> BudgetStatus:
        """Set a dataset's lifetime (epsilon, delta); recorded as a chained ``budget`` row.

        The row also holds the dataset's per-release policy (:class:`ReleasePolicy`), so it is in
        the hash chain: the limits given here, else the policy the dataset already has (raising a
        budget keeps its policy), else none; ``clear_policy`` removes it. ``set_by`` (default:
        this process's user@host) is recorded with it.

        Raises:
            SdsInputError: epsilon not finite and > 0, delta not in [0, 1), a per-release limit
                not > 0 or above the lifetime budget, or the new budget is below what is already
                spent plus reserved.
        """
        check_name("dataset", dataset)
        check_amount("--epsilon", epsilon)
        check_amount("--delta", delta, upper=1.0)
        if epsilon <= 0:
            raise SdsInputError(f"--epsilon must be > 0, got {epsilon!r}")
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
        if clear_policy and (max_epsilon_per_release or max_delta_per_release):
            raise SdsInputError(
                "--clear-policy removes the per-release policy: do not combine it with "
                "--max-epsilon-per-release or --max-delta-per-release"
            )
        given = max_epsilon_per_release is not None or max_delta_per_release is not None
        who = set_by or _user_at_host()

        def body(conn: Conn) -> BudgetStatus | None:
            exact = self._exact(conn, dataset)
            if exact is not None:
                _, spent, held = exact
                used = (spent[0] + held[0], spent[1] + held[1])
                if dec(epsilon) < used[0] or dec(delta) < used[1]:
                    raise SdsInputError(
                        f"cannot set the budget of dataset {dataset!r} to (epsilon={epsilon}, "
                        f"delta={delta}): (epsilon={float(used[0])}, delta={float(used[1])}) is "
                        "already spent or reserved; choose a budget at least that large"
                    )
            previous = None if exact is None else self._policy(conn, dataset)
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
            if policy is not None:
                row["detail"] = {"policy": policy.to_dict()}
            append_row(conn, self.url, row)
            return self._status(conn, dataset)

        return self._write(body)  # type: ignore[return-value]

    def budget(self, dataset: str) -> BudgetStatus | None:
        """The dataset's budget status, or None when no budget was ever set."""
        return self._read(lambda conn: self._status(conn, dataset))

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
    ) -> Reservation:
        """Atomically check the budget and reserve a whole release's (epsilon, delta).

        Idempotent: reserving the same release id again with the same dataset, plan and totals
        returns the existing reservation (a resumed run).

        Args:
            dataset: the dataset id whose lifetime budget pays.
            release_id: the release id (unique across datasets).
            planned: the stages that will draw noise (unique stage names, at least one).
            epsilon: the release's total epsilon (its composed guarantee); defaults to the sum of
                the stage shares, which must not exceed it.
            delta: the release's total delta; defaults to the sum of the stage deltas.
            flow_run_id: Prefect flow-run id, recorded for audit.

        Raises:
            BudgetExceededError: no budget set, or the release needs more than is left.
            LedgerConflictError: the release id is already reserved with something else.
            SdsInputError: invalid plan or totals.
        """
        check_name("dataset", dataset)
        check_name("release id", release_id)
        plan, total = validate_plan(planned, epsilon, delta)
        detail = {"planned": [asdict(p) for p in plan]}

        def body(conn: Conn) -> Reservation:
            existing = self._reservation(conn, release_id)
            if existing is not None:
                same = (
                    existing.dataset == dataset
                    and existing.planned == plan
                    and self._total(conn, release_id) == total
                )
                if not same:
                    raise LedgerConflictError(
                        f"release id {release_id!r} is already reserved with another dataset, "
                        "plan or budget; choose a new release id (or resume with the same "
                        "settings)"
                    )
                if existing.status == "cancelled":
                    raise LedgerConflictError(
                        f"release id {release_id!r} was already used by a release that failed "
                        "or was cancelled; start a new release id (leave out --release-id to "
                        "get a fresh one)"
                    )
                return existing
            exact = self._exact(conn, dataset)
            if exact is None:
                raise BudgetExceededError(
                    f"dataset {dataset!r} has no privacy budget; set one with "
                    f"`sds budget set {dataset} --epsilon E --delta D`"
                )
            policy = self._policy(conn, dataset)
            refusal = (
                None
                if policy is None
                else policy.refusal(dataset, release_id, float(total[0]), float(total[1]))
            )
            if refusal is not None:
                raise PolicyExceededError(refusal)
            life, spent, held = exact
            with localcontext() as ctx:
                ctx.prec = 60
                left = (life[0] - spent[0] - held[0], life[1] - spent[1] - held[1])
            if total[0] > left[0] or total[1] > left[1]:
                short = " and ".join(
                    name for name, i in (("epsilon", 0), ("delta", 1)) if total[i] > left[i]
                )
                raise BudgetExceededError(
                    f"release {release_id!r} needs (epsilon={float(total[0])}, "
                    f"delta={float(total[1])}) but dataset {dataset!r} has only "
                    f"(epsilon={float(left[0])}, delta={float(left[1])}) left of its lifetime "
                    f"(epsilon={float(life[0])}, delta={float(life[1])}): not enough {short}; "
                    "release with a smaller --epsilon/--delta or raise the budget with "
                    f"`sds budget set {dataset} --epsilon E --delta D`"
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

    def charge(
        self,
        release_id: str,
        stage: str,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
        flow_run_id: str | None = None,
    ) -> ChargeRow:
        """Charge one planned stage, right before it draws noise; at most once per stage.

        A repeated charge of the same (release, stage) returns the existing row. Amounts given
        here must equal the plan's (a check that the stage draws what was reserved).

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
        plan = tuple(PlannedCharge(**p) for p in json.loads(row["detail"])["planned"])
        return Reservation(
            row["dataset"],
            release_id,
            float(row["epsilon"]),
            float(row["delta"]),
            plan,
            closed[0] if closed else "open",
            row["created_at"],
            row["flow_run_id"],
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

    def _exact(
        self, conn: Conn, dataset: str
    ) -> tuple[list[Decimal], list[Decimal], list[Decimal]] | None:
        """Exact (lifetime, spent, held) of a dataset as [epsilon, delta] pairs; None: no budget."""
        last = conn.execute(
            "SELECT epsilon, delta FROM ledger WHERE kind = 'budget' AND "
            "dataset = ? ORDER BY seq DESC LIMIT 1",
            (dataset,),
        ).fetchone()
        if last is None:
            return None
        life = [dec(last["epsilon"]), dec(last["delta"])]
        spent, held = [Decimal(0), Decimal(0)], [Decimal(0), Decimal(0)]
        with localcontext() as ctx:
            ctx.prec = 60
            for (release_id,) in conn.execute(
                "SELECT release_id FROM ledger WHERE kind = 'reserve' AND dataset = ?", (dataset,)
            ).fetchall():
                part, rest = self._spent_and_held(conn, release_id)
                for i in (0, 1):
                    spent[i] += part[i]
                    held[i] += rest[i]
        return life, spent, held

    @staticmethod
    def _policy(conn: Conn, dataset: str) -> ReleasePolicy | None:
        """The per-release policy of the dataset's latest budget row (None: no policy)."""
        last = conn.execute(
            "SELECT detail FROM ledger WHERE kind = 'budget' AND "
            "dataset = ? ORDER BY seq DESC LIMIT 1",
            (dataset,),
        ).fetchone()
        detail = json.loads(last[0]) if last is not None and last[0] else {}
        policy = detail.get("policy") if isinstance(detail, dict) else None
        return None if policy is None else ReleasePolicy(**policy)

    def _status(self, conn: Conn, dataset: str) -> BudgetStatus | None:
        exact = self._exact(conn, dataset)
        if exact is None:
            return None
        life, spent, held = exact
        with localcontext() as ctx:
            ctx.prec = 60
            left = [life[i] - spent[i] - held[i] for i in (0, 1)]
        return BudgetStatus(
            dataset,
            float(life[0]),
            float(life[1]),
            float(spent[0]),
            float(spent[1]),
            float(held[0]),
            float(held[1]),
            float(left[0]),
            float(left[1]),
            self._policy(conn, dataset),
        )


def _user_at_host() -> str:
    """``user@host`` of this process: who set a policy, as the ledger records it."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without /etc/passwd entry)
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"
