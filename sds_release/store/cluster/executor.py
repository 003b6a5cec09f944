"""The Dask executor: the release's data work on a ``distributed`` cluster
(``executor = "dask"``).

:meth:`DaskExecutor.session` connects before anything is charged (a bad address is refused
there) and closes the client (and an embedded ``LocalCluster``) when the release ends. The input
is Arrow parts on the workers (:mod:`sds_release.store.cluster.inputs`), the prepared and synthetic
records :class:`~sds_release.store.cluster.table.ClusterTable`\\ s sharing the executor's
:class:`~sds_release.store.cluster.table.Placement`; the driver holds futures, labels and sums.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from sds_core.data.params import PrepareParams
from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.errors import SdsInputError
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.backend import CountingBackend
from sds_core.synthesis.consistent import AggregateNoise, ModelParams
from sds_core.synthesis.params import SynthesisParams
from sds_release.store.cluster import synthesis
from sds_release.store.cluster.backend import DaskBackend
from sds_release.store.cluster.gate import validate_chunks, validate_parts
from sds_release.store.cluster.inputs import (
    DaskInput,
    column_numbers,
    open_input,
    subject_conflicts,
    zero_counts_shares,
)
from sds_release.store.cluster.preparation import fingerprint_parts, prepare_parts
from sds_release.store.cluster.table import ClusterTable, Placement
from sds_release.store.config.core_objects import gate_columns
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.config.schema import TableSchema
from sds_release.store.inputs.objects import LISTING_FILE
from sds_release.store.run.release_run import ReleaseRun
from sds_release.store.workspace.encoding import chunk_bounds

__all__ = ["ADDRESS_ENV", "CONNECT_TIMEOUT_S", "DaskExecutor", "connect"]

ADDRESS_ENV = "SDS_DASK_ADDRESS"
CONNECT_TIMEOUT_S = 10.0


def connect(address: str | None, *, timeout: float = CONNECT_TIMEOUT_S) -> Any:
    """A ``distributed.Client``: to the scheduler at ``address`` (else ``$SDS_DASK_ADDRESS``), or
    to an embedded ``LocalCluster`` sized to the machine when neither is set.

    Raises:
        SdsInputError: the address is malformed or no scheduler answers there within
            ``timeout`` seconds (raised before the release reads or charges anything).
    """
    from distributed import Client, LocalCluster

    address = address or os.environ.get(ADDRESS_ENV) or None
    if address is None:
        cluster = LocalCluster(  # type: ignore[no-untyped-call]
            processes=True, threads_per_worker=1, dashboard_address=None
        )
        return Client(cluster)  # type: ignore[no-untyped-call]
    if "://" not in address and ":" not in address:
        raise SdsInputError(
            f"dask_address {address!r} is not a scheduler address; give it as tcp://host:8786 "
            f"(--dask-address or ${ADDRESS_ENV})"
        )
    try:
        return Client(address, timeout=timeout)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as e:
        raise SdsInputError(
            f"no Dask scheduler answers at dask_address {address!r} ({type(e).__name__}: {e}); "
            "start one (`dask scheduler` and `dask worker <address>`), fix --dask-address / "
            f"${ADDRESS_ENV}, or drop it for an embedded LocalCluster"
        ) from e


@dataclass(eq=False)
class DaskExecutor:
    """One release's cluster (:class:`~sds_release.store.executor.base.Executor`).

    Args:
        client: the ``distributed.Client``.
        partitions: ``dask_partitions``: CSV blocks to read (None: from the file's size).
        placement: where the workers hold each set of partitions, asked once for the whole
            release and shared by every table the executor makes.
    """

    name: ClassVar[str] = "dask"
    preflight_reads_rows: ClassVar[bool] = False

    client: Any
    partitions: int | None = None
    placement: Placement = field(default_factory=Placement)

    @classmethod
    @contextmanager
    def session(cls, params: ReleaseParams) -> Iterator[DaskExecutor]:
        """Connect (a bad address raises here, before the release charges anything), run the
        release, then close the client (and an embedded cluster)."""
        client = connect(params.dask_address)
        try:
            yield cls(client, params.dask_partitions)
        finally:
            embedded = getattr(client, "cluster", None)
            client.close()
            if embedded is not None:
                embedded.close()

    def read_input(
        self, params: ReleaseParams, *, private_dir: Path | None = None
    ) -> tuple[DaskInput, str]:
        """The Parquet dataset, CSV file or ``s3://`` objects ``params.input`` names, read on
        the workers (objects: listed here, each read by a worker)."""
        return open_input(
            self.client,
            params.input,
            delimiter=params.delimiter,
            gate_columns=gate_columns(params),
            partitions=self.partitions,
            listing=None if private_dir is None else private_dir / LISTING_FILE,
        )

    def held(self, data: DaskInput | ClusterTable, what: str) -> str:
        """How many parts (chunks) the workers hold."""
        return f" in {len(data.parts)} {what} on the Dask workers"

    def validate_input(
        self, data: DaskInput, schema: TableSchema, *, private_dir: Path
    ) -> list[dict[str, Any]]:
        """The gate's checks on every part, on the workers."""
        return validate_parts(data, schema, private_dir=private_dir)

    def first_rows(self, data: DaskInput, limit: int | None) -> DaskInput:
        """:meth:`DaskInput.first_rows`."""
        return data.first_rows(limit)

    def column_numbers(
        self, data: DaskInput, columns: Sequence[str], subject_id: str | None
    ) -> dict[str, NDArray[np.float64]]:
        """One float64 column at a time reaches the driver, never the table."""
        return {name: column_numbers(data, name, subject_id) for name in columns}

    def zero_shares(
        self, data: DaskInput, *, use_columns: Sequence[str], sensitive_zeros: Sequence[str]
    ) -> dict[str, float]:
        """From each part's counts."""
        return zero_counts_shares(data, use_columns=use_columns, sensitive_zeros=sensitive_zeros)

    def subject_conflicts(
        self, data: DaskInput, params: PrepareParams, columns: Sequence[str]
    ) -> list[str]:
        """The conflicts in ``columns`` (the DP-binned ones), from each part's subjects."""
        return subject_conflicts(data, params, columns)

    def label_counts(self, data: DaskInput, params: PrepareParams) -> None:
        """Not known before the workers prepare the parts: the count stage checks the sizes
        on the prepared domain."""
        return None

    def prepare(self, data: DaskInput, params: PrepareParams) -> ClusterTable:
        """Prepared on the workers, the domain merged here (labels only)."""
        return prepare_parts(data, params).placed(self.placement)

    def fingerprint(self, table: ClusterTable) -> str:
        """Hashed a partition at a time."""
        return fingerprint_parts(table)

    def counting_backend(self, table: ClusterTable) -> CountingBackend:
        """:class:`~sds_release.store.cluster.backend.DaskBackend` of the table."""
        return DaskBackend(table.placed(self.placement))

    def synthesize(
        self,
        aggregates: AggregateSet,
        params: SynthesisParams,
        *,
        rng: np.random.Generator,
        multi_value_columns: tuple[MultiValueColumn, ...],
        part_records: int | None,
        progress: Callable[[int, int], None] | None,
        noise_sd_by_len: Sequence[float] | None,
    ) -> ClusterTable:
        """SDS's batches on the workers; with ``reconcile_one_way`` reconciled on one worker."""
        make = (
            synthesis.synthesize_reconciled
            if params.reconcile_one_way
            else synthesis.synthesize_on_cluster
        )
        records = make(
            self.client,
            aggregates,
            params,
            rng=rng,
            multi_value_columns=multi_value_columns,
            part_records=part_records,
            progress=progress,
            noise_sd_by_len=noise_sd_by_len,
        )
        return records.placed(self.placement)

    def sample_model(
        self,
        aggregates: AggregateSet,
        noise: AggregateNoise,
        n: int | None,
        *,
        rng: np.random.Generator,
        params: ModelParams,
        multi_value_columns: tuple[MultiValueColumn, ...],
        part_records: int | None,
    ) -> ClusterTable:
        """The model fitted and sampled on one worker."""
        records = synthesis.sample_model_on_cluster(
            self.client,
            aggregates,
            noise,
            n,
            rng=rng,
            params=params,
            multi_value_columns=multi_value_columns,
            part_records=part_records,
        )
        return records.placed(self.placement)

    def checkpointed(
        self, run: ReleaseRun, stage: str, make: Callable[[], ClusterTable]
    ) -> ClusterTable:
        """The records checkpointed chunk by chunk (:class:`~sds_release.store.cluster.synthesis.
        StoredSynthetic`); a resumed release sends the checkpoint's chunks back to the workers
        (nothing drawn twice), or the whole table a release checkpointed before the model's and
        the reconciled records were made on the workers."""
        made: list[ClusterTable] = []

        def compute() -> synthesis.StoredSynthetic:
            records = make()
            made.append(records)
            return synthesis.StoredSynthetic.save(records, run.dirs.checkpoint_dir, stage)

        stored: synthesis.StoredSynthetic | PreparedTable = run.stage(stage, compute)
        if made:
            return made[0]
        if isinstance(stored, PreparedTable):  # a whole table, made on the driver before
            return self.hold(stored, run.params.synthetic_part_records)
        return stored.load(self.client, run.dirs.checkpoint_dir).placed(self.placement)

    def whole_table(self, table: ClusterTable) -> PreparedTable:
        """The partitions gathered here."""
        return table.gathered()

    def hold(self, table: PreparedTable, part_records: int | None) -> ClusterTable:
        """Sent to the workers in the chunks the cluster's own synthesis makes, one at a time:
        every later stage reads them there, and this process stops holding them."""
        bounds = chunk_bounds(table.n_records, part_records)
        return ClusterTable.scatter(self.client, table, bounds, placement=self.placement)

    def validate_output(
        self, records: ClusterTable, schema: TableSchema, *, private_dir: Path
    ) -> list[dict[str, Any]]:
        """The gate's checks on every chunk, on the workers."""
        return validate_chunks(records, schema, private_dir=private_dir)

    def chunks(self, records: ClusterTable, part_records: int | None) -> Iterator[PreparedTable]:
        """The chunks (already at the chunk bounds) brought here one at a time."""
        return records.chunks()
