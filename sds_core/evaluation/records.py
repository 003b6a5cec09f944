"""Records wherever they are, as the evaluation reads them: in partitions summed with
``map_reduce`` (:class:`Partitions`: a cluster's table), or a table in this process read in
slices (:class:`RowSlices`: a local table is the same thing, one process holding it).

Every evaluation sum is an integer that adds up over any split of the records, so the release
evaluation (:mod:`sds_core.evaluation.release`) has one implementation for both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.errors import require

T = TypeVar("T")

SLICE_ROWS = 1 << 18
"""Records of a table in this process summed at a time (:class:`RowSlices`): the sums are the
same integers whatever the slice, and the memory they take follows the slice, not the table."""


class Partitions(Protocol):
    """Records held in partitions: their domain and count and ``map_reduce`` over them
    (``fn(partition, **kwargs)`` on every partition, a ``PreparedTable``, the results combined
    pairwise in any order): a cluster's table, e.g.
    ``sds_release.store.cluster.table.ClusterTable``, or :class:`RowSlices`."""

    @property
    def domain(self) -> Domain: ...

    @property
    def n_records(self) -> int: ...

    def map_reduce(
        self, fn: Callable[..., T], combine: Callable[[T, T], T], /, **kwargs: Any
    ) -> T: ...


@dataclass(frozen=True, slots=True, eq=False)
class RowSlices:
    """A table in this process as :class:`Partitions` whose partitions are its slices of
    ``rows`` records (how the release evaluation sums a local table: the partitions' one path,
    at the memory of one slice)."""

    table: PreparedTable
    rows: int = SLICE_ROWS

    def __post_init__(self) -> None:
        require(self.rows >= 1, f"a slice needs at least one record, got rows={self.rows!r}")

    @property
    def domain(self) -> Domain:
        """The table's domain."""
        return self.table.domain

    @property
    def n_records(self) -> int:
        """The table's record count."""
        return self.table.n_records

    def slices(self) -> Iterator[PreparedTable]:
        """The table's consecutive slices of ``rows`` records (views; one slice if it has none)."""
        t = self.table
        for start in range(0, max(t.n_records, 1), self.rows):
            codes = t.codes[start : start + self.rows]
            yield PreparedTable(t.domain, codes, t.multi_value_columns)

    def map_reduce(self, fn: Callable[..., T], combine: Callable[[T, T], T], /, **kwargs: Any) -> T:
        """``fn`` of every slice, combined in order."""
        return functools.reduce(combine, (fn(part, **kwargs) for part in self.slices()))


def as_partitions(records: PreparedTable | Partitions) -> Partitions:
    """Records as :class:`Partitions`: a table in this process in its slices, else as given."""
    return RowSlices(records) if isinstance(records, PreparedTable) else records
