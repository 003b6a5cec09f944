"""The budget dashboard of one dataset: the rows of its Prefect table artifact and its events.

Built from the ledger alone (lifetime, spent, reserved and remaining (ε, δ), the last releases;
for a dataset whose budget is per period, a row per period with its own runway), so everything
here is public accounting, never a count of the sensitive data. ``sds_release/tasks/artifacts``
sends it to Prefect after every release and ``sds budget set``; no Prefect import here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sds_core.errors import SdsInputError
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.values import BudgetStatus, Reservation

__all__ = [
    "ALERT_SHARE_DEFAULT",
    "ALERT_SHARE_VARIABLE",
    "BudgetView",
    "artifact_key",
    "check_share",
    "dataset_key",
]

ALERT_SHARE_VARIABLE = "sds_budget_alert_share"
"""The Prefect variable holding the share of a dataset's lifetime budget below which a release
emits ``sds.budget.low`` (set by ``deployments/automations.py``, editable in the UI)."""

ALERT_SHARE_DEFAULT = 0.2
"""Alert share used when the variable is not set: warn when less than 20 % is left."""

LAST_RELEASES = 10
"""How many of the dataset's most recent releases the dashboard lists."""


def dataset_key(dataset: str) -> str:
    """The dataset's part of every Prefect artifact key: lowercase letters, digits and dashes.

    >>> dataset_key("PUMS_ca.10k")
    'pums-ca-10k'
    """
    return "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in dataset.lower())


def artifact_key(prefix: str, dataset: str) -> str:
    """A Prefect artifact key for ``dataset`` (:func:`dataset_key`, at most 100 characters).

    >>> artifact_key("budget", "PUMS_ca.10k")
    'budget-pums-ca-10k'
    """
    return f"{prefix}-{dataset_key(dataset)}"[:100]


def check_share(value: object, *, source: str) -> float:
    """A validated alert share in [0, 1] (``source`` names where it came from).

    >>> check_share("0.25", source="test")
    0.25

    Raises:
        SdsInputError: not a number in [0, 1].
    """
    try:
        share = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        share = float("nan")
    if not 0.0 <= share <= 1.0:
        raise SdsInputError(
            f"budget alert share {value!r} from {source} is not a number between 0 and 1; "
            "set it to e.g. 0.2 to be warned when less than 20% of a dataset's budget is left"
        )
    return share


def _eps(value: float) -> str:
    return f"{value:.6g}"


def _delta(value: float) -> str:
    return f"{value:.3g}"


@dataclass(frozen=True, slots=True)
class BudgetView:
    """A dataset's budget and its last releases, as the ledger records them now.

    Attributes:
        status: lifetime (or per-period), spent, reserved and remaining (ε, δ).
        releases: the most recent reservations (newest first) with what each has spent.
        period_last: a per-period dataset: each released period's newest release that was not
            cancelled (the size that period's runway counts in).
    """

    status: BudgetStatus
    releases: tuple[tuple[Reservation, tuple[float, float] | None], ...]
    period_last: tuple[tuple[str, Reservation], ...] = ()

    @classmethod
    def load(cls, ledger: Ledger, dataset: str, *, last: int = LAST_RELEASES) -> BudgetView | None:
        """The view of ``dataset``, or None when it has no budget yet."""
        status = ledger.budget(dataset)
        if status is None:
            return None
        every = list(reversed(ledger.reservations(dataset)))
        period_last: dict[str, Reservation] = {}
        if status.per_period:
            for r in every:
                if r.period is not None and r.status != "cancelled":
                    period_last.setdefault(r.period, r)
        return cls(
            status,
            tuple((r, ledger.spent(r.release_id)) for r in every[:last]),
            tuple(sorted(period_last.items())),
        )

    @property
    def last_release(self) -> Reservation | None:
        """The newest release that was not cancelled: the size the runway counts in."""
        return next((r for r, _ in self.releases if r.status != "cancelled"), None)

    @property
    def runway(self) -> int | None:
        """How many more releases of the last release's (ε, δ) the budget pays for (None: no
        release yet). Per period: how many a period not released yet pays for."""
        last = self.last_release
        return None if last is None else self.status.releases_left(last.epsilon, last.delta)

    def period_runway(self, period: str) -> int | None:
        """How many more releases of ``period`` (re-releases with its late rows) of its own last
        release's size its budget pays for (None: the period has no release)."""
        last = dict(self.period_last).get(period)
        if last is None:
            return None
        return self.status.period_status(period).releases_left(last.epsilon, last.delta)

    @property
    def periods_runway(self) -> int | None:
        """A per-period dataset with a lifetime cap: how many more releases of the last
        release's ε the cap pays for across periods (None: no cap, or no release yet)."""
        last = self.last_release
        return None if last is None else self.status.periods_left(last.epsilon)

    @property
    def remaining_share(self) -> float:
        """The smaller of the ε and δ shares of the lifetime budget still available (0..1).

        A per-period dataset: the share of its lifetime cap across periods still available (1
        without a cap: every period has its own budget, and periods do not run out together).
        """
        s = self.status
        if s.per_period:
            if s.lifetime_epsilon is None or s.epsilon_cap_remaining is None:
                return 1.0
            return max(0.0, min(1.0, s.epsilon_cap_remaining / s.lifetime_epsilon))
        shares = [
            left / life if life > 0 else 0.0
            for left, life in (
                (s.epsilon_remaining, s.epsilon_lifetime),
                (s.delta_remaining, s.delta_lifetime),
            )
        ]
        return max(0.0, min(1.0, *shares))

    def rows(self) -> list[dict[str, str]]:
        """The table artifact: four budget rows (lifetime, spent, reserved, remaining), then
        one row per recent release (status, ε and δ spent so far, when it was reserved).

        A per-period dataset: the per-period budget (and the lifetime cap), spent and reserved
        across periods, one row per released period (what it spent, has left and its runway),
        the runway of a new period, then the releases (each with its period)."""
        s = self.status
        if s.per_period:
            rows = self._period_budget_rows()
        else:
            budget = [
                ("lifetime", s.epsilon_lifetime, s.delta_lifetime, ""),
                ("spent", s.epsilon_spent, s.delta_spent, "closed and drawn stages"),
                ("reserved", s.epsilon_reserved, s.delta_reserved, "held by unfinished releases"),
                (
                    "remaining",
                    s.epsilon_remaining,
                    s.delta_remaining,
                    f"{self.remaining_share:.0%} of the lifetime budget",
                ),
            ]
            rows = [
                {"entry": name, "ε": _eps(e), "δ": _delta(d), "status": note, "at": ""}
                for name, e, d, note in budget
            ]
        last = self.last_release
        if last is not None:
            across = self.periods_runway
            rows.append(
                {
                    "entry": "runway",
                    "ε": _eps(last.epsilon),
                    "δ": _delta(last.delta),
                    "status": f"{self.runway} more release(s) of the last release's size"
                    + (" in a period not released yet" if s.per_period else "")
                    + ("" if across is None else f"; the lifetime cap pays for {across}"),
                    "at": "",
                }
            )
        for res, spent in self.releases:
            eps, delta = spent if spent is not None else (0.0, 0.0)
            of = "" if res.period is None else f" (period {res.period})"
            rows.append(
                {
                    "entry": f"release {res.release_id}{of}",
                    "ε": _eps(eps),
                    "δ": _delta(delta),
                    "status": f"{res.status} (reserved ε={_eps(res.epsilon)})",
                    "at": res.created_at[:19].replace("T", " ") + " UTC",
                }
            )
        return rows

    def _period_budget_rows(self) -> list[dict[str, str]]:
        s = self.status
        rows = [
            {
                "entry": "per period",
                "ε": _eps(s.epsilon_lifetime),
                "δ": _delta(s.delta_lifetime),
                "status": "the budget of each period (parallel composition)",
                "at": "",
            }
        ]
        if s.lifetime_epsilon is not None and s.epsilon_cap_remaining is not None:
            rows.append(
                {
                    "entry": "lifetime cap",
                    "ε": _eps(s.lifetime_epsilon),
                    "δ": "",
                    "status": f"ε {_eps(s.epsilon_cap_remaining)} left across periods "
                    f"({self.remaining_share:.0%})",
                    "at": "",
                }
            )
        rows += [
            {
                "entry": name,
                "ε": _eps(e),
                "δ": _delta(d),
                "status": f"all {len(s.periods)} period(s), {note}",
                "at": "",
            }
            for name, e, d, note in (
                ("spent", s.epsilon_spent, s.delta_spent, "closed and drawn stages"),
                ("reserved", s.epsilon_reserved, s.delta_reserved, "held by unfinished releases"),
            )
        ]
        for p in s.periods:
            assert p.period is not None
            runway = self.period_runway(p.period)
            rows.append(
                {
                    "entry": f"period {p.period}",
                    "ε": _eps(p.epsilon_spent + p.epsilon_reserved),
                    "δ": _delta(p.delta_spent + p.delta_reserved),
                    "status": f"spent and reserved; left: ε {_eps(p.epsilon_remaining)}, δ "
                    f"{_delta(p.delta_remaining)}"
                    + ("" if runway is None else f"; {runway} more release(s) of its last size"),
                    "at": "",
                }
            )
        return rows

    def period_rows(self) -> list[tuple[str, ...]]:
        """The rows of ``sds budget show``: dataset, period, budget, ε spent, ε reserved, ε
        left, δ left, runway, per-release policy (a per-period dataset: one row for the dataset
        (what a new period has), then one per released period)."""
        s, last = self.status, self.last_release
        policy = "none" if s.policy is None else f"{s.policy.describe()} ({s.policy.set_by})"
        runway = "no release yet" if last is None else f"{self.runway} × ε {last.epsilon:.6g}"
        if not s.per_period:
            return [
                (
                    s.dataset,
                    "-",
                    s.describe_budget(),
                    f"{s.epsilon_spent:.6g}",
                    f"{s.epsilon_reserved:.6g}",
                    f"{s.epsilon_remaining:.6g}",
                    f"{s.delta_remaining:.3g}",
                    runway,
                    policy,
                )
            ]
        across = self.periods_runway
        out: list[tuple[str, ...]] = [
            (
                s.dataset,
                "*",
                s.describe_budget(),
                f"{s.epsilon_spent:.6g}",
                f"{s.epsilon_reserved:.6g}",
                f"{s.epsilon_remaining:.6g}",
                f"{s.delta_remaining:.3g}",
                runway + ("" if across is None else f" (cap: {across} in all)"),
                policy,
            )
        ]
        for p in s.periods:
            assert p.period is not None
            left = self.period_runway(p.period)
            size = dict(self.period_last).get(p.period)
            out.append(
                (
                    "",
                    p.period,
                    "",
                    f"{p.epsilon_spent:.6g}",
                    f"{p.epsilon_reserved:.6g}",
                    f"{p.epsilon_remaining:.6g}",
                    f"{p.delta_remaining:.3g}",
                    "-" if left is None or size is None else f"{left} × ε {size.epsilon:.6g}",
                    "",
                )
            )
        return out

    def description(self) -> str:
        """One markdown paragraph for the artifact's description."""
        s, last = self.status, self.last_release
        runway = (
            ""
            if last is None
            else f"It pays for {self.runway} more release(s) of the last one's size "
            f"(ε {_eps(last.epsilon)}). "
        )
        if s.per_period:
            cap = (
                ""
                if s.lifetime_epsilon is None or s.epsilon_cap_remaining is None
                else f"; lifetime cap ε {_eps(s.lifetime_epsilon)} across periods, "
                f"ε {_eps(s.epsilon_cap_remaining)} left ({self.remaining_share:.0%})"
            )
            per = (
                ""
                if last is None
                else f"A period not released yet pays for {self.runway} release(s) of the "
                f"last one's size (ε {_eps(last.epsilon)}). "
            )
            return (
                f"Privacy budget of dataset **{s.dataset}**, per period: ε "
                f"{_eps(s.epsilon_lifetime)}, δ {_delta(s.delta_lifetime)} for each period "
                f"(parallel composition){cap}. {len(s.periods)} period(s) released, one row "
                f"each with what it spent, has left and its runway. {per}Last "
                f"{len(self.releases)} releases below, newest first. From the ledger "
                "(`sds budget show`, `sds audit --verify`)."
            )
        return (
            f"Privacy budget of dataset **{s.dataset}**: ε {_eps(s.epsilon_remaining)} of "
            f"{_eps(s.epsilon_lifetime)} left ({self.remaining_share:.0%} of the lifetime "
            f"budget), δ {_delta(s.delta_remaining)} of {_delta(s.delta_lifetime)}. {runway}"
            f"Last {len(self.releases)} releases below, newest first. From the ledger "
            "(`sds budget show`, `sds audit --verify`)."
        )

    def payload(self) -> dict[str, Any]:
        """The payload of the ``sds.budget.*`` events (public accounting numbers only); a
        per-period dataset adds each period's runway (``periods[i].releases_left``)."""
        out = self.status.to_dict() | {
            "remaining_share": round(self.remaining_share, 6),
            "releases_left": self.runway,
        }
        if self.status.per_period:
            out["periods"] = [
                p | {"releases_left": self.period_runway(str(p["period"]))} for p in out["periods"]
            ]
            out["periods_left"] = self.periods_runway
        return out
