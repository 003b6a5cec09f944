"""``mst``: McKenna, Sheldon & Miklau's MST (2021) with the project's exact keyed noise.

All 1-way marginals and a spanning tree of 2-way marginals chosen under DP (exponential
mechanism on how badly the independent model explains each pair), each measured with the exact
discrete Gaussian from the release key; one consistent model is fitted to the measurements with
:mod:`sds_core.model` (the code the aggregate-seeded ``"model"`` mode uses) and sampled. The
measured marginals are the release's DP aggregates. zCDP accounting, three ledger stages.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import EMPTY_CODE, Domain
from sds_core.data.table import PreparedTable
from sds_core.dp import noise
from sds_core.dp.accounting import epsilon_to_zcdp, exact_split
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from sds_core.model.estimation import FittedModel, fit_model
from sds_core.model.measurements import Measurement
from sds_core.model.sampling import sample_records
from sds_core.model.structure import DEFAULT_MAX_MODEL_BYTES, JunctionTree, check_model_size
from sds_core.synthesizers.base import (
    FitResult,
    SynthesizerSpend,
    check_epsilon,
    check_n,
    check_proportion,
    register,
)

STAGES = ("one-way", "select", "two-way")


def gaussian_tail(sigma: float, s: int) -> float:
    """P(Z >= s) for the project's discrete Gaussian table N_Z(0, σ²) (as sampled)."""
    table = noise.noise_table("gaussian", sigma)
    i = s - 1 - table.offset  # P(Z >= s) = 1 - F(s - 1)
    if i < 0:
        return 1.0
    if i >= table.cdf_u64.size:
        return 0.0
    return 1.0 - float(table.cdf_u64[i]) / 2.0**64


def release_threshold(sigma: float, delta: float) -> int:
    """Smallest integer t with P(1 + Z >= t) <= δ: a value held by one record passes w.p. <= δ.

    >>> release_threshold(10.0, 1e-6) > 40
    True
    """
    t = 2
    step = max(1, int(sigma))
    while gaussian_tail(sigma, t - 1) > delta:
        t += step
    while t > 2 and gaussian_tail(sigma, t - 2) <= delta:
        t -= 1
    return t


def _uniforms(rnd: ReleaseRandomness, label: str, n: int, stage: str) -> NDArray[np.float64]:
    words = rnd.words(label, n, stage=stage)
    return ((words >> np.uint64(11)).astype(np.float64) + 0.5) / 2.0**53


OneWay = list[tuple[NDArray[np.int64], Any]]
"""Per column: the kept values' noisy counts and the empty category's (None when values were
dropped: they merge into the empty category, whose count was then not measured on its own)."""


def measure_one_way(
    table: PreparedTable,
    rnd: ReleaseRandomness,
    label: str,
    stage: str,
    sigma: float,
    threshold: int,
) -> tuple[Domain, NDArray[np.int64], OneWay]:
    """Every column's 1-way marginal with keyed discrete Gaussian noise; values thresholded.

    Returns the released domain (values whose noisy count reached ``threshold``), the records'
    category indices in it (the empty category last, dropped values merged into it) and the
    noisy counts. Shared by ``mst`` and ``aim``: one 1-way stage of ρ = d/(2σ²).
    """
    dom, codes = table.domain, table.codes
    d = dom.n_columns
    keep_labels, maps, one_way = [], [], []
    for j in range(d):
        k = dom.cardinalities[j]
        counts = np.bincount(np.where(codes[:, j] < 0, k, codes[:, j]), minlength=k + 1)
        present = np.flatnonzero(counts[:k] > 0)
        cells = np.append(present, k)
        z = noise.discrete_gaussian(
            rnd, f"{label}/{dom.columns[j]}", sigma=sigma, size=cells.size, stage=stage
        )
        noisy = counts[cells].astype(np.int64) + z
        kept = present[noisy[:-1] >= threshold]
        new = np.full(k, EMPTY_CODE, dtype=np.int32)
        new[kept] = np.arange(kept.size, dtype=np.int32)
        maps.append(new)
        keep_labels.append(tuple(dom.labels[j][i] for i in kept.tolist()))
        dropped = kept.size < present.size
        one_way.append((noisy[:-1][noisy[:-1] >= threshold], None if dropped else noisy[-1]))
    released = Domain(dom.columns, tuple(keep_labels))
    recoded = np.empty_like(codes)
    for j in range(d):
        col = codes[:, j]
        recoded[:, j] = np.where(col >= 0, maps[j][np.maximum(col, 0)], EMPTY_CODE)
    cats = np.where(recoded < 0, np.asarray(released.cardinalities)[None, :], recoded)
    return released, cats.astype(np.int64), one_way


@dataclass(frozen=True, slots=True, eq=False)
class MstModel:
    """The DP model: released domain, measured marginals (the DP aggregates) and the fit."""

    domain: Domain
    aggregates: AggregateSet
    fitted: FittedModel
    total: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary: tree, record count estimate, aggregates' text form."""
        cols = self.domain.columns
        return {
            "total": self.total,
            "cliques": [[cols[c] for c in cl] for cl in self.fitted.tree.cliques],
            "aggregates": self.aggregates.to_text_dict(),
        }


@register
@dataclass(slots=True)
class Mst:
    """MST: 1-way marginals + a DP-chosen spanning tree of 2-way marginals + a consistent model.

    The release's ρ (the largest whose CKS conversion gives (ε, δ/2)) is split into
    ``one_way_share`` for the d 1-way marginals, ``select_share`` for the d−1 exponential-
    mechanism selections (each ε_s-bounded-range, ε_s²/8-zCDP) and the rest for the d−1 2-way
    marginals, as in the paper's thirds. Values are read from the data: a value is released only
    when its noisy 1-way count reaches a threshold a single record passes with probability at
    most δ/(2d) (the other δ/2), as SDS's length-1 step does.

    Args:
        one_way_share: share of ρ spent on the 1-way marginals.
        select_share: share of ρ spent on choosing the tree.
        max_clique_cells: pairs whose table (values + empty) has more cells are not candidates.
        max_model_bytes: refuse before any spend when the largest possible model needs more.
        iterations: most mirror-descent iterations of the fit.
    """

    name: ClassVar[str] = "mst"

    one_way_share: float = 1 / 3
    select_share: float = 1 / 3
    max_clique_cells: int = 1_000_000
    max_model_bytes: int = DEFAULT_MAX_MODEL_BYTES
    iterations: int = 100
    _model: MstModel | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        check_proportion(self.one_way_share, "one_way_share")
        check_proportion(self.select_share, "select_share")
        if self.one_way_share + self.select_share >= 1:
            raise SdsInputError(
                "one_way_share + select_share must leave a share for the 2-way marginals, got "
                f"{self.one_way_share} + {self.select_share}"
            )
        for name in ("max_clique_cells", "max_model_bytes", "iterations"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SdsInputError(f"mst {name} must be a positive integer, got {value!r}")

    def _rhos(self, epsilon: float, delta: float | None) -> tuple[float, float, float, float]:
        epsilon = check_epsilon(epsilon)
        if delta is None or not 0 < delta < 1:
            raise SdsInputError(
                f"mst needs delta in (0, 1): values are read from the data and thresholded, "
                f"and the zCDP budget is converted at delta/2; got {delta!r}"
            )
        rho = epsilon_to_zcdp(epsilon, delta / 2)
        r1, rs = rho * self.one_way_share, rho * self.select_share
        return rho, r1, rs, rho - r1 - rs

    def budget(self, epsilon: float, delta: float | None) -> tuple[SynthesizerSpend, ...]:
        """Three charges (1-way, selection, 2-way), ε and δ apportioned by ρ, adding up exactly.

        The one-way stage also carries the δ/2 of the value-release threshold.
        """
        rho, *parts = self._rhos(epsilon, delta)
        assert delta is not None
        eps = exact_split([epsilon * r / rho for r in parts], epsilon)
        dels = exact_split([delta / 2 * r / rho for r in parts], delta / 2)
        dels = exact_split([dels[0] + delta / 2, dels[1], dels[2]], delta)
        mechs = (
            "discrete-gaussian+value-threshold",
            "exponential-mechanism (bounded range)",
            "discrete-gaussian",
        )
        return tuple(
            SynthesizerSpend(f"{self.name}/{s}", m, e, d_, r)
            for s, m, e, d_, r in zip(STAGES, mechs, eps, dels, parts, strict=True)
        )

    def check_size(self, domain: Domain) -> int:
        """Largest model bytes possible on ``domain`` (released values can only be fewer).

        Raises:
            SdsInputError: above ``max_model_bytes``, naming the columns (nothing is spent).
        """
        sizes = tuple(k + 1 for k in domain.cardinalities)
        pairs = sorted(
            (
                p
                for p in itertools.combinations(range(len(sizes)), 2)
                if sizes[p[0]] * sizes[p[1]] <= self.max_clique_cells
            ),
            key=lambda p: -sizes[p[0]] * sizes[p[1]],
        )
        worst = [*((i,) for i in range(len(sizes))), *pairs[: max(len(sizes) - 1, 0)]]
        return check_model_size(
            sizes, worst, domain.columns, self.max_model_bytes, what="the mst model"
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
        """Measure, select, measure, fit (noise labels ``{release_label}/mst/...``)."""
        spends = self.budget(epsilon, delta)
        self.check_size(table.domain)
        rho, r1, rs, r2 = self._rhos(epsilon, delta)
        assert delta is not None
        dom = table.domain
        d = dom.n_columns
        stage1, stage_s, stage2 = (s.stage for s in spends)
        # --- 1-way marginals: present values + empty, thresholded values ----------------------
        sigma1 = math.sqrt(d / (2 * r1))
        threshold = release_threshold(sigma1, delta / (2 * d))
        released, cats, one_way = measure_one_way(
            table, rnd, f"{release_label}/{stage1}", stage1, sigma1, threshold
        )
        sizes = tuple(k + 1 for k in released.cardinalities)
        # --- select the tree: exponential mechanism, Kruskal order ---------------------------
        n_hat = max(float(np.mean([v.sum() + (e or 0) for v, e in one_way])), 1.0)
        probs = []
        for j in range(d):
            v, e = one_way[j]
            w = np.append(np.clip(v, 0, None).astype(float), 0.0)
            w[-1] = max(n_hat - w[:-1].sum(), 0.0) if e is None else max(float(e), 0.0)
            probs.append(w / w.sum() if w.sum() > 0 else np.full(w.size, 1.0 / w.size))
        candidates = [
            p
            for p in itertools.combinations(range(d), 2)
            if sizes[p[0]] * sizes[p[1]] <= self.max_clique_cells
        ]
        scores = {}
        for a, b in candidates:
            exact = np.bincount(cats[:, a] * sizes[b] + cats[:, b], minlength=sizes[a] * sizes[b])
            expected = n_hat * np.outer(probs[a], probs[b]).reshape(-1)
            scores[(a, b)] = float(np.abs(exact - expected).sum())
        eps_sel = math.sqrt(8 * rs / max(d - 1, 1))
        component = list(range(d))

        def root(i: int) -> int:
            while component[i] != i:
                i = component[i]
            return i

        edges: list[tuple[int, int]] = []
        for r in range(d - 1):
            options = [p for p in candidates if root(p[0]) != root(p[1])]
            if not options:
                break
            u = _uniforms(rnd, f"{release_label}/{stage_s}/{r}", len(options), stage_s)
            gumbel = -np.log(-np.log(u))
            util = np.array([scores[p] for p in options]) * eps_sel / 2 + gumbel
            a, b = options[int(np.argmax(util))]
            edges.append((a, b))
            component[root(a)] = root(b)
        # --- 2-way marginals -------------------------------------------------------------------
        sigma2 = math.sqrt(max(len(edges), 1) / (2 * r2))
        two_way = []
        for a, b in edges:
            exact = np.bincount(cats[:, a] * sizes[b] + cats[:, b], minlength=sizes[a] * sizes[b])
            z = noise.discrete_gaussian(
                rnd,
                f"{release_label}/{stage2}/{dom.columns[a]}+{dom.columns[b]}",
                sigma=sigma2,
                size=exact.size,
                stage=stage2,
            )
            two_way.append(exact.astype(np.int64) + z)
        # --- fit and keep the model ------------------------------------------------------------
        tree = _tree(sizes, edges)
        check_model_size(sizes, tree.cliques, dom.columns, self.max_model_bytes, what="mst model")
        ms: list[Measurement] = []
        for j, (v, e) in enumerate(one_way):
            cells = np.arange(v.size, dtype=np.int64)
            if e is not None:
                cells, v = np.append(cells, sizes[j] - 1), np.append(v, e)
            if cells.size:
                ms.append(Measurement((j,), cells, v.astype(np.float64), sigma1))
        for (a, b), y in zip(edges, two_way, strict=True):
            ms.append(
                Measurement((a, b), np.arange(y.size, dtype=np.int64), y.astype(np.float64), sigma2)
            )
        # the total: inverse-variance mean of every complete noisy table's sum
        sums = [(float(y.sum()), y.size * sigma2**2) for y in two_way]
        sums += [
            (float(v.sum() + e), (v.size + 1) * sigma1**2) for v, e in one_way if e is not None
        ]
        if sums:
            weights = [1.0 / var for _, var in sums]
            total = sum(w * t for w, (t, _) in zip(weights, sums, strict=True)) / sum(weights)
        else:
            total = n_hat
        total = max(total, 1.0)
        fitted = fit_model(tree, ms, total, iterations=self.iterations)
        aggregates = _published(released, one_way, edges, two_way, sizes, round(total))
        self._model = MstModel(released, aggregates, fitted, round(total))
        report = {
            "synthesizer": self.name,
            "guarantee": f"({epsilon:g}, {delta:g})-DP (ρ = {rho:.6g}-zCDP converted at δ/2, "
            "value threshold δ/2), add/remove-one-record neighbours",
            "rho": {"one_way": r1, "select": rs, "two_way": r2},
            "sigma_one_way": sigma1,
            "value_threshold": threshold,
            "epsilon_per_selection": eps_sel,
            "sigma_two_way": sigma2,
            "tree": [[dom.columns[a], dom.columns[b]] for a, b in edges],
            "selection_noise": "Gumbel-max from the keyed stream (floating point)",
        }
        return FitResult(spends, self._model, report)

    def sample(self, n: int | None, *, rng: np.random.Generator) -> PreparedTable:
        """Records from the fitted model (n=None: the model's DP total), controlled rounding."""
        if self._model is None:
            raise SdsInputError("mst: call fit() before sample()")
        return sample_fitted(self._model, n, rng=rng)


def sample_fitted(model: MstModel, n: int | None, *, rng: np.random.Generator) -> PreparedTable:
    """``n`` records (None: the model's DP total) from a fitted model; the model's extra
    "empty" category becomes an empty cell. Shared by ``mst`` and ``aim``."""
    n = check_n(n, model.total)
    cats = sample_records(model.fitted, n, rng=rng)
    cards = np.asarray(model.domain.cardinalities, dtype=np.int64)
    codes = np.where(cats == cards[None, :], EMPTY_CODE, cats).astype(np.int32)
    return PreparedTable(model.domain, codes)


def _tree(sizes: tuple[int, ...], edges: list[tuple[int, int]]) -> JunctionTree:
    """Junction tree of a spanning forest: one clique per edge, lone columns on their own."""
    d = len(sizes)
    adjacent: dict[int, list[int]] = {i: [] for i in range(d)}
    for a, b in edges:
        adjacent[a].append(b)
        adjacent[b].append(a)
    cliques: list[tuple[int, ...]] = []
    parents: list[int] = []
    home: dict[int, int] = {}
    for start in range(d):
        if start in home:
            continue
        if not adjacent[start]:
            cliques.append((start,))
            parents.append(-1 if not cliques[:-1] else 0)
            home[start] = len(cliques) - 1
            continue
        stack = [start]
        home[start] = -1
        while stack:
            v = stack.pop()
            for w in sorted(adjacent[v]):
                if w in home:
                    continue
                cliques.append((min(v, w), max(v, w)))
                parents.append(home[v] if home[v] >= 0 else (0 if cliques[:-1] else -1))
                if home[v] < 0:
                    home[v] = len(cliques) - 1
                home[w] = len(cliques) - 1
                stack.append(w)
    return JunctionTree(sizes, tuple(cliques), tuple(parents))


def _published(
    domain: Domain,
    one_way: list[tuple[NDArray[np.int64], Any]],
    edges: list[tuple[int, int]],
    two_way: list[NDArray[np.int64]],
    sizes: tuple[int, ...],
    total: int,
) -> AggregateSet:
    """The measured marginals as DP aggregates: non-empty cells with a noisy count > 0."""
    offsets = domain.offsets
    rows1 = [
        (offsets[j] + i, int(c))
        for j, (v, _) in enumerate(one_way)
        for i, c in enumerate(v.tolist())
        if c > 0
    ]
    rows2 = []
    for (a, b), y in zip(edges, two_way, strict=True):
        table = y.reshape(sizes[a], sizes[b])[:-1, :-1]
        for i, jj in zip(*np.nonzero(table > 0), strict=True):
            rows2.append((offsets[a] + int(i), offsets[b] + int(jj), int(table[i, jj])))
    by_len = {
        1: CombinationCounts.from_unsorted(
            np.array([[r[0]] for r in rows1], dtype=np.int32).reshape(-1, 1),
            np.array([r[1] for r in rows1], dtype=np.int64),
        ),
        2: CombinationCounts.from_unsorted(
            np.array([[r[0], r[1]] for r in rows2], dtype=np.int32).reshape(-1, 2),
            np.array([r[2] for r in rows2], dtype=np.int64),
        ),
    }
    return AggregateSet(domain, 2, by_len, max(total, 1), is_dp=True, domain_released=True)
