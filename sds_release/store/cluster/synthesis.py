"""The synthetic records on the Dask workers: their synthesis and their checkpoint.

With ``--executor dask`` the synthesize stage leaves its records on the workers as the final
(shuffled) table cut into chunks (:func:`~sds_release.store.workspace.encoding.chunk_bounds`), a
:class:`~sds_release.store.cluster.table.ClusterTable`; the checkpoint is one file per chunk,
written by the driver while it holds ONE chunk (:class:`StoredSynthetic`). The output gate
(:mod:`sds_release.store.cluster.gate`), the evaluation's and the agreement's sums read the chunks
on the workers; publish streams them into the same files as locally
(:mod:`sds_release.store.publish.synthetic`).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import io
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.errors import SdsInputError, SdsInternalError, invariant
from sds_core.marginals.aggregates import AggregateSet
from sds_core.synthesis.consistent import (
    AggregateNoise,
    ModelParams,
    ModelProblem,
    model_problem,
    published_values,
    synthesize_from_problem,
)
from sds_core.synthesis.generator import BatchJob, SynthesisPlan, batch_codes, plan_synthesis
from sds_core.synthesis.params import SynthesisParams
from sds_core.synthesis.reconcile import reconcile_one_way
from sds_release.store.cluster.table import ClusterTable
from sds_release.store.workspace.encoding import chunk_bounds
from sds_release.store.workspace.files import atomic_write_bytes, sha256_file


# ---------------------------------------------------------------- synthesis
def synthesize_on_cluster(
    client: Any,
    aggregates: AggregateSet,
    params: SynthesisParams,
    *,
    rng: np.random.Generator,
    multi_value_columns: tuple[MultiValueColumn, ...],
    part_records: int | None,
    progress: Callable[[int, int], None] | None = None,
    noise_sd_by_len: Sequence[float] | None = None,
    sent_aggregates: Any = None,
) -> ClusterTable:
    """:func:`~sds_core.synthesis.generator.synthesize` with its records left on the workers.

    The same batches, batch seeds and shuffle (``rng.permutation`` of all records, drawn here
    after the batch seeds, as locally): chunk ``[lo, hi)`` of the result holds the local table's
    rows ``lo..hi-1``. The permutation is drawn on a worker from a copy of ``rng``, so no
    per-record array reaches the driver, and every chunk is a task graph the cluster can
    recompute; ``rng`` is left in the state the local run's shuffle leaves it (what
    :func:`synthesize_reconciled` reconciles with). Not for ``reconcile_one_way`` (it reads the
    whole table: :func:`synthesize_reconciled`). ``progress(done, target)`` is called as batches
    finish (records of the finished batches). ``noise_sd_by_len``: as for ``synthesize`` (the
    matching's tolerance). ``sent_aggregates``: ``aggregates`` already on the cluster as the
    future of a task (:func:`send_aggregates`), for a caller whose own tasks read them too.
    """
    if params.reconcile_one_way:
        raise SdsInternalError("synthesize_on_cluster: reconcile_one_way needs the whole table")
    domain = aggregates.domain
    # the plan is built on a worker, from the aggregates, by a task (not scattered data, which
    # is lost with the one worker holding it: a worker restarted mid-release may have missed a
    # broadcast), so that every chunk can be recomputed from its tasks; its layout (hundreds of
    # MB at millions of DP combinations) never reaches the driver, which reads the batch count
    # and targets only
    sent = aggregates if sent_aggregates is None else sent_aggregates
    planned = client.submit(plan_synthesis, sent, params, noise_sd_by_len, pure=False)
    n_batches, target, targets = client.submit(_plan_shape, planned, pure=False).result()
    job = client.submit(_plan_job, planned, pure=False)
    del planned
    if n_batches == 1:  # the run draws from rng itself: its state comes back with the codes
        first = client.submit(_batch_and_state, job, rng, target, domain, pure=False)
        batches = [client.submit(_first, first, pure=False)]
        rng.bit_generator.state = client.submit(_second, first, pure=False).result()
    else:
        rngs = rng.spawn(n_batches)
        batches = client.map(
            batch_codes, [job] * n_batches, rngs, targets, domain=domain, pure=False
        )
    if progress is not None and target is not None:
        from distributed import as_completed

        wanted = dict(zip((b.key for b in batches), targets, strict=True))
        made = 0
        for finished in as_completed(batches):  # type: ignore[no-untyped-call]
            made += wanted.get(finished.key) or 0
            progress(made, target)
    sizes = [int(s) for s in client.gather(client.map(len, batches))]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(starts[-1])
    # the shuffle drawn on a worker from a copy of the generator: a task, not scattered data,
    # so a chunk lost with its worker is recomputed from its tasks
    shuffled = client.submit(_permutation, copy.deepcopy(rng), n, pure=False)
    rng.bit_generator.state = client.submit(_second, shuffled, pure=False).result()
    bounds = chunk_bounds(n, part_records)
    chunks = []
    for lo, hi in bounds:
        src = client.submit(_slice, shuffled, lo, hi, pure=False)
        pieces = [
            client.submit(_take, batch, src, int(starts[b]), int(starts[b + 1]))
            for b, batch in enumerate(batches)
        ]
        chunks.append(
            client.submit(_assemble, hi - lo, domain, multi_value_columns, *pieces, pure=False)
        )
    del batches
    return ClusterTable(
        client, tuple(chunks), tuple(lo for lo, _ in bounds), domain, n, multi_value_columns
    )


def synthesize_reconciled(
    client: Any,
    aggregates: AggregateSet,
    params: SynthesisParams,
    *,
    rng: np.random.Generator,
    multi_value_columns: tuple[MultiValueColumn, ...],
    part_records: int | None,
    progress: Callable[[int, int], None] | None = None,
    noise_sd_by_len: Sequence[float] | None = None,
) -> ClusterTable:
    """:func:`~sds_core.synthesis.generator.synthesize` with ``reconcile_one_way``, its records
    left on the workers: the chunks of :func:`synthesize_on_cluster`, written into one table on
    ONE worker and reconciled there (it reads the whole table), from a copy of ``rng`` in the
    state the local run reconciles with; then cut into the chunks :func:`chunk_bounds` gives,
    on the workers. The same bytes as the local table; no record reaches this process."""
    sent = send_aggregates(client, aggregates)  # read by the plan's task and the reconciliation
    chunked = synthesize_on_cluster(
        client,
        aggregates,
        dataclasses.replace(params, reconcile_one_way=False),
        rng=rng,
        multi_value_columns=multi_value_columns,
        part_records=None,
        progress=progress,
        noise_sd_by_len=noise_sd_by_len,
        sent_aggregates=sent,
    )
    # a task, not scattered data: a whole table lost with its worker is made again from its
    # tasks (the chunks' and this one, whose generator is pickled by value)
    whole = client.submit(
        _reconciled,
        sent,
        copy.deepcopy(rng),
        chunked.n_records,
        multi_value_columns,
        *chunked.parts,
        pure=False,
    )
    n = chunked.n_records
    del chunked
    return _chunked_on_workers(
        client, whole, n, aggregates.domain, multi_value_columns, part_records
    )


def send_aggregates(client: Any, aggregates: AggregateSet) -> Any:
    """The aggregates on the cluster as the future of a task returning them, for several tasks
    to read: a task's arguments stay in the scheduler while what was computed from it may be
    recomputed (the chunks' lineage), and the embedded scheduler is this process, so every
    task given the aggregates themselves held its own pickled copy here (~100 MiB at 5.27M
    combinations, to the end of the release). A task, not scattered data: lost with its worker,
    it is computed again."""
    return client.submit(_same, aggregates, pure=False)


def _same(value: Any) -> Any:
    """On a worker: ``value`` itself (see :func:`send_aggregates`)."""
    return value


def sample_model_on_cluster(
    client: Any,
    aggregates: AggregateSet,
    noise: AggregateNoise,
    n: int | None,
    *,
    rng: np.random.Generator,
    params: ModelParams,
    multi_value_columns: tuple[MultiValueColumn, ...],
    part_records: int | None,
) -> ClusterTable:
    """:func:`~sds_core.synthesis.consistent.synthesize_from_model` with its fit and sampling
    on ONE worker (one sequential draw from ``rng``, copied there with its state: the local
    records byte for byte), its table cut into the chunks :func:`chunk_bounds` gives, on the
    workers; no record reaches this process, which draws nothing more from ``rng``.

    The model's problem (:func:`~sds_core.synthesis.consistent.model_problem`: post-processing,
    no draw) is built here, from the aggregates this process holds, and the task is sent the
    problem, the domain and the published values, not the aggregates: the scheduler keeps a
    task's arguments while the chunks computed from it may be recomputed, to the end of the
    release, and the embedded scheduler is this process (the problem is bounded by the model's
    cells: ~10 MiB pickled at 5.26M combinations, where the aggregates were ~99 MiB)."""
    problem = model_problem(aggregates, noise, params)
    whole = client.submit(
        _sampled,
        problem,
        noise,
        aggregates.domain,
        published_values(aggregates),
        n,
        copy.deepcopy(rng),
        params,
        multi_value_columns,
        pure=False,
    )
    del problem
    made = int(client.submit(_n_records, whole, pure=False).result())
    return _chunked_on_workers(
        client, whole, made, aggregates.domain, multi_value_columns, part_records
    )


def _sampled(
    problem: ModelProblem,
    noise: AggregateNoise,
    domain: Domain,
    published: NDArray[np.bool_],
    n: int | None,
    rng: np.random.Generator,
    params: ModelParams,
    multi_value_columns: tuple[MultiValueColumn, ...],
) -> PreparedTable:
    """On a worker: the model's records (from a copy of ``rng``: a task run again draws the
    same), from the problem alone (never the aggregates: :func:`sample_model_on_cluster`)."""
    invariant(isinstance(problem, ModelProblem), "the model's task is sent its problem (bug)")
    return synthesize_from_problem(
        problem,
        noise,
        domain,
        published,
        n,
        rng=copy.deepcopy(rng),
        params=params,
        multi_value_columns=multi_value_columns,
    )


def _reconciled(
    aggregates: AggregateSet,
    rng: np.random.Generator,
    n: int,
    multi_value_columns: tuple[MultiValueColumn, ...],
    *parts: PreparedTable,
) -> PreparedTable:
    """On a worker: the chunks written into one table in row order (no list of chunks next
    to their concatenation), reconciled in place (from a copy of ``rng``)."""
    whole = np.empty((n, aggregates.domain.n_columns), dtype=np.int32)
    at = 0
    for part in parts:
        whole[at : at + part.n_records] = part.codes
        at += part.n_records
    invariant(at == n, "the chunks to reconcile miss records (bug)")
    table = PreparedTable(aggregates.domain, whole, multi_value_columns)
    return reconcile_one_way(table, aggregates, rng=copy.deepcopy(rng), in_place=True)


def _n_records(table: PreparedTable) -> int:
    return table.n_records


def _rows(table: PreparedTable, lo: int, hi: int) -> PreparedTable:
    """On a worker: rows ``lo..hi-1`` of a table as a table of their own (a copy: the chunk
    does not keep the whole table alive)."""
    return PreparedTable(table.domain, table.codes[lo:hi].copy(), table.multi_value_columns)


def _chunked_on_workers(
    client: Any,
    whole: Any,
    n: int,
    domain: Domain,
    multi_value_columns: tuple[MultiValueColumn, ...],
    part_records: int | None,
) -> ClusterTable:
    """The future of a whole table made on a worker cut there into the chunks
    :func:`chunk_bounds` gives (the whole table is released once they are made), then spread
    over the workers (``rebalance``: the later stages read the chunks where they are)."""
    from distributed import wait

    bounds = chunk_bounds(n, part_records)
    parts = [client.submit(_rows, whole, lo, hi, pure=False) for lo, hi in bounds]
    wait(parts)  # type: ignore[no-untyped-call]
    del whole
    client.rebalance(parts)
    return ClusterTable(
        client, tuple(parts), tuple(lo for lo, _ in bounds), domain, n, multi_value_columns
    )


def _plan_shape(plan: SynthesisPlan) -> tuple[int, int | None, list[int | None]]:
    """On a worker: the plan's batch count, record target and per-batch targets."""
    return plan.batches, plan.target, plan.targets


def _plan_job(plan: SynthesisPlan) -> BatchJob:
    """On a worker: the plan's batch job (the layout the batches share)."""
    return plan.job


def _permutation(rng: np.random.Generator, n: int) -> tuple[NDArray[np.int64], dict[str, Any]]:
    """On a worker: the local run's shuffle of the ``n`` records (same generator state), and
    the generator's state after it."""
    return rng.permutation(n), dict(rng.bit_generator.state)


def _slice(shuffled: tuple[NDArray[np.int64], Any], lo: int, hi: int) -> NDArray[np.int64]:
    """On a worker: the global rows chunk ``[lo, hi)`` takes."""
    return shuffled[0][lo:hi].copy()


def _batch_and_state(
    job: Any, rng: np.random.Generator, target: int | None, domain: Domain
) -> tuple[NDArray[np.int32], dict[str, Any]]:
    codes = batch_codes(job, rng, target, domain)
    return codes, dict(rng.bit_generator.state)


def _first(pair: tuple[Any, Any]) -> Any:
    return pair[0]


def _second(pair: tuple[Any, Any]) -> Any:
    return pair[1]


def _take(
    codes: NDArray[np.int32], src: NDArray[np.int64], start: int, stop: int
) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
    """On a worker: the rows of one batch (global rows ``start..stop-1``) a chunk takes, and
    where they go in the chunk."""
    mine = (src >= start) & (src < stop)
    return np.flatnonzero(mine), codes[src[mine] - start]


def _assemble(
    n: int,
    domain: Domain,
    multi_value_columns: tuple[MultiValueColumn, ...],
    *pieces: tuple[NDArray[np.int64], NDArray[np.int32]],
) -> PreparedTable:
    """On a worker: one chunk of the shuffled table from its batches' pieces."""
    codes = np.empty((n, domain.n_columns), dtype=np.int32)
    filled = 0
    for where, rows in pieces:
        codes[where] = rows
        filled += len(where)
    if filled != n:
        raise SdsInternalError(f"synthetic chunk of {n} records got {filled} (bug)")
    return PreparedTable(domain, codes, multi_value_columns)


# ---------------------------------------------------------------- checkpoint
@dataclass(frozen=True)
class StoredSynthetic:
    """The synthesize checkpoint of a Dask release: one ``.npy`` file of codes per chunk (in
    ``directory``, relative to the release's checkpoint folder; sha256 each), the chunks' first
    rows, the domain and the record count."""

    directory: str
    files: tuple[str, ...]
    sha256: tuple[str, ...]
    first_rows: tuple[int, ...]
    domain: Domain
    n_records: int
    multi_value_columns: tuple[MultiValueColumn, ...]

    @classmethod
    def save(cls, synthetic: ClusterTable, checkpoints: Path, directory: str) -> StoredSynthetic:
        """Write every chunk (gathered one at a time) as a private file in
        ``checkpoints/directory``."""
        names, hashes = [], []
        folder = checkpoints / directory
        for i, table in enumerate(synthetic.chunks()):
            buf = io.BytesIO()
            np.save(buf, table.codes, allow_pickle=False)
            name = f"chunk-{i:05d}.npy"
            atomic_write_bytes(folder / name, buf.getvalue(), private=True)
            names.append(name)
            hashes.append(sha256_file(folder / name))
            del table, buf
        return cls(
            directory,
            tuple(names),
            tuple(hashes),
            synthetic.first_rows,
            synthetic.domain,
            synthetic.n_records,
            synthetic.multi_value_columns,
        )

    def codes(self, checkpoints: Path) -> Iterator[NDArray[np.int32]]:
        """Each chunk's codes in row order, read one at a time and sha256-checked.

        Raises:
            SdsInputError: a chunk file is missing or does not match its recorded sha256.
        """
        for name, digest in zip(self.files, self.sha256, strict=True):
            path = checkpoints / self.directory / name
            data = path.read_bytes() if path.is_file() else b""
            if hashlib.sha256(data).hexdigest() != digest:
                raise SdsInputError(
                    f"synthesize checkpoint chunk {path} is missing or was modified; the "
                    "release cannot be resumed safely: cancel it (`sds cancel RELEASE_ID`) and "
                    "start a new release"
                )
            codes: NDArray[np.int32] = np.load(io.BytesIO(data), allow_pickle=False)
            yield codes

    def load(self, client: Any, checkpoints: Path) -> ClusterTable:
        """The chunks sent back to the workers one at a time (see :meth:`codes`)."""
        parts = []
        for codes in self.codes(checkpoints):
            table = PreparedTable(self.domain, codes, self.multi_value_columns)
            [future] = client.scatter([table], hash=False)
            parts.append(future)
            del codes, table
        return ClusterTable(
            client,
            tuple(parts),
            self.first_rows,
            self.domain,
            self.n_records,
            self.multi_value_columns,
        )

    def table(self, checkpoints: Path) -> PreparedTable:
        """The whole synthetic table in this process (what a local release checkpoints: the
        replay audit compares the two)."""
        codes = list(self.codes(checkpoints))
        whole = np.concatenate(codes) if codes else np.zeros((0, self.domain.n_columns), np.int32)
        return PreparedTable(self.domain, whole, self.multi_value_columns)
