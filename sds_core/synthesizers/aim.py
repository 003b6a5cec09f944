"""``aim``: McKenna, Mullins, Sheldon & Miklau's AIM (2022) with the project's exact keyed noise.

All 1-way marginals (thresholded values, as ``mst``), then rounds that each pick the workload
marginal the current model explains worst (exponential mechanism, bias-corrected L1 error) and
measure it with the exact discrete Gaussian from the release key; the model is refitted with
:mod:`sds_core.model` after every round and the noise scale is halved (budget annealing) when a
measurement no longer moves the model. The measured marginals are the release's DP aggregates.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.dp import noise
from sds_core.dp.accounting import epsilon_to_zcdp, exact_split
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from sds_core.model.estimation import fit_model
from sds_core.model.inference import Table, broadcast_shape, marginal_of
from sds_core.model.measurements import Measurement
from sds_core.model.structure import (
    DEFAULT_MAX_MODEL_BYTES,
    Clique,
    JunctionTree,
    check_model_size,
    model_bytes,
    tree_of_cliques,
)
from sds_core.synthesizers.base import (
    FitResult,
    SynthesizerSpend,
    check_epsilon,
    check_proportion,
    register,
)
from sds_core.synthesizers.mst import (
    MstModel,
    OneWay,
    _uniforms,
    measure_one_way,
    release_threshold,
    sample_fitted,
)

STAGES = ("one-way", "rounds")


def workload_weights(d: int, degree: int) -> dict[Clique, float]:
    """AIM's candidates (every clique of 1..degree columns) and weights Σ_{s ∈ W} |r ∩ s|.

    The workload W is every ``degree``-column marginal; a candidate's weight says how much of
    the workload it informs (it is also the sensitivity of its score).

    >>> w = workload_weights(3, 2)
    >>> w[(0,)], w[(0, 1)]
    (2.0, 4.0)
    """
    work = list(itertools.combinations(range(d), min(degree, d)))
    out: dict[Clique, float] = {}
    for k in range(1, min(degree, d) + 1):
        for r in itertools.combinations(range(d), k):
            out[r] = float(sum(len(set(r) & set(s)) for s in work))
    return out


@register
@dataclass(slots=True)
class Aim:
    """AIM: 1-way marginals, then adaptively chosen workload marginals, one consistent model.

    The release's ρ (CKS conversion at δ/2) is split into ``one_way_share`` for the d 1-way
    marginals (their values thresholded at δ/2 as in ``mst``) and the rest for the rounds. The
    rounds start at T = ``rounds_per_column``·d planned rounds: each spends ρ_t, of which
    ``select_fraction`` on the exponential-mechanism choice (ε_t-bounded-range, ε_t²/8-zCDP) and
    the rest on a discrete Gaussian measurement of σ_t; when the model's answer on the measured
    marginal moved by less than the noise's expected L1 (√(2/π)·σ_t per cell), σ_t is halved and
    ε_t doubled; the last round spends exactly what is left. The rounds are adaptive in number, so
    they form one ledger stage with their total ρ. Candidates: every marginal of 1..``degree``
    columns whose model stays within ``max_model_bytes`` scaled by the fraction of ρ spent.

    Args:
        one_way_share: share of ρ spent on the 1-way marginals.
        select_fraction: share of each round's ρ spent on choosing (AIM's α = 0.1).
        rounds_per_column: T/d, the planned number of rounds per column (AIM: 16).
        degree: the workload is every marginal of this many columns (AIM's default 3-way).
        max_clique_cells: marginals with more cells (values + empty) are not candidates.
        max_model_bytes: refuse before any spend when the 1-way model already needs more; the
            rounds never grow the model beyond it.
        iterations: most mirror-descent iterations of the final fit.
        round_iterations: most iterations of the warm-started fit after each round.
    """

    name: ClassVar[str] = "aim"

    one_way_share: float = 0.5
    select_fraction: float = 0.1
    rounds_per_column: int = 16
    degree: int = 3
    max_clique_cells: int = 100_000
    max_model_bytes: int = DEFAULT_MAX_MODEL_BYTES
    iterations: int = 500
    round_iterations: int = 50
    _model: MstModel | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        check_proportion(self.one_way_share, "one_way_share")
        check_proportion(self.select_fraction, "select_fraction")
        for name in (
            "rounds_per_column",
            "degree",
            "max_clique_cells",
            "max_model_bytes",
            "iterations",
            "round_iterations",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SdsInputError(f"aim {name} must be a positive integer, got {value!r}")

    def _rhos(self, epsilon: float, delta: float | None) -> tuple[float, float, float]:
        epsilon = check_epsilon(epsilon)
        if delta is None or not 0 < delta < 1:
            raise SdsInputError(
                f"aim needs delta in (0, 1): values are read from the data and thresholded, "
                f"and the zCDP budget is converted at delta/2; got {delta!r}"
            )
        rho = epsilon_to_zcdp(epsilon, delta / 2)
        r1 = rho * self.one_way_share
        return rho, r1, rho - r1

    def budget(self, epsilon: float, delta: float | None) -> tuple[SynthesizerSpend, ...]:
        """Two charges (1-way, rounds), ε and δ apportioned by ρ, adding up exactly.

        The one-way stage also carries the δ/2 of the value-release threshold.
        """
        rho, r1, rr = self._rhos(epsilon, delta)
        assert delta is not None
        eps = exact_split([epsilon * r1 / rho, epsilon * rr / rho], epsilon)
        dels = exact_split([delta / 2 * r1 / rho, delta / 2 * rr / rho], delta / 2)
        dels = exact_split([dels[0] + delta / 2, dels[1]], delta)
        mechs = (
            "discrete-gaussian+value-threshold",
            "exponential-mechanism (bounded range)+discrete-gaussian, adaptive rounds",
        )
        return tuple(
            SynthesizerSpend(f"{self.name}/{s}", m, e, d_, r)
            for s, m, e, d_, r in zip(STAGES, mechs, eps, dels, (r1, rr), strict=True)
        )

    def check_size(self, domain: Domain) -> int:
        """Bytes of the smallest model (1-way only); the rounds stay within the limit.

        Raises:
            SdsInputError: above ``max_model_bytes``, naming the columns (nothing is spent).
        """
        sizes = tuple(k + 1 for k in domain.cardinalities)
        return check_model_size(
            sizes,
            [(i,) for i in range(len(sizes))],
            domain.columns,
            self.max_model_bytes,
            what="the aim model",
        )

    def fit(
        self,
        table: PreparedTable,
        *,
        epsilon: float,
        delta: float | None,
        rnd: ReleaseRandomness,
        release_label: str,
    ) -> FitResult:
        """Measure the 1-way marginals, run the rounds, fit (labels ``{release_label}/aim/...``)."""
        spends = self.budget(epsilon, delta)
        self.check_size(table.domain)
        rho, r1, rr = self._rhos(epsilon, delta)
        assert delta is not None
        dom = table.domain
        d = dom.n_columns
        stage1, stage_r = (s.stage for s in spends)
        # --- 1-way marginals (as mst) ----------------------------------------------------------
        sigma1 = math.sqrt(d / (2 * r1))
        threshold = release_threshold(sigma1, delta / (2 * d))
        released, cats, one_way = measure_one_way(
            table, rnd, f"{release_label}/{stage1}", stage1, sigma1, threshold
        )
        sizes = tuple(k + 1 for k in released.cardinalities)
        ms = _one_way_measurements(one_way, sizes, sigma1)
        sums = [(float(v.sum() + e), (v.size + 1) * sigma1**2) for v, e in one_way if e is not None]
        n_hat = max(float(np.mean([v.sum() + (e or 0) for v, e in one_way])), 1.0)
        # --- candidates and their exact answers (sensitive, used only under DP) ----------------
        weights = {
            r: w
            for r, w in workload_weights(d, self.degree).items()
            if math.prod(sizes[c] for c in r) <= self.max_clique_cells
        }
        exact: dict[Clique, NDArray[np.float64]] = {}
        for r in weights:
            flat = np.ravel_multi_index(tuple(cats[:, c] for c in r), tuple(sizes[c] for c in r))
            exact[r] = np.bincount(flat, minlength=math.prod(sizes[c] for c in r)).astype(float)
        sensitivity = max(weights.values(), default=1.0)
        # --- rounds ---------------------------------------------------------------------------
        alpha = self.select_fraction
        planned = self.rounds_per_column * d
        sigma = math.sqrt(planned / (2 * (1 - alpha) * rr))
        eps_sel = math.sqrt(8 * alpha * rr / planned)
        measured: list[Clique] = [(j,) for j in range(d)]
        total = _total(sums, n_hat)
        tree = tree_of_cliques(sizes, measured)
        fitted = fit_model(tree, ms, total, iterations=self.round_iterations)
        used, last = 0.0, False
        rounds: list[tuple[Clique, NDArray[np.int64], float, float]] = []
        while not last:
            remaining = rr - used
            cost = 1 / (2 * sigma**2) + eps_sel**2 / 8
            if remaining < 2 * cost:  # spend exactly what is left
                sigma = math.sqrt(1 / (2 * (1 - alpha) * remaining))
                eps_sel = math.sqrt(8 * alpha * remaining)
                cost, last = remaining, True
            used += cost
            limit = self.max_model_bytes * min(used / rr, 1.0)
            options = [
                r
                for r in weights
                if model_bytes(sizes, tree_of_cliques(sizes, [*measured, r]).cliques) <= limit
            ]
            if not options:  # nothing fits yet: re-measure the 1-way marginals' columns
                options = [r for r in weights if len(r) == 1]
            bias = math.sqrt(2 / math.pi) * sigma
            scores = np.array(
                [
                    weights[r]
                    * (
                        float(np.abs(_answer(fitted.tree, fitted.marginals, r) - exact[r]).sum())
                        - bias * exact[r].size
                    )
                    for r in options
                ]
            )
            t = len(rounds)
            u = _uniforms(rnd, f"{release_label}/{stage_r}/select/{t}", len(options), stage_r)
            pick = options[
                int(np.argmax(scores * eps_sel / (2 * sensitivity) - np.log(-np.log(u))))
            ]
            z = noise.discrete_gaussian(
                rnd,
                f"{release_label}/{stage_r}/measure/{t}/" + "+".join(dom.columns[c] for c in pick),
                sigma=sigma,
                size=exact[pick].size,
                stage=stage_r,
            )
            y = exact[pick].astype(np.int64) + z
            before = _answer(fitted.tree, fitted.marginals, pick)
            ms.append(Measurement(pick, np.arange(y.size, dtype=np.int64), y.astype(float), sigma))
            sums.append((float(y.sum()), y.size * sigma**2))
            if pick not in measured:
                measured.append(pick)
            rounds.append((pick, y, sigma, eps_sel))
            total = _total(sums, n_hat)
            new_tree = tree_of_cliques(sizes, measured)
            start = _warm_start(fitted.tree, fitted.potentials, new_tree)
            iterations = self.iterations if last else self.round_iterations
            fitted = fit_model(new_tree, ms, total, iterations=iterations, start=start)
            moved = float(np.abs(_answer(fitted.tree, fitted.marginals, pick) - before).sum())
            if not last and moved <= bias * y.size:
                sigma, eps_sel = sigma / 2, eps_sel * 2
        aggregates = _published(released, one_way, rounds, sizes, round(total))
        self._model = MstModel(released, aggregates, fitted, round(total))
        report = {
            "synthesizer": self.name,
            "guarantee": f"({epsilon:g}, {delta:g})-DP (ρ = {rho:.6g}-zCDP converted at δ/2, "
            "value threshold δ/2), add/remove-one-record neighbours",
            "rho": {"one_way": r1, "rounds": rr},
            "sigma_one_way": sigma1,
            "value_threshold": threshold,
            "rounds": [
                {
                    "columns": [dom.columns[c] for c in r],
                    "sigma": s,
                    "epsilon_selection": e,
                    "rho": 1 / (2 * s**2) + e**2 / 8,
                }
                for r, _, s, e in rounds
            ],
            "selection_noise": "Gumbel-max from the keyed stream (floating point)",
        }
        return FitResult(spends, self._model, report)

    def sample(self, n: int | None, *, rng: np.random.Generator) -> PreparedTable:
        """Records from the fitted model (n=None: the model's DP total), controlled rounding."""
        if self._model is None:
            raise SdsInputError("aim: call fit() before sample()")
        return sample_fitted(self._model, n, rng=rng)


def _answer(tree: JunctionTree, marginals: tuple[Table, ...], r: Clique) -> Table:
    return marginal_of(tree, marginals, r).reshape(-1)


def _one_way_measurements(
    one_way: OneWay, sizes: tuple[int, ...], sigma: float
) -> list[Measurement]:
    ms = []
    for j, (v, e) in enumerate(one_way):
        cells = np.arange(v.size, dtype=np.int64)
        if e is not None:
            cells, v = np.append(cells, sizes[j] - 1), np.append(v, e)
        if cells.size:
            ms.append(Measurement((j,), cells, v.astype(np.float64), sigma))
    return ms


def _total(sums: list[tuple[float, float]], fallback: float) -> float:
    """Inverse-variance mean of every complete noisy table's sum (at least 1)."""
    if not sums:
        return max(fallback, 1.0)
    weights = [1.0 / var for _, var in sums]
    return max(sum(w * t for w, (t, _) in zip(weights, sums, strict=True)) / sum(weights), 1.0)


def _warm_start(old: JunctionTree, theta: tuple[Table, ...], new: JunctionTree) -> list[Table]:
    """The old potentials moved into new cliques that contain them (others start at zero)."""
    out = [np.zeros(new.clique_shape(j)) for j in range(len(new.cliques))]
    for clique, t in zip(old.cliques, theta, strict=True):
        j = new.containing(clique)
        if j >= 0:
            out[j] = out[j] + t.reshape(broadcast_shape(clique, new.cliques[j], new.sizes))
    return out


def _published(
    domain: Domain,
    one_way: OneWay,
    rounds: list[tuple[Clique, NDArray[np.int64], float, float]],
    sizes: tuple[int, ...],
    total: int,
) -> AggregateSet:
    """The measured marginals as DP aggregates: non-empty cells with a noisy count > 0.

    A marginal measured more than once is published as the inverse-variance mean of its
    measurements, rounded (post-processing).
    """
    offsets = domain.offsets
    combined: dict[Clique, tuple[NDArray[np.float64], float]] = {}
    for r, y, s, _ in rounds:
        if r in combined:
            acc, w = combined[r]
            combined[r] = (acc + y / s**2, w + 1 / s**2)
        else:
            combined[r] = (y / s**2, 1 / s**2)
    rows: dict[int, tuple[list[list[int]], list[int]]] = {}
    for j, (v, _) in enumerate(one_way):
        attrs, counts = rows.setdefault(1, ([], []))
        for i, c in enumerate(v.tolist()):
            if c > 0 and (j,) not in combined:
                attrs.append([offsets[j] + i])
                counts.append(int(c))
    for r, (acc, w) in combined.items():
        attrs, counts = rows.setdefault(len(r), ([], []))
        table = np.rint(acc / w).astype(np.int64).reshape(tuple(sizes[c] for c in r))
        table = table[tuple(slice(0, -1) for _ in r)]
        for cell in zip(*np.nonzero(table > 0), strict=True):
            attrs.append([offsets[c] + int(i) for c, i in zip(r, cell, strict=True)])
            counts.append(int(table[cell]))
    length = max(rows)
    by_len = {
        k: CombinationCounts.from_unsorted(
            np.array(rows.get(k, ([], []))[0], dtype=np.int32).reshape(-1, k),
            np.array(rows.get(k, ([], []))[1], dtype=np.int64),
        )
        for k in range(1, length + 1)
    }
    return AggregateSet(domain, length, by_len, max(total, 1), is_dp=True, domain_released=True)
