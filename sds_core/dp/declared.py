"""Declared (weakly constrained) column domains and the CatHist mechanism (Rodriguez & Howe).

A custodian declares each column's global domain before seeing the data (a value list and/or a
size with generated labels: ``DeclaredDomain``, in :mod:`sds_core.data.domain`). Noise is then
added to every declared value: explicitly for values present in the data, analytically for the
rest (a Binomial number of them pass the threshold, their counts drawn from the noise tail), so a
domain of 10^10 values costs nothing. Used by the ``cathist`` synthesizer and by the SDS
engine's 1-tuple step (:func:`declared_one_tuples`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import DeclaredDomain, Domain
from sds_core.dp import noise
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError, invariant
from sds_core.marginals.aggregates import CombinationCounts

MAX_EXPECTED_RANDOM_VALUES = 10**6


def cathist_tau(n: int, rho: float, epsilon: float) -> float:
    """The paper's threshold τ = -ln(2(1 - rho^{1/n}))/ε (continuous Laplace noise).

    >>> round(cathist_tau(171_000, 0.9, 0.1), 3)
    136.066
    """
    return -math.log(2.0 * -math.expm1(math.log(rho) / n)) / epsilon


def inclusion_probability(threshold: int, epsilon: float) -> float:
    """P(Z ≥ t) for Z ~ discrete Laplace(1/ε) and an integer t ≥ 1: e^{-εt}/(1 + e^{-ε})."""
    return math.exp(-epsilon * threshold) / (1.0 + math.exp(-epsilon))


def cathist_threshold(n: int, rho: float, epsilon: float) -> int:
    """Smallest integer t ≥ 1 whose inclusion probability is ≤ 1 - rho^{1/n}.

    The discrete-Laplace counterpart of :func:`cathist_tau` (2 becomes 1 + e^{-ε}, then rounded
    up): with it, P(no value outside the data passes) = (1 - p)^{n_inactive} ≥ rho.
    """
    target = -math.expm1(math.log(rho) / n)
    t = math.ceil(-math.log(target * (1.0 + math.exp(-epsilon))) / epsilon - 1e-12)
    return max(t, 1)


def fidelity(true_counts: Mapping[str, int], released: Mapping[str, float]) -> float:
    """The paper's F: product of the two distributions' mass on their common categories."""
    common = set(true_counts) & {k for k, v in released.items() if v > 0}
    t_tot = sum(true_counts.values())
    r_tot = sum(v for v in released.values() if v > 0)
    if not common or t_tot <= 0 or r_tot <= 0:
        return 0.0
    return sum(true_counts[k] for k in common) / t_tot * sum(released[k] for k in common) / r_tot


def sample_inactive(
    n_domain: int, excluded: NDArray[np.int64], k: int, *, rng: np.random.Generator
) -> NDArray[np.int64]:
    """``k`` distinct indices drawn uniformly from ``range(n_domain)`` minus ``excluded``.

    Floyd's algorithm on the ranks of the allowed indices, then rank -> index by skipping the
    sorted excluded ones: O(k + |excluded| log |excluded|), independent of ``n_domain``.
    """
    ex = np.unique(excluded)
    n_allowed = n_domain - ex.size
    invariant(0 <= k <= n_allowed, f"cannot draw {k} of {n_allowed} allowed indices")
    chosen: set[int] = set()
    for j in range(n_allowed - k, n_allowed):
        t = int(rng.integers(0, j + 1))
        chosen.add(j if t in chosen else t)
    ranks = np.fromiter(sorted(chosen), dtype=np.int64, count=k)
    shifted = ex - np.arange(ex.size, dtype=np.int64)
    return ranks + np.searchsorted(shifted, ranks, side="right")


@dataclass(frozen=True, slots=True, eq=False)
class DeclaredHistogram:
    """A DP histogram over a declared domain: released labels and their noisy counts.

    ``n_random`` (values not in the data that passed) is NOT published: it is derived from the
    split between real and generated bins. Keep it for tests and the private log only.
    """

    labels: tuple[str, ...]
    counts: NDArray[np.int64]
    threshold: int
    n_random: int


def _check_counts(
    declared: DeclaredDomain, idx: NDArray[np.int64], counts: NDArray[np.int64]
) -> None:
    invariant(idx.shape == counts.shape, "one count per active index")
    invariant(
        bool((idx >= 0).all()) and bool((idx < declared.total_size).all()), "indices in range"
    )
    invariant(np.unique(idx).size == idx.size, "active indices must be distinct")


def cathist_histogram(
    declared: DeclaredDomain,
    active_index: NDArray[np.int64],
    active_counts: NDArray[np.int64],
    *,
    epsilon: float,
    rho: float,
    rnd: ReleaseRandomness,
    label: str,
    stage: str,
) -> DeclaredHistogram:
    """Algorithm 1 (CatHist) with discrete Laplace(1/ε) noise, never enumerating the domain.

    Equivalent in distribution to noising all N declared values and keeping those with noisy
    count ≥ t: the active values are noised explicitly; k ~ Binomial(N - |active|, p) inactive
    ones pass, chosen uniformly, with counts t + Geometric (the discrete τ + Exp(ε)).
    ε-DP for add/remove neighbours (each record is in one bin).
    """
    _check_counts(declared, active_index, active_counts)
    n = declared.total_size
    t = cathist_threshold(n, rho, epsilon)
    noisy = active_counts + noise.discrete_laplace(
        rnd, label, scale=1.0 / epsilon, size=active_counts.size, stage=stage
    )
    keep = noisy >= t
    p = inclusion_probability(t, epsilon)
    n_inactive = n - active_index.size
    if n_inactive * p > MAX_EXPECTED_RANDOM_VALUES:
        raise SdsInputError(
            f"column {declared.column!r}: about {n_inactive * p:.3g} random values would pass the "
            f"threshold (domain size {n}, rho={rho}); raise rho or epsilon"
        )
    gen = rnd.generator(f"{label}/inactive")
    k = int(gen.binomial(n_inactive, p)) if n_inactive > 0 else 0
    extra = sample_inactive(n, active_index, k, rng=gen)
    extra_counts = t + gen.geometric(-math.expm1(-epsilon), size=k).astype(np.int64) - 1
    labels = [declared.label(int(i)) for i in active_index[keep]] + [
        declared.label(int(i)) for i in extra
    ]
    counts = np.concatenate([noisy[keep], extra_counts]).astype(np.int64)
    return DeclaredHistogram(tuple(labels), counts, t, k)


def _gaussian_tail(sigma: float, threshold: float) -> tuple[float, int, NDArray[np.uint64]]:
    """(P(Z > thr), first value t = floor(thr)+1, CDF of Z | Z ≥ t) for the noise module's
    discrete Gaussian table, so explicit and analytic draws follow the same distribution."""
    table = noise.noise_table("gaussian", sigma)
    t = math.floor(threshold) + 1
    top = table.offset + table.cdf_u64.size  # largest value the table can return
    if t > top:
        return 0.0, t, np.zeros(0, dtype=np.uint64)
    two64 = 1 << 64
    below = 0 if t <= table.offset else int(table.cdf_u64[t - 1 - table.offset])
    rest = two64 - below
    cdf = [int(c) for c in table.cdf_u64[max(t - table.offset, 0) :]]
    cond = np.array([((c - below) * two64) // rest for c in cdf], dtype=np.uint64)
    return rest / two64, max(t, table.offset), cond


@dataclass(frozen=True, slots=True, eq=False)
class DeclaredOneTuples:
    """The SDS 1-tuple step over declared domains.

    Attributes:
        domain: the released (DP) domain: per column, the surviving labels, sorted.
        one_tuples: the surviving 1-tuples (global ids of ``domain``) and their noisy counts.
        code_maps: per column, data-domain code -> code in ``domain`` (-1 if not released), for
            re-encoding the table before the k ≥ 2 steps.
        private_notes: for the custodian's private log only (undeclared data values).
    """

    domain: Domain
    one_tuples: CombinationCounts
    code_maps: tuple[NDArray[np.int32], ...]
    private_notes: Mapping[str, object]


def undeclared_values(declared: DeclaredDomain, labels: Sequence[str]) -> list[str]:
    """Data values of a column that the declared domain does not contain (private)."""
    idx = declared.index_of(labels)
    return [lab for lab, i in zip(labels, idx.tolist(), strict=True) if i < 0]


def declared_one_tuples(
    domain: Domain,
    active_counts: Mapping[int, NDArray[np.int64]],
    declared: Sequence[DeclaredDomain],
    *,
    sigma: float,
    threshold: float,
    rnd: ReleaseRandomness,
    label: str,
    stage: str,
) -> DeclaredOneTuples:
    """Noise every declared value with N_Z(0, σ²) and keep those with noisy count > threshold.

    Args:
        domain: the data domain of the prepared table (its labels are NOT released).
        active_counts: column index -> contribution-bounded count of each data label
            (length = that column's cardinality).
        declared: one declared domain per column of ``domain`` (any order).
        sigma: the engine's 1-tuple noise, sigma_1·sqrt(Δ_1).
        threshold: keep noisy counts > max(threshold, 0) (post-processing: any value is safe).
        rnd, label, stage: privacy noise stream (labels ``label/<column index>``).

    Values outside the declared domain are dropped (never released, listed only in
    ``private_notes``). Declared values absent from the data are handled analytically:
    k ~ Binomial(N - |active|, P(Z > thr)) of them pass, with counts from the discrete Gaussian
    tail, so the output has exactly the distribution of noising all N values.
    """
    by_col = {d.column: d for d in declared}
    missing = [c for c in domain.columns if c not in by_col]
    if missing:
        raise SdsInputError(
            f"declared domains are needed for every column; missing {missing} (declare them or "
            "use the data-derived 1-tuple step)"
        )
    extra = sorted(set(by_col) - set(domain.columns))
    if extra:
        raise SdsInputError(f"declared domains name unknown columns {extra}")
    thr = max(float(threshold), 0.0)
    p, t0, cond_cdf = _gaussian_tail(sigma, thr)
    labels_out: list[tuple[str, ...]] = []
    counts_out: list[NDArray[np.int64]] = []
    data_label_pos: list[dict[str, int]] = []
    notes: dict[str, object] = {}
    for j, col in enumerate(domain.columns):
        dec = by_col[col]
        labs = domain.labels[j]
        cnt = np.asarray(active_counts.get(j, np.zeros(len(labs), dtype=np.int64)), dtype=np.int64)
        invariant(cnt.shape == (len(labs),), f"active_counts[{j}] must have one count per label")
        idx = dec.index_of(labs)
        ok = idx >= 0
        if not ok.all():
            bad = [lab for lab, o in zip(labs, ok.tolist(), strict=True) if not o]
            notes[col] = {"undeclared_values": bad[:20], "n_undeclared_values": len(bad)}
        a_idx, a_cnt = idx[ok], cnt[ok]
        noisy = a_cnt + noise.discrete_gaussian(
            rnd, f"{label}/{j}", sigma=sigma, size=a_cnt.size, stage=stage
        )
        keep = noisy > thr
        gen = rnd.generator(f"{label}/{j}/inactive")
        n_inactive = dec.total_size - a_idx.size
        if n_inactive * p > MAX_EXPECTED_RANDOM_VALUES:
            raise SdsInputError(
                f"column {col!r}: about {n_inactive * p:.3g} declared values absent from the data "
                "would pass the 1-tuple threshold; raise the threshold or declare a smaller domain"
            )
        k = int(gen.binomial(n_inactive, p)) if n_inactive > 0 and p > 0 else 0
        chosen = sample_inactive(dec.total_size, a_idx, k, rng=gen)
        tail = noise.sample_discrete(
            rnd, f"{label}/{j}/tail", cdf_u64=cond_cdf, offset=t0, size=k, stage=stage
        )
        kept_labels = [labs[i] for i in np.flatnonzero(ok)[keep].tolist()]
        pairs = list(zip(kept_labels, noisy[keep].tolist(), strict=True))
        pairs += [(dec.label(int(i)), int(c)) for i, c in zip(chosen, tail, strict=True)]
        pairs.sort()
        labels_out.append(tuple(lab for lab, _ in pairs))
        counts_out.append(np.asarray([c for _, c in pairs], dtype=np.int64))
        data_label_pos.append({lab: i for i, lab in enumerate(labels_out[-1])})
    new_domain = Domain(domain.columns, tuple(labels_out))
    attrs = np.arange(new_domain.n_attributes, dtype=np.int32).reshape(-1, 1)
    counts = np.concatenate(counts_out) if counts_out else np.zeros(0, dtype=np.int64)
    code_maps = tuple(
        np.asarray([pos.get(lab, -1) for lab in labs], dtype=np.int32)
        for pos, labs in zip(data_label_pos, domain.labels, strict=True)
    )
    return DeclaredOneTuples(new_domain, CombinationCounts(attrs, counts), code_maps, notes)
