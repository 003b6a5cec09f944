"""A cluster table: prepared records held by the Dask workers as partitions, in row order.

The Dask executor's records, sensitive or synthetic: the prepared input
(:mod:`sds_release.store.cluster.preparation`), the synthetic records in the chunks the published
files are cut into (:mod:`sds_release.store.cluster.synthesis`). Read by ``map_reduce`` (the
evaluation's and the agreement's sums, one task per worker over the partitions it holds), by
the counting backend (:class:`~sds_release.store.cluster.backend.DaskBackend`) and, one partition
at a time, by :meth:`ClusterTable.chunks` (the checkpoint, the published files).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sds_core.data.domain import Domain
from sds_core.data.partitions import concatenate
from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.errors import SdsInputError, SdsInternalError
from sds_release.store.cluster import reduction
from sds_release.store.cluster.reduction import DaskClusterError, lost

Groups = list[tuple[str, list[int]]]
"""Partitions by the worker holding them: (worker address, partition indices in order)."""


def _placed_groups(client: Any, parts: Sequence[Any]) -> Groups:
    """The partitions grouped by the worker holding them, asked of the scheduler (two round
    trips); a partition no worker holds yet, or lost, is in the group ``""``."""
    from distributed import wait

    try:
        # placed (read, prepared, re-coded) before asking where. `wait` waits on the
        # *current* client's loop, another client's when the caller holds one (`with
        # Client()` in a notebook or a test): waiting there binds this client's futures to
        # the wrong loop, and a lost partition's re-gather fails with a RuntimeError
        with client.as_current():
            wait(list(parts))  # type: ignore[no-untyped-call]
        held = client.who_has(list(parts))
    except Exception as e:
        if not lost(e):
            raise
        held = {}
    by_worker: dict[str, list[int]] = {}
    for i, part in enumerate(parts):
        workers = sorted(held.get(part.key, ()))
        by_worker.setdefault(workers[0] if workers else "", []).append(i)
    return sorted(by_worker.items(), key=lambda item: item[1][0])


class Placement:
    """Where the workers hold each set of partitions (:func:`_placed_groups`), asked of the
    scheduler once per set (keyed by the partitions' keys) instead of once per length.

    A mutable cache, so it lives outside the frozen :class:`ClusterTable` values: the Dask
    executor owns one for the release (:class:`~sds_release.store.cluster.executor.DaskExecutor`)
    and gives it to every table it makes. A stale entry (a worker lost since) only moves tasks;
    it never changes a result.
    """

    def __init__(self) -> None:
        self._groups: dict[tuple[str, ...], Groups] = {}

    def groups(self, client: Any, parts: Sequence[Any]) -> Groups:
        """The groups of ``parts``: asked once, then from the cache."""
        keys = tuple(str(part.key) for part in parts)
        cached = self._groups.get(keys)
        if cached is None:
            cached = self._groups[keys] = _placed_groups(client, parts)
        return cached


GROUP_RECORDS = 2_000_000
"""The most records one :meth:`ClusterTable.map_reduce` call concatenates (memory bound only)."""


@dataclass(frozen=True, eq=False)
class ClusterTable:
    """Prepared records as ``PreparedTable`` partitions (futures) on a Dask cluster.

    Args:
        client: a ``distributed.Client``.
        parts: futures of the partitions, in row order.
        first_rows: each partition's global row number of its first record.
        domain: the domain every partition is coded in.
        n_records: the total record count (sensitive for the input).
        multi_value_columns: the partitions' multi-value column declarations.
        placement: the release's :class:`Placement` (where the workers hold each set of
            partitions, asked once per set), shared by every table of the release; None: asked
            at every call. Not part of the value (never changes a result).
    """

    client: Any
    parts: tuple[Any, ...]
    first_rows: tuple[int, ...]
    domain: Domain
    n_records: int
    multi_value_columns: tuple[MultiValueColumn, ...] = ()
    placement: Placement | None = field(default=None, compare=False, repr=False)

    @classmethod
    def scatter(
        cls,
        client: Any,
        table: PreparedTable,
        bounds: Sequence[tuple[int, int]],
        *,
        placement: Placement | None = None,
    ) -> ClusterTable:
        """A table in this process sent to the workers as the partitions ``bounds`` cut (row
        ranges in order, covering the table), one partition at a time (a copy of its rows: the
        partition keeps nothing else of the table alive here)."""
        parts, first = [], []
        for lo, hi in bounds:
            piece = PreparedTable(
                table.domain, table.codes[lo:hi].copy(), table.multi_value_columns
            )
            [future] = client.scatter([piece], hash=False)
            parts.append(future)
            first.append(lo)
            del piece
        return cls(
            client,
            tuple(parts),
            tuple(first),
            table.domain,
            table.n_records,
            table.multi_value_columns,
            placement,
        )

    @classmethod
    def from_table(cls, client: Any, table: PreparedTable, n_partitions: int) -> ClusterTable:
        """An in-memory table split into ``n_partitions`` contiguous partitions of about the
        same size on the workers (:meth:`scatter`)."""
        if not isinstance(n_partitions, int) or n_partitions < 1:
            raise SdsInputError(f"n_partitions must be an integer >= 1, got {n_partitions!r}")
        cuts = np.linspace(0, table.n_records, n_partitions + 1).astype(int).tolist()
        return cls.scatter(client, table, list(itertools.pairwise(cuts)))

    def with_parts(
        self,
        parts: Sequence[Any],
        domain: Domain,
        multi_value_columns: tuple[MultiValueColumn, ...],
    ) -> ClusterTable:
        """The same rows in other partitions (one for each of these, in order), e.g. re-coded
        into ``domain``; the placement is kept."""
        return dataclasses.replace(
            self, parts=tuple(parts), domain=domain, multi_value_columns=multi_value_columns
        )

    def placed(self, placement: Placement) -> ClusterTable:
        """The same table asking ``placement`` where its partitions are."""
        if self.placement is placement:
            return self
        return dataclasses.replace(self, placement=placement)

    def groups(self) -> Groups:
        """The partitions grouped by the worker holding them (in partition order within a
        group): one task per worker; from the table's :class:`Placement` when it has one. A
        worker lost since then only moves its tasks (``allow_other_workers``). Grouping never
        changes a result."""
        if self.placement is not None:
            return self.placement.groups(self.client, self.parts)
        return _placed_groups(self.client, self.parts)

    def map_reduce(
        self, fn: Callable[..., Any], combine: Callable[[Any, Any], Any], /, **kwargs: Any
    ) -> Any:
        """``fn(records, **kwargs)`` over all partitions, combined pairwise on the workers
        (:class:`sds_core.evaluation.records.Partitions`): one task per worker over the
        partitions it holds, concatenated up to :data:`GROUP_RECORDS` records per call (``fn``
        must add up over any split of the records, as every evaluation sum does). The
        ``kwargs`` are sent to every worker once (scattered, not embedded in each task: the
        evaluation's risk lookups are as large as the rare combinations, 129 MiB pickled into
        the graph at a high-cardinality 2M release) and released when the sum is back.

        Scattered data has no lineage, and the scheduler keeps as few copies of it as its tasks
        need (distributed's active memory manager drops the broadcast's replicas): a worker that
        dies holding the last copy loses the ``kwargs``. The sum is then computed once more
        with the ``kwargs`` sent again (every ``fn`` here is an exact count: no draw, the same
        sum); a loss of partitions still raises.

        Raises:
            DaskClusterError: a worker died with partitions no task can recompute.
        """
        for attempt in (1, 2):
            shared = self.client.scatter([kwargs], broadcast=True, hash=False)[0]
            futures = [
                self.client.submit(
                    _apply_group,
                    fn,
                    combine,
                    shared,
                    *[self.parts[i] for i in idx],
                    workers=[worker] if worker else None,
                    allow_other_workers=True,
                )
                for worker, idx in self.groups()
            ]
            try:
                return reduction.tree_reduce(self.client, futures, combine, on_workers=True)
            except DaskClusterError:
                if attempt == 2 or shared.status == "finished":
                    raise  # the partitions were lost, not the kwargs
        raise SdsInternalError("map_reduce: no attempt returned (bug)")

    def chunks(self) -> Iterator[PreparedTable]:
        """The partitions in row order, brought to this process one at a time."""
        for part in self.parts:
            table: PreparedTable = part.result()
            yield table

    def gathered(self) -> PreparedTable:
        """The whole table in this process (a registry synthesizer fits the whole table; the
        SDS stages never need this)."""
        return concatenate(self.client.gather(list(self.parts)))


def _apply_group(
    fn: Callable[..., Any],
    combine: Callable[[Any, Any], Any],
    kwargs: dict[str, Any],
    *parts: PreparedTable,
) -> Any:
    """On a worker: ``fn`` over its partitions in runs of up to GROUP_RECORDS records."""
    result, run, size = None, [], 0
    for i, part in enumerate(parts):
        run.append(part)
        size += part.n_records
        if size >= GROUP_RECORDS or i == len(parts) - 1:
            value = fn(concatenate(run) if len(run) > 1 else run[0], **kwargs)
            result = value if result is None else combine(result, value)
            run, size = [], 0
    return result
