"""The Dask counting backend: the DP engine's data work on a cluster table's partitions.

Implements :class:`sds_core.marginals.backend.CountingBackend` over the partitions of a
:class:`~sds_release.store.cluster.table.ClusterTable`: every method maps the same per-partition
functions as the local backend (``sds_core.marginals.backend.group_*``), tree-reduces the
integer sums, and hands the global sums to the engine, which draws every DP choice and all
noise once, on the driver. Workers import only ``sds_core`` (never Prefect).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.marginals import backend as core
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.candidates import CandidateSet
from sds_core.marginals.declared_tuples import reencode
from sds_core.marginals.exact_counts import DEFAULT_CHUNK_RECORDS
from sds_release.store.cluster import reduction
from sds_release.store.cluster.table import ClusterTable, Groups

LOOKUP_RECORDS = 1_000_000
"""The most records a worker's candidate lookups are sized for (dense tables up to 16 entries
a record, :func:`~sds_core.marginals.combinations.use_dense`): counting a group's distinct
rows does not repay bigger tables (10M rows, 5M a worker, length 3: 0.9 s to build and count
sized for 1M, 1.1-1.3 s for 5M with twice the memory). Never changes a count."""


@dataclass(frozen=True, eq=False)
class DaskBackend:
    """The counting backend of a :class:`~sds_release.store.cluster.table.ClusterTable`.

    Args:
        table: the records, partitions on the workers.
        chunk_records: records per batch inside a partition (memory bound only).
        group_records: the fewest records worth a counting group of their own (one task per
            worker holding partitions, fewer when each would count less: ``_fewer_groups``).
    """

    table: ClusterTable
    chunk_records: int = DEFAULT_CHUNK_RECORDS
    group_records: int = LOOKUP_RECORDS

    @property
    def domain(self) -> Domain:
        """The partitions' domain."""
        return self.table.domain

    @property
    def n_records(self) -> int:
        """The exact record count (sensitive)."""
        return self.table.n_records

    def occurring_attributes(self) -> NDArray[np.int32]:
        """V_1: presence per worker (over the partitions it holds), OR-reduced."""
        futures = [
            self.table.client.submit(
                core.group_presence,
                *[self.table.parts[i] for i in idx],
                workers=[worker] if worker else None,
                allow_other_workers=True,
            )
            for worker, idx in self.table.groups()
        ]
        present = reduction.tree_reduce(self.table.client, futures, core.either)
        return np.flatnonzero(present).astype(np.int32).reshape(-1, 1)

    def reencoded(self, domain: Domain) -> DaskBackend:
        """Every partition re-coded into ``domain`` on its worker."""
        if domain == self.table.domain:
            return self
        parts = self.table.client.map(reencode, self.table.parts, domain=domain)
        return dataclasses.replace(self, table=self.table.with_parts(parts, domain, ()))

    def bounded_counts(
        self,
        candidates: CandidateSet,
        *,
        choose_allowed: core.ChooseAllowed,
        record_key: int,
    ) -> tuple[NDArray[np.int64], int]:
        """Map: each worker builds the length's lookups from the recipe (S_{k−1}, small) and
        counts its partitions: counts, |W| histogram (kept |W| per record on the workers);
        reduce; Δ_k chosen here once; map: drops of the over-limit records (keyed by global
        row); reduce. The driver builds V_k while the workers count."""
        table, chunk = self.table, self.chunk_records
        client = table.client
        sizes = np.diff([*table.first_rows, table.n_records])
        most = max(1, table.n_records // self.group_records)
        groups = _fewer_groups(table.groups(), sizes, most)
        counted = [
            client.submit(
                core.group_counts,
                candidates,
                min(int(sizes[idx].sum()), LOOKUP_RECORDS),  # one set counts the whole group
                chunk,
                *[table.parts[i] for i in idx],
                workers=[worker] if worker else None,
                allow_other_workers=True,
                pure=False,
            )
            for worker, idx in groups
        ]
        # combined on the workers down to one: the driver receives the sum only, never both
        # halves and the combine's copy (three count vectors of |V_k| at once)
        summed_futures = reduction.tree(
            client, client.map(core.group_reducible, counted), core.add_count_pairs, down_to=1
        )
        n_cands = candidates.size  # |V_k| from the join (not V_k), made while the workers count
        summed, hist = reduction.result(client, summed_futures, core.add_count_pairs)
        counts = core.dense(summed)
        del summed
        if not counts.flags.writeable:  # received read-only: the engine adds noise in place
            counts = counts.copy()
        allowed = int(choose_allowed(hist))
        if allowed == 0:
            return np.zeros(n_cands, dtype=np.int64), 0
        if hist.shape[0] > allowed + 1:
            dropped = [
                client.submit(
                    core.group_dropped,
                    group_counted,
                    [table.first_rows[i] for i in idx],
                    allowed,
                    record_key,
                    chunk,
                    *[table.parts[i] for i in idx],
                    workers=[worker] if worker else None,
                    allow_other_workers=True,
                )
                for group_counted, (worker, idx) in zip(counted, groups, strict=True)
            ]
            core.subtract_counts(
                counts, reduction.tree_reduce(client, dropped, core.add_counts, on_workers=True)
            )
        return counts, allowed

    def exact_aggregates(self, reporting_length: int) -> AggregateSet:
        """Exact aggregates per partition, summed."""
        parts = self.table.client.map(
            core.partition_exact,
            self.table.parts,
            reporting_length=reporting_length,
            chunk=self.chunk_records,
        )
        summed: AggregateSet = reduction.tree_reduce(
            self.table.client, parts, core.add_aggregates, on_workers=True
        )
        return summed


def _fewer_groups(groups: Groups, sizes: NDArray[np.int64], most: int) -> Groups:
    """At most ``most`` counting groups: the smallest groups' partitions join the smallest of
    the largest ``most`` (fetched by that worker). Each group builds the length's lookups
    once, which costs about what counting 1M rows does (:data:`LOOKUP_RECORDS`): below that
    per group, a second worker adds more building than it saves counting. Never changes a
    result (every sum is over all partitions, each keyed by its own first row)."""
    if len(groups) <= most:
        return groups
    load = [(int(sizes[idx].sum()), worker, list(idx)) for worker, idx in groups]
    load.sort(key=lambda g: -g[0])
    kept, rest = load[:most], load[most:]
    for records, _, idx in rest:
        smallest = min(range(len(kept)), key=lambda i: kept[i][0])
        total, worker, own = kept[smallest]
        kept[smallest] = (total + records, worker, sorted(own + idx))
    return sorted(((w, idx) for _, w, idx in kept), key=lambda g: g[1][0])
