"""The counting backend: the data work of DP aggregation, behind one small protocol.

:mod:`sds_core.marginals.engine` writes the DP logic once (percentile, σ, thresholds, noise) and
asks a :class:`CountingBackend` for the counts it needs: which attributes occur, each length's
bounded candidate counts, exact counts for evaluation. :class:`LocalBackend` runs today's kernels
in process (the default and the test oracle); a cluster backend
(``sds_release.store.cluster.backend``) maps the same per-partition functions
(:func:`partition_counts`, :func:`partition_dropped`) over record partitions and sums their results;
a Spark one would be one more module of that shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.errors import require
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from sds_core.marginals.candidates import CandidateSet
from sds_core.marginals.combinations import CliqueLookup, occurring_attributes
from sds_core.marginals.contributions import (
    candidate_counts,
    candidate_counts_many,
    dropped_contributions,
)
from sds_core.marginals.declared_tuples import reencode
from sds_core.marginals.exact_counts import DEFAULT_CHUNK_RECORDS, exact_aggregates

ChooseAllowed = Callable[[NDArray[np.int64]], int]
"""The engine's DP choice of Δ_k from the histogram of |W_{j,k}| (value v: #records with v)."""


@runtime_checkable
class CountingBackend(Protocol):
    """Where the sensitive records live and how they are counted.

    Every method returns sums over records (associative integer sums): the same integers
    whatever the partitioning. Exact values are sensitive: only the engine's DP steps read them.
    """

    @property
    def domain(self) -> Domain:
        """The domain the records are coded in."""
        ...

    @property
    def n_records(self) -> int:
        """The exact record count (sensitive)."""
        ...

    def occurring_attributes(self) -> NDArray[np.int32]:
        """V_1: global ids of the attributes present in at least one record, as (m, 1)."""
        ...

    def reencoded(self, domain: Domain) -> CountingBackend:
        """The same records re-coded into ``domain`` (:func:`reencode`), lazily or not."""
        ...

    def bounded_counts(
        self,
        candidates: CandidateSet,
        *,
        choose_allowed: ChooseAllowed,
        record_key: int,
    ) -> tuple[NDArray[np.int64], int]:
        """Each candidate's count after contribution bounding (in ``candidates.attrs`` order,
        a new writable array the caller may change: the engine adds its noise in place), and
        the Δ_k used.

        Builds the candidates' lookups where the records are (from the recipe), counts the
        candidates and every record's |W_{j,k}|, calls ``choose_allowed`` exactly
        once with the global histogram of |W_{j,k}|, then drops the tuples of the records above
        Δ_k not in their :func:`~sds_core.marginals.contributions.record_priorities` subset.
        Δ_k = 0 returns all-zero counts (nothing can be released).
        """
        ...

    def exact_aggregates(self, reporting_length: int) -> AggregateSet:
        """Exact counts of every combination of length 1..R (sensitive, ``is_dp=False``)."""
        ...


# ---------------------------------------------------------------- per-partition work (map side)
def partition_counts(
    table: PreparedTable, lookups: list[CliqueLookup], n_cands: int, chunk: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int32]]:
    """One partition's candidate counts, histogram of |W_{j,k}| and |W_{j,k}| per record."""
    counts, valid = candidate_counts(table.codes, lookups, n_cands, chunk)
    return counts, np.bincount(valid).astype(np.int64), valid


def partition_dropped(
    table: PreparedTable,
    valid: NDArray[np.int32],
    lookups: list[CliqueLookup],
    n_cands: int,
    allowed: int,
    *,
    record_key: int,
    first_row: int,
    chunk: int,
) -> NDArray[np.int64]:
    """One partition's drop of each candidate count under Δ_k (rows keyed from ``first_row``)."""
    return dropped_contributions(
        table.codes,
        valid,
        lookups,
        n_cands,
        allowed,
        record_key=record_key,
        first_row=first_row,
        chunk=chunk,
    )


def add_histograms(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
    """Sum of two histograms of different lengths (reduce side).

    >>> add_histograms(np.array([1, 2]), np.array([0, 0, 5])).tolist()
    [1, 2, 5]
    """
    out = np.zeros(max(a.shape[0], b.shape[0]), dtype=np.int64)
    out[: a.shape[0]] += a
    out[: b.shape[0]] += b
    return out


def add_aggregates(a: AggregateSet, b: AggregateSet) -> AggregateSet:
    """Exact aggregates of two disjoint record sets in one domain, summed (reduce side)."""
    require(a.domain == b.domain, "add_aggregates: both sets must be in one domain")
    by_len = {}
    for k in range(1, a.reporting_length + 1):
        ca, cb = a.counts_of(k), b.counts_of(k)
        attrs = np.concatenate([ca.attrs, cb.attrs])
        counts = np.concatenate([ca.counts, cb.counts])
        if attrs.shape[0] == 0:
            by_len[k] = CombinationCounts.empty(k)
            continue
        uniq, inverse = np.unique(attrs, axis=0, return_inverse=True)
        summed = np.zeros(uniq.shape[0], dtype=np.int64)
        np.add.at(summed, inverse.ravel(), counts)
        by_len[k] = CombinationCounts.from_unsorted(uniq, summed)
    return AggregateSet(a.domain, a.reporting_length, by_len, None, is_dp=False)


# ---------------------------------------------------------------- the local implementation
@dataclass(frozen=True, eq=False)
class LocalBackend:
    """The records in this process (:class:`PreparedTable`), counted by the compiled kernels.

    Args:
        table: the sensitive prepared table.
        chunk_records: records per batch (memory bound; never changes a result).
        first_row: global row number of ``table``'s first record (0 unless it is one
            partition of a bigger table; keys the per-record randomness).
    """

    table: PreparedTable
    chunk_records: int = DEFAULT_CHUNK_RECORDS
    first_row: int = 0

    @property
    def domain(self) -> Domain:
        """The table's domain."""
        return self.table.domain

    @property
    def n_records(self) -> int:
        """The exact record count (sensitive)."""
        return self.table.n_records

    def occurring_attributes(self) -> NDArray[np.int32]:
        """V_1 (:func:`sds_core.marginals.combinations.occurring_attributes`)."""
        return occurring_attributes(self.table.domain, self.table.codes)

    def reencoded(self, domain: Domain) -> LocalBackend:
        """The table re-coded into ``domain``."""
        return LocalBackend(reencode(self.table, domain), self.chunk_records, self.first_row)

    def bounded_counts(
        self,
        candidates: CandidateSet,
        *,
        choose_allowed: ChooseAllowed,
        record_key: int,
    ) -> tuple[NDArray[np.int64], int]:
        """See :meth:`CountingBackend.bounded_counts`."""
        n_cands = candidates.attrs.shape[0]  # V_k built once, here, and kept for the engine
        lookups = candidates.lookups(self.table.n_records)
        counts, hist, valid = partition_counts(self.table, lookups, n_cands, self.chunk_records)
        allowed = int(choose_allowed(hist))
        if allowed == 0:
            return np.zeros(n_cands, dtype=np.int64), 0
        if hist.shape[0] > allowed + 1:
            counts -= partition_dropped(
                self.table,
                valid,
                lookups,
                n_cands,
                allowed,
                record_key=record_key,
                first_row=self.first_row,
                chunk=self.chunk_records,
            )
        return counts, allowed

    def exact_aggregates(self, reporting_length: int) -> AggregateSet:
        """:func:`sds_core.marginals.exact_counts.exact_aggregates` of the table."""
        return exact_aggregates(self.table, reporting_length, chunk_records=self.chunk_records)


def as_backend(
    data: PreparedTable | CountingBackend, chunk_records: int = DEFAULT_CHUNK_RECORDS
) -> CountingBackend:
    """A :class:`LocalBackend` for a table; a backend as is."""
    if isinstance(data, PreparedTable):
        return LocalBackend(data, chunk_records)
    return data


# ---------------------------------------------------------------- helpers for cluster backends
def partition_presence(table: PreparedTable) -> NDArray[np.bool_]:
    """Which global attribute ids occur in one partition (reduce with ``|``)."""
    present = np.zeros(table.domain.n_attributes, dtype=bool)
    present[occurring_attributes(table.domain, table.codes).ravel()] = True
    return present


def group_presence(*tables: PreparedTable) -> NDArray[np.bool_]:
    """:func:`partition_presence` of several partitions (those one worker holds), OR-ed."""
    present = partition_presence(tables[0])
    for table in tables[1:]:
        present |= partition_presence(table)
    return present


def either(a: NDArray[np.bool_], b: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """``a | b`` (a reduce step)."""
    return a | b


class SparseCounts(NamedTuple):
    """A mostly-zero count vector as its nonzero ``at`` (ascending) and ``values``: what a
    partition ships to the reduce (a length's candidates can be many more than a partition's
    distinct combinations)."""

    size: int
    at: NDArray[np.int64]
    values: NDArray[np.int64]

    def dense(self) -> NDArray[np.int64]:
        """The full vector."""
        out = np.zeros(self.size, dtype=np.int64)
        out[self.at] = self.values
        return out


Counts = NDArray[np.int64] | SparseCounts
"""A count vector, dense or sparse (:func:`compact`); reduce with :func:`add_counts`."""


def compact(counts: NDArray[np.int64]) -> Counts:
    """The vector, sparse when at most a quarter of it is nonzero.

    >>> c = compact(np.array([0, 0, 3, 0, 0, 0, 0, 1]))
    >>> c.at.tolist(), c.values.tolist()
    ([2, 7], [3, 1])
    """
    index = np.flatnonzero(counts)
    if 4 * index.shape[0] > counts.shape[0]:
        return counts
    return SparseCounts(int(counts.shape[0]), index.astype(np.int64), counts[index])


def dense(counts: Counts) -> NDArray[np.int64]:
    """The full vector of dense or sparse counts."""
    return counts.dense() if isinstance(counts, SparseCounts) else counts


def add_counts(a: Counts, b: Counts) -> Counts:
    """``a + b`` (a reduce step), staying sparse while the sum is sparse.

    >>> add_counts(compact(np.array([0, 0, 0, 0, 2, 0, 0, 0])), np.arange(8)).tolist()
    [0, 1, 2, 3, 6, 5, 6, 7]
    """
    if isinstance(a, SparseCounts) and isinstance(b, SparseCounts):
        if 4 * (a.at.shape[0] + b.at.shape[0]) <= a.size:
            index = np.concatenate([a.at, b.at])
            values = np.concatenate([a.values, b.values])
            order = np.argsort(index, kind="stable")
            index, values = index[order], values[order]
            starts = np.flatnonzero(np.concatenate(([True], index[1:] != index[:-1])))
            return SparseCounts(a.size, index[starts], np.add.reduceat(values, starts))
    if isinstance(a, SparseCounts):
        a, b = b, a
    out = a.copy() if not isinstance(a, SparseCounts) else a.dense()
    if isinstance(b, SparseCounts):
        out[b.at] += b.values
    else:
        out += b
    return out


def subtract_counts(out: NDArray[np.int64], counts: Counts) -> None:
    """``out -= counts`` in place, dense or sparse (no dense copy of sparse counts).

    >>> out = np.arange(6)
    >>> subtract_counts(out, compact(np.array([0, 0, 0, 0, 2, 0])))
    >>> out.tolist()
    [0, 1, 2, 3, 2, 5]
    """
    if isinstance(counts, SparseCounts):
        out[counts.at] -= counts.values  # ``at`` is unique: one subtraction per index
    else:
        out -= counts


def add_count_pairs(
    a: tuple[Counts, NDArray[np.int64]], b: tuple[Counts, NDArray[np.int64]]
) -> tuple[Counts, NDArray[np.int64]]:
    """(counts, histogram) of two partitions summed (a reduce step)."""
    return add_counts(a[0], b[0]), add_histograms(a[1], b[1])


class GroupCounted(NamedTuple):
    """One group's (one worker's partitions) counting of a length, kept on its worker: the
    lookups it built, |V_k|, compacted counts, histogram of |W|, |W| of each partition."""

    lookups: list[CliqueLookup]
    n_cands: int
    counts: Counts
    histogram: NDArray[np.int64]
    valid: list[NDArray[np.int32]]


def group_counts(
    candidates: CandidateSet, n_records: int, chunk: int, *tables: PreparedTable
) -> GroupCounted:
    """:func:`partition_counts` of several partitions (those one worker holds) into one count
    vector, the lookups built here from the recipe (sized for the group's ``n_records``):
    the per-candidate work is paid once per group, not once per partition."""
    lookups = candidates.lookups(n_records)
    n_cands = sum(int(lk.rows.shape[0]) for lk in lookups)
    counts, valids = candidate_counts_many([t.codes for t in tables], lookups, n_cands, chunk)
    hist = np.zeros(0, dtype=np.int64)
    for valid in valids:
        hist = add_histograms(hist, np.bincount(valid).astype(np.int64))
    return GroupCounted(lookups, n_cands, compact(counts), hist, valids)


def group_reducible(counted: GroupCounted) -> tuple[Counts, NDArray[np.int64]]:
    """The reducible part of :func:`group_counts` (the rest stays on the worker)."""
    return counted.counts, counted.histogram


def group_dropped(
    counted: GroupCounted,
    first_rows: list[int],
    allowed: int,
    record_key: int,
    chunk: int,
    *tables: PreparedTable,
) -> Counts:
    """The drops of a group's partitions (each keyed from its own first row), summed."""
    out = np.zeros(counted.n_cands, dtype=np.int64)
    for table, valid, first in zip(tables, counted.valid, first_rows, strict=True):
        out += partition_dropped(
            table,
            valid,
            counted.lookups,
            counted.n_cands,
            allowed,
            record_key=record_key,
            first_row=first,
            chunk=chunk,
        )
    return compact(out)


def partition_exact(table: PreparedTable, reporting_length: int, chunk: int) -> AggregateSet:
    """One partition's exact aggregates (reduce with :func:`add_aggregates`)."""
    return exact_aggregates(table, reporting_length, chunk_records=chunk)


def partition_size(table: PreparedTable) -> int:
    """The number of records of one partition (sensitive)."""
    return table.n_records
