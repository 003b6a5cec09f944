"""``synthesis = "model"``: one consistent distribution fitted to the published DP aggregates.

Pure post-processing of what a release publishes: the aggregates (noisy counts of the
combinations of length 1..R that survived), the noise scale and threshold of each length, and
the protected record count. Each length's counts are Gaussian measurements of the model's
marginals (noise σ_k·√Δ_k); a candidate combination that was suppressed is a censored
measurement (its noisy count fell below the threshold), not a zero; the protected count fixes
the total. The model is a junction tree of cliques of up to four columns chosen from the aggregates
(:func:`choose_tree`, or :mod:`sds_core.synthesis.dependence`), fitted by
:func:`sds_core.model.estimation.fit_model`, then sampled.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import EMPTY_CODE, Domain
from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.errors import SdsInputError, invariant
from sds_core.marginals.aggregates import AggregateSet
from sds_core.model.estimation import FittedModel, fit_model, match_one_way
from sds_core.model.measurements import Measurement
from sds_core.model.sampling import sample_records
from sds_core.model.structure import (
    DEFAULT_MAX_MODEL_BYTES,
    Clique,
    JunctionTree,
    check_model_size,
)
from sds_core.synthesis.dependence import pair_dependence, tree_by_pairs
from sds_core.synthesis.sizes import DEFAULT_MAX_CLIQUE_CELLS, DEFAULT_MAX_CLIQUE_COLUMNS

DEFAULT_MAX_MODEL_CELLS = 1_500_000
MODEL_STRUCTURES = ("g-statistic", "pair-dependence")


@dataclass(frozen=True, slots=True)
class AggregateNoise:
    """The published noise of each length: what makes the aggregates measurements.

    Args:
        sigma_by_len: noise standard deviation of a length-k count, σ_k·√Δ_k (k = 1..R).
        threshold_by_len: ρ_k, a length-k count was published only when its noisy value
            exceeded it (and 0); inf when the length released nothing.
        count_scale: scale b of the discrete Laplace noise of the protected record count
            (1/ε_N); 0 when unknown, and the protected count is then the model's total as it
            is (:func:`estimated_total`).
    """

    sigma_by_len: tuple[float, ...]
    threshold_by_len: tuple[float, ...]
    count_scale: float = 0.0

    def __post_init__(self) -> None:
        if len(self.sigma_by_len) != len(self.threshold_by_len):
            raise SdsInputError("one noise scale and one threshold per length")
        for k, s in enumerate(self.sigma_by_len, start=1):
            if not (math.isfinite(s) and s >= 0):
                raise SdsInputError(f"noise scale of length {k} must be finite and >= 0, got {s}")
        if not (math.isfinite(self.count_scale) and self.count_scale >= 0):
            raise SdsInputError(
                f"the record count's noise scale must be finite and >= 0, got {self.count_scale}"
            )

    @classmethod
    def from_release(
        cls,
        sigma_by_len: Sequence[float],
        allowed_sensitivity_by_len: Sequence[int],
        threshold_by_len: Sequence[float],
        count_scale: float = 0.0,
    ) -> AggregateNoise:
        """From the privacy report's σ_k, Δ_k and ρ_k (and the record count's scale 1/ε_N)."""
        return cls(
            tuple(
                float(s) * math.sqrt(max(int(a), 0))
                for s, a in zip(sigma_by_len, allowed_sensitivity_by_len, strict=True)
            ),
            tuple(float(t) for t in threshold_by_len),
            float(count_scale),
        )

    @classmethod
    def from_description(cls, noise: Mapping[str, Any]) -> AggregateNoise:
        """From a release's published noise description (the manifest's ``privacy.noise``).

        Each ``by_length`` entry's ``noise_sd`` (σ_k·√Δ_k) and ``threshold`` (None: the length
        released nothing), and ``record_count.scale`` (absent: 0). A release's consistent model
        is refitted from exactly these.

        >>> AggregateNoise.from_description({"by_length": [
        ...     {"length": 2, "noise_sd": 3.0, "threshold": None},
        ...     {"length": 1, "noise_sd": 2.0, "threshold": 5.5}],
        ...     "record_count": {"scale": 50.0}})
        AggregateNoise(sigma_by_len=(2.0, 3.0), threshold_by_len=(5.5, inf), count_scale=50.0)
        """
        entries = sorted(noise.get("by_length") or [], key=lambda e: int(e["length"]))
        if [int(e["length"]) for e in entries] != list(range(1, len(entries) + 1)):
            raise SdsInputError("the noise description must give lengths 1..R, each once")
        count = noise.get("record_count") or {}
        return cls(
            tuple(float(e["noise_sd"]) for e in entries),
            tuple(math.inf if e["threshold"] is None else float(e["threshold"]) for e in entries),
            float(count.get("scale") or 0.0),
        )


@dataclass(frozen=True, slots=True)
class ModelParams:
    """Settings of the consistent model (none costs budget; all are public).

    Args:
        max_clique_cells: a pair or triple of columns whose table has more cells is never a
            clique of the model (the model stays small; those columns are linked through
            smaller cliques or not at all).
        max_model_cells: the chosen cliques hold at most this many cells in total (fit time
            is proportional to it: a clique that would exceed it is not a candidate).
        max_model_bytes: refuse to fit when the chosen model needs more working memory
            (~48 bytes per clique cell).
        max_clique_columns: most columns in one clique, 2..4 (cliques wider than the reporting
            length R hold no count of their full width, but tie R-way counts together).
        iterations: most mirror-descent iterations. Few on purpose: the fit's likelihood
            keeps improving on the noise of the aggregates while the records' error grows
            again after ~100 iterations (docs/consistent-model.md); stopping early regularises.
        structure: how the cliques are chosen. ``"g-statistic"`` (:func:`choose_tree`): the
            largest G-statistic of each column with a separator, from the published tables of
            the clique. ``"pair-dependence"`` (:mod:`sds_core.synthesis.dependence`): the
            pairs whose published 2-way tables are furthest from independence net of noise,
            counted in records; better when R = 2 (no published table wider than a pair) or
            a high-cardinality column makes noisy pairs look significant (issue 22's sweep:
            ``git show 78ca7e7:docs/benchmarks.md``, "What the sweeps showed"). Needs R >= 2
            (with R = 1 both are the same).
        match_one_way: after the fit, adjust the model so every column's marginal lies within
            one noise standard deviation of its published DP 1-way counts, its empty category
            taking the rest of the estimated total (:func:`one_way_targets`,
            :func:`sds_core.model.estimation.match_one_way`; moving only the values outside,
            TVD2 0.0315 vs 0.0323 for matching exactly on 100k binned ε = 1). The 1-way
            counts are the least noisy of all; the fit, stopped early on purpose, leaves them
            several noise intervals away once counts are large (100k rows: 86% of the values
            inside their 95% interval before, issue 22).
    """

    max_clique_cells: int = DEFAULT_MAX_CLIQUE_CELLS
    max_model_cells: int = DEFAULT_MAX_MODEL_CELLS
    max_model_bytes: int = DEFAULT_MAX_MODEL_BYTES
    max_clique_columns: int = DEFAULT_MAX_CLIQUE_COLUMNS
    iterations: int = 100
    structure: str = "g-statistic"
    match_one_way: bool = True

    def __post_init__(self) -> None:
        for name in ("max_clique_cells", "max_model_cells", "max_model_bytes", "iterations"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SdsInputError(f"model {name} must be a positive integer, got {value!r}")
        width = self.max_clique_columns
        if isinstance(width, bool) or not isinstance(width, int) or not 2 <= width <= 4:
            raise SdsInputError(f"model max_clique_columns must be 2, 3 or 4, got {width!r}")
        if not isinstance(self.match_one_way, bool):
            raise SdsInputError(
                f"model match_one_way must be true or false, got {self.match_one_way!r}"
            )
        if self.structure not in MODEL_STRUCTURES:
            raise SdsInputError(
                f"model structure must be one of {MODEL_STRUCTURES}, got {self.structure!r}"
            )


class _Published:
    """The published counts as tables over each column subset's non-empty values.

    With ``keep`` (:func:`published_values`: the values published at length 1), only those
    values: a value of the domain without a published 1-tuple was suppressed (or never seen),
    the published aggregates say nothing about it, so the model does not know it and its
    records fall into the column's "empty" category, as in aggregate-seeded synthesis. The
    combinations holding another value are left out and each column's kept values are numbered
    0.. in their order (the aggregates are read in place, not copied over the smaller domain).
    """

    def __init__(
        self,
        aggregates: AggregateSet,
        total: float | None = None,
        keep: NDArray[np.bool_] | None = None,
    ) -> None:
        dom = aggregates.domain
        if keep is None:
            keep = np.ones(dom.n_attributes, dtype=bool)
        starts = np.asarray(dom.offsets[:-1], dtype=np.int64)
        self.cards = tuple(
            int(np.count_nonzero(keep[a:b])) for a, b in itertools.pairwise(dom.offsets)
        )
        self.total = float(aggregates.protected_number_of_records or 0) if total is None else total
        col_of = dom.attribute_columns()
        # a kept value's code here: the kept values before it in its column
        before: NDArray[np.int64] = np.cumsum(keep) - keep
        local: NDArray[np.int64] = before - before[starts[col_of]]
        self.by_subset: dict[Clique, tuple[NDArray[np.signedinteger[Any]], NDArray[np.float64]]]
        self.by_subset = {}
        d = len(self.cards)
        for k, cc in aggregates.by_len.items():
            attrs, counts = cc.attrs, cc.counts
            alive = keep[attrs].all(axis=1)
            if not alive.all():
                attrs, counts = attrs[alive], counts[alive]
            del alive
            if len(attrs) == 0:
                continue
            # rows grouped by their column subset with numpy (a stable sort keeps each group's
            # rows ascending): per-row Python tuples cost ~150 bytes a combination; one column
            # at a time, no (m, k) array of columns or codes
            subset: NDArray[np.signedinteger[Any]] = np.zeros(
                len(attrs), dtype=np.int32 if d**k < 2**31 else np.int64
            )
            for j in range(k):
                subset *= d
                subset += col_of[attrs[:, j]]
            order = np.argsort(subset, kind="stable")
            ends = np.flatnonzero(np.diff(subset[order])) + 1
            del subset
            for idx in np.split(order, ends):
                key = tuple(int(col_of[a]) for a in attrs[idx[0]])
                shape = tuple(self.cards[c] for c in key)
                cells: NDArray[np.intp] = np.ravel_multi_index(
                    tuple(local[attrs[idx, j]] for j in range(k)), shape
                )
                small = math.prod(shape) <= np.iinfo(np.int32).max  # int32 cells: 4 bytes each
                self.by_subset[key] = (
                    cells.astype(np.int32 if small else np.int64),
                    counts[idx].astype(np.float64),
                )

    def table(self, subset: Clique) -> NDArray[np.float64]:
        """Published counts over ``subset``'s non-empty values (0 where not published)."""
        if not subset:
            return np.array(self.total)
        out = np.zeros(tuple(self.cards[c] for c in subset))
        if subset in self.by_subset:
            cells, values = self.by_subset[subset]
            out.reshape(-1)[cells] = values
        return out

    def published(self, subset: Clique) -> NDArray[np.bool_]:
        """Which non-empty cells of ``subset`` were published."""
        out = np.zeros(tuple(self.cards[c] for c in subset), dtype=bool)
        if subset in self.by_subset:
            out.reshape(-1)[self.by_subset[subset][0]] = True
        return out

    def full_table(self, clique: Clique) -> NDArray[np.float64]:
        """Estimated table over ``clique`` with an "empty" category last on every axis.

        Published counts of every sub-combination give the "at least these values" counts;
        the empty cells follow by inclusion-exclusion (unpublished counts taken as 0, the
        result clipped at 0). Used only to choose the structure.
        """
        k = len(clique)
        ext = np.zeros(tuple(self.cards[c] + 1 for c in clique))
        for mask in itertools.product((False, True), repeat=k):
            sub = tuple(c for c, m in zip(clique, mask, strict=True) if m)
            index = tuple(
                slice(0, self.cards[c]) if m else self.cards[c]
                for c, m in zip(clique, mask, strict=True)
            )
            ext[index] = self.table(sub)
        for axis in range(k):
            moved = np.moveaxis(ext, axis, 0)
            moved[-1] -= moved[:-1].sum(axis=0)
        return np.clip(ext, 0.0, None)


def _information(table: NDArray[np.float64], first: int) -> float:
    """N·I(A; B) of a count table whose first ``first`` axes are A and the others B."""
    total = float(table.sum())
    if total <= 0:
        return 0.0
    p = table / total
    pa = p.sum(axis=tuple(range(first, p.ndim)), keepdims=True)
    pb = p.sum(axis=tuple(range(first)), keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p / (pa * pb)), 0.0)
    return total * float(terms.sum())


def choose_tree(published: _Published, params: ModelParams, reporting_length: int) -> JunctionTree:
    """A junction tree of cliques of 2..``max_clique_columns`` columns, chosen greedily.

    Start from the most dependent pair; then repeatedly attach the unplaced column v and the
    separator S (1 to max_clique_columns - 1 columns of one existing clique) with the largest
    G-statistic 2·N·I(v; S) minus its degrees of freedom, among cliques S + {v} of at most
    ``max_clique_cells`` cells that keep the model within ``max_model_cells``. Post-processing
    of the published counts only.
    """
    cards = published.cards
    sizes = tuple(c + 1 for c in cards)
    d = len(sizes)
    if d == 1:
        return JunctionTree(sizes, ((0,),), (-1,))
    width = params.max_clique_columns if reporting_length >= 2 else 2
    memo: dict[tuple[int, Clique], float] = {}

    def score(v: int, sep: Clique) -> float:
        key = (v, sep)
        if key not in memo:
            clique = tuple(sorted((v, *sep)))
            table = np.moveaxis(published.full_table(clique), clique.index(v), 0)
            df = (sizes[v] - 1) * (math.prod(sizes[c] for c in sep) - 1)
            memo[key] = 2 * _information(table, 1) - df
        return memo[key]

    used = 0

    def fits(cols: Sequence[int]) -> bool:
        cells = math.prod(sizes[c] for c in cols)
        return cells <= params.max_clique_cells and used + cells <= params.max_model_cells

    pairs = [(a, b) for a, b in itertools.combinations(range(d), 2) if fits((a, b))]
    if pairs:
        a, b = max(pairs, key=lambda p: (score(p[1], (p[0],)), -p[0], -p[1]))
        cliques: list[Clique] = [(a, b)]
    else:
        cliques = [(0,)]
    used = math.prod(sizes[c] for c in cliques[0])
    parents = [-1]
    placed = set(cliques[0])
    while len(placed) < d:
        best: tuple[float, int, Clique, int] | None = None
        for v in sorted(set(range(d)) - placed):
            for j, clique in enumerate(cliques):
                seps: list[Clique] = [
                    sep
                    for r in range(1, min(width - 1, len(clique)) + 1)
                    for sep in itertools.combinations(clique, r)
                ]
                for sep in seps:
                    if not fits((*sep, v)):
                        continue
                    s = score(v, sep)
                    if best is None or s > best[0]:
                        best = (s, v, sep, j)
        if best is None:  # no pair fits: the remaining columns enter on their own
            v = min(set(range(d)) - placed)
            cliques.append((v,))
            used += sizes[v]
            parents.append(0)
            placed.add(v)
            continue
        _, v, sep, j = best
        cliques.append(tuple(sorted((*sep, v))))
        used += math.prod(sizes[c] for c in cliques[-1])
        parents.append(j)
        placed.add(v)
    return JunctionTree(sizes, tuple(cliques), tuple(parents))


def _tree(
    published: _Published, params: ModelParams, reporting_length: int, noise: AggregateNoise
) -> JunctionTree:
    """The model's junction tree by ``params.structure``."""
    if params.structure == "g-statistic" or reporting_length < 2:
        return choose_tree(published, params, reporting_length)
    d = len(published.cards)
    weights = pair_dependence(
        d,
        published.full_table,
        lambda pair: int(published.published(pair).sum()),
        noise.sigma_by_len[1] if len(noise.sigma_by_len) > 1 else 0.0,
    )
    return tree_by_pairs(
        weights,
        tuple(c + 1 for c in published.cards),
        max_clique_columns=params.max_clique_columns,
        max_clique_cells=params.max_clique_cells,
        max_model_cells=params.max_model_cells,
    )


def measurements(
    published: _Published, tree: JunctionTree, noise: AggregateNoise
) -> list[Measurement]:
    """Every published length-k count inside a model clique, and its suppressed candidates.

    A length-k combination was a candidate when all its (k-1)-sub-combinations were published
    (every published value, for k = 2); a candidate that is not published was suppressed, so
    its noisy count fell below max(ρ_k, 0.5) (the threshold, or rounding to 0).
    """
    out: list[Measurement] = []

    def model_cells(subset: Clique, cells: NDArray[np.intp]) -> NDArray[np.int64]:
        """Flat cells of the non-empty table -> flat cells of the model's table (+ empty)."""
        values_shape = tuple(published.cards[c] for c in subset)
        index = np.unravel_index(cells, values_shape)
        model_shape = tuple(published.cards[c] + 1 for c in subset)
        return np.ravel_multi_index(index, model_shape).astype(np.int64)

    subsets: set[Clique] = set()
    for clique in tree.cliques:
        for k in range(1, len(clique) + 1):
            subsets.update(itertools.combinations(clique, k))
    for subset in sorted(subsets, key=lambda s: (len(s), s)):
        k = len(subset)
        if k > len(noise.sigma_by_len):
            continue
        sigma, threshold = noise.sigma_by_len[k - 1], noise.threshold_by_len[k - 1]
        if sigma <= 0 or not math.isfinite(threshold):
            continue  # nothing released at this length
        seen = published.published(subset)
        values = published.table(subset).reshape(-1)
        cells = np.flatnonzero(seen.reshape(-1))
        if cells.size:
            out.append(Measurement(subset, model_cells(subset, cells), values[cells], sigma))
        if k == 1:
            continue  # unpublished values are not in the domain at all
        candidate = np.ones(seen.shape, dtype=bool)
        for drop in range(k):
            parent = subset[:drop] + subset[drop + 1 :]
            if len(parent) >= 2:
                candidate &= np.expand_dims(published.published(parent), axis=drop)
        censored = np.flatnonzero((candidate & ~seen).reshape(-1))
        if censored.size:
            bound = np.full(censored.size, max(threshold, 0.5))
            out.append(Measurement(subset, model_cells(subset, censored), bound, sigma, True))
    return out


def published_values(aggregates: AggregateSet) -> NDArray[np.bool_]:
    """Which attributes (values of the domain) were published at length 1: the consistent
    model's categories (the others fall into their column's empty category)."""
    keep = np.zeros(aggregates.domain.n_attributes, dtype=bool)
    keep[aggregates.counts_of(1).attrs[:, 0]] = True
    return keep


def _warm_start(
    tree: JunctionTree, one_way: Sequence[NDArray[np.float64]], total: float
) -> list[NDArray[np.float64]]:
    """Log-potentials of the independent model of the published 1-way counts ``one_way[c]``
    (each column's empty category taking the rest of ``total``): a start point."""
    theta = [np.zeros(tree.clique_shape(j)) for j in range(len(tree.cliques))]
    done: set[int] = set()
    for j, clique in enumerate(tree.cliques):
        for axis, c in enumerate(clique):
            if c in done:
                continue
            done.add(c)
            counts = np.clip(one_way[c], 0.0, None)
            empty = max(total - float(counts.sum()), 0.0)
            p = np.append(counts, empty) + 0.5
            shape = [1] * len(clique)
            shape[axis] = p.size
            theta[j] = theta[j] + np.log(p / p.sum()).reshape(shape)
    return theta


def estimated_total(aggregates: AggregateSet, noise: AggregateNoise) -> float:
    """The model's record count: the protected count N̂ combined with the published 1-way counts.

    N̂ carries discrete Laplace noise of scale b (``noise.count_scale``, variance 2b²), often far
    more than a column's sum of published 1-way counts: at ε = 1, b = 200, while the values of a
    column with m published values add up with variance m·(σ_1√Δ_1)² (one value at 10k rows:
    ±10). A column's values hold every record but those in its empty category (missing or
    suppressed values). The columns whose sums are not clearly below the one that most surely
    holds the most (the largest sum less two noise sds) are taken as complete, and the
    estimate is the inverse-variance mean of N̂ and their sums. Where no column is complete it
    is low by the smallest empty count (small next to b on the PUMS tables, where several
    columns have no missing value). Post-processing of published values only (no
    budget). Without a count scale or a length-1 noise scale it is N̂.

    >>> from sds_core.data.domain import Domain
    >>> from sds_core.marginals.aggregates import CombinationCounts
    >>> one = CombinationCounts(np.array([[0], [1]], dtype=np.int32), np.array([600, 400]))
    >>> agg = AggregateSet(Domain(("sex",), (("f", "m"),)), 1, {1: one}, 900)
    >>> round(estimated_total(agg, AggregateNoise((2.0,), (5.0,), 50.0)))
    1000
    >>> estimated_total(agg, AggregateNoise((2.0,), (5.0,)))
    900.0
    """
    n_hat = float(aggregates.protected_number_of_records or 0)
    sd1 = noise.sigma_by_len[0] if noise.sigma_by_len else 0.0
    one = aggregates.by_len.get(1)
    if noise.count_scale <= 0 or sd1 <= 0 or one is None or len(one) == 0:
        return n_hat
    cols = aggregates.domain.attribute_columns()[one.attrs[:, 0]]
    d = aggregates.domain.n_columns
    sums = np.bincount(cols, weights=np.clip(one.counts, 0, None).astype(np.float64), minlength=d)
    sizes = np.bincount(cols, minlength=d)
    # the columns that may hold every record: sums not clearly below the one that most surely
    # holds the most (largest sum less two noise sds); their inverse-variance mean, then N̂'s
    seen = sizes > 0
    sums, var = sums[seen], sizes[seen] * sd1**2
    spread = 2.0 * np.sqrt(var)
    complete = sums + spread >= float(np.max(sums - spread))
    weights = np.where(complete, 1.0 / var, 0.0)
    w_columns = float(weights.sum())
    columns = float((weights * sums).sum()) / w_columns
    w_count = 1.0 / (2.0 * noise.count_scale**2)
    return float((w_count * n_hat + w_columns * columns) / (w_count + w_columns))


@dataclass(frozen=True, slots=True, eq=False)
class ModelProblem:
    """What :func:`fit_problem` fits: the tree, the measurements, the total, and each column's
    published 1-way counts over its released values (the warm start, and what
    :func:`one_way_targets` reads after the fit; the tables of all the aggregates, ~60 MB at
    5M combinations, are not kept through the fit). Bounded by the model's cells, not the
    published combinations: what a Dask worker is sent to fit and sample the model."""

    one_way: tuple[NDArray[np.float64], ...]
    tree: JunctionTree
    measurements: list[Measurement]
    total: float

    @property
    def start(self) -> list[NDArray[np.float64]]:
        """The fit's start point: the independent model of the published 1-way counts (made
        when read, one float per model cell: not carried with the problem)."""
        return _warm_start(self.tree, self.one_way, self.total)


def model_problem(
    aggregates: AggregateSet, noise: AggregateNoise, params: ModelParams = ModelParams()
) -> ModelProblem:
    """The fit :func:`fit_aggregates` runs, before it runs (post-processing, no budget).

    Raises:
        SdsInputError: aggregates without a protected record count, or a model above
            ``params.max_model_bytes`` (the message names the columns that make it large).
    """
    if not aggregates.protected_number_of_records:
        raise SdsInputError(
            "the consistent model needs the DP aggregates' protected record count (> 0)"
        )
    published = _Published(
        aggregates, estimated_total(aggregates, noise), published_values(aggregates)
    )
    tree = _tree(published, params, aggregates.reporting_length, noise)
    check_model_size(
        tree.sizes,
        tree.cliques,
        aggregates.domain.columns,
        params.max_model_bytes,
        what="the consistent model of the DP aggregates",
    )
    return ModelProblem(
        tuple(published.table((c,)) for c in range(len(published.cards))),
        tree,
        measurements(published, tree, noise),
        published.total,
    )


def fit_aggregates(
    aggregates: AggregateSet, noise: AggregateNoise, params: ModelParams = ModelParams()
) -> FittedModel:
    """The consistent model of the published aggregates (post-processing, no budget).

    Raises:
        SdsInputError: as :func:`model_problem`.
    """
    return fit_problem(model_problem(aggregates, noise, params), noise, params)


def fit_problem(
    problem: ModelProblem, noise: AggregateNoise, params: ModelParams = ModelParams()
) -> FittedModel:
    """The consistent model of a :func:`model_problem` (built with the same ``noise`` and
    ``params``): fitted, then its 1-way marginals matched to the published ones when
    ``params.match_one_way``. Reads the problem alone, not the aggregates it was built from."""
    model = fit_model(
        problem.tree,
        problem.measurements,
        problem.total,
        iterations=params.iterations,
        start=problem.start,
    )
    if not params.match_one_way or not noise.sigma_by_len or noise.sigma_by_len[0] <= 0:
        return model
    targets = one_way_targets(problem.one_way, problem.total, model, noise.sigma_by_len[0])
    return match_one_way(model, targets)


ONE_WAY_SLACK = 1.0
""":func:`one_way_targets` moves a model's 1-way count only when it is further than this many
noise standard deviations (σ_1√Δ_1) from the published DP count, and only to that distance."""


def one_way_targets(
    one_way: Sequence[NDArray[np.float64]], total: float, model: FittedModel, sd1: float
) -> dict[int, NDArray[np.float64]]:
    """Each column's model marginal moved to within :data:`ONE_WAY_SLACK` noise standard
    deviations of its published DP counts ``one_way[c]`` (clipped at 0), its empty category
    taking the rest of the ``total``; a column whose values then add up to more than the total
    is scaled to it."""
    out = {}
    for c, published in enumerate(one_way):
        current = model.marginal((c,))[:-1]  # every column is in a clique of the tree
        dp = np.clip(published, 0.0, None)
        values = np.clip(current, dp - ONE_WAY_SLACK * sd1, dp + ONE_WAY_SLACK * sd1)
        values = np.clip(values, 0.0, None)
        held = float(values.sum())
        if held > total:
            values = values * (total / held)
        out[c] = np.append(values, max(total - float(values.sum()), 0.0))
    return out


def synthesize_from_model(
    aggregates: AggregateSet,
    noise: AggregateNoise,
    n: int | None,
    *,
    rng: np.random.Generator,
    params: ModelParams = ModelParams(),
    multi_value_columns: tuple[MultiValueColumn, ...] = (),
) -> PreparedTable:
    """``n`` synthetic records (None: the model's total, :func:`estimated_total`, rounded)
    from the consistent model of the published aggregates."""
    return synthesize_from_problem(
        model_problem(aggregates, noise, params),
        noise,
        aggregates.domain,
        published_values(aggregates),
        n,
        rng=rng,
        params=params,
        multi_value_columns=multi_value_columns,
    )


def synthesize_from_problem(
    problem: ModelProblem,
    noise: AggregateNoise,
    domain: Domain,
    published: NDArray[np.bool_],
    n: int | None,
    *,
    rng: np.random.Generator,
    params: ModelParams = ModelParams(),
    multi_value_columns: tuple[MultiValueColumn, ...] = (),
) -> PreparedTable:
    """:func:`synthesize_from_model` from what it reads of the aggregates: the problem
    (:func:`model_problem`), the domain and the values published at length 1
    (:func:`published_values`); the same draws, the same records. What a Dask worker is sent
    (~10 MB pickled at 5M combinations, bounded by the model's cells, where the aggregates
    grow with the published combinations: ~100 MB)."""
    model = fit_problem(problem, noise, params)
    return records_over(
        model, domain, published, n, rng=rng, multi_value_columns=multi_value_columns
    )


def records_of(
    model: FittedModel,
    aggregates: AggregateSet,
    n: int | None,
    *,
    rng: np.random.Generator,
    multi_value_columns: tuple[MultiValueColumn, ...] = (),
) -> PreparedTable:
    """``n`` records (None: the model's total, rounded) sampled from ``model`` as a table over
    the aggregates' domain."""
    return records_over(
        model,
        aggregates.domain,
        published_values(aggregates),
        n,
        rng=rng,
        multi_value_columns=multi_value_columns,
    )


def records_over(
    model: FittedModel,
    domain: Domain,
    published: NDArray[np.bool_],
    n: int | None,
    *,
    rng: np.random.Generator,
    multi_value_columns: tuple[MultiValueColumn, ...] = (),
) -> PreparedTable:
    """``n`` records (None: the model's total, rounded) sampled from ``model`` as a table over
    ``domain``, whose values ``published`` (one flag per attribute, :func:`published_values`)
    are the model's categories.

    Raises:
        SdsInputError: ``n`` is not an integer >= 0.
    """
    if n is None:
        n = max(round(model.total), 1)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise SdsInputError(f"number of records must be an integer >= 0, got {n!r}")
    # the model's categories (a column's values published at length 1, then its empty
    # category) become the domain's codes column by column in place: one (n, d) int32 array,
    # no int64 records and no copy of the aggregates (2M x 11: 88 MB, was 176 + 88 + 100)
    dom, keep = domain, published
    invariant(keep.shape == (dom.n_attributes,), "one published flag per value of the domain")
    codes = sample_records(model, n, rng=rng, dtype=np.int32)
    for j in range(dom.n_columns):
        back = np.flatnonzero(keep[dom.offsets[j] : dom.offsets[j + 1]]).astype(np.int32)
        invariant(model.tree.sizes[j] == back.size + 1, "the model is not of these aggregates")
        codes[:, j] = np.append(back, np.int32(EMPTY_CODE))[codes[:, j]]
    return PreparedTable(dom, codes, multi_value_columns)
