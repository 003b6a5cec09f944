"""Privacy accounting for one DP release: the budget split (ε_N, ρ, ε_Q, σ_k) and zCDP ↔ (ε, δ).

``plan_budget`` turns the user's (ε, δ) and proportions into the noise scales every stage uses,
either exactly as pac-synth does (``"reference"``) or with the Canonne–Kamath–Steinke conversion
and the bounded-range charge of the exponential mechanism (``"tight"``, the default).
``BudgetPlan.stage_spends`` is what the ledger records, one entry per stage.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from sds_core.errors import SdsInputError, invariant

Accounting = Literal["reference", "tight"]
ACCOUNTINGS = ("reference", "tight")
METHODS = ("bs16", "cks")


def check_amount(name: str, value: object, *, upper: float = math.inf) -> None:
    """SdsInputError unless ``value`` is a finite number in [0, upper) (message names it)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not 0 <= value < upper:  # type: ignore[operator]
        rule = f"a finite number in [0, {upper:g})" if upper < math.inf else "a finite number >= 0"
        raise SdsInputError(f"{name} must be {rule}, got {value!r}")


@dataclass(frozen=True, slots=True)
class StageSpend:
    """What one stage spends: its (ε, δ) share of the release and its zCDP (None if pure DP).

    The one "spend" type of the product: the DP engine's budget plan, the synthesizers'
    ``budget()`` (``SynthesizerSpend``) and the ledger's planned charges (``PlannedCharge``)
    are all this class.

    Args:
        stage: stage name, unique within a release (e.g. ``count``, ``aggregate-k2``,
            ``dirichlet-multinomial/posterior``).
        mechanism: what produces the stage's DP output (e.g. ``discrete-gaussian``).
        epsilon: the stage's share of the release ε (>= 0).
        delta: the stage's share of the release δ (0 <= δ < 1).
        rho: the stage's zCDP cost when it composes in zCDP, else None (pure ε-DP accounting).
    """

    stage: str
    mechanism: str
    epsilon: float
    delta: float = 0.0
    rho: float | None = None

    def __post_init__(self) -> None:
        for name in ("stage", "mechanism"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise SdsInputError(f"spend {name} must be a non-empty string, got {value!r}")
        check_amount(f"epsilon of stage {self.stage!r}", self.epsilon)
        check_amount(f"delta of stage {self.stage!r}", self.delta, upper=1.0)
        if self.rho is not None:
            check_amount(f"rho of stage {self.stage!r}", self.rho)


@dataclass(frozen=True, slots=True)
class BudgetPlan:
    """The noise parameters of one release and the accounting that justifies them.

    Attributes:
        epsilon, delta: the release's total guarantee, (ε, δ)-DP.
        accounting: ``"reference"`` (pac-synth formulas) or ``"tight"``.
        epsilon_records: ε_N, pure DP, spent on the discrete-Laplace record count (scale 1/ε_N).
        epsilon_marginals: ε_M = ε − ε_N, the (ε_M, δ/2) target of the zCDP part.
        rho: zCDP budget of the marginals (percentile selections + Gaussian noise).
        epsilon_percentile: ε_Q, the exponential-mechanism parameter of each length's percentile.
        rho_percentile: zCDP charged per percentile selection (ε_Q²/2 reference, ε_Q²/8 tight).
        sigma_by_len: σ_k = p_k·σ; noise on length k is N_Z(0, σ_k²·Δ_k).
        rho_by_len: ρ_k = 1/(2σ_k²) + rho_percentile; they sum to ``rho``.
    """

    epsilon: float
    delta: float
    accounting: str
    epsilon_records: float
    epsilon_marginals: float
    rho: float
    epsilon_percentile: float
    rho_percentile: float
    sigma_by_len: tuple[float, ...]
    rho_by_len: tuple[float, ...]

    def stage_spends(self) -> tuple[StageSpend, ...]:
        """Ledger entries: the record count, then one entry per length k = 1..R.

        The (ε, δ) guarantee is proved for the whole release (zCDP composition, one conversion),
        so per-length shares are an apportioning for display, chosen so they add up exactly
        (``math.fsum``) to (ε, δ): the count gets (ε_N, 0); ε_M and the zCDP part's δ/2 are split
        across lengths in proportion to ρ_k/ρ; length 1 also carries the δ/2 of the 1-tuple
        threshold.
        """
        rhos = self.rho_by_len
        total_rho = math.fsum(rhos)
        eps = [self.epsilon_records] + [self.epsilon_marginals * r / total_rho for r in rhos]
        dels = [0.0] + [self.delta / 2 * r / total_rho for r in rhos]
        dels[1] += self.delta / 2
        eps = exact_split(eps, self.epsilon)
        dels = exact_split(dels, self.delta)
        spends = [StageSpend("count", "discrete-laplace", eps[0], dels[0], None)]
        spends += [
            StageSpend(f"aggregate-{k}", "zcdp-gaussian+percentile", eps[k], dels[k], rhos[k - 1])
            for k in range(1, len(rhos) + 1)
        ]
        return tuple(spends)


def exact_split(shares: list[float], total: float) -> list[float]:
    """Adjust the last share so that ``math.fsum(shares) == total`` exactly.

    >>> import math
    >>> math.fsum(exact_split([0.1, 0.2, 0.3], 0.6)) == 0.6
    True
    """
    out = list(shares)
    out[-1] = total - math.fsum(out[:-1])
    for _ in range(64):
        diff = total - math.fsum(out)
        if diff == 0:
            return out
        out[-1] = math.nextafter(out[-1], math.inf if diff > 0 else -math.inf)
    invariant(False, "share adjustment did not converge")
    return out


def _check_positive(name: str, value: float) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise SdsInputError(f"{name} must be a finite number, got {value!r}")
    if value <= 0:
        raise SdsInputError(f"{name} must be > 0, got {value!r}")
    return float(value)


def _check_open_unit(name: str, value: float) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value < 1:
        raise SdsInputError(f"{name} must be in the open interval (0, 1), got {value!r}")
    return float(value)


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise SdsInputError(f"conversion method must be one of {METHODS}, got {method!r}")


def default_delta(protected_number_of_records: int) -> float:
    """δ = 1 / (ln m · m) from the protected (noisy) record count m (spec §1.3).

    >>> round(default_delta(6065), 9)
    1.8929e-05
    """
    m = protected_number_of_records
    if not isinstance(m, int | np.integer) or isinstance(m, bool) or m <= 1:
        raise SdsInputError(
            f"protected_number_of_records must be an integer > 1 to derive delta, got {m!r}; "
            "pass delta explicitly for tiny tables"
        )
    return 1.0 / (math.log(m) * m)


def _cks_epsilon(rho: float, delta: float) -> float:
    """min over α > 1 of αρ + (ln 1/δ + (α−1) ln(1−1/α) − ln α)/(α−1) (CKS20, Prop. 12)."""
    log_inv_delta = -math.log(delta)

    def eps_at(a: np.ndarray) -> np.ndarray:
        out: np.ndarray = a * rho + (log_inv_delta + (a - 1) * np.log1p(-1 / a) - np.log(a)) / (
            a - 1
        )
        return out

    alphas = 1 + np.logspace(-8, 8, 4001)
    values = eps_at(alphas)
    i = int(np.argmin(values))
    lo, hi = alphas[max(i - 1, 0)], alphas[min(i + 1, len(alphas) - 1)]
    for _ in range(90):  # golden-section refinement of a unimodal function on [lo, hi]
        m1, m2 = lo + (hi - lo) * 0.381966, hi - (hi - lo) * 0.381966
        f1, f2 = eps_at(np.array([m1, m2]))
        lo, hi = (lo, m2) if f1 <= f2 else (m1, hi)
    best = float(min(values[i], eps_at(np.array([(lo + hi) / 2]))[0]))
    return max(best, 0.0)


def zcdp_to_epsilon(rho: float, delta: float, method: str = "cks") -> float:
    """ε such that ρ-zCDP implies (ε, δ)-DP.

    Args:
        rho: zCDP parameter, > 0.
        delta: target δ in (0, 1).
        method: ``"bs16"`` = ρ + 2√(ρ ln 1/δ) (Bun–Steinke 2016, Prop 1.3) or ``"cks"`` =
            Canonne–Kamath–Steinke 2020 (tighter; what dp-accounting and OpenDP use).
    """
    _check_method(method)
    rho = _check_positive("rho", rho)
    delta = _check_open_unit("delta", delta)
    if method == "bs16":
        return rho + 2 * math.sqrt(rho * math.log(1 / delta))
    return _cks_epsilon(rho, delta)


def epsilon_to_zcdp(epsilon: float, delta: float, method: str = "cks") -> float:
    """The largest ρ whose ρ-zCDP guarantee implies (ε, δ)-DP under ``method``.

    ``bs16`` inverts in closed form, ρ = (√(ε + ln 1/δ) − √(ln 1/δ))²; ``cks`` by bisection
    (the result never exceeds the true root, so the conversion stays valid).
    """
    _check_method(method)
    epsilon = _check_positive("epsilon", epsilon)
    delta = _check_open_unit("delta", delta)
    log_inv = math.log(1 / delta)
    closed = (math.sqrt(epsilon + log_inv) - math.sqrt(log_inv)) ** 2
    if method == "bs16":
        return closed
    return _cks_rho(float(epsilon), float(delta), closed)


@functools.lru_cache(maxsize=256)
def _cks_rho(epsilon: float, delta: float, closed: float) -> float:
    """The bisection of :func:`epsilon_to_zcdp` (``cks``); cached: a release plans the same
    budget at every stage, and each bisection evaluates the CKS bound a few hundred times."""
    lo, hi = closed, closed  # BS16 is looser, so its ρ is a valid lower end
    while _cks_epsilon(hi, delta) <= epsilon:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if _cks_epsilon(mid, delta) <= epsilon else (lo, mid)
    return lo


def plan_budget(
    *,
    epsilon: float,
    delta: float,
    reporting_length: int,
    percentile_epsilon_proportion: float,
    number_of_records_epsilon_proportion: float,
    sigma_proportions: Sequence[float],
    accounting: Accounting = "tight",
) -> BudgetPlan:
    """Split (ε, δ) into the record count, the percentile selections and the Gaussian noise.

    Both modes: ε_N = N_p·ε (pure DP, discrete Laplace), ε_M = ε − ε_N; the zCDP part is
    converted at δ/2 (the other δ/2 pays the 1-tuple threshold ρ_1); basic composition adds ε_N.
    Then R·ρ_Q = Q_p·ρ and ½Σ1/σ_k² = (1 − Q_p)·ρ with σ_k = p_k·σ, i.e.
    σ = √(Σ_j 1/p_j² / (2ρ(1 − Q_p))).

    * ``reference`` (pac-synth 0.0.8 exactly): ρ = (√(ε_M + ln 2/δ) − √(ln 2/δ))² (BS16 at δ/2);
      each percentile charged ε_Q²/2 (pure ε_Q-DP) ⇒ ε_Q = √(2ρQ_p/R).
    * ``tight``: ρ = the largest ρ whose CKS20 conversion gives (ε_M, δ/2); each percentile is the
      exponential mechanism (ε_Q-bounded range ⇒ ε_Q²/8-zCDP, Cesar–Rogers 2021), charged
      ε_Q²/8 ⇒ ε_Q = √(8ρQ_p/R) (twice the reference ε_Q for the same share Q_p).

    Raises:
        SdsInputError: ε not finite/> 0, δ outside (0, 1), a proportion outside (0, 1),
            reporting_length < 1, sigma_proportions of the wrong length or not > 0,
            unknown accounting.
    """
    epsilon = _check_positive("epsilon", epsilon)
    delta = _check_open_unit("delta", delta)
    if (
        not isinstance(reporting_length, int | np.integer)
        or isinstance(reporting_length, bool)
        or reporting_length < 1
    ):
        raise SdsInputError(f"reporting_length must be an integer >= 1, got {reporting_length!r}")
    r = int(reporting_length)
    q_p = _check_open_unit("percentile_epsilon_proportion", percentile_epsilon_proportion)
    n_p = _check_open_unit(
        "number_of_records_epsilon_proportion", number_of_records_epsilon_proportion
    )
    props = tuple(sigma_proportions)
    if len(props) != r:
        raise SdsInputError(
            f"sigma_proportions must have one entry per length (reporting_length={r}), "
            f"got {len(props)}"
        )
    for k, p in enumerate(props, start=1):
        _check_positive(f"sigma_proportions[{k - 1}] (length {k})", p)
    if accounting not in ACCOUNTINGS:
        raise SdsInputError(f"accounting must be one of {ACCOUNTINGS}, got {accounting!r}")

    eps_n = n_p * epsilon
    eps_m = epsilon - eps_n
    if accounting == "reference":
        rho = epsilon_to_zcdp(eps_m, delta / 2, "bs16")
        eps_q = math.sqrt(2 * rho * q_p / r)
        rho_q = eps_q**2 / 2
    else:
        rho = epsilon_to_zcdp(eps_m, delta / 2, "cks")
        eps_q = math.sqrt(8 * rho * q_p / r)
        rho_q = eps_q**2 / 8
    sigma = math.sqrt(math.fsum(1 / p**2 for p in props) / (2 * rho * (1 - q_p)))
    sigmas = tuple(p * sigma for p in props)
    rhos = tuple(1 / (2 * s**2) + rho_q for s in sigmas)
    invariant(math.isclose(math.fsum(rhos), rho, rel_tol=1e-9), "zCDP shares must sum to rho")
    return BudgetPlan(
        epsilon=epsilon,
        delta=delta,
        accounting=accounting,
        epsilon_records=eps_n,
        epsilon_marginals=eps_m,
        rho=rho,
        epsilon_percentile=eps_q,
        rho_percentile=rho_q,
        sigma_by_len=sigmas,
        rho_by_len=rhos,
    )
