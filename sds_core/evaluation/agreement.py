"""Agreement of the DP aggregates and the synthetic records, from published values only.

For every combination of length 1..R that the DP aggregates report or the synthetic records
contain: its DP count (or "not reported") and its synthetic count; the figures the release
report and explorer draw from them (1-way distributions, k-way TVD per column set, mean error,
share within the noise interval) and the published ``evaluation.json`` (:func:`agreement_summary`).
Nothing here reads the sensitive data, so everything it returns may be published.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.dp.intervals import Z_95
from sds_core.errors import invariant, require
from sds_core.marginals.aggregates import (
    AggregateSet,
    CombinationCounts,
    decode_keys,
    encode_keys,
)
from sds_core.marginals.backend import CountingBackend
from sds_core.marginals.combinations import keys_to_attrs
from sds_core.marginals.exact_counts import count_cliques

NOT_REPORTED = -1
"""DP count of a combination the DP aggregates do not report (suppressed or never a candidate)."""
SLICE_ROWS = 1 << 18
"""Combinations of one length that :meth:`Agreement.marginal_tvd` reads at a time."""
_INT32_MAX = 2**31 - 1
K = TypeVar("K", bound=np.integer)
"""The integer type of a set of sorted keys (:func:`add_keyed_counts` keeps it)."""


DP_ROW = 1
"""Bit of :attr:`LengthAgreement.source`: the DP aggregates report the combination."""
SYN_ROW = 2
"""Bit of :attr:`LengthAgreement.source`: some synthetic record holds the combination."""


@dataclass(frozen=True, slots=True, eq=False)
class CombinationRows:
    """Consecutive combinations of one length, whole: ``attrs`` (m, k) sorted rows, ``dp`` and
    ``synthetic`` (m,), as :class:`LengthAgreement` describes them."""

    attrs: NDArray[np.int32]
    dp: NDArray[np.int64]
    synthetic: NDArray[np.int64]

    @property
    def reported(self) -> NDArray[np.bool_]:
        """Mask of the combinations the DP aggregates report."""
        mask: NDArray[np.bool_] = self.dp != NOT_REPORTED
        return mask


@dataclass(frozen=True, slots=True, eq=False)
class LengthAgreement:
    """Combinations of one length: the union of the DP and the synthetic ones, sorted.

    Row ``i`` of the union has ``attrs[i]`` (k attribute ids), ``dp[i]``, the published DP count
    or :data:`NOT_REPORTED`, and ``synthetic[i]``, the number of synthetic records holding the
    combination (0 when none does). The union is not held as such: only the two sides (the DP
    aggregates' combinations; the synthetic records' exact aggregates as sorted
    :func:`~sds_core.marginals.aggregates.encode_keys` keys of ``base`` and counts) and one
    byte per union row, ``source`` (:data:`DP_ROW` | :data:`SYN_ROW`: which sides hold it), from
    which :meth:`blocks` rebuilds the rows a slice at a time. ``attrs``, ``dp`` and
    ``synthetic`` build the whole columns (for short lengths and tests).
    """

    dp_side: CombinationCounts
    syn_keys: NDArray[np.int64]
    syn_counts: NDArray[np.integer]
    base: int
    source: NDArray[np.int8]

    def __post_init__(self) -> None:
        invariant(
            self.syn_keys.shape == self.syn_counts.shape,
            f"{self.syn_keys.shape} synthetic keys but {self.syn_counts.shape} counts",
        )
        invariant(
            int(np.count_nonzero(self.source & DP_ROW)) == len(self.dp_side)
            and int(np.count_nonzero(self.source & SYN_ROW)) == self.syn_keys.shape[0]
            and bool(np.all(self.source != 0)),
            "every union row comes from the DP or the synthetic side, each side's row once",
        )

    @property
    def length(self) -> int:
        """The combination length k."""
        return self.dp_side.length

    def __len__(self) -> int:
        return int(self.source.shape[0])

    def blocks(self, rows: int = SLICE_ROWS) -> Iterator[CombinationRows]:
        """The union's rows in order, ``rows`` at a time (the last slice may be shorter)."""
        require(rows >= 1, f"a slice needs at least one combination, got rows={rows!r}")
        i = j = 0
        for lo in range(0, len(self), rows):
            f = self.source[lo : lo + rows]
            from_dp, from_syn = (f & DP_ROW) != 0, (f & SYN_ROW) != 0
            nd, ns = int(np.count_nonzero(from_dp)), int(np.count_nonzero(from_syn))
            attrs = np.empty((f.shape[0], self.length), dtype=np.int32)
            attrs[from_dp] = self.dp_side.attrs[i : i + nd]
            attrs[from_syn] = decode_keys(self.syn_keys[j : j + ns], self.base, self.length)
            dp = np.full(f.shape[0], NOT_REPORTED, dtype=np.int64)
            dp[from_dp] = self.dp_side.counts[i : i + nd]
            synthetic = np.zeros(f.shape[0], dtype=np.int64)
            synthetic[from_syn] = self.syn_counts[j : j + ns]
            yield CombinationRows(attrs, dp, synthetic)
            i, j = i + nd, j + ns

    def whole(self) -> CombinationRows:
        """Every union row at once (one pass of :meth:`blocks`): for short lengths; a caller
        reading several columns takes this once rather than the properties below, which each
        build it again."""
        parts = list(self.blocks(max(len(self), 1)))
        if parts:
            return parts[0]
        return CombinationRows(
            np.zeros((0, self.length), np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64)
        )

    @property
    def attrs(self) -> NDArray[np.int32]:
        """(m, k) attribute ids of every union row (built whole)."""
        return self.whole().attrs

    @property
    def dp(self) -> NDArray[np.int64]:
        """DP count of every union row, :data:`NOT_REPORTED` where none (built whole)."""
        return self.whole().dp

    @property
    def synthetic(self) -> NDArray[np.int64]:
        """Synthetic count of every union row, 0 where none (built whole)."""
        return self.whole().synthetic

    @property
    def reported(self) -> NDArray[np.bool_]:
        """Mask of the combinations the DP aggregates report (built whole)."""
        return self.whole().reported

    @property
    def n_reported(self) -> int:
        """Number of combinations the DP aggregates report (``reported.sum()``)."""
        return int(np.count_nonzero(self.dp_side.counts != NOT_REPORTED))

    @property
    def n_synthetic(self) -> int:
        """Number of combinations some synthetic record holds (``(synthetic > 0).sum()``)."""
        return int(np.count_nonzero(self.syn_counts > 0))


@dataclass(frozen=True, slots=True)
class OneWay:
    """One column's distribution: its published values, their DP and synthetic counts."""

    column: str
    labels: tuple[str, ...]
    dp: NDArray[np.int64]
    synthetic: NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Agreement:
    """DP aggregates against synthetic records, by combination length (published values only).

    >>> from sds_core.marginals.aggregates import AggregateSet
    >>> d = Domain(("A", "B"), (("a1", "a2"), ("b1",)))
    >>> dp = AggregateSet.from_text_dict(
    ...     d, {"A:a1": 5, "A:a2": 3, "B:b1": 6, "A:a1;B:b1": 4}, 2, is_dp=True
    ... )
    >>> syn = PreparedTable(d, np.array([[0, 0], [0, 0], [1, 0], [1, -1]], dtype=np.int32))
    >>> a = agreement(dp, syn)
    >>> a.by_len[2].dp.tolist(), a.by_len[2].synthetic.tolist()
    ([4, -1], [2, 1])
    >>> a.one_way(0).dp.tolist(), a.one_way(0).synthetic.tolist()
    ([5, 3], [2, 2])
    """

    domain: Domain
    reporting_length: int
    by_len: Mapping[int, LengthAgreement]

    def published_attributes(self) -> NDArray[np.int32]:
        """Global ids of the attributes that the DP aggregates or synthetic records hold.

        Only these values may be shown: a domain built from the sensitive data can also hold
        values whose 1-way count was suppressed, and their labels must not be published.
        """
        one = self.by_len.get(1)
        return np.zeros(0, dtype=np.int32) if one is None else one.attrs[:, 0].copy()

    def one_way(self, column: int) -> OneWay:
        """DP and synthetic counts of each published value of ``column`` (domain order)."""
        require(
            0 <= column < self.domain.n_columns,
            f"column index {column} out of range 0..{self.domain.n_columns - 1}",
        )
        la = self.by_len.get(1)
        one = la.whole() if la is not None else None
        lo, hi = self.domain.offsets[column], self.domain.offsets[column + 1]
        if one is None:
            rows = np.zeros(0, dtype=np.int64)
        else:
            rows = np.flatnonzero((one.attrs[:, 0] >= lo) & (one.attrs[:, 0] < hi))
        labels = self.domain.labels[column]
        ids = [] if one is None else one.attrs[rows, 0].tolist()
        return OneWay(
            self.domain.columns[column],
            tuple(labels[a - lo] for a in ids),
            np.zeros(0, np.int64) if one is None else one.dp[rows],
            np.zeros(0, np.int64) if one is None else one.synthetic[rows],
        )

    def marginal_tvd(self, k: int, *, rows: int = SLICE_ROWS) -> dict[tuple[int, ...], float]:
        """Total variation distance of each k-column marginal, DP aggregates vs synthetic records.

        For every set of k columns (indices, ascending) that both sides count: the DP
        distribution is the marginal's reported DP counts over their sum, the synthetic one the
        records' counts over their sum; combinations a side lacks count 0 there. Computed
        ``rows`` combinations at a time: the sums are integers, and each marginal's distance is
        added up combination by combination in row order whatever ``rows`` is, so the floats are
        the same too.
        """
        la = self.by_len.get(k)
        if la is None or len(la) == 0:
            return {}
        require(rows >= 1, f"a slice needs at least one combination, got rows={rows!r}")
        c = self.domain.n_columns
        col_of = self.domain.attribute_columns().astype(np.int64)

        def sets_of(attrs: NDArray[np.int32]) -> NDArray[np.int64]:  # column sets, as codes
            key = np.zeros(attrs.shape[0], dtype=np.int64)
            for j in range(k):
                key = key * c + col_of[attrs[:, j]]
            return key

        def dp_of(part: CombinationRows) -> NDArray[np.float64]:  # 0 where not reported
            return np.where(part.reported, part.dp, 0).astype(np.float64)

        sets = np.unique(np.concatenate([np.unique(sets_of(p.attrs)) for p in la.blocks(rows)]))
        n = sets.shape[0]
        dp_sum, syn_sum, tvd = np.zeros(n), np.zeros(n), np.zeros(n)
        for part in la.blocks(rows):  # integer sums (exact in float64 below 2^53)
            at = np.searchsorted(sets, sets_of(part.attrs))
            dp_sum += np.bincount(at, weights=dp_of(part), minlength=n)
            syn_sum += np.bincount(at, weights=part.synthetic, minlength=n)
        for part in la.blocks(rows):
            at = np.searchsorted(sets, sets_of(part.attrs))
            dp, syn = dp_of(part), part.synthetic.astype(np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                gap = np.abs(dp / dp_sum[at] - syn / syn_sum[at])
            np.add.at(tvd, at, np.nan_to_num(gap))  # in row order, as one bincount would
        tvd = 0.5 * tvd
        out: dict[tuple[int, ...], float] = {}
        for i in np.flatnonzero((dp_sum > 0) & (syn_sum > 0)).tolist():
            code, columns = int(sets[i]), []
            for _ in range(k):
                code, col = divmod(code, c)
                columns.append(col)
            out[tuple(reversed(columns))] = float(tvd[i])
        return out

    def pair_tvd(self) -> NDArray[np.float64]:
        """(C, C) total variation distance of each column pair's 2-way distribution.

        :meth:`marginal_tvd` of length 2 as a matrix: symmetric; NaN on the diagonal and where
        a side has no count (or R < 2).
        """
        c = self.domain.n_columns
        out = np.full((c, c), np.nan)
        for (i, j), tvd in self.marginal_tvd(2).items():
            out[i, j] = out[j, i] = tvd
        return out

    def within_noise_share_by_len(
        self, half_width_by_len: Mapping[int, float]
    ) -> dict[int, float | None]:
        """Share of the reported combinations whose synthetic count lies within ±half-width of
        the DP count (e.g. the 95% interval of the DP noise), per length given."""
        out: dict[int, float | None] = {}
        for k, hw in sorted(half_width_by_len.items()):
            la = self.by_len.get(k)
            out[k] = None if la is None else _reported_mean(la, hw)
        return out

    def mean_abs_error_by_len(self) -> dict[int, float | None]:
        """Mean |synthetic - DP| over the combinations the DP aggregates report, per length."""
        return {k: _reported_mean(la) for k, la in sorted(self.by_len.items())}

    def unreported_synthetic_by_len(self) -> dict[int, int]:
        """Distinct combinations the synthetic records hold but the DP aggregates do not report."""
        return {
            k: sum(
                int(np.count_nonzero((~part.reported) & (part.synthetic > 0)))
                for part in la.blocks()
            )
            for k, la in sorted(self.by_len.items())
        }


def _reported_mean(la: LengthAgreement, half_width: float | None = None) -> float | None:
    """Mean over the reported combinations of |synthetic - DP| (``half_width`` None) or of
    ``|synthetic - DP| <= half_width``, a slice at a time; None when none is reported.

    The same float as ``values.mean()`` of the whole column: numpy adds the integers (or
    booleans) as float64, exactly while the total stays below 2^53 (at most 2 x the records of
    each side per column set), then divides once.
    """
    total = n = 0
    for part in la.blocks():
        rep = part.reported
        gap = np.abs(part.synthetic[rep] - part.dp[rep])
        total += int(gap.sum() if half_width is None else np.count_nonzero(gap <= half_width))
        n += int(np.count_nonzero(rep))
    return float(np.float64(total) / np.float64(n)) if n else None


def merge_length(
    dp: CombinationCounts, synthetic: CombinationCounts, base: int, *, rows: int = SLICE_ROWS
) -> LengthAgreement:
    """The union of one length's DP and synthetic combinations, with both counts."""
    return merge_keyed(dp, encode_keys(synthetic.attrs, base), synthetic.counts, base, rows=rows)


def merge_keyed(
    dp: CombinationCounts,
    syn_keys: NDArray[np.int64],
    syn_counts: NDArray[np.integer],
    base: int,
    *,
    rows: int = SLICE_ROWS,
) -> LengthAgreement:
    """The union of one length's DP combinations and the synthetic ones (sorted keys, counts).

    Both sides are sorted; they are merged ``rows`` keys of each at a time (up to the smaller of
    the two slices' last keys when both go on), so nothing of the union's size is made but its
    ``source`` byte per row: the same union whatever ``rows`` is.
    """
    require(rows >= 1, f"a slice needs at least one combination, got rows={rows!r}")
    encode_keys(dp.attrs[:0], base)  # keys that overflow int64: an error even with no rows
    nd, ns = len(dp), syn_keys.shape[0]
    parts: list[NDArray[np.int8]] = []
    i = j = 0
    last = [-1, -1]  # each side's last key so far (keys are >= 0)
    while i < nd or j < ns:
        sides = [
            (encode_keys(dp.attrs[i : i + rows], base), i + rows < nd),
            (syn_keys[j : j + rows], j + rows < ns),
        ]
        cut = min((keys[-1] for keys, more in sides if more), default=None)
        taken = []
        for s, (keys, _) in enumerate(sides):
            if cut is not None:
                keys = keys[: np.searchsorted(keys, cut, side="right")]
            invariant(
                keys.size == 0 or (bool(keys[0] > last[s]) and bool(np.all(keys[1:] > keys[:-1]))),
                "combination rows must be unique and sorted",
            )
            if keys.size:
                last[s] = int(keys[-1])
            taken.append(keys)
        union = np.concatenate(taken)
        union.sort(kind="stable")  # two sorted runs: a linear merge
        if union.size:
            union = union[np.concatenate(([True], union[1:] != union[:-1]))]
        source = np.zeros(union.shape[0], dtype=np.int8)
        source[np.searchsorted(union, taken[0])] |= DP_ROW
        source[np.searchsorted(union, taken[1])] |= SYN_ROW
        parts.append(source)
        i, j = i + taken[0].shape[0], j + taken[1].shape[0]
    source = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int8)
    return LengthAgreement(dp, syn_keys, syn_counts, base, source)


def synthetic_keys(
    table: PreparedTable, k: int, base: int
) -> tuple[NDArray[np.int64], NDArray[np.integer]]:
    """The records' exact counts of every combination of length k, as sorted
    :func:`~sds_core.marginals.aggregates.encode_keys` keys and counts (int32 when the number
    of records fits, since no count exceeds it): ``exact_aggregates(table, k).counts_of(k)``
    without its (m, k) rows and whole-length sort.

    Column sets are put in key order group by group: the keys of the sets whose first column
    is c lie below those of the sets starting after c (attribute ids ascend with columns).
    """
    c = table.domain.n_columns
    if k > c or table.n_records == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    cliques = list(itertools.combinations(range(c), k))
    counted = count_cliques(table, cliques)
    total = sum(v[0].shape[0] for v in counted.values())
    keys = np.empty(total, dtype=np.int64)
    counts = np.empty(total, dtype=np.int32 if table.n_records <= _INT32_MAX else np.int64)
    at = 0
    for first in range(c):
        group_keys, group_counts = [], []
        for cols in [cols for cols in cliques if cols[0] == first]:
            local, n = counted.pop(cols)
            group_keys.append(encode_keys(keys_to_attrs(table.domain, cols, local), base))
            group_counts.append(n)
        if not group_keys:
            continue
        gk, gc = np.concatenate(group_keys), np.concatenate(group_counts)
        del group_keys, group_counts
        order = np.argsort(gk)  # unique keys
        keys[at : at + gk.shape[0]] = gk[order]
        counts[at : at + gk.shape[0]] = gc[order]
        at += gk.shape[0]
    return keys, counts


def partition_keys(
    records: PreparedTable, *, k: int, base: int
) -> tuple[NDArray[np.int64], NDArray[np.integer]]:
    """:func:`synthetic_keys` of one partition of records (a ``map_reduce`` step: summed over
    the partitions with :func:`add_keyed_counts`)."""
    return synthetic_keys(records, k, base)


def add_keyed_counts(
    a: tuple[NDArray[K], NDArray[np.integer]],
    b: tuple[NDArray[K], NDArray[np.integer]],
) -> tuple[NDArray[K], NDArray[np.integer]]:
    """The sum of two sets of counts keyed by sorted unique keys: sorted unique keys, the counts
    of equal keys added (int64 when int32 could overflow).

    >>> a, b = (np.array([1, 5]), np.array([2, 1])), (np.array([5, 7]), np.array([3, 1]))
    >>> k, c = add_keyed_counts(a, b)
    >>> k.tolist(), c.tolist()
    ([1, 5, 7], [2, 4, 1])
    """
    (ka, ca), (kb, cb) = a, b
    dtype = np.result_type(ca.dtype, cb.dtype)
    if dtype != np.int64 and int(ca.sum()) + int(cb.sum()) > _INT32_MAX:
        dtype = np.dtype(np.int64)
    keys = np.concatenate([ka, kb])
    keys.sort()
    if keys.size:
        keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    counts = np.zeros(keys.size, dtype=dtype)  # merged by position: each side's keys distinct
    counts[np.searchsorted(keys, ka)] += ca
    counts[np.searchsorted(keys, kb)] += cb
    return keys, counts


def length_keys(synthetic: Any, k: int, base: int) -> tuple[NDArray[np.int64], NDArray[np.integer]]:
    """The records' exact counts of length k as sorted keys and counts (:func:`synthetic_keys`),
    for a table here or for records in partitions (``map_reduce``: each partition counted
    where it is, the sums combined there; only this length's keys come back)."""
    if isinstance(synthetic, PreparedTable):
        return synthetic_keys(synthetic, k, base)
    invariant(
        callable(getattr(synthetic, "map_reduce", None)),
        f"records in partitions are counted with map_reduce; {type(synthetic).__name__} has none",
    )
    if synthetic.n_records == 0 or k > synthetic.domain.n_columns:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    keys, counts = synthetic.map_reduce(partition_keys, add_keyed_counts, k=k, base=base)
    # arrays received from another process can sit unaligned in their frame (Dask: an int64
    # array at an address = 4 mod 8), and numpy copies an unaligned array in every call that
    # needs it aligned (each searchsorted of a key block against all keys): align them once
    return np.require(keys, requirements="A"), np.require(counts, requirements="A")


def agreement(aggregates: AggregateSet, synthetic: PreparedTable | CountingBackend) -> Agreement:
    """Compare the DP aggregates with the synthetic records, combination by combination.

    Args:
        aggregates: the published DP aggregates (``is_dp`` must be True: exact counts of the
            sensitive data must never be compared for publication).
        synthetic: the synthetic records, over the aggregates' domain (a table, or records
            in partitions with ``map_reduce``, e.g. a Dask backend: each length's counts summed
            where the partitions are, :func:`length_keys`).

    Raises:
        SdsInputError: the aggregates are not DP, or the records use another domain.
    """
    require(
        aggregates.is_dp,
        "only DP aggregates may be compared for publication; these aggregates are exact "
        "(is_dp=False), i.e. counts of the sensitive data",
    )
    require(
        synthetic.domain == aggregates.domain,
        "the synthetic records must use the DP aggregates' domain (same columns and values); "
        f"got columns {list(synthetic.domain.columns)} vs {list(aggregates.domain.columns)}",
    )
    r = aggregates.reporting_length
    base = max(aggregates.domain.n_attributes, 1)
    by_len = {}
    for k in range(1, min(r, aggregates.domain.n_columns) + 1):  # one length at a time
        keys, counts = length_keys(synthetic, k, base)
        by_len[k] = merge_keyed(aggregates.counts_of(k), keys, counts, base)
        del keys, counts
    return Agreement(aggregates.domain, r, by_len)


def count_sd_by_len(
    sigma_by_len: Sequence[float], allowed_sensitivity_by_len: Sequence[int]
) -> dict[int, float]:
    """Noise standard deviation of one published count of each length: σ_k · √Δ_k.

    The same value as the manifest's ``noise_sd`` (``sds_release.store.report_inputs.count_sd``),
    from the privacy report's ``sigma_by_len`` and ``allowed_sensitivity_by_len`` (DP values).

    >>> count_sd_by_len([2.0, 3.0], [4, 0])
    {1: 4.0, 2: 0.0}
    """
    require(
        len(sigma_by_len) == len(allowed_sensitivity_by_len),
        f"one sigma per length: {len(sigma_by_len)} sigmas vs "
        f"{len(allowed_sensitivity_by_len)} allowed sensitivities",
    )
    return {
        k: float(s) * math.sqrt(max(int(a), 0))
        for k, (s, a) in enumerate(
            zip(sigma_by_len, allowed_sensitivity_by_len, strict=True), start=1
        )
    }


def inside_interval_share_by_len(
    agreement: Agreement, sd_by_len: Mapping[int, float], z: float = Z_95
) -> dict[int, float | None]:
    """Share of the reported combinations whose synthetic count is inside the noise interval.

    A reported combination of length k is inside when ``|synthetic - DP| <= z * sd_by_len[k]``
    (z = :data:`~sds_core.dp.intervals.Z_95`: the 95% interval the report and the explorer
    draw). None for a length without reported combinations or without a noise figure.

    >>> d = Domain(("A",), (("a1", "a2", "a3"),))
    >>> dp = AggregateSet.from_text_dict(d, {"A:a1": 50, "A:a2": 30, "A:a3": 20}, 1, is_dp=True)
    >>> syn = PreparedTable(d, np.repeat(np.array([[0], [1], [2]], np.int32), [60, 31, 9], 0))
    >>> inside_interval_share_by_len(agreement(dp, syn), {1: 3.0})
    {1: 0.3333333333333333}
    """
    out: dict[int, float | None] = {}
    for k, la in sorted(agreement.by_len.items()):
        sd = sd_by_len.get(k)
        out[k] = None if sd is None else _reported_mean(la, z * sd)
    return out


def chi2_quantile(dof: int, p: float = 0.95) -> float:
    """The p-quantile of a chi-square law with ``dof`` degrees of freedom (Wilson-Hilferty).

    Accurate to ~1% from dof = 1 on at p = 0.95 (3.90 vs 3.84 at dof 1, 18.31 vs 18.31 at 10).

    >>> round(chi2_quantile(10), 2), round(chi2_quantile(100), 1)
    (18.29, 124.3)
    """
    require(dof >= 1, f"dof must be >= 1, got {dof}")
    require(0.5 <= p < 1.0, f"p must be in [0.5, 1), got {p}")
    zq = _normal_quantile(p)
    h = 2.0 / (9.0 * dof)
    return float(dof * (1.0 - h + zq * math.sqrt(h)) ** 3)


def _normal_quantile(p: float) -> float:
    """Standard normal p-quantile by bisection of erf (p in [0.5, 1))."""
    lo, hi = 0.0, 10.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if 0.5 * (1.0 + math.erf(mid / math.sqrt(2.0))) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def pair_within_noise_share(agreement: Agreement, sd2: float, p: float = 0.95) -> float | None:
    """Share of column pairs whose 2-way counts are no further from the DP ones than noise.

    A column pair with m reported 2-combinations passes when
    ``sum(((synthetic - DP) / sd2) ** 2) <= chi2_quantile(m, p)``: the DP counts of those m
    combinations are each the true count plus independent noise of standard deviation sd2, so
    records that reproduce the true counts pass with probability p. None when R < 2, sd2 = 0 or
    no pair has a reported 2-combination.
    """
    la = agreement.by_len.get(2)
    two = la.whole() if la is not None and sd2 > 0 else None
    if two is None or not two.reported.any():
        return None
    c = agreement.domain.n_columns
    attr_col = agreement.domain.attribute_columns().astype(np.int64)
    rep = two.reported
    pair = attr_col[two.attrs[rep, 0]] * c + attr_col[two.attrs[rep, 1]]
    z2 = ((two.synthetic[rep] - two.dp[rep]) / sd2) ** 2
    stat = np.bincount(pair, weights=z2, minlength=c * c)
    m = np.bincount(pair, minlength=c * c)
    pairs = np.flatnonzero(m)
    ok = [stat[q] <= chi2_quantile(int(m[q]), p) for q in pairs]
    return float(np.mean(ok))


def agreement_summary(a: Agreement, sd_by_len: Mapping[int, float]) -> dict[str, Any]:
    """The published evaluation: how the synthetic records agree with the DP aggregates.

    Computed from published values only (the DP aggregates, the synthetic records and the DP
    noise's standard deviation per length, ``sd_by_len``, empty for a registry synthesizer), so
    it is post-processing of the release and covered by its guarantee. Per length k: the number
    of DP combinations reported, of distinct synthetic combinations, of synthetic combinations
    the DP aggregates do not report, the mean |synthetic − DP| over reported combinations, the
    share of those within the DP noise's 95% interval (±1.96·sd), and the mean and max total
    variation distance over the k-column marginals (DP vs synthetic).

    >>> from sds_core.marginals.aggregates import AggregateSet
    >>> d = Domain(("A", "B"), (("a1", "a2"), ("b1",)))
    >>> dp = AggregateSet.from_text_dict(d, {"A:a1": 5, "A:a2": 3, "B:b1": 6}, 1, is_dp=True)
    >>> syn = PreparedTable(d, np.array([[0, 0], [0, 0], [1, 0], [1, -1]], dtype=np.int32))
    >>> s = agreement_summary(agreement(dp, syn), {1: 1.0})
    >>> s["by_length"]["1"]["mean_abs_error"], s["by_length"]["1"]["within_noise_95_pct"]
    (2.333333, 33.333333)
    """
    errors = a.mean_abs_error_by_len()
    unreported = a.unreported_synthetic_by_len()
    within = a.within_noise_share_by_len({k: Z_95 * sd for k, sd in sd_by_len.items()})
    by_length: dict[str, dict[str, Any]] = {}
    for k, la in sorted(a.by_len.items()):
        tvd = list(a.marginal_tvd(k).values())
        share = within.get(k)
        sd = sd_by_len.get(k)
        by_length[str(k)] = {
            "dp_combinations": la.n_reported,
            "synthetic_combinations": la.n_synthetic,
            "synthetic_not_reported": unreported[k],
            "mean_abs_error": _rounded(errors[k]),
            "noise_sd": _rounded(sd),
            "within_noise_95_pct": None if share is None else _rounded(100.0 * share),
            "marginals_compared": len(tvd),
            "tvd_mean": _rounded(float(np.mean(tvd))) if tvd else None,
            "tvd_max": _rounded(max(tvd)) if tvd else None,
        }
    return {"reporting_length": a.reporting_length, "by_length": by_length}


def _rounded(x: float | None) -> float | None:
    """Six decimals: readable, and the same bytes on every platform."""
    return None if x is None else round(float(x), 6)


EMPTY_EXCESS = 0.10
"""A column is flagged when its synthetic records leave it empty (or outside its published
values) this much more often than its DP 1-way counts imply (issue 22, point 5)."""
MIN_WITHIN_NOISE = 0.90
"""A column is flagged when fewer of its published values than this have a synthetic count
within the 95% noise interval of their DP count."""


def column_warnings(
    a: Agreement,
    sd_by_len: Mapping[int, float],
    *,
    protected_records: int | None,
    synthetic_records: int,
    better: str,
) -> list[dict[str, Any]]:
    """Columns whose synthetic records do not follow their DP 1-way counts, each with a message
    a custodian reads and the option that would do better (``better``). Published values only.

    A column is flagged when its records leave it empty :data:`EMPTY_EXCESS` more often than
    the DP counts imply (1 − Σ DP counts / the DP record count), or when fewer than
    :data:`MIN_WITHIN_NOISE` of its published values have a synthetic count within ±1.96 noise
    standard deviations of their DP count (``sd_by_len[1]``; no such check without it).

    >>> from sds_core.marginals.aggregates import AggregateSet
    >>> d = Domain(("A", "B"), (("a1", "a2"), ("b1",)))
    >>> dp = AggregateSet.from_text_dict(d, {"A:a1": 50, "A:a2": 50, "B:b1": 100}, 1, is_dp=True)
    >>> codes = np.array([[0, 0]] * 50 + [[1, -1]] * 50, dtype=np.int32)
    >>> w = column_warnings(agreement(dp, PreparedTable(d, codes)), {1: 1.0},
    ...                     protected_records=100, synthetic_records=100, better="X")
    >>> [(x["column"], x["kind"]) for x in w]
    [('B', 'empty'), ('B', 'outside_noise')]
    """
    out: list[dict[str, Any]] = []
    sd = sd_by_len.get(1)
    for c in range(a.domain.n_columns):
        ow = a.one_way(c)
        name = ow.column
        if protected_records and synthetic_records > 0:
            dp_empty = max(0.0, 1.0 - float(ow.dp.sum()) / protected_records)
            syn_empty = max(0.0, 1.0 - float(ow.synthetic.sum()) / synthetic_records)
            if syn_empty - dp_empty > EMPTY_EXCESS:
                out.append(
                    {
                        "column": name,
                        "kind": "empty",
                        "value": round(syn_empty, 4),
                        "message": f"the synthetic records leave {name} empty in "
                        f"{syn_empty:.0%} of records where its DP counts imply {dp_empty:.0%}; "
                        f"{better}",
                    }
                )
        if sd is not None and len(ow.dp) > 0:
            within = float(np.mean(np.abs(ow.synthetic - ow.dp) <= Z_95 * sd))
            if within < MIN_WITHIN_NOISE:
                out.append(
                    {
                        "column": name,
                        "kind": "outside_noise",
                        "value": round(within, 4),
                        "message": f"the synthetic counts of {name} lie within the DP noise's "
                        f"95% interval for only {within:.0%} of its {len(ow.dp)} published "
                        f"values; {better}",
                    }
                )
    return out
