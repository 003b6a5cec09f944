"""The ledger's read queries: what its rows say about a release, a dataset and the chain.

A release: its reservation (latest plan, status), the stages it charged, its exact reserved total
and what it spent and still holds. A dataset: its budget terms (the latest ``budget`` row) and
its use per period. Each runs inside the caller's transaction
(:mod:`sds_release.store.ledger.book`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import Any

from sds_release.store.ledger.backends import Conn
from sds_release.store.ledger.chain import FIELDS
from sds_release.store.ledger.periods import DEFAULT_PERIOD_FORMAT
from sds_release.store.ledger.values import (
    ChargeRow,
    PlannedCharge,
    ReleasePolicy,
    Reservation,
    dec,
    partial_spend,
)

__all__ = [
    "NOTHING",
    "Terms",
    "Use",
    "all_rows",
    "budget_datasets",
    "budget_terms",
    "charge_rows",
    "charged_stages",
    "dataset_unit",
    "dataset_usage",
    "hash_at",
    "head",
    "moved_to",
    "reservation_ids",
    "reservation_of",
    "reserved_total",
    "spent_and_held",
    "total_use",
    "used",
]

Use = tuple[tuple[Decimal, Decimal], tuple[Decimal, Decimal]]
"""(spent, held), each an exact (epsilon, delta) pair."""

NOTHING: Use = ((Decimal(0), Decimal(0)), (Decimal(0), Decimal(0)))


@dataclass(frozen=True, slots=True)
class Terms:
    """A dataset's latest budget row: the (epsilon, delta) budget (lifetime, or of each period
    when ``per_period``), the cap across periods and the per-release policy."""

    life: tuple[Decimal, Decimal]
    per_period: bool
    cap: Decimal | None
    policy: ReleasePolicy | None
    period_format: str = DEFAULT_PERIOD_FORMAT  # recorded before formats existed: YYYY-MM


# -- a release -------------------------------------------------------------------------------------
def charged_stages(conn: Conn, release_id: str) -> set[str]:
    """The stages of the release that have a charge row."""
    return {
        r[0]
        for r in conn.execute(
            "SELECT stage FROM ledger WHERE kind = 'charge' AND release_id = ?", (release_id,)
        )
    }


def reserved_total(conn: Conn, release_id: str) -> tuple[Decimal, Decimal]:
    """The exact reserved (epsilon, delta) of a release (from the stored decimal text)."""
    row = conn.execute(
        "SELECT epsilon, delta FROM ledger WHERE kind = 'reserve' AND release_id = ?",
        (release_id,),
    ).fetchone()
    return dec(row[0]), dec(row[1])


def reservation_of(conn: Conn, release_id: str) -> Reservation | None:
    """The release's reservation with its latest plan and its status, or None."""
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
        detail.get("unit"),
    )


def spent_and_held(
    conn: Conn, release_id: str
) -> tuple[tuple[Decimal, Decimal], tuple[Decimal, Decimal]]:
    """(spent, still held) of a reserved release: closed => final spend, nothing held."""
    close = conn.execute(
        "SELECT epsilon, delta FROM ledger WHERE kind = 'close' AND release_id = ?",
        (release_id,),
    ).fetchone()
    if close is not None:
        return (dec(close[0]), dec(close[1])), (Decimal(0), Decimal(0))
    res = reservation_of(conn, release_id)
    assert res is not None
    total = reserved_total(conn, release_id)
    part = partial_spend(res.planned, charged_stages(conn, release_id), total)
    with localcontext() as ctx:
        ctx.prec = 60
        return part, (total[0] - part[0], total[1] - part[1])


def reservation_ids(conn: Conn, dataset: str | None) -> list[str]:
    """The release ids of every reservation in ledger order (of one dataset, if given)."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT release_id FROM ledger WHERE kind = 'reserve' AND dataset = "
            "coalesce(?, dataset) ORDER BY seq",
            (dataset,),
        )
    ]


def dataset_unit(conn: Conn, dataset: str) -> tuple[str, str] | None:
    """(unit, release id) of the dataset's first reservation that records its unit and may
    spend (any but a cancelled one that spent nothing); None: no such reservation yet. One
    read of the reserve rows: a dataset's reservations made before units were recorded are
    skipped by their detail, not read one by one on every reservation."""
    rows = conn.execute(
        "SELECT release_id, detail FROM ledger WHERE kind = 'reserve' AND dataset = ? ORDER BY seq",
        (dataset,),
    ).fetchall()
    for row in rows:
        release_id, unit = row[0], json.loads(row[1]).get("unit")
        if unit is None:
            continue
        res = reservation_of(conn, release_id)
        cancelled = res is not None and res.status == "cancelled"
        if cancelled and spent_and_held(conn, release_id)[0] == NOTHING[0]:
            continue
        return unit, release_id
    return None


def charge_rows(conn: Conn, dataset: str | None, release_id: str | None) -> list[ChargeRow]:
    """Charge rows in ledger order, optionally for one dataset and/or release."""
    sql, args = "SELECT * FROM ledger WHERE kind = 'charge'", list[str]()
    for column, value in (("dataset", dataset), ("release_id", release_id)):
        if value is not None:
            sql, args = f"{sql} AND {column} = ?", [*args, value]
    return [ChargeRow.from_row(r) for r in conn.execute(sql + " ORDER BY seq", args)]


# -- a dataset -------------------------------------------------------------------------------------
def budget_terms(conn: Conn, dataset: str) -> Terms | None:
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
    return Terms(
        (dec(last[0]), dec(last[1])),
        bool(detail.get("per_period", False)),
        None if cap is None else dec(cap),
        None if policy is None else ReleasePolicy(**policy),
        str(detail.get("period_format", DEFAULT_PERIOD_FORMAT)),
    )


def dataset_usage(conn: Conn, dataset: str) -> dict[str | None, Use]:
    """Exact (spent, held) [epsilon, delta] pairs of the dataset's reservations, summed per
    period (None: releases without a period)."""
    usage: dict[str | None, Use] = {}
    with localcontext() as ctx:
        ctx.prec = 60
        for (release_id,) in conn.execute(
            "SELECT release_id FROM ledger WHERE kind = 'reserve' AND dataset = ? ORDER BY seq",
            (dataset,),
        ).fetchall():
            res = reservation_of(conn, release_id)
            assert res is not None
            part, rest = spent_and_held(conn, release_id)
            spent, held = usage.get(res.period, NOTHING)
            usage[res.period] = (
                (spent[0] + part[0], spent[1] + part[1]),
                (held[0] + rest[0], held[1] + rest[1]),
            )
    return usage


def budget_datasets(conn: Conn) -> list[str]:
    """The datasets that have a budget row, sorted by name."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT dataset FROM ledger WHERE kind = 'budget' ORDER BY dataset"
        )
    ]


def total_use(usage: dict[str | None, Use]) -> Use:
    """(spent, held) of every reservation of a dataset together (60-digit sums)."""
    spent, held = [Decimal(0), Decimal(0)], [Decimal(0), Decimal(0)]
    with localcontext() as ctx:
        ctx.prec = 60
        for part, rest in usage.values():
            for i in (0, 1):
                spent[i] += part[i]
                held[i] += rest[i]
    return (spent[0], spent[1]), (held[0], held[1])


def used(use: Use) -> tuple[Decimal, Decimal]:
    """Spent plus held: the (epsilon, delta) a use takes from its budget (60-digit sums)."""
    with localcontext() as ctx:
        ctx.prec = 60
        return use[0][0] + use[1][0], use[0][1] + use[1][1]


# -- the chain -------------------------------------------------------------------------------------
def all_rows(conn: Conn) -> list[dict[str, Any]]:
    """Every row, verbatim (all columns incl. ``hash``), in chain order."""
    columns = (*FIELDS, "hash")
    sql = f"SELECT {', '.join(columns)} FROM ledger ORDER BY seq"
    return [dict(zip(columns, r, strict=True)) for r in conn.execute(sql)]


def head(conn: Conn) -> tuple[int, str]:
    """(seq, hash) of the last row, as ``meta`` records it."""
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    return int(meta["head_seq"]), meta["head_hash"]


def hash_at(conn: Conn, seq: int) -> str | None:
    """The stored hash of row ``seq``, or None when the ledger has no such row."""
    row = conn.execute("SELECT hash FROM ledger WHERE seq = ?", (seq,)).fetchone()
    return None if row is None else str(row[0])


def moved_to(conn: Conn) -> str | None:
    """Where the ledger was migrated to (redacted URL), or None."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'moved_to'").fetchone()
    return None if row is None else str(row[0])
