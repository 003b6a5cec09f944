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
    """Per length: (S keys, S counts, T keys, T counts) in one attribute-id space, keys sorted."""
    s_texts = sensitive.domain.attribute_texts()
    union = {t: i for i, t in enumerate(s_texts)}
    t_map = np.empty(len(target.domain.attribute_texts()), dtype=np.int64)
    for i, t in enumerate(target.domain.attribute_texts()):
        t_map[i] = union.setdefault(t, len(union))
    base = len(union) + 1
    out = {}
    for k in range(1, sensitive.reporting_length + 1):
        sc, tc = sensitive.counts_of(k), target.counts_of(k)
        s_keys = _keys(sc.attrs.astype(np.int64), base)
        t_attrs = np.sort(t_map[tc.attrs], axis=1) if len(tc) else tc.attrs.astype(np.int64)
        t_keys = _keys(t_attrs, base)
        so, to = np.argsort(s_keys), np.argsort(t_keys)
        out[k] = (s_keys[so], sc.counts[so].astype(np.int64), t_keys[to], tc.counts[to])
    return out


def _keys(attrs: NDArray[np.int64], base: int) -> NDArray[np.int64]:
    key = np.zeros(attrs.shape[0], dtype=np.int64)
    for j in range(attrs.shape[1]):
        key = key * base + attrs[:, j] + 1
    return key


def _count_of(
    keys: NDArray[np.int64], counts: NDArray[np.int64], query: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Count of each query key in (sorted keys, counts), 0 when absent."""
    if keys.size == 0:
        return np.zeros(query.size, dtype=np.int64)
    pos = np.minimum(np.searchsorted(keys, query), keys.size - 1)
    return np.where(keys[pos] == query, counts[pos], 0).astype(np.int64)


def _bucket(rows: NDArray[np.float64]) -> dict[str, float]:
    """Means of the (preservation, length, syn count, proportional error) rows (zeros if none)."""
    if not rows.shape[0]:
        return {
            "count_preservation": 0.0, "mean_combo_length": 0.0,
            "mean_combo_count": 0.0, "mean_proportional_error": 0.0, "n_combinations": 0,
        }  # fmt: skip
    m = rows.mean(axis=0)
    return {
        "count_preservation": float(m[0]), "mean_combo_length": float(m[1]),
        "mean_combo_count": float(m[2]), "mean_proportional_error": float(m[3]),
        "n_combinations": int(rows.shape[0]),
    }  # fmt: skip


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
    items: list[tuple[int, NDArray[np.int64], NDArray[np.int64]]] = []  # (length, sen, syn)
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
        # preservation items: S with count >= k, plus every T combination not yet included
        syn_of_s = _count_of(tk, tc, sk)
        keep = sc >= resolution
        items.append((k, sc[keep], syn_of_s[keep]))
        sen_of_t = _count_of(sk, sc, tk)
        extra = sen_of_t < resolution  # fabricated (0) or rare in S: not included yet
        items.append((k, sen_of_t[extra], tc[extra].astype(np.int64)))

    # rows (preservation, length, syn count, proportional error), vectorized over all items
    lens = np.concatenate([np.full(a.size, k, dtype=np.float64) for k, a, _ in items])
    sen = np.concatenate([a for _, a, _ in items]).astype(np.float64)
    syn = np.concatenate([b for _, _, b in items]).astype(np.float64)
    pos = sen > 0
    safe = np.where(pos, sen, 1.0)
    pres = np.where(pos, np.minimum(syn / safe, 1.0), 0.0)
    perr = np.where(pos, np.abs(syn - sen) / safe, 1.0)
    rows = np.column_stack([pres, lens, syn, perr])
    bins = [FIRST_COUNT_BIN]
    while bins[-1] < max_t:
        bins.append(bins[-1] * 2)
    bin_arr = np.asarray(bins)
    which = np.minimum(np.searchsorted(bin_arr, syn), len(bins) - 1)
    pres_by_count = {bins[i]: _bucket(rows[which == i]) for i in reversed(range(len(bins)))}
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
        "preservation_by_length": {k: _bucket(rows[lens == k]) for k in aligned},
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
        isinstance(resolution, int) and resolution >= 1,
        f"resolution must be >= 1, got {resolution!r}",
    )
    require(
        table.domain == aggregates.domain,
        "risk_metrics needs the table and the aggregates over the same domain",
    )
    n = table.n_records
    by_length: dict[int, dict[str, float]] = {}
    n_all = n_unique = n_rare = 0
    big = np.iinfo(np.int64).max
    min_count = np.full(n, big, dtype=np.int64)
    offsets = np.asarray(table.domain.offsets[:-1], dtype=np.int64)
    base = table.domain.n_attributes + 1
    # digit of a cell: attribute id + 1, 0 when empty (a key with a 0 digit matches nothing)
    digits = [np.where(table.codes[:, j] >= 0, table.codes[:, j].astype(np.int64) + offsets[j] + 1,
                       0) for j in range(table.domain.n_columns)]  # fmt: skip
    attr_col = np.asarray(table.domain.attribute_columns(), dtype=np.int64)
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
        if r == 0 or k > table.domain.n_columns:
            continue
        # only rare combinations can make a record's minimum count matter (== 1 or < k): look
        # records up among the rare combinations of the same columns (small sorted arrays)
        attrs = cc.attrs[c < resolution].astype(np.int64)
        keys, counts = _keys(attrs, base), c[c < resolution].astype(np.int64)
        colset = _keys(attr_col[attrs], table.domain.n_columns + 1)
        order = np.lexsort((keys, colset))
        keys, counts, colset = keys[order], counts[order], colset[order]
        for cols in itertools.combinations(range(table.domain.n_columns), k):
            cs = _keys(np.asarray([cols], dtype=np.int64), table.domain.n_columns + 1)[0]
            lo, hi = np.searchsorted(colset, cs), np.searchsorted(colset, cs, side="right")
            if lo == hi:
                continue
            key = digits[cols[0]].copy()
            for j in cols[1:]:
                key *= base
                key += digits[j]
            got = _count_of(keys[lo:hi], counts[lo:hi], key)
            np.minimum(min_count, np.where(got == 0, big, got), out=min_count)
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


def _columns(x: pd.DataFrame | PreparedTable) -> dict[str, tuple[list[str], NDArray[np.int64]]]:
    """Per column: (labels, codes into labels); empty cells are the label ""."""
    out: dict[str, tuple[list[str], NDArray[np.int64]]] = {}
    if isinstance(x, PreparedTable):
        for j, (col, labs) in enumerate(zip(x.domain.columns, x.domain.labels, strict=True)):
            codes = x.codes[:, j].astype(np.int64)
            out[col] = ([*labs, ""], np.where(codes >= 0, codes, len(labs)))
        return out
    require(
        isinstance(x, pd.DataFrame),
        f"expected a DataFrame or PreparedTable, got {type(x).__name__}",
    )
    for col in x.columns:
        values = x[col].astype(object).where(x[col].notna(), "").astype(str).to_numpy()
        codes, uniques = pd.factorize(values)
        out[str(col)] = ([str(u) for u in uniques], codes.astype(np.int64))
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
    codes, cards, empty_o, empty_s = [], [], {}, {}
    for col in o:
        (lab_o, c_o), (lab_s, c_s) = o[col], s[col]
        union = {lab: i for i, lab in enumerate(lab_o)}
        map_s = np.asarray([union.setdefault(lab, len(union)) for lab in lab_s], dtype=np.int64)
        joint = np.concatenate([c_o, map_s[c_s] if map_s.size else c_s])
        codes.append(joint)
        cards.append(max(len(union), 1))
        e = union.get("", -1)
        empty_o[col], empty_s[col] = float((c_o == e).mean()), float((joint[n_o:] == e).mean())
    top = min(max_order, len(codes))
    tvds: dict[int, list[float]] = {order: [] for order in range(1, top + 1)}

    def visit(prefix: NDArray[np.int64] | None, size: int, last: int, order: int) -> None:
        """TVD of every marginal extending the columns behind ``prefix`` (mixed-radix keys)."""
        for j in range(last + 1, len(codes)):
            key = codes[j] if prefix is None else prefix * cards[j] + codes[j]
            cells = size * cards[j]
            dense = key
            if cells > DENSE_MARGINAL_CELLS:  # sparse marginal: compact the occurring cells
                dense, uniq = pd.factorize(key)
                cells = len(uniq)
            p = np.bincount(dense[:n_o], minlength=cells) / n_o
            q = np.bincount(dense[n_o:], minlength=cells) / (key.size - n_o)
            tvds[order].append(0.5 * float(np.abs(p - q).sum()))
            if order < top:  # longer marginals reuse this key (one multiply-add per column)
                visit(key, cells if dense is key else size * cards[j], j, order + 1)

    visit(None, 1, -1, 1)
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

