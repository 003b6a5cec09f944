"""The release evaluation: the sensitive records against the DP aggregates and the synthetic
records (SDS utility, risk and marginal fidelity), NOT differentially private (the custodian's).

One implementation wherever the records are: in partitions on a cluster, or a table in this
process, which is read as one (:mod:`sds_core.evaluation.records`). Each side is reduced to
integer sums where it is: its exact counts one combination length at a time
(:func:`compare_dp_by_length`, :func:`compare_by_length`: only one length's sorted keys and
narrow counts at a time, never the whole exact aggregates), the counts of records holding a
unique or rare combination (:func:`partition_risk`) and the cells of the 1..3-way marginals
(:mod:`sds_core.evaluation.cells`); every ratio is then computed from those integers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sds_core.data.table import PreparedTable
from sds_core.errors import invariant, require
from sds_core.evaluation.agreement import length_keys
from sds_core.evaluation.cells import (
    Cells,
    LocalCells,
    add_cells,
    fidelity_from_cells,
    fidelity_mappings,
    partition_fidelity_cells,
    partition_marginals,
)
from sds_core.evaluation.metrics import (
    NOT_DP_NOTE,
    AggregateComparison,
    LengthRisk,
    RiskLookups,
    length_risk,
    marginal_fidelity,
    record_risk_counts,
    risk_lookups_of,
    risk_summary,
)
from sds_core.evaluation.params import EvaluationParams
from sds_core.evaluation.records import Partitions, RowSlices, as_partitions
from sds_core.marginals.aggregates import AggregateSet, decode_keys

__all__ = ["compare_by_length", "compare_dp_by_length", "evaluate_release", "partition_risk"]

KEY_BLOCK = 1 << 20
"""Synthetic combinations turned from one key form into the other at a time."""


def partition_risk(table: PreparedTable, lookups: RiskLookups) -> tuple[int, int]:
    """A partition's records holding a unique and a rare combination."""
    return record_risk_counts(table, lookups)


def add_pairs(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """Element-wise sum of two count pairs."""
    return a[0] + b[0], a[1] + b[1]


Counted = dict[int, tuple[NDArray[np.int64], NDArray[np.integer]]]
"""Each length's sorted keys and counts, kept for a second pass over the same records."""


def _counted(
    records: PreparedTable | Partitions, k: int, base: int, kept: Counted | None = None
) -> tuple[NDArray[np.int64], NDArray[np.integer]]:
    """:func:`~sds_core.evaluation.agreement.length_keys` of records (counts >= 1: exact);
    from ``kept`` when counted there already, else counted and (``kept`` given) kept."""
    if kept is not None and k in kept:
        return kept[k]
    keys, counts = length_keys(records, k, base)
    invariant(not bool((counts < 1).any()), "a count below 1 among the records' counts")
    if kept is not None:
        kept[k] = keys, counts
    return keys, counts


def _length_risk(
    k: int,
    keys: NDArray[np.int64],
    counts: NDArray[np.integer],
    base: int,
    resolution: int,
    n_columns: int,
) -> LengthRisk:
    """:func:`~sds_core.evaluation.metrics.length_risk` of one length's exact counts given as
    keys (no count is negative: the count-1 combinations are not looked up on their own)."""
    return length_risk(
        k,
        counts,
        lambda mask: _rows(keys, mask, base, k),
        resolution=resolution,
        n_columns=n_columns,
        with_unique=False,
    )


def compare_dp_by_length(
    sensitive: PreparedTable | Partitions,
    dp_aggregates: AggregateSet,
    reporting_length: int,
    resolution: int,
    *,
    kept: Counted | None = None,
) -> tuple[dict[str, Any], RiskLookups]:
    """:func:`~sds_core.evaluation.metrics.aggregate_metrics` of the DP aggregates against the
    sensitive records' exact aggregates, and those aggregates'
    :func:`~sds_core.evaluation.metrics.risk_lookups`, the records counted one length at a
    time where they are (only one length's summed keys come here, each freed before the
    next; the whole exact aggregates never exist): the same numbers as from
    ``exact_aggregates(sensitive, R)``. ``kept``: each length's counts kept there (or taken
    from there), for :func:`compare_by_length` of the same records."""
    domain, R = sensitive.domain, reporting_length
    base = max(domain.n_attributes, 1)
    lengths = range(1, R + 1)
    top = max((int(dp_aggregates.counts_of(k).counts.max(initial=0)) for k in lengths), default=0)
    compared = AggregateComparison(domain, R, dp_aggregates.domain, resolution, top)
    risks = []
    for k in lengths:
        keys, counts = _counted(sensitive, k, base, kept)
        risks.append(_length_risk(k, keys, counts, base, resolution, domain.n_columns))
        s_keys = _in_key_space(compared, keys, base, k, target=False)
        del keys
        t_cc = dp_aggregates.counts_of(k)
        compared.add_length(k, s_keys, counts, compared.target_keys(t_cc.attrs), t_cc.counts)
        del s_keys, counts
    return (
        compared.result(sensitive.n_records, dp_aggregates.protected_number_of_records),
        risk_lookups_of(resolution, risks),
    )


def compare_by_length(
    sensitive: PreparedTable | Partitions,
    synthetic: PreparedTable | Partitions,
    reporting_length: int,
    resolution: int,
    *,
    kept: Counted | None = None,
) -> tuple[dict[str, Any], RiskLookups]:
    """:func:`~sds_core.evaluation.metrics.aggregate_metrics` of the records' exact aggregates
    against the sensitive records' and the synthetic ones'
    :func:`~sds_core.evaluation.metrics.risk_lookups`, both counted one length at a time
    (:func:`~sds_core.evaluation.agreement.length_keys`: sorted keys and narrow counts, each
    length freed before the next, no (m, k) rows but the lookups'; records in partitions are
    counted where they are and only one length's summed keys come here): the same numbers as
    from ``exact_aggregates`` of both.

    Length 1 goes first: no combination is more frequent than each of its attributes, so its
    largest count is every length's (the comparison's count bins need it up front).
    ``kept``: the sensitive records' counts of :func:`compare_dp_by_length`, if it kept them.
    """
    if isinstance(synthetic, PreparedTable):
        require(
            synthetic.n_records > 0, "the table is empty: aggregation needs at least one record"
        )
    R, domain = reporting_length, synthetic.domain
    s_base, base = max(sensitive.domain.n_attributes, 1), max(domain.n_attributes, 1)
    compared: AggregateComparison | None = None
    risks: list[LengthRisk] = []
    for k in range(1, R + 1):
        keys, counts = _counted(synthetic, k, base)
        if compared is None:  # length 1: at most one combination per attribute
            top = int(counts.max(initial=0))
            compared = AggregateComparison(sensitive.domain, R, domain, resolution, top)
        # the sensitive length before the records' risk rows: its arrival (the received
        # frames and their aligned copy) meets one length's keys, not those rows too
        s_keys, s_counts = _counted(sensitive, k, s_base, kept)
        s_keys = _in_key_space(compared, s_keys, s_base, k, target=False)
        risks.append(_length_risk(k, keys, counts, base, resolution, domain.n_columns))
        t_keys = _in_key_space(compared, keys, base, k, target=True)
        del keys
        compared.add_length(k, s_keys, s_counts, t_keys, counts)
        del s_keys, s_counts, t_keys, counts
    invariant(compared is not None, "no length compared")
    assert compared is not None  # for mypy: the invariant above
    return (
        compared.result(sensitive.n_records, synthetic.n_records),
        risk_lookups_of(resolution, risks),
    )


def _rows(
    keys: NDArray[np.int64], mask: NDArray[np.bool_], base: int, k: int
) -> NDArray[np.integer]:
    """The attribute rows of the masked :func:`~sds_core.marginals.aggregates.encode_keys`
    keys (ids below ``base``) in the smallest integer type, :data:`KEY_BLOCK` keys at a time."""
    dtype = np.int16 if base <= 1 << 15 else np.int32
    out = np.empty((int(mask.sum()), k), dtype=dtype)
    at = 0
    for start in range(0, keys.shape[0], KEY_BLOCK):
        block = keys[start : start + KEY_BLOCK][mask[start : start + KEY_BLOCK]]
        out[at : at + block.shape[0]] = decode_keys(block, base, k)
        at += block.shape[0]
    return out


def _in_key_space(
    compared: AggregateComparison, keys: NDArray[np.int64], base: int, k: int, *, target: bool
) -> NDArray[np.int64]:
    """Combinations given as :func:`~sds_core.marginals.aggregates.encode_keys` keys of radix
    ``base`` in the comparison's key space (:meth:`AggregateComparison.target_keys` or
    :meth:`AggregateComparison.sensitive_keys`): the same keys when the radix is the same and
    the ids are not mapped, else converted :data:`KEY_BLOCK` keys at a time."""
    if base == compared.base and (compared.t_map is None or not target):
        return keys
    convert = compared.target_keys if target else compared.sensitive_keys
    out = np.empty(keys.shape[0], dtype=np.int64)
    for start in range(0, keys.shape[0], KEY_BLOCK):
        out[start : start + KEY_BLOCK] = convert(
            decode_keys(keys[start : start + KEY_BLOCK], base, k)
        )
    return out


def _fidelity(
    sensitive: PreparedTable | Partitions, synthetic: PreparedTable | Partitions, order: int
) -> dict[str, Any]:
    """The marginal fidelity of the synthetic records against the sensitive ones: of two
    tables here in one compiled pass per marginal over both
    (:func:`~sds_core.evaluation.metrics.marginal_fidelity`; 100k PUMS rows: 0.2-0.6 s
    where their cells take 2.3-2.5 s), else from both sides' marginal cells summed where they
    are (:mod:`sds_core.evaluation.cells`). The same numbers either way (the same dict:
    :func:`~sds_core.evaluation.metrics.fidelity_summary` writes it)."""
    if isinstance(sensitive, PreparedTable) and isinstance(synthetic, PreparedTable):
        return marginal_fidelity(sensitive, synthetic, max_order=order)
    s_parts, parts = as_partitions(sensitive), as_partitions(synthetic)
    domain = sensitive.domain
    top = min(order, domain.n_columns)
    cards, mappings = fidelity_mappings(domain, parts.domain)
    cells = s_parts.map_reduce(partition_marginals, add_cells, cards=cards, max_order=top)
    synth_cells: Mapping[tuple[int, ...], tuple[NDArray[np.integer], NDArray[np.integer]]]
    if isinstance(parts, RowSlices):  # one marginal at a time, none summed over slices
        synth_cells = LocalCells(parts, mappings, cards, order)
    else:
        summed: Cells = parts.map_reduce(
            partition_fidelity_cells, add_cells, mappings=mappings, cards=cards, max_order=order
        )
        synth_cells = summed
    return fidelity_from_cells(
        domain, sensitive.n_records, cells, synthetic.n_records, synth_cells, cards, order
    )


def evaluate_release(
    sensitive: PreparedTable | Partitions,
    synthetic: PreparedTable | Partitions,
    dp_aggregates: AggregateSet,
    params: EvaluationParams = EvaluationParams(),
) -> dict[str, Any]:
    """The release's evaluation: the sensitive records against the DP aggregates and against
    the synthetic records (SDS's utility metrics), both sides' risk shares and the marginal
    fidelity. Either side is a table in this process or records in partitions (summed with
    ``map_reduce`` where they are, never brought here).

    Reads the sensitive data: the result is NOT differentially private (it contains the true
    record count through the record expansion). Both sides are counted one combination length
    at a time (records in partitions: their exact aggregates never exist whole here), their
    risk counts summed a slice at a time for a table here
    (:class:`~sds_core.evaluation.records.RowSlices`); the marginal fidelity as
    :func:`_fidelity` says.
    """
    R, k = params.reporting_length, params.resolution
    order = params.max_marginal_order
    n_records = sensitive.n_records
    s_parts, parts = as_partitions(sensitive), as_partitions(synthetic)
    # a table here is counted once for both comparisons (the memory of its exact aggregates'
    # keys, as a whole-table evaluation holds); records in partitions twice, the driver
    # holding one length of their sums at a time
    kept: Counted | None = {} if isinstance(sensitive, PreparedTable) else None
    # one metric at a time, each one's lookups, keys and cells freed before the next
    vs_dp, lookups = compare_dp_by_length(sensitive, dp_aggregates, R, k, kept=kept)
    unique, rare = s_parts.map_reduce(partition_risk, add_pairs, lookups=lookups)
    sensitive_risk = risk_summary(lookups, n_records, unique, rare)
    del lookups
    vs_synthetic, s_lookups = compare_by_length(sensitive, synthetic, R, k, kept=kept)
    del kept
    s_unique, s_rare = parts.map_reduce(partition_risk, add_pairs, lookups=s_lookups)
    synthetic_risk = risk_summary(s_lookups, parts.n_records, s_unique, s_rare)
    del s_lookups
    fidelity = _fidelity(sensitive, synthetic, order)
    return {
        "differentially_private": False,
        "note": NOT_DP_NOTE,
        "params": {"reporting_length": R, "resolution": k, "max_marginal_order": order},
        "sensitive_vs_dp_aggregates": vs_dp,
        "sensitive_vs_synthetic": vs_synthetic,
        "sensitive_risk": sensitive_risk,
        "synthetic_risk": synthetic_risk,
        "marginal_fidelity": fidelity,
    }
