"""Marginal-histogram synthesizers (Programming DP, "Synthetic Data" chapter).

``histogram-1way`` noises one histogram per column and samples columns independently;
``histogram-nway`` noises one joint histogram over chosen columns (sampled jointly) plus a 1-way
histogram for every other column. The number of rows comes from a separate DP count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import EMPTY_CODE, Domain
from sds_core.data.table import PreparedTable
from sds_core.dp import noise
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
    laplace_tv_per_draw,
    pure_spend,
    register,
    restrict_labels,
    sample_cells,
    select_columns,
)

DEFAULT_MAX_CELLS = 10**7


def stability_threshold(epsilon: float, delta: float) -> int:
    """Smallest integer t ≥ 2 with P(1 + Z ≥ t) ≤ δ for Z ~ discrete Laplace(1/ε).

    P(Z ≥ s) = q^s/(1+q) for s ≥ 1 and q = e^{-ε}, so a value held by one record only is
    released with probability ≤ δ: the stability-based histogram is (ε, δ)-DP.

    >>> stability_threshold(1.0, 1e-6)
    15
    """
    q = math.exp(-epsilon)
    s = math.ceil(math.log(1.0 / (delta * (1.0 + q))) / epsilon - 1e-12)
    return max(1 + s, 2)


@dataclass(frozen=True, slots=True, eq=False)
class DpMarginal:
    """A DP histogram over ``columns``: ``cells`` (mixed-radix, empty = last category per column)
    and their noisy ``counts`` (integers, unclipped; negative values are possible)."""

    columns: tuple[str, ...]
    cards: tuple[int, ...]
    cells: NDArray[np.int64]
    counts: NDArray[np.int64]

    @property
    def weights(self) -> NDArray[np.float64]:
        """Counts clipped at 0 (the sampling weights)."""
        return np.clip(self.counts, 0, None).astype(np.float64)

    def range_count(self, lo: int, hi: int) -> int:
        """Range query on a 1-way marginal: sum of noisy counts of codes ``lo <= code < hi``."""
        invariant(len(self.columns) == 1, "range_count needs a 1-way marginal")
        mask = (self.cells >= lo) & (self.cells < hi)
        return int(self.counts[mask].sum())

    def as_dict(self, domain: Domain) -> dict[str, object]:
        """JSON-ready form: each cell as its ``{column: value or None}`` record."""
        idx = [domain.column_index(c) for c in self.columns]
        codes = cell_codes(self.cells, self.cards)
        rows = [
            {
                c: (domain.labels[i][v] if v >= 0 else None)
                for c, i, v in zip(self.columns, idx, r, strict=True)
            }
            for r in codes.tolist()
        ]
        return {"columns": list(self.columns), "cells": rows, "counts": self.counts.tolist()}


@dataclass(frozen=True, slots=True, eq=False)
class HistogramModel:
    """The DP model: the (DP) domain, the noisy marginals and the DP record count."""

    domain: Domain
    marginals: tuple[DpMarginal, ...]
    dp_count: int

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form (all DP quantities)."""
        return {
            "dp_count": self.dp_count,
            "marginals": [m.as_dict(self.domain) for m in self.marginals],
        }


def noisy_marginal(
    table: PreparedTable,
    cols: tuple[int, ...],
    *,
    epsilon: float,
    threshold: int | None,
    max_cells: int,
    rnd: ReleaseRandomness,
    label: str,
    stage: str,
) -> DpMarginal:
    """Discrete-Laplace(1/ε) histogram over ``cols`` (sensitivity 1 under add/remove).

    ``threshold`` None: every cell of the (public) domain is noised. Otherwise only cells
    present in the data are noised and those below ``threshold`` are dropped (stability).
    """
    dom = table.domain
    cards = tuple(dom.cardinalities[i] for i in cols)
    names = tuple(dom.columns[i] for i in cols)
    rec = cell_index(table.codes[:, list(cols)], cards)
    if threshold is None:
        total = check_table_size(cards, names, max_cells)
        exact = np.bincount(rec, minlength=total).astype(np.int64)
        cells = np.arange(total, dtype=np.int64)
    else:
        cells, exact = np.unique(rec, return_counts=True)
        exact = exact.astype(np.int64)
    z = noise.discrete_laplace(rnd, label, scale=1.0 / epsilon, size=cells.size, stage=stage)
    noisy = exact + z
    if threshold is not None:
        keep = noisy >= threshold
        cells, noisy = cells[keep], noisy[keep]
    return DpMarginal(names, cards, cells.astype(np.int64), noisy.astype(np.int64))


def _restrict(domain: Domain, marginals: list[DpMarginal]) -> tuple[Domain, tuple[DpMarginal, ...]]:
    """Drop labels that no released cell carries (the data-derived domain must not leak)."""
    keep = [np.zeros(k, dtype=bool) for k in domain.cardinalities]
    for m in marginals:
        codes = cell_codes(m.cells[m.counts > 0], m.cards)
        for j, c in enumerate(m.columns):
            col = codes[:, j]
            keep[domain.column_index(c)][col[col >= 0]] = True
    new_domain, maps = restrict_labels(domain, keep)
    out = []
    for m in marginals:
        idx = [domain.column_index(c) for c in m.columns]
        codes = cell_codes(m.cells, m.cards)
        for j, i in enumerate(idx):
            col = codes[:, j]
            codes[:, j] = np.where(col >= 0, maps[i][np.maximum(col, 0)], EMPTY_CODE)
        alive = m.counts > 0
        cards = tuple(new_domain.cardinalities[i] for i in idx)
        out.append(DpMarginal(m.columns, cards, cell_index(codes[alive], cards), m.counts[alive]))
    return new_domain, tuple(out)


@dataclass(slots=True)
class _HistogramBase:
    """Shared fit/sample of the histogram synthesizers (subclasses choose the cliques)."""

    name: ClassVar[str] = ""

    columns: tuple[str, ...] | None = None
    number_of_records_epsilon_proportion: float = 0.05
    public_domain: bool = False
    max_cells: int = DEFAULT_MAX_CELLS
    _model: HistogramModel | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        check_proportion(
            self.number_of_records_epsilon_proportion, "number_of_records_epsilon_proportion"
        )
        if (
            isinstance(self.max_cells, bool)
            or not isinstance(self.max_cells, int)
            or (self.max_cells < 1)
        ):
            raise SdsInputError(f"max_cells must be a positive integer, got {self.max_cells!r}")
        if self.columns is not None:
            if isinstance(self.columns, str) or len(self.columns) == 0:
                raise SdsInputError(
                    f"columns must be a non-empty list of names, got {self.columns!r}"
                )
            self.columns = tuple(self.columns)

    def _cliques(self) -> list[tuple[str, ...]]:
        """The marginals, as column-name tuples (needs ``columns``)."""
        raise NotImplementedError

    def _shares(self, epsilon: float, delta: float | None) -> tuple[float, float, float]:
        """(ε of the count, ε per marginal, δ per marginal)."""
        epsilon = check_epsilon(epsilon)
        if not self.public_domain and (delta is None or not 0 < delta < 1):
            raise SdsInputError(
                f"{self.name}: delta must be in (0, 1) when public_domain=False (values are read "
                f"from the data and thresholded, which costs delta), got {delta!r}; give a delta "
                "or declare the domain public with public_domain=True"
            )
        m = len(self._cliques())
        eps_count = epsilon * self.number_of_records_epsilon_proportion
        d_marg = 0.0 if self.public_domain else float(delta) / m  # type: ignore[arg-type]
        return eps_count, (epsilon - eps_count) / m, d_marg

    def _require_columns(self) -> tuple[str, ...]:
        if self.columns is None:
            raise SdsInputError(
                f"{self.name}: pass columns=[...] (the columns to synthesize): the budget is "
                "split over them and must be known before the data is read"
            )
        return self.columns

    def budget(self, epsilon: float, delta: float | None) -> tuple[SynthesizerSpend, ...]:
        """Count: ε·p_N (discrete Laplace); each marginal: ε·(1-p_N)/m (and δ/m if thresholded).

        Sequential composition over the m marginals (each record is in every marginal), parallel
        composition over the bins of one marginal.
        """
        eps_count, eps_m, d_m = self._shares(epsilon, delta)
        mech = "discrete-laplace" if self.public_domain else "discrete-laplace+stability-threshold"
        spends = [pure_spend(f"{self.name}/count", "discrete-laplace", eps_count)]
        spends += [
            pure_spend(f"{self.name}/marginal/{'+'.join(c)}", mech, eps_m, d_m)
            for c in self._cliques()
        ]
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
        """Noise the count and every marginal; keep the DP model for :meth:`sample`."""
        if self.columns is None:
            self.columns = table.domain.columns
        spends = self.budget(epsilon, delta)
        table = select_columns(table, self.columns)
        dom = table.domain
        cliques = [tuple(sorted(dom.column_index(c) for c in cl)) for cl in self._cliques()]
        eps_count, eps_m, d_m = self._shares(epsilon, delta)
        threshold = None if self.public_domain else stability_threshold(eps_m, d_m)
        dp_count = dp_record_count(
            table.n_records,
            eps_count,
            rnd=rnd,
            label=f"{release_label}/{spends[0].stage}",
            stage=spends[0].stage,
        )
        margs = [
            noisy_marginal(
                table,
                cl,
                epsilon=eps_m,
                threshold=threshold,
                max_cells=self.max_cells,
                rnd=rnd,
                label=f"{release_label}/{sp.stage}",
                stage=sp.stage,
            )
            for cl, sp in zip(cliques, spends[1:], strict=True)
        ]
        if self.public_domain:
            domain, marginals = dom, tuple(margs)
        else:
            domain, marginals = _restrict(dom, margs)
        self._model = HistogramModel(domain, marginals, dp_count)
        report = {
            "synthesizer": self.name,
            "guarantee": f"({epsilon:g}, {sum(s.delta for s in spends):g})-DP, "
            "add/remove-one-record neighbours",
            "mechanisms": [s.mechanism for s in spends],
            "public_domain": self.public_domain,
            "stability_threshold": threshold,
            "number_of_records_epsilon_proportion": self.number_of_records_epsilon_proportion,
            "noise_tv_per_draw": {
                s.stage: laplace_tv_per_draw(s.epsilon) for s in spends if s.epsilon > 0
            },
        }
        return FitResult(spends, self._model, report)

    def sample(self, n: int | None, *, rng: np.random.Generator) -> PreparedTable:
        """Each marginal sampled independently (i.i.d. cells ∝ clipped counts); n=None: DP count."""
        if self._model is None:
            raise SdsInputError(f"{self.name}: call fit() before sample()")
        model = self._model
        n = check_n(n, model.dp_count)
        codes = np.full((n, model.domain.n_columns), EMPTY_CODE, dtype=np.int32)
        for m in model.marginals:
            idx = sample_cells(m.weights, n, rng=rng)
            cells = m.cells[np.maximum(idx, 0)] if m.cells.size else np.zeros(n, dtype=np.int64)
            part = cell_codes(cells, m.cards)
            part[idx < 0] = EMPTY_CODE
            codes[:, [model.domain.column_index(c) for c in m.columns]] = part
        return PreparedTable(model.domain, codes)


@register
@dataclass(slots=True)
class Histogram1Way(_HistogramBase):
    """One DP histogram per column, columns sampled independently (correlations are lost).

    Args:
        columns: the columns to synthesize (the budget is split over them, so the pipeline
            passes them before reading data; None in a direct ``fit``: all table columns).
        number_of_records_epsilon_proportion: share of ε spent on the DP record count.
        public_domain: True if the table's Domain labels are public (declared, not read from
            the data): every label is noised, pure ε-DP. False (default): only values present
            in the data are noised and kept when their noisy count reaches the stability
            threshold, (ε, δ)-DP.
        max_cells: largest histogram materialized (public_domain only).
    """

    name: ClassVar[str] = "histogram-1way"

    def _cliques(self) -> list[tuple[str, ...]]:
        return [(c,) for c in self._require_columns()]


@register
@dataclass(slots=True)
class HistogramNWay(_HistogramBase):
    """One joint DP histogram over ``marginal_columns`` (sampled jointly) + a 1-way histogram
    for every other column of ``columns``.

    Args:
        marginal_columns: the columns of the n-way marginal (at least 2).
        columns: all columns to synthesize (must contain ``marginal_columns``); see
            :class:`Histogram1Way` for this and the other options.
    """

    name: ClassVar[str] = "histogram-nway"
    marginal_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _HistogramBase.__post_init__(self)
        mc = self.marginal_columns
        if isinstance(mc, str) or len(mc) < 2 or len(set(mc)) != len(mc):
            raise SdsInputError(
                "histogram-nway needs marginal_columns = at least 2 distinct column names, "
                f"got {mc!r}"
            )
        self.marginal_columns = tuple(mc)
        if self.columns is not None:
            missing = sorted(set(mc) - set(self.columns))
            if missing:
                raise SdsInputError(
                    f"marginal_columns {missing} are not in columns {list(self.columns)}"
                )

    def _cliques(self) -> list[tuple[str, ...]]:
        cols = self._require_columns()
        return [self.marginal_columns] + [(c,) for c in cols if c not in self.marginal_columns]
