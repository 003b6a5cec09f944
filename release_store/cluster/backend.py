"""The Dask counting backend: the DP engine's data work on a ``distributed`` cluster.

Implements :class:`sds_core.marginals.backend.CountingBackend` over record partitions held by
the workers: every method maps the same per-partition functions as the local backend
(``sds_core.marginals.backend.partition_*``), tree-reduces the integer sums, and hands the global
sums to the engine, which draws every DP choice and all noise once, on the driver. Workers import
only ``sds_core`` (never Prefect). A Spark backend would be one more module of this shape.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.data.params import PrepareParams
from sds_core.data.partitions import (
    PartDomain,
    align,
    concatenate,
    merged_domain,
    partition_layout,
    prepare_partition,
)
from sds_core.data.preparation import match_key
from sds_core.data.readers import cell_text
from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.data.text import matching_column
from sds_core.errors import SdsInputError, SdsInternalError
from sds_core.marginals import backend as core
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.candidates import CandidateSet
from sds_core.marginals.declared_tuples import reencode
from sds_core.marginals.exact_counts import DEFAULT_CHUNK_RECORDS


class DaskClusterError(RuntimeError):
    """The cluster lost data it cannot recompute (a worker died holding partitions that were
    sent from this process), or went away."""


def _lost(e: BaseException) -> bool:
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker

    return isinstance(e, FutureCancelledError | KilledWorker) or type(e).__name__ in (
        "CancelledError",
        "FuturesCancelledError",
        "CommClosedError",
    )


def _tree(
    client: Any, futures: list[Any], combine: Callable[[Any, Any], Any], *, down_to: int = 2
) -> list[Any]:
    """Partition results combined pairwise on the workers down to two (or one): the last
    combine runs on the driver, which receives both at once instead of one more hop. With
    ``down_to=1`` every combine runs on the workers and the driver receives the sum alone (the
    same value: the same pairs combined in the same order), never both halves and the
    combine's temporaries."""
    while len(futures) > down_to:
        merged = [
            client.submit(combine, futures[i], futures[i + 1])
            for i in range(0, len(futures) - 1, 2)
        ]
        if len(futures) % 2:
            merged.append(futures[-1])
        futures = merged
    return futures


def _result(client: Any, futures: list[Any], combine: Callable[[Any, Any], Any]) -> Any:
    """The combined value of :func:`_tree`'s futures.

    Raises:
        DaskClusterError: a worker died with partitions no task can recompute, or the cluster
            had no running worker for :data:`NO_WORKER_TIMEOUT_S` (nothing can compute them).
    """
    try:
        values = _gather(client, futures)
    except DaskClusterError:
        raise
    except Exception as e:
        if not _lost(e):
            raise
        raise DaskClusterError(
            f"the Dask cluster lost data it cannot recompute ({type(e).__name__}: {e}): a "
            "worker died holding record partitions sent from this process. Nothing more is "
            "drawn or charged for this stage; run `sds resume RELEASE_ID` (the stage re-runs "
            "from the checkpoints with the same key), or read the input from Parquet files "
            "so that lost partitions are re-read"
        ) from e
    return values[0] if len(values) == 1 else combine(values[0], values[1])


NO_WORKER_TIMEOUT_S = 120.0
"""How long a reduction waits while the scheduler has no running worker (or does not answer)
before the stage fails with :class:`DaskClusterError`: lost results are recomputed only by
workers, and a cluster whose workers all died (a nanny that could not restart its worker, a
batch job that ended) would otherwise keep the release waiting forever. Long enough for a nanny
or an adaptive cluster to bring a worker back. ``SDS_DASK_NO_WORKER_TIMEOUT_S`` overrides it."""
NO_WORKER_TIMEOUT_ENV = "SDS_DASK_NO_WORKER_TIMEOUT_S"
_CHECK_S = 5.0


def _gather(client: Any, futures: list[Any]) -> list[Any]:
    """``client.gather(futures)``, watched: every few seconds while it waits, the scheduler is
    asked how many workers run; none (or no answer) for :data:`NO_WORKER_TIMEOUT_S` in a row
    ends the wait. Any number of workers dying and coming back is waited for (their lost
    results are recomputed), as long as one runs.

    Raises:
        DaskClusterError: no running worker for that long; nothing more is drawn or charged.
        Exception: what the gather raises (a lost, cancelled or failed task).
    """
    import asyncio
    import time
    from concurrent.futures import TimeoutError as WaitTimeout

    limit = float(os.environ.get(NO_WORKER_TIMEOUT_ENV) or NO_WORKER_TIMEOUT_S)
    pending = asyncio.run_coroutine_threadsafe(
        client.gather(futures, asynchronous=True), client.loop.asyncio_loop
    )
    idle_since: float | None = None
    while True:
        try:
            values: list[Any] = pending.result(timeout=_CHECK_S)
            return values
        except WaitTimeout:
            pass
        try:
            running = len(client.sync(client.scheduler.ncores_running, callback_timeout=_CHECK_S))
        except Exception:  # the scheduler does not answer: no worker we can count on either
            running = 0
        now = time.monotonic()
        idle_since = None if running else (idle_since or now)
        if idle_since is not None and now - idle_since >= limit:
            pending.cancel()
            raise DaskClusterError(
                f"the Dask cluster has had no running worker for {limit:.0f} s while this "
                "stage waited for results its workers lost (workers that died were not "
                f"replaced, or the scheduler at {client.scheduler.address} stopped answering). "
                "Nothing more is drawn or charged for this stage; start workers (`dask worker "
                "SCHEDULER_ADDRESS`) and run `sds resume RELEASE_ID`: the stage re-runs from the "
                "checkpoints with the same key"
            )


def _tree_reduce(
    client: Any,
    futures: list[Any],
    combine: Callable[[Any, Any], Any],
    *,
    on_workers: bool = False,
) -> Any:
    """Combine partition results pairwise (:func:`_tree`); gather the result. ``on_workers``:
    the last combine too (results as large as the data's combinations: the evaluation's).

    Raises:
        DaskClusterError: a worker died with partitions no task can recompute.
    """
    tree = _tree(client, futures, combine, down_to=1 if on_workers else 2)
    return _result(client, tree, combine)


LOOKUP_RECORDS = 1_000_000
"""The most records a worker's candidate lookups are sized for (dense tables up to 16 entries
a record, :func:`~sds_core.marginals.combinations.use_dense`): counting a group's distinct
rows does not repay bigger tables (10M rows, 5M a worker, length 3: 0.9 s to build and count
sized for 1M, 1.1-1.3 s for 5M with twice the memory). Never changes a count."""


def _placed_groups(client: Any, parts: Sequence[Any]) -> list[tuple[str, list[int]]]:
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
        if not _lost(e):
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

    A mutable cache, so it lives outside the frozen :class:`DaskBackend` values: the cluster
    session owns one (:mod:`release_store.cluster.session`) and hands it to every backend it
    serves. A stale entry (a worker lost since) only moves tasks; it never changes a result.
    """

    def __init__(self) -> None:
        self._groups: dict[tuple[str, ...], list[tuple[str, list[int]]]] = {}

    def groups(self, client: Any, parts: Sequence[Any]) -> list[tuple[str, list[int]]]:
        """The groups of ``parts``: asked once, then from the cache."""
        keys = tuple(str(part.key) for part in parts)
        cached = self._groups.get(keys)
        if cached is None:
            cached = self._groups[keys] = _placed_groups(client, parts)
        return cached


@dataclass(frozen=True, eq=False)
class DaskBackend:
    """Record partitions (``PreparedTable`` futures) on a Dask cluster.

    Args:
        client: a ``distributed.Client``.
        parts: futures of the partitions, in table order.
        first_rows: each partition's global row number of its first record.
        table_domain: the domain every partition is coded in.
        n: the total record count (sensitive).
        chunk_records: records per batch inside a partition (memory bound only).
        multi_value_columns: the partitions' multi-value column declarations (from a reader).
        group_records: the fewest records worth a counting group of their own (one task per
            worker holding partitions, fewer when each would count less: ``_fewer_groups``).
        placement: the cluster session's :class:`Placement` (where the workers hold each set
            of partitions, asked once per set, not per length), shared by every backend of the
            session; None: asked at every call. Not part of the value (never changes a result).
    """

    client: Any
    parts: tuple[Any, ...]
    first_rows: tuple[int, ...]
    table_domain: Domain
    n: int
    chunk_records: int = DEFAULT_CHUNK_RECORDS
    multi_value_columns: tuple[MultiValueColumn, ...] = ()
    group_records: int = LOOKUP_RECORDS
    placement: Placement | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_partitions(
        cls,
        client: Any,
        parts: Sequence[Any],
        domain: Domain,
        *,
        chunk_records: int = DEFAULT_CHUNK_RECORDS,
    ) -> DaskBackend:
        """From futures of ``PreparedTable`` partitions in table order (sizes counted once)."""
        parts = list(parts)
        sizes = client.gather(client.map(core.partition_size, parts))
        first = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist()
        return cls(
            client,
            tuple(parts),
            tuple(first),
            domain,
            int(sum(sizes)),
            chunk_records,
        )

    @classmethod
    def from_table(
        cls,
        client: Any,
        table: PreparedTable,
        n_partitions: int,
        *,
        chunk_records: int = DEFAULT_CHUNK_RECORDS,
    ) -> DaskBackend:
        """Split an in-memory table into ``n_partitions`` contiguous partitions on the workers."""
        if not isinstance(n_partitions, int) or n_partitions < 1:
            raise SdsInputError(f"n_partitions must be an integer >= 1, got {n_partitions!r}")
        bounds = np.linspace(0, table.n_records, n_partitions + 1).astype(int)
        pieces = [
            PreparedTable(table.domain, table.codes[lo:hi], table.multi_value_columns)
            for lo, hi in itertools.pairwise(bounds)
        ]
        parts = client.scatter(pieces, hash=False)
        backend = cls.from_partitions(client, parts, table.domain, chunk_records=chunk_records)
        return dataclasses.replace(backend, multi_value_columns=table.multi_value_columns)

    @classmethod
    def from_parquet(
        cls,
        client: Any,
        path: str | Sequence[str],
        params: PrepareParams,
        *,
        chunk_records: int = DEFAULT_CHUNK_RECORDS,
        blocksize: str | int | None = None,
    ) -> DaskBackend:
        """Read a Parquet dataset (a directory, a glob or a list of files) as Dask partitions
        and prepare it on the workers; the driver holds only labels and sums, never the table.

        The result equals :func:`sds_core.data.preparation.prepare` of the whole dataset (rows
        in file-name order), byte for byte: partitions are prepared alone, their labels merged
        (:mod:`sds_core.data.partitions`) and re-coded. With ``subject_id`` the rows are first
        shuffled by the subject key (sorted, so every subject meets in one partition and the
        subjects keep the order a local run gives them). ``record_limit`` keeps the first rows.
        """
        files = None if blocksize or params.subject_id is not None else _part_files(path)
        if files is not None:  # one read task per file, prepared where it was read
            raw = client.map(_read_parquet_file, [str(f) for f in files], pure=False)
            rows = _parquet_rows(files) if params.record_limit else [0] * len(files)
            return cls.from_arrow_parts(
                client,
                raw,
                rows,
                params,
                what=f"the Parquet dataset {path!r}",
                chunk_records=chunk_records,
            )
        import dask.dataframe as dd

        spec = path if isinstance(path, str) else list(path)
        ddf = dd.read_parquet(spec, blocksize=blocksize) if blocksize else dd.read_parquet(spec)
        return cls.from_frame(client, ddf, params, what=f"the Parquet dataset {path!r}")

    @classmethod
    def from_frame(
        cls,
        client: Any,
        ddf: Any,
        params: PrepareParams,
        *,
        what: str = "the input",
        chunk_records: int = DEFAULT_CHUNK_RECORDS,
    ) -> DaskBackend:
        """A Dask DataFrame prepared on the workers (see :meth:`from_parquet`)."""
        from dask.delayed import delayed

        if params.record_limit:
            ddf = _head(client, ddf, int(params.record_limit))
        if params.subject_id is not None:
            name = matching_column(list(ddf.columns), params.subject_id)
            ddf = ddf.assign(_sds_subject_key=ddf[name].map(_subject_key, meta=(name, "str")))
            ddf = ddf.set_index("_sds_subject_key", drop=True, sort=True)
        delayed_parts = ddf.to_delayed()
        layout = client.compute(delayed(partition_layout)(delayed_parts[0], params))
        prepared = client.compute([delayed(prepare_partition)(d, params) for d in delayed_parts])
        return cls._merged(client, prepared, layout, params, what, chunk_records)

    @classmethod
    def from_arrow_parts(
        cls,
        client: Any,
        parts: Sequence[Any],
        rows: Sequence[int],
        params: PrepareParams,
        *,
        what: str = "the input",
        chunk_records: int = DEFAULT_CHUNK_RECORDS,
    ) -> DaskBackend:
        """Futures of Arrow tables (the input's parts in row order, ``rows`` each) prepared on
        the workers, as :meth:`from_parquet` prepares its partitions (no ``subject_id``: use
        :meth:`from_frame`, which shuffles). ``record_limit`` keeps the first rows."""
        if params.subject_id is not None:
            raise SdsInputError("from_arrow_parts cannot group by subject_id; use from_frame")
        parts, left = list(parts), params.record_limit
        if left:
            kept = []
            for part, n in zip(parts, rows, strict=True):
                if left <= 0:
                    break
                kept.append(part if n <= left else client.submit(_first_rows, part, left))
                left -= n
            parts = kept
        layout = client.submit(partition_layout, parts[0], params)
        prepared = client.map(prepare_partition, parts, params=params)
        return cls._merged(client, prepared, layout, params, what, chunk_records)

    @classmethod
    def _merged(
        cls,
        client: Any,
        prepared: list[Any],
        layout: Any,
        params: PrepareParams,
        what: str,
        chunk_records: int,
    ) -> DaskBackend:
        """Partitions prepared alone -> the global domain (labels only, here) -> re-coded.

        One round trip: the layout (a future) and every partition's labels and size are
        gathered together; a partition already in the merged domain is kept as it is."""
        layout, summaries = client.gather([layout, client.map(_part_summary, prepared)])
        kept = [i for i, (d, _) in enumerate(summaries) if d is not None]
        if not kept:
            raise SdsInputError(f"{what} has no rows")
        merged = merged_domain(
            layout,
            [summaries[i][0] for i in kept],
            allow_empty_columns=params.allow_empty_columns,
        )
        parts = [
            prepared[i] if summaries[i][0] == merged else client.submit(align, prepared[i], merged)
            for i in kept
        ]
        sizes = [summaries[i][1] for i in kept]
        first = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist()
        return cls(
            client,
            tuple(parts),
            tuple(first),
            merged[0],
            int(sum(sizes)),
            chunk_records,
            merged[1],
        )

    @property
    def domain(self) -> Domain:
        """The partitions' domain."""
        return self.table_domain

    @property
    def n_records(self) -> int:
        """The exact record count (sensitive)."""
        return self.n

    def occurring_attributes(self) -> NDArray[np.int32]:
        """V_1: presence per worker (over the partitions it holds), OR-reduced."""
        futures = [
            self.client.submit(
                core.group_presence,
                *[self.parts[i] for i in idx],
                workers=[worker] if worker else None,
                allow_other_workers=True,
            )
            for worker, idx in self._groups()
        ]
        present = _tree_reduce(self.client, futures, core.either)
        return np.flatnonzero(present).astype(np.int32).reshape(-1, 1)

    def reencoded(self, domain: Domain) -> DaskBackend:
        """Every partition re-coded into ``domain`` on its worker."""
        if domain == self.table_domain:
            return self
        parts = self.client.map(reencode, self.parts, domain=domain)
        return dataclasses.replace(
            self, parts=tuple(parts), table_domain=domain, multi_value_columns=()
        )

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
        client, chunk = self.client, self.chunk_records
        sizes = np.diff([*self.first_rows, self.n])
        groups = _fewer_groups(self._groups(), sizes, max(1, self.n // self.group_records))
        counted = [
            client.submit(
                core.group_counts,
                candidates,
                min(int(sizes[idx].sum()), LOOKUP_RECORDS),  # one set counts the whole group
                chunk,
                *[self.parts[i] for i in idx],
                workers=[worker] if worker else None,
                allow_other_workers=True,
                pure=False,
            )
            for worker, idx in groups
        ]
        # combined on the workers down to one: the driver receives the sum only, never both
        # halves and the combine's copy (three count vectors of |V_k| at once)
        summed_futures = _tree(
            client, client.map(core.group_reducible, counted), core.add_count_pairs, down_to=1
        )
        n_cands = candidates.size  # |V_k| from the join (not V_k), made while the workers count
        summed, hist = _result(client, summed_futures, core.add_count_pairs)
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
                    [self.first_rows[i] for i in idx],
                    allowed,
                    record_key,
                    chunk,
                    *[self.parts[i] for i in idx],
                    workers=[worker] if worker else None,
                    allow_other_workers=True,
                )
                for group_counted, (worker, idx) in zip(counted, groups, strict=True)
            ]
            core.subtract_counts(
                counts, _tree_reduce(client, dropped, core.add_counts, on_workers=True)
            )
        return counts, allowed

    def _groups(self) -> list[tuple[str, list[int]]]:
        """The partitions grouped by the worker holding them (in partition order within a
        group): one counting task per worker; from the session's :class:`Placement` when the
        backend has one. A worker lost since then only moves its tasks
        (``allow_other_workers``). Grouping never changes a result."""
        if self.placement is not None:
            return self.placement.groups(self.client, self.parts)
        return _placed_groups(self.client, self.parts)

    def map_reduce(
        self, fn: Callable[..., Any], combine: Callable[[Any, Any], Any], /, **kwargs: Any
    ) -> Any:
        """``fn(records, **kwargs)`` over all partitions, combined pairwise on the workers
        (:class:`sds_core.evaluation.partitioned.MapReduce`): one task per worker over the
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
                for worker, idx in self._groups()
            ]
            try:
                return _tree_reduce(self.client, futures, combine, on_workers=True)
            except DaskClusterError:
                if attempt == 2 or shared.status == "finished":
                    raise  # the partitions were lost, not the kwargs
        raise SdsInternalError("map_reduce: no attempt returned (bug)")

    def exact_aggregates(self, reporting_length: int) -> AggregateSet:
        """Exact aggregates per partition, summed."""
        parts = self.client.map(
            core.partition_exact,
            self.parts,
            reporting_length=reporting_length,
            chunk=self.chunk_records,
        )
        result: AggregateSet = _tree_reduce(
            self.client, parts, core.add_aggregates, on_workers=True
        )
        return result


GROUP_RECORDS = 2_000_000
"""The most records one :meth:`DaskBackend.map_reduce` call concatenates (memory bound only)."""


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


def _fewer_groups(
    groups: list[tuple[str, list[int]]], sizes: NDArray[np.int64], most: int
) -> list[tuple[str, list[int]]]:
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


def _first_rows(table: Any, n: int) -> Any:
    """The first ``n`` rows of an Arrow table (a part cut by ``record_limit``)."""
    return table.slice(0, n)


def _part_summary(table: PreparedTable | None) -> tuple[PartDomain | None, int]:
    """A prepared partition's labels and record count (what the driver needs to merge the
    domain and number the rows)."""
    if table is None:
        return None, 0
    return (table.domain, table.multi_value_columns), table.n_records


def _part_files(path: str | Sequence[str]) -> list[str] | None:
    """The part files of a local Parquet dataset in read order (a directory or glob:
    :func:`release_store.inputs.paths.dataset_files`, as ``sds release`` reads it; one file; a list
    of files as given); None for anything else (remote, partitioned directories: Dask reads
    those)."""
    from release_store.inputs.paths import dataset_files

    if not isinstance(path, str):
        files = [str(f) for f in path]
        return files if files and all(os.path.isfile(f) for f in files) else None
    if "://" in path:
        return None
    if os.path.isfile(path):
        return [path]
    try:
        found = dataset_files(path)
    except SdsInputError:
        return None
    return None if found is None else [str(f) for f in found]


def _read_parquet_file(path: str) -> Any:
    """On a worker: one Parquet part file as an Arrow table."""
    import pyarrow.parquet as pq

    return pq.read_table(path)


def _parquet_rows(files: Sequence[str]) -> list[int]:
    """Each part file's row count, from its footer."""
    import pyarrow.parquet as pq

    return [int(pq.read_metadata(f).num_rows) for f in files]


def _subject_key(value: Any) -> str:
    """The subject id as :func:`prepare` compares it (missing: empty, refused by prepare)."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return match_key(cell_text(value))


def _head(client: Any, ddf: Any, n: int) -> Any:
    """The first ``n`` rows of a Dask frame, partitioned as before (lengths counted once)."""
    import dask.dataframe as dd

    lengths = client.compute(ddf.map_partitions(len)).result().tolist()
    keep, left = [], n
    for i, length in enumerate(lengths):
        if left <= 0:
            break
        part = ddf.get_partition(i)
        keep.append(part if length <= left else part.head(left, compute=False, npartitions=1))
        left -= length
    return dd.concat(keep) if len(keep) > 1 else keep[0]  # type: ignore[no-untyped-call]
