"""Release evaluation: SDS utility and risk metrics (spec §4) and marginal fidelity (TVD).

Last stage of a release, usable on any pair of tables or aggregate sets. It compares against
the sensitive data, so nothing it returns is differentially private: every result is labelled
``differentially_private: False`` and must stay with the data owner unless they decide otherwise.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sds_core.aggregates import AggregateSet
from sds_core.count_kernels import (
    abs_difference,
    add_preservation_items,
    compact_codes,
    joint_groups,
    min_rank_dense,
    min_rank_sorted,
    signed_counts,
)
from sds_core.domain import Domain
from sds_core.errors import require
from sds_core.evaluate_publish import PUBLISHABLE_NOTE, publishable_evaluation
from sds_core.exact import exact_aggregates
from sds_core.table import PreparedTable

NOT_DP_NOTE = (
    "computed from the sensitive data: NOT differentially private; do not publish without the "
    "data owner's decision"
)
__all__ = [  # publishable_evaluation lives in evaluate_publish, re-exported here
    "NOT_DP_NOTE", "PUBLISHABLE_NOTE", "EvaluationParams", "aggregate_metrics",
    "evaluate_release", "marginal_fidelity", "publishable_evaluation", "risk_metrics",
]  # fmt: skip
FIRST_COUNT_BIN = 10
DENSE_MARGINAL_CELLS = 1 << 22
JOINT_CELLS = 1 << 20
"""Largest joint table of low-cardinality columns (TVD sums, risk lookups)."""
RISK_DENSE_BYTES = 1 << 26


@dataclass(frozen=True, slots=True)
class EvaluationParams:
    """Evaluation settings (no privacy meaning: evaluation is never published as DP).

    Args:
        reporting_length: longest combination length compared (>= 1).
        resolution: k of the rare-combination and preservation metrics (>= 1).
        max_marginal_order: longest marginal (number of columns) in the TVD workload (>= 1).
    """

    reporting_length: int = 3
    resolution: int = 10
    max_marginal_order: int = 3

    def __post_init__(self) -> None:
        for name in ("reporting_length", "resolution", "max_marginal_order"):
            v = getattr(self, name)
            require(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                f"{name} must be an integer >= 1, got {v!r}",
            )


# ---- aggregate comparison ----------------------------------------------------------------------


def _aligned_keys(
    sensitive: AggregateSet, target: AggregateSet
) -> dict[int, tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]]:
    """Per length: (S keys, S counts, T keys, T counts) in one attribute-id space, keys sorted.

    Equal domains share their attribute ids; otherwise T's ids are mapped through the texts.
    """
    same = sensitive.domain == target.domain
    t_map = None
    if same:
        base = sensitive.domain.n_attributes + 1
    else:
        union = {t: i for i, t in enumerate(sensitive.domain.attribute_texts())}
        t_map = np.empty(len(target.domain.attribute_texts()), dtype=np.int64)
        for i, t in enumerate(target.domain.attribute_texts()):
            t_map[i] = union.setdefault(t, len(union))
        base = len(union) + 1
    out = {}
    for k in range(1, sensitive.reporting_length + 1):
        sc, tc = sensitive.counts_of(k), target.counts_of(k)
        t_attrs: NDArray[np.integer] = tc.attrs
        if t_map is not None and len(tc):
            t_attrs = np.sort(t_map[tc.attrs], axis=1)
        elif not bool((t_attrs[:, 1:] > t_attrs[:, :-1]).all()):  # rows should ascend already
            t_attrs = np.sort(t_attrs, axis=1)
        s_keys, s_counts = _sorted(_keys(sc.attrs, base), sc.counts.astype(np.int64, copy=False))
        t_keys, t_counts = _sorted(_keys(t_attrs, base), tc.counts)
        out[k] = (s_keys, s_counts, t_keys, t_counts)
    return out


def _sorted(
    keys: NDArray[np.int64], counts: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(keys, counts) ordered by key; aggregate rows are normally sorted already (no copy)."""
    if bool((keys[1:] > keys[:-1]).all()):
        return keys, counts
    order = np.argsort(keys)
    return keys[order], counts[order]


def _keys(attrs: NDArray[np.integer], base: int) -> NDArray[np.int64]:
    """Order-preserving int64 key of each row: digits ``attr + 1`` in radix ``base``."""
    key = np.zeros(attrs.shape[0], dtype=np.int64)
    for j in range(attrs.shape[1]):
        key *= base
        key += attrs[:, j]
        key += 1
    return key


def _buckets(sums: NDArray[np.float64]) -> list[dict[str, float]]:
    """Buckets from rows of summed (1, preservation, length, syn count, proportional error)."""
    names = ("count_preservation", "mean_combo_length", "mean_combo_count",
             "mean_proportional_error")  # fmt: skip
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
    require(
        isinstance(resolution, int) and resolution >= 1,
        f"resolution must be >= 1, got {resolution!r}",
    )
    aligned = _aligned_keys(sensitive, target)
    by_length: dict[int, dict[str, float]] = {}
    parts = []  # per length: (S counts, their T counts, S counts of T, T counts)
    tot = {"s": 0, "supp": 0, "fab": 0, "err_sum": 0.0, "n_common": 0, "val_sum": 0.0}
    max_t = 0
    for k, (sk, sc, tk, tc) in aligned.items():
        common, si, ti = np.intersect1d(sk, tk, assume_unique=True, return_indices=True)
        n_s, n_supp, n_fab = sk.size, sk.size - common.size, tk.size - common.size
        err = np.abs(sc[si] - tc[ti]).astype(np.float64)
        by_length[k] = {
            "n_sensitive": int(n_s), "n_target": int(tk.size),
            "suppressed_pct": 100.0 * n_supp / n_s if n_s else 0.0,
            "fabricated_pct": 100.0 * n_fab / n_s if n_s else 0.0,
            "mean_count": float(sc.mean()) if n_s else 0.0,
            "mean_error": float(err.mean()) if err.size else 0.0,
        }  # fmt: skip
        tot["s"] += n_s
        tot["supp"] += n_supp
        tot["fab"] += n_fab
        tot["err_sum"] += float(err.sum())
        tot["n_common"] += int(common.size)
        tot["val_sum"] += float(sc.sum())
        if tc.size:
            max_t = max(max_t, int(tc.max()))
        syn_of_s = np.zeros(sk.size, dtype=np.int64)
        syn_of_s[si] = tc[ti]
        sen_of_t = np.zeros(tk.size, dtype=np.int64)
        sen_of_t[ti] = sc[si]
        parts.append((sc, syn_of_s, sen_of_t, tc.astype(np.int64, copy=False)))

    # preservation items per length: S with count >= k, then every T combination not yet
    # included (fabricated, or rare in S); sums item by item in this order
    bins = [FIRST_COUNT_BIN]
    while bins[-1] < max_t:
        bins.append(bins[-1] * 2)
    by_bin = np.zeros((len(bins), 5))
    by_len = np.zeros((len(parts), 5))
    bin_arr = np.asarray(bins, dtype=np.float64)
    for i, (k, (sen_s, syn_s, sen_t, syn_t)) in enumerate(zip(aligned, parts, strict=True)):
        add_preservation_items(sen_s, syn_s, resolution, True, k, bin_arr, by_bin, by_len[i])
        add_preservation_items(sen_t, syn_t, resolution, False, k, bin_arr, by_bin, by_len[i])
    bucket_of_bin = _buckets(by_bin)
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
        "by_length": by_length,
        "preservation_by_length": dict(zip(aligned, _buckets(by_len), strict=True)),
        "preservation_by_count": pres_by_count,
        "mean_proportional_error": mpe,
        "record_expansion_pct": expansion,
    }


# ---- privacy risk of a table -------------------------------------------------------------------


def _radix_multipliers(domain: Domain, cols: tuple[int, ...]) -> tuple[NDArray[np.int64], int]:
    """Multipliers of the local key ``sum((code + 1) * mult)`` of a clique, and its key range."""
    radix = [domain.cardinalities[c] + 1 for c in cols]
    mult = np.ones(len(cols), dtype=np.int64)
    for i in range(len(cols) - 2, -1, -1):
        mult[i] = mult[i + 1] * radix[i + 1]
    return mult, int(mult[0]) * radix[0]


def _record_min_counts(
    domain: Domain,
    codes: NDArray[np.int32],
    rare: dict[int, tuple[NDArray[np.int32], NDArray[np.int64]]],
) -> NDArray[np.int64]:
    """Per record, the smallest count among the given combinations it holds (int64 max: none).

    ``rare`` maps a length to (attrs, counts); rows whose columns are not strictly ascending
    match no record, and of repeated rows the first counts. Counts are replaced by their rank
    among the distinct counts, so each clique's lookup table is small (a dense array, or
    sorted keys when the clique is too big), and one compiled pass per clique updates the
    records' smallest rank.
    """
    n = codes.shape[0]
    big = np.iinfo(np.int64).max
    if not rare:
        return np.full(n, big, dtype=np.int64)
    values = np.unique(np.concatenate([c for _, c in rare.values()]))
    none = values.size + 1  # rank of "no such combination"
    rank_dtype = np.uint8 if none <= 255 else np.uint16 if none <= 65535 else np.int32
    best = np.full(n, none, dtype=rank_dtype)
    codes_t = compact_codes(codes)
    offsets = np.asarray(domain.offsets[:-1], dtype=np.int64)
    attr_col = np.asarray(domain.attribute_columns(), dtype=np.int64)
    # cliques inside a joint group: their smallest rank per joint cell of the group, then one
    # pass over the records for the group
    radices = [c + 1 for c in domain.cardinalities]
    groups = [
        (g, *_radix_multipliers(domain, g))
        for g in joint_groups(radices, min(JOINT_CELLS, n // 16))
    ]
    g_best = [np.full(size, none, dtype=rank_dtype) for _, _, size in groups]
    g_used = [False] * len(groups)
    for attrs, counts in rare.values():
        cols = attr_col[attrs]
        ok = (np.diff(cols, axis=1) > 0).all(axis=1)
        attrs, counts, cols = attrs[ok], counts[ok], cols[ok]
        clique = _keys(cols, domain.n_columns + 1)
        order = np.argsort(clique, kind="stable")
        bounds = np.flatnonzero(np.diff(clique[order])) + 1
        for rows in np.split(order, bounds) if order.size else []:
            cl = tuple(int(c) for c in cols[rows[0]])
            mult, size = _radix_multipliers(domain, cl)
            digits = attrs[rows].astype(np.int64) - offsets[list(cl)] + 1
            keys, first = np.unique(digits @ mult, return_index=True)
            ranks = (np.searchsorted(values, counts[rows][first]) + 1).astype(rank_dtype)
            col_arr = np.asarray(cl, dtype=np.int64)
            gi = next((i for i, (g, _, _) in enumerate(groups) if set(cl) <= set(g)), None)
            if gi is not None:
                table = np.full(size, none, dtype=rank_dtype)
                table[keys] = ranks
                g, _, g_size = groups[gi]
                digits = np.indices([radices[c] for c in g]).reshape(len(g), g_size)
                cell_keys = sum(digits[g.index(c)] * mult[i] for i, c in enumerate(cl))
                np.minimum(g_best[gi], table[cell_keys], out=g_best[gi])
                g_used[gi] = True
            elif size * np.dtype(rank_dtype).itemsize <= RISK_DENSE_BYTES and size <= 64 * n + 4096:
                table = np.full(size, none, dtype=rank_dtype)
                table[keys] = ranks
                min_rank_dense(codes_t, col_arr, mult, table, best)
            else:
                min_rank_sorted(codes_t, col_arr, mult, keys, ranks, best)
    for (g, g_mult, _), table, used in zip(groups, g_best, g_used, strict=True):
        if used:
            min_rank_dense(codes_t, np.asarray(g, dtype=np.int64), g_mult, table, best)
    found = best < none
    return np.where(found, values[np.where(found, best, 1).astype(np.int64) - 1], big)


def risk_metrics(
    aggregates: AggregateSet, table: PreparedTable, *, resolution: int
) -> dict[str, Any]:
    """Unique / rare combination shares of ``aggregates`` and records of ``table`` holding them.

    Usually ``aggregates`` are the exact aggregates of ``table`` itself. A combination is unique
    when its count is 1 and rare when its count is < ``resolution`` (rare includes unique).
    Combinations of a record absent from ``aggregates`` are ignored.
    """
    require(
        isinstance(resolution, int) and resolution >= 1,
        f"resolution must be >= 1, got {resolution!r}",
    )
    require(
        table.domain == aggregates.domain,
        "risk_metrics needs the table and the aggregates over the same domain",
    )
    n, domain = table.n_records, table.domain
    by_length: dict[int, dict[str, float]] = {}
    n_all = n_unique = n_rare = 0
    rare_by_len = {}
    for k in range(1, aggregates.reporting_length + 1):
        cc = aggregates.counts_of(k)
        c = cc.counts
        u, r = int((c == 1).sum()), int((c < resolution).sum())
        by_length[k] = {
            "n_combinations": len(cc),
            "unique_pct": 100.0 * u / len(cc) if len(cc) else 0.0,
            "rare_pct": 100.0 * r / len(cc) if len(cc) else 0.0,
        }
        n_all, n_unique, n_rare = n_all + len(cc), n_unique + u, n_rare + r
        if r and k <= domain.n_columns:
            # only rare combinations can make a record's minimum count matter (== 1 or < k);
            # a count of 0 is treated as absent
            keep = (c < resolution) & (c != 0)
            rare_by_len[k] = (cc.attrs[keep], c[keep].astype(np.int64))
    min_count = _record_min_counts(domain, table.codes, rare_by_len)
    return {
        "differentially_private": False,
        "note": NOT_DP_NOTE,
        "resolution": resolution,
        "unique_combinations_pct": 100.0 * n_unique / n_all if n_all else 0.0,
        "rare_combinations_pct": 100.0 * n_rare / n_all if n_all else 0.0,
        "records_with_unique_pct": 100.0 * float((min_count == 1).mean()) if n else 0.0,
        "records_with_rare_pct": 100.0 * float((min_count < resolution).mean()) if n else 0.0,
        "by_length": by_length,
    }


# ---- marginal fidelity -------------------------------------------------------------------------


def _columns(x: pd.DataFrame | PreparedTable) -> dict[str, tuple[list[str], NDArray[np.integer]]]:
    """Per column: (labels, codes into labels); empty cells are the label ""."""
    out: dict[str, tuple[list[str], NDArray[np.integer]]] = {}
    if isinstance(x, PreparedTable):
        by_col = compact_codes(x.codes)
        for codes, col, labs in zip(by_col, x.domain.columns, x.domain.labels, strict=True):
            c = codes.astype(np.int32)
            c[c < 0] = len(labs)
            out[col] = ([*labs, ""], c)
        return out
    require(
        isinstance(x, pd.DataFrame),
        f"expected a DataFrame or PreparedTable, got {type(x).__name__}",
    )
    for col in x.columns:
        values = x[col].astype(object).where(x[col].notna(), "").astype(str).to_numpy()
        codes, uniques = pd.factorize(values)
        out[str(col)] = ([str(u) for u in uniques], codes)
    return out


def _mixed_radix(cards: list[int], cols: tuple[int, ...]) -> NDArray[np.int64]:
    """Multipliers of the key ``sum(code * mult)`` over ``cols`` (last column fastest)."""
    mult = np.ones(len(cols), dtype=np.int64)
    for i in range(len(cols) - 2, -1, -1):
        mult[i] = mult[i + 1] * cards[cols[i + 1]]
    return mult


def _joint_marginals(
    codes_o: NDArray[np.integer], codes_s: NDArray[np.integer], cards: list[int], top: int
) -> dict[tuple[int, ...], int]:
    """``sum |n_s c_o - n_o c_s|`` of the marginals (<= top columns) inside the
    :func:`joint_groups`, summed from one joint table per group (JOINT_CELLS cells at most,
    and a sixteenth of the records: beyond that one pass per marginal is cheaper)."""
    n_o, n_s = codes_o.shape[1], codes_s.shape[1]
    out: dict[tuple[int, ...], int] = {}
    for cols in joint_groups(cards, min(JOINT_CELLS, (n_o + n_s) // 16)):
        subs = [
            sub
            for order in range(1, min(top, len(cols)) + 1)
            for sub in itertools.combinations(range(len(cols)), order)
            if tuple(cols[i] for i in sub) not in out
        ]
        if len(subs) < 2:
            continue
        cells = int(np.prod([cards[c] for c in cols]))
        diff = signed_counts(codes_o, codes_s, np.asarray(cols, dtype=np.int64),
                             _mixed_radix(cards, cols), n_s, n_o, cells)  # fmt: skip
        diff = diff.reshape([cards[c] for c in cols])
        for sub in subs:
            axes = tuple(i for i in range(len(cols)) if i not in sub)
            out[tuple(cols[i] for i in sub)] = int(np.abs(diff.sum(axis=axes)).sum())
    return out


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
    o, s = _columns(original), _columns(synthetic)
    require(
        list(o) == list(s),
        f"original and synthetic columns differ: {list(o)} vs {list(s)}",
    )
    n_o, n_s = len(next(iter(o.values()))[1]), len(next(iter(s.values()))[1])
    require(n_o > 0 and n_s > 0, "marginal_fidelity needs two non-empty tables")
    require(n_o * n_s < 1 << 61, f"tables too large to compare: {n_o} x {n_s} records")
    maps, cards, empty_o, empty_s = [], [], {}, {}
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
    # marginals inside the low-cardinality columns are sums over one joint table instead
    joint = _joint_marginals(codes_o, codes_s, cards, top)
    acc = np.zeros((1, 0), dtype=np.int64)
    for order in range(1, top + 1):
        for cols in itertools.combinations(range(len(cards)), order):
            if cols in joint:
                tvds[order].append(0.5 * float(joint[cols]) / float(n_o * n_s))
                continue
            mult = _mixed_radix(cards, cols)
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
            total = abs_difference(a, b, col_arr, mult, n_s, n_o, acc, cells)
            tvds[order].append(0.5 * float(total) / float(n_o * n_s))
    means = {o: float(np.mean(v)) for o, v in tvds.items()}
    maxes = {o: float(np.max(v)) for o, v in tvds.items()}
    counts = {o: len(v) for o, v in tvds.items()}
    return {
        "differentially_private": False,
        "note": NOT_DP_NOTE,
        "tvd_mean_by_order": means,
        "tvd_max_by_order": maxes,
        "n_marginals_by_order": counts,
        "empty_cell_share": {
            "original": float(np.mean(list(empty_o.values()))),
            "synthetic": float(np.mean(list(empty_s.values()))),
        },
        "empty_share_by_column": {c: {"original": empty_o[c], "synthetic": empty_s[c]} for c in o},
    }


def evaluate_release(
    original: PreparedTable,
    synthetic: PreparedTable,
    dp_aggregates: AggregateSet,
    params: EvaluationParams = EvaluationParams(),
) -> dict[str, Any]:
    """Everything above for one release: sensitive vs DP aggregates, vs synthetic, risks, TVD.

    Reads the sensitive table: the result is NOT differentially private (and it contains the
    true record count through the record expansion).
    """
    R, k = params.reporting_length, params.resolution
    sensitive = exact_aggregates(original, R)
    synth = exact_aggregates(synthetic, R)
    order = params.max_marginal_order
    return {
        "differentially_private": False,
        "note": NOT_DP_NOTE,
        "params": {"reporting_length": R, "resolution": k, "max_marginal_order": order},
        "sensitive_vs_dp_aggregates": aggregate_metrics(
            sensitive, dp_aggregates, resolution=k, n_sensitive=original.n_records,
            n_target=dp_aggregates.protected_number_of_records,
        ),
        "sensitive_vs_synthetic": aggregate_metrics(
            sensitive, synth, resolution=k, n_sensitive=original.n_records,
            n_target=synthetic.n_records,
        ),
        "sensitive_risk": risk_metrics(sensitive, original, resolution=k),
        "synthetic_risk": risk_metrics(synth, synthetic, resolution=k),
        "marginal_fidelity": marginal_fidelity(original, synthetic, max_order=order),
    }  # fmt: skip
