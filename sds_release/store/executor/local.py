"""The local executor: the release's data work in this process (``executor = "local"``).

The input is one Arrow table, the prepared and synthetic records ``PreparedTable``s; every
method is the core's call itself (:mod:`sds_core`), the gate the Great Expectations suite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from sds_core.data.params import PrepareParams
from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.backend import CountingBackend, LocalBackend
from sds_core.synthesis.consistent import AggregateNoise, ModelParams
from sds_core.synthesis.params import SynthesisParams
from sds_release.store.config.core_objects import gate_columns
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.config.schema import TableSchema
from sds_release.store.inputs.gate import validate_table
from sds_release.store.inputs.ingest import read_release_input
from sds_release.store.inputs.objects import LISTING_FILE
from sds_release.store.inputs.periods import PeriodFilter
from sds_release.store.run.release_run import ReleaseRun
from sds_release.store.workspace.encoding import chunk_bounds

__all__ = ["LocalExecutor"]


class LocalExecutor:
    """Everything in this process: the input an Arrow table, the records ``PreparedTable``s
    (:class:`~sds_release.store.executor.base.Executor`)."""

    name: ClassVar[str] = "local"
    preflight_reads_rows: ClassVar[bool] = True

    @classmethod
    @contextmanager
    def session(cls, params: ReleaseParams) -> Iterator[LocalExecutor]:
        """The executor for one release (nothing to connect or close)."""
        yield cls()

    def read_input(
        self, params: ReleaseParams, *, private_dir: Path | None = None
    ) -> tuple[pa.Table, str]:
        """The file, dataset, PostgreSQL table or ``s3://`` objects ``params.input`` names,
        read here (a period's rows only with ``period``)."""
        return read_release_input(
            params.input,
            delimiter=params.delimiter,
            gate_columns=gate_columns(params),
            period=PeriodFilter.of(params.period_column, params.period, params.period_format),
            table=params.table,
            query=params.query,
            listing=None if private_dir is None else private_dir / LISTING_FILE,
        )

    def held(self, data: Any, what: str) -> str:
        """In this process: nothing to say."""
        return ""

    def validate_input(
        self, data: pa.Table, schema: TableSchema, *, private_dir: Path
    ) -> list[dict[str, Any]]:
        """The Great Expectations gate on the table."""
        return validate_table(data, schema, name="input", private_dir=private_dir)

    def first_rows(self, data: pa.Table, limit: int | None) -> pa.Table:
        """The table's first ``limit`` rows (a zero-copy slice)."""
        return data.slice(0, limit) if limit else data

    def column_numbers(
        self, data: pa.Table, columns: Sequence[str], subject_id: str | None
    ) -> dict[str, NDArray[np.float64]]:
        """Each column's cells parsed as pandas ``to_numeric`` does (non-numbers dropped), or
        with ``subject_id`` each subject's smallest."""
        import pandas as pd

        from sds_core.data.text import matching_column
        from sds_core.dp.quantiles import subject_numbers

        subjects = None
        if subject_id is not None:
            subjects = data.column(matching_column(data.column_names, subject_id)).to_pylist()
        out = {}
        for name in columns:
            raw = data.column(name).to_pylist()
            values = pd.to_numeric(pd.Series(raw, dtype="string"), errors="coerce")
            parsed = values.to_numpy(dtype=np.float64, na_value=np.nan)
            if subject_id is None or subjects is None:
                out[name] = parsed[~np.isnan(parsed)]
            else:
                out[name] = subject_numbers(parsed, subjects, subject_column=subject_id)[1]
        return out

    def zero_shares(
        self, data: pa.Table, *, use_columns: Sequence[str], sensitive_zeros: Sequence[str]
    ) -> dict[str, float]:
        """:func:`sds_core.data.zeros.zero_shares` of the table."""
        from sds_core.data.zeros import zero_shares

        return zero_shares(data, use_columns=use_columns, sensitive_zeros=sensitive_zeros)

    def subject_conflicts(
        self, data: pa.Table, params: PrepareParams, columns: Sequence[str]
    ) -> list[str]:
        """Every single-value column's conflicts
        (:func:`sds_core.data.preparation.subject_values`)."""
        from sds_core.data.preparation import subject_values

        return subject_values(data, params).conflicts()

    def label_counts(self, data: pa.Table, params: PrepareParams) -> Sequence[tuple[str, int]]:
        """:func:`sds_core.data.preparation.label_counts` of the table."""
        from sds_core.data.preparation import label_counts

        return label_counts(data, params)

    def prepare(self, data: pa.Table, params: PrepareParams) -> PreparedTable:
        """:func:`sds_core.data.preparation.prepare` of the table."""
        from sds_core.data.preparation import prepare

        return prepare(data, params)

    def fingerprint(self, table: PreparedTable) -> str:
        """:func:`sds_core.data.decoding.fingerprint` of the table."""
        from sds_core.data.decoding import fingerprint

        return fingerprint(table)

    def counting_backend(self, table: PreparedTable) -> CountingBackend:
        """The in-process backend (:class:`sds_core.marginals.backend.LocalBackend`)."""
        return LocalBackend(table)

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
    ) -> PreparedTable:
        """:func:`sds_core.synthesis.generator.synthesize` here."""
        from sds_core.synthesis.generator import synthesize

        return synthesize(
            aggregates,
            params,
            rng=rng,
            multi_value_columns=multi_value_columns,
            progress=progress,
            noise_sd_by_len=noise_sd_by_len,
        )

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
    ) -> PreparedTable:
        """:func:`sds_core.synthesis.consistent.synthesize_from_model` here."""
        from sds_core.synthesis.consistent import synthesize_from_model

        return synthesize_from_model(
            aggregates, noise, n, rng=rng, params=params, multi_value_columns=multi_value_columns
        )

    def checkpointed(
        self, run: ReleaseRun, stage: str, make: Callable[[], PreparedTable]
    ) -> PreparedTable:
        """The stage's checkpoint is the table itself."""
        return run.stage(stage, make)

    def whole_table(self, table: PreparedTable) -> PreparedTable:
        """The table itself."""
        return table

    def hold(self, table: PreparedTable, part_records: int | None) -> PreparedTable:
        """The table itself."""
        return table

    def validate_output(
        self, records: PreparedTable, schema: TableSchema, *, private_dir: Path
    ) -> list[dict[str, Any]]:
        """The Great Expectations gate on the records' published text."""
        from sds_core.data.decoding import to_frame

        frame = to_frame(records, empty_value="", join_multi_value_columns=True)
        return validate_table(frame, schema, name="output", private_dir=private_dir, what="output")

    def chunks(self, records: PreparedTable, part_records: int | None) -> Iterator[PreparedTable]:
        """The table's rows at the chunk bounds (views)."""
        for lo, hi in chunk_bounds(records.n_records, part_records):
            codes = records.codes[lo:hi]
            yield PreparedTable(records.domain, codes, records.multi_value_columns)
