"""Value types of the privacy-budget ledger: plans, rows, statuses, errors and the spend rule.

:class:`PlannedCharge` is what the budget step reserves per stage; :func:`partial_spend` is the
composition rule for a release of which only some stages drew noise (docs/ledger.md).
Used by :mod:`sds_release.store.ledger.book`; stdlib only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from decimal import Decimal, localcontext
from typing import Any

from sds_core.dp.accounting import StageSpend, check_amount
from sds_core.errors import SdsInputError

_TOL = Decimal("1e-9")  # relative slack allowed when float stage shares are summed by the planner


class BudgetExceededError(SdsInputError):
    """A release needs more (epsilon, delta) than the dataset has left, or it has no budget."""


class PolicyExceededError(BudgetExceededError):
    """A release asks for more (epsilon, delta) than its dataset's per-release policy allows."""


class LedgerConflictError(SdsInputError):
    """A call contradicts the record: other plan/amounts, unknown release/stage, closed."""


class PeriodMismatchError(SdsInputError):
    """A release's ``--period`` does not fit its dataset's budget: a period of a dataset with a
    lifetime budget, or no period for a dataset whose budget is per period."""


class UnitMismatchError(SdsInputError):
    """A release counts another record (rows, or subjects of another column) than the earlier
    releases of its dataset (:mod:`sds_release.store.ledger.units`)."""


BUDGET_REFUSALS = (BudgetExceededError, PeriodMismatchError, UnitMismatchError)
"""The ledger's refusals of a release for its budget: the run journal (the audit page) lists
each, wherever it is refused (the CLI's pre-flight or the flow's reservation)."""


def dec(value: float | str) -> Decimal:
    """Exact decimal of a float's shortest repr (0.1 -> Decimal('0.1')), so sums are exact."""
    return Decimal(value) if isinstance(value, str) else Decimal(repr(float(value)))


PlannedCharge = StageSpend
"""One stage of a release plan, charged right before the stage draws noise (the core's
StageSpend: one spend type from the DP engine and the synthesizers to the ledger)."""


@dataclass(frozen=True, slots=True)
class ChargeRow:
    """One recorded stage charge: the contract's ledger row."""

    seq: int
    dataset: str
    release_id: str
    stage: str
    mechanism: str
    epsilon: float
    delta: float
    rho: float | None
    created_at: str
    flow_run_id: str | None
    prev_hash: str
    hash: str
    detail: dict[str, Any] | None = None
    """What the stage recorded with its charge (``aggregate-1``: where the release's δ goes,
    docs/ledger.md); None on every other charge and on charges written before it existed."""

    @classmethod
    def from_row(cls, r: Any) -> ChargeRow:
        """Build from a `ledger` table row."""
        detail = r["detail"]
        return cls(
            seq=r["seq"],
            dataset=r["dataset"],
            release_id=r["release_id"],
            stage=r["stage"],
            mechanism=r["mechanism"],
            epsilon=float(r["epsilon"]),
            delta=float(r["delta"]),
            rho=None if r["rho"] is None else float(r["rho"]),
            created_at=r["created_at"],
            flow_run_id=r["flow_run_id"],
            prev_hash=r["prev_hash"],
            hash=r["hash"],
            detail=json.loads(detail) if detail else None,
        )


@dataclass(frozen=True, slots=True)
class Reservation:
    """A release's reservation: its total (epsilon, delta), its plan and its state.

    ``planned`` is the current per-stage plan (the SDS plan may revise it after the DP record
    count, within the same total: ``Ledger.revise_plan``); ``reserved_planned`` the plan the
    release was reserved with (empty: never revised, the same as ``planned``).
    """

    dataset: str
    release_id: str
    epsilon: float
    delta: float
    planned: tuple[PlannedCharge, ...]
    status: str  # open | completed | cancelled
    created_at: str
    flow_run_id: str | None
    period: str | None = None  # the period released (a dataset with a per-period budget)
    reserved_planned: tuple[PlannedCharge, ...] = ()
    # the record it counts (sds_release.store.ledger.units); None: unrecorded
    unit: str | None = None

    @property
    def initial_plan(self) -> tuple[PlannedCharge, ...]:
        """The plan the release was reserved with (before any revision)."""
        return self.reserved_planned or self.planned


@dataclass(frozen=True, slots=True)
class ReleasePolicy:
    """A dataset's per-release limits, set with its budget (``sds budget set ...
    --max-epsilon-per-release E [--max-delta-per-release D]``) and enforced at every reservation.

    A scheduled run with a typo in its ε, or a form field, can then spend at most this much in one
    release, whatever the dataset has left. ``set_by`` (user@host) and ``set_at`` say who set it.
    """

    max_epsilon: float | None
    max_delta: float | None
    set_by: str
    set_at: str

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for --json and the ledger row's detail)."""
        return asdict(self)

    def refusal(self, dataset: str, release_id: str, epsilon: float, delta: float) -> str | None:
        """Why a release of (epsilon, delta) breaks this policy (None: it does not)."""
        over = [
            f"{name}={asked:g} (at most {limit:g})"
            for name, asked, limit in (
                ("epsilon", epsilon, self.max_epsilon),
                ("delta", delta, self.max_delta),
            )
            if limit is not None and dec(asked) > dec(limit) * (1 + _TOL)
        ]
        if not over:
            return None
        return (
            f"release {release_id!r} asks for {' and '.join(over)} in one release, over the "
            f"per-release policy of dataset {dataset!r} ({self.describe()}, set by {self.set_by} "
            f"at {self.set_at}); release with a smaller --epsilon/--delta, or have the custodian "
            f"change the policy with `sds budget set {dataset} --epsilon E "
            "--max-epsilon-per-release E1`"
        )

    def describe(self) -> str:
        """``ε ≤ 2 per release, δ ≤ 1e-06 per release`` (only the limits that are set)."""
        parts = [
            f"{name} ≤ {limit:g} per release"
            for name, limit in (("ε", self.max_epsilon), ("δ", self.max_delta))
            if limit is not None
        ]
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """A dataset's budget and how much is spent, reserved (not yet drawn) and left.

    A dataset with a **lifetime** budget: ``epsilon_lifetime``/``delta_lifetime`` are what all
    its releases together may spend. A dataset with a **per-period** budget (``per_period``):
    they are the budget of *each* period; ``epsilon_spent``/``epsilon_reserved`` add up every
    period, ``epsilon_remaining``/``delta_remaining`` are what a period not released yet has
    (the per-period budget, within the cap), ``periods`` holds one status per released period
    (``period`` set, its own spend and what it has left), and ``lifetime_epsilon`` is the
    optional cap on the ε of all periods together, of which ``epsilon_cap_remaining`` is left.
    """

    dataset: str
    epsilon_lifetime: float
    delta_lifetime: float
    epsilon_spent: float
    delta_spent: float
    epsilon_reserved: float
    delta_reserved: float
    epsilon_remaining: float
    delta_remaining: float
    policy: ReleasePolicy | None = None
    per_period: bool = False
    period: str | None = None
    lifetime_epsilon: float | None = None
    epsilon_cap_remaining: float | None = None
    periods: tuple[BudgetStatus, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for --json); ``policy`` is None when the dataset has none."""
        return asdict(self)

    def period_status(self, period: str) -> BudgetStatus:
        """The status of ``period`` of a per-period dataset (a period not released yet has
        spent nothing and has :attr:`epsilon_remaining` left)."""
        found = next((p for p in self.periods if p.period == period), None)
        if found is not None:
            return found
        return replace(
            self,
            period=period,
            epsilon_spent=0.0,
            delta_spent=0.0,
            epsilon_reserved=0.0,
            delta_reserved=0.0,
            periods=(),
        )

    def releases_left(self, epsilon: float, delta: float = 0.0) -> int:
        """The runway: how many more releases of (``epsilon``, ``delta``) the remaining budget
        pays for, within the per-release policy (0 when a release of that size is over it).

        Per period, this is how many more releases of that period (re-releases with late rows;
        of a dataset's own status: of a period not released yet); :meth:`periods_left` counts
        across periods.

        >>> BudgetStatus("d", 20, 1e-5, 4, 1e-6, 0, 0, 16, 9e-6).releases_left(4.0)
        4
        """
        if not epsilon > 0:
            raise SdsInputError(f"a release's ε must be > 0 to count the runway, got {epsilon!r}")
        policy = self.policy
        if policy is not None and policy.refusal(self.dataset, "planned", epsilon, delta):
            return 0
        left = int(self.epsilon_remaining / epsilon * (1 + 1e-12))
        if delta > 0:
            left = min(left, int(self.delta_remaining / delta * (1 + 1e-12)))
        return max(0, left)

    def periods_left(self, epsilon: float) -> int | None:
        """How many more releases of ``epsilon`` the lifetime cap across periods pays for
        (None: a lifetime budget, or a per-period budget without a cap: each period has its
        own budget and nothing bounds how many periods are released)."""
        if not epsilon > 0:
            raise SdsInputError(f"a release's ε must be > 0 to count the runway, got {epsilon!r}")
        if self.epsilon_cap_remaining is None:
            return None
        return max(0, int(self.epsilon_cap_remaining / epsilon * (1 + 1e-12)))

    def describe_budget(self) -> str:
        """``lifetime ε 20, δ 1e-05`` or ``ε 4, δ 1e-06 per period (lifetime cap ε 20)``."""
        amounts = f"ε {self.epsilon_lifetime:.6g}, δ {self.delta_lifetime:.3g}"
        if not self.per_period:
            return f"lifetime {amounts}"
        cap = (
            ""
            if self.lifetime_epsilon is None
            else f" (lifetime cap ε {self.lifetime_epsilon:.6g} across periods)"
        )
        return f"{amounts} per period{cap}"


@dataclass(frozen=True, slots=True)
class CancelResult:
    """What closing a reservation kept as spent and gave back to the dataset."""

    release_id: str
    status: str  # cancelled | completed
    epsilon_spent: float
    delta_spent: float
    epsilon_returned: float
    delta_returned: float
    stages_charged: tuple[str, ...]
    stages_returned: tuple[str, ...]


def partial_spend(
    planned: Sequence[PlannedCharge], charged: set[str], total: tuple[Decimal, Decimal]
) -> tuple[Decimal, Decimal]:
    """Privacy spent by a release of which only the ``charged`` stages drew noise.

    All stages charged: the reserved ``total``. None: zero. Otherwise the drawn stages compose
    as the plan's proof composes them:

    - a pure stage (no ``rho``, or a ``rho`` without a share of δ: the DP bins, ε-DP and added
      to the rest by basic composition, their ρ recorded for information) adds its ε and its
      own δ (most have none);
    - the zCDP stages (``rho`` and a share of the δ that pays for the conversion) add their ρ,
      converted once by Bun-Steinke rho + 2*sqrt(rho*ln(1/d)) at d = half the δ of the plan's
      zCDP stages (the SDS plan converts at δ/2 and spends the other δ/2 on the 1-tuple
      threshold; a smaller d only loosens the bound); their whole δ is charged once any of them
      drew noise.

    Capped at ``total``; never below the charged stages' shares.
    """
    if not charged:
        return Decimal(0), Decimal(0)
    if charged >= {p.stage for p in planned}:
        return total
    done = [p for p in planned if p.stage in charged]
    with localcontext() as ctx:
        ctx.prec = 60
        shares = sum((dec(p.epsilon) for p in done), Decimal(0))
        eps = sum((dec(p.epsilon) for p in done if not _zcdp(p)), Decimal(0))
        delta = sum((dec(p.delta) for p in done if not _zcdp(p)), Decimal(0))
        rho = math.fsum(p.rho for p in done if p.rho is not None and _zcdp(p))
        if rho > 0:
            delta_z = math.fsum(p.delta for p in planned if _zcdp(p))
            eps += dec(rho + 2.0 * math.sqrt(rho * math.log(2.0 / delta_z)))
            delta += dec(delta_z)
        return min(total[0], max(eps, shares)), min(total[1], delta)


def _zcdp(stage: PlannedCharge) -> bool:
    """Whether ``stage`` composes in the plan's zCDP part (converted to (ε, δ) once): it has a
    ρ and a share of the conversion's δ. A stage with a ρ and no δ is ε-DP and composes by its
    ε (the DP bins' exponential mechanisms)."""
    return stage.rho is not None and stage.delta > 0


def period_refusal(
    dataset: str, per_period: bool, period: str | None, epsilon: float | None = None
) -> str | None:
    """Why a release of ``period`` (None: of the whole dataset) does not fit a dataset whose
    budget is per period (``per_period``) or a lifetime one; None when it fits.

    ``epsilon`` (the per-period budget) only makes the text more precise.

    >>> period_refusal("census", False, None) is None
    True
    """
    if per_period and period is None:
        each = "" if epsilon is None else f" (ε {epsilon:g} per period)"
        return (
            f"dataset {dataset!r} has a per-period budget{each}: each of its releases releases "
            "the rows of one period; pass --period V (a value of the config's period_column) "
            "to release period V from its own budget"
        )
    if not per_period and period is not None:
        return (
            f"--period {period!r} releases one period of a dataset whose budget is per period, "
            f"but dataset {dataset!r} has a lifetime budget; give it a per-period budget with "
            f"`sds budget set {dataset} --epsilon E --per-period` (refused once the dataset has "
            "spent from its lifetime budget: then give the periodic releases a new dataset id), "
            "or leave out --period"
        )
    return None


def check_name(what: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise SdsInputError(f"{what} must be a non-empty string, got {value!r}")


def validate_plan(
    planned: Sequence[PlannedCharge], epsilon: float | None, delta: float | None
) -> tuple[tuple[PlannedCharge, ...], tuple[Decimal, Decimal]]:
    """Check a plan (non-empty, unique stages) and its totals; return (plan, exact totals)."""
    plan = tuple(planned)
    if not plan or not all(isinstance(p, PlannedCharge) for p in plan):
        raise SdsInputError("a release plan needs at least one PlannedCharge")
    names = [p.stage for p in plan]
    if len(set(names)) != len(names):
        raise SdsInputError(f"stage names in a release plan must be unique, got {names}")
    with localcontext() as ctx:
        ctx.prec = 60
        sums = (
            sum((dec(p.epsilon) for p in plan), Decimal(0)),
            sum((dec(p.delta) for p in plan), Decimal(0)),
        )
        totals = []
        for name, given, summed, upper in (
            ("epsilon", epsilon, sums[0], math.inf),
            ("delta", delta, sums[1], 1.0),
        ):
            if given is None:
                totals.append(summed)
                continue
            check_amount(f"release {name}", given, upper=upper)
            if summed > dec(given) * (1 + _TOL) + Decimal("1e-15"):
                raise SdsInputError(
                    f"the stage {name}s of the plan sum to {float(summed)}, more than the "
                    f"release {name} {given}; the stage shares must fit in the release total"
                )
            totals.append(dec(given))
    if totals[0] <= 0 or totals[1] >= 1:
        raise SdsInputError(
            f"release epsilon must be > 0 and delta < 1, got "
            f"epsilon={float(totals[0])}, delta={float(totals[1])}"
        )
    return plan, (totals[0], totals[1])
