"""A dataset's privacy budget: setting it, what is left of it, and whether a release fits in it.

A ``budget`` row holds a dataset's (epsilon, delta), lifetime or per period (with a cap across
periods and a period format), and its per-release policy. :func:`budget_status` sums the
dataset's reservations against it; :func:`check_fits` is the refusal ``reserve`` runs first.
"""

from __future__ import annotations

import getpass
import math
import os
import socket
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal, localcontext
from typing import Any

from sds_core.dp.accounting import check_amount
from sds_core.errors import SdsInputError
from sds_release.store.ledger.backends import Conn
from sds_release.store.ledger.chain import append_row
from sds_release.store.ledger.periods import (
    DEFAULT_PERIOD_FORMAT,
    PERIOD_FORMATS,
    check_format_change,
    label_problem,
)
from sds_release.store.ledger.queries import (
    NOTHING,
    Terms,
    Use,
    budget_terms,
    dataset_usage,
    total_use,
    used,
)
from sds_release.store.ledger.values import (
    BudgetExceededError,
    BudgetStatus,
    PeriodMismatchError,
    PolicyExceededError,
    ReleasePolicy,
    check_name,
    dec,
    period_refusal,
)

__all__ = ["append_budget", "budget_status", "check_budget_request", "check_fits"]


def check_budget_request(
    dataset: str,
    *,
    epsilon: float,
    delta: float,
    max_epsilon_per_release: float | None,
    max_delta_per_release: float | None,
    clear_policy: bool,
    per_period: bool,
    lifetime_epsilon: float | None,
    period_format: str | None,
) -> None:
    """Refuse a budget that is wrong whatever the ledger holds (before any transaction).

    Raises:
        SdsInputError: see :meth:`sds_release.store.ledger.book.Ledger.set_budget`.
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


def append_budget(
    conn: Conn,
    where: str,
    dataset: str,
    *,
    epsilon: float,
    delta: float,
    max_epsilon_per_release: float | None,
    max_delta_per_release: float | None,
    clear_policy: bool,
    set_by: str | None,
    per_period: bool,
    lifetime_epsilon: float | None,
    period_format: str | None,
) -> BudgetStatus | None:
    """Append the dataset's new ``budget`` row (arguments checked by
    :func:`check_budget_request`) and return its status; ``where``: the ledger URL.

    Raises:
        SdsInputError: the budget is below what is spent and reserved, would change kind after
            a spend, or the period format does not fit the periods already reserved.
    """
    given = max_epsilon_per_release is not None or max_delta_per_release is not None
    who = set_by or _user_at_host()
    terms = budget_terms(conn, dataset)
    usage = dataset_usage(conn, dataset)
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
    append_row(conn, where, row)
    return budget_status(conn, dataset)


def budget_status(conn: Conn, dataset: str) -> BudgetStatus | None:
    """The dataset's budget, spent, held and left (each period's too), or None: no budget."""
    terms = budget_terms(conn, dataset)
    if terms is None:
        return None
    usage = dataset_usage(conn, dataset)
    life = terms.life
    with localcontext() as ctx:
        ctx.prec = 60
        spent, held = total_use(usage)
        cap_left = None if terms.cap is None else terms.cap - spent[0] - held[0]

        def left_of(use: Use) -> tuple[Decimal, Decimal]:
            eps = life[0] - use[0][0] - use[1][0]
            if cap_left is not None:
                eps = min(eps, cap_left)
            return eps, life[1] - use[0][1] - use[1][1]

        left = left_of(NOTHING if terms.per_period else (spent, held))

    def status(period: str | None, use: Use, remaining: tuple[Decimal, Decimal]) -> BudgetStatus:
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


def check_fits(
    conn: Conn,
    dataset: str,
    release_id: str,
    total: tuple[Decimal, Decimal],
    period: str | None,
) -> None:
    """Refuse a new release of ``dataset`` costing ``total`` (exact (epsilon, delta)) that its
    budget cannot pay: no budget, a period that does not fit the budget's kind or format, above
    the per-release policy, or more than is left (of the period's budget, or of the cap).

    Raises:
        BudgetExceededError, PeriodMismatchError, PolicyExceededError: see
            :meth:`sds_release.store.ledger.book.Ledger.reserve`.
    """
    terms = budget_terms(conn, dataset)
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
        refusal = terms.policy.refusal(dataset, release_id, float(total[0]), float(total[1]))
        if refusal is not None:
            raise PolicyExceededError(refusal)
    usage = dataset_usage(conn, dataset)
    with localcontext() as ctx:
        ctx.prec = 60
        if terms.per_period:
            spent, held = usage.get(period, NOTHING)
        else:
            spent, held = total_use(usage)
        life = terms.life
        left = (life[0] - spent[0] - held[0], life[1] - spent[1] - held[1])
        what = (
            f"period {period!r} of dataset {dataset!r}"
            if terms.per_period
            else f"dataset {dataset!r}"
        )
        of = "its per-period budget" if terms.per_period else "its lifetime"
        if terms.per_period and terms.cap is not None:
            all_spent, all_held = total_use(usage)
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


def _check_kind_change(
    dataset: str, terms: Terms, usage: dict[str | None, Use], *, per_period: bool
) -> None:
    """Refuse turning a budget from lifetime into per period (or back) once anything is spent
    or reserved: earlier spend cannot be apportioned to periods."""
    if terms.per_period == per_period:
        return
    spent = used(total_use(usage))
    if spent[0] <= 0 and spent[1] <= 0:
        return
    if per_period:
        raise SdsInputError(
            f"--per-period: dataset {dataset!r} has already spent (epsilon={float(spent[0])}, "
            f"delta={float(spent[1])}) from its lifetime budget, and that spend cannot be "
            "split into periods; release the periods under a new dataset id (e.g. "
            f"`sds budget set {dataset}-monthly --epsilon E --per-period` and --dataset "
            f"{dataset}-monthly), or keep the lifetime budget (leave out --per-period)"
        )
    raise SdsInputError(
        f"dataset {dataset!r} has a per-period budget and its periods have spent "
        f"(epsilon={float(spent[0])}, delta={float(spent[1])}); pass --per-period to change the "
        "budget of each period (a budget cannot turn back into a lifetime budget once a "
        "period has spent)"
    )


def _check_not_below_use(
    dataset: str,
    usage: dict[str | None, Use],
    epsilon: float,
    delta: float,
    per_period: bool,
    cap: float | None,
) -> None:
    """Refuse a new budget below what is already spent plus reserved: by the dataset (a
    lifetime budget), by any one period (per period) or by all periods together (the cap)."""
    if per_period:
        for period, use in usage.items():
            taken = used(use)
            if dec(epsilon) < taken[0] or dec(delta) < taken[1]:
                raise SdsInputError(
                    f"cannot set the per-period budget of dataset {dataset!r} to "
                    f"(epsilon={epsilon}, delta={delta}): period {period!r} has already spent "
                    f"or reserved (epsilon={float(taken[0])}, delta={float(taken[1])}); choose "
                    "a budget at least that large"
                )
        taken = used(total_use(usage))
        if cap is not None and dec(cap) < taken[0]:
            raise SdsInputError(
                f"cannot cap the periods of dataset {dataset!r} at --lifetime-epsilon {cap}: "
                f"together they have already spent or reserved epsilon={float(taken[0])}; choose "
                "a cap at least that large"
            )
        return
    taken = used(total_use(usage))
    if dec(epsilon) < taken[0] or dec(delta) < taken[1]:
        raise SdsInputError(
            f"cannot set the budget of dataset {dataset!r} to (epsilon={epsilon}, "
            f"delta={delta}): (epsilon={float(taken[0])}, delta={float(taken[1])}) is "
            "already spent or reserved; choose a budget at least that large"
        )


def _user_at_host() -> str:
    """``user@host`` of this process: who set a policy, as the ledger records it."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without /etc/passwd entry)
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"
