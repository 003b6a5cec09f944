"""The budget dashboard of one dataset: the rows of its Prefect table artifact and its events.

Built from the ledger alone (lifetime, spent, reserved and remaining (ε, δ), the last releases),
so everything here is public accounting, never a count of the sensitive data. ``tasks/artifacts``
sends it to Prefect after every release and ``sds budget set``; no Prefect import here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from release_store.ledger.book import Ledger
from release_store.ledger.values import BudgetStatus, Reservation
from sds_core.errors import SdsInputError

__all__ = [
    "ALERT_SHARE_DEFAULT",
    "ALERT_SHARE_VARIABLE",
    "BudgetView",
    "artifact_key",
    "check_share",
]

ALERT_SHARE_VARIABLE = "sds_budget_alert_share"
"""The Prefect variable holding the share of a dataset's lifetime budget below which a release
emits ``sds.budget.low`` (set by ``deployments/automations.py``, editable in the UI)."""

ALERT_SHARE_DEFAULT = 0.2
"""Alert share used when the variable is not set: warn when less than 20 % is left."""

LAST_RELEASES = 10
"""How many of the dataset's most recent releases the dashboard lists."""


def artifact_key(prefix: str, dataset: str) -> str:
    """A Prefect artifact key for ``dataset`` (lowercase letters, digits and dashes only).

    >>> artifact_key("budget", "PUMS_ca.10k")
    'budget-pums-ca-10k'
    """
    safe = "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in dataset.lower())
    return f"{prefix}-{safe}"[:100]


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
        status: lifetime, spent, reserved and remaining (ε, δ).
        releases: the most recent reservations (newest first) with what each has spent.
    """

    status: BudgetStatus
    releases: tuple[tuple[Reservation, tuple[float, float] | None], ...]

    @classmethod
    def load(cls, ledger: Ledger, dataset: str, *, last: int = LAST_RELEASES) -> BudgetView | None:
        """The view of ``dataset``, or None when it has no budget yet."""
        status = ledger.budget(dataset)
        if status is None:
            return None
        recent = list(reversed(ledger.reservations(dataset)))[:last]
        return cls(status, tuple((r, ledger.spent(r.release_id)) for r in recent))

    @property
    def last_release(self) -> Reservation | None:
        """The newest release that was not cancelled: the size the runway counts in."""
        return next((r for r, _ in self.releases if r.status != "cancelled"), None)

    @property
    def runway(self) -> int | None:
        """How many more releases of the last release's (ε, δ) the budget pays for (None: no
        release yet)."""
        last = self.last_release
        return None if last is None else self.status.releases_left(last.epsilon, last.delta)

    @property
    def remaining_share(self) -> float:
        """The smaller of the ε and δ shares of the lifetime budget still available (0..1)."""
        s = self.status
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
        one row per recent release (status, ε and δ spent so far, when it was reserved)."""
        s = self.status
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
            rows.append(
                {
                    "entry": "runway",
                    "ε": _eps(last.epsilon),
                    "δ": _delta(last.delta),
                    "status": f"{self.runway} more release(s) of the last release's size",
                    "at": "",
                }
            )
        for res, spent in self.releases:
            eps, delta = spent if spent is not None else (0.0, 0.0)
            rows.append(
                {
                    "entry": f"release {res.release_id}",
                    "ε": _eps(eps),
                    "δ": _delta(delta),
                    "status": f"{res.status} (reserved ε={_eps(res.epsilon)})",
                    "at": res.created_at[:19].replace("T", " ") + " UTC",
                }
            )
        return rows

    def description(self) -> str:
        """One markdown paragraph for the artifact's description."""
        s, last = self.status, self.last_release
        runway = (
            ""
            if last is None
            else f"It pays for {self.runway} more release(s) of the last one's size "
            f"(ε {_eps(last.epsilon)}). "
        )
        return (
            f"Privacy budget of dataset **{s.dataset}**: ε {_eps(s.epsilon_remaining)} of "
            f"{_eps(s.epsilon_lifetime)} left ({self.remaining_share:.0%} of the lifetime "
            f"budget), δ {_delta(s.delta_remaining)} of {_delta(s.delta_lifetime)}. {runway}"
            f"Last {len(self.releases)} releases below, newest first. From the ledger "
            "(`sds budget show`, `sds audit --verify`)."
        )

    def payload(self) -> dict[str, Any]:
        """The payload of the ``sds.budget.*`` events (public accounting numbers only)."""
        return self.status.to_dict() | {
            "remaining_share": round(self.remaining_share, 6),
            "releases_left": self.runway,
        }
