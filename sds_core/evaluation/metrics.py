"""Evaluation metrics: SDS utility and risk metrics (spec §4) and marginal fidelity (TVD).

The building blocks of the release evaluation (:mod:`sds_core.evaluation.release`), usable on
any pair of tables or aggregate sets (``sds evaluate``). It compares against
the sensitive data, so nothing it returns is differentially private: every result is labelled
``differentially_private: False`` and stays with the data owner (a release writes it to the
private custodian report, never to its published files).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.errors import invariant, require
from sds_core.evaluation.tables import (
    column_codes,
    joint_marginal_sums,
    mixed_radix,
    record_min_counts,
)
from sds_core.marginals._count_kernels import (
    CliqueKey,
    ComparedTables,
    PreservationSums,
    abs_difference,
    add_preservation_items,
)
from sds_core.marginals.aggregates import AggregateSet, encode_keys

NOT_DP_NOTE = (
    "computed from the sensitive data: NOT differentially private; do not publish without the "
    "data owner's decision"
)
__all__ = [
    "NOT_DP_NOTE",
    "aggregate_metrics",
    "fidelity_summary",
    "marginal_fidelity",
    "risk_metrics",
]
FIRST_COUNT_BIN = 10
DENSE_MARGINAL_CELLS = 1 << 22


# ---- aggregate comparison ----------------------------------------------------------------------


BLOCK_KEYS = 1 << 20
"""Combinations :func:`aggregate_metrics` matches at a time (its memory follows one length's
keys and a block, not every length's matched arrays at once)."""


def _id_space(domain: Domain, target: Domain) -> tuple[int, NDArray[np.int64] | None]:
    """The radix of both sides' keys (:func:`~sds_core.marginals.aggregates.encode_keys`) and
    T's attribute ids in S's id space (None: the domains are equal and share their ids;
    otherwise T's ids are mapped through the texts). With equal domains the radix is that of
    :func:`~sds_core.evaluation.agreement.length_keys` (S's keys in that form are used as
    they are)."""
    if domain == target:
        return max(domain.n_attributes, 1), None
    union = {t: i for i, t in enumerate(domain.attribute_texts())}
    t_map = np.empty(len(target.attribute_texts()), dtype=np.int64)
    for i, t in enumerate(target.attribute_texts()):
        t_map[i] = union.setdefault(t, len(union))
    return max(len(union), 1), t_map


def _keys(
    attrs: NDArray[np.integer], base: int, t_map: NDArray[np.int64] | None, target: bool
) -> NDArray[np.int64]:
    """:func:`~sds_core.marginals.aggregates.encode_keys` of ``attrs`` (order-preserving: the
    rows' order), :data:`BLOCK_KEYS` rows at a time; a target's rows mapped through ``t_map``
    and put in ascending order first (they should ascend already)."""
    keys = np.empty(attrs.shape[0], dtype=np.int64)
    for start in range(0, attrs.shape[0], BLOCK_KEYS):
        block: NDArray[np.integer] = attrs[start : start + BLOCK_KEYS]
        if t_map is not None:
            block = np.sort(t_map[block], axis=1)
        elif target and not bool((block[:, 1:] > block[:, :-1]).all()):
            block = np.sort(block, axis=1)
        keys[start : start + BLOCK_KEYS] = encode_keys(block, base)
    return keys


def _matched(
    keys: NDArray[np.int64], other: NDArray[np.int64], other_counts: NDArray[np.integer]
) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
    """Which ``keys`` occur in ``other`` (sorted, unique), and their counts there (0: absent)."""
    if not other.size:
        return np.zeros(keys.size, dtype=np.bool_), np.zeros(keys.size, dtype=np.int64)
    pos = np.minimum(np.searchsorted(other, keys), other.size - 1)
    hit = other[pos] == keys
    return hit, np.where(hit, other_counts[pos], 0).astype(np.int64, copy=False)


def _sorted(
    keys: NDArray[np.int64], counts: NDArray[np.integer]
) -> tuple[NDArray[np.int64], NDArray[np.integer]]:
    """(keys, counts) ordered by key; aggregate rows are normally sorted already (no copy)."""
    if bool((keys[1:] > keys[:-1]).all()):
        return keys, counts
    order = np.argsort(keys)
    return keys[order], counts[order]


def _buckets(sums: NDArray[np.float64]) -> list[dict[str, float]]:
    """Buckets from rows of summed (1, preservation, length, syn count, proportional error)."""
    names = (
        "count_preservation",
        "mean_combo_length",
        "mean_combo_count",
        "mean_proportional_error",
    )
    out = []
    for row in sums:
        n = int(row[0])
        bucket: dict[str, float] = {
            name: float(row[i + 1] / n) if n else 0.0 for i, name in enumerate(names)
        }
        bucket["n_combinations"] = n
        out.append(bucket)
    return out


def aggregate_metrics(
    sensitive: AggregateSet,
    target: AggregateSet,
    *,
    resolution: int = 10,
    n_sensitive: int | None,
    n_target: int | None,
) -> dict[str, Any]:
    """SDS error/preservation metrics of ``target`` against ``sensitive`` (spec §4).

    Combinations are matched by their ``Column:value`` texts, so the two sets may use different
    domains. Percentages of suppressed and fabricated combinations both divide by |S|.

    Args:
        sensitive: S, exact aggregates (lengths 1..R compared, R = S's reporting length).
        target: T, DP aggregates or the aggregates of a synthetic table.
        resolution: k; sensitive combinations with count >= k enter the preservation items.
        n_sensitive, n_target: record counts for the record expansion (None = not reported).

    Returns:
        A dict (``differentially_private: False``) with overall and ``by_length`` values,
        ``preservation_by_length``, ``preservation_by_count`` (bins 10, 20, 40, ... descending),
        ``mean_proportional_error`` and ``record_expansion_pct``.
    """
    lengths = range(1, sensitive.reporting_length + 1)
    max_t = max((int(target.counts_of(k).counts.max(initial=0)) for k in lengths), default=0)
    compared = AggregateComparison(
        sensitive.domain, sensitive.reporting_length, target.domain, resolution, max_t
    )
    for k in lengths:
        s_cc, t_cc = sensitive.counts_of(k), target.counts_of(k)
        compared.add_length(
            k,
            compared.sensitive_keys(s_cc.attrs),
            s_cc.counts,
            compared.target_keys(t_cc.attrs),
            t_cc.counts,
        )
    return compared.result(n_sensitive, n_target)


class AggregateComparison:
    """:func:`aggregate_metrics`' running sums, fed both sides one length at a time (lengths
    1..R in order, each side as keys and counts: sides held as keys, e.g. records counted
    length by length, need only one length's keys at a time): the same floats as the whole
    comparison.

    ``sensitive`` and ``target`` are S's and T's domains, ``max_target`` T's largest count
    over every length (it sets the count bins)."""

    def __init__(
        self,
        sensitive: Domain,
        reporting_length: int,
        target: Domain,
        resolution: int,
        max_target: int,
    ) -> None:
        require(
            isinstance(resolution, int) and resolution >= 1,
            f"resolution must be >= 1, got {resolution!r}",
        )
        self.resolution, self.max_target = resolution, max_target
        # one length at a time, each side's keys sorted, matched BLOCK_KEYS at a time; the
        # preservation items (per length: S with count >= k, then every T combination not yet
        # included: fabricated, or rare in S) summed item by item in this order; |S - T| summed
        # as integers (a float sum of integers below 2**53 is exact in any order: the float of
        # the integer sum)
        self.base, self.t_map = _id_space(sensitive, target)
        self.lengths = range(1, reporting_length + 1)
        bins = [FIRST_COUNT_BIN]
        while bins[-1] < max_target:
            bins.append(bins[-1] * 2)
        self.bins = bins
        self.by_bin = np.zeros((len(bins), 5))
        self.by_len = np.zeros((len(self.lengths), 5))
        self.by_length: dict[int, dict[str, float]] = {}
        self.tot = {"s": 0, "supp": 0, "fab": 0, "err_sum": 0.0, "n_common": 0, "val_sum": 0.0}

    def target_keys(self, attrs: NDArray[np.integer]) -> NDArray[np.int64]:
        """The keys of target combinations (rows of T's attribute ids) in S's key space."""
        return _keys(attrs, self.base, self.t_map, True)

    def sensitive_keys(self, attrs: NDArray[np.integer]) -> NDArray[np.int64]:
        """The keys of sensitive combinations (rows of S's attribute ids, ascending)."""
        return _keys(attrs, self.base, None, False)

    def add_length(
        self,
        k: int,
        sensitive_keys: NDArray[np.int64],
        sensitive_counts: NDArray[np.integer],
        target_keys: NDArray[np.int64],
        target_counts: NDArray[np.integer],
    ) -> None:
        """Compare length ``k`` (the next length) of S with T's combinations of that length
        (each side's keys, :meth:`sensitive_keys` and :meth:`target_keys`, in any order, and
        their counts)."""
        invariant(k == len(self.by_length) + 1, f"length {k} after {len(self.by_length)}")
        invariant(
            int(target_counts.max(initial=0)) <= self.max_target,
            f"a target count above the stated largest, {self.max_target}",
        )
        sk, sc = _sorted(sensitive_keys, sensitive_counts)
        tk, tc = _sorted(target_keys, target_counts)
        res = self.resolution
        sums = PreservationSums(
            np.asarray(self.bins, dtype=np.float64), self.by_bin, self.by_len[k - 1]
        )
        n_common = err_sum = 0
        for start in range(0, sk.size, BLOCK_KEYS):
            s_counts = sc[start : start + BLOCK_KEYS].astype(np.int64, copy=False)
            hit, syn_of_s = _matched(sk[start : start + BLOCK_KEYS], tk, tc)
            n_common += int(hit.sum())
            err_sum += int(np.abs(s_counts[hit] - syn_of_s[hit]).sum())
            add_preservation_items(s_counts, syn_of_s, k, res, True, sums)
        for start in range(0, tk.size, BLOCK_KEYS):
            _, sen_of_t = _matched(tk[start : start + BLOCK_KEYS], sk, sc)
            t_counts = tc[start : start + BLOCK_KEYS].astype(np.int64, copy=False)
            add_preservation_items(sen_of_t, t_counts, k, res, False, sums)
        n_s, n_supp, n_fab = sk.size, sk.size - n_common, tk.size - n_common
        self.by_length[k] = {
            "n_sensitive": int(n_s),
            "n_target": int(tk.size),
            "suppressed_pct": 100.0 * n_supp / n_s if n_s else 0.0,
            "fabricated_pct": 100.0 * n_fab / n_s if n_s else 0.0,
            "mean_count": float(sc.mean()) if n_s else 0.0,
            "mean_error": float(err_sum) / n_common if n_common else 0.0,
        }
        tot = self.tot
        tot["s"] += n_s
        tot["supp"] += n_supp
        tot["fab"] += n_fab
        tot["err_sum"] += float(err_sum)
        tot["n_common"] += n_common
        tot["val_sum"] += float(sc.sum())

    def result(self, n_sensitive: int | None, n_target: int | None) -> dict[str, Any]:
        """The metrics, once every length is added."""
        invariant(
            len(self.by_length) == len(self.lengths),
            f"{len(self.by_length)} of {len(self.lengths)} lengths compared",
        )
        tot, bins = self.tot, self.bins
        bucket_of_bin = _buckets(self.by_bin)
        pres_by_count = {bins[i]: bucket_of_bin[i] for i in reversed(range(len(bins)))}
        mpe = float(np.mean([v["mean_proportional_error"] for v in pres_by_count.values()]))
        expansion = None
        if n_sensitive and n_target is not None:
            expansion = (n_target / n_sensitive - 1.0) * 100.0
        return {
            "differentially_private": False,
            "note": NOT_DP_NOTE,
            "suppressed_pct": 100.0 * tot["supp"] / tot["s"] if tot["s"] else 0.0,
            "fabricated_pct": 100.0 * tot["fab"] / tot["s"] if tot["s"] else 0.0,
            "mean_count": tot["val_sum"] / tot["s"] if tot["s"] else 0.0,
            "mean_error": tot["err_sum"] / tot["n_common"] if tot["n_common"] else 0.0,
            "by_length": self.by_length,
            "preservation_by_length": dict(zip(self.lengths, _buckets(self.by_len), strict=True)),
            "preservation_by_count": pres_by_count,
            "mean_proportional_error": mpe,
            "record_expansion_pct": expansion,
        }


# ---- privacy risk of a table -------------------------------------------------------------------


def risk_metrics(
    aggregates: AggregateSet, table: PreparedTable, *, resolution: int
) -> dict[str, Any]:
    """Unique / rare combination shares of ``aggregates`` and records of ``table`` holding them.

    Usually ``aggregates`` are the exact aggregates of ``table`` itself. A combination is unique
    when its count is 1 and rare when its count is < ``resolution`` (rare includes unique).
    Combinations of a record absent from ``aggregates`` are ignored.
    """
    require(
        table.domain == aggregates.domain,
        "risk_metrics needs the table and the aggregates over the same domain",
    )
    lookups = risk_lookups(aggregates, resolution=resolution)
    unique, rare = record_risk_counts(table, lookups)
    return risk_summary(lookups, table.n_records, unique, rare)


@dataclass(frozen=True)
class RiskLookups:
    """What :func:`risk_metrics` reads from the aggregates: the shares per length and the rare
    combinations the records are looked up against, and the count-1 ones on their own when
    some count is negative (exact counts: sensitive)."""

    resolution: int
    by_length: dict[int, dict[str, float]]
    n_all: int
    n_unique: int
    n_rare: int
    rare_by_len: dict[int, tuple[NDArray[np.integer], NDArray[np.integer]]]
    unique_by_len: dict[int, tuple[NDArray[np.integer], NDArray[np.integer]]]


@dataclass(frozen=True)
class LengthRisk:
    """One length's part of :class:`RiskLookups`: its combination count, unique and rare ones,
    and the (attrs, counts) of those a record is looked up against (None: none)."""

    length: int
    n_combinations: int
    n_unique: int
    n_rare: int
    rare: tuple[NDArray[np.integer], NDArray[np.integer]] | None
    unique: tuple[NDArray[np.integer], NDArray[np.integer]] | None


def _narrowest(low: int, high: int) -> type[np.signedinteger]:
    """The smallest signed integer type holding ``low..high``."""
    for dtype in (np.int8, np.int16, np.int32):
        if np.iinfo(dtype).min <= low and high <= np.iinfo(dtype).max:
            return dtype
    return np.int64


def length_risk(
    k: int,
    counts: NDArray[np.integer],
    rows_of: Callable[[NDArray[np.bool_]], NDArray[np.integer]],
    *,
    resolution: int,
    n_columns: int,
    with_unique: bool = True,
) -> LengthRisk:
    """:class:`LengthRisk` of the combinations of length ``k`` with these ``counts``;
    ``rows_of(mask)`` gives the attribute rows of the combinations the mask selects.

    The count-1 combinations are looked up on their own only ``with_unique`` (needed only
    when some count is negative: :func:`record_risk_counts`); the rare ones in the smallest
    integer type holding them (below ``max(resolution, 2)``: int8 at the usual resolutions;
    :func:`record_risk_counts` reads only their values)."""
    c = counts
    u, r = int((c == 1).sum()), int((c < resolution).sum())
    rare = unique = None
    lim = max(resolution, 2)  # count-1 combinations are looked up even when resolution is 1
    if k <= n_columns and bool((c < lim).any()):
        # only combinations with a count < max(k, 2) can make a record unique or rare; a
        # count of 0 is treated as absent, a negative one is rare
        keep = (c < lim) & (c != 0)
        if keep.any():
            kept = c[keep]
            rare = (rows_of(keep), kept.astype(_narrowest(int(kept.min()), lim - 1), copy=False))
            del kept
        del keep
        ones = c == 1
        if with_unique and ones.any():
            unique = (rows_of(ones), c[ones])
    return LengthRisk(k, int(c.shape[0]), u, r, rare, unique)


def risk_lookups_of(resolution: int, lengths: list[LengthRisk]) -> RiskLookups:
    """:class:`RiskLookups` from every length's part (lengths 1..R in order)."""
    by_length: dict[int, dict[str, float]] = {}
    rare_by_len, unique_by_len = {}, {}
    for part in lengths:
        n, u, r = part.n_combinations, part.n_unique, part.n_rare
        by_length[part.length] = {
            "n_combinations": n,
            "unique_pct": 100.0 * u / n if n else 0.0,
            "rare_pct": 100.0 * r / n if n else 0.0,
        }
        if part.rare is not None:
            rare_by_len[part.length] = part.rare
        if part.unique is not None:
            unique_by_len[part.length] = part.unique
    return RiskLookups(
        resolution,
        by_length,
        sum(p.n_combinations for p in lengths),
        sum(p.n_unique for p in lengths),
        sum(p.n_rare for p in lengths),
        rare_by_len,
        unique_by_len,
    )


def risk_lookups(aggregates: AggregateSet, *, resolution: int) -> RiskLookups:
    """The combination shares of :func:`risk_metrics` and the lookups of its record pass."""
    require(
        isinstance(resolution, int) and resolution >= 1,
        f"resolution must be >= 1, got {resolution!r}",
    )
    n_columns = aggregates.domain.n_columns
    lengths = range(1, min(aggregates.reporting_length, n_columns) + 1)
    negative = any(bool((aggregates.counts_of(k).counts < 0).any()) for k in lengths)
    parts = []
    for k in range(1, aggregates.reporting_length + 1):
        cc = aggregates.counts_of(k)
        parts.append(
            length_risk(
                k,
                cc.counts,
                lambda mask, cc=cc: cc.attrs[mask],  # type: ignore[misc]
                resolution=resolution,
                n_columns=n_columns,
                with_unique=negative,
            )
        )
    return risk_lookups_of(resolution, parts)


def record_risk_counts(table: PreparedTable, lookups: RiskLookups) -> tuple[int, int]:
    """Records of ``table`` holding a unique combination, and holding a rare one (a
    partition's counts add up to the whole table's)."""
    n, domain = table.n_records, table.domain
    big = np.iinfo(np.int64).max
    min_count = (
        record_min_counts(domain, table.codes, lookups.rare_by_len)
        if lookups.rare_by_len
        else (np.full(n, big, dtype=np.int64))
    )
    has_unique = min_count == 1
    if lookups.unique_by_len and any(bool((v[1] < 1).any()) for v in lookups.rare_by_len.values()):
        # a negative count can hide a count of 1 from the minimum: look the 1s up on their own
        has_unique = record_min_counts(domain, table.codes, lookups.unique_by_len) == 1
    return int(has_unique.sum()), int((min_count < lookups.resolution).sum())


def risk_summary(
    lookups: RiskLookups, n_records: int, unique_records: int, rare_records: int
) -> dict[str, Any]:
    """:func:`risk_metrics` from the lookups and the record counts."""
    n, n_all = n_records, lookups.n_all
    return {
        "differentially_private": False,
        "note": NOT_DP_NOTE,
        "resolution": lookups.resolution,
        "unique_combinations_pct": 100.0 * lookups.n_unique / n_all if n_all else 0.0,
        "rare_combinations_pct": 100.0 * lookups.n_rare / n_all if n_all else 0.0,
        "records_with_unique_pct": 100.0 * (unique_records / n) if n else 0.0,
        "records_with_rare_pct": 100.0 * (rare_records / n) if n else 0.0,
        "by_length": lookups.by_length,
    }


# ---- marginal fidelity -------------------------------------------------------------------------


def fidelity_summary(
    columns: Sequence[str],
    tvds: Mapping[int, Sequence[float]],
    empty_original: Mapping[str, float],
    empty_synthetic: Mapping[str, float],
) -> dict[str, Any]:
    """The marginal fidelity's result (the one place it is written): each order's TVDs (in
    the order of ``itertools.combinations`` of the columns) summarized, and each column's
    share of empty cells on both sides."""
    return {
        "differentially_private": False,
        "note": NOT_DP_NOTE,
        "tvd_mean_by_order": {o: float(np.mean(v)) for o, v in tvds.items()},
        "tvd_max_by_order": {o: float(np.max(v)) for o, v in tvds.items()},
        "n_marginals_by_order": {o: len(v) for o, v in tvds.items()},
        "empty_cell_share": {
            "original": float(np.mean(list(empty_original.values()))),
            "synthetic": float(np.mean(list(empty_synthetic.values()))),
        },
        "empty_share_by_column": {
            c: {"original": empty_original[c], "synthetic": empty_synthetic[c]} for c in columns
        },
    }


def marginal_fidelity(
    original: pd.DataFrame | PreparedTable,
    synthetic: pd.DataFrame | PreparedTable,
    *,
    max_order: int = 3,
) -> dict[str, Any]:
    """Mean total variation distance over all 1..max_order-way marginals, and empty-cell shares.

    Empty cells ("" / NaN, or code -1) count as a value of their column. DataFrames are compared
    cell text by cell text, so pass prepared tables (or frames after the same preprocessing).

    Returns:
        ``tvd_mean_by_order``, ``tvd_max_by_order``, ``n_marginals_by_order``,
        ``empty_cell_share`` {original, synthetic} and ``empty_share_by_column``.
    """
    require(
        isinstance(max_order, int) and max_order >= 1, f"max_order must be >= 1, got {max_order!r}"
    )
    o, s = column_codes(original), column_codes(synthetic)
    require(
        list(o) == list(s),
        f"original and synthetic columns differ: {list(o)} vs {list(s)}",
    )
    n_o, n_s = len(next(iter(o.values()))[1]), len(next(iter(s.values()))[1])
    require(n_o > 0 and n_s > 0, "marginal_fidelity needs two non-empty tables")
    require(n_o * n_s < 1 << 61, f"tables too large to compare: {n_o} x {n_s} records")
    maps, cards = [], []
    empty_o: dict[str, float] = {}  # per column: the code of the empty label, then its share
    empty_s: dict[str, float] = {}
    for col in o:  # codes into the union of both tables' labels
        union = {lab: i for i, lab in enumerate(o[col][0])}
        maps.append(np.asarray([union.setdefault(lab, len(union)) for lab in s[col][0]]))
        cards.append(max(len(union), 1))
        empty_o[col] = union.get("", -1)
    top_card = max(cards)
    dtype = np.int8 if top_card <= 1 << 7 else np.int16 if top_card <= 1 << 15 else np.int32
    codes_o, codes_s = np.empty((len(o), n_o), dtype=dtype), np.empty((len(o), n_s), dtype=dtype)
    for j, col in enumerate(o):
        (_, c_o), (_, c_s) = o[col], s[col]
        e = empty_o[col]
        codes_o[j], codes_s[j] = c_o, maps[j].astype(dtype)[c_s] if maps[j].size else c_s
        empty_o[col], empty_s[col] = float((c_o == e).mean()), float((codes_s[j] == e).mean())
    top = min(max_order, len(cards))
    tvds: dict[int, list[float]] = {order: [] for order in range(1, top + 1)}
    # TVD = 0.5 * sum |c_o / n_o - c_s / n_s| = 0.5 * sum |n_s c_o - n_o c_s| / (n_o n_s): the
    # sum is exact in int64, cell by cell in one compiled pass over both tables per marginal;
    # marginals inside a joint column group are sums over the group's joint table instead
    joint = joint_marginal_sums(codes_o, codes_s, cards, top)
    acc = np.zeros((1, 0), dtype=np.int64)
    for order in range(1, top + 1):
        for cols in itertools.combinations(range(len(cards)), order):
            if cols in joint:
                tvds[order].append(0.5 * float(joint[cols]) / float(n_o * n_s))
                continue
            mult = mixed_radix(cards, cols)
            cells = int(np.prod([cards[c] for c in cols], dtype=object))
            col_arr = np.asarray(cols, dtype=np.int64)
            a, b = codes_o, codes_s
            if cells > DENSE_MARGINAL_CELLS:  # sparse marginal: compact the occurring cells
                key = np.zeros(n_o + n_s, dtype=np.int64)
                for i, c in enumerate(cols):
                    key[:n_o] += codes_o[c] * mult[i]
                    key[n_o:] += codes_s[c] * mult[i]
                dense, uniq = pd.factorize(key)
                a, b = dense[None, :n_o], dense[None, n_o:]
                col_arr, mult, cells = np.zeros(1, np.int64), np.ones(1, np.int64), len(uniq)
            if acc.shape[1] < cells:
                acc = np.zeros((1, cells), dtype=np.int64)
            tables = ComparedTables(a, b, w_o=n_s, w_s=n_o)  # n_s c_o - n_o c_s, exact
            total = abs_difference(tables, CliqueKey(col_arr, mult), acc, cells)
            tvds[order].append(0.5 * float(total) / float(n_o * n_s))
    return fidelity_summary(list(o), tvds, empty_o, empty_s)
