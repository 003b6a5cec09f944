"""A release's reservation, from ``reserve`` to ``close``: the rule of each row it appends.

``reserve`` (once the budget agrees: :func:`~sds_release.store.ledger.budgets.check_fits`), ``plan``
(the SDS plan revising the stage shares within it), one ``charge`` per stage before it draws
noise, and ``close`` (kept what was charged, gave back the rest); in the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from decimal import Decimal
from typing import Any

from sds_release.store.ledger.backends import Conn
from sds_release.store.ledger.budgets import check_fits
from sds_release.store.ledger.chain import append_row
from sds_release.store.ledger.queries import (
    charged_stages,
    dataset_unit,
    reservation_of,
    reserved_total,
)
from sds_release.store.ledger.units import unit_refusal
from sds_release.store.ledger.values import (
    CancelResult,
    ChargeRow,
    LedgerConflictError,
    PlannedCharge,
    Reservation,
    UnitMismatchError,
    dec,
    partial_spend,
    validate_plan,
)

__all__ = ["append_charge", "append_close", "append_plan", "append_reserve"]


def append_reserve(
    conn: Conn,
    where: str,
    dataset: str,
    release_id: str,
    plan: tuple[PlannedCharge, ...],
    total: tuple[Decimal, Decimal],
    *,
    flow_run_id: str | None,
    period: str | None,
    unit: str | None = None,
) -> Reservation:
    """Reserve ``total`` for the release (``plan`` and ``total`` from
    :func:`sds_release.store.ledger.values.validate_plan`), or return the same reservation made
    before; ``where``: the ledger URL; ``unit``: the record the release counts, recorded and
    checked against the dataset's (:mod:`sds_release.store.ledger.units`; None: not recorded).

    Raises:
        LedgerConflictError: the release id is already reserved with something else.
        UnitMismatchError: the dataset's earlier releases count another record.
        BudgetExceededError, PeriodMismatchError, PolicyExceededError: from
            :func:`sds_release.store.ledger.budgets.check_fits`.
    """
    detail: dict[str, Any] = {"planned": [asdict(p) for p in plan]}
    if period is not None:
        detail["period"] = period
    if unit is not None:
        detail["unit"] = unit
    existing = reservation_of(conn, release_id)
    if existing is not None:
        same = (
            existing.dataset == dataset
            and existing.initial_plan == plan
            and existing.period == period
            and (None in (existing.unit, unit) or existing.unit == unit)
            and reserved_total(conn, release_id) == total
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
    if unit is not None and (kept := dataset_unit(conn, dataset)) is not None:
        refusal = unit_refusal(dataset, unit, *kept)
        if refusal is not None:
            raise UnitMismatchError(refusal)
    check_fits(conn, dataset, release_id, total, period)
    append_row(
        conn,
        where,
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
    return reservation_of(conn, release_id)  # type: ignore[return-value]


def append_plan(
    conn: Conn,
    where: str,
    release_id: str,
    planned: Sequence[PlannedCharge],
    *,
    flow_run_id: str | None,
) -> Reservation:
    """Record a revised per-stage plan of an open reservation (nothing when it is the current
    plan); ``where``: the ledger URL.

    Raises:
        LedgerConflictError: no open reservation, or a charged stage whose share would
            change or vanish.
        SdsInputError: an invalid plan, or one whose shares exceed the reserved total.
    """
    res = reservation_of(conn, release_id)
    if res is None or res.status != "open":
        raise LedgerConflictError(
            f"release {release_id!r} has no open reservation whose plan could be revised"
        )
    total = reserved_total(conn, release_id)
    # the stage shares must fit in the reserved total (validate_plan refuses more)
    plan, _ = validate_plan(planned, float(total[0]), float(total[1]))
    if plan == res.planned:
        return res
    new = {p.stage: p for p in plan}
    moved = sorted(
        s
        for s in charged_stages(conn, release_id)
        if new.get(s) != next(p for p in res.planned if p.stage == s)
    )
    if moved:
        raise LedgerConflictError(
            f"release {release_id!r} already charged {moved}: a revised plan must keep their shares"
        )
    append_row(
        conn,
        where,
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
    return reservation_of(conn, release_id)  # type: ignore[return-value]


def append_charge(
    conn: Conn,
    where: str,
    release_id: str,
    stage: str,
    *,
    epsilon: float | None,
    delta: float | None,
    rho: float | None,
    flow_run_id: str | None,
    detail: Mapping[str, Any] | None,
) -> ChargeRow:
    """Charge one planned stage of an open reservation, or return its charge made before;
    ``where``: the ledger URL.

    Raises:
        LedgerConflictError: no reservation, stage not in the plan, amounts differ from the
            plan, or the release is closed and this stage was never charged.
    """
    res = reservation_of(conn, release_id)
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
        where,
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


def append_close(conn: Conn, where: str, release_id: str, status: str) -> CancelResult:
    """Close the release as ``status`` (``completed`` or ``cancelled``), keeping what its
    charged stages spent and giving back the rest; the same close again returns its result.

    Raises:
        LedgerConflictError: unknown release, or it is already closed otherwise.
    """
    res = reservation_of(conn, release_id)
    if res is None:
        raise LedgerConflictError(f"release {release_id!r} has no reservation in the ledger")
    charged = charged_stages(conn, release_id)
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
    total = reserved_total(conn, release_id)
    spent = partial_spend(res.planned, charged, total)
    returned = (total[0] - spent[0], total[1] - spent[1])
    append_row(
        conn,
        where,
        {
            "kind": "close",
            "dataset": res.dataset,
            "release_id": release_id,
            "mechanism": status,
            "epsilon": str(spent[0]),
            "delta": str(spent[1]),
            "detail": {
                "status": status,
                "epsilon_returned": str(returned[0]),
                "delta_returned": str(returned[1]),
                "stages_returned": list(stages[1]),
            },
        },
    )
    return CancelResult(
        release_id,
        status,
        float(spent[0]),
        float(spent[1]),
        float(returned[0]),
        float(returned[1]),
        *stages,
    )
