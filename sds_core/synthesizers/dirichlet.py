"""ε-DP Dirichlet-multinomial synthesizer (J. Hu's slides; Abowd & Vilhuber 2008, Machanavajjhala
et al. 2008): posterior-predictive sampling of a contingency table with a large prior.

θ* ~ Dirichlet(y + alpha) with every alpha_i ≥ m/(e^ε - 1), y* ~ Multinomial(m, θ*), and y*
(only y*) is released and expanded into records. The prior floor is what makes y* ε-DP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import EMPTY_CODE, Domain
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError, invariant
from sds_core.synthesizers.base import (
    FitResult,
    SynthesizerSpend,
    cell_codes,
    cell_index,
    check_epsilon,
    check_n,
    check_proportion,
    check_table_size,
    dp_record_count,
    pure_spend,
    register,
    restrict_labels,
    select_columns,
)
from sds_core.synthesizers.histogram import DEFAULT_MAX_CELLS, noisy_marginal, stability_threshold


def alpha_min(total: int, epsilon: float) -> float:
    """The smallest prior count per cell for ε-DP: ``total / (e^ε - 1)`` (slides eq. 13).

    >>> round(alpha_min(816 + 109 + 7 + 39 + 6 + 17, 5.0), 6)
    6.742953
    """
    return total / math.expm1(check_epsilon(epsilon))


def log_posterior_predictive(
    y_star: NDArray[np.int64], y: NDArray[np.int64], alpha: NDArray[np.float64]
) -> float:
    """log p(y* | y, alpha) of the Dirichlet-multinomial posterior predictive (slides eq. 8)."""
    lg = math.lgamma
    a = [float(v) for v in np.asarray(y, dtype=np.float64) + alpha]
    s = [int(v) for v in y_star]
    m = sum(s)
    out = lg(m + 1) - sum(lg(v + 1) for v in s)
    out += lg(sum(a)) - sum(lg(v) for v in a)
    out += sum(lg(v + w) for v, w in zip(s, a, strict=True)) - lg(m + sum(a))
    return out


@dataclass(frozen=True, slots=True, eq=False)
class DirichletModel:
    """The DP model: the synthetic contingency table y* (non-zero cells) over ``domain``."""

    domain: Domain
    cards: tuple[int, ...]
    cells: NDArray[np.int64]
    counts: NDArray[np.int64]
    total: int
    alpha: float
    total_is_public: bool

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form (all DP quantities, given a DP or public total)."""
        codes = cell_codes(self.cells, self.cards)
        rows = [
            {
                c: (labs[v] if v >= 0 else None)
                for c, labs, v in zip(self.domain.columns, self.domain.labels, r, strict=True)
            }
            for r in codes.tolist()
        ]
        return {
            "total": self.total,
            "alpha": self.alpha,
            "total_is_public": self.total_is_public,
            "cells": rows,
            "counts": self.counts.tolist(),
        }


@register
@dataclass(slots=True)
class DirichletMultinomial:
    """ε-DP synthetic contingency table by posterior-predictive sampling.

    Args:
        columns: the contingency-table columns (= the output columns); None in a direct ``fit``
            means all table columns, but the pipeline passes them so :meth:`budget` is exact.
        public_total: True = the source's setting: the synthetic total is the true record count,
            which is treated as public (not protected by this mechanism; the release reveals it).
            False (default): a DP count (discrete Laplace, ``number_of_records_epsilon_proportion``
            of ε) is the synthetic total, and the guarantee holds for add/remove neighbours.
        number_of_records_epsilon_proportion: ε share of the DP count (public_total=False).
        public_domain: True if the table's labels are public (declared). False (default): each
            column's labels are first chosen by a stability-thresholded DP histogram
            (``domain_epsilon_proportion`` of ε and all of δ); values not chosen become empty.
        domain_epsilon_proportion: ε share of the label selection (public_domain=False).
        alpha: prior count per cell; None = the minimum ``m/(e^ε_post - 1)``; smaller values
            are refused (they would break the guarantee).
        max_cells: refuse contingency tables with more cells (each column's values + empty).
    """

    name: ClassVar[str] = "dirichlet-multinomial"

    columns: tuple[str, ...] | None = None
    public_total: bool = False
    number_of_records_epsilon_proportion: float = 0.05
    public_domain: bool = False
    domain_epsilon_proportion: float = 0.2
    alpha: float | None = None
    max_cells: int = DEFAULT_MAX_CELLS
    _model: DirichletModel | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        check_proportion(
            self.number_of_records_epsilon_proportion, "number_of_records_epsilon_proportion"
        )
        check_proportion(self.domain_epsilon_proportion, "domain_epsilon_proportion")
        if self.number_of_records_epsilon_proportion + self.domain_epsilon_proportion >= 1:
            raise SdsInputError(
                "number_of_records_epsilon_proportion + domain_epsilon_proportion must be < 1 "
                "(the rest is the posterior sampling's share)"
            )
        if self.alpha is not None and not (math.isfinite(self.alpha) and self.alpha > 0):
            raise SdsInputError(f"alpha must be a finite number > 0 or None, got {self.alpha!r}")
        if (
            isinstance(self.max_cells, bool)
            or not isinstance(self.max_cells, int)
            or (self.max_cells < 1)
        ):
            raise SdsInputError(f"max_cells must be a positive integer, got {self.max_cells!r}")
        if self.columns is not None:
            if isinstance(self.columns, str) or len(self.columns) == 0:
                raise SdsInputError(f"columns must be a non-empty list, got {self.columns!r}")
            self.columns = tuple(self.columns)

    def _shares(self, epsilon: float, delta: float | None) -> tuple[float, float, float, float]:
        """(ε count, ε label selection per column, δ per column, ε posterior)."""
        epsilon = check_epsilon(epsilon)
        eps_count = (
            0.0 if self.public_total else epsilon * self.number_of_records_epsilon_proportion
        )
        eps_dom, d_col = 0.0, 0.0
        if not self.public_domain:
            if self.columns is None:
                raise SdsInputError(
                    f"{self.name}: pass columns=[...]: the label-selection budget is split over "
                    "them and must be known before the data is read"
                )
            if delta is None or not 0 < delta < 1:
                raise SdsInputError(
                    f"{self.name}: delta must be in (0, 1) when public_domain=False (labels read "
                    f"from the data are thresholded, which costs delta), got {delta!r}"
                )
            n_columns = len(self.columns)
            eps_dom = epsilon * self.domain_epsilon_proportion / n_columns
            d_col = float(delta) / n_columns
        n_labelled = 0 if self.public_domain or self.columns is None else len(self.columns)
        eps_post = epsilon - eps_count - eps_dom * n_labelled
        return eps_count, eps_dom, d_col, eps_post

    def budget(self, epsilon: float, delta: float | None) -> tuple[SynthesizerSpend, ...]:
        """Count (or the public-total marker), per-column label selection, posterior sampling."""
        eps_count, eps_dom, d_col, eps_post = self._shares(epsilon, delta)
        if self.public_total:
            first = SynthesizerSpend(
                f"{self.name}/total",
                "public-total: exact record count released, not DP",
                0.0,
                0.0,
                None,
            )
        else:
            first = pure_spend(f"{self.name}/count", "discrete-laplace", eps_count)
        spends = [first]
        if not self.public_domain:
            spends += [
                pure_spend(
                    f"{self.name}/domain/{c}",
                    "discrete-laplace+stability-threshold",
                    eps_dom,
                    d_col,
                )
                for c in self.columns or ()
            ]
        spends.append(
            pure_spend(
                f"{self.name}/posterior", "dirichlet-multinomial-posterior-sampling", eps_post
            )
        )
        return tuple(spends)

    def fit(
        self,
        table: PreparedTable,
        *,
        epsilon: float,
        delta: float | None,
        rnd: ReleaseRandomness,
        release_label: str,
    ) -> FitResult:
        """Draw y* once (the only DP output) and keep it for :meth:`sample`."""
        if self.columns is None:
            self.columns = table.domain.columns
        spends = self.budget(epsilon, delta)
        eps_count, eps_dom, d_col, eps_post = self._shares(epsilon, delta)
        selected = select_columns(table, self.columns)
        dom, codes = selected.domain, selected.codes
        check_table_size(dom.cardinalities, dom.columns, self.max_cells)  # before any noise
        by_stage = {s.stage: s for s in spends}
        if self.public_total:
            total = table.n_records
        else:
            st = f"{self.name}/count"
            total = dp_record_count(
                table.n_records, eps_count, rnd=rnd, label=f"{release_label}/{st}", stage=st
            )
        threshold = None
        if not self.public_domain:
            threshold = stability_threshold(eps_dom, d_col)
            sub = PreparedTable(dom, codes)
            keep = []
            for j, c in enumerate(dom.columns):
                st = by_stage[f"{self.name}/domain/{c}"].stage
                marg = noisy_marginal(
                    sub,
                    (j,),
                    epsilon=eps_dom,
                    threshold=threshold,
                    max_cells=self.max_cells,
                    rnd=rnd,
                    label=f"{release_label}/{st}",
                    stage=st,
                )
                mask = np.zeros(dom.cardinalities[j], dtype=bool)
                mask[marg.cells[marg.cells < dom.cardinalities[j]]] = True
                keep.append(mask)
            dom, maps = restrict_labels(dom, keep)
            for j, mp in enumerate(maps):
                col = codes[:, j]
                codes[:, j] = np.where(col >= 0, mp[np.maximum(col, 0)], EMPTY_CODE)
        cards = dom.cardinalities
        n_cells = check_table_size(cards, dom.columns, self.max_cells)
        y = np.bincount(cell_index(codes, cards), minlength=n_cells).astype(np.int64)
        a_min = alpha_min(total, eps_post)
        alpha = a_min if self.alpha is None else float(self.alpha)
        if alpha < a_min:
            raise SdsInputError(
                f"alpha={alpha:g} is below the ε-DP minimum m/(e^ε - 1) = {a_min:g} for the "
                "posterior's ε share; leave alpha=None or raise it"
            )
        stage = f"{self.name}/posterior"
        gen = rnd.generator(f"{release_label}/{stage}")
        y_star = np.zeros(n_cells, dtype=np.int64)
        if total > 0:
            g = gen.standard_gamma(y + alpha)
            # all-zero only if every shape underflowed (empty table, tiny alpha): uniform theta
            theta = g / g.sum() if g.sum() > 0 else np.full(n_cells, 1.0 / n_cells)
            y_star = gen.multinomial(total, theta).astype(np.int64)
        invariant(int(y_star.sum()) == total, "y* must sum to the synthetic total")
        nz = np.flatnonzero(y_star)
        self._model = DirichletModel(
            dom, cards, nz.astype(np.int64), y_star[nz], int(total), alpha, self.public_total
        )
        report = {
            "synthesizer": self.name,
            "guarantee": (
                f"({epsilon:g}, {sum(s.delta for s in spends):g})-DP"
                + (
                    " for neighbours with the same total (the exact total is released as public)"
                    if self.public_total
                    else ", add/remove-one-record neighbours"
                )
            ),
            "mechanisms": [s.mechanism for s in spends],
            "epsilon_posterior": eps_post,
            "alpha": alpha,
            "alpha_min": a_min,
            "cells": n_cells,
            "total_is_public": self.public_total,
            "stability_threshold": threshold,
            "randomness": "θ*, y*: float Gamma/Binomial draws from a PCG64 generator seeded "
            "by SHAKE-256(release key, label) (see docs/synthesizers.md)",
        }
        return FitResult(spends, self._model, report)

    def sample(self, n: int | None, *, rng: np.random.Generator) -> PreparedTable:
        """n=None or n = total: the records of y* (shuffled); other n: i.i.d. draws ∝ y*."""
        if self._model is None:
            raise SdsInputError(f"{self.name}: call fit() before sample()")
        model = self._model
        n = check_n(n, model.total)
        if n == model.total:
            cells = rng.permutation(np.repeat(model.cells, model.counts))
        elif model.total == 0:
            cells = np.full(n, -1, dtype=np.int64)
        else:
            cells = rng.choice(model.cells, size=n, p=model.counts / model.total)
        codes = cell_codes(np.maximum(cells, 0), model.cards)
        codes[cells < 0] = EMPTY_CODE
        return PreparedTable(model.domain, codes)
