"""The executor interface: where a release's data work runs, chosen once per release.

The flow resolves one executor from the parameters (``executor = "local" | "dask"``) before
anything is charged and hands it to every stage; the stages never ask which one it is. An
executor reads and gates the input, cuts it to ``record_limit``, gives the DP binning its
numbers, prepares it, serves the counting backend, synthesizes and checkpoints the records,
gates them, and gives the published files their records a chunk at a time. It keeps two kinds of
data where it runs: the raw input (its ``Input``) and prepared records, sensitive or synthetic
(its ``Records``). The evaluation and the synthetic files have one implementation over any
executor's records (:func:`sds_core.evaluation.release.evaluate_release`,
:func:`sds_release.store.publish.synthetic.write_synthetic`): a table here is one partition.

A third executor (Spark, say) is one more package implementing :class:`Executor`, and one more
name in the flow's registry (``sds_release/flows/release.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.data.params import PrepareParams
from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.backend import CountingBackend
from sds_core.synthesis.consistent import AggregateNoise, ModelParams
from sds_core.synthesis.params import SynthesisParams
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.config.schema import TableSchema
from sds_release.store.run.release_run import ReleaseRun

__all__ = ["Executor", "InputTable", "Records"]


class InputTable(Protocol):
    """The raw input as an executor read it (an Arrow table here, Arrow parts on workers)."""

    @property
    def column_names(self) -> list[str]:
        """The input's column names."""
        ...

    @property
    def num_rows(self) -> int:
        """The input's row count (sensitive)."""
        ...


class Records(Protocol):
    """Prepared records where an executor holds them (a ``PreparedTable`` here, partitions on
    workers): the sensitive table or the synthetic records. The evaluation and the agreement
    read them as a table or through ``map_reduce``
    (:class:`sds_core.evaluation.records.Partitions`)."""

    @property
    def domain(self) -> Domain:
        """The domain the records are coded in."""
        ...

    @property
    def n_records(self) -> int:
        """The record count."""
        ...

    @property
    def multi_value_columns(self) -> tuple[MultiValueColumn, ...]:
        """The records' multi-value column declarations."""
        ...


InputT = TypeVar("InputT", bound=InputTable)
RecordsT = TypeVar("RecordsT", bound=Records)


class Executor(Protocol[InputT, RecordsT]):
    """Where one release's data work runs; the stage order is the flow's, the DP logic the
    core's. Every method returns the same values (and the release the same bytes) whichever
    executor runs it: the tests compare them."""

    name: ClassVar[str]
    """The ``executor`` parameter's value that selects it."""
    preflight_reads_rows: ClassVar[bool]
    """Whether ``sds release``'s pre-flight read the input's rows (then it already warned the
    terminal about ``"0"`` cells) or only its column names."""

    # --- ingest, validate ----------------------------------------------------------------------
    def read_input(
        self, params: ReleaseParams, *, private_dir: Path | None = None
    ) -> tuple[InputT, str]:
        """The input (the gate's columns only) and its sha256, as ``params`` name it; an
        ``s3://`` input's object list goes to ``private_dir`` (its identity, private)."""
        ...

    def held(self, data: InputT | RecordsT, what: str) -> str:
        """Where ``data`` is, for the stage log: ``""`` here, else e.g. ``" in 3 parts on the
        Dask workers"`` (``what``: "parts" or "chunks")."""
        ...

    def validate_input(
        self, data: InputT, schema: TableSchema, *, private_dir: Path
    ) -> list[dict[str, Any]]:
        """The input gate: the public summary; the full results go to ``private_dir``.

        Raises:
            SchemaValidationError: a check failed (nothing charged yet).
        """
        ...

    # --- the record limit, DP bins, prepare ----------------------------------------------------
    def first_rows(self, data: InputT, limit: int | None) -> InputT:
        """The input's first ``limit`` rows (``record_limit``; None: all): the one cut."""
        ...

    def column_numbers(
        self, data: InputT, columns: Sequence[str], subject_id: str | None
    ) -> dict[str, NDArray[np.float64]]:
        """What the DP quantile mechanism reads of each column: its numbers, one per subject
        (its smallest) with ``subject_id``."""
        ...

    def zero_shares(
        self, data: InputT, *, use_columns: Sequence[str], sensitive_zeros: Sequence[str]
    ) -> dict[str, float]:
        """:func:`sds_core.data.zeros.zero_shares` of the input."""
        ...

    def subject_conflicts(
        self, data: InputT, params: PrepareParams, columns: Sequence[str]
    ) -> list[str]:
        """The columns some subject's rows disagree on, as the subject join would find them
        (checked before the binning charge): at least ``columns`` (the DP-binned ones)."""
        ...

    def label_counts(self, data: InputT, params: PrepareParams) -> Sequence[tuple[str, int]] | None:
        """Each column preparation will code and how many values it will hold
        (:func:`sds_core.data.preparation.label_counts`), or None when the executor learns
        them only by preparing (the count stage then checks the prepared domain)."""
        ...

    def prepare(self, data: InputT, params: PrepareParams) -> RecordsT:
        """:func:`sds_core.data.preparation.prepare` of the input, held by the executor."""
        ...

    def fingerprint(self, table: RecordsT) -> str:
        """:func:`sds_core.data.decoding.fingerprint` of the prepared records."""
        ...

    # --- count, aggregate-k --------------------------------------------------------------------
    def counting_backend(self, table: RecordsT) -> CountingBackend:
        """The DP engine's counting backend over the prepared records."""
        ...

    # --- synthesize, fit -----------------------------------------------------------------------
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
    ) -> RecordsT:
        """:func:`sds_core.synthesis.generator.synthesize`'s records, byte for byte."""
        ...

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
    ) -> RecordsT:
        """:func:`sds_core.synthesis.consistent.synthesize_from_model`'s records, byte for
        byte."""
        ...

    def checkpointed(self, run: ReleaseRun, stage: str, make: Callable[[], RecordsT]) -> RecordsT:
        """``run.stage(stage, make)`` for records: a resumed release gets the checkpointed
        records back where the executor holds records, nothing drawn twice."""
        ...

    def whole_table(self, table: RecordsT) -> PreparedTable:
        """The records as one table in this process (a registry synthesizer fits the whole
        table; the SDS stages never need this)."""
        ...

    def hold(self, table: PreparedTable, part_records: int | None) -> RecordsT:
        """Records made in this process (a registry synthesizer's) held where the executor
        holds records."""
        ...

    # --- validate-output, publish --------------------------------------------------------------
    def validate_output(
        self, records: RecordsT, schema: TableSchema, *, private_dir: Path
    ) -> list[dict[str, Any]]:
        """The output gate on the synthetic records (the input gate's summary and refusal)."""
        ...

    def chunks(self, records: RecordsT, part_records: int | None) -> Iterator[PreparedTable]:
        """The records in this process one chunk at a time, in row order, cut at
        :func:`~sds_release.store.workspace.encoding.chunk_bounds` (what the writer streams)."""
        ...
